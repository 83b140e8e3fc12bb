package verify_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// Approvals in the record: a mandate's approval rule that matches an act,
// rebuilt from the record to the event's action hash, needs an approval
// of that exact act in the bundle.

const role = "procurement_lead"

// acceptanceRule holds the buyer's offer.accept for its procurement lead.
func acceptanceRule(org string) []any {
	return []any{map[string]any{
		"id":                    "r_accept",
		"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": "offer.accept"},
		"approver":              map[string]any{"organization_id": org, "role": role},
		"expires_after_seconds": json.Number("3600"),
	}}
}

// ruled builds a record whose acts rebuild and whose buyer mandate carries
// rules (made by rules from the buyer's organisation).
func ruled(t *testing.T, events int, rules func(org string) []any) *verifytest.Record {
	t.Helper()
	cfg := verifytest.Config{Events: events, Acts: true}
	if rules != nil {
		cfg.BuyerRules = rules("org_buyer")
	}
	rec, err := verifytest.NewWith(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func eventTime(t *testing.T, rec *verifytest.Record, id string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, payload(rec.Object(id))["occurred_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func actionHash(rec *verifytest.Record, eventID string) string {
	return payload(rec.Object(eventID))["action_hash"].(string)
}

// approve adds the approval the rule asks for, of the direct event's act,
// created a second before it and living an hour.
func approve(t *testing.T, rec *verifytest.Record) map[string]any {
	t.Helper()
	direct := rec.EventIDs[0]
	a, err := rec.Approve(rec.Buyer, actionHash(rec, direct), role, eventTime(t, rec, direct).Add(-time.Second), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestActsRebuildWithoutRules(t *testing.T) {
	rec := ruled(t, 5, nil)
	rep := run(rec)
	noFailures(t, rep)
	if rep.Results.NotCheckable != 0 {
		for _, c := range rep.Gaps() {
			t.Errorf("gap %s %s: %s", c.Name, c.Subject, c.Detail)
		}
	}
	for _, id := range rec.EventIDs {
		c := one(t, rep, "approval", id)
		if c.Result != verify.Verified || !strings.HasPrefix(c.Detail, "no mandate of the chain of") {
			t.Errorf("%s: %s %s", id, c.Result, c.Detail)
		}
	}
}

func TestApprovalGiven(t *testing.T) {
	rec := ruled(t, 5, acceptanceRule)
	apr := approve(t, rec)
	rep := run(rec)
	noFailures(t, rep)
	if rep.Results.NotCheckable != 0 {
		for _, c := range rep.Gaps() {
			t.Errorf("gap %s %s: %s", c.Name, c.Subject, c.Detail)
		}
	}
	c := one(t, rep, "approval", rec.EventIDs[0])
	if c.Result != verify.Verified || !strings.Contains(c.Detail, apr["id"].(string)+" approves it") {
		t.Errorf("direct: %s %s", c.Result, c.Detail)
	}
	// The rule names offer.accept: the buyer's other acts are not held by
	// it, and the supplier's mandate states none.
	for _, id := range rec.EventIDs[1:] {
		c := one(t, rep, "approval", id)
		if c.Result != verify.Verified || !strings.Contains(c.Detail, "does not apply") && !strings.HasPrefix(c.Detail, "no mandate of the chain of mnd_supplier") {
			t.Errorf("%s: %s %s", id, c.Result, c.Detail)
		}
	}
	g := one(t, rep, "transition_guard", rec.EventIDs[1])
	if g.Result != verify.Verified || !strings.Contains(g.Detail, apr["id"].(string)) {
		t.Errorf("commit guard: %s %s", g.Result, g.Detail)
	}
}

func TestApprovalAbsent(t *testing.T) {
	rec := ruled(t, 2, acceptanceRule)
	rep := run(rec)
	wantFailed(t, rep, "approval", rec.EventIDs[0], reason.ApprovalRequired)
	// Formation's "approvals complete" does not hold either.
	wantFailed(t, rep, "transition_guard", rec.EventIDs[1], reason.EvidenceTransitionIllegal)
	wantResult(t, rep, "approval", rec.EventIDs[1], verify.Verified)
}

func TestApprovalOfAnotherAct(t *testing.T) {
	rec := ruled(t, 2, acceptanceRule)
	if _, err := rec.Approve(rec.Buyer, actionHash(rec, rec.EventIDs[1]), role,
		eventTime(t, rec, rec.EventIDs[0]).Add(-time.Second), time.Hour); err != nil {
		t.Fatal(err)
	}
	rep := run(rec)
	wantFailed(t, rep, "approval", rec.EventIDs[0], reason.ApprovalHashMismatch)
	wantFailed(t, rep, "transition_guard", rec.EventIDs[1], reason.EvidenceTransitionIllegal)
}

// Each approval below binds the act's hash and still does not release
// it: each fails A202-APPROVAL-REQUIRED and says why.
func TestApprovalsThatDoNotCount(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(t *testing.T, rec *verifytest.Record, a map[string]any)
		why  string
	}{
		"rejected": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			payload(a)["decision"] = "rejected"
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, `decision is "rejected"`},
		"another role": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			payload(a)["approver"].(map[string]any)["role"] = "intern"
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, "the rule names procurement_lead"},
		"signed by the acting agent": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			resign(t, a, "object_issuance", rec.Buyer.AgentSigner)
		}, "approving its own act"},
		"signed by the counterparty's principal": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			resign(t, a, "object_issuance", rec.Supplier.PrincipalSigner)
		}, "a key of org_supplier"},
		"another organisation's approver": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			payload(a)["approver"].(map[string]any)["organization_id"] = "org_supplier"
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, "the act is org_buyer's"},
		"created after the act": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			at := eventTime(t, rec, rec.EventIDs[0]).Add(time.Second)
			a["created_at"] = at.Format(time.RFC3339)
			payload(a)["expires_at"] = at.Add(time.Hour).Format(time.RFC3339)
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, "after the act"},
		"expired at the act": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			payload(a)["expires_at"] = eventTime(t, rec, rec.EventIDs[0]).Format(time.RFC3339)
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, "it expired at"},
		"longer than the rule allows": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			payload(a)["expires_at"] = eventTime(t, rec, rec.EventIDs[0]).Add(2 * time.Hour).Format(time.RFC3339)
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, "longer than the rule's 3600 seconds"},
		"another transaction": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			a["transaction_id"] = "txn_synthetic_0002"
			resign(t, a, "object_issuance", rec.Buyer.PrincipalSigner)
		}, "on transaction txn_synthetic_0002"},
		"changed bytes": {func(t *testing.T, rec *verifytest.Record, a map[string]any) {
			payload(a)["conditions"] = []any{"only on Tuesdays"}
		}, "does not hash to its content_hash"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := ruled(t, 2, acceptanceRule)
			a := approve(t, rec)
			c.edit(t, rec, a)
			rep := run(rec)
			wantFailed(t, rep, "approval", rec.EventIDs[0], reason.ApprovalRequired)
			if d := one(t, rep, "approval", rec.EventIDs[0]).Detail; !strings.Contains(d, c.why) {
				t.Errorf("detail %q does not say %q", d, c.why)
			}
		})
	}
}

