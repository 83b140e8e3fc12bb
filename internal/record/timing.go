package record

// Timing: when an obligation falls due and overdue, and when a
// counterparty has been unreachable too long (issue 39; decided in
// docs/record-protocol.md, "Nothing waits forever (issue 39)").
//
// An obligation's due condition (obligation §4) is evaluated from the
// record alone (package due), so both parties find the same instant; the
// calendars a business-day condition names are this instance's
// configuration (config.json deadlines.calendars, and the built-in
// "weekdays"). Nothing is appended when an obligation falls due: the
// aggregate machine has no obligation.due event, and the reference
// runner's rule sets carry no obligation rows, so obligation.due on the
// transaction stream would be an event no other verifier replays. Due and
// overdue are views, computed on both sides:
//
//   - pending → due (the view's state "due"): the obligation is owed (no
//     assertion outstanding, none accepted) and its condition is met at
//     the instance's clock. An assertion before then is allowed, as
//     before: it is the obligor's claim that the duty is due, and an
//     obligee that disagrees rejects it with due_condition_not_met.
//   - overdue: due (or its assertion rejected) for longer than
//     Timing.OverdueAfter (default a day) without an assertion
//     outstanding or accepted.
//   - deadline.elapsed → expired (§6.1) applies where an agreement or
//     transaction states a deadline governing the obligation; the terms
//     this implementation forms state none, so no obligation expires, and
//     no such event is appended.
//
// Each instant is told once, durably (store.RaiseAlert, written before
// it is handed on): to the agent, as a change of the transaction's
// resource, and to the principal, through the alert subscribers (package
// notify posts them to the principal's webhook). A counterparty that has
// not answered for Timing.UnreachableAfter (default fifteen minutes) while
// messages wait for it is told to the principal once per outage, and its
// return likewise.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partyd/party/internal/due"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/store"
)

// Timing tunes the views and alerts of timing.go.
type Timing struct {
	// OverdueAfter is how long an obligation is due, unperformed, before
	// it is overdue (default DefaultOverdueAfter).
	OverdueAfter time.Duration
	// UnreachableAfter is how long a counterparty may leave messages
	// unanswered before the principal is told (default
	// DefaultUnreachableAfter).
	UnreachableAfter time.Duration
	// Calendars are the business calendars a due condition may name,
	// besides the built-in "weekdays".
	Calendars map[string]due.Calendar
}

// Defaults of Timing.
const (
	DefaultOverdueAfter     = 24 * time.Hour
	DefaultUnreachableAfter = 15 * time.Minute
)

func (t Timing) withDefaults() Timing {
	if t.OverdueAfter <= 0 {
		t.OverdueAfter = DefaultOverdueAfter
	}
	if t.UnreachableAfter <= 0 {
		t.UnreachableAfter = DefaultUnreachableAfter
	}
	return t
}

// calendar returns the calendar named name.
func (t Timing) calendar(name string) (due.Calendar, bool) {
	if c, ok := t.Calendars[name]; ok {
		return c, true
	}
	if name == "weekdays" {
		return due.Weekdays, true
	}
	return due.Calendar{}, false
}

// Alert kinds.
const (
	AlertObligationDue     = "obligation.due"
	AlertObligationOverdue = "obligation.overdue"
	AlertPeerUnreachable   = "peer.unreachable"
	AlertPeerReachable     = "peer.reachable"
)

// Alert is something the principal should hear of that no act of theirs
// caused: an obligation due or overdue, a counterparty unreachable or back.
type Alert struct {
	Kind          string
	TransactionID string // the obligation's transaction
	ObligationID  string
	Counterparty  string
	// At is the instant the alert is about: when the obligation fell due
	// (both kinds), or since when the counterparty has not answered.
	At time.Time
	// Waiting is how many messages wait for the counterparty.
	Waiting int
}

// SubscribeAlerts registers fn to be called with each alert, once; the
// same contract as Subscribe (fn must not block).
func (e *Engine) SubscribeAlerts(fn func(Alert)) (cancel func()) { return e.alerts.add(fn) }

func (e *Engine) alert(a Alert) {
	for _, s := range e.alerts.list() {
		s.fn(a)
	}
}

// owed reports whether an obligation in state s is owed with no assertion
// outstanding or accepted: the states a due condition and overdue speak of.
func owed(s string) bool {
	return s == string(protocol.OblPending) || s == string(protocol.OblRejected)
}

