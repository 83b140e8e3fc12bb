package record

// Waivers (obligation §5.2, §6.1; canonical model §10.1 rule 5).
//
// The obligee releases the obligor from a duty it no longer wants by a
// signed act of its own: an obligation_response with response_type waive,
// naming no assertion, signed by the obligee (rule 1: anyone else is
// A202-OBLIGATION-RESPONSE-UNAUTHORIZED). The obligation moves to waived,
// which is terminal.
//
// The pilot state machine has no aggregate event for a waiver (obligation
// §6.2 lists none), and an obligation-only event on the transaction stream
// fails the published runner's replay, which knows the aggregate machine
// only. So a waiver is an act recorded by its objects (decided here: the
// specification names no carrier for it), as an offer withdrawal is: the
// response and the obligee's policy decision for the act obligation.waive
// (document: the obligation's quantity, unit and consideration as
// proposed_terms, zero in the agreement's currency for a remainder, which
// carries none; and obligation_id) travel as a message of their own. The
// obligor's instance checks it as it checks any act (the obligee's
// mandate, live status and fresh allow decision, the act rebuilt from the
// obligation it holds, the verifier's rules over its record with the
// waiver added) and stores it; from then on, on both sides, the obligation
// is waived: the obligee's copy counts it once the obligor took it. The
// aggregate does not move. What binds a waiver into the chain is the
// aggregate event that reads it next: transaction.completed, whose guard
// takes a waived obligation as ended (a partial acceptance's remainder,
// which settlement_pending gives no way to perform, is waived so that
// completion is reachable); termination.agreed, whose record names only
// obligations still open; and agreement.amended, which carries the waivers
// of the duties an amendment drops as riders of its own event (see
// amendment.go).
//
// A waiver is available wherever the obligation is still owed and the
// aggregate lets the record go on: from pending (a remainder included) and
// rejected. An assertion outstanding in acceptance_pending is answered
// first (accept or reject): the aggregate leaves acceptance_pending only
// by a response to it, so waiving it there would strand the transaction.
// A waiver from disputed is excluded by the specification, and from
// accepted or any terminal state by the obligation table.

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// WaiveInput names the obligation the obligee releases.
type WaiveInput struct {
	MandateID    string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	ObligationID string `json:"obligation_id" jsonschema:"The obligation (obl_...) you are the obligee of."`
	// ApprovalID is an approval of exactly this waiver, when the mandate
	// holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// waivable is the rule both the obligee's instance and the obligor's apply
// to a waiver: the transaction is not over, and the obligation is owed
// (pending or rejected) and not an assertion still to be answered.
func waivable(txnState protocol.State, obl string, os obligationState) error {
	if txnState.Terminal() {
		return refusef(reason.StateTransitionDenied, "the transaction is %s: nothing of it is waived any more", txnState)
	}
	switch os.State {
	case protocol.OblPending, protocol.OblRejected:
		return nil
	case protocol.OblAsserted:
		return refusef(reason.StateTransitionDenied, "obligation %s has an assertion outstanding: answer it first (accept or reject); the transaction leaves acceptance_pending only by a response", obl)
	case "":
		return refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not recorded on this transaction", obl)
	}
	return refusef(reason.StateTransitionDenied, "obligation %s is %s: a waiver releases a duty still owed (pending, due, asserted or rejected; obligation §6.1)", obl, os.State)
}

// waiverAct is the act document's terms and references of a waiver of
// obl (authority.ObjectAct's row for a waive response).
func (e *Engine) waiverAct(ctx context.Context, obl *object.Obligation) (terms, refs map[string]any, err error) {
	total, err := e.obligationTotal(ctx, obl)
	if err != nil {
		return nil, nil, err
	}
	return authority.CoreTerms(obl.Quantity(), obl.UnitCode(), total), map[string]any{"obligation_id": obl.ID()}, nil
}

// obligationTotal is the total of an act on obl's document
// (authority.ObligationTotal).
func (e *Engine) obligationTotal(ctx context.Context, obl *object.Obligation) (any, error) {
	total, why := authority.ObligationTotal(obl.Payload(), func(id string) map[string]any {
		if o, err := e.get(ctx, obl.Txn(), id); err == nil {
			return o.Value()
		}
		return nil
	})
	if why != "" {
		return nil, errf("%s", why)
	}
	return total, nil
}

// WaiveObligation releases the obligor of an obligation this organisation
// is owed (see the top of this file).
func (e *Engine) WaiveObligation(ctx context.Context, a Actor, in WaiveInput) (Outcome, error) {
	return obligationWaive.perform(ctx, e, a, in)
}

// obligationWaive is obligation.waive: the obligee's waive response and
// its decision, travelling without an event (waiverAct is the obligor's side).
var obligationWaive = &act[WaiveInput]{
	name: protocol.ActObligationWaive,
	lines: []actLine{
		{recognise: twoWith(protocol.ObligationResponse), objects: waiverAct},
	},
	spec: waiveSpec,
}

func waiveSpec(ctx context.Context, e *Engine, a Actor, in WaiveInput) (actSpec, error) {
	obl, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return actSpec{}, err
	}
	return actSpec{
		txn: obl.Txn(), mandateID: in.MandateID, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			cfg := e.org.Config()
			if obl.Obligee() != cfg.OrganizationID {
				return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s waives it (obligation §5.2 rule 1)", obl.ID())
			}
			os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
			if err != nil {
				return err
			}
			if err := waivable(st.State(), obl.ID(), os); err != nil {
				return err
			}
			return e.waiverUnderway(ctx, obl)
		},
		act: func(ctx context.Context, _ *state) (map[string]any, map[string]any, error) {
			return e.waiverAct(ctx, obl)
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			obr, err := b.add(protocol.ObligationResponse, map[string]any{"obligation_id": obl.ID(), "response_type": "waive"}, protocol.PurposeObjectIssuance)
			if err != nil {
				return asRefusal(err, reason.TermsInvalid)
			}
			b.name("obligation_response", obr.ID())
			b.name("obligation", obl.ID())
			return nil
		},
	}, nil
}

