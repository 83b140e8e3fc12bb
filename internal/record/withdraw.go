package record

import (
	"context"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ActOfferWithdraw is the act of withdrawing one's own offer before it is
// accepted (pilot state machine §6.1, session row offer.withdrawn). Its act
// document is {action_type, transaction_id, counterparty_organization_id,
// proposed_terms: the offer's terms, offer_id}; carrying the terms keeps a
// mandate's spending constraints evaluable, as for offer.submit.
const ActOfferWithdraw = string(protocol.ActOfferWithdraw)

// WithdrawInput names the offer to withdraw.
type WithdrawInput struct {
	MandateID string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	OfferID   string `json:"offer_id" jsonschema:"Your offer (off_...)."`
	// ApprovalID is an approval of exactly this withdrawal, when the
	// mandate holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// WithdrawOffer withdraws this organisation's latest offer of a session
// before anyone accepted it. Without a session stream there is no event for
// it (spec-map D13); what records the withdrawal is the offeror's signed,
// shareable policy decision allowing the act, bound by its action hash to
// the exact offer. The counterparty checks that decision as it checks any
// act (mandate fetched, live status, fresh allow, the act rebuilt from the
// offer it holds) and from then on refuses an acceptance of that offer,
// as this instance refuses to countersign one. The withdrawal stands here
// from the moment it is committed, whether or not the notice arrives.
func (e *Engine) WithdrawOffer(ctx context.Context, a Actor, in WithdrawInput) (Outcome, error) {
	return offerWithdraw.perform(ctx, e, a, in)
}

// offerWithdraw is offer.withdraw: the offeror's decision, travelling
// alone (withdrawalAct is the offeree's side).
var offerWithdraw = &act[WithdrawInput]{
	name: protocol.ActOfferWithdraw,
	lines: []actLine{
		{recognise: decisionAlone, objects: withdrawalAct},
	},
	spec: withdrawSpec,
}

func withdrawSpec(ctx context.Context, e *Engine, a Actor, in WithdrawInput) (actSpec, error) {
	offer := named(ctx, e, in.OfferID, object.AsOffer)
	if offer == nil {
		return actSpec{}, refusef(reason.OfferStale, "offer %s is not held here", in.OfferID)
	}
	txn := offer.Txn()
	return actSpec{
		txn: txn, mandateID: in.MandateID, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			if offer.Org() != e.org.Config().OrganizationID {
				return refusef(reason.StreamMismatch, "offer %s is the counterparty's; only its offeror withdraws it", in.OfferID)
			}
			last, err := e.withdrawable(ctx, st)
			if err != nil {
				return err
			}
			if last.ID() != in.OfferID {
				return refusef(reason.OfferStale, "offer %s was already superseded", in.OfferID)
			}
			if w, _ := e.db.Withdrawn(ctx, in.OfferID); w {
				return refusef(reason.OfferStale, "offer %s is already withdrawn", in.OfferID)
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return offer.Terms(), map[string]any{"offer_id": in.OfferID}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			b.name("offer", in.OfferID)
			b.also(func(tx *store.Txn) error { return tx.Withdraw(in.OfferID, txn, b.names["policy_decision"]) })
			return nil
		},
	}, nil
}

// withdrawalAct is the offeree's side (receiveObjects): the offeror's
// decision to withdraw the session's latest offer, checked like any act of
// the offeror's.
func withdrawalAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	pol := r.one(protocol.PolicyDecision)
	last, err := e.withdrawable(ctx, r.st)
	if err != nil {
		return objectAct{}, err
	}
	if last == nil {
		return objectAct{}, refusef(reason.OfferStale, "transaction %s holds no offer", r.txn)
	}
	if last.Org() != r.from {
		return objectAct{}, refusef(reason.OfferStale, "the session's latest offer is not %s's", r.from)
	}
	return objectAct{
		over: pol,
		doc:  actDoc{name: protocol.ActOfferWithdraw, terms: last.Terms(), refs: map[string]any{"offer_id": last.ID()}},
		inTx: func(tx *store.Txn) error { return tx.Withdraw(last.ID(), r.txn, pol.ID()) },
		what: "offer withdrawn by its offeror", key: "offer_id", id: last.ID(),
	}, nil
}

// withdrawable returns the session's latest offer when it may still be
// withdrawn: in draft, or an amendment offer not yet accepted (the
// transaction committed or in_performance, the offer not the one the
// agreement in force was formed on).
func (e *Engine) withdrawable(ctx context.Context, st *state) (*object.Offer, error) {
	switch {
	case st.State() == protocol.Draft:
		return e.latestOffer(ctx, st.t.ID)
	case amending(st):
		open, _, err := e.openAmendment(ctx, st.t)
		if err != nil || open != nil {
			return open, err
		}
	}
	return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s; an offer is withdrawn only before acceptance", st.t.ID, st.t.State)
}

// withdrawn refuses an offer its offeror withdrew (as stale).
func (e *Engine) withdrawn(ctx context.Context, o *object.Offer) error {
	if w, _ := e.db.Withdrawn(ctx, o.ID()); w {
		return refusef(reason.OfferStale, "offer %s was withdrawn by its offeror", o.ID())
	}
	return nil
}
