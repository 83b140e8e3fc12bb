package record

// Settlement adjustments: a short payment both parties signed (party's
// own decision, docs/record-protocol.md "Money that adds up (issue
// 38)"; the record
// and how it is recognised are package ledger's, adjust.go).
//
// A transaction completes only once the payee is paid what it is owed.
// When the parties agree that less settles an obligation (a discount for
// a late delivery, a bank charge nobody will chase), both sign one
// settlement adjustment record: the obligation, what is owed for it, what
// was paid and by which instructions, and the difference forgone. The
// record is drawn by each instance from its own copy (ledger.
// AdjustmentRecord), for an accepted obligation with nothing in flight and
// something unpaid, as the record stands at the signature's time, so a
// third party recomputes it and nobody's word is taken for an amount.
//
//	either party: propose_settlement_adjustment → its signed_document over the record's hash
//	                                              + decision (settlement.adjust)      → stored by the other
//	the other:    accept_settlement_adjustment  → its signed_document over the same hash
//	                                              + decision (settlement.adjust)      → stored by the proposer
//
// Neither act appends an event: the aggregate machine has none for it,
// and an adjustment moves no state. Both signatures held, the ledger counts
// the difference as forgone and the obligation as settled; the completion
// that follows reads it (its guard, live and in the verifier, is the
// ledger's completion_paid), which binds it into the chain as a waiver is.
// The act document (decisions.md 6): action_type settlement.adjust,
// proposed_terms {"core": {"total": the amount forgone}}, agreement_id and
// obligation_id; a mandate's spending limit bounds what an agent may
// forgo, and its approval rules can hold it for the principal.
//
// The receiving instance recomputes the record from its own copy at the
// signature's time: a record it does not draw (another amount, an
// instruction since, money in flight) is refused
// (A202-EVIDENCE-HASH-MISMATCH), and the agent proposes again.

