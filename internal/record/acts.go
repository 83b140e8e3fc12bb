package record

import (
	"context"
	"fmt"
	"slices"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// The acts, each declared once with both its sides (act), and listed in
// one table (actTable) that both sides read. A line is one
// message an act travels in: an act whose event the counterparty
// countersigns has the line of that event; an act recorded by its
// objects alone (an offer, a withdrawal, a waiver, a proposal) has the
// line of the message that carries them. An act in two halves (a
// termination proposed, then agreed; a remediation offered, then
// accepted) has a line for each.
//
// The act's spec is its acting side (an actSpec for one call, run by
// perform: its check, document and build); its lines say the rest:
//
//   - receiving: how the message is recognised (an event by its type,
//     any other message by what travels in it: recognise), and what the
//     countersigner checks and adds (check, cosign, answer for an event;
//     receive, or the objects' own act for a message without one:
//     objects, through receiveObjects);
//   - state: what the recorded event moves, on both sides, in the commit
//     that records it (apply; offers, when it takes the open offers);
//   - settling: how the appender stores what the countersigner answered
//     besides its countersignature (settle).
//
// Receiving, state derivation and reply settlement dispatch on the table
// (Engine.acts); nothing registers itself. Adding an act is its file,
// declaring its act value, and its name in actTable.
type actLine struct {
	// act is the act the message records (MAN §4's registry); "" for a
	// message that records none (a rail's receipt).
	act protocol.Act
	// event is the event the message carries last; "" for a message
	// without one.
	event protocol.EventType

	// recognise, for a message without an event, says whether the
	// message is this line's, from what travels in it. No two lines
	// recognise one message (TestActTableRecognisesOnce).
	recognise func(r *receipt, n, approvals int) bool
	// receive takes a message without an event whose handling is its own
	// (an offer may open a transaction; an agreement is signed; a receipt
	// moves no state).
	receive func(e *Engine, ctx context.Context, r *receipt) ([][]byte, error)
	// objects, for an act recorded by its objects alone, checks the
	// message and says what the act is (objectAct); receiveObjects does
	// the rest, the same for every such act.
	objects func(ctx context.Context, e *Engine, r *receipt) (objectAct, error)

	// carries bounds what travels beside the event: at most n objects of
	// each listed type (-1: any number), and nothing else.
	carries counts
	// check runs the live checks of the event type.
	check func(ctx context.Context, e *Engine, r *receipt, ev *Event) error
	// uncached re-evaluates the actor's mandate with a status fetched at
	// this moment, not from the cache (an irreversible act).
	uncached bool
	// cosign, when set, is the countersigner's own part of an act whose
	// objects both parties sign (an amendment's agreement): run after every
	// check passed, it returns the objects of the message this instance
	// signs too (stored and answered in place of the received bytes) and
	// its own new objects (its decision), stored and answered with the
	// countersigned event. An event among its own objects is this
	// instance's next event, appended pending after the countersigned one
	// (agreement.committed in the answer to agreement.direct).
	cosign func(ctx context.Context, e *Engine, r *receipt, ev *Event) (signed, own []*Obj, err error)
	// answer rebuilds what cosign answered, for the same event asked for
	// again.
	answer func(ctx context.Context, e *Engine, txn string, ev *Event) ([][]byte, error)
	// settle, on the appending side, checks the objects cosign answered
	// with and returns how to store them with the countersigned event.
	settle func(ctx context.Context, e *Engine, m store.OutboxMessage, objs []*Obj, reply [][]byte) (func(tx *store.Txn) error, error)

	// offers says the event takes the open offer (or, in a final state,
	// every offer): the inbox need not look at the transaction until
	// another arrives (store migration 10; the inbox clears any mark it
	// finds stale).
	offers bool
	// apply moves the obligation states the event records, in the
	// transaction that records it (both the appender's and the
	// countersigner's); objs are the objects that travelled with it.
	apply func(e *Engine, tx *store.Txn, ev *Event, objs []*Obj) error
}

// act is one act, both sides, declared in the act's own file: the
// messages it travels in (lines: how each is recognised, checked and
// countersigned, what it moves, how its reply settles) and how this
// instance performs it for one call (spec: what it needs before the lock,
// then the check, document and build the pipeline runs). actTable lists
// every act.
type act[In any] struct {
	// name is the act (MAN §4's registry), which its lines record unless a
	// line names its own; "" for an entry point that performs either of
	// two acts (a response grants or rejects: the spec names it).
	name  protocol.Act
	lines []actLine
	// spec builds the acting side for one call by a, with in; a refusal
	// here stops the act before the transaction is locked.
	spec func(ctx context.Context, e *Engine, a Actor, in In) (actSpec, error)
}

// perform performs the act for a, with in, through the one pipeline
// (Engine.perform), then lets the act make its outcome of what that
// returned (actSpec.finish).
func (x *act[In]) perform(ctx context.Context, e *Engine, a Actor, in In) (Outcome, error) {
	spec, err := x.spec(ctx, e, a, in)
	if err != nil {
		return Outcome{}, err
	}
	spec.actor = a
	if spec.name == "" {
		spec.name = x.name
	}
	// The acting side appends only what the table's line of its act
	// countersigns: the two sides cannot drift apart.
	if !e.acts.travelsIn(spec.name, spec.event) {
		return Outcome{}, fmt.Errorf("record: act %s would travel as %q, which no line of the act table carries", spec.name, spec.event)
	}
	out, err := e.perform(ctx, spec)
	if spec.finish != nil {
		return spec.finish(ctx, out, err)
	}
	return out, err
}

// messages returns the act's lines, each naming the act it records.
func (x *act[In]) messages() []actLine {
	out := slices.Clone(x.lines)
	for i := range out {
		if out[i].act == "" {
			out[i].act = x.name
		}
	}
	return out
}

// declared is an act as the table lists it.
type declared interface{ messages() []actLine }

// actTable is every message an act travels in (see actLine): the lines
// of every act, each declared in its own file (act), and the rail's
// receipt, which records no act.
func actTable() []actLine {
	var lines []actLine
	for _, a := range tableActs() {
		lines = append(lines, a.messages()...)
	}
	return lines
}

// tableActs are the acts of the table, in its order.
func tableActs() []declared {
	return []declared{
		// Formation (§9): offer, withdrawal, acceptance, the offeror's
		// signature; amendment, cancellation, expiry.
		offerSubmit, offerWithdraw, offerAccept, agreementSign, agreementAmend, transactionCancel, transactionExpire,
		// Performance (obligation §5, §6).
		obligationActivate, performanceDeclare, obligationRespond, obligationWaive,
		// Settlement (settlement §4-§6) and completion.
		settlementInstruct, railReceipt, settlementAdjust, transactionComplete,
		// Ending early (lifecycle §7): termination by agreement.
		terminationPropose, terminationAgree,
		// Disputes and exceptions (dispute §4-§6, exception §3-§5).
		disputeRaise, determinationIssue, exceptionOpen, remediationPropose, remediationAccept, exceptionResolve, transactionTerminate,
	}
}

// railReceipt is a rail's receipt for an instruction, which moves no
// state: a line with no act.
var railReceipt = &only{recognise: alone(protocol.AdapterReceipt), receive: (*Engine).receiveReceipt}

// only is a line that is not an act's.
type only actLine

func (l *only) messages() []actLine { return []actLine{actLine(*l)} }

// counts is what travels beside an event: at most n objects of each type.
type counts = map[protocol.ObjectType]int

// responseCarries is what travels with a response's event: the responses,
// a remainder obligation, and their decisions.
var responseCarries = counts{protocol.ObligationResponse: -1, protocol.Obligation: -1, protocol.PolicyDecision: -1}

// acts is the table, indexed once per engine.
type acts struct {
	byEvent  map[protocol.EventType]*actLine
	messages []*actLine // the lines of messages without an event
}

func indexActs(table []actLine) acts {
	a := acts{byEvent: map[protocol.EventType]*actLine{}}
	for i := range table {
		l := &table[i]
		switch {
		case l.event != "":
			if a.byEvent[l.event] != nil {
				panic(fmt.Sprintf("record: two lines for event %s", l.event))
			}
			a.byEvent[l.event] = l
		case l.recognise != nil && (l.receive != nil) != (l.objects != nil):
			a.messages = append(a.messages, l)
		default:
			panic(fmt.Sprintf("record: the line of act %q neither carries an event nor recognises a message", l.act))
		}
	}
	return a
}

// event returns the line of event type t, if this instance countersigns it.
func (a acts) event(t protocol.EventType) (*actLine, bool) {
	l, ok := a.byEvent[t]
	return l, ok
}

// travelsIn says whether act a travels in a message with event t ("": a
// message without an event), by the table.
func (a acts) travelsIn(name protocol.Act, t protocol.EventType) bool {
	if name == "" {
		return false // the receipt's line is no act's
	}
	if t != "" {
		l, ok := a.byEvent[t]
		return ok && l.act == name
	}
	for _, l := range a.messages {
		if l.act == name {
			return true
		}
	}
	return false
}

// message returns the line that recognises r, a message without an
// event. n counts its objects other than approvals: an act held for
// approval travels with the approval that released it.
func (a acts) message(r *receipt) *actLine {
	approvals := len(r.byType(protocol.Approval))
	n := len(r.objs) - approvals
	for _, l := range a.messages {
		if l.recognise(r, n, approvals) {
			return l
		}
	}
	return nil
}

// The shapes of the messages without an event.

// twoWith: an object of type t and the decision of its act (an offer, a
// waiver), perhaps with the approval that released it.
func twoWith(t protocol.ObjectType) func(r *receipt, n, approvals int) bool {
	return func(r *receipt, n, approvals int) bool {
		return approvals <= 1 && n == 2 && r.one(t) != nil && r.one(protocol.PolicyDecision) != nil
	}
}

// decisionAlone: a decision and nothing else (a withdrawal), perhaps with
// its approval.
func decisionAlone(r *receipt, n, approvals int) bool {
	return approvals <= 1 && n == 1 && r.one(protocol.PolicyDecision) != nil
}

// alone: one object of type t and nothing else.
func alone(t protocol.ObjectType) func(r *receipt, n, approvals int) bool {
	return func(r *receipt, n, approvals int) bool { return len(r.objs) == 1 && r.one(t) != nil }
}

// with: a message carrying one object of type t, whatever else travels
// (its act checks the rest).
func with(t protocol.ObjectType) func(r *receipt, n, approvals int) bool {
	return func(r *receipt, n, approvals int) bool { return r.one(t) != nil }
}

// withOut: a message carrying one object of type t and not one of type
// not (a determination is told apart from a dispute by that).
func withOut(t, not protocol.ObjectType) func(r *receipt, n, approvals int) bool {
	return func(r *receipt, n, approvals int) bool { return r.one(t) != nil && r.one(not) == nil }
}

// signatureOver: a party's signature over a record (evidence whose claim
// is claim) and its decision. The empty claim is the termination record's
// signature, told apart from the others by not being theirs (its checks
// then name what it must be).
func signatureOver(claim string) func(r *receipt, n, approvals int) bool {
	return func(r *receipt, n, approvals int) bool {
		if !twoWith(protocol.Evidence)(r, n, approvals) {
			return false
		}
		c := r.one(protocol.Evidence).P("claim")
		if claim == "" {
			return c != verify.RemediationSignatureClaim && c != ledger.AdjustmentClaim
		}
		return c == claim
	}
}

// objectAct is what a message recording an act by its objects alone is,
// once its own checks passed (actLine.objects).
type objectAct struct {
	// over is the object whose author's decision the act is (the
	// decision's subject), and doc the act document evaluated.
	over *Obj
	doc  actDoc
	// inTx stores what the act moves beyond its objects and what they
	// move themselves (applyObjects): a withdrawal marks its offer.
	inTx func(tx *store.Txn) error
	// what, key and id are the line the act is logged with.
	what, key, id string
}

// receiveObjects is the receiving side of every act recorded by its
// objects alone, the mirror of perform: the transaction must be held with
// the sender; the act's own checks (line.objects); the sender's decision
// re-evaluated live (checkDecision); the verifier's rules over the record
// with the message (extend); then the objects stored with what they move
// and the inbox row, in one commit, answered with nothing.
func (e *Engine) receiveObjects(ctx context.Context, r *receipt, line *actLine) ([][]byte, error) {
	if !r.st.known {
		return nil, refusef(reason.StreamMismatch, "transaction %s is not held with %s", r.txn, r.from)
	}
	a, err := line.objects(ctx, e, r)
	if err != nil {
		return nil, err
	}
	if err := e.checkDecision(ctx, r.from, a.over, r.one(protocol.PolicyDecision), a.doc, r.txn, r.one(protocol.Approval), false); err != nil {
		return nil, err
	}
	if err := e.extend(ctx, r.st, r.objs); err != nil {
		return nil, err
	}
	e.point("receive.before-store")
	err = e.update(ctx, r.txn, func(tx *store.Txn) error {
		for _, o := range r.objs {
			if err := putReceived(tx, o, r.from); err != nil {
				return err
			}
		}
		if err := e.applyObjects(tx, r.objs); err != nil {
			return err
		}
		if a.inTx != nil {
			if err := a.inTx(tx); err != nil {
				return err
			}
		}
		return tx.PutInbox(r.from, r.key, r.txn, nil, r.now)
	})
	if err != nil {
		return nil, err
	}
	e.point("receive.after-store")
	e.log.Info(a.what, "transaction_id", r.txn, a.key, a.id, "from", r.from)
	return [][]byte{}, nil
}
