package record_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// Approvals on every act (issue 16 item 2): an approval rule on any act
// holds it for the principal through the one act pipeline, the hold is an
// approval request the principal's surfaces list, and the principal's
// approval of that exact act releases it: the agent's act when the agent
// takes it again, and an act the instance takes in answer to the
// counterparty (the offeror's agreement.sign) when the counterparty asks
// again.

// ruleOn is an approval rule holding the act named action for org's
// procurement lead.
func ruleOn(action, org string) []map[string]any {
	return []map[string]any{{
		"id":                    "r_" + strings.ReplaceAll(action, ".", "_"),
		"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": action},
		"approver":              map[string]any{"organization_id": org, "role": "procurement_lead"},
		"expires_after_seconds": 3600,
	}}
}

// pendingRequests lists sd's pending approval requests for the act named
// action, as its principal's surfaces list them.
func pendingRequests(t *testing.T, sd *recordtest.Side, action string) []principal.Approval {
	t.Helper()
	list, err := sd.Princ.Approvals(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	var out []principal.Approval
	for _, a := range list {
		if a.Act["action_type"] == action {
			out = append(out, a)
		}
	}
	return out
}

// heldUnder asserts err holds its act for approval and returns the request.
func heldUnder(t *testing.T, what string, err error) string {
	t.Helper()
	var r *reason.Refusal
	if !errors.As(err, &r) || !slices.Contains(r.Codes, reason.ApprovalRequired) || r.ApprovalRequestID == "" {
		t.Fatalf("%s: want a hold naming its approval request, got %v", what, err)
	}
	return r.ApprovalRequestID
}

// approvalVerified asserts each side's record of txn verifies clean and
// its verifier checked the approval aprID of the act named action.
func approvalVerified(t *testing.T, txn, aprID, action string, sides ...*recordtest.Side) {
	t.Helper()
	for _, sd := range sides {
		rep := verifiesClean(t, sd, txn)
		approved := false
		for _, c := range rep.Checks {
			approved = approved || c.Name == "approval" && c.Result == "verified" && strings.Contains(c.Detail, aprID)
		}
		if !approved {
			t.Fatalf("%s's verifier does not find the approval of %s", sd.Node.Org.Config().OrganizationID, action)
		}
	}
}

// TestApprovalReleasesHeldAcceptanceGranted: the buyer's rule holds its
// acceptance of the supplier's performance; the hold leaves both records
// as they were and files one request, which the principal sees with the
// exact act; approved, the same call is taken, the approval travels with
// the event and both records verify clean with the approval checked.
func TestApprovalReleasesHeldAcceptanceGranted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"obligation.activated", "acceptance.granted", "acceptance.rejected"}, ruleOn("acceptance.granted", "org_northstar"))
	txn := recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: bm, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	obl := out.Objects["obligation"]
	assertPerformance(t, s, obl, "20")

	before := holding(t, b, txn)
	accept := record.RespondInput{MandateID: bm, ObligationID: obl, ResponseType: "accept"}
	_, err = b.Engine.Respond(ctx, b.Actor(), accept)
	req := heldUnder(t, "acceptance.granted under the rule", err)
	sameHolding(t, "the buyer's record after the hold", before, holding(t, b, txn))
	if len(s.Pending(t)) != 0 || len(b.Pending(t)) != 0 {
		t.Fatal("a held act sent something")
	}
	// Asked again before the principal decides: the same request, no second.
	_, err = b.Engine.Respond(ctx, b.Actor(), accept)
	if again := heldUnder(t, "acceptance.granted still held", err); again != req {
		t.Fatalf("a second request %s beside %s", again, req)
	}
	list := pendingRequests(t, b, "acceptance.granted")
	if len(list) != 1 || list[0].RequestID != req || list[0].TransactionID != txn || list[0].Act["assertion_id"] == nil {
		t.Fatalf("the principal's list: %+v", list)
	}
	apr, err := b.Princ.Decide(ctx, req, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err = b.Engine.Respond(ctx, b.Actor(), accept)
	if err != nil || out.State != protocol.SettlementPending {
		t.Fatalf("the released acceptance: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 5)
	if types[4] != "acceptance.granted" {
		t.Fatalf("events %v", types)
	}
	if _, err := s.Node.Org.Store.GetObject(ctx, apr["transaction_id"].(string), apr["id"].(string)); err != nil {
		t.Fatalf("the approval did not travel with the event: %v", err)
	}
	approvalVerified(t, txn, apr["id"].(string), "acceptance.granted", b, s)
}

// TestRejectedApprovalKeepsTheHold: a rejection releases nothing, and the
// act is not filed again behind the principal's back.
func TestRejectedApprovalKeepsTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"obligation.activated"}, ruleOn("obligation.activated", "org_northstar"))
	txn := recordtest.Form(t, b, s, "3200.00")
	issue := record.ObligationInput{MandateID: bm, TransactionID: txn, DueCondition: map[string]any{"type": "due_at_time", "at": "2099-01-01T00:00:00Z"}}
	_, err := b.Engine.IssueObligation(ctx, b.Actor(), issue)
	req := heldUnder(t, "obligation.activated under the rule", err)
	if _, err := b.Princ.Decide(ctx, req, false, nil); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	_, err = b.Engine.IssueObligation(ctx, b.Actor(), issue)
	if again := heldUnder(t, "after a rejection", err); again != req || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("after the rejection: %v", err)
	}
	if n := len(pendingRequests(t, b, "obligation.activated")); n != 0 {
		t.Fatalf("%d requests filed again after the rejection", n)
	}
	recordtest.SameRecord(t, b, s, txn, 2)
}

