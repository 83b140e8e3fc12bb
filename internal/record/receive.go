package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/store"
)

// receipt is one message being received: who sent it (the organisation
// the pinned client certificate authenticated), its correlation id, its
// message key, its objects, and the transaction as this copy holds it.
type receipt struct {
	from, txn, key string
	objs           []*Obj
	st             *state
	now            time.Time
	// beside are objects checked with the message's event that are not
	// its support: the agreement and commitment of the answer an
	// agreement.committed travels in (settleDirect). Lookups see them.
	beside []*Obj
	// answering, when set, is the time of this instance's own act whose
	// answer the event came in: its decision is judged made after it
	// (checkDecision), not at most 60 seconds before now.
	answering time.Time
	// yielding names this instance's own pending event at the position
	// the received event takes, which gives way to it (position).
	yielding string
}

// byType returns the message's objects of one type.
func (r *receipt) byType(t protocol.ObjectType) []*Obj {
	var out []*Obj
	for _, o := range r.objs {
		if o.Type() == t {
			out = append(out, o)
		}
	}
	return out
}

// one returns the message's only object of type t, or nil.
func (r *receipt) one(t protocol.ObjectType) *Obj {
	if l := r.byType(t); len(l) == 1 {
		return l[0]
	}
	return nil
}

// find returns the message's object with id (or one beside it), or nil.
func (r *receipt) find(id string) *Obj {
	for _, l := range [][]*Obj{r.objs, r.beside} {
		for _, o := range l {
			if o.ID() == id {
				return o
			}
		}
	}
	return nil
}

// held returns the object id of type t, from the message (or beside it)
// or the record.
func (e *Engine) held(ctx context.Context, r *receipt, id string, t protocol.ObjectType) (*Obj, bool) {
	if o := r.find(id); o != nil {
		return o, o.Type() == t
	}
	return e.getTyped(ctx, r.txn, id, t)
}

// lookup resolves an object by id from the message, then the record: what
// the act rebuilt from an event reads.
func (e *Engine) lookupWith(ctx context.Context, r *receipt) func(id string) map[string]any {
	return func(id string) map[string]any {
		if o := r.find(id); o != nil {
			return o.Value()
		}
		return e.lookupHeld(ctx, r.txn, id)
	}
}

// lockWait bounds how long a received message waits for an act of this
// instance on the same transaction; longer, and the sender is told to try
// again, so that two instances acting on one transaction at once never
// wait on each other.
const lockWait = 2 * time.Second

