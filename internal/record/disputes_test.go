package record_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// Disputes, determinations and the exception path (issue 17). Each act is
// made through the engine on one side and checked by the other; each
// countersigner rule has a hostile message built by hand, signed with the
// sender's valid keys, refused with its registered code, leaving both
// records as they were; and every record verifies with nothing failed on
// both sides.

// disputeActs are the acts of this file, beside the walkthrough's.
var disputeActs = []string{"dispute.raise", "determination.issue", "exception.open", "remediation.accept", "exception.resolve",
	"transaction.terminate", "termination.agree", "obligation.waive", "obligation.activated", "performance.declared", "acceptance.granted",
	"acceptance.rejected", "settlement.instruct", "transaction.complete"}

// disputing forms the walkthrough's transaction, issues the obligation,
// has the supplier assert all 20 and the buyer reject the assertion; both
// parties get a mandate listing the acts of this file.
func disputing(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, obl string) {
	t.Helper()
	ctx := context.Background()
	b, s, c, txn, obl = committed(t)
	b.Mandate = mandateFor(t, b, c, disputeActs, nil)
	s.Mandate = mandateFor(t, s, c, disputeActs, nil)
	assertPerformance(t, s, obl, "20")
	out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "quantity_short"})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("reject: %+v %v", out, err)
	}
	return b, s, c, txn, obl
}

// responseOf returns the id of sd's response to obl of type rt.
func responseOf(t *testing.T, sd *recordtest.Side, txn, obl, rt string) string {
	t.Helper()
	objs, err := sd.Node.Org.Store.TransactionObjectsOfType(context.Background(), txn, "obligation_response")
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range objs {
		o := mustDecode(t, raw)
		p := payloadOf(o)
		if p["obligation_id"] == obl && p["response_type"] == rt {
			return o["id"].(string)
		}
	}
	t.Fatalf("no %s response to %s", rt, obl)
	return ""
}

// evidenceOf returns the ids of the evidence of txn sd holds.
func evidenceOf(t *testing.T, sd *recordtest.Side, txn string) []string {
	t.Helper()
	objs, err := sd.Node.Org.Store.TransactionObjectsOfType(context.Background(), txn, "evidence")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range objs {
		out = append(out, mustDecode(t, raw)["id"].(string))
	}
	return out
}

// TestWrongfulRejectionDisputedRespondentConcedes: the supplier disputes
// the buyer's rejection of its assertion (an act subject, on the ground
// obligation_wrongly_rejected, resting on the certificate it presented);
// raising suspends nothing; the buyer, the respondent, concedes with a
// presumptive determination; no state moves on either side, and both
// records verify.
func TestWrongfulRejectionDisputedRespondentConcedes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	rej := responseOf(t, s, txn, obl, "reject")
	before := []held{holding(t, b, txn), holding(t, s, txn)}
	out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "act", SubjectID: rej,
		Grounds: []string{"obligation_wrongly_rejected"}, Description: "All twenty transmitters were calibrated; the certificate shows it.",
		EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil || out.Status != record.StatusDelivered || out.State != "in_performance" {
		t.Fatalf("raise: %+v %v", out, err)
	}
	dsp := out.Objects["dispute"]
	for i, sd := range []*recordtest.Side{b, s} {
		after := holding(t, sd, txn)
		if after.State != before[i].State || after.Head != before[i].Head || after.Obligations[obl] != "rejected" {
			t.Fatalf("raising moved %s's record: %+v", sd.Node.Org.Config().OrganizationID, after)
		}
		if _, ok := after.Objects[dsp]; !ok {
			t.Fatalf("%s does not hold the dispute", sd.Node.Org.Config().OrganizationID)
		}
	}
	out, err = b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: dsp, Effect: "presumptive",
		Finding:      "The assertion was rejected as short; the certificate it rests on covers all twenty. The rejection is not supported by the record.",
		RulesApplied: []string{"a202-rules/pilot#determiner.authority", "a202-rules/pilot#obligation.acceptance-binds-assertion"}})
	if err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("determine: %+v %v", out, err)
	}
	det := out.Objects["determination"]
	for i, sd := range []*recordtest.Side{b, s} {
		after := holding(t, sd, txn)
		if after.State != before[i].State || after.Head != before[i].Head || after.Obligations[obl] != "rejected" {
			t.Fatalf("a presumptive determination moved %s's record: %+v", sd.Node.Org.Config().OrganizationID, after)
		}
		if _, ok := after.Objects[det]; !ok {
			t.Fatalf("%s does not hold the determination", sd.Node.Org.Config().OrganizationID)
		}
	}
	recordtest.SameRecord(t, b, s, txn, 5)
	for _, sd := range []*recordtest.Side{b, s} {
		// get_transaction_record shows the dispute, determined, and its
		// determination.
		v := stateOf(t, sd, txn)
		if len(v.Disputes) != 1 || v.Disputes[0].DisputeID != dsp || !v.Disputes[0].Determined || v.Disputes[0].RaisedBy != "org_delta" ||
			v.Disputes[0].SubjectID != rej || fmt.Sprint(v.Disputes[0].Determinations) != "["+det+"]" {
			t.Fatalf("%s shows disputes %+v", sd.Node.Org.Config().OrganizationID, v.Disputes)
		}
		if len(v.Determinations) != 1 || v.Determinations[0].Effect != "presumptive" || v.Determinations[0].Determiner != "org_northstar" || v.Determinations[0].SupersededBy != "" {
			t.Fatalf("%s shows determinations %+v", sd.Node.Org.Config().OrganizationID, v.Determinations)
		}
		rep := verifiesClean(t, sd, txn)
		for _, name := range []string{"dispute_subject", "dispute_window", "determination_question", "determination_rules_in_force", "determination_effect", "determination_finding"} {
			if len(checksNamed(rep, name)) == 0 {
				t.Errorf("%s's report has no %s check", sd.Node.Org.Config().OrganizationID, name)
			}
		}
	}
}

