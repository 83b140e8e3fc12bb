// Package org is one organisation's runtime: an opened state directory
// together with what evaluates and signs on its behalf — the key resolver
// (its own keys and the keys its peers' pinned principals vouched for), the
// mandate resolver, the live status client and the policy evaluator.
//
// Everything that acts for the organisation builds on an *Org: the
// agent's surface (package agent), the record protocol, the serve process,
// and the principal's surface (package principal), which adds the
// principal's key to it.
//
// An Org is the agent's side of the organisation. The only private keys it
// holds are the agent's signing key and, for mutual TLS with peers, the
// instance's TLS key. It never holds the principal's private key, nor any
// other organisation's: the principal's key is loaded apart, by package
// principal, into the principal's surface alone, and an Org resolves the
// principal's key id to the public key its key record states (see package
// principal, "Roles in the types"). So nothing built on an Org alone can
// issue a mandate, change a mandate's status or approve an act.
package org

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/store"
)

// ErrUnknownKey is returned for a key id neither this organisation nor any
// pinned peer vouches for.
var ErrUnknownKey = errors.New("org: unknown key")

// Org is an organisation's runtime. Create it with Open.
type Org struct {
	In      *instance.Instance
	Store   *store.Store
	Peers   *peering.Directory
	Clients *peering.Clients
	Trusted *peering.TrustedKeys
	Status  *status.Client
	Log     *slog.Logger
	// Clock is the time every decision is made at; tests replace it.
	Clock func() time.Time

	evaluator *authority.Evaluator
}

// Options adjust Open.
type Options struct {
	Logger *slog.Logger
	Clock  func() time.Time
	// StatusRoots adds certificates that status endpoints may present
	// (tests use it for a stand-alone status server); the instance's own
	// certificate and every pinned peer's are always included.
	StatusRoots []*x509.Certificate
}

// Open opens the state directory dir and wires its runtime.
func Open(dir string, o Options) (*Org, error) {
	in, err := instance.Open(dir)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	peers, err := peering.OpenDirectory(dir, log)
	if err != nil {
		in.Close()
		return nil, err
	}
	cert, err := in.TLSCertificate()
	if err != nil {
		in.Close()
		return nil, err
	}
	clients := peering.NewClients(cert, peers, 10*time.Second)
	trusted := peering.NewTrustedKeys(in.Store, clients, log)
	if err := trusted.Load(context.Background(), peers); err != nil {
		in.Close()
		return nil, err
	}
	o2 := &Org{In: in, Store: in.Store, Peers: peers, Clients: clients, Trusted: trusted, Log: log, Clock: clock}
	roots, err := o2.statusRoots(o.StatusRoots)
	if err != nil {
		in.Close()
		return nil, err
	}
	sc, err := status.NewClient(status.ClientConfig{RootCAs: roots, Clock: o2.now, Pins: o2.peerPins})
	if err != nil {
		in.Close()
		return nil, err
	}
	o2.Status = sc
	// The acting organisation's local, deny-only policy beside its
	// mandates: a minimum grade of the counterparty (package grade).
	o2.evaluator = &authority.Evaluator{Keys: o2, Mandates: o2, Status: sc, Clock: o2.now, Policy: grade.Policy{Store: in.Store, Clock: o2.now}}
	return o2, nil
}

func (o *Org) now() time.Time { return o.Clock() }

// Close releases the record.
func (o *Org) Close() error { return o.In.Close() }

// Config is the instance configuration.
func (o *Org) Config() instance.Config { return o.In.Config }

// Evaluator returns the policy evaluator, which resolves keys, mandates and
// live status through this Org.
func (o *Org) Evaluator() *authority.Evaluator { return o.evaluator }

// statusRoots is the pool status endpoints must chain to: the instance's
// own certificate (for its own mandates) and every pinned peer's.
func (o *Org) statusRoots(extra []*x509.Certificate) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	own, err := instance.LoadCertificate(o.In.Dir)
	if err != nil {
		return nil, err
	}
	pool.AddCert(own)
	for _, c := range extra {
		pool.AddCert(c)
	}
	return pool, nil
}

// peerPins returns the pinned certificate fingerprints of every peer: a
// counterparty's status endpoint is on its pinned peer listener.
func (o *Org) peerPins() []string {
	var pins []string
	for _, p := range o.Peers.Peers() {
		pins = append(pins, p.TLSCertificateSHA256)
	}
	return pins
}

// AgentSigner signs as this organisation's agent.
func (o *Org) AgentSigner() (signature.Signer, error) {
	return signature.NewSigner(o.In.Config.AgentKeyID, o.In.AgentKey())
}