// receive is the receiving side of every message (Receive counts it).
// from is the organisation the pinned client certificate authenticated.
// A message received before is answered with the reply given then; a new
// one is checked and what it moves is stored with its reply, in one
// database transaction.
func (e *Engine) receive(ctx context.Context, from, txn string, msg delivery.Message) ([][]byte, error) {
	ctx = store.WithKeyVersionMemo(ctx) // the key records read once between two commits
	e.peerSeen(ctx, from)
	raw := msg.Objects
	if !msg.Checked() {
		if err := delivery.CheckMessage(txn, raw); err != nil {
			return nil, err
		}
	}
	key := delivery.MessageKey(txn, raw)
	if reply, err := e.db.InboxReply(ctx, from, key); err == nil {
		return reply, nil
	}
	if e.trusted != nil {
		// The sender's key records, current within KeyRefresh, and fetched
		// again at once when the message names a key not held: a key the
		// sender rotated or revoked is judged by its latest record.
		if err := e.trusted.EnsureKeys(ctx, from); err != nil {
			return nil, fmt.Errorf("%w: key records of %s: %w", delivery.ErrUnavailable, from, err)
		}
		if err := e.trusted.EnsureKnown(ctx, from, e.signingKeys(raw)); err != nil {
			return nil, fmt.Errorf("%w: key records of %s: %w", delivery.ErrUnavailable, from, err)
		}
	}
	unlock, ok := e.locks.tryLock(ctx, txn, lockWait)
	if !ok {
		return nil, fmt.Errorf("%w: transaction %s is busy here; try again", delivery.ErrUnavailable, txn)
	}
	defer unlock()
	if reply, err := e.db.InboxReply(ctx, from, key); err == nil {
		return reply, nil // a copy that arrived meanwhile was answered
	}
	now := e.clock().UTC().Truncate(time.Second)
	r := &receipt{from: from, txn: txn, key: key, now: now}
	for i, b := range raw {
		if v := msg.Value(i); v != nil { // the carrier's decoding of b
			r.objs = append(r.objs, e.remember(b, v))
			continue
		}
		o, err := e.parse(b)
		if err != nil {
			return nil, reason.Refuse(fmt.Sprintf("object %d: %v", i, err))
		}
		r.objs = append(r.objs, o)
	}
	if len(r.objs) == 1 && r.objs[0].Type() == protocol.TransactionEvent && r.objs[0].Org() == e.org.Config().OrganizationID {
		// An event of this instance's coming back countersigned.
		return e.receiveCountersignature(ctx, r)
	}
	if err := e.checkAuthors(ctx, from, r.objs); err != nil {
		return nil, err
	}
	st, err := e.load(ctx, txn, now)
	if err != nil {
		return nil, err
	}
	r.st = st
	if st.known && st.t.Counterparty != from {
		return nil, refusef(reason.StreamMismatch, "transaction %s is held with %s, not %s", txn, st.t.Counterparty, from)
	}
	events := r.byType(protocol.TransactionEvent)
	if len(events) > 0 {
		if len(events) != 1 || r.objs[len(r.objs)-1] != events[0] {
			return nil, reason.Refuse("a message carries one event, last")
		}
		return e.receiveEvent(ctx, r)
	}
	if line := e.acts.message(r); line != nil {
		if line.objects != nil {
			return e.receiveObjects(ctx, r, line)
		}
		return line.receive(e, ctx, r)
	}
	return nil, reason.Refuse("the message is not one this instance understands: an offer with its decision, a withdrawal, a waiver, a termination proposal, " +
		"a dispute, a determination, an offer to remedy, a settlement adjustment signature, an agreement to sign, an adapter receipt, or an event with its objects")
}

// signingKeys lists the key ids a message's signatures name.
func (e *Engine) signingKeys(raw [][]byte) []string {
	var out []string
	for _, b := range raw {
		o, err := e.parse(b)
		if err != nil {
			continue
		}
		for _, s := range o.Signatures() {
			out = append(out, str(s["key_id"]))
		}
	}
	return out
}

// Reply returns the reply recorded for a message from org (the plain
// HTTPS binding serves it after its 202).
func (e *Engine) Reply(ctx context.Context, from, key string) ([][]byte, error) {
	return e.db.InboxReply(ctx, from, key)
}