// waiverUnderway refuses a second waiver of an obligation whose first is
// still on its way to the obligor.
func (e *Engine) waiverUnderway(ctx context.Context, obl *object.Obligation) error {
	held, err := e.ofType(ctx, obl.Txn(), protocol.ObligationResponse)
	if err != nil {
		return err
	}
	for _, o := range held {
		if o.P("obligation_id") == obl.ID() && o.P("response_type") == "waive" {
			return refusef(reason.StateTransitionDenied, "obligation %s is waived already (%s); the obligor's instance is still to take it", obl.ID(), o.ID())
		}
	}
	return nil
}

// waiverAct is the obligor's side of a waiver (receiveObjects): the
// obligee's response and decision, checked like any act of the obligee's.
func waiverAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	obr := object.AsResponse(r.one(protocol.ObligationResponse))
	if obr.ResponseType() != protocol.ResponseWaive {
		return objectAct{}, reason.Refuse(fmt.Sprintf("a %s response travels with the event that records it, not on its own", obr.ResponseType()))
	}
	obl := held(ctx, e, r.txn, obr.ObligationID(), object.AsObligation)
	if obl == nil {
		return objectAct{}, refusef(reason.ObligationSubjectUnreferenced, "waiver %s names obligation %s, which is not held on this transaction", obr.ID(), obr.ObligationID())
	}
	if obl.Obligee() != r.from || obl.ObligeeAgent() != obr.Agent() {
		return objectAct{}, refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s waives it (obligation §5.2 rule 1)", obl.ID())
	}
	os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
	if err != nil {
		return objectAct{}, err
	}
	if err := waivable(r.st.State(), obl.ID(), os); err != nil {
		return objectAct{}, err
	}
	terms, refs, err := e.waiverAct(ctx, obl)
	if err != nil {
		return objectAct{}, err
	}
	return objectAct{over: obr.View, doc: actDoc{name: protocol.ActObligationWaive, terms: terms, refs: refs},
		what: "obligation waived by its obligee", key: "obligation_id", id: obl.ID()}, nil
}
