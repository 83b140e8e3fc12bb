package record

import (
	"context"
	"log/slog"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// Deps is what the engine uses of its organisation, and all it holds of
// it: the record, the clock, the peers and their keys, and the few
// questions of Org. package org has them all (Of); a test may hand in
// its own. The engine signs only as one of the organisation's agents
// (Org's signers), and files approvals without deciding them.
type Deps struct {
	Org   Org
	Store *store.Store
	// Clock is the time every act and check is made at.
	Clock func() time.Time
	Log   *slog.Logger
	// Peers are the pinned counterparties.
	Peers *peering.Directory
	// Trusted holds the keys of the counterparties' principals and
	// agents; nil: only what the record holds is trusted.
	Trusted *peering.TrustedKeys
}

// Org is what the engine asks of its organisation (org.Org answers).
type Org interface {
	// Config is the instance's configuration, as of now.
	Config() instance.Config
	// Evaluator decides acts under mandates (authority).
	Evaluator() *authority.Evaluator

	// AgentSigner signs as the instance's default agent; SignerFor as
	// the named agent.
	AgentSigner() (signature.Signer, error)
	SignerFor(agentID string) (signature.Signer, error)

	// ResolveKey and KeyStanding read a key and judge it (at signing and
	// now).
	ResolveKey(ctx context.Context, keyID string) (authority.Key, error)
	KeyStanding(ctx context.Context, keyID, signedAt string) (org.KeyStanding, error)

	// ResolveMandate reads a mandate held, ours or a counterparty's;
	// OwnMandateRecord one of ours; AgentMandateRecord one of ours under
	// which agentID acts.
	ResolveMandate(ctx context.Context, mandateID string) (map[string]any, error)
	OwnMandateRecord(ctx context.Context, id string) (store.MandateRecord, error)
	AgentMandateRecord(ctx context.Context, agentID, id string) (store.MandateRecord, error)

	// LatestApproval finds the principal's decision on an act held for
	// approval; FileApproval files one.
	LatestApproval(ctx context.Context, mandateID string, act map[string]any, actionHash string) (req store.ApprovalRequest, approval map[string]any, found bool, err error)
	FileApproval(ctx context.Context, mandateID string, act map[string]any, res authority.Result) (store.ApprovalRequest, error)
}

// Of is what the engine uses of o.
func Of(o *org.Org) Deps {
	return Deps{Org: o, Store: o.Store, Clock: o.Clock, Log: o.Log, Peers: o.Peers, Trusted: o.Trusted}
}