// offerorHeld forms up to the point where the supplier, the offeror,
// holds its agreement.sign for its principal: the buyer's acceptance is
// recorded and its agreement waits in its outbox for the signature.
func offerorHeld(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, req string) {
	t.Helper()
	ctx := context.Background()
	b, s, c = recordtest.Pair(t)
	sm := tradingMandate(t, s, "org_northstar", []string{"offer.submit", "agreement.sign"}, ruleOn("agreement.sign", "org_delta"))
	o, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: sm, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != record.StatusPending || out.State != protocol.AgreementPending {
		t.Fatalf("the acceptance: %+v %v", out, err)
	}
	list := pendingRequests(t, s, "agreement.sign")
	if len(list) != 1 || list[0].TransactionID != o.TransactionID {
		t.Fatalf("the supplier's principal sees %+v", list)
	}
	return b, s, c, o.TransactionID, list[0].RequestID
}

// TestOfferorAgreementSignHeldForApproval: the offeror's own rule holds its
// signature on the agreement the acceptor drafted. The acceptor is told
// its agreement waits for the counterparty's principal, and asks again;
// nothing more is stored on either side until the principal approves;
// then the next attempt is signed, the approval travels with the
// signature, and formation commits on both sides, verifying clean.
func TestOfferorAgreementSignHeldForApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, req := offerorHeld(t)
	v, err := b.Engine.Transaction(ctx, txn)
	if err != nil || v.Notice == nil || !slices.Contains(v.Notice.Codes, reason.ApprovalRequired) || v.Pending == "" {
		t.Fatalf("the acceptor is not told its agreement waits: %+v %v", v, err)
	}
	held := holding(t, s, txn)
	for i := 0; i < 3; i++ {
		c.Add(10 * time.Second)
		recordtest.Flush(ctx, b, s)
	}
	sameHolding(t, "the offeror's record while it holds its signature", held, holding(t, s, txn))
	if n := len(pendingRequests(t, s, "agreement.sign")); n != 1 {
		t.Fatalf("%d requests after the acceptor asked again", n)
	}
	if p := b.Pending(t); len(p) != 1 || p[0].Attempts < 2 {
		t.Fatalf("the acceptor's agreement is not asked again: %+v", p)
	}
	apr, err := s.Princ.Decide(ctx, req, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && (len(b.Pending(t)) > 0 || len(s.Pending(t)) > 0); i++ {
		c.Add(time.Second)
		recordtest.Flush(ctx, b, s)
	}
	types := recordtest.SameRecord(t, b, s, txn, 2)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed"}) {
		t.Fatalf("events %v", types)
	}
	if _, err := b.Node.Org.Store.GetObject(ctx, apr["transaction_id"].(string), apr["id"].(string)); err != nil {
		t.Fatalf("the offeror's approval did not travel with its signature: %v", err)
	}
	v, _ = b.Engine.Transaction(ctx, txn)
	if v.Notice != nil {
		t.Fatalf("the acceptor still reads %+v", v.Notice)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, txn)
	}
}

