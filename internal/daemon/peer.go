package daemon

import (
	"context"
	"time"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/record"
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
// engine, which owns its delivery (a durable outbox whose worker runs for
// the daemon's life, and the inbox behind both carriers), the mandates
// endpoint, and the record tools.
func Record(opt PeerOptions) Mounter {
	return func(ctx context.Context, d *Daemon) error {
		o := d.Org
		var transport delivery.Transport
		var err error
		if opt.Carrier == CarrierHTTPS {
			transport, err = https.NewClient(https.ClientConfig{Clients: o.Clients, Logger: d.Log})
		} else {
			transport, err = a2a.NewClient(a2a.ClientConfig{Clients: o.Clients, Logger: d.Log})
		}
		if err != nil {
			return err
		}
		reg, err := rails.Open(o.In.Dir, o.Config().Rails, o.Clock)
		if err != nil {
			return err
		}
		engine := record.New(o, record.Options{
			Transport: transport,
			Mandates:  record.HTTPMandates{Clients: o.Clients},
			Outbox:    opt.Outbox,
			Rails:     reg,
		})
		if err := engine.Start(ctx); err != nil {
			return err
		}
		card := a2a.Card(a2a.CardOptions{OrganizationID: o.Config().OrganizationID, PublicURL: o.Config().PublicURL})
		a2aServer, err := a2a.NewServer(a2a.ServerConfig{Card: card, Clients: o.Clients, Receiver: engine, Logger: d.Log})
		if err != nil {
			return err
		}
		a2aServer.Mount(d.peerMux)
		httpsServer, err := https.NewServer(https.ServerConfig{Clients: o.Clients, Inbox: engine, Logger: d.Log})
		if err != nil {
			return err
		}
		httpsServer.Mount(d.peerMux)
		d.HandlePeer(record.MandatesPath, record.MandatesHandler(o.Store, o.Peers, d.Log))
		d.Engine = engine
		d.AddTools(mcp.RecordTools(engine)...)
		go func() {
			// Transactions a restart interrupted resume once the listeners
			// are up; the outbox worker re-sends what was queued.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			engine.Resume(ctx)
			go engine.RunSettlements(ctx)
			if err := engine.Outbox().Run(ctx); err != nil && ctx.Err() == nil {
				d.Log.Error("outbox worker stopped", "error", err)
			}
		}()
		return nil
	}
}
