// Package record is the countersigned, dual-held transaction record
// between two party instances (pilot state machine §8.1; decisions.md 10),
// and the acts that build it.
//
// With no operator, a transaction's record is the hash-chained sequence of
// transaction_event objects that each party holds in full. Every event is
// signed by the party that appends it and countersigned by the other, and
// the countersignature means one thing: the countersigning instance's own
// verifier accepts the record extended by the event. Before it signs, the
// receiving instance runs
//
//   - the gate on every object of the message (schemas, the normative
//     checks, and no kernel_annotations: bilaterally nothing carries them,
//     so one that does is refused with A202-ANNOTATION-FORGED, never
//     stripped and stored);
//   - the live checks only a running instance can make: every object is
//     the sender's, under keys this instance trusts for it; the sender's
//     mandate, fetched from the sender when not held and verified under the
//     pinned principal key, re-evaluated over the act rebuilt from the
//     objects with its live status resolved over this instance's own
//     channel (and any approval that travels); the sender's decision an
//     allow for that act, signed by the acting agent, at most 60 seconds
//     old; the state this copy is in, the session's latest offer, a
//     withdrawal, an outstanding assertion;
//   - the verifier's own rules ([verify.Extend]) over the record extended by
//     the message: content hashes and the hashes objects carry, signatures,
//     purposes and signing parties, the chain link, the transition and its
//     guard, the event's action_hash against the decision's and the act
//     rebuilt from the record, the decision's stream and position, the
//     mandate's coverage and the approvals its rules call for. Every check
//     about the new objects must verify: a failure is refused with its
//     code, and a check that cannot be made is refused too.
//
// Only then does it countersign and store the event, in one database
// transaction with the inbox row that answers a redelivery of the same
// message with the same reply.
//
// # One pipeline
//
// Every act, for one call, is an actSpec: its preconditions (check), the
// act document's terms and references (act), and a build function that
// makes its objects and its event's data. perform runs every act the same way: lock the
// transaction, load it, check, resolve the agent's own mandate, decide
// (the own evaluator, with the approval the agent presents), build, and
// commit the act's objects, its pending event and its outbox message in
// one database transaction; then deliver, and settle the reply in one more.
// The receiving side mirrors it: decode, gate, lock, recognise the message
// by the act table (actTable, one line per message an act travels in),
// check, re-evaluate, extend, countersign, commit with the inbox row
// (receiveEvent for an event, receiveObjects for an act recorded by its
// objects alone).
//
// # Who acts, and the act table
//
// Every act takes the [Actor] it is taken for: one of the instance's
// agents, handed out by [Engine.Agent] only for an agent the instance
// has, so an act cannot be expressed without saying for whom; the agent
// acts only under a mandate issued to it. What the instance takes for
// itself (in answer to its counterparty, at a deadline, on a release) it
// takes under any of its agents' mandates, as an Actor no other package
// can make.
//
// Each act is one value of one type (act, in acts.go), declared in its
// file (offer and acceptance in formation.go, the obligation acts in
// obligations.go, and so on) with both its sides: how this instance
// performs it for a call (its spec), and a line for each message it
// travels in: how the receiving side recognises it, the event's live
// checks and what the countersigner adds, how the appender settles the
// answer, and what the recorded event moves. The act table (actTable)
// lists every act. Receiving ([Engine.Receive]), state derivation and
// reply settlement dispatch on the table's lines, and the acting side
// appends only an event the table's line of its act countersigns.
//
// # What the engine holds
//
// [New] takes [Deps]: the record, the clock, the log, the pinned peers
// and their keys, and [Org], the questions the engine asks of its
// organisation (configuration, policy, its agents' signers, keys and
// mandates, approvals to file and find). [Of] takes them from an
// [org.Org]. Nothing there reaches a principal's signing key.
//
// What is shown of a record (the list of transactions, one transaction's
// view, its disputes) is package readmodel's: [Engine.Transaction] hands
// over to [readmodel.Transaction] and answers only what the running
// engine alone knows ([readmodel.Derived]).
//
// # Delivery and crashes
//
// The engine owns its delivery (package delivery provides the outbox
// worker and the carriers' transports). An act's message is enqueued in
// the act's own transaction and deleted in the transaction that stores its
// reply, so there is no moment at which an act is stored without its
// message or a reply is marked delivered but not stored. A message whose
// first attempt failed waits in the outbox; the worker retries it with
// back-off and hands it back to the engine ([Engine.Attempt]), which settles its
// reply as the act would have. On start the engine voids the leases a dead
// predecessor held and resumes every transaction with unfinished work.
//
// A refusal removes the act: its pending event and the objects it created,
// in one transaction with marking its message failed. Nothing refused
// leaves a trace in either record. A refusal for a stale or unresolvable
// decision (A202-MANDATE-STATUS-UNRESOLVED) proves the peer did not
// countersign, so the act is renewed instead: re-decided under the live
// mandate and, if still allowed, sent again with a fresh decision and
// event; if no longer allowed, removed, and the agent is told why in the
// transaction's record.
//
// # Formation
//
//	offeror: propose_offer  → offer + decision               → the offeree stores it (draft)
//	offeree: accept_offer   → acceptance + agreement (offeree signs)
//	                          + its agreement.sign decision + decision
//	                          + event 1 agreement.direct      → the offeror countersigns (draft → agreement_pending),
//	                          (draft → agreement_pending)       checks its own offer's exact terms, the offeree's
//	                                                            agreement.sign and its own policy, signs the
//	                                                            agreement, issues the commitment, and appends
//	                                                            event 2 agreement.committed in its answer
//	offeree:                  countersigns agreement.committed (→ committed) in the write that stores the
//	                          answer; accept_offer returns
//	offeree (outbox worker):  the countersignature          → the offeror records its event (→ committed)
//
// One exchange on the acceptance's path, a second after it
// (docs/record-protocol.md, "Formation in two exchanges" and "The
// commitment in the answer"). When the offeror's policy holds or refuses
// agreement.sign, it countersigns agreement.direct alone, and the offeree
// sends the agreement on its own (receiveAgreement), answered with the
// signature or a refusal; when the offeree's own agreement.sign did not
// travel, the offeree appends agreement.committed itself.
//
// Obligations (obligation §5–§6) follow the same pattern: the obligee
// issues (obligation.activated → in_performance), the obligor asserts with
// evidence (performance.declared → acceptance_pending), and the obligee
// accepts (acceptance.granted → settlement_pending) or rejects
// (acceptance.rejected → in_performance). An agreement may be performed as
// several obligations, each its own act riding the same events
// (deliverables.go). Settlement and completion follow (settlement.go).
//
// # Walking away and changing course
//
// Either party cancels a transaction before anything is committed
// (transaction.cancelled, cancel.go); both end a committed one by
// agreement over one termination record both sign (termination.agreed,
// termination.go); the obligee waives a duty it no longer wants, by a
// signed act of its own that needs no event (waiver.go); and an agreement
// is amended by a fresh offer and acceptance and a new version signed by
// both, in one countersigned agreement.amended (amendment.go).
//
// # Changes
//
// Every commit that changes a transaction's record goes through one
// function (update), which, once the commit is durable, tells the
// subscribers ([Engine.Subscribe]) which transaction changed and the state it is
// in. Both sides announce: an instance hears of its own acts, of the
// counterparty's acts it countersigned, and of the countersignatures it
// stored. The MCP binding turns these into notifications/resources/updated
// and the principal's webhook into deliveries; neither can hold an act up,
// because a subscriber only queues what it heard.
//
// Mandates travel by pull, like key records: an instance serves its trading
// mandates to the pinned counterparty they name (bindings/peer's
// MandatesPath), and fetches a counterparty's through [MandateFetcher].
package record

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// RulesVersion is the rules version this instance appends under
// (decisions.md 11).
const RulesVersion = "1.3"