// dueViews evaluates the due condition of every owed obligation of txn at
// now. next is the earliest later instant at which one of them changes
// without the record changing (zero when none will).
func (e *Engine) dueViews(ctx context.Context, txn string, rows []store.ObligationState, now time.Time) (views map[string]readmodel.DueView, next time.Time, err error) {
	var f *dueFacts
	for _, row := range rows {
		if !owed(row.State) {
			continue
		}
		obl, err := e.get(ctx, txn, row.ObligationID)
		if err != nil {
			return nil, time.Time{}, err
		}
		if f == nil {
			f = &dueFacts{e: e, ctx: ctx, txn: txn, rows: rows}
		}
		facts := f.facts()
		facts.Activated, _ = envelope.ParseTimestamp(str(obl.Value()["created_at"]))
		r := due.Evaluate(obl.PSub("due_condition"), facts)
		if f.err != nil {
			return nil, time.Time{}, f.err
		}
		v := readmodel.DueView{WaitingOn: r.Waiting, Unevaluable: r.Unknown}
		if r.Known {
			over := r.At.Add(e.timing.OverdueAfter)
			v.DueAt, v.OverdueAt = envelope.Timestamp(r.At), envelope.Timestamp(over)
			v.Due, v.Overdue = r.MetBy(now), !now.Before(over)
			for _, t := range []time.Time{r.At, over} {
				if t.After(now) && (next.IsZero() || t.Before(next)) {
					next = t
				}
			}
		}
		if views == nil {
			views = map[string]readmodel.DueView{}
		}
		views[row.ObligationID] = v
	}
	return views, next, nil
}

// dueFacts reads the facts of txn's record a due condition asks for, each
// at most once.
type dueFacts struct {
	e    *Engine
	ctx  context.Context
	txn  string
	rows []store.ObligationState
	err  error

	events   map[string]string    // content hash → event id
	evidence map[string]time.Time // evidence type → first presented
}

func (f *dueFacts) facts() due.Facts {
	return due.Facts{Act: f.act, Evidence: f.evidenceOf, Discharged: f.discharged, Calendar: f.e.timing.calendar}
}

func (f *dueFacts) act(h string) (time.Time, bool) {
	if f.events == nil {
		f.events = map[string]string{}
		rows, err := f.e.db.Events(f.ctx, f.txn)
		if err != nil {
			f.err = err
			return time.Time{}, false
		}
		for _, x := range rows {
			if x.Status == store.EventRecorded {
				f.events[x.ContentHash] = x.EventID
			}
		}
	}
	id, ok := f.events[h]
	if !ok {
		return time.Time{}, false
	}
	ev, err := f.e.get(f.ctx, f.txn, id) // only the event named is read
	if err != nil {
		f.err = err
		return time.Time{}, false
	}
	t, err := envelope.ParseTimestamp(ev.P("occurred_at"))
	return t, err == nil
}

func (f *dueFacts) evidenceOf(typ string) (time.Time, bool) {
	if f.evidence == nil {
		f.evidence = map[string]time.Time{}
		list, err := f.e.ofType(f.ctx, f.txn, protocol.Evidence)
		if err != nil {
			f.err = err
			return time.Time{}, false
		}
		for _, o := range list {
			t, err := envelope.ParseTimestamp(str(o.Value()["created_at"]))
			k := o.P("evidence_type")
			if err == nil && (f.evidence[k].IsZero() || t.Before(f.evidence[k])) {
				f.evidence[k] = t
			}
		}
	}
	t, ok := f.evidence[typ]
	return t, ok
}

// discharged: an obligation is discharged once accepted (a short
// acceptance names its remainder, which carries the rest: §6.1), at the
// time of the event that recorded the acceptance.
func (f *dueFacts) discharged(id string) (time.Time, bool) {
	for _, row := range f.rows {
		if row.ObligationID != id || row.State != string(protocol.OblAccepted) {
			continue
		}
		x, err := f.e.db.EventAt(f.ctx, f.txn, row.UpdatedSeq)
		if err != nil {
			f.err = err
			return time.Time{}, false
		}
		ev, err := f.e.getEvent(f.ctx, f.txn, x.EventID)
		if err != nil {
			f.err = err
			return time.Time{}, false
		}
		t, err := envelope.ParseTimestamp(ev.P("occurred_at"))
		return t, err == nil
	}
	return time.Time{}, false
}

// WorkTiming raises the alerts due at the engine's clock: obligations
// fallen due or overdue (once each, durably) and counterparties away past
// Timing.UnreachableAfter. It returns how many obligation alerts it
// raised. Tests with a simulated clock call it directly.
func (e *Engine) WorkTiming(ctx context.Context) int {
	now := e.clock()
	e.probeAway(ctx, now)
	e.workUnreachable(ctx, now)
	return e.workObligations(ctx, now)
}

// performing are the states in which obligations are owed.
var performing = []protocol.State{protocol.Committed, protocol.InPerformance, protocol.AcceptancePending,
	protocol.SettlementPending, protocol.ExceptionOpen}

