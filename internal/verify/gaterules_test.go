package verify_test

import (
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
)

func idOf(o map[string]any) string { s, _ := o["id"].(string); return s }

// copyOf returns a deep copy of a decoded object.
func copyOf(t *testing.T, o map[string]any) map[string]any {
	t.Helper()
	data, err := canonical.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canonical.DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// On a sound record the object guards and the disclosure check verify,
// and no check is made for a rule nothing in the record is subject to.
func TestObjectRulesVerifyOnASoundRecord(t *testing.T) {
	rec := newRecord(t, 8)
	rep := run(rec)
	noFailures(t, rep)
	obl := idOf(rec.ObjectOfType("obligation"))
	obr := idOf(rec.ObjectOfType("obligation_response"))
	wantResult(t, rep, "obligation_parties", obl, verify.Verified)
	wantResult(t, rep, "obligation_subject_term", obl, verify.Verified)
	wantResult(t, rep, "commitment_binding", idOf(rec.ObjectOfType("commitment")), verify.Verified)
	wantResult(t, rep, "acceptance_remainder", obr, verify.Verified)
	wantResult(t, rep, "disclosure_complete", obr, verify.Verified)
	for _, c := range rep.Checks {
		switch c.Name {
		case "agreement_amendment", "due_condition_acyclic", "stated_report", "dispute_subject", "determination_finding":
			t.Errorf("%s on %s: nothing in the record is subject to it", c.Name, c.Subject)
		}
	}
}

// An obligation whose obligee is not a party to its agreement fails on
// its own, with no obligation.activated event in the bundle.
func TestObligationPartiesWithoutActivation(t *testing.T) {
	rec := newRecord(t, 8)
	obl := rec.ObjectOfType("obligation")
	payload(obl)["obligee"] = map[string]any{"organization_id": "org_elsewhere_0001", "agent_id": "agt_elsewhere_0001"}
	for _, o := range append([]map[string]any(nil), rec.Objects...) {
		if o["object_type"] == "transaction_event" && payload(o)["event_type"] == "obligation.activated" {
			remove(rec, idOf(o))
		}
	}
	rep := run(rec)
	wantFailed(t, rep, "obligation_parties", idOf(obl), reason.ObligationSubjectUnreferenced)
	wantResult(t, rep, "obligation_subject_term", idOf(obl), verify.Verified)
}

// A commitment that drifts from its agreement fails commitment_binding:
// a committed party the agreement does not name (here, another agent of
// the same organisation), a term path that does not resolve in its terms,
// another profile, a subject naming another agreement. Without its agreement, the rule cannot be checked.
func TestCommitmentBinding(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p map[string]any)
	}{
		{"another agent of the committed organisation", func(p map[string]any) {
			p["committed_party"].(map[string]any)["agent_id"] = "agt_elsewhere_0001"
		}},
		{"another organisation", func(p map[string]any) {
			p["committed_party"] = map[string]any{"organization_id": "org_elsewhere_0001", "agent_id": "agt_elsewhere_0001"}
		}},
		{"a term path that does not resolve", func(p map[string]any) {
			p["subject"].(map[string]any)["term_path"] = "$.terms.core.quantityx"
		}},
		{"another profile", func(p map[string]any) {
			p["subject"].(map[string]any)["profile"] = "a202-profile/other/0.1"
		}},
		{"a subject naming another agreement", func(p map[string]any) {
			p["subject"].(map[string]any)["agreement_id"] = "agr_0123456789abcdef01234567"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecord(t, 8)
			cmt := rec.ObjectOfType("commitment")
			c.edit(payload(cmt))
			wantFailed(t, run(rec), "commitment_binding", idOf(cmt), reason.AgreementHashMismatch)
		})
	}
	t.Run("its agreement withheld", func(t *testing.T) {
		rec := newRecord(t, 8)
		cmt := rec.ObjectOfType("commitment")
		remove(rec, idOf(rec.ObjectOfType("agreement")))
		wantResult(t, run(rec), "commitment_binding", idOf(cmt), verify.NotCheckable)
	})
}

// A discharge condition on an obligation the bundle holds, with no cycle,
// is verified; one waiting on an obligation it does not hold is not
// checkable, since a cycle could pass through it; two waiting on each
// other both fail.
func TestDueConditionCycles(t *testing.T) {
	rec := newRecord(t, 8)
	first := rec.ObjectOfType("obligation")
	second := copyOf(t, first)
	second["id"] = "obl_second_000000000000000000"
	payload(second)["due_condition"] = map[string]any{"type": "due_on_discharge", "obligation_id": idOf(first)}
	third := copyOf(t, first)
	third["id"] = "obl_third_0000000000000000000"
	payload(third)["due_condition"] = map[string]any{"type": "all_of", "conditions": []any{
		map[string]any{"type": "due_on_discharge", "obligation_id": idOf(second)},
		map[string]any{"type": "due_on_discharge", "obligation_id": "obl_withheld_00000000000000000"},
	}}
	rec.Objects = append(rec.Objects, second, third)
	rep := run(rec)
	wantResult(t, rep, "due_condition_acyclic", idOf(second), verify.Verified)
	wantResult(t, rep, "due_condition_acyclic", idOf(third), verify.NotCheckable)
	if len(find(rep, "due_condition_acyclic", idOf(first))) != 0 {
		t.Errorf("an obligation that waits on no discharge is not subject to the cycle rule")
	}

	payload(first)["due_condition"] = map[string]any{"type": "due_on_discharge", "obligation_id": idOf(second)}
	rep = run(rec)
	wantFailed(t, rep, "due_condition_acyclic", idOf(first), reason.ObligationConditionCyclic)
	wantFailed(t, rep, "due_condition_acyclic", idOf(second), reason.ObligationConditionCyclic)
	// The third waits on the cycle without being on it.
	wantResult(t, rep, "due_condition_acyclic", idOf(third), verify.NotCheckable)
}