// MandateFetcher fetches a counterparty's mandate by id over this
// instance's own pinned channel.
type MandateFetcher interface {
	FetchMandate(ctx context.Context, org, mandateID string) ([]byte, error)
}

// Engine is one organisation's side of every transaction it takes part in.
type Engine struct {
	// org, db, clock, peers and trusted are what the engine holds of its
	// organisation (Deps).
	org     Org
	db      *store.Store
	clock   func() time.Time
	peers   *peering.Directory
	trusted *peering.TrustedKeys
	// acts is the act table (actTable), indexed.
	acts acts
	// views are the views of the bytes this engine parsed (parse).
	views object.Cache
	out   *delivery.Outbox
	fetch MandateFetcher
	rails *rails.Registry
	log   *slog.Logger
	locks locks
	kill  func(point string)
	// separateAgreement: Options.TestingOnlySeparateAgreement.
	separateAgreement bool
	// offereeCommits: Options.TestingOnlyOffereeCommits.
	offereeCommits bool

	keysMu sync.Mutex
	keys   keyCache
	// kr holds the key records of every organisation (keyRecords).
	kr store.KeyObjectsCache[[]*Obj]
	// railWake wakes the settlement worker (RailWake): an instruction
	// this instance pays was recorded.
	railWake chan struct{}
	// subs are the change subscribers (Subscribe), alerts the alert
	// subscribers (SubscribeAlerts).
	subs   subscribers[Change]
	alerts subscribers[Alert]

	releasedMu sync.Mutex
	released   map[string]bool // approval requests ReleaseHeld acted on, decided at releasedSince
	// releasedSince is the latest decision time ReleaseHeld read.
	releasedSince string
	subjects      sync.Map // mandate id → authority.Subject (subjectOf)
	handed        sync.Map // transaction id → the countersignature handed to the worker (handOn)
	// confirmEvery is Options.ConfirmEvery.
	confirmEvery time.Duration
	// away holds the peers a message could not reach (peerAway, peerSeen).
	away sync.Map
	// looked holds, by transaction, the instant before which its
	// deadlines cannot change unless its record does (WorkDeadlines,
	// WorkTiming; changed forgets it at every commit), or before which a
	// refused expiry is not tried again.
	looked sync.Map
	// timing is Options.Timing, with its defaults.
	timing Timing
	// meter is Options.Meter (nil: nothing is counted).
	meter Meter
	// prober is Options.Transport when it can probe a peer (Prober);
	// probes counts the probes in flight.
	prober Prober
	probes sync.WaitGroup
	// sigs remembers the ES256 signatures this engine accepted, so that a
	// step's checks and the verifier's rules that run beside them do not
	// both do the arithmetic (signature.Memo); this engine's own.
	sigs signature.Memo
}

