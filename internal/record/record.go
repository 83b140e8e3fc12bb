// Package record is the countersigned, dual-held transaction record
// between two party instances (pilot state machine §8.1; decisions.md 10),
// and the acts that build it.
//
// With no operator, a transaction's record is the hash-chained sequence of
// transaction_event objects that each party holds in full. Every event is
// signed by the party that appends it and countersigned by the other, and
// a countersignature means something only because the countersigning
// instance checked the event by itself first:
//
//   - the gate on every object (schema and normative checks);
//   - every signature, under keys this instance trusts for the sender (its
//     pinned principal keys and the key records they signed);
//   - the sender's mandate, fetched from the sender's instance when not
//     held, its proof verified under the pinned principal key, and the act
//     re-evaluated against it from an act document this instance rebuilds
//     from the objects themselves, with the mandate's live status fetched
//     from the issuer's status endpoint over this instance's own channel;
//   - the sender's policy decision: an allow, bound to that act's hash,
//     made within the last 60 seconds;
//   - the transition's guard under rules version 1.3, from the state this
//     instance's own copy is in;
//   - the chain: the event extends the last event of this instance's copy.
//
// Only then does it add its countersignature (purpose event_append, second
// signature) and store the event. The appender stores its event as pending
// when it signs it, and records it when the countersignature comes back and
// verifies; until then the act is pending and the agent is told so. A
// refusal comes back with its registered codes and the appender removes
// the pending act: nothing refused leaves a trace in either record. A deny
// of this instance's own policy is never disclosed.
//
// The same message delivered twice gets the same answer (package delivery
// keeps the first reply), and the same event received again is answered
// with the countersigned bytes already held. A different event at a
// position already recorded is a fork: refused, kept in the forks table,
// and reported, never resolved by preferring either chain, a timestamp or
// a length.
//
// Formation (canonical model §10, pilot state machine §5.3):
//
//	supplier: propose_offer      → offer + decision            → buyer stores it (draft)
//	buyer:    accept_offer       → acceptance + decision + event 1 agreement.direct (draft → agreement_pending)
//	buyer:                         agreement (buyer signs)     → supplier checks its own offer's exact terms,
//	                                                             its own policy, signs, issues the commitment
//	buyer:                         decision + event 2 agreement.committed (→ committed)
//
// Obligations (obligation §5–§6) follow the same pattern: the obligee
// issues (obligation.activated → in_performance), the obligor asserts with
// evidence (performance.declared → acceptance_pending), and the obligee
// accepts (acceptance.granted → settlement_pending) or rejects
// (acceptance.rejected → in_performance).
//
// Every message is one delivery (package delivery) carrying exact canonical
// bytes; mandates travel by pull, like key records: an instance serves its
// trading mandates to the pinned counterparty they name at MandatesPath.
package record

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/reason"
)

// RulesVersion is the rules version this instance appends under
// (decisions.md 11).
const RulesVersion = "1.3"

// Sender delivers one message to a peer and returns its reply. A *reason
// .Refusal means the peer refused it for good; an error wrapping ErrQueued
// means the message waits in the outbox and its reply will reach
// HandleReply later.
type Sender interface {
	Send(ctx context.Context, peer, transactionID string, objects [][]byte) ([][]byte, error)
}

// ErrQueued marks an act whose message waits for delivery: the act is
// pending, not refused.
var ErrQueued = errors.New("record: queued for delivery")

// MandateFetcher fetches a counterparty's mandate by id over this
// instance's own pinned channel.
type MandateFetcher interface {
	FetchMandate(ctx context.Context, org, mandateID string) ([]byte, error)
}

// Engine is one organisation's side of every transaction it takes part in.
type Engine struct {
	o      *org.Org
	send   Sender
	fetch  MandateFetcher
	log    *slog.Logger
	mu     sync.Mutex
	locks  map[string]*sync.Mutex
	queued func(error) bool
}

// Options configure an Engine.
type Options struct {
	// Sender delivers messages (an outbox in production).
	Sender Sender
	// Mandates fetches counterparties' mandates (HTTPMandates in
	// production).
	Mandates MandateFetcher
	// IsQueued reports whether a Send error means "queued, reply later"
	// (delivery.ErrQueued in production).
	IsQueued func(error) bool
}

// New returns the engine of o.
func New(o *org.Org, opt Options) *Engine {
	q := opt.IsQueued
	if q == nil {
		q = func(err error) bool { return errors.Is(err, ErrQueued) }
	}
	return &Engine{o: o, send: opt.Sender, fetch: opt.Mandates, log: o.Log, locks: map[string]*sync.Mutex{}, queued: q}
}

// SetSender sets the sender after construction (the outbox needs the
// engine's reply handler, and the engine needs the outbox).
func (e *Engine) SetSender(s Sender) { e.send = s }

// Org returns the organisation runtime.
func (e *Engine) Org() *org.Org { return e.o }

// lock serialises everything that touches one transaction in this process.
func (e *Engine) lock(txn string) func() {
	e.mu.Lock()
	l, ok := e.locks[txn]
	if !ok {
		l = &sync.Mutex{}
		e.locks[txn] = l
	}
	e.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Outcome is what an act returns to the agent.
type Outcome struct {
	TransactionID string `json:"transaction_id"`
	// Status is "recorded" (the peer countersigned and the record moved),
	// "delivered" (an object the peer stored, such as an offer), or
	// "pending" (waiting for the peer: see WaitingFor).
	Status     string            `json:"status"`
	State      string            `json:"state"`
	WaitingFor string            `json:"waiting_for,omitempty"`
	Objects    map[string]string `json:"objects,omitempty"` // role → id, e.g. "offer" → off_...
}

func refusef(code reason.Code, format string, args ...any) error {
	return reason.Refusef(code, format, args...)
}

func errf(format string, args ...any) error { return fmt.Errorf("record: "+format, args...) }