import (
	"context"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// AdjustmentInput names the obligation a settlement adjustment settles.
type AdjustmentInput struct {
	MandateID    string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	ObligationID string `json:"obligation_id" jsonschema:"The obligation (obl_...)."`
	ApprovalID   string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// ProposeAdjustment signs the settlement adjustment record of an
// obligation as the ledger stands and sends the signature to the
// counterparty, which accepts it with AcceptAdjustment.
func (e *Engine) ProposeAdjustment(ctx context.Context, a Actor, in AdjustmentInput) (Outcome, error) {
	return settlementAdjust.perform(ctx, e, a, adjustCall{in, false})
}

// AcceptAdjustment signs the same record the counterparty proposed, as
// the ledger still stands: both signatures settle the obligation short.
func (e *Engine) AcceptAdjustment(ctx context.Context, a Actor, in AdjustmentInput) (Outcome, error) {
	return settlementAdjust.perform(ctx, e, a, adjustCall{in, true})
}

// adjustCall is one of the two calls of settlement.adjust: to propose
// the adjustment record, or to accept the counterparty's.
type adjustCall struct {
	in     AdjustmentInput
	accept bool
}

// settlementAdjust is settlement.adjust: each party's signature over the
// adjustment record with its decision, travelling without an event
// (adjustmentAct is the other side).
var settlementAdjust = &act[adjustCall]{
	name: protocol.ActSettlementAdjust,
	lines: []actLine{
		{recognise: signatureOver(ledger.AdjustmentClaim), objects: adjustmentAct},
	},
	spec: adjustSpec,
}

// adjustSpec is both calls: this organisation's signature over the record.
func adjustSpec(ctx context.Context, e *Engine, a Actor, c adjustCall) (actSpec, error) {
	in, accept := c.in, c.accept
	obl, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return actSpec{}, err
	}
	txn := obl.Txn()
	var hash string
	var forgone any
	return actSpec{
		txn: txn, mandateID: in.MandateID, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			org := e.org.Config().OrganizationID
			if st.State() != protocol.SettlementPending {
				return refusef(reason.StateTransitionDenied, "transaction %s is %s: an obligation is settled short in settlement_pending", txn, st.t.State)
			}
			if obl.Obligor() != org && obl.Obligee() != org {
				return refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not this organisation's to settle", obl.ID())
			}
			l, err := e.ledgerAt(ctx, txn, st.now)
			if err != nil {
				return err
			}
			rec, h, f := l.AdjustmentRecord(obl.ID())
			if f != nil {
				return f.Err()
			}
			hash, forgone = h, rec["forgone"]
			mine, err := e.heldSignature(ctx, txn, org, ledger.AdjustmentClaim, hash)
			if err != nil {
				return err
			}
			theirs, err := e.heldSignature(ctx, txn, st.t.Counterparty, ledger.AdjustmentClaim, hash)
			if err != nil {
				return err
			}
			switch {
			case mine != nil:
				return refusef(reason.StateTransitionDenied, "this organisation signed settlement adjustment %s already (%s)", hash, mine.ID())
			case accept && theirs == nil:
				return refusef(reason.StateTransitionDenied, "%s proposed no settlement adjustment of %s as the ledger stands now (it must forgo %v): "+
					"one of you proposes (propose_settlement_adjustment), the other accepts", st.t.Counterparty, obl.ID(), forgone)
			case !accept && theirs != nil:
				return refusef(reason.StateTransitionDenied, "%s proposed this very adjustment (%s): accept it with accept_settlement_adjustment", st.t.Counterparty, theirs.ID())
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return map[string]any{"core": map[string]any{"total": forgone}}, map[string]any{"agreement_id": obl.AgreementID(), "obligation_id": obl.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			evd, err := signRecord(b, ledger.AdjustmentClaim, hash)
			if err != nil {
				return err
			}
			// The record is the one drawn at the signature's time: that is
			// where the counterparty and a verifier look for it.
			if str(evd.Value()["created_at"]) != envelope.Timestamp(st.now) {
				return errf("the adjustment signature is dated %v, its record %s", evd.Value()["created_at"], envelope.Timestamp(st.now))
			}
			b.name("adjustment_signature", evd.ID())
			b.name("adjustment_hash", hash)
			return nil
		},
	}, nil
}

// adjustmentAct is the other party's side of either act (receiveObjects):
// the sender's
// signature over a settlement adjustment record this copy draws at the
// signature's time, for an obligation the sender is a party to, and its
// decision, checked like any act; then the verifier's rules (the ledger's
// adjustment_signature among them) over the record with it.
func adjustmentAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	evd, err := r.signature(ledger.AdjustmentClaim, "own signature over a record")
	if err != nil {
		return objectAct{}, err
	}
	if r.st.State() != protocol.SettlementPending {
		return objectAct{}, refusef(reason.StateTransitionDenied, "transaction %s is %s: an obligation is settled short in settlement_pending", r.txn, r.st.t.State)
	}
	at, err := envelope.ParseTimestamp(str(evd.Value()["created_at"]))
	if err != nil {
		return objectAct{}, refusef(reason.EvidenceHashMismatch, "adjustment signature %s is not dated", evd.ID())
	}
	l, err := e.ledgerAt(ctx, r.txn, at)
	if err != nil {
		return objectAct{}, err
	}
	var obl string
	var rec map[string]any
	for _, b := range l.Obligations {
		if b.Obligor != r.from && b.Obligee != r.from {
			continue
		}
		if x, h, f := l.AdjustmentRecord(b.ObligationID); f == nil && h == evd.P("artifact_hash") {
			obl, rec = b.ObligationID, x
		}
	}
	if obl == "" {
		return objectAct{}, refusef(reason.EvidenceHashMismatch, "%s signs %s, which is no settlement adjustment record this copy draws at %s: the ledger moved, or the record is not one it draws; propose again",
			evd.ID(), evd.P("artifact_hash"), str(evd.Value()["created_at"]))
	}
	return objectAct{over: evd,
		doc: actDoc{name: protocol.ActSettlementAdjust, terms: map[string]any{"core": map[string]any{"total": rec["forgone"]}},
			refs: map[string]any{"agreement_id": rec["agreement_id"], "obligation_id": obl}},
		what: "settlement adjustment signed by the counterparty", key: "adjustment_hash", id: evd.P("artifact_hash")}, nil
}
