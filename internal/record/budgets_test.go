package record_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

// Budgets at the act (record/budgets.go): counted in the write that
// records the act, denied or held before anything leaves, never told to
// the counterparty.

func setBudget(t *testing.T, sd *recordtest.Side, id string, kind budget.Kind, limit, above string) {
	t.Helper()
	setBudgetPer(t, sd, id, kind, budget.Month, limit, above)
}

func setBudgetPer(t *testing.T, sd *recordtest.Side, id string, kind budget.Kind, per budget.Period, limit, above string) {
	t.Helper()
	b, err := budget.New(id, kind, per, "EUR", limit, above, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := sd.Princ.SetBudget(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// acceptOffer accepts the supplier's offer of amount, approved as the
// buyer's mandate asks.
func acceptOffer(t *testing.T, b, s *recordtest.Side, amount string) (txn string, err error) {
	t.Helper()
	o := recordtest.Offer(t, s, amount)
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	_, err = b.Engine.AcceptOffer(context.Background(), b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	return o.TransactionID, err
}

func budgetRefusal(err error) *reason.Refusal {
	var r *reason.Refusal
	if errors.As(err, &r) && r.Budget != nil {
		return r
	}
	return nil
}

// TestBudgetDeniesTheActThatWouldCrossIt: a monthly budget lets the
// first acceptance through and stops the one that would cross it, with
// the budget named and what is left, and neither record moves.
func TestBudgetDeniesTheActThatWouldCrossIt(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	setBudget(t, b, "monthly-eur", budget.Spend, "5000.00", "")
	if _, err := acceptOffer(t, b, s, "3200.00"); err != nil {
		t.Fatal(err)
	}
	o := recordtest.Offer(t, s, "2000.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	var r *reason.Refusal
	refusedWith(t, "an acceptance past the monthly budget", b, s, o.TransactionID, reason.PolicyDenied, func() error {
		_, err := b.Engine.AcceptOffer(context.Background(), b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
		r = budgetRefusal(err)
		return err
	})
	if r == nil || r.Budget.ID != "monthly-eur" || r.Budget.Left != "1800.00" || r.Budget.Used != "3200.00" || !strings.Contains(r.Detail, "monthly-eur") {
		t.Fatalf("refusal %+v", r)
	}
	// The counterparty heard nothing of it: its offer still waits.
	if st := state(t, s, o.TransactionID); st != "draft" {
		t.Fatalf("the supplier's transaction is %s", st)
	}
	// What fits still passes: the last euro up to the limit.
	if _, err := acceptOffer(t, b, s, "1800.00"); err != nil {
		t.Fatalf("an acceptance up to the limit: %v", err)
	}
	stand, err := b.Princ.Budgets(context.Background())
	if err != nil || len(stand) != 1 || stand[0].Used != "5000.00" || stand[0].Left != "0.00" {
		t.Fatalf("standing %+v %v", stand, err)
	}
}

func state(t *testing.T, sd *recordtest.Side, txn string) string {
	t.Helper()
	tr, err := sd.Node.Org.Store.GetTransaction(context.Background(), txn)
	if err != nil {
		t.Fatal(err)
	}
	return tr.State
}

// TestBudgetConcurrentActsCannotBothPassTheLastEuro: acceptances taken
// at once, each fitting the budget alone, two together not: exactly as
// many pass as fit.
func TestBudgetConcurrentActsCannotBothPassTheLastEuro(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	setBudget(t, b, "monthly-eur", budget.Spend, "5000.00", "")
	type ready struct{ offer, approval string }
	var offers []ready
	for range 4 {
		o := recordtest.Offer(t, s, "2000.00")
		offers = append(offers, ready{o.Objects["offer"], recordtest.Approve(t, b, o.Objects["offer"])})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(offers))
	for i, o := range offers {
		wg.Go(func() {
			_, errs[i] = b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.offer, ApprovalID: o.approval})
		})
	}
	wg.Wait()
	passed := 0
	for _, err := range errs {
		switch {
		case err == nil:
			passed++
		case budgetRefusal(err) == nil:
			t.Fatalf("a refusal not by the budget: %v", err)
		}
	}
	if passed != 2 {
		t.Fatalf("%d acceptances of 2000.00 passed a budget of 5000.00, want 2: %v", passed, errs)
	}
	stand, _ := b.Princ.Budgets(ctx)
	if stand[0].Used != "4000.00" {
		t.Fatalf("used %s", stand[0].Used)
	}
}

// TestBudgetHoldReleasedByApproval: an offer above the budget's approval
// threshold is held for the principal, who sees which budget; once
// approved it is taken, and the approval stays here.
func TestBudgetHoldReleasedByApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	setBudget(t, b, "monthly-eur", budget.Spend, "5000.00", "3000.00")
	txn := "txn_budget_hold_0001"
	in := record.OfferInput{MandateID: b.Mandate, Counterparty: "org_delta", Role: "buyer", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn}
	_, err := b.Engine.ProposeOffer(ctx, b.Actor(), in)
	r := budgetRefusal(err)
	if r == nil || !slices.Contains(r.Codes, reason.ApprovalRequired) || r.ApprovalRequestID == "" {
		t.Fatalf("an offer above the threshold: %v", err)
	}
	if _, err := s.Node.Org.Store.GetTransaction(ctx, txn); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the supplier heard of a held offer: %v", err)
	}
	req, err := b.Node.Org.Store.GetApprovalRequest(ctx, r.ApprovalRequestID)
	if err != nil || !strings.Contains(req.Note, "monthly-eur") || req.Status != store.ApprovalPending {
		t.Fatalf("request %+v %v", req, err)
	}
	// Taken again before the principal decides: still held, one request.
	if _, err := b.Engine.ProposeOffer(ctx, b.Actor(), in); budgetRefusal(err) == nil || budgetRefusal(err).ApprovalRequestID != req.ID {
		t.Fatalf("again while pending: %v", err)
	}
	apr, err := b.Princ.Decide(ctx, req.ID, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Engine.ProposeOffer(ctx, b.Actor(), in)
	if err != nil {
		t.Fatalf("the approved offer: %v", err)
	}
	if st := state(t, s, out.TransactionID); st != "draft" {
		t.Fatalf("the supplier holds %s", st)
	}
	// The budget's approval is this organisation's business.
	if _, err := s.Node.Org.Store.GetObject(ctx, apr["transaction_id"].(string), apr["id"].(string)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the budget's approval reached the counterparty: %v", err)
	}
	// The threshold was released, never the limit.
	_, err = b.Engine.ProposeOffer(ctx, b.Actor(), record.OfferInput{MandateID: b.Mandate, Counterparty: "org_delta", Role: "buyer", Terms: recordtest.Terms("1900.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour))})
	if r := budgetRefusal(err); r == nil || !slices.Contains(r.Codes, reason.PolicyDenied) {
		t.Fatalf("an offer past the limit after an approval: %v", err)
	}
}

// TestBudgetReservesAndReleases: an offer of the buyer's own reserves
// its total until the transaction ends without an agreement, and a new
// period starts the spend afresh.
func TestBudgetReservesAndReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _, c := recordtest.Pair(t)
	setBudgetPer(t, b, "weekly-eur", budget.Spend, budget.Week, "4000.00", "")
	offer := buyerOffer(b, c)
	o, err := offer("3000.00")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := offer("1500.00"); budgetRefusal(err) == nil {
		t.Fatalf("an open offer did not reserve its total: %v", err)
	}
	if _, err := b.Engine.CancelTransaction(ctx, b.Actor(), record.CancelInput{MandateID: b.Mandate, TransactionID: o.TransactionID}); err != nil {
		t.Fatal(err)
	}
	if _, err := offer("1500.00"); err != nil {
		t.Fatalf("a cancelled offer still counts: %v", err)
	}
	nextPeriod(c, budget.Week)
	if _, err := offer("4000.00"); err != nil {
		t.Fatalf("a new week's spend: %v", err)
	}
}

func buyerOffer(b *recordtest.Side, c *recordtest.Clock) func(amount string) (record.Outcome, error) {
	return func(amount string) (record.Outcome, error) {
		return b.Engine.ProposeOffer(context.Background(), b.Actor(), record.OfferInput{MandateID: b.Mandate, Counterparty: "org_delta", Role: "buyer", Terms: recordtest.Terms(amount),
			ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour))})
	}
}

// TestBudgetExposureCountsUnpaidThenPaid: exposure to the supplier is
// what is committed and unpaid plus what was paid this month; a payment
// moves money from one to the other and stops nothing; a new period
// lets the last one's payments go.
func TestBudgetExposureCountsUnpaidThenPaid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _, c, _, obl := accepted(t) // 3200.00 committed, accepted, unpaid
	setBudgetPer(t, b, "delta-exposure", budget.Exposure, budget.Week, "4000.00", "")
	used := func() string {
		t.Helper()
		stand, err := b.Princ.Budgets(ctx)
		if err != nil || len(stand) != 1 || stand[0].Counterparty != "org_delta" {
			t.Fatalf("standing %+v %v", stand, err)
		}
		return stand[0].Used
	}
	if u := used(); u != "3200.00" {
		t.Fatalf("exposure before payment %s", u)
	}
	if _, err := pay(b, obl, "exposure-pay-0001", "1000.00")(); err != nil {
		t.Fatalf("a payment under an exposure budget at 3200 of 4000: %v", err)
	}
	if u := used(); u != "3200.00" {
		t.Fatalf("exposure after paying 1000: %s, want 2200 unpaid + 1000 paid", u)
	}
	offer := buyerOffer(b, c)
	if _, err := offer("800.01"); budgetRefusal(err) == nil {
		t.Fatalf("3200 + 800.01 passed an exposure of 4000: %v", err)
	}
	if _, err := offer("800.00"); err != nil {
		t.Fatal(err)
	}
	nextPeriod(c, budget.Week) // the 1000 was paid last week
	if u := used(); u != "3000.00" {
		t.Fatalf("exposure a week later %s, want 2200 unpaid + 800 offered", u)
	}
}

// nextPeriod moves the clock into the next period p (a week at most, so
// the test mandates, good for 30 days, stay in force).
func nextPeriod(c *recordtest.Clock, p budget.Period) {
	_, end := budget.Window(p, c.Now())
	c.Add(end.Sub(c.Now()) + time.Minute)
}

// TestBudgetForgetsARefusedAct: an acceptance the counterparty refuses
// is removed whole, and what it committed with it.
func TestBudgetForgetsARefusedAct(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	setBudget(t, b, "monthly-eur", budget.Spend, "5000.00", "")
	b.Out.Intercept(func(string, [][]byte) error { return reason.Refuse("not today", reason.PolicyDenied) })
	if _, err := acceptOffer(t, b, s, "3200.00"); err == nil {
		t.Fatal("the intercepted acceptance went through")
	}
	b.Out.Intercept(nil)
	stand, err := b.Princ.Budgets(context.Background())
	if err != nil || len(stand) != 1 || stand[0].Used != "0" {
		t.Fatalf("after a refused acceptance: %+v %v", stand, err)
	}
	if _, err := acceptOffer(t, b, s, "4000.00"); err != nil {
		t.Fatalf("the room the refused act held: %v", err)
	}
}