// ResolveKey implements authority.KeyResolver: this organisation's two keys
// (public halves: the principal's from its key record),
// then the principal keys a pinned peer file carries, then the agent keys
// a pinned principal vouched for in a key record.
func (o *Org) ResolveKey(ctx context.Context, keyID string) (authority.Key, error) {
	cfg := o.In.Config
	switch keyID {
	case cfg.PrincipalKeyID:
		return authority.Key{Public: o.In.PrincipalPublicKey(), OrganizationID: cfg.OrganizationID, HolderID: cfg.PrincipalID, Status: o.keyStatus(ctx, keyID)}, nil
	case cfg.AgentKeyID:
		return authority.Key{Public: o.In.AgentKey().Public(), OrganizationID: cfg.OrganizationID, HolderID: cfg.AgentID, Status: o.keyStatus(ctx, keyID)}, nil
	}
	for _, p := range o.Peers.Peers() {
		if jwk, ok := p.PrincipalKeys[keyID]; ok {
			pub, err := keys.ParseJWK(jwk)
			if err != nil {
				return authority.Key{}, err
			}
			holder := p.PrincipalIDs[keyID]
			return authority.Key{Public: pub, OrganizationID: p.OrganizationID, HolderID: holder, Status: envelope.KeyActive}, nil
		}
	}
	for _, p := range o.Peers.Peers() {
		pub, err := o.Trusted.Lookup(p.OrganizationID, keyID)
		if err != nil {
			continue
		}
		rec, err := o.Store.GetObject(ctx, keyID)
		if err != nil {
			return authority.Key{}, fmt.Errorf("org: trusted key %s has no stored record: %w", keyID, err)
		}
		obj, err := canonical.DecodeObject(rec)
		if err != nil {
			return authority.Key{}, err
		}
		by, _ := obj["created_by"].(map[string]any)
		payload, _ := obj["payload"].(map[string]any)
		holder, _ := by["agent_id"].(string)
		st, _ := payload["status"].(string)
		return authority.Key{Public: pub, OrganizationID: p.OrganizationID, HolderID: holder, Status: st}, nil
	}
	return authority.Key{}, fmt.Errorf("%w: %s", ErrUnknownKey, keyID)
}

// keyStatus reads a key's status from its stored key record.
func (o *Org) keyStatus(ctx context.Context, keyID string) string {
	rec, err := o.Store.GetObject(ctx, keyID)
	if err != nil {
		return "unknown"
	}
	obj, err := canonical.DecodeObject(rec)
	if err != nil {
		return "unknown"
	}
	payload, _ := obj["payload"].(map[string]any)
	st, _ := payload["status"].(string)
	return st
}

// PublicKey resolves a key id to its public key (for signature checks).
func (o *Org) PublicKey(ctx context.Context, keyID string) (crypto.PublicKey, error) {
	k, err := o.ResolveKey(ctx, keyID)
	if err != nil {
		return nil, err
	}
	return k.Public, nil
}

// ResolveMandate implements authority.MandateResolver over the record.
func (o *Org) ResolveMandate(ctx context.Context, mandateID string) (map[string]any, error) {
	m, err := o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return nil, err
	}
	return canonical.DecodeObject(m.Body)
}

// AgentMandate returns a mandate this organisation's principal issued to
// this instance's agent: the only mandates its agent can act under. Any
// other id is refused with A202-POLICY-DENIED.
func (o *Org) AgentMandate(ctx context.Context, id string) (map[string]any, error) {
	rec, err := o.Store.GetMandate(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err != nil || rec.Origin != "local" || rec.SubjectAgentID != o.In.Config.AgentID {
		return nil, reason.Refusef(reason.PolicyDenied, "mandate %s is not a mandate this instance issued to this agent; call whoami for the mandates you hold", id)
	}
	return canonical.DecodeObject(rec.Body)
}

// StatusStore adapts the record to status.Store: the status of the
// mandates this organisation issued, each with its latest revocation
// record.
func (o *Org) StatusStore() status.Store { return statusStore{o} }

type statusStore struct{ o *Org }

func (s statusStore) Status(ctx context.Context, mandateID string) (status.Entry, error) {
	m, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil || m.Origin != "local" {
		return status.Entry{}, fmt.Errorf("%w: %s", status.ErrUnknownMandate, mandateID)
	}
	e := status.Entry{Status: m.Status}
	if doc, err := canonical.DecodeObject(m.Body); err == nil {
		if until, err := envelope.ParseTimestamp(fmt.Sprint(doc["valid_until"])); err == nil && !s.o.now().Before(until) && m.Status == store.StatusActive {
			e.Status = status.Expired
		}
	}
	if rec, err := s.o.Store.MandateRevocation(ctx, mandateID); err == nil {
		obj, err := canonical.DecodeObject(rec)
		if err != nil {
			return status.Entry{}, err
		}
		e.Record = obj
	} else if !errors.Is(err, store.ErrNotFound) {
		return status.Entry{}, err
	}
	return e, nil
}

// TLSCertificate is the instance's certificate, used as server and client
// certificate towards peers.
func (o *Org) TLSCertificate() (tls.Certificate, error) { return o.In.TLSCertificate() }