// receiveEvent is the countersigning side of every event: the position in
// this copy, what travels with it, the event type's live checks, the
// actor's act re-evaluated live, the verifier's rules over the extended
// record, then the countersignature, stored with the inbox row.
func (e *Engine) receiveEvent(ctx context.Context, r *receipt) ([][]byte, error) {
	ev := messageEvent(r.objs) // receive found the one event, last
	support := r.objs[:len(r.objs)-1]
	spec, ok := e.acts.event(ev.EventType())
	if !ok {
		return nil, refusef(reason.StateTransitionDenied, "event type %s is not one this instance countersigns", ev.EventType())
	}
	if !r.st.known {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s is unknown here", r.txn)
	}
	if err := e.eventSigned(ctx, r, ev); err != nil {
		return nil, err
	}
	if reply, err, done := e.position(ctx, r, ev); done {
		if err != nil {
			return nil, err
		}
		return e.keepAnswer(ctx, r, reply) // the same event again
	}
	if r.yielding != "" {
		// This instance's own act at the same position gives way
		// (yieldPosition): its objects are not part of the record the
		// counterparty's event extends.
		r.st.excluded = e.pendingActObjects(ctx, r.txn, r.yielding)
	}
	var awaiting []string
	if spec.cosign != nil {
		for _, o := range support {
			if o.Type() == protocol.Agreement {
				awaiting = append(awaiting, o.ID()) // signed by this party next
			}
		}
	}
	if err := concurrently(
		func() error { return e.eventAllowed(ctx, r, ev, spec) },
		func() error { return e.extend(ctx, r.st, r.objs, awaiting...) },
	); err != nil {
		return nil, err
	}
	replaced := map[string]*Obj{}
	var own []*Obj
	if spec.cosign != nil {
		cs, mine, err := spec.cosign(ctx, e, r, ev)
		if err != nil {
			return nil, err
		}
		for _, o := range cs {
			replaced[o.ID()] = o
		}
		own = mine
	}
	signed, err := e.countersignEvent(ev, e.clock())
	if err != nil {
		return nil, err
	}
	reply := [][]byte{signed.Raw()}
	replyIDs := []string{ev.ID()}
	for _, o := range support {
		if x, ok := replaced[o.ID()]; ok {
			reply, replyIDs = append(reply, x.Raw()), append(replyIDs, x.ID())
		}
	}
	for _, o := range own {
		reply, replyIDs = append(reply, o.Raw()), append(replyIDs, o.ID())
	}
	e.point("receive.before-store")
	err = e.update(ctx, r.txn, func(tx *store.Txn) error {
		if err := e.yieldPosition(tx, r); err != nil {
			return err
		}
		for _, o := range support {
			if x, ok := replaced[o.ID()]; ok {
				o = x
			} else if slices.Contains(awaiting, o.ID()) {
				// Not signed here now (cosign's policy held or refused
				// it): an agreement signed by one party is not part of
				// the record; it comes again on its own.
				continue
			}
			if err := putReceived(tx, o, r.from); err != nil {
				return err
			}
		}
		for _, o := range own {
			if err := tx.PutVerified(info(o), o.Raw(), originLocal); err != nil {
				return err
			}
		}
		if err := e.storeCountersigned(tx, signed, r.from, support); err != nil {
			return err
		}
		for _, o := range own {
			if ev := object.AsEvent(o); ev != nil {
				// This instance's next event, pending until the
				// counterparty's countersignature comes back.
				if err := tx.InsertEvent(eventRow(ev, e.org.Config().OrganizationID)); err != nil {
					return err
				}
			}
		}
		return tx.PutInbox(r.from, r.key, r.txn, replyIDs, r.now)
	})
	if err != nil {
		return nil, err
	}
	e.point("receive.after-store")
	e.log.Info("event countersigned", "transaction_id", r.txn, "sequence", ev.Seq(), "event_type", ev.EventType(), "from", r.from, "to_state", ev.To())
	return reply, nil
}

// eventSigned is the first of the countersigner's checks of an event:
// it arrives with exactly one signature, its appender's event_append, by
// an agent key (a principal's key approves, it does not append).
func (e *Engine) eventSigned(ctx context.Context, r *receipt, ev *Event) error {
	entries := ev.Signatures()
	if len(entries) != 1 || str(entries[0]["purpose"]) != protocol.PurposeEventAppend {
		return refusef(reason.EvidenceSignatureInvalid, "an event arrives with exactly one event_append signature, its appender's")
	}
	if k, err := e.org.ResolveKey(ctx, str(entries[0]["key_id"])); err != nil || !isHolder(k.HolderID, "agt_") || k.OrganizationID != r.from {
		return refusef(reason.EvidenceSignatureInvalid, "event %s is not signed by an agent key of %s", ev.ID(), r.from)
	}
	return nil
}