// TestOfferorRejectsSignatureAcceptorRollsBack: the offeror's principal
// rejects; the next attempt is refused as a policy deny (no detail), and
// the acceptor removes its agreement.
func TestOfferorRejectsSignatureAcceptorRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, req := offerorHeld(t)
	if _, err := s.Princ.Decide(ctx, req, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && len(b.Pending(t)) > 0; i++ {
		c.Add(time.Second)
		recordtest.Flush(ctx, b, s)
	}
	v, err := b.Engine.Transaction(ctx, txn)
	if err != nil || v.Notice == nil || !slices.Contains(v.Notice.Codes, reason.PolicyDenied) {
		t.Fatalf("after the rejection the acceptor reads %+v %v", v.Notice, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		raws, _ := sd.Node.Org.Store.TransactionObjects(ctx, txn)
		for _, raw := range raws {
			o, _ := canonical.DecodeObject(raw)
			if o["object_type"] == "agreement" {
				t.Fatalf("%s still holds the agreement", sd.Node.Org.Config().OrganizationID)
			}
		}
	}
	recordtest.SameRecord(t, b, s, txn, 1)
}

// TestAcceptorCommitHeldForApproval: the acceptor's own rule on
// agreement.sign holds formation's commit, which it takes by itself once
// the agreement is signed by both; its principal's approval releases it
// with no call from the agent (ReleaseHeld).
func TestAcceptorCommitHeldForApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"offer.accept", "agreement.sign"}, ruleOn("agreement.sign", "org_northstar"))
	o := recordtest.Offer(t, s, "3200.00")
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: bm, OfferID: o.Objects["offer"]})
	if err != nil || out.State != protocol.AgreementPending {
		t.Fatalf("the acceptance: %+v %v", out, err)
	}
	list := pendingRequests(t, b, "agreement.sign")
	if len(list) != 1 {
		t.Fatalf("the buyer's principal sees %+v", list)
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 1)
	b.Engine.ReleaseHeld(ctx) // nothing approved yet: nothing moves
	recordtest.SameRecord(t, b, s, o.TransactionID, 1)
	if _, err := b.Princ.Decide(ctx, list[0].RequestID, true, nil); err != nil {
		t.Fatal(err)
	}
	b.Engine.ReleaseHeld(ctx)
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
	for _, sd := range []*recordtest.Side{b, s} {
		if st, _ := sd.Node.Org.Store.GetTransaction(ctx, o.TransactionID); st.State != string(protocol.Committed) {
			t.Fatalf("%s is %s", sd.Node.Org.Config().OrganizationID, st.State)
		}
		verifiesClean(t, sd, o.TransactionID)
	}
}

func sameHolding(t *testing.T, what string, before, after held) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// TestApprovalReleasesHeldSettlementInstruction (issue 14 item 5): a rule on
// settlement.instruct holds the buyer's payment instruction before the rail
// is called; the hold sends nothing, moves no money and leaves both records
// as they were; approved, the same instruction is taken, the rail moves the
// money once, and both records verify clean with the approval checked.
func TestApprovalReleasesHeldSettlementInstruction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"obligation.activated", "acceptance.granted", "settlement.instruct"}, ruleOn("settlement.instruct", "org_northstar"))
	txn := recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: bm, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	obl := out.Objects["obligation"]
	assertPerformance(t, s, obl, "20")
	if out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: bm, ObligationID: obl, ResponseType: "accept"}); err != nil || out.State != protocol.SettlementPending {
		t.Fatalf("accept: %+v %v", out, err)
	}

	before := holding(t, b, txn)
	pay := record.InstructInput{MandateID: bm, ObligationID: obl, Rail: "rail_test_sandbox", IdempotencyKey: "pay-held-000001"}
	_, err = b.Engine.InstructSettlement(ctx, b.Actor(), pay)
	req := heldUnder(t, "settlement.instruct under the rule", err)
	sameHolding(t, "the buyer's record after the hold", before, holding(t, b, txn))
	if len(s.Pending(t)) != 0 || len(b.Pending(t)) != 0 {
		t.Fatal("a held instruction sent something")
	}
	if n := sandbox(t, b).Executions(pay.IdempotencyKey); n != 0 {
		t.Fatalf("a held instruction moved money %d times", n)
	}
	list := pendingRequests(t, b, "settlement.instruct")
	if len(list) != 1 || list[0].RequestID != req || list[0].TransactionID != txn {
		t.Fatalf("the principal's list: %+v", list)
	}
	apr, err := b.Princ.Decide(ctx, req, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err = b.Engine.InstructSettlement(ctx, b.Actor(), pay)
	if err != nil || out.Status != record.StatusRecorded || out.State != protocol.SettlementPending {
		t.Fatalf("the released instruction: %+v %v", out, err)
	}
	if n := sandbox(t, b).Executions(pay.IdempotencyKey); n != 1 {
		t.Fatalf("the released instruction moved money %d times", n)
	}
	types := recordtest.SameRecord(t, b, s, txn, 6)
	if types[5] != "settlement.instructed" {
		t.Fatalf("events %v", types)
	}
	approvalVerified(t, txn, apr["id"].(string), "settlement.instruct", b, s)
}