// Options configure an Engine.
type Options struct {
	// Transport delivers messages to peers (a binding's client).
	Transport delivery.Transport
	// Mandates fetches counterparties' mandates (HTTPMandates in
	// production).
	Mandates MandateFetcher
	// Outbox tunes delivery retries (zero values: package delivery's
	// defaults). Its Clock defaults to the organisation's clock, and its
	// Keys and Logger to the organisation's.
	Outbox delivery.OutboxOptions
	// Rails are the settlement rails this instance offers (nil: none).
	Rails *rails.Registry
	// ConfirmEvery is how long after a rail reported a payment succeeded
	// this instance asks it again whether the payment stands (a reversal),
	// as long as its transaction is settlement_pending or exception_open;
	// 0 means DefaultConfirmEvery.
	ConfirmEvery time.Duration
	// Timing tunes the views and alerts of obligations due and overdue and
	// of counterparties unreachable (timing.go); zero values take the
	// defaults.
	Timing Timing
	// Meter, when set, counts the acts and the messages received, for an
	// operator's metrics (meter.go).
	Meter Meter
	// TestingOnlyKill, when set, is called at each named kill point of each
	// act and receipt: before and after each commit, when a reply arrives
	// and once it is stored. A crash harness makes it stop the engine
	// where it stands (crash_test.go).
	TestingOnlyKill func(point string)
	// TestingOnlySeparateAgreement, when set, sends the offeree's
	// acceptance without its agreement and fails the draft of it with the
	// reply (proposedWith), so that the reply is stored without it and
	// advance proposes it in a write of its own: the path of a failed
	// draft, and of messages and a database left by an older build.
	TestingOnlySeparateAgreement bool
	// TestingOnlyOffereeCommits, when set, sends the offeree's acceptance
	// and agreement without the offeree's agreement.sign, so that the
	// offeror does not append agreement.committed in its answer and the
	// offeree appends it in the write that stores the answer: the path of
	// an offeree whose policy held or refused agreement.sign when it
	// accepted, and of an offeree of an older build.
	TestingOnlyOffereeCommits bool
}

// DefaultConfirmEvery is how often a payment reported succeeded is asked
// about again while its transaction is open: a reversal reaches the
// record while the parties can still act on it, at one status call per
// payment per ten minutes.
const DefaultConfirmEvery = 10 * time.Minute