// eventAllowed is the rest of the countersigner's live checks of an event
// that extends r.st, once its position is settled: the transition from
// this copy's state, what travels with it, the event type's own checks,
// and the appender's act rebuilt from the objects and re-evaluated under
// its mandate, with the decision the event names. The verifier's rules
// over the extended record (extend) follow. Every event this instance
// countersigns passes here: one it receives (receiveEvent) and one that
// comes in an answer (the offeror's agreement.committed, settleDirect).
func (e *Engine) eventAllowed(ctx context.Context, r *receipt, ev *Event, spec *actLine) error {
	support := r.objs[:len(r.objs)-1]
	// The live form of the transition rule (pilot state machine §5: a move
	// the table does not allow from this copy's state is
	// A202-STATE-TRANSITION-DENIED), by the one table the verifier replays
	// too; the verifier's replay of it follows in verify.Extend.
	if ev.From() != r.st.State() {
		return refusef(reason.StateTransitionDenied, "event %s moves from %s, this record is in %s", ev.ID(), ev.From(), r.st.t.State)
	}
	if to, ok := rules.Next(RulesVersion, rules.Aggregate, r.st.t.State, ev.EventType()); !ok || to != string(ev.To()) {
		return refusef(reason.StateTransitionDenied, "%s from %s is not a legal transition to %s under rules %s", ev.EventType(), r.st.t.State, ev.To(), RulesVersion)
	}
	if err := carries(ev.EventType(), support, spec.carries); err != nil {
		return err
	}
	if spec.check != nil {
		if err := spec.check(ctx, e, r, ev); err != nil {
			return err
		}
	}
	pol := r.find(ev.P("policy_decision_id"))
	if pol == nil || pol.Type() != protocol.PolicyDecision {
		return refusef(reason.PolicyDenied, "event %s names decision %s, which does not travel with it", ev.ID(), ev.P("policy_decision_id"))
	}
	lookup := e.lookupWith(ctx, r)
	data := ev.PSub("data")
	name, ok := authority.EventActName(ev.EventType(), data, r.from, lookup)
	if !ok {
		return refusef(reason.StateTransitionDenied, "no act of %s is recorded by %s", r.from, ev.EventType())
	}
	terms, refs, why := authority.EventActMembers(ev.EventType(), data, lookup)
	if why != "" {
		return refusef(reason.StateTransitionDenied, "%s", why)
	}
	var answering []time.Time
	if !r.answering.IsZero() {
		answering = append(answering, r.answering)
	}
	return e.checkDecision(ctx, r.from, ev.View, pol, actDoc{name: name, terms: terms, refs: refs}, r.txn, r.one(protocol.Approval), spec.uncached, answering...)
}

// concurrently runs check and extend at once and returns check's refusal
// if it refused, else extend's: what they refuse is refused as if they had
// run one after the other, check first. Both only read (the record,
// views, caches; a counterparty's mandate fetched is stored as it would
// be anyway), and neither may act on the other's result. A receipt's live
// checks and the verifier's rules over the extended record take about as
// long each, so on a second core the counterparty waits for the longer of
// the two, not their sum; on a busy one the work is the same.
func concurrently(check, extend func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			// A fault in the verifier refuses this message, as it did
			// when it ran on the request's own goroutine; it never takes
			// the process down.
			if p := recover(); p != nil {
				done <- fmt.Errorf("record: checking the extended record failed: %v", p)
			}
		}()
		done <- extend()
	}()
	err := check()
	if xerr := <-done; err == nil {
		err = xerr
	}
	return err
}

// storeCountersigned stores signed, the counterparty's event as this
// instance countersigned it, recorded: its bytes, its events row and what
// it changes in the record (applyEvent, with the objects that support it).
// Every event of the counterparty's goes in this way: one it sent
// (receiveEvent), one in an answer (settleCommitted).
func (e *Engine) storeCountersigned(tx *store.Txn, signed *Event, from string, support []*Obj) error {
	if err := tx.PutVerified(info(signed.View), signed.Raw(), from); err != nil {
		return err
	}
	row := eventRow(signed, from)
	if err := tx.InsertEvent(row); err != nil {
		return err
	}
	if err := tx.MarkRecorded(row); err != nil {
		return err
	}
	return e.applyEvent(tx, signed, support)
}

