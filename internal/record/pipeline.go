package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// state is a transaction as an act or a receipt sees it, loaded under the
// transaction's lock.
type state struct {
	t     store.Transaction
	known bool // the transaction is held here
	now   time.Time
	// excluded are objects held here that are not part of the record a
	// received event extends: those of this instance's own act at the
	// same position, which gives way to it (yieldPosition).
	excluded map[string]bool
}

// State is the aggregate state.
func (s *state) State() protocol.State { return protocol.State(s.t.State) }

// Role is this organisation's role in it.
func (s *state) Role() protocol.Role { return protocol.Role(s.t.Role) }

// load reads a transaction's row.
func (e *Engine) load(ctx context.Context, txn string, now time.Time) (*state, error) {
	st := &state{now: now}
	t, err := e.db.GetTransaction(ctx, txn)
	switch {
	case err == nil:
		st.t, st.known = t, true
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return st, nil
}

// opening is what an act that opens a transaction records about it.
type opening struct {
	counterparty string
	role         protocol.Role
	session      string
}

// actSpec is one act: its preconditions and its build function. perform
// runs every act through the same pipeline.
type actSpec struct {
	name protocol.Act
	// actor is whom the act is taken for: its mandate must be one actor
	// may act under (Actor).
	actor      Actor
	txn        string
	mandateID  string
	approvalID string
	// event is the event the act appends; "" for an act recorded by its
	// objects alone (an offer, a withdrawal, a waiver).
	event protocol.EventType
	// open, for an act that may open the transaction (an offer), says what
	// to record when it is not held yet.
	open *opening
	// check runs under the lock on the loaded state; a refusal stops the
	// act before anything is decided or signed.
	check func(ctx context.Context, st *state) error
	// act returns the proposed terms and references of the act document
	// policy evaluates (decisions.md 6).
	act func(ctx context.Context, st *state) (terms, refs map[string]any, err error)
	// build makes the act's objects (b.add) and its event's data (b.data).
	build func(ctx context.Context, st *state, b *builder) error
	// locked says the caller already holds the transaction's lock.
	locked bool
	// inTx, when set, runs inside the act's commit transaction: storing
	// the reply this act answers, say.
	inTx func(tx *store.Txn) error
	// decisionSeq overrides the position the decision is made for (an act
	// without an event: the position it stands at).
	decisionSeq func(st *state) int
	// after, with inTx, makes the loaded state what inTx leaves it as, so
	// that the act is checked, decided and built on it (the reply inTx
	// stores records the event this act follows).
	after func(st *state)
	// finish, when set, makes the act's outcome of what the pipeline
	// returned (act.perform): an instruction recorded is handed to its
	// rail; the same instruction again is answered with its first outcome.
	finish func(ctx context.Context, out Outcome, err error) (Outcome, error)
}

// builder collects what an act makes.
type builder struct {
	e         *Engine
	st        *state
	txn       string
	mandateID string
	agent     string // the acting agent: the mandate's subject
	now       time.Time
	created   []*Obj // the act's new objects, in message order
	carried   []*Obj // objects held before that travel with it (an approval)
	data      map[string]any
	names     map[string]string
	extra     []func(tx *store.Txn) error

	// What a rider is decided under: the act's mandate, counterparty and
	// position.
	mandate      map[string]any
	counterparty string
	seq          int
	riders       []riderDoc
}

// riderDoc is a rider's act as its decision evaluated it, kept beside the
// message so that a renewal decides it again.
type riderDoc struct {
	Act      protocol.Act   `json:"act"`
	Document map[string]any `json:"document"`
	// ApprovalID is the approval that released the rider, when its
	// mandate held it (it travels with the message).
	ApprovalID string `json:"approval_id,omitempty"`
	// Seq is the position the rider is decided for when it is not the
	// act's own (0: the act's).
	Seq int `json:"seq,omitempty"`
	// Optional marks a rider the act goes without when its mandate no
	// longer allows it (rideIfAllowed): a renewal drops it instead of
	// removing the act.
	Optional bool `json:"optional,omitempty"`
}

// ride makes o, one of the act's new objects, a rider: a further act of
// this party that the act's event carries besides the one its data names
// (authority.ObjectAct: a second obligation issued with the first, an
// assertion of each obligation still owed, a response to each outstanding
// assertion, the duties an amendment adds or waives). It is decided by
// this instance's own evaluator like any act, at the event's position,
// without an approval: a rider held for approval holds the whole act.
func (b *builder) ride(ctx context.Context, o *Obj) error {
	name, terms, refs, why := authority.ObjectAct(o.Value(), b.lookup(ctx))
	if why != "" {
		return errf("rider %s: %s", o.ID(), why)
	}
	return b.rideAct(ctx, name, terms, refs)
}

// rideAct is ride for a rider whose act document the caller rebuilds
// itself (a dispute riding the exception it opens): the same decision, at
// the event's position, kept for renewal.
func (b *builder) rideAct(ctx context.Context, name protocol.Act, terms, refs map[string]any) error {
	d, err := b.e.ownDecision(ctx, b.mandate, name, b.txn, b.counterparty, terms, refs, nil, b.seq)
	if err != nil {
		return err
	}
	b.created = append(b.created, d.pol)
	rd := riderDoc{Act: name, Document: d.doc}
	if d.approval != nil {
		// The principal's approval that released the rider travels too.
		rd.ApprovalID = d.approval.ID()
		if !slices.ContainsFunc(b.carried, func(o *Obj) bool { return o.ID() == rd.ApprovalID }) {
			b.carried = append(b.carried, d.approval)
		}
	}
	b.riders = append(b.riders, rd)
	return nil
}

// rideIfAllowed makes the act name, at position seq, a rider when this
// organisation's policy allows it now: an allow, or a hold the principal
// has already released for this exact act. Otherwise nothing rides and
// nothing is filed for the principal; the act goes on without it and
// reports false. The offeree's agreement.sign rides its acceptance this
// way (docs/record-protocol.md, "The commitment in the answer").
func (b *builder) rideIfAllowed(ctx context.Context, name protocol.Act, terms, refs map[string]any, seq int) (bool, error) {
	d, ok, err := b.e.mayDecide(ctx, b.mandate, name, b.txn, b.counterparty, terms, refs, seq)
	if err != nil || !ok {
		return false, err
	}
	b.created = append(b.created, d.pol)
	rd := riderDoc{Act: name, Document: d.doc, Seq: seq, Optional: true}
	if d.approval != nil {
		rd.ApprovalID = d.approval.ID()
		if !slices.ContainsFunc(b.carried, func(o *Obj) bool { return o.ID() == rd.ApprovalID }) {
			b.carried = append(b.carried, d.approval)
		}
	}
	b.riders = append(b.riders, rd)
	return true, nil
}

// lookup resolves an object by id among the act's new objects, then the
// record.
func (b *builder) lookup(ctx context.Context) authority.Lookup {
	return func(id string) map[string]any {
		for _, o := range b.created {
			if o.ID() == id {
				return o.Value()
			}
		}
		return b.e.lookupHeld(ctx, b.txn, id)
	}
}

// add makes one new object of the act, signed for purpose.
func (b *builder) add(t protocol.ObjectType, payload map[string]any, purpose string) (*Obj, error) {
	return b.addWithID(t, payload, purpose, "")
}

// addWithID is add under a chosen id.
func (b *builder) addWithID(t protocol.ObjectType, payload map[string]any, purpose, id string) (*Obj, error) {
	o, err := b.e.newObject(t, b.txn, b.mandateID, payload, purpose, b.now, id)
	if err != nil {
		return nil, err
	}
	b.created = append(b.created, o)
	return o, nil
}

// name records an object's id in the act's outcome under a role.
func (b *builder) name(role, id string) {
	if b.names == nil {
		b.names = map[string]string{}
	}
	b.names[role] = id
}

// also runs fn inside the act's commit transaction.
func (b *builder) also(fn func(tx *store.Txn) error) { b.extra = append(b.extra, fn) }

// pendingAct is what the outbox keeps beside an act's message: enough to
// decide the act again (renewal) and to settle its reply.
type pendingAct struct {
	Act        protocol.Act   `json:"act"`
	MandateID  string         `json:"mandate_id"`
	Document   map[string]any `json:"document"`
	ApprovalID string         `json:"approval_id,omitempty"`
	Seq        int            `json:"seq"`
	// Riders are the documents of the further acts the message carries
	// (builder.ride), each with a decision of its own.
	Riders []riderDoc `json:"riders,omitempty"`
}

// performAct runs one act: lock, load, check, own mandate, decide (with
// the approval presented), build, event, commit the act with its message,
// and deliver. Every act goes through here (perform counts it).
func (e *Engine) performAct(ctx context.Context, spec actSpec) (Outcome, error) {
	ctx = store.WithKeyVersionMemo(ctx) // the key records read once between two commits
	now := e.clock().UTC().Truncate(time.Second)
	if !spec.locked {
		unlock := e.lock(spec.txn)
		defer unlock()
	}
	st, err := e.load(ctx, spec.txn, now)
	if err != nil {
		return Outcome{}, err
	}
	if spec.after != nil {
		spec.after(st)
	}
	if !st.known && spec.open == nil {
		return Outcome{}, refusef(reason.StateTransitionDenied, "transaction %s is unknown to this instance; call list_transactions", spec.txn)
	}
	if spec.check != nil {
		if err := spec.check(ctx, st); err != nil {
			return Outcome{}, err
		}
	}
	mandate, err := e.ownMandate(ctx, spec.actor, spec.mandateID)
	if err != nil {
		return Outcome{}, err
	}
	var approval *Obj
	if spec.approvalID != "" {
		var ok bool
		if approval, ok = e.getTyped(ctx, spec.txn, spec.approvalID, protocol.Approval); !ok {
			// An approval is its act's transaction's (store, migration
			// 26): one given for an act on another transaction is not
			// this one's, whatever it approved.
			return Outcome{}, refusef(reason.ApprovalRequired, "approval %s is not held for transaction %s", spec.approvalID, spec.txn)
		}
	}
	terms, refs, err := spec.act(ctx, st)
	if err != nil {
		return Outcome{}, err
	}
	counterparty := st.t.Counterparty
	if !st.known {
		counterparty = spec.open.counterparty
	}
	seq := st.t.HeadSequence + 1
	if spec.decisionSeq != nil {
		seq = spec.decisionSeq(st)
	}
	d, err := e.ownDecision(ctx, mandate, spec.name, spec.txn, counterparty, terms, refs, approval, seq)
	if err != nil {
		return Outcome{}, err
	}
	b := &builder{e: e, st: st, txn: spec.txn, mandateID: spec.mandateID, agent: str(object.Sub(mandate, "subject")["agent_id"]), now: now, data: map[string]any{},
		mandate: mandate, counterparty: counterparty, seq: seq}
	approvalID := ""
	if d.approval != nil && d.res.Approval == authority.ApprovalVerified {
		// An approval travels when the mandate asked for it; one given
		// for a budget of this organisation's (budgets.go) stays here.
		b.carried = append(b.carried, d.approval)
		approvalID = d.approval.ID()
	}
	role := st.Role()
	if !st.known {
		role = spec.open.role
	}
	sp := spendingOf(spec.name, role, spec.txn, counterparty, b.agent, terms)
	if sp != nil {
		sp.act = d.pol.ID()
		sp.instruction = func() string { return b.names["settlement_instruction"] }
	}
	if spec.build != nil {
		if err := spec.build(ctx, st, b); err != nil {
			return Outcome{}, err
		}
	}
	b.created = append(b.created, d.pol)
	b.name("policy_decision", d.pol.ID())
	var ev *Event
	var row store.Event
	if spec.event != "" {
		if ev, row, err = e.prepareEvent(st, spec.event, b.data, d.pol, spec.mandateID, now); err != nil {
			return Outcome{}, err
		}
		b.name("event", ev.ID())
	}
	act, err := json.Marshal(pendingAct{Act: spec.name, MandateID: spec.mandateID, Document: d.doc, ApprovalID: approvalID, Seq: seq, Riders: b.riders})
	if err != nil {
		return Outcome{}, err
	}
	msg := append(append([]*Obj{}, b.carried...), b.created...)
	if ev != nil {
		msg = append(msg, ev.View)
	}
	e.point(string(spec.name) + ".before-commit")
	var queued store.OutboxMessage
	released := false // the principal approved this act above a budget's threshold
	for {
		err = e.update(ctx, spec.txn, func(tx *store.Txn) error {
			if !st.known {
				o := spec.open
				if err := tx.CreateTransaction(spec.txn, o.counterparty, string(o.role), o.session, string(protocol.Draft)); err != nil {
					return err
				}
			}
			if spec.inTx != nil {
				if err := spec.inTx(tx); err != nil {
					return err
				}
			}
			if ev != nil {
				t, err := tx.Transaction(spec.txn)
				if err != nil {
					return err
				}
				if t.HeadSequence+1 != row.Sequence {
					return refusef(reason.SequenceConflict, "transaction %s moved while the act was prepared", spec.txn)
				}
				if _, err := tx.EventAt(spec.txn, row.Sequence); err == nil {
					return refusef(reason.SequenceConflict, "an event is already pending at position %d of %s: wait for its countersignature", row.Sequence, spec.txn)
				}
			}
			for _, o := range b.created {
				if err := tx.PutVerified(info(o), o.Raw(), originLocal); err != nil {
					return err
				}
			}
			if ev != nil {
				if err := tx.PutVerified(info(ev.View), ev.Raw(), originLocal); err != nil {
					return err
				}
				if err := tx.InsertEvent(row); err != nil {
					return err
				}
			}
			for _, fn := range b.extra {
				if err := fn(tx); err != nil {
					return err
				}
			}
			if sp != nil {
				if err := sp.record(tx, now, released); err != nil {
					return err
				}
			}
			if err := recordRequest(ctx, tx, spec.txn, b.names); err != nil {
				return err
			}
			var err error
			queued, err = e.enqueue(tx, counterparty, spec.txn, msg, act, now)
			return err
		})
		var stop *budgetStop
		if !errors.As(err, &stop) {
			break
		}
		// A budget stopped the act: denied, or held unless the principal
		// approved it, when it is recorded again with the approval.
		if released, err = e.budgetRefusal(ctx, stop, spec.mandateID, d, approval, now); err != nil {
			return Outcome{}, err
		}
	}
	if err != nil {
		return Outcome{}, err
	}
	requestRecorded(ctx)
	e.point(string(spec.name) + ".after-commit")
	if err := e.deliverNow(ctx, queued); err != nil {
		return Outcome{}, err
	}
	out, err := e.outcome(ctx, spec.txn, b.names)
	if err != nil {
		return out, err
	}
	if ev == nil && out.Status == StatusRecorded {
		out.Status = StatusDelivered
	}
	return out, nil
}

// originLocal marks objects this instance made.
const originLocal = "local"

// enqueue stores a message inside the act's transaction, leased to this
// process so that the act attempts it at once without racing the worker.
func (e *Engine) enqueue(tx *store.Txn, peer, txn string, msg []*Obj, act []byte, now time.Time) (store.OutboxMessage, error) {
	raws := make([][]byte, len(msg))
	vals := make([]map[string]any, len(msg))
	for i, o := range msg {
		raws[i], vals[i] = o.Raw(), o.Value()
	}
	// The bytes are this instance's canonical encoding (or held bytes a
	// carrier checked when they came): the members are what is judged.
	if err := delivery.CheckDecoded(txn, vals); err != nil {
		return store.OutboxMessage{}, err
	}
	return tx.Enqueue(peer, txn, delivery.MessageKey(txn, raws), raws, act, now, e.out.Lease())
}

// deliverNow makes the first attempt at a message the caller enqueued
// leased and holds the transaction's lock for. A refusal of the act is
// returned; anything else (delivered, or queued for retry) is not an
// error: the outcome reads where the record stands.
//
// A countersignature handed to the worker (handOn) and not yet sent goes
// first, from here: the transaction's messages leave in the order they
// were queued, and the act need not wait for the worker.
func (e *Engine) deliverNow(ctx context.Context, m store.OutboxMessage) error {
	if id, ok := e.handed.Load(m.TransactionID); ok && id.(int64) < m.ID {
		if cur, err := e.db.GetOutbox(ctx, id.(int64)); err == nil && cur.Status == store.OutboxPending {
			_ = e.send(ctx, cur)
		}
		e.handed.CompareAndDelete(m.TransactionID, id)
	}
	return e.send(ctx, m)
}

// handOn gives the outbox worker a message this instance queued leased to
// itself but does not wait for: the countersignature it sends back after
// committing an event that came in an answer (settleCommitted). The worker
// sends it without a lease of its own to write (delivery.Outbox.Hand).
func (e *Engine) handOn(m store.OutboxMessage) {
	e.handed.Store(m.TransactionID, m.ID)
	e.out.Hand(m)
}

// countersignatureOf returns the counterparty's event a message of this
// instance carries back countersigned (handOn), or nil for any other
// message.
func (e *Engine) countersignatureOf(objs []*Obj) *Event {
	if ev := messageEvent(objs); len(objs) == 1 && ev != nil && ev.Org() != e.org.Config().OrganizationID {
		return ev
	}
	return nil
}

// Attempt implements delivery.Handler: the worker hands over a due message
// it leased; the engine takes the transaction's lock and makes the attempt
// the act would have made.
func (e *Engine) Attempt(ctx context.Context, m store.OutboxMessage) {
	unlock := e.lock(m.TransactionID)
	defer unlock()
	cur, err := e.db.GetOutbox(ctx, m.ID)
	if err != nil || cur.Status != store.OutboxPending {
		return // settled meanwhile
	}
	if err := e.send(ctx, cur); err != nil {
		e.log.Warn("the counterparty refused a queued act; it was removed", "transaction_id", m.TransactionID, "codes", reason.CodesOf(err), "error", err)
	}
}

// send delivers m and settles the answer: a reply is stored with what it
// moves, a refusal removes the act (or renews it), a failure worth
// retrying leaves it queued. It returns the refusal when the act was
// removed.
func (e *Engine) send(ctx context.Context, m store.OutboxMessage) error {
	return e.sendOnce(ctx, m, true)
}

// sendOnce is send; renew says a refusal for a decision grown stale may
// renew the act and send it again at once (once: the renewed message is
// sent with renew false).
func (e *Engine) sendOnce(ctx context.Context, m store.OutboxMessage, renew bool) error {
	msg, err := e.out.Send(ctx, m)
	switch {
	case err == nil:
		e.peerSeen(ctx, m.Peer)
		// The carrier's decoding of the reply's bytes, when it checked
		// them, is their view (parse finds them kept).
		for i, b := range msg.Objects {
			if v := msg.Value(i); v != nil {
				e.remember(b, v)
			}
		}
		e.point("reply.received")
		if err := e.settle(ctx, m, msg.Objects); err != nil {
			// A reply that cannot be stored is not lost: the message stays
			// pending and the peer answers its redelivery from its inbox.
			e.log.Error("a reply could not be stored; the message will be sent again", "transaction_id", m.TransactionID, "id", m.ID, "error", err)
			e.out.Retry(context.WithoutCancel(ctx), m, err)
		}
		return nil
	case errors.Is(err, delivery.ErrQueued):
		if errors.Is(err, delivery.ErrUnavailable) && !slices.Contains(reason.CodesOf(err), reason.ApprovalRequired) {
			e.peerAway(m.Peer) // unreachable; not an act it holds for approval
		}
		if slices.Contains(reason.CodesOf(err), reason.ApprovalRequired) {
			// The counterparty holds its part for its principal's
			// approval; the message is asked again, and the agent is told
			// why it waits.
			now := e.clock()
			if err := e.db.Update(ctx, func(tx *store.Txn) error { return tx.SetNotice(m.TransactionID, notice(err, now)) }); err != nil {
				e.log.Warn("could not note that the counterparty holds an act for approval", "transaction_id", m.TransactionID, "error", err)
			}
		}
		return nil
	default:
		if renew && slices.Contains(reason.CodesOf(err), reason.MandateStatusUnresolved) && len(m.Act) > 0 {
			// The counterparty did not take the act: its decision grew
			// older than it allows (the message waited out an outage) or
			// the mandate's status could not be resolved there. It is
			// decided again now and sent at once, not after the back-off,
			// when it would be stale again.
			fresh, rerr := e.renewNow(ctx, m)
			if rerr == nil {
				return e.sendOnce(ctx, fresh, false)
			}
			err = rerr
			if !isRefusal(rerr) {
				e.log.Error("renewing a refused act failed; it is tried again later", "transaction_id", m.TransactionID, "error", rerr)
				e.out.Retry(context.WithoutCancel(ctx), m, rerr)
				return nil
			}
			e.rollback(ctx, m, err)
			return err
		}
		return e.refused(ctx, m, err)
	}
}

// peerSeen makes every message waiting out a back-off for peer due now,
// when peer was away (peerAway, timing.go): it answered this instance, or
// sent it a message, so what waits for it need not wait for a back-off of
// up to five minutes to end. Cheap when peer was not away: a map lookup.
func (e *Engine) peerSeen(ctx context.Context, peer string) {
	v, gone := e.away.LoadAndDelete(peer)
	if !gone {
		return
	}
	if a := v.(*away); a.alerted.Load() {
		e.log.Info("a counterparty answers again", "peer", peer, "away_since", envelope.Timestamp(a.since))
		e.alert(Alert{Kind: AlertPeerReachable, Counterparty: peer, At: a.since})
	}
	n, err := e.db.OutboxDueNow(context.WithoutCancel(ctx), peer, e.clock())
	if err != nil {
		e.log.Warn("making the messages that waited for a peer due failed; they go when their back-off ends", "peer", peer, "error", err)
		return
	}
	if n > 0 {
		e.log.Info("a peer answers again: the messages that waited for it are due now", "peer", peer, "messages", n)
		e.out.Poke()
	}
}

// message decodes an outbox message's objects.
func (e *Engine) message(m store.OutboxMessage) ([]*Obj, error) {
	out := make([]*Obj, 0, len(m.Objects))
	for _, b := range m.Objects {
		o, err := e.parse(b)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// settle stores the reply to one of this instance's messages, with what it
// moves, in one database transaction that also deletes the message, then
// continues the transaction where it stands.
func (e *Engine) settle(ctx context.Context, m store.OutboxMessage, reply [][]byte) error {
	objs, err := e.message(m)
	if err != nil {
		return err
	}
	last := objs[len(objs)-1]
	switch {
	case e.countersignatureOf(objs) != nil:
		// A countersignature sent back: nothing comes in answer, and the
		// record here is complete already.
		if len(reply) != 0 {
			return errf("%s answered a countersignature with %d objects", m.Peer, len(reply))
		}
		defer e.handed.CompareAndDelete(m.TransactionID, m.ID)
		if err := e.update(ctx, m.TransactionID, func(tx *store.Txn) error { return tx.Delivered(m.ID) }); err != nil {
			return err
		}
		e.point("reply.after-store")
		return nil
	case messageEvent(objs) != nil:
		if agr := travelling(objs); agr != nil && messageEvent(objs).EventType() == protocol.EvAgreementDirect && e.answers(reply, agr.ID()) {
			// The offeror signed the agreement that travelled with the
			// acceptance: stored with agreement.committed, which follows.
			return e.settleDirect(ctx, m, objs, agr, reply)
		}
		next, queued, err := e.proposedWith(ctx, m, objs)
		if err != nil {
			// The reply is stored regardless; advance tries the step
			// again, as it does after a restart.
			e.log.Warn("could not draft the step that follows the event; it is tried again after the reply is stored", "transaction_id", m.TransactionID, "error", err)
			next, queued = nil, nil
		}
		if err := e.settleEvent(ctx, m, objs, reply, next); err != nil {
			return err
		}
		if queued != nil {
			e.point("reply.after-store")
			return e.deliverNow(ctx, *queued)
		}
	case len(objs) == 1 && last.Type() == protocol.Agreement:
		return e.settleCosigned(ctx, m, last, reply)
	default:
		if len(reply) != 0 {
			return errf("%s answered a message that carries no event with %d objects", m.Peer, len(reply))
		}
		err := e.update(ctx, m.TransactionID, func(tx *store.Txn) error {
			// What an act recorded by its objects alone moves (a waiver)
			// counts here once the counterparty has taken it.
			if err := e.applyObjects(tx, objs); err != nil {
				return err
			}
			return tx.Delivered(m.ID)
		})
		if err != nil {
			return err
		}
	}
	e.point("reply.after-store")
	return e.advance(ctx, m.TransactionID)
}

// settleEvent records one of this instance's events, countersigned: the
// reply must carry the event's exact bytes with one more signature, the
// counterparty agent's event_append, which verifies.
// next, when set, runs in the same transaction after the event is
// recorded (the step that follows from it).
func (e *Engine) settleEvent(ctx context.Context, m store.OutboxMessage, objs []*Obj, reply [][]byte, next func(tx *store.Txn) error) error {
	ours := messageEvent(objs)
	got, err := e.checkCountersigned(ctx, m.Peer, ours, reply)
	if err != nil {
		return err
	}
	// An event whose countersigner also signs an object of the act (an
	// amendment's agreement) answers with it: checked here, stored with the
	// event.
	var also func(tx *store.Txn) error
	if spec, ok := e.acts.event(ours.EventType()); ok && spec.settle != nil {
		if also, err = spec.settle(ctx, e, m, objs, reply); err != nil {
			return err
		}
	}
	return e.update(ctx, m.TransactionID, func(tx *store.Txn) error {
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if err := e.recordCountersigned(tx, objs, got); err != nil {
			return err
		}
		if next != nil {
			if err := next(tx); err != nil {
				return err
			}
		}
		return tx.Delivered(m.ID)
	})
}

// recordCountersigned records the event a message carried last as got,
// its countersigned bytes, and applies what it moves.
func (e *Engine) recordCountersigned(tx *store.Txn, objs []*Obj, got *Event) error {
	ours := messageEvent(objs)
	held, err := tx.GetObject(ours.Txn(), ours.ID())
	if err != nil {
		return err
	}
	if !bytes.Equal(held, got.Raw()) {
		if err := tx.ReplaceVerified(info(got.View), held, got.Raw()); err != nil {
			return err
		}
	}
	row := store.Event{TransactionID: ours.Txn(), Sequence: ours.Seq(), ContentHash: ours.Hash(), ToState: string(ours.To())}
	if err := tx.MarkRecorded(row); err != nil {
		return err
	}
	return e.applyEvent(tx, got, objs)
}

// answers reports whether a reply carries an object with id.
func (e *Engine) answers(reply [][]byte, id string) bool {
	for _, b := range reply {
		if o, err := e.parse(b); err == nil && o.ID() == id {
			return true
		}
	}
	return false
}

// checkCountersigned finds our event in a reply, countersigned.
func (e *Engine) checkCountersigned(ctx context.Context, peer string, ours *Event, reply [][]byte) (*Event, error) {
	e.learnKeys(ctx, peer, reply)
	var got *Obj
	for _, b := range reply {
		if o, err := e.parse(b); err == nil && o.ID() == ours.ID() {
			got = o
		}
	}
	if got == nil {
		return nil, errf("%s's reply carries no countersigned %s", peer, ours.ID())
	}
	ev, err := returnedEvent(peer, ours, got)
	if err != nil {
		return nil, err
	}
	return ev, e.checkCountersignature(ctx, peer, ours, ev)
}

// returnedEvent is o, which peer returned under our event's id, as an
// event: an object of another type under that id is our event with other
// content, refused as verify.Countersigned refuses it.
func returnedEvent(peer string, ours *Event, o *Obj) (*Event, error) {
	if ev := object.AsEvent(o); ev != nil {
		return ev, nil
	}
	return nil, refusef(reason.EvidenceHashMismatch, "%s returned event %s with other content", peer, ours.ID())
}

// checkCountersignature checks got, our event ours as peer returned it,
// by the verifier's rule (verify.Countersigned), the countersignature
// being peer's event_append by one of its agents' keys, active.
func (e *Engine) checkCountersignature(ctx context.Context, peer string, ours, got *Event) error {
	return verify.Countersigned(ours.Value(), got.Value(), peer, func(in []byte, i int) error {
		return e.verifyEntryOver(ctx, got.View, in, i, peer, "agt_")
	})
}

// learnKeys fetches peer's key records again when a reply names a key not
// held (the peer rotated one since the last fetch); a failure leaves the
// check that needs the key to refuse.
func (e *Engine) learnKeys(ctx context.Context, peer string, raw [][]byte) {
	if e.trusted == nil {
		return
	}
	if err := e.trusted.EnsureKnown(ctx, peer, e.signingKeys(raw)); err != nil {
		e.log.Warn("fetching the key records a reply names failed", "peer", peer, "error", err)
	}
}

// refused settles a refusal of one of this instance's messages. A refusal
// for a decision the peer could not rely on (A202-MANDATE-STATUS-
// UNRESOLVED: too old, or its mandate's status unresolvable there) proves
// the peer did not take the act, so it is renewed; any other refusal
// removes the act. It returns the refusal when the act was removed.
func (e *Engine) refused(ctx context.Context, m store.OutboxMessage, cause error) error {
	if slices.Contains(reason.CodesOf(cause), reason.MandateStatusUnresolved) && len(m.Act) > 0 {
		renewed, err := e.renew(ctx, m, cause)
		if err == nil && renewed {
			return nil
		}
		if err != nil {
			cause = err
		}
	}
	e.rollback(ctx, m, cause)
	return cause
}

// rollback removes the act a refused message carried: its pending event
// and the objects it created, in one database transaction with marking
// the message failed. What the agent should know is kept as the
// transaction's notice.
func (e *Engine) rollback(ctx context.Context, m store.OutboxMessage, cause error) {
	objs, err := e.message(m)
	if err != nil {
		e.log.Error("a refused message does not decode", "id", m.ID, "error", err)
		return
	}
	now := e.clock()
	if ev := e.countersignatureOf(objs); ev != nil {
		// Not an act: the event is recorded here, countersigned, whatever
		// the counterparty does with its own copy. Nothing is removed.
		e.log.Error("the counterparty refused this instance's countersignature of its event", "transaction_id", m.TransactionID, "event_id", ev.ID(), "codes", reason.CodesOf(cause), "error", cause)
		if err := e.db.Update(ctx, func(tx *store.Txn) error { return tx.Failed(m.ID, cause.Error(), now) }); err != nil {
			e.log.Error("could not mark a refused message failed", "transaction_id", m.TransactionID, "id", m.ID, "error", err)
		}
		e.handed.CompareAndDelete(m.TransactionID, m.ID)
		return
	}
	var pa pendingAct
	if len(m.Act) > 0 {
		_ = json.Unmarshal(m.Act, &pa)
	}
	err = e.update(ctx, m.TransactionID, func(tx *store.Txn) error {
		removed := false
		for _, o := range objs {
			if pa.Act == protocol.ActOfferWithdraw {
				// A withdrawal stands here whether or not the counterparty
				// takes the notice: nothing it refuses can make this
				// instance countersign the offer's acceptance.
				break
			}
			switch o.Type() {
			case protocol.Approval:
				continue // held before the act; it stays
			case protocol.TransactionEvent:
				if err := tx.DeletePendingEvent(m.TransactionID, object.AsEvent(o).Seq(), o.ID()); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
			default:
				if err := tx.DeleteObject(o.Txn(), o.ID()); err != nil {
					return err
				}
				// What the act committed or paid goes with it (budgets.go).
				if err := tx.Unspend(o.Txn(), []string{o.ID()}); err != nil {
					return err
				}
			}
			removed = true
		}
		if removed {
			// An opening offer the counterparty refused leaves no
			// transaction behind.
			if err := tx.DeleteTransactionIfEmpty(m.TransactionID); err != nil {
				return err
			}
		}
		if err := tx.SetNotice(m.TransactionID, notice(cause, now)); err != nil {
			return err
		}
		return tx.Failed(m.ID, cause.Error(), now)
	})
	if err != nil {
		e.log.Error("could not remove a refused act", "transaction_id", m.TransactionID, "id", m.ID, "error", err)
		return
	}
	e.log.Info("the counterparty refused an act; it was removed", "transaction_id", m.TransactionID, "codes", reason.CodesOf(cause))
}

// notice is what the agent reads about an act that did not go through.
func notice(cause error, now time.Time) string {
	b, _ := json.Marshal(readmodel.Notice{At: envelope.Timestamp(now), Codes: orEmpty(reason.CodesOf(cause)), Detail: refusalDetail(cause)})
	return string(b)
}

func orEmpty(c []reason.Code) []reason.Code {
	if c == nil {
		return []reason.Code{}
	}
	return c
}

func refusalDetail(err error) string {
	var r *reason.Refusal
	if errors.As(err, &r) {
		return r.Detail
	}
	return err.Error()
}

// renewNow renews m's act for sending at once (renew) and returns the
// message as rewritten, leased again to this process; an error when the
// act is no longer allowed (or could not be renewed), which ends it.
func (e *Engine) renewNow(ctx context.Context, m store.OutboxMessage) (store.OutboxMessage, error) {
	renewed, err := e.renewAt(ctx, m, nil, true)
	if err != nil || !renewed {
		if err == nil {
			err = refusef(reason.MandateInactive, "the act is no longer allowed")
		}
		return m, err
	}
	now := e.clock()
	if _, err := e.db.LeaseOutbox(ctx, m.ID, now, e.out.Lease()); err != nil {
		return m, err
	}
	return e.db.GetOutbox(ctx, m.ID)
}

// renew decides a refused act again (see refused). If the agent's mandate
// still allows it now, the stale decision and event are replaced by fresh
// ones, in place in the outbox, and the message goes out again after the
// back-off it earned (a message is renewed again as it is sent, if need
// be: send); renewed is false when the act is no longer allowed, and err
// says why.
func (e *Engine) renew(ctx context.Context, m store.OutboxMessage, cause error) (bool, error) {
	return e.renewAt(ctx, m, cause, false)
}

// renewAt is renew; immediate schedules the renewed message at once (its
// caller sends it) rather than after back-off.
func (e *Engine) renewAt(ctx context.Context, m store.OutboxMessage, cause error, immediate bool) (bool, error) {
	var pa pendingAct
	if err := json.Unmarshal(m.Act, &pa); err != nil {
		return false, err
	}
	objs, err := e.message(m)
	if err != nil {
		return false, err
	}
	mandate, err := e.ownMandate(ctx, instanceActor, pa.MandateID)
	if err != nil {
		return false, err
	}
	agent, s, err := e.actorOf(ctx, pa.MandateID)
	if err != nil {
		return false, err
	}
	req := authority.Request{Mandate: mandate, Act: pa.Document,
		Actor: authority.Actor{OrganizationID: e.org.Config().OrganizationID, AgentID: agent, KeyID: s.KeyID()}}
	if pa.ApprovalID != "" {
		if apr, ok := e.getTyped(ctx, m.TransactionID, pa.ApprovalID, protocol.Approval); ok {
			req.Approval = apr.Value()
		}
	}
	// decide evaluates one of the message's acts again and signs a fresh
	// decision for it; the act's old decision is the one bound to the same
	// action hash.
	decide := func(req authority.Request, seq int) (*Obj, string, error) {
		res := e.org.Evaluator().Evaluate(ctx, req)
		if res.Decision != authority.Allow {
			return nil, "", res.Err()
		}
		pm, err := authority.NewSharedDecision(res, s, seq)
		if err != nil {
			return nil, "", err
		}
		pol, err := e.viewOf(pm)
		return pol, res.ActionHash, err
	}
	pol, leadHash, err := decide(req, pa.Seq)
	if err != nil {
		return false, err
	}
	renewed := map[string]*Obj{leadHash: pol} // action hash → fresh decision
	dropped := map[string]bool{}              // action hashes of optional riders no longer allowed
	riders := pa.Riders[:0:0]
	for _, rd := range pa.Riders {
		rreq := req
		rreq.Act, rreq.Approval = rd.Document, nil
		if rd.ApprovalID != "" {
			if apr, ok := e.getTyped(ctx, m.TransactionID, rd.ApprovalID, protocol.Approval); ok {
				rreq.Approval = apr.Value()
			}
		}
		seq := pa.Seq
		if rd.Seq != 0 {
			seq = rd.Seq
		}
		rp, h, err := decide(rreq, seq)
		if err != nil && rd.Optional && isRefusal(err) {
			// The act goes on without a rider it could always do without.
			h, herr := authority.ActionHash(rd.Document)
			if herr != nil {
				return false, herr
			}
			dropped[h] = true
			continue
		}
		if err != nil {
			return false, err
		}
		renewed[h] = rp
		riders = append(riders, rd)
	}
	pa.Riders = riders
	now := e.clock().UTC().Truncate(time.Second)
	var oldPol *Obj
	var oldEv, ev *Event
	var oldRiders, oldDropped []*Obj
	var row store.Event
	fresh := make([]*Obj, 0, len(objs))
	for _, o := range objs {
		switch {
		case o.Type() == protocol.PolicyDecision && o.Org() == e.org.Config().OrganizationID && dropped[o.P("action_hash")]:
			oldDropped = append(oldDropped, o)
		case o.Type() == protocol.PolicyDecision && o.Org() == e.org.Config().OrganizationID:
			np, ok := renewed[o.P("action_hash")]
			if !ok {
				return false, errf("message %d carries decision %s for an act it does not name", m.ID, o.ID())
			}
			if o.P("action_hash") == leadHash {
				oldPol = o
			} else {
				oldRiders = append(oldRiders, o)
			}
			fresh = append(fresh, np)
		case o.Type() == protocol.TransactionEvent:
			oldEv = object.AsEvent(o)
		default:
			fresh = append(fresh, o)
		}
	}
	if oldPol == nil {
		return false, errf("message %d carries no decision of ours to renew", m.ID)
	}
	if oldEv != nil {
		st, err := e.load(ctx, m.TransactionID, now)
		if err != nil {
			return false, err
		}
		// The event is rebuilt at its own position, on the head it extends,
		// citing the fresh decision.
		st.t.HeadSequence, st.t.HeadHash, st.t.State = oldEv.Seq()-1, oldEv.Previous(), string(oldEv.From())
		if ev, row, err = e.prepareEvent(st, oldEv.EventType(), oldEv.PSub("data"), pol, oldEv.Mandate(), now); err != nil {
			return false, err
		}
		fresh = append(fresh, ev.View)
	}
	act, err := json.Marshal(pendingAct{Act: pa.Act, MandateID: pa.MandateID, Document: pa.Document, ApprovalID: pa.ApprovalID, Seq: pa.Seq, Riders: pa.Riders})
	if err != nil {
		return false, err
	}
	raws := make([][]byte, len(fresh))
	for i, o := range fresh {
		raws[i] = o.Raw()
	}
	next := now.Add(e.out.Backoff(m.Attempts + 1))
	if immediate {
		next = now
	}
	err = e.update(ctx, m.TransactionID, func(tx *store.Txn) error {
		if err := tx.DeleteObject(oldPol.Txn(), oldPol.ID()); err != nil {
			return err
		}
		if err := tx.PutVerified(info(pol), pol.Raw(), originLocal); err != nil {
			return err
		}
		for _, o := range oldRiders {
			np := renewed[o.P("action_hash")]
			if err := tx.DeleteObject(o.Txn(), o.ID()); err != nil {
				return err
			}
			if err := tx.PutVerified(info(np), np.Raw(), originLocal); err != nil {
				return err
			}
		}
		for _, o := range oldDropped {
			if err := tx.DeleteObject(o.Txn(), o.ID()); err != nil {
				return err
			}
		}
		if oldEv != nil {
			if err := tx.DeletePendingEvent(m.TransactionID, oldEv.Seq(), oldEv.ID()); err != nil {
				return err
			}
			if err := tx.PutVerified(info(ev.View), ev.Raw(), originLocal); err != nil {
				return err
			}
			if err := tx.InsertEvent(row); err != nil {
				return err
			}
		}
		if err := tx.RenameWithdrawalDecision(oldPol.ID(), pol.ID()); err != nil {
			return err
		}
		return tx.Rewrite(m.ID, delivery.MessageKey(m.TransactionID, raws), raws, act, next)
	})
	if err != nil {
		return false, err
	}
	e.log.Info("an act was decided again and will be sent with a fresh decision",
		"transaction_id", m.TransactionID, "act", pa.Act, "cause", reason.CodesOf(cause), "stale", immediate, "next_attempt", next)
	e.out.Poke()
	return true, nil
}

// prepareEvent builds and signs this instance's next event on st: it must
// extend the head of this instance's copy, move the state legally under
// RulesVersion, and cite the decision pol. Nothing is stored here.
func (e *Engine) prepareEvent(st *state, eventType protocol.EventType, data map[string]any, pol *Obj, mandateID string, now time.Time) (*Event, store.Event, error) {
	to, ok := rules.Next(RulesVersion, rules.Aggregate, st.t.State, eventType)
	if !ok {
		return nil, store.Event{}, refusef(reason.StateTransitionDenied, "%s is not a legal event in state %s under rules %s", eventType, st.t.State, RulesVersion)
	}
	var prev any
	if st.t.HeadHash != "" {
		prev = st.t.HeadHash
	}
	seq := st.t.HeadSequence + 1
	payload := map[string]any{
		"stream":              map[string]any{"kind": protocol.TransactionStreamKind, "id": st.t.ID},
		"sequence":            seq,
		"event_type":          string(eventType),
		"occurred_at":         envelope.Timestamp(now),
		"previous_event_hash": prev,
		"action_hash":         pol.P("action_hash"),
		"policy_decision_id":  pol.ID(),
		"from_state":          st.t.State,
		"to_state":            to,
		"data":                data,
	}
	o, err := e.newObject(protocol.TransactionEvent, st.t.ID, mandateID, payload, protocol.PurposeEventAppend, now, "")
	if err != nil {
		return nil, store.Event{}, err
	}
	ev := object.AsEvent(o)
	return ev, eventRow(ev, e.org.Config().OrganizationID), nil
}

// outcome reads where a transaction stands after an act.
func (e *Engine) outcome(ctx context.Context, txn string, names map[string]string) (Outcome, error) {
	t, err := e.db.GetTransaction(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{TransactionID: txn, Status: StatusRecorded, State: protocol.State(t.State), Objects: names}
	msgs, err := e.db.TransactionOutbox(ctx, txn)
	if err != nil {
		return out, err
	}
	for _, m := range msgs {
		if objs, err := e.message(m); err == nil && e.countersignatureOf(objs) != nil {
			// A countersignature on its way back: this copy has recorded
			// the event; the counterparty's copy follows when it arrives.
			continue
		}
		out.Status = StatusPending
		out.WaitingFor = e.waitingFor(t, m)
		break
	}
	return out, nil
}

func (e *Engine) waitingFor(t store.Transaction, m store.OutboxMessage) string {
	retry := ""
	if m.Attempts > 0 {
		retry = fmt.Sprintf("; %d attempt(s) so far, the next at %s", m.Attempts, envelope.Timestamp(m.NextAttempt))
	}
	return fmt.Sprintf("%s to receive %s; delivery is retried until it answers%s", t.Counterparty, e.carried(m), retry)
}

// carried says what an outbox message carries, for a person.
func (e *Engine) carried(m store.OutboxMessage) string {
	objs, err := e.message(m)
	if err != nil || len(objs) == 0 {
		return "a message"
	}
	last := objs[len(objs)-1]
	if ev := object.AsEvent(last); ev != nil {
		return fmt.Sprintf("the countersignature of %s (event %d)", ev.EventType(), ev.Seq())
	}
	switch last.Type() {
	case protocol.Agreement:
		return "its signature on agreement " + last.ID()
	}
	return fmt.Sprintf("%s %s", last.Type(), last.ID())
}