// An approval whose signature nobody can check leaves the question open:
// not verified, and not failed either.
func TestApprovalUncheckable(t *testing.T) {
	rec := ruled(t, 2, acceptanceRule)
	approve(t, rec)
	rec.Keys = nil
	rep := run(rec)
	wantResult(t, rep, "approval", rec.EventIDs[0], verify.NotCheckable)
}

// Rules read the act's values: an amount compares as an exact decimal.
func TestApprovalRuleOverAmount(t *testing.T) {
	limit := func(op, v string) func(string) []any {
		return func(org string) []any {
			return []any{map[string]any{
				"id":                    "r_large",
				"when":                  map[string]any{"path": "$.proposed_terms.core.total.amount", "operator": op, "value": v},
				"approver":              map[string]any{"organization_id": org, "role": role},
				"expires_after_seconds": json.Number("3600"),
			}}
		}
	}
	// The synthetic total is "3000.00".
	for _, c := range []struct {
		op, value string
		applies   bool
	}{
		{"minimum", "3000", true},
		{"minimum", "3000.000000000000000001", false},
		{"maximum", "2999.99", false},
		{"equals", "3000.0", true},
		{"not_equals", "3000", false},
	} {
		rec := ruled(t, 5, limit(c.op, c.value))
		rep := run(rec)
		// Every act of the buyer carries the total: the rule holds offer.accept,
		// agreement.sign, obligation.activated and acceptance.granted alike.
		for _, id := range []string{rec.EventIDs[0], rec.EventIDs[1], rec.EventIDs[2], rec.EventIDs[4]} {
			got := one(t, rep, "approval", id)
			if c.applies && (got.Result != verify.Failed || got.Code != reason.ApprovalRequired) {
				t.Errorf("%s %s: %s: %s %s", c.op, c.value, id, got.Result, got.Detail)
			}
			if !c.applies && got.Result != verify.Verified {
				t.Errorf("%s %s: %s: %s %s", c.op, c.value, id, got.Result, got.Detail)
			}
		}
		// The supplier's mandate states no rules.
		wantResult(t, rep, "approval", rec.EventIDs[3], verify.Verified)
	}
}

// A `when` no evaluator can read denies every act under its mandate, so
// an allow recorded under it cannot stand.
func TestApprovalRuleBroken(t *testing.T) {
	rec := ruled(t, 1, func(org string) []any {
		return []any{map[string]any{
			"id":                    "r_bad",
			"when":                  map[string]any{"path": "$.action_type", "operator": "resembles", "value": "offer"},
			"approver":              map[string]any{"organization_id": org, "role": role},
			"expires_after_seconds": json.Number("3600"),
		}}
	})
	rep := run(rec)
	wantFailed(t, rep, "approval", rec.EventIDs[0], reason.MandateConstraintUnknown)
}