// eventRow is the events row of ev, appended by appendedBy, pending: what
// the event's own members say, read from the event so that the row cannot
// disagree with it.
func eventRow(ev *Event, appendedBy string) store.Event {
	return store.Event{
		TransactionID: ev.Txn(), Sequence: ev.Seq(), EventID: ev.ID(), ContentHash: ev.Hash(), PreviousEventHash: ev.Previous(),
		EventType: string(ev.EventType()), FromState: string(ev.From()), ToState: string(ev.To()), AppendedBy: appendedBy, Status: store.EventPending,
	}
}

// receiveCountersignature stores the counterparty's countersignature of
// one of this instance's own pending events, sent on its own: the offeree
// countersigns the agreement.committed the offeror appended in its answer
// and sends it back that way (docs/record-protocol.md, "The commitment in
// the answer"). The bytes must be the event as held here with one more
// signature, the counterparty agent's event_append, which verifies; the
// event must be this instance's, pending at the head of this copy. The
// same countersignature again (a redelivery) is answered with nothing and
// stores nothing. The answer is empty.
func (e *Engine) receiveCountersignature(ctx context.Context, r *receipt) ([][]byte, error) {
	ev := object.AsEvent(r.objs[0]) // Receive found one event, this instance's
	if err := gateCheck(ev.View, false); err != nil {
		return nil, err
	}
	x, err := e.db.EventAt(ctx, r.txn, ev.Seq())
	switch {
	case errors.Is(err, store.ErrNotFound):
		// It names this instance as its appender, but this instance never
		// appended it.
		return nil, refusef(reason.EvidenceSignatureInvalid, "event %s is not an event this instance appended", ev.ID())
	case err != nil:
		return nil, err
	case x.EventID != ev.ID() || x.AppendedBy != e.org.Config().OrganizationID || x.ContentHash != ev.Hash():
		return nil, refusef(reason.EvidenceHashMismatch, "event %s is not the event of this instance held at position %d", ev.ID(), ev.Seq())
	}
	t, err := e.db.GetTransaction(ctx, r.txn)
	if err != nil {
		return nil, err
	}
	if t.Counterparty != r.from {
		return nil, refusef(reason.StreamMismatch, "transaction %s is held with %s, not %s", r.txn, t.Counterparty, r.from)
	}
	ours, err := e.getEvent(ctx, r.txn, x.EventID)
	if err != nil {
		return nil, err
	}
	if x.Status == store.EventRecorded {
		return e.keepAnswer(ctx, r, nil) // countersigned before: nothing more to store
	}
	got, err := e.checkCountersigned(ctx, r.from, ours, [][]byte{ev.Raw()})
	if err != nil {
		return nil, err
	}
	e.point("countersignature.before-store")
	if err := e.update(ctx, r.txn, func(tx *store.Txn) error {
		if err := e.recordCountersigned(tx, []*Obj{ours.View}, got); err != nil {
			return err
		}
		return tx.PutInbox(r.from, r.key, r.txn, nil, r.now) // answered with nothing, readable as such
	}); err != nil {
		return nil, err
	}
	e.point("countersignature.after-store")
	e.log.Info("countersignature stored", "transaction_id", r.txn, "sequence", ev.Seq(), "event_type", ev.EventType(), "from", r.from)
	return nil, nil
}

