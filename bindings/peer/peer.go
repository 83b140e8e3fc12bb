// Package peer is the peer listener of a party instance and its client
// side: every route a counterparty's instance reaches, mounted in one
// place, and every call this instance makes to a counterparty's.
//
// The routes, all on the HTTPS peer listener (mutually pinned TLS where a
// route needs to know who asks):
//
//	GET  /v1/mandates/{id}/status  a mandate's live status (public: status
//	                               endpoints are resolved by whoever relies
//	                               on a mandate; package status)
//	GET  /a202/key-records         this organisation's key records, to
//	                               pinned peers (package peering)
//	GET  /a202/mandates/{id}       a trading mandate, to the pinned peers
//	                               its scope names (MandatesHandler)
//	     /.well-known/agent-card.json, /a2a
//	                               the A2A carrier (bindings/a2a)
//	     /a202/capabilities, /a202/objects, /a202/replies/{key}
//	                               the plain HTTPS carrier (bindings/https)
//
// The client side (Client): delivering a message over the configured
// carrier (a delivery.Transport for the record engine's outbox) and
// fetching a counterparty's mandate (record.MandateFetcher). Key records
// are fetched by peering.TrustedKeys, which the carriers call on first
// contact, and status documents by the status client, which resolves
// whatever endpoint a mandate names.
package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/status"
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

// Config configures the peer listener.
type Config struct {
	Org *org.Org
	// Receiver receives counterparties' messages (the record engine); nil
	// serves no carrier, only the status, key-record and mandate routes.
	Receiver delivery.InboxReceiver
	Logger   *slog.Logger
}

// Handler returns the peer listener's handler: every route above.
func Handler(cfg Config) (http.Handler, error) {
	o := cfg.Org
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	sh, err := status.NewHandler(o.StatusStore(), o.Clock, 0)
	if err != nil {
		return nil, err
	}
	mux.Handle("/v1/mandates/", sh)
	mux.Handle(peering.KeyRecordsPath, peering.KeyRecordsHandler(o.Peers, peering.OwnKeyRecords(o.Store, o.Config().OrganizationID), log))
	mux.Handle(MandatesPath, MandatesHandler(o.Store, o.Peers, log))
	if cfg.Receiver == nil {
		return mux, nil
	}
	card := a2a.Card(a2a.CardOptions{OrganizationID: o.Config().OrganizationID, PublicURL: o.Config().PublicURL})
	as, err := a2a.NewServer(a2a.ServerConfig{Card: card, Clients: o.Clients, Receiver: cfg.Receiver, Logger: log})
	if err != nil {
		return nil, err
	}
	as.Mount(mux)
	hs, err := https.NewServer(https.ServerConfig{Clients: o.Clients, Inbox: cfg.Receiver, Logger: log})
	if err != nil {
		return nil, err
	}
	hs.Mount(mux)
	return mux, nil
}

// Client is the client side of the peer routes.
type Client struct {
	transport delivery.Transport
	mandates  HTTPMandates
}

// NewClient returns the client that sends over carrier (A2A by default).
func NewClient(o *org.Org, carrier Carrier, log *slog.Logger) (*Client, error) {
	var t delivery.Transport
	var err error
	switch carrier {
	case CarrierHTTPS:
		t, err = https.NewClient(https.ClientConfig{Clients: o.Clients, Logger: log})
	case CarrierA2A, "":
		t, err = a2a.NewClient(a2a.ClientConfig{Clients: o.Clients, Logger: log})
	default:
		err = errors.New("peer: carrier " + string(carrier) + " is neither a2a nor https")
	}
	if err != nil {
		return nil, err
	}
	return &Client{transport: t, mandates: HTTPMandates{Clients: o.Clients}}, nil
}

// Deliver implements delivery.Transport over the configured carrier.
func (c *Client) Deliver(ctx context.Context, peer, txn string, objects [][]byte) (delivery.Message, error) {
	return c.transport.Deliver(ctx, peer, txn, objects)
}

// Probe asks a counterparty whether it answers, cheaply: a GET of its key
// records over the pinned TLS connection (record.Prober). nil means it
// answered 200.
func (c *Client) Probe(ctx context.Context, org string) error {
	hc, peer, err := c.mandates.Clients.For(org)
	if err != nil {
		return err
	}
	u, err := url.JoinPath(peer.BaseURL(), peering.KeyRecordsPath)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return errors.New("probe: " + resp.Status)
	}
	return nil
}

// FetchMandate fetches a counterparty's mandate (record.MandateFetcher).
func (c *Client) FetchMandate(ctx context.Context, org, id string) ([]byte, error) {
	return c.mandates.FetchMandate(ctx, org, id)
}
