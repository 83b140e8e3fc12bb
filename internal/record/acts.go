package record

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// The acts, in one table (actTable), read by both sides. A line is one
// message an act travels in: an act whose event the counterparty
// countersigns has the line of that event; an act recorded by its
// objects alone (an offer, a withdrawal, a waiver, a proposal) has the
// line of the message that carries them. An act in two halves (a
// termination proposed, then agreed; a remediation offered, then
// accepted) has a line for each.
//
// The acting side builds the act in its own file (an actSpec handed to
// perform: its check, document and build); the line says the rest:
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
// (Engine.acts); nothing registers itself. Adding an act is its file and
// one line here.
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
	check func(ctx context.Context, e *Engine, r *receipt, ev *Obj) error
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
	cosign func(ctx context.Context, e *Engine, r *receipt, ev *Obj) (signed, own []*Obj, err error)
	// answer rebuilds what cosign answered, for the same event asked for
	// again.
	answer func(ctx context.Context, e *Engine, txn string, ev *Obj) ([][]byte, error)
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
	apply func(e *Engine, tx *store.Txn, ev *Obj, objs []*Obj) error
}

// actTable is every message an act travels in (see actLine).
func actTable() []actLine {
	return []actLine{
		// Formation (§9): offer, withdrawal, acceptance, the offeror's signature.
		{act: protocol.ActOfferSubmit, recognise: twoWith(protocol.Offer), receive: (*Engine).receiveOffer},
		{act: protocol.ActOfferWithdraw, recognise: decisionAlone, objects: withdrawalAct},
		{act: protocol.ActOfferAccept, event: protocol.EvAgreementDirect, offers: true,
			// Two decisions: the acceptance's, and the offeree's
			// agreement.sign when it rides with the agreement (riderSign).
			carries: counts{protocol.Acceptance: 1, protocol.Agreement: 1, protocol.PolicyDecision: 2},
			check:   checkAgreementDirect, cosign: cosignDirect, answer: directAnswer},
		{act: protocol.ActAgreementSign, recognise: alone(protocol.Agreement), receive: (*Engine).receiveAgreement},
		{act: protocol.ActAgreementSign, event: protocol.EvAgreementCommitted, check: checkAgreementCommitted},
		{act: protocol.ActAgreementAmend, event: protocol.EvAgreementAmended, offers: true,
			carries: counts{protocol.Acceptance: 1, protocol.Agreement: 1, protocol.Obligation: -1, protocol.ObligationResponse: -1, protocol.PolicyDecision: -1},
			check:   checkAmended, cosign: cosignAmendment, answer: amendmentAnswer, settle: settleAmendment,
			apply: moves(carriedPending, responded)},
		{act: protocol.ActTransactionCancel, event: protocol.EvTransactionCancelled, offers: true, check: checkCancelled},
		{act: protocol.ActTransactionExpire, event: protocol.EvDeadlineElapsed, offers: true, check: checkExpired},

		// Performance (obligation §5, §6).
		{act: protocol.ActObligationActivated, event: protocol.EvObligationActivated,
			carries: counts{protocol.Obligation: -1, protocol.PolicyDecision: -1},
			check:   checkObligationActivated, apply: moves(carriedPending, responded)},
		{act: protocol.ActPerformanceDeclared, event: protocol.EvPerformanceDeclared,
			carries: counts{protocol.PerformanceEvent: -1, protocol.Evidence: -1, protocol.PolicyDecision: -1},
			check:   checkPerformanceDeclared, apply: moves(asserted, responded)},
		{act: protocol.ActAcceptanceGranted, event: protocol.EvAcceptanceGranted,
			carries: responseCarries, check: checkResponse, apply: moves(responded)},
		{act: protocol.ActAcceptanceRejected, event: protocol.EvAcceptanceRejected,
			carries: responseCarries, check: checkResponse, apply: moves(responded)},
		{act: protocol.ActObligationWaive, recognise: twoWith(protocol.ObligationResponse), objects: waiverAct},

		// Settlement (settlement §4-§6) and completion.
		{act: protocol.ActSettlementInstruct, event: protocol.EvSettlementInstructed, uncached: true,
			carries: counts{protocol.Settlement: 1}, check: checkInstructed,
			apply: func(e *Engine, tx *store.Txn, ev *Obj, objs []*Obj) error { return e.applySettlement(tx, ev, objs) }},
		{recognise: alone(protocol.AdapterReceipt), receive: (*Engine).receiveReceipt},
		{act: protocol.ActSettlementAdjust, recognise: signatureOver(ledger.AdjustmentClaim), objects: adjustmentAct},
		{act: protocol.ActTransactionComplete, event: protocol.EvTransactionCompleted, offers: true, check: checkCompleted},

		// Ending early (lifecycle §7): termination by agreement.
		{act: protocol.ActTerminationAgree, recognise: signatureOver(""), objects: terminationProposalAct},
		{act: protocol.ActTerminationAgree, event: protocol.EvTerminationAgreed, offers: true,
			carries: counts{protocol.Evidence: 1}, check: checkTerminationAgreed, apply: releasesOpen},

		// Disputes and exceptions (dispute §4-§6, exception §3-§5).
		{act: protocol.ActDisputeRaise, recognise: with(protocol.Dispute), objects: disputeAct},
		{act: protocol.ActDeterminationIssue, recognise: withOut(protocol.Determination, protocol.Dispute), objects: determinationAct},
		{act: protocol.ActExceptionOpen, event: protocol.EvExceptionOpened,
			carries: counts{protocol.Exception: 1, protocol.Dispute: 1, protocol.Evidence: -1, protocol.PolicyDecision: 2},
			check:   checkExceptionOpened, apply: moves(disputedByException, responded)},
		{act: protocol.ActRemediationAccept, recognise: signatureOver(verify.RemediationSignatureClaim), objects: remediationProposalAct},
		{act: protocol.ActRemediationAccept, event: protocol.EvRemediationAccepted,
			carries: counts{protocol.Obligation: 1, protocol.Evidence: 1},
			check:   checkRemediationAccepted, apply: moves(carriedPending, responded)},
		{act: protocol.ActExceptionResolve, event: protocol.EvExceptionResolved, check: checkExceptionResolved},
		{act: protocol.ActTransactionTerminate, event: protocol.EvTransactionTerminated, offers: true,
			carries: counts{protocol.Evidence: 1}, check: checkTransactionTerminated, apply: releasesOpen},
	}
}

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