// keepAnswer records reply, an answer Receive drew from the record (the
// same event again, an own event countersigned before, an agreement
// signed before) rather than stored with what the message moved, as the
// answer to r's message, and returns it. A carrier that serves the
// answer apart from the message reads it there (the plain HTTPS
// binding's 202, then GET on its Location, which Reply answers), as A2A
// carries it in its response; a copy of the message that comes later is
// answered from the row. The row names the objects, as every inbox row
// does, so it reads them as the record holds them.
func (e *Engine) keepAnswer(ctx context.Context, r *receipt, reply [][]byte) ([][]byte, error) {
	ids := make([]string, len(reply))
	for i, b := range reply {
		o, err := e.parse(b)
		if err != nil {
			return nil, err
		}
		ids[i] = o.ID()
	}
	err := e.update(ctx, "", func(tx *store.Txn) error { return tx.PutInbox(r.from, r.key, r.txn, ids, r.now) })
	if errors.Is(err, store.ErrConflict) {
		return e.db.InboxReply(ctx, r.from, r.key) // a copy answered meanwhile
	}
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// putReceived stores an object that travelled with a message; the same
// object held already is not an error, with other signatures or not (the
// held copy stands). An object under the id of one this transaction holds
// with another content is refused: the checks read the message's copy,
// and the countersignature would vouch for a record that holds the other
// (two objects claiming one identity, the verifier's id_unique rule and
// code). An offer, obligation or dispute under an id another
// transaction's holds is refused: an agent names those by id alone, so
// one id names one transaction's (store.NamedObjectTransaction). Either
// way the message records nothing.
func putReceived(tx *store.Txn, o *Obj, from string) error {
	err := tx.PutVerified(info(o), o.Raw(), from)
	switch {
	case errors.Is(err, store.ErrOtherContent):
		return refusef(reason.EvidenceChainGap, "%s %s is held here with another content: two objects claim one identity", o.Type(), o.ID())
	case errors.Is(err, store.ErrHeldElsewhere):
		return refusef(reason.StreamMismatch, "%s %s is held here in another transaction than %s", o.Type(), o.ID(), o.Txn())
	case err != nil && !errors.Is(err, store.ErrConflict):
		return err
	}
	return nil
}

// position settles where an event stands against this copy. done is true
// when the answer is already known: the same event recorded before is
// answered with the countersigned bytes held; a different event at a
// recorded position is a fork, refused and kept; one at the position of an
// event of this instance still pending meets it (see yieldPosition); one
// that does not extend the head is a gap.
func (e *Engine) position(ctx context.Context, r *receipt, ev *Event) ([][]byte, error, bool) {
	seq := ev.Seq()
	if seq < 1 {
		return nil, refusef(reason.EvidenceChainGap, "event %s has no sequence", ev.ID()), true
	}
	if x, err := e.db.EventAt(ctx, r.txn, seq); err == nil {
		switch {
		case x.ContentHash == ev.Hash() && x.Status == store.EventRecorded:
			held, err := e.db.GetObject(ctx, r.txn, x.EventID)
			if err != nil {
				return nil, err, true
			}
			out := [][]byte{held}
			if spec, ok := e.acts.event(ev.EventType()); ok && spec.answer != nil {
				more, err := spec.answer(ctx, e, r.txn, ev)
				if err != nil {
					return nil, err, true
				}
				out = append(out, more...)
			}
			return out, nil, true // the same event again: the same answer
		case x.Status == store.EventRecorded:
			detail := fmt.Sprintf("event %s at position %d of %s conflicts with event %s held there", ev.ID(), seq, r.txn, x.EventID)
			_ = e.update(ctx, r.txn, func(tx *store.Txn) error {
				return tx.RecordFork(r.txn, seq, ev.ID(), ev.Hash(), ev.Raw(), r.from, detail)
			})
			e.log.Warn("fork refused and kept", "transaction_id", r.txn, "sequence", seq, "event_id", ev.ID(), "held", x.EventID)
			return nil, fmt.Errorf("%w: %w", delivery.ErrConflict, refusef(reason.EvidenceChainGap, "%s", detail)), true
		case x.AppendedBy == e.org.Config().OrganizationID && ev.EventType() == protocol.EvDeadlineElapsed &&
			x.EventType == string(protocol.EvAgreementDirect):
			// This instance accepted the offer before its deadline and the
			// acceptance is on its way: the offer did not lapse unaccepted
			// (deadlines.go), whoever's identifier sorts first.
			return nil, refusef(reason.StateTransitionDenied, "an acceptance of the offer, made before its deadline, is on its way to %s: the transaction does not expire", r.from), true
		case x.AppendedBy == e.org.Config().OrganizationID && r.from < e.org.Config().OrganizationID:
			// Both parties appended at one position at once; the party
			// whose identifier sorts first keeps its event, on both sides,
			// so the two copies agree without a round of refusals.
			r.yielding = x.EventID
			return nil, nil, false
		default:
			return nil, refusef(reason.SequenceConflict, "an event of %s is pending at position %d of %s; the counterparty's event %s meets it there",
				e.org.Config().OrganizationID, seq, r.txn, ev.ID()), true
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err, true
	}
	if seq != r.st.t.HeadSequence+1 || ev.Previous() != r.st.t.HeadHash {
		return nil, refusef(reason.EvidenceChainGap, "event %s (position %d, predecessor %v) does not extend this record (head %d, %s)",
			ev.ID(), seq, ev.Payload()["previous_event_hash"], r.st.t.HeadSequence, r.st.t.HeadHash), true
	}
	return nil, nil, false
}

// pendingActObjects returns the objects this instance's own pending act,
// whose event is eventID, carries (but the approvals, held before it).
func (e *Engine) pendingActObjects(ctx context.Context, txn, eventID string) map[string]bool {
	out := map[string]bool{}
	msgs, err := e.db.TransactionOutbox(ctx, txn)
	if err != nil {
		return out
	}
	for _, m := range msgs {
		objs, err := e.message(m)
		if err != nil || len(objs) == 0 || objs[len(objs)-1].ID() != eventID {
			continue
		}
		for _, o := range objs {
			if o.Type() != protocol.Approval {
				out[o.ID()] = true
			}
		}
	}
	return out
}

// yieldPosition removes, inside the transaction that countersigns the
// counterparty's event, this instance's own pending event at the same
// position and the act it carried, when position found the counterparty's
// keeps the place (the two appended at once).
func (e *Engine) yieldPosition(tx *store.Txn, r *receipt) error {
	ev := messageEvent(r.objs)
	x, err := tx.EventAt(r.txn, ev.Seq())
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	msgs, err := e.db.TransactionOutbox(context.Background(), r.txn)
	if err != nil {
		return err
	}
	cause := refusef(reason.SequenceConflict, "the counterparty appended event %s at position %d at the same time; its event keeps the place", ev.ID(), ev.Seq())
	for _, m := range msgs {
		objs, err := e.message(m)
		if err != nil || objs[len(objs)-1].ID() != x.EventID {
			continue
		}
		for _, o := range objs {
			switch o.Type() {
			case protocol.Approval:
			case protocol.TransactionEvent:
				if err := tx.DeletePendingEvent(r.txn, object.AsEvent(o).Seq(), o.ID()); err != nil {
					return err
				}
			default:
				if err := tx.DeleteObject(o.Txn(), o.ID()); err != nil {
					return err
				}
			}
		}
		if err := tx.SetNotice(r.txn, notice(cause, r.now)); err != nil {
			return err
		}
		return tx.Failed(m.ID, cause.Error(), r.now)
	}
	return tx.DeletePendingEvent(r.txn, x.Sequence, x.EventID)
}

// carries refuses a message whose objects beside the event are not the
// act's own: at most limit[type] objects of each listed type (-1: any
// number) and nothing else. What a countersigner stores with an event is
// what both records hold, so nothing rides along unchecked. A policy
// decision and an approval may always travel: the decision is required,
// and the approval is what a held act was released by.
func carries(eventType protocol.EventType, support []*Obj, limit map[protocol.ObjectType]int) error {
	n := map[protocol.ObjectType]int{}
	for _, o := range support {
		t := o.Type()
		n[t]++
		max, ok := limit[t]
		switch t {
		case protocol.PolicyDecision, protocol.Approval:
			if !ok {
				max, ok = 1, true
			}
		}
		if !ok || max >= 0 && n[t] > max {
			return reason.Refuse(fmt.Sprintf("a %s message does not carry %s %s", eventType, t, o.ID()))
		}
	}
	return nil
}