// New returns the engine of the organisation d comes from (Of). It delivers through opt.Transport with a
// durable outbox of its own; call Start before serving, then Resume, and
// run the outbox worker (Outbox) and the loops of packages railwork,
// releases and deadlines (party serve: daemon.Record).
func New(d Deps, opt Options) *Engine {
	oo := opt.Outbox
	if oo.Clock == nil {
		oo.Clock = d.Clock
	}
	if oo.Keys == nil && d.Trusted != nil {
		oo.Keys = d.Trusted
	}
	if oo.Logger == nil {
		oo.Logger = d.Log
	}
	e := &Engine{org: d.Org, db: d.Store, clock: d.Clock, peers: d.Peers, trusted: d.Trusted,
		acts: indexActs(actTable()), fetch: opt.Mandates, rails: opt.Rails, log: d.Log, kill: opt.TestingOnlyKill, separateAgreement: opt.TestingOnlySeparateAgreement, offereeCommits: opt.TestingOnlyOffereeCommits, railWake: make(chan struct{}, 1),
		confirmEvery: opt.ConfirmEvery, meter: opt.Meter}
	if e.confirmEvery <= 0 {
		e.confirmEvery = DefaultConfirmEvery
	}
	e.timing = opt.Timing.withDefaults()
	e.prober, _ = opt.Transport.(Prober)
	if opt.Rails != nil {
		gate.RegisterRails(opt.Rails.IDs()...)
	}
	e.out = delivery.NewOutbox(d.Store, opt.Transport, e, oo)
	return e
}

// Store returns the record the engine keeps (the pages read it).
func (e *Engine) Store() *store.Store { return e.db }

// Mandate returns a mandate held, ours or a counterparty's.
func (e *Engine) Mandate(ctx context.Context, id string) (map[string]any, error) {
	return e.org.ResolveMandate(ctx, id)
}

// Outbox returns the engine's outbox (tests drive its worker by hand).
func (e *Engine) Outbox() *delivery.Outbox { return e.out }

// Start prepares the engine to serve: it voids the outbox leases a dead
// predecessor left behind and brings derived state up to date.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.out.Start(ctx); err != nil {
		return err
	}
	// The peers a predecessor's messages wait for: the first word from
	// one makes them due (peerSeen).
	peers, err := e.db.PeersWaiting(ctx, e.clock())
	if err != nil {
		return err
	}
	for _, p := range peers {
		e.peerAway(p)
	}
	return e.rebuildObligationStates(ctx)
}

// Outcome is what an act returns to the agent.
type Outcome struct {
	TransactionID string `json:"transaction_id"`
	// Status is "recorded" (the peer countersigned and the record moved),
	// "delivered" (an object the peer stored, such as an offer), or
	// "pending" (waiting for the peer: see WaitingFor).
	Status     string            `json:"status"`
	State      protocol.State    `json:"state"`
	WaitingFor string            `json:"waiting_for,omitempty"`
	Objects    map[string]string `json:"objects,omitempty"` // role → id, e.g. "offer" → off_...
}

// Outcome statuses.
const (
	StatusRecorded  = "recorded"
	StatusDelivered = "delivered"
	StatusPending   = "pending"
)

// locks serialises everything that touches one transaction in this
// process.
type locks struct {
	mu sync.Mutex
	m  map[string]*txnLock
}

type txnLock struct {
	ch   chan struct{} // a one-slot semaphore: holding it is holding the lock
	refs int
}

// lock takes the transaction's lock, waiting as long as it takes.
func (l *locks) lock(txn string) func() {
	unlock, _ := l.acquire(context.Background(), txn, 0)
	return unlock
}

// tryLock takes the transaction's lock, waiting at most wait; ok is false
// when another act held it all that time.
func (l *locks) tryLock(ctx context.Context, txn string, wait time.Duration) (func(), bool) {
	return l.acquire(ctx, txn, wait)
}

func (l *locks) acquire(ctx context.Context, txn string, wait time.Duration) (func(), bool) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*txnLock{}
	}
	t, ok := l.m[txn]
	if !ok {
		t = &txnLock{ch: make(chan struct{}, 1)}
		l.m[txn] = t
	}
	t.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		t.refs--
		if t.refs == 0 {
			delete(l.m, txn)
		}
		l.mu.Unlock()
	}
	if wait <= 0 {
		t.ch <- struct{}{}
	} else {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case t.ch <- struct{}{}:
		case <-timer.C:
			release()
			return nil, false
		case <-ctx.Done():
			release()
			return nil, false
		}
	}
	return func() { <-t.ch; release() }, true
}

func (e *Engine) lock(txn string) func() { return e.locks.lock(txn) }

// point marks a kill point: the crash harness (crash_test.go) stops the
// engine dead at each in turn.
func (e *Engine) point(name string) {
	if e.kill != nil {
		e.kill(name)
	}
}

func refusef(code reason.Code, format string, args ...any) error {
	return reason.Refusef(code, format, args...)
}

func errf(format string, args ...any) error { return fmt.Errorf("record: "+format, args...) }

// isRefusal reports whether err carries a refusal.
func isRefusal(err error) bool {
	var r *reason.Refusal
	return errors.As(err, &r)
}
