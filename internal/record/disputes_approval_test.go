package record_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/verify"
)

// TestDisputeActsHeldForApproval: the acts of issue 17 go through the one
// pipeline's approval step like every other act. The buyer's rule holds
// its determination, the supplier's its dispute over the obligation's
// state (the exception it opens, and the dispute's own decision riding
// it): each hold leaves both records as they were and files one request;
// approved, the same call goes through, the approval travels, and both
// records verify clean with the approval checked.
func TestDisputeActsHeldForApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	rej := responseOf(t, s, txn, obl, "reject")
	bm := tradingMandate(t, b, "org_delta", disputeActs, ruleOn("determination.issue", "org_northstar"))
	sm := tradingMandate(t, s, "org_northstar", disputeActs, ruleOn("exception.open", "org_delta"))

	out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: sm, TransactionID: txn, SubjectType: "act", SubjectID: rej,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil {
		t.Fatalf("a dispute its rule does not hold: %v", err)
	}
	dsp := out.Objects["dispute"]

	before := []held{holding(t, b, txn), holding(t, s, txn)}
	determine := record.DeterminationInput{MandateID: bm, DisputeID: dsp, Effect: "presumptive", Finding: finding}
	_, err = b.Engine.IssueDetermination(ctx, b.Actor(), determine)
	req := heldUnder(t, "determination.issue under the rule", err)
	sameHolding(t, "the buyer's record after the hold", before[0], holding(t, b, txn))
	sameHolding(t, "the supplier's record after the hold", before[1], holding(t, s, txn))
	if list := pendingRequests(t, b, "determination.issue"); len(list) != 1 || list[0].RequestID != req || list[0].Act["dispute_id"] != dsp {
		t.Fatalf("the buyer's principal sees %+v", list)
	}
	apr, err := b.Princ.Decide(ctx, req, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	determine.ApprovalID = apr["id"].(string)
	refused(t, "the released determination arriving without its approval", b, s, txn, reason.ApprovalRequired, tampered(t, b, func(objs []map[string]any) []map[string]any {
		return without(objs, "approval")
	}, func() error { _, err := b.Engine.IssueDetermination(ctx, b.Actor(), determine); return err }))
	if out, err = b.Engine.IssueDetermination(ctx, b.Actor(), determine); err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("the released determination: %+v %v", out, err)
	}

	raise := record.DisputeInput{MandateID: sm, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)}
	before = []held{holding(t, b, txn), holding(t, s, txn)}
	_, err = s.Engine.RaiseDispute(ctx, s.Actor(), raise)
	req = heldUnder(t, "exception.open under the rule", err)
	sameHolding(t, "the supplier's record after the hold", before[1], holding(t, s, txn))
	sameHolding(t, "the buyer's record after the hold", before[0], holding(t, b, txn))
	sapr, err := s.Princ.Decide(ctx, req, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	raise.ApprovalID = sapr["id"].(string)
	if out, err = s.Engine.RaiseDispute(ctx, s.Actor(), raise); err != nil || out.State != "exception_open" {
		t.Fatalf("the released dispute: %+v %v", out, err)
	}
	recordtest.SameRecord(t, b, s, txn, 6)
	det := determinationOf(t, b, txn)
	for _, sd := range []*recordtest.Side{b, s} {
		// Both approvals travelled with their acts; the verifier checks
		// the one an event records and the determination's, an act
		// recorded by its objects alone (verify's standaloneApproval).
		for _, id := range []string{apr["id"].(string), sapr["id"].(string)} {
			if _, err := sd.Node.Org.Store.GetObject(ctx, txn, id); err != nil {
				t.Fatalf("%s does not hold the approval %s: %v", sd.Node.Org.Config().OrganizationID, id, err)
			}
		}
		rep := verifiesClean(t, sd, txn)
		approved := map[string]bool{}
		for _, ch := range rep.Checks {
			for _, id := range []string{apr["id"].(string), sapr["id"].(string)} {
				approved[id] = approved[id] || ch.Name == "approval" && ch.Result == "verified" && strings.Contains(ch.Detail, id)
			}
		}
		if !approved[sapr["id"].(string)] {
			t.Fatalf("%s's verifier does not find the approval of exception.open", sd.Node.Org.Config().OrganizationID)
		}
		if !approved[apr["id"].(string)] {
			t.Fatalf("%s's verifier does not find the approval of determination.issue", sd.Node.Org.Config().OrganizationID)
		}
		// The same record without the determination's approval: the
		// verifier says the determination was not approved.
		c, _, err := export.Collect(ctx, sd.Node.Org.Store, txn)
		if err != nil {
			t.Fatal(err)
		}
		objs := slices.DeleteFunc(slices.Clone(c.Objects), func(o map[string]any) bool { return o["id"] == apr["id"] })
		rep = verify.Verify(verify.Input{Objects: objs, Mandates: c.Mandates, Keys: c.Keys, TransactionID: txn}, verify.Options{RulesVersion: c.Manifest.RulesVersion})
		failed := false
		for _, f := range rep.Failures() {
			failed = failed || f.Name == "approval" && f.Subject == det && (f.Code == reason.ApprovalRequired || f.Code == reason.ApprovalHashMismatch)
		}
		if !failed {
			t.Fatalf("%s's record without the determination's approval: %+v", sd.Node.Org.Config().OrganizationID, rep.Failures())
		}
	}
}

// determinationOf is the id of the one determination sd holds on txn.
func determinationOf(t *testing.T, sd *recordtest.Side, txn string) string {
	t.Helper()
	raws, err := sd.Node.Org.Store.TransactionObjectsOfType(context.Background(), txn, "determination")
	if err != nil || len(raws) != 1 {
		t.Fatalf("determinations of %s: %d %v", txn, len(raws), err)
	}
	o, err := canonical.DecodeObject(raws[0])
	if err != nil {
		t.Fatal(err)
	}
	return o["id"].(string)
}