// workObligations raises the alerts of obligations that fell due or
// overdue, once each, and returns how many it raised. A transaction is
// looked at again only once its record changed or its next instant came.
func (e *Engine) workObligations(ctx context.Context, now time.Time) int {
	n := 0
	for _, st := range performing {
		ts, err := e.db.TransactionsInState(ctx, string(st))
		if err != nil {
			e.log.Warn("reading the obligations' deadlines failed", "error", err)
			return n
		}
		for _, t := range ts {
			if ctx.Err() != nil {
				return n
			}
			if next, ok := e.looked.Load(t.ID); ok && now.Before(next.(time.Time)) {
				continue
			}
			rows, err := e.db.ObligationStates(ctx, t.ID)
			if err != nil {
				continue
			}
			views, next, err := e.dueViews(ctx, t.ID, rows, now)
			if err != nil {
				e.log.Warn("evaluating due conditions failed", "transaction_id", t.ID, "error", err)
				continue
			}
			for _, row := range rows {
				v, ok := views[row.ObligationID]
				if !ok || !v.Due {
					continue
				}
				at, _ := envelope.ParseTimestamp(v.DueAt)
				n += e.raise(ctx, t, row.ObligationID, AlertObligationDue, at)
				if v.Overdue {
					n += e.raise(ctx, t, row.ObligationID, AlertObligationOverdue, at)
				}
			}
			if next.IsZero() {
				next = now.Add(time.Hour) // a record that does not change: once an hour
			}
			e.looked.Store(t.ID, next)
		}
	}
	return n
}

// raise records the alert kind of obligation obl once and hands it on: to
// the agent as a change of the transaction, to the alert subscribers.
func (e *Engine) raise(ctx context.Context, t store.Transaction, obl, kind string, at time.Time) int {
	fresh, err := e.db.RaiseAlert(ctx, obl, kind, t.ID, at)
	if err != nil {
		e.log.Warn("recording an alert failed; it is raised again later", "obligation_id", obl, "kind", kind, "error", err)
		return 0
	}
	if !fresh {
		return 0
	}
	e.log.Info("an obligation is "+kind[len("obligation."):], "transaction_id", t.ID, "obligation_id", obl, "due_at", envelope.Timestamp(at))
	e.changed(ctx, t.ID, t.State, true)
	e.alert(Alert{Kind: kind, TransactionID: t.ID, ObligationID: obl, Counterparty: t.Counterparty, At: at})
	return 1
}

// away is a counterparty that did not answer: since when, whether the
// principal was told, and its probing (probeAway).
type away struct {
	since   time.Time
	alerted atomic.Bool

	probing   atomic.Bool
	mu        sync.Mutex
	sawDown   bool      // a probe found it not answering
	nextProbe time.Time // when to probe it next
}

// Prober is a Transport that can ask a counterparty, cheaply, whether it
// answers (peer.Client asks for its key records). An engine whose
// transport is one probes the counterparties it found away.
type Prober interface {
	Probe(ctx context.Context, peer string) error
}

// probeAway probes each counterparty found away, at most one probe at a
// time each, every DeadlineEvery at first and less often as the outage
// lasts (a sixtieth of its length, at most every 15 seconds). A probe
// that answers after one that did not means the counterparty is back:
// what waits for it is due at once (peerSeen), within seconds of its
// return rather than after a back-off of up to five minutes. A
// counterparty that answers probes while its messages fail is left to the
// back-off: only a probe that saw it down can end one. A counterparty
// nothing waits for any more (its messages refused, say) is forgotten.
func (e *Engine) probeAway(ctx context.Context, now time.Time) {
	p := e.prober
	if p == nil {
		return
	}
	e.away.Range(func(k, v any) bool {
		a, peer := v.(*away), k.(string)
		a.mu.Lock()
		due := !now.Before(a.nextProbe)
		a.mu.Unlock()
		if !due || !a.probing.CompareAndSwap(false, true) {
			return true
		}
		e.probes.Add(1)
		go func() {
			defer e.probes.Done()
			defer a.probing.Store(false)
			if n, err := e.db.OutboxWaiting(ctx, peer); err == nil && n == 0 {
				e.away.CompareAndDelete(peer, a) // nothing waits for it: no outage to end
				return
			}
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := p.Probe(pctx, peer)
			cancel()
			a.mu.Lock()
			back := err == nil && a.sawDown
			if err != nil {
				a.sawDown = true
			}
			a.nextProbe = e.clock().Add(min(15*time.Second, max(DeadlineEvery, e.clock().Sub(a.since)/60)))
			a.mu.Unlock()
			if back {
				e.peerSeen(ctx, peer)
			}
		}()
		return true
	})
}

// peerAway notes that peer did not answer: what this instance sends it
// waits out back-offs (peerSeen ends them).
func (e *Engine) peerAway(peer string) {
	e.away.LoadOrStore(peer, &away{since: e.clock()})
}

// workUnreachable tells the principal of each counterparty away for
// longer than Timing.UnreachableAfter with messages waiting for it.
func (e *Engine) workUnreachable(ctx context.Context, now time.Time) {
	e.away.Range(func(k, v any) bool {
		a := v.(*away)
		if now.Sub(a.since) < e.timing.UnreachableAfter || a.alerted.Load() {
			return true
		}
		peer := k.(string)
		waiting, err := e.db.OutboxWaiting(ctx, peer)
		if err != nil || waiting == 0 {
			return true
		}
		if a.alerted.CompareAndSwap(false, true) {
			e.log.Warn("a counterparty has not answered for a long time; messages wait for it", "peer", peer, "since", envelope.Timestamp(a.since), "messages", waiting)
			e.alert(Alert{Kind: AlertPeerUnreachable, Counterparty: peer, At: a.since, Waiting: waiting})
		}
		return true
	})
}
