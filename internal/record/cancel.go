package record

// Cancellation (pilot state machine §5, row transaction.cancelled: from an
// eligible pre-commit state, "canceller has authority; no committed
// agreement", to cancelled).
//
// Either party cancels a transaction that is draft or agreement_pending:
// the act transaction.cancel, whose document carries the latest offer's
// terms (docs/authority.md), recorded by transaction.cancelled (data: the
// latest offer's id) and countersigned like any event. It is how a
// formation that cannot finish ends: an offeror whose own policy declines
// to sign the agreement leaves both records in agreement_pending, with a
// notice on each side saying so, and either party then cancels. Nothing
// follows a cancelled transaction: offers, acceptances and agreements
// proposed for it are refused (A202-STATE-TRANSITION-DENIED).
//
// The countersigner's live part is only what the verifier cannot see
// (that the offer named is the latest of this copy); that nothing was
// committed before is the transition table's rule and the verifier's
// guard (verify.Extend).

import (
	"context"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// CancelInput cancels a transaction before anything is committed.
type CancelInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...), draft or agreement_pending."`
	// ApprovalID is an approval of exactly this cancellation, when the
	// mandate holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// CancelTransaction appends transaction.cancelled (draft or
// agreement_pending → cancelled).
func (e *Engine) CancelTransaction(ctx context.Context, a Actor, in CancelInput) (Outcome, error) {
	return transactionCancel.perform(ctx, e, a, in)
}

// transactionCancel is transaction.cancel: either party's event, the
// counterparty checking that it names this copy's latest offer.
var transactionCancel = &act[CancelInput]{
	name:  protocol.ActTransactionCancel,
	lines: []actLine{{event: protocol.EvTransactionCancelled, offers: true, check: checkCancelled}},
	spec:  cancelSpec,
}

func cancelSpec(ctx context.Context, e *Engine, a Actor, in CancelInput) (actSpec, error) {
	var offer *object.Offer
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvTransactionCancelled,
		check: func(ctx context.Context, st *state) error {
			switch st.State() {
			case protocol.Draft, protocol.AgreementPending:
			default:
				return refusef(reason.StateTransitionDenied, "transaction %s is %s: only a draft or agreement_pending transaction is cancelled; "+
					"a committed one ends by termination (propose_termination)", in.TransactionID, st.t.State)
			}
			var err error
			offer, err = e.endingOffer(ctx, in.TransactionID)
			return err
		},
		act:   func(context.Context, *state) (map[string]any, map[string]any, error) { return offer.Terms(), nil, nil },
		build: func(_ context.Context, _ *state, b *builder) error { return namesOffer(b, offer) },
	}, nil
}

// endingOffer is the offer an event ending a draft names (cancellation,
// expiry): the transaction's latest, refused when it holds none.
func (e *Engine) endingOffer(ctx context.Context, txn string) (*object.Offer, error) {
	offer, err := e.latestOffer(ctx, txn)
	if err != nil {
		return nil, err
	}
	if offer == nil {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s holds no offer", txn)
	}
	return offer, nil
}

// namesOffer makes the event ending a draft name the offer it ends
// (endingOffer): references only, as every party derives the rest from
// the offer it holds (namedLatestOffer checks it).
func namesOffer(b *builder, offer *object.Offer) error {
	b.data = map[string]any{"offer_id": offer.ID()}
	b.name("offer", offer.ID())
	return nil
}

// checkCancelled is the live part of the countersigner's guard of
// transaction.cancelled: the offer named is this copy's latest.
func checkCancelled(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	_, err := e.namedLatestOffer(ctx, r, ev)
	return err
}

// namedLatestOffer returns the offer an event ending a draft names
// (transaction.cancelled, deadline.elapsed), refusing one that is not
// this copy's latest offer of the transaction.
func (e *Engine) namedLatestOffer(ctx context.Context, r *receipt, ev *Event) (*object.Offer, error) {
	last, err := e.latestOffer(ctx, r.txn)
	if err != nil {
		return nil, err
	}
	if last == nil || ev.Data("offer_id") != last.ID() {
		return nil, refusef(reason.StateTransitionDenied, "%s names offer %s; the latest offer of %s is not that", ev.EventType(), ev.Data("offer_id"), r.txn)
	}
	return last, nil
}
