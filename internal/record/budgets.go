package record

import (
	"context"
	"errors"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Budgets at the act (package budget says what they are and count).
//
// The acts that commit this organisation to pay, as buyer, are its offers
// and counter-offers (offer.submit, amendment offers among them), its
// acceptances (offer.accept) and its amendments (agreement.amend): each
// names the total it commits to, $.terms.core.total. Its payments are its
// settlement instructions (settlement.instruct). The pipeline (perform)
// asks spendingOf which of these an act is, after the mandate allowed it,
// and spending.record runs inside the act's own database transaction:
// the budgets are counted and the commitment or payment written in the
// same write, so of two acts taken at once the second is counted with the
// first (the store runs writes one after the other), and the last euro
// goes to one of them. A commitment that raises nothing (a second offer
// of the same total) passes without a count; a payment pays what was
// committed, so it is recorded and never stopped. An act the counterparty
// refuses is removed whole (rollback), its commitment or payment with it.
//
// A budget that denies stops the act before anything is stored or sent:
// the agent is told which budget and what is left, the counterparty
// nothing. A budget that holds files an approval request for the
// principal (its note says which budget), and the principal's approval
// of that exact act (its action hash) releases the threshold, never the
// limit. That approval is the organisation's own business: unlike one
// its mandate asks for, it does not travel with the act.

// spending is what one act adds to the budgets' count.
type spending struct {
	charge budget.Charge
	// total is the commitment's total; pay says the act is a payment
	// (charge.Amount is paid, and nothing is committed).
	total decimal.Decimal
	pay   bool
	// act names the act: its policy decision's id, an object of its
	// message, so that a refused act is forgotten with it (rollback).
	act string
	// instruction names the payment's settlement instruction once built.
	instruction func() string
}

// spendingOf returns what act adds to the budgets, or nil for an act that
// adds nothing: one of a supplier, or one that names no money.
func spendingOf(act protocol.Act, role protocol.Role, txn, counterparty, agent string, terms map[string]any) *spending {
	if role != protocol.Buyer {
		return nil
	}
	pay := false
	switch act {
	case protocol.ActOfferSubmit, protocol.ActOfferAccept, protocol.ActAgreementAmend:
	case protocol.ActSettlementInstruct:
		pay = true
	default:
		return nil
	}
	total := object.Sub(object.Sub(terms, "core"), "total")
	amount, err := decimal.Parse(str(total["amount"]))
	currency := str(total["currency"])
	if err != nil || currency == "" {
		return nil // the gate and the mandate read the terms; nothing to count here
	}
	return &spending{
		charge: budget.Charge{TransactionID: txn, Currency: currency, Counterparty: counterparty, Agent: agent, Amount: amount},
		total:  amount, pay: pay,
	}
}

// budgetStop is a budget's deny or hold, met while recording the act.
type budgetStop struct{ v budget.Verdict }

func (b *budgetStop) Error() string { return b.v.Explain() }

// record counts the act against the budgets and writes it, inside the
// act's database transaction. released says the principal approved this
// exact act above a threshold.
func (sp *spending) record(tx *store.Txn, now time.Time, released bool) error {
	c := sp.charge
	if sp.pay {
		return tx.Pay(sp.instruction(), c, now)
	}
	held, err := tx.Committed(c.TransactionID, c.Currency)
	if err != nil {
		return err
	}
	c.Amount = sp.total.Sub(held)
	if c.Amount.Sign() <= 0 {
		// Nothing more committed; recorded all the same, so that the
		// commitment stands if an earlier act of it is refused.
		return tx.Commit(sp.act, c, sp.total, now)
	}
	budgets, err := tx.Budgets()
	if err != nil {
		return err
	}
	vs, err := budget.Evaluate(tx.BudgetReader(), budgets, c, now)
	if err != nil {
		return err
	}
	if v, ok := budget.Worst(vs); ok && (v.Outcome == budget.Deny || (v.Outcome == budget.Hold && !released)) {
		return &budgetStop{v}
	}
	return tx.Commit(sp.act, c, sp.total, now)
}

// standing is a verdict as a refusal reports it.
func standing(v budget.Verdict) *reason.BudgetStanding {
	b := v.Budget
	s := &reason.BudgetStanding{
		ID: b.ID, Kind: string(b.Kind), Period: string(b.Period), Currency: b.Currency, Limit: b.Limit.String(),
		Used: v.Used.String(), Left: v.Left().String(), Requested: v.After.Sub(v.Used).String(),
		PeriodStart: envelope.Timestamp(v.Start), PeriodEnd: envelope.Timestamp(v.End),
	}
	if b.HasApproval {
		s.ApproveAbove = b.ApproveAbove.String()
	}
	return s
}

// budgetRefusal turns a budget's stop into the act's answer: a deny, or a
// hold, which the principal's approval of this exact act may already
// release (released true: record the act again with it), and which is
// otherwise filed for the principal.
func (e *Engine) budgetRefusal(ctx context.Context, stop *budgetStop, mandateID string, d decision, presented *Obj, now time.Time) (released bool, err error) {
	if stop.v.Outcome == budget.Deny {
		r := reason.Refusef(reason.PolicyDenied, "denied by this organisation's %s", stop.v.Explain())
		r.Budget = standing(stop.v)
		return false, r
	}
	ours := e.org.Config().OrganizationID
	if presented != nil && approves(presented.Value(), ours, d.res.ActionHash, now) {
		return true, nil
	}
	prior, apr, found, err := e.org.LatestApproval(ctx, mandateID, d.doc, d.res.ActionHash)
	if err != nil {
		return false, err
	}
	if apr != nil && approves(apr, ours, d.res.ActionHash, now) {
		return true, nil
	}
	res := d.res
	res.Decision = authority.RequireApproval
	res.ReasonCodes = []reason.Code{reason.ApprovalRequired}
	res.Findings = append(append([]authority.Finding{}, res.Findings...), authority.Finding{
		Step: authority.StepBudget, Code: reason.ApprovalRequired, Hold: true, Detail: "held by this organisation's " + stop.v.Explain(),
	})
	req := prior
	if !found || prior.Status == store.ApprovalApproved {
		// None yet, or an approval that no longer releases the act (it
		// expired): the principal is asked again.
		if req, err = e.org.FileApproval(ctx, mandateID, d.doc, res); err != nil {
			return false, err
		}
	}
	held := org.Held(res, req)
	var r *reason.Refusal
	if errors.As(held, &r) {
		r.Budget = standing(stop.v)
	}
	return false, held
}

// approves reports whether apr, an approval object held here, is one of
// org's principal (a counterparty's approvals are held too) approving the
// act of actionHash, in force now.
func approves(apr map[string]any, org, actionHash string, now time.Time) bool {
	p := object.Sub(apr, "payload")
	if str(object.Sub(p, "approver")["organization_id"]) != org || str(p["action_hash"]) != actionHash || str(p["decision"]) != string(authority.Approved) {
		return false
	}
	exp, err := envelope.ParseTimestamp(str(p["expires_at"]))
	return err == nil && now.Before(exp)
}