// A response whose assertion is absent: not checkable when the bundle
// states nothing about what it withheld, a failure when it states its
// disclosure and does not name the assertion, and a boundary when it
// names it.
func TestDisclosureCompleteness(t *testing.T) {
	rec := newRecord(t, 8)
	prf := idOf(rec.ObjectOfType("performance_event"))
	obr := idOf(rec.ObjectOfType("obligation_response"))
	remove(rec, prf)
	in := inputOf(rec)
	wantResult(t, verify.Verify(in, opts()), "disclosure_complete", obr, verify.NotCheckable)

	in.Disclosure = &verify.Disclosure{}
	wantFailed(t, verify.Verify(in, opts()), "disclosure_complete", obr, reason.EvidenceDisclosureIncomplete)

	in.Disclosure = &verify.Disclosure{StatedGaps: []string{prf}}
	rep := verify.Verify(in, opts())
	wantResult(t, rep, "disclosure_complete", obr, verify.NotCheckable)
	for _, c := range rep.Failures() {
		if c.Code == reason.EvidenceDisclosureIncomplete {
			t.Errorf("a stated gap failed: %+v", c)
		}
	}
}

// A dispute whose subject the bundle does not hold fails only under a
// stated disclosure that does not name it.
func TestDisputeSubjectNeedsAStatedDisclosure(t *testing.T) {
	const path = "negative/dispute-subject-hash-unresolvable.json"
	in, opt := fixtureInput(t, path)
	wantFailed(t, verify.Verify(in, opt), "dispute_subject", "dsp_delta_calibration_01", reason.DisputeSubjectUnreferenced)

	in.Disclosure = nil
	rep := verify.Verify(in, opt)
	wantResult(t, rep, "dispute_subject", "dsp_delta_calibration_01", verify.NotCheckable)
	if len(rep.Failures()) != 0 {
		t.Errorf("failures without a stated disclosure: %+v", rep.Failures())
	}
}

// The version a determination must cite is the one in force at its
// subject act: without a stated rules version it is not checkable.
func TestDeterminationRulesInForce(t *testing.T) {
	const det = "det_calibration_question_01"
	in, opt := fixtureInput(t, "negative/determination-rules-ref-not-in-force.json")
	rep := verify.Verify(in, opt)
	wantFailed(t, rep, "determination_rules_in_force", det, reason.DeterminationNotFollowing)
	wantResult(t, rep, "determination_rules_applied", det, verify.Verified)
	wantResult(t, rep, "determination_effect", det, verify.Verified)
	wantResult(t, rep, "determination_finding", det, verify.NotCheckable)

	opt.RulesVersion = "1.1"
	wantResult(t, verify.Verify(in, opt), "determination_rules_in_force", det, verify.Verified)
	opt.RulesVersion = ""
	wantResult(t, verify.Verify(in, opt), "determination_rules_in_force", det, verify.NotCheckable)
}

// A verification report the record carries is judged as a report; it is
// never taken as evidence about the record.
func TestStatedReport(t *testing.T) {
	rec := newRecord(t, 8)
	in := inputOf(rec)
	report := func(result, overall any) map[string]any {
		return map[string]any{
			"scope": map[string]any{
				"streams_in_scope":    []any{rec.TransactionID},
				"undisclosed_streams": []any{"private_peer_decisions"},
			},
			"checks": []any{
				map[string]any{"check": "content_hash_recomputation", "stream": rec.TransactionID, "result": result},
				map[string]any{"check": "policy_decision_resolution", "stream": "private_peer_decisions", "result": "not_checkable"},
			},
			"overall": overall,
		}
	}
	in.StatedReport = report("verified", "passing_in_scope")
	rep := verify.Verify(in, opts())
	wantResult(t, rep, "stated_report", verify.StatedReportSubject, verify.Verified)
	noFailures(t, rep)

	for _, bad := range []map[string]any{report(true, true), report("verified", "passing"), report("failed", "passing_in_scope")} {
		in.StatedReport = bad
		wantFailed(t, verify.Verify(in, opts()), "stated_report", verify.StatedReportSubject, reason.EvidenceReportInvalid)
	}
}
