package record

import (
	"context"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ActOfferWithdraw is the act of withdrawing one's own offer before it is
// accepted (pilot state machine §6.1, session row offer.withdrawn). Its act
// document is {action_type, transaction_id, counterparty_organization_id,
// proposed_terms: the offer's terms, offer_id}; carrying the terms keeps a
// mandate's spending constraints evaluable, as for offer.submit.
const ActOfferWithdraw = "offer.withdraw"

// WithdrawInput names the offer to withdraw.
type WithdrawInput struct {
	MandateID string `json:"mandate_id"`
	OfferID   string `json:"offer_id"`
}

// WithdrawOffer withdraws this organisation's latest offer of a session
// before anyone accepted it. Without a session stream there is no event for
// it (spec-map D13); what records the withdrawal is the offeror's signed,
// shareable policy decision allowing the act, bound by its action hash to
// the exact offer. The counterparty checks that decision as it checks any
// act (mandate fetched, live status, fresh allow, the act rebuilt from the
// offer it holds) and from then on refuses an acceptance of that offer,
// as this instance refuses to countersign one.
func (e *Engine) WithdrawOffer(ctx context.Context, in WithdrawInput) (Outcome, error) {
	offer, _, err := e.load(ctx, in.OfferID)
	if err != nil || typeOf(offer) != "offer" {
		return Outcome{}, refusef(reason.OfferStale, "offer %s is not held here", in.OfferID)
	}
	txn := str(offer["transaction_id"])
	unlock := e.lock(txn)
	defer unlock()
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	if str(sub(offer, "created_by")["organization_id"]) != e.o.Config().OrganizationID {
		return Outcome{}, refusef(reason.StreamMismatch, "offer %s is the counterparty's; only its offeror withdraws it", in.OfferID)
	}
	if t.State != "draft" {
		return Outcome{}, refusef(reason.StateTransitionDenied, "transaction %s is %s; an offer is withdrawn only before acceptance", txn, t.State)
	}
	offers, err := e.offers(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	if idOf(offers[len(offers)-1]) != in.OfferID {
		return Outcome{}, refusef(reason.OfferStale, "offer %s was already superseded", in.OfferID)
	}
	if w, _ := e.o.Store.Withdrawn(ctx, in.OfferID); w {
		return Outcome{}, refusef(reason.OfferStale, "offer %s is already withdrawn", in.OfferID)
	}
	m, err := e.ownMandate(ctx, in.MandateID)
	if err != nil {
		return Outcome{}, err
	}
	terms, _ := pl(offer)["terms"].(map[string]any)
	pol, polRaw, _, err := e.ownDecision(ctx, m, ActOfferWithdraw, txn, t.Counterparty, terms, map[string]any{"offer_id": in.OfferID}, nil, t.HeadSequence+1)
	if err != nil {
		return Outcome{}, err
	}
	// Withdrawn here first: from this moment this instance countersigns no
	// acceptance of the offer, whether or not the notice arrives at once.
	err = e.o.Store.Update(ctx, func(tx *store.Txn) error {
		if _, err := tx.PutObject(polRaw, "local"); err != nil {
			return err
		}
		return tx.Withdraw(in.OfferID, txn, idOf(pol))
	})
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{TransactionID: txn, State: t.State, Status: "delivered", Objects: map[string]string{"policy_decision": idOf(pol), "offer": in.OfferID}}
	if _, err := e.send.Send(ctx, t.Counterparty, txn, [][]byte{polRaw}); err != nil {
		if !e.queued(err) {
			// The withdrawal stands here regardless: a refused notice
			// cannot make this instance countersign the offer's acceptance.
			return out, err
		}
		out.Status = "pending"
		out.WaitingFor = t.Counterparty + " to receive the withdrawal; delivery is retried until it answers"
	}
	return out, nil
}

// receiveWithdrawal is the offeree's side: the offeror's decision to
// withdraw the session's latest offer, checked like any act of the
// offeror's.
func (e *Engine) receiveWithdrawal(ctx context.Context, from, txn string, pol object, raw []byte) ([][]byte, error) {
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil || t.Counterparty != from {
		return nil, refusef(reason.StreamMismatch, "transaction %s is not held with %s", txn, from)
	}
	if t.State != "draft" {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s; an offer is withdrawn only before acceptance", txn, t.State)
	}
	offers, err := e.offers(ctx, txn)
	if err != nil || len(offers) == 0 {
		return nil, refusef(reason.OfferStale, "transaction %s holds no offer", txn)
	}
	last := offers[len(offers)-1]
	if str(sub(last, "created_by")["organization_id"]) != from {
		return nil, refusef(reason.OfferStale, "the session's latest offer is not %s's", from)
	}
	terms, _ := pl(last)["terms"].(map[string]any)
	if err := e.checkDecision(ctx, from, pol, pol, ActOfferWithdraw, txn, terms, map[string]any{"offer_id": idOf(last)}, nil); err != nil {
		return nil, err
	}
	err = e.o.Store.Update(ctx, func(tx *store.Txn) error {
		if _, err := tx.PutObject(raw, from); err != nil {
			return err
		}
		return tx.Withdraw(idOf(last), txn, idOf(pol))
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("offer withdrawn by its offeror", "transaction_id", txn, "offer_id", idOf(last), "from", from)
	return [][]byte{}, nil
}

// withdrawn reports whether an offer was withdrawn (refused as stale).
func (e *Engine) withdrawn(ctx context.Context, o object) error {
	if w, _ := e.o.Store.Withdrawn(ctx, idOf(o)); w {
		return refusef(reason.OfferStale, "offer %s was withdrawn by its offeror", idOf(o))
	}
	return nil
}