// An act the verifier cannot rebuild to the recorded hash (here the
// stand-in hashes of a record built without Acts, as another
// implementation's act shape would be) leaves a stated rule's question
// open rather than answering it.
func TestApprovalActNotRebuilt(t *testing.T) {
	rec, err := verifytest.NewWith(verifytest.Config{Events: 2, BuyerRules: acceptanceRule("org_buyer")})
	if err != nil {
		t.Fatal(err)
	}
	rep := run(rec)
	noFailures(t, rep)
	c := one(t, rep, "approval", rec.EventIDs[0])
	if c.Result != verify.NotCheckable || !strings.Contains(c.Detail, "is not established") {
		t.Errorf("%s %s", c.Result, c.Detail)
	}
	wantResult(t, rep, "transition_guard", rec.EventIDs[1], verify.NotCheckable)
}

// The offeror's rules reach formation through its offer.submit, which has
// no event: the commit guard finds the act through its policy decision.
func TestFormationApprovalOfTheOfferor(t *testing.T) {
	submitRule := func(org string) []any {
		return []any{map[string]any{
			"id":                    "r_submit",
			"when":                  map[string]any{"path": "$.action_type", "operator": "one_of", "value": []any{"offer.submit"}},
			"approver":              map[string]any{"organization_id": org, "role": "sales_lead"},
			"expires_after_seconds": json.Number("600"),
		}}
	}
	rec, err := verifytest.NewWith(verifytest.Config{Events: 2, Acts: true, SupplierRules: submitRule("org_supplier")})
	if err != nil {
		t.Fatal(err)
	}
	commit := rec.EventIDs[1]
	rep := run(rec)
	wantFailed(t, rep, "transition_guard", commit, reason.EvidenceTransitionIllegal)
	if d := one(t, rep, "transition_guard", commit).Detail; !strings.Contains(d, "org_supplier's offer.submit") {
		t.Errorf("detail %q", d)
	}

	d := rec.Object("pol_synthetic_offer")
	evaluated, err := time.Parse(time.RFC3339, payload(d)["evaluated_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Approve(rec.Supplier, payload(d)["action_hash"].(string), "sales_lead", evaluated, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	rep = run(rec)
	noFailures(t, rep)
	wantResult(t, rep, "transition_guard", commit, verify.Verified)
}

// A mandate scoped by category: the act names the category, and an act
// rebuilt to its hash shows it is within scope.
func TestCategoryScope(t *testing.T) {
	rec, err := verifytest.NewWith(verifytest.Config{Events: 5, Acts: true, Categories: []string{"calibration", "testing"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := run(rec)
	noFailures(t, rep)
	for _, id := range rec.EventIDs {
		c := one(t, rep, "mandate_authority", id)
		if c.Result != verify.Verified || !strings.Contains(c.Detail, "names category calibration") {
			t.Errorf("%s: %s %s", id, c.Result, c.Detail)
		}
	}
	// Without acts that rebuild, the category is not established.
	rec, err = verifytest.NewWith(verifytest.Config{Events: 1, Categories: []string{"calibration"}})
	if err != nil {
		t.Fatal(err)
	}
	rep = run(rec)
	c := one(t, rep, "mandate_authority", rec.EventIDs[0])
	if c.Result != verify.NotCheckable || !strings.Contains(c.Detail, "category is not established") {
		t.Errorf("%s %s", c.Result, c.Detail)
	}
}

// agreement_offer_terms: the agreement's terms are the accepted offer's,
// byte for canonical byte.
func TestAgreementOfferTerms(t *testing.T) {
	rec := newRecord(t, 2)
	agr := rec.ObjectOfType("agreement")
	id := agr["id"].(string)
	wantResult(t, run(rec), "agreement_offer_terms", id, verify.Verified)

	// The same amount written another way is other terms.
	terms := copyOf(t, payload(agr)["terms"].(map[string]any))
	payload(agr)["terms"] = terms
	terms["core"].(map[string]any)["total"].(map[string]any)["amount"] = "3000.0"
	h, err := canonical.Hash(terms)
	if err != nil {
		t.Fatal(err)
	}
	payload(agr)["terms_hash"] = h
	resign(t, agr, "agreement_commitment", rec.Buyer.AgentSigner, rec.Supplier.AgentSigner)
	rep := run(rec)
	wantFailed(t, rep, "agreement_offer_terms", id, reason.AgreementHashMismatch)
	wantResult(t, rep, "terms_hash", id, verify.Verified)

	remove(rec, "off_synthetic_0001")
	wantResult(t, run(rec), "agreement_offer_terms", id, verify.NotCheckable)
}
