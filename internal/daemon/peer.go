package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
)

// Carrier names the binding an instance sends with.
type Carrier string

// The carriers: A2A JSON-RPC (the default, decisions.md 13) and plain
// HTTPS (binding §7). Both are always served; Carrier picks the one used to
// send.
const (
	CarrierA2A   Carrier = "a2a"
	CarrierHTTPS Carrier = "https"
)

// PeerOptions tune the record engine and its delivery.
type PeerOptions struct {
	Carrier Carrier
	// Outbox tunes retries (zero values: the delivery package defaults).
	Outbox delivery.OutboxOptions
}

// Record is the Mounter that wires the transaction record: the record
// engine receiving through an inbox behind both carriers, sending through a
// durable outbox whose worker runs for the daemon's life, the mandates
// endpoint, and the record tools.
func Record(opt PeerOptions) Mounter {
	return func(ctx context.Context, d *Daemon) error {
		o := d.Org
		engine := record.New(o, record.Options{
			Mandates: record.HTTPMandates{Clients: o.Clients},
			IsQueued: func(err error) bool { return errors.Is(err, delivery.ErrQueued) },
		})
		inbox := delivery.NewInbox(o.Store, engine, delivery.InboxOptions{Keys: o.Trusted, Logger: d.Log})
		card := a2a.Card(a2a.CardOptions{OrganizationID: o.Config().OrganizationID, PublicURL: o.Config().PublicURL})
		a2aServer, err := a2a.NewServer(a2a.ServerConfig{Card: card, Clients: o.Clients, Receiver: inbox, Logger: d.Log})
		if err != nil {
			return err
		}
		a2aServer.Mount(d.peerMux)
		httpsServer, err := https.NewServer(https.ServerConfig{Clients: o.Clients, Inbox: inbox, Logger: d.Log})
		if err != nil {
			return err
		}
		httpsServer.Mount(d.peerMux)
		d.HandlePeer(record.MandatesPath, record.MandatesHandler(o.Store, o.Peers, d.Log))

		var transport delivery.Transport
		if opt.Carrier == CarrierHTTPS {
			transport, err = https.NewClient(https.ClientConfig{Clients: o.Clients, Logger: d.Log})
		} else {
			transport, err = a2a.NewClient(a2a.ClientConfig{Clients: o.Clients, Logger: d.Log})
		}
		if err != nil {
			return err
		}
		oo := opt.Outbox
		oo.Keys = o.Trusted
		oo.Logger = d.Log
		oo.OnDelivered = func(ctx context.Context, m store.OutboxMessage, reply [][]byte) {
			if ctx.Value(synchronous{}) != nil {
				return // the act that sent it handles the reply, holding its lock
			}
			engine.HandleReply(ctx, m.Peer, m.TransactionID, m.Objects, reply)
		}
		oo.OnFailed = func(ctx context.Context, m store.OutboxMessage, err error) {
			if ctx.Value(synchronous{}) != nil {
				return // the act that sent it removes itself
			}
			engine.HandleFailure(ctx, m.Peer, m.TransactionID, m.Objects, err)
		}
		outbox := delivery.NewOutbox(o.Store, transport, oo)
		engine.SetSender(sender{outbox})
		d.Engine = engine
		d.AddTools(mcp.RecordTools(engine)...)
		go func() {
			if err := outbox.Run(ctx); err != nil && ctx.Err() == nil {
				d.Log.Error("outbox worker stopped", "error", err)
			}
		}()
		go func() {
			// Formation a restart interrupted resumes once the listeners
			// are up; the outbox re-sends what was queued.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				engine.Resume(ctx)
			}
		}()
		return nil
	}
}

// sender adapts the outbox to record.Sender. The reply to a message
// delivered at its first attempt goes back to the act that sent it, which
// holds the transaction's lock; the context marks such a send so that the
// outbox callbacks leave it to the act. Later deliveries (by the worker)
// reach the engine through the callbacks.
type sender struct{ out *delivery.Outbox }

type synchronous struct{}

func (s sender) Send(ctx context.Context, peer, txn string, objects [][]byte) ([][]byte, error) {
	return s.out.Send(context.WithValue(ctx, synchronous{}, true), peer, txn, objects)
}