// failedPayment forms the transaction, has the supplier perform and the
// buyer accept and pay on a rail that fails the first payment and
// succeeds the next: settlement_pending with a failed receipt. Both
// parties hold mandates listing the acts of this file.
func failedPayment(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, obl string) {
	t.Helper()
	b, s, c, txn, obl = committed(t)
	b.Mandate = mandateFor(t, b, c, disputeActs, nil)
	s.Mandate = mandateFor(t, s, c, disputeActs, nil)
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) {
		reg, err := rails.Open(b.Node.Dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox", Outcomes: []rails.Status{rails.Failed, rails.Succeeded}}}, b.Node.Org.Clock)
		if err != nil {
			t.Fatal(err)
		}
		o.Rails = reg
	})
	s.Out.Reconnect(b.Engine)
	assertPerformance(t, s, obl, "20")
	if out, err := b.Engine.Respond(context.Background(), b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	if _, err := instruct(b, obl, "pay-fails-000001")(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Engine.SettlementStatus(context.Background(), txn)
	if err != nil || len(st) != 1 || st[0].State != "failed" {
		t.Fatalf("the first payment did not fail: %+v %v", st, err)
	}
	return b, s, c, txn, obl
}

// TestFailedSettlementRemediationToCompletion (pilot state machine §11
// test 12): a failed payment does not cancel the obligation; the payee
// opens an exception over it, the supplier offers to perform the duty
// again and the buyer accepts (exception_open → in_performance), the
// remediation is performed and accepted, the payment made again, and the
// transaction completes; both records verify.
func TestFailedSettlementRemediationToCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := failedPayment(t)
	out, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn})
	if err != nil || out.State != "exception_open" || out.Status != record.StatusRecorded {
		t.Fatalf("open: %+v %v", out, err)
	}
	if st := obligationStates(t, b, txn); st[obl] != "accepted" {
		t.Fatalf("the failed payment moved the obligation: %v", st)
	}
	// The obligee cannot offer the obligor's remedy, nor accept one not made.
	refused(t, "the obligee offering the remedy", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.ProposeRemediation(ctx, b.Actor(), record.ExceptionActInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	})
	refused(t, "accepting a remediation nobody offered", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.AcceptRemediation(ctx, b.Actor(), record.ExceptionActInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	})
	if out, err = s.Engine.ProposeRemediation(ctx, s.Actor(), record.ExceptionActInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("offer to remedy: %+v %v", out, err)
	}
	if v := stateOf(t, b, txn); len(v.Exceptions) != 1 || v.Exceptions[0].Status != "open" || v.Exceptions[0].ExceptionType != "settlement_failed" ||
		v.Exceptions[0].ObligationID != obl || len(v.Exceptions[0].RemediationOffers) != 1 {
		t.Fatalf("the buyer shows exceptions %+v", v.Exceptions)
	}
	if out, err = b.Engine.AcceptRemediation(ctx, b.Actor(), record.ExceptionActInput{MandateID: b.Mandate, TransactionID: txn}); err != nil || out.State != "in_performance" {
		t.Fatalf("accept remediation: %+v %v", out, err)
	}
	rem := out.Objects["obligation"]
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[rem] != "pending" || st[obl] != "accepted" {
			t.Fatalf("%s: %v", sd.Node.Org.Config().OrganizationID, st)
		}
	}
	assertPerformance(t, s, rem, "20")
	if out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: rem, ResponseType: "accept"}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept the remediation: %+v %v", out, err)
	}
	if _, err := instruct(b, obl, "pay-again-000002")(); err != nil {
		t.Fatal(err)
	}
	if out, err = s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 12)
	want := []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted",
		"settlement.instructed", "exception.opened", "remediation.accepted", "performance.declared", "acceptance.granted",
		"settlement.instructed", "transaction.completed"}
	if fmt.Sprint(types[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if v := stateOf(t, sd, txn); len(v.Exceptions) != 1 || v.Exceptions[0].Status != "remediated" || len(v.Exceptions[0].RemediationOffers) != 0 {
			t.Fatalf("%s shows exceptions %+v", sd.Node.Org.Config().OrganizationID, v.Exceptions)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestTerminationFromException (pilot state machine §11 test 13): a
// dispute over the buyer's rejection of the obligation's state opens an
// exception (the obligation disputed on both sides); the buyer ends the
// transaction through it, the disputed obligation released; both records
// verify.
func TestTerminationFromException(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil || out.State != "exception_open" || out.Status != record.StatusRecorded {
		t.Fatalf("raise: %+v %v", out, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[obl] != "disputed" {
			t.Fatalf("%s: %v", sd.Node.Org.Config().OrganizationID, st)
		}
	}
	// The exception's opener resolves it only once its dispute is
	// determined.
	refused(t, "resolving an exception over an undetermined dispute", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.ResolveException(ctx, s.Actor(), record.ExceptionActInput{MandateID: s.Mandate, TransactionID: txn})
		return err
	})
	// A disputed obligation is not waived: its question is open.
	refused(t, "waiving a disputed obligation", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: obl})
		return err
	})
	if out, err = b.Engine.TerminateTransaction(ctx, b.Actor(), record.ExceptionActInput{MandateID: b.Mandate, TransactionID: txn}); err != nil || out.State != "terminated" {
		t.Fatalf("terminate: %+v %v", out, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[obl] != "released" {
			t.Fatalf("%s: %v", sd.Node.Org.Config().OrganizationID, st)
		}
	}
	recordtest.SameRecord(t, b, s, txn, 7)
	for _, sd := range []*recordtest.Side{b, s} {
		v := stateOf(t, sd, txn)
		if len(v.Exceptions) != 1 || v.Exceptions[0].Status != "terminated" || v.Exceptions[0].ExceptionType != "obligation_disputed" || v.Exceptions[0].DisputeID == "" {
			t.Fatalf("%s shows exceptions %+v", sd.Node.Org.Config().OrganizationID, v.Exceptions)
		}
		if len(v.Disputes) != 1 || v.Disputes[0].Determined || v.Disputes[0].SubjectType != "obligation_state" {
			t.Fatalf("%s shows disputes %+v", sd.Node.Org.Config().OrganizationID, v.Disputes)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestTerminationAgreedFromException: from exception_open the parties may
// also end the transaction by agreement (termination.agreed), the disputed
// obligation released, and the exception and its dispute, open until
// then, closed by it on both sides; both records verify.
func TestTerminationAgreedFromException(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	if out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)}); err != nil || out.State != "exception_open" {
		t.Fatalf("raise: %+v %v", out, err)
	}
	if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "terminated" {
		t.Fatalf("agree: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 7)
	if types[6] != "termination.agreed" {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[obl] != "released" {
			t.Fatalf("%s: %v", sd.Node.Org.Config().OrganizationID, st)
		}
		v := stateOf(t, sd, txn)
		if len(v.Exceptions) != 1 || v.Exceptions[0].Status != "closed" || v.Exceptions[0].EndedBy != "termination.agreed" {
			t.Fatalf("%s: exceptions %+v", sd.Node.Org.Config().OrganizationID, v.Exceptions)
		}
		if len(v.Disputes) != 1 || v.Disputes[0].Status != "closed" || v.Disputes[0].EndedBy != "termination.agreed" || v.Disputes[0].Determined {
			t.Fatalf("%s: disputes %+v", sd.Node.Org.Config().OrganizationID, v.Disputes)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestBindingStateResult: with the obligation disputed (an exception
// open over it), the supplier disputes the obligation itself as an act;
// the buyer's binding determination with a state_result takes it to
// accepted on both sides; both records verify.
func TestBindingStateResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	if out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)}); err != nil || out.State != "exception_open" {
		t.Fatalf("raise: %+v %v", out, err)
	}
	out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "act", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil {
		t.Fatal(err)
	}
	dsp := out.Objects["dispute"]
	refused(t, "a state_result to an unregistered state", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: dsp, Effect: "binding", Finding: "The duty was performed.",
			StateResult: &record.StateResult{SubjectID: obl, State: "excellent"}})
		return err
	})
	if _, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: dsp, Effect: "binding", Finding: "The duty was performed.",
		StateResult: &record.StateResult{SubjectID: obl, State: "accepted"}}); err != nil {
		t.Fatal(err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[obl] != "accepted" {
			t.Fatalf("%s: %v", sd.Node.Org.Config().OrganizationID, st)
		}
	}
	bothVerifyClean(t, b, s, txn)
}
