package verify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
)

// jsSet reads a bundle fixture as `party gate` hands it to the set
// judge: its objects, and its context read by gate.ContextFromFixture.
func jsSet(t *testing.T, rel string) ([]map[string]any, gate.SetContext) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.FixturesDir(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := canonical.DecodeObject(data)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	var objects []map[string]any
	list, _ := doc["objects"].([]any)
	for _, o := range list {
		objects = append(objects, o.(map[string]any))
	}
	return objects, gate.ContextFromFixture(doc["context"], gate.Options{})
}

// jsObject returns the object with id.
func jsObject(t *testing.T, objects []map[string]any, id string) map[string]any {
	t.Helper()
	for _, o := range objects {
		if o["id"] == id {
			return o
		}
	}
	t.Fatalf("no object %s", id)
	return nil
}

func jsPayload(o map[string]any) map[string]any { return o["payload"].(map[string]any) }

// jsRehash recomputes o's content hash after a test changed it, and
// returns it.
func jsRehash(t *testing.T, o map[string]any) string {
	t.Helper()
	h, err := canonical.ContentHash(o)
	if err != nil {
		t.Fatal(err)
	}
	o["content_hash"] = h
	return h
}

// jsProblems returns the problems of j with code about object.
func jsProblems(j gate.Judgment, code reason.Code, object string) []gate.Problem {
	var out []gate.Problem
	for _, p := range j.Problems {
		if p.Code == code && p.Object == object {
			out = append(out, p)
		}
	}
	return out
}

func jsShow(j gate.Judgment) string {
	var out []string
	for _, p := range j.Problems {
		out = append(out, p.String())
	}
	return string(j.Outcome) + ": " + strings.Join(out, "; ")
}

// Every bundle fixture of the bilateral scope agrees with the manifest
// when judged by JudgeSet directly (package gate runs all 118 fixtures
// through gate.File with JudgeSet as the set judge).
func TestJudgeSetBundleFixtures(t *testing.T) {
	for _, row := range bundleRows(t) {
		objects, ctx := jsSet(t, row.path)
		j := verify.JudgeSet(objects, ctx)
		switch {
		case j.Kind != gate.KindBundle:
			t.Errorf("%s: kind %s", row.path, j.Kind)
		case row.outcome == "valid" && !j.Accepted():
			t.Errorf("%s: valid, %s", row.path, jsShow(j))
		case row.outcome != "valid" && !j.Has(row.code):
			t.Errorf("%s: want %s, %v: %s", row.path, row.code, j.Codes, jsShow(j))
		}
	}
}

// A rule the verifier reports and the gate's CheckBindings also computes
// is reported once: the verifier's check, not the gate's problem too.
func TestJudgeSetReportsEachRuleOnce(t *testing.T) {
	for _, c := range []struct {
		fixture string
		code    reason.Code
		objects []string
	}{
		{"negative/obligation-obligee-not-party-to-agreement.json", reason.ObligationSubjectUnreferenced, []string{"obl_delta_calibration_01"}},
		{"negative/obligation-partial-acceptance-no-remainder.json", reason.ObligationRemainderMissing, []string{"obr_northstar_calibration_01"}},
		{"negative/obligation-condition-cycle.json", reason.ObligationConditionCyclic, []string{"obl_delta_calibration_01", "obl_northstar_collection_01"}},
		{"negative/dispute-out-of-window.json", reason.DisputeOutOfWindow, []string{"dsp_delta_calibration_01"}},
		{"negative/determination-rules-ref-not-in-force.json", reason.DeterminationNotFollowing, []string{"det_calibration_question_01"}},
		{"negative/obligation-response-signed-by-obligor.json", reason.ObligationResponseUnauthorized, []string{"obr_northstar_calibration_01"}},
	} {
		objects, ctx := jsSet(t, c.fixture)
		j := verify.JudgeSet(objects, ctx)
		for _, id := range c.objects {
			if n := len(jsProblems(j, c.code, id)); n != 1 {
				t.Errorf("%s: %d problems %s on %s, want 1: %s", c.fixture, n, c.code, id, jsShow(j))
			}
		}
	}
}

// The gate's cross-object rules the verifier does not ask are still
// judged: each below is reported by gate.CheckBindings alone.
func TestJudgeSetGateRulesTheVerifierDoesNotAsk(t *testing.T) {
	t.Run("payer not a party", func(t *testing.T) {
		objects, ctx := jsSet(t, "valid-settlement-instruction.json")
		stl := jsObject(t, objects, "stl_delta_calibration_01")
		jsPayload(stl)["payer_organization_id"] = "org_elsewhere"
		jsRehash(t, stl)
		j := verify.JudgeSet(objects, ctx)
		if n := len(jsProblems(j, reason.SettlementCustodyRefused, stl["id"].(string))); n != 1 {
			t.Errorf("%d custody problems, want 1: %s", n, jsShow(j))
		}
	})
	t.Run("assertion in another unit", func(t *testing.T) {
		objects, ctx := jsSet(t, "valid-obligation-response-partial-acceptance.json")
		prf := jsObject(t, objects, "prf_delta_calibration_01")
		jsPayload(prf)["unit_code"] = "KGM"
		obr := jsObject(t, objects, "obr_northstar_calibration_01")
		jsPayload(obr)["assertion_hash"] = jsRehash(t, prf)
		jsRehash(t, obr)
		j := verify.JudgeSet(objects, ctx)
		if n := len(jsProblems(j, reason.ObligationTermsMutated, "prf_delta_calibration_01")); n != 1 {
			t.Errorf("%d unit problems, want 1: %s", n, jsShow(j))
		}
	})
	t.Run("assertion about another obligation", func(t *testing.T) {
		objects, ctx := jsSet(t, "valid-obligation-response-partial-acceptance.json")
		prf := jsObject(t, objects, "prf_delta_calibration_01")
		jsPayload(prf)["obligation_id"] = "obl_delta_calibration_remainder_01"
		obr := jsObject(t, objects, "obr_northstar_calibration_01")
		jsPayload(obr)["assertion_hash"] = jsRehash(t, prf)
		jsRehash(t, obr)
		j := verify.JudgeSet(objects, ctx)
		if n := len(jsProblems(j, reason.ObligationResponseHashMismatch, "obr_northstar_calibration_01")); n != 1 {
			t.Errorf("%d problems, want 1: %s", n, jsShow(j))
		}
	})
	t.Run("acceptance of another offer", func(t *testing.T) {
		objects, ctx := jsSet(t, "valid-agreement-direct-formation.json")
		acc := jsObject(t, objects, "acc_bilateral_direct_01")
		jsPayload(acc)["offer_id"] = "off_bilateral_other_01"
		jsRehash(t, acc)
		j := verify.JudgeSet(objects, ctx)
		if n := len(jsProblems(j, reason.AgreementHashMismatch, "agr_bilateral_direct_01")); n != 1 {
			t.Errorf("%d problems, want 1: %s", n, jsShow(j))
		}
	})
}

// Signatures are not verified (no keys): the published fixtures carry
// placeholder values, and a signature that cannot be checked is no gate
// problem. Its purpose and count are: a wrong purpose is refused.
func TestJudgeSetSignaturesNotVerified(t *testing.T) {
	objects, ctx := jsSet(t, "valid-agreement-direct-formation.json")
	if j := verify.JudgeSet(objects, ctx); !j.Accepted() {
		t.Fatalf("published record: %s", jsShow(j))
	}
	objects, ctx = jsSet(t, "negative/evidence-bundle-signature-wrong-purpose.json")
	if j := verify.JudgeSet(objects, ctx); !j.Has(reason.EvidenceSignatureInvalid) {
		t.Errorf("wrong purpose: %s", jsShow(j))
	}
}

// A context that states a subject act's time governs the dispute window;
// otherwise the verifier runs it from the subject's created_at.
func TestJudgeSetSubjectActAt(t *testing.T) {
	const dsp = "dsp_delta_calibration_01"
	objects, ctx := jsSet(t, "negative/dispute-out-of-window.json")
	raised, err := time.Parse(time.RFC3339, jsObject(t, objects, dsp)["created_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ctx.SubjectActAt = raised.Add(-time.Hour)
	if j := verify.JudgeSet(objects, ctx); !j.Accepted() {
		t.Errorf("raised an hour after the stated subject act: %s", jsShow(j))
	}
	ctx.SubjectActAt = time.Time{}
	j := verify.JudgeSet(objects, ctx)
	ps := jsProblems(j, reason.DisputeOutOfWindow, dsp)
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Detail, "dispute_window ") {
		t.Errorf("no stated act time, the subject's created_at governs: %s", jsShow(j))
	}
}

// The rules version a determination must cite is the context's
// SubjectRulesVersion; unstated, it is not checked, whatever version the
// replay assumes.
func TestJudgeSetSubjectRulesVersion(t *testing.T) {
	const det = "det_calibration_question_01"
	objects, ctx := jsSet(t, "negative/determination-rules-ref-not-in-force.json")
	if ctx.SubjectRulesVersion != "1.0" {
		t.Fatalf("the fixture states %q", ctx.SubjectRulesVersion)
	}
	if ps := jsProblems(verify.JudgeSet(objects, ctx), reason.DeterminationNotFollowing, det); len(ps) != 1 {
		t.Errorf("stated 1.0, cites 1.1: %v", ps)
	}
	ctx.SubjectRulesVersion = "1.1"
	if j := verify.JudgeSet(objects, ctx); !j.Accepted() {
		t.Errorf("stated 1.1, cites 1.1: %s", jsShow(j))
	}
	ctx.SubjectRulesVersion = ""
	if j := verify.JudgeSet(objects, ctx); !j.Accepted() {
		t.Errorf("nothing stated: %s", jsShow(j))
	}
}

// Disclosing part of a stream: a first disclosed event naming a
// predecessor the set lacks is a boundary; an event continuing an event of
// another stream is a gap.
func TestJudgeSetStreamBoundaryAndCrossStream(t *testing.T) {
	objects, ctx := jsSet(t, "valid-agreement-direct-formation.json")
	first := jsObject(t, objects, "evt_bilateral_direct_01")
	second := jsObject(t, objects, "evt_bilateral_commit_01")
	if j := verify.JudgeSet([]map[string]any{second}, ctx); !j.Accepted() {
		t.Errorf("a disclosed boundary is refused: %s", jsShow(j))
	}
	if j := verify.JudgeSet([]map[string]any{first, second}, ctx); !j.Accepted() {
		t.Errorf("the published chain is refused: %s", jsShow(j))
	}
	jsPayload(first)["stream"].(map[string]any)["id"] = "txn_other_stream_01"
	jsPayload(second)["previous_event_hash"] = jsRehash(t, first)
	jsRehash(t, second)
	j := verify.JudgeSet([]map[string]any{first, second}, ctx)
	found := false
	for _, p := range j.Problems {
		found = found || (p.Code == reason.EvidenceChainGap && strings.Contains(p.Detail, "across streams"))
	}
	if !found {
		t.Errorf("cross-stream continuity not refused: %s", jsShow(j))
	}
}

// Replay reads each event from the state the previous one left, and
// nothing is legal under a rules version that is not registered.
func TestJudgeSetTransitionContinuity(t *testing.T) {
	objects, ctx := jsSet(t, "valid-agreement-direct-formation.json")
	commit := jsObject(t, objects, "evt_bilateral_commit_01")
	p := jsPayload(commit)
	// Legal in the table, but not from the state the record is in.
	p["from_state"], p["event_type"], p["to_state"] = "committed", "obligation.activated", "in_performance"
	jsRehash(t, commit)
	j := verify.JudgeSet(objects, ctx)
	ps := jsProblems(j, reason.EvidenceTransitionIllegal, "evt_bilateral_commit_01")
	found := false
	for _, p := range ps {
		found = found || strings.HasPrefix(p.Detail, "transition_legality ")
	}
	if !found {
		t.Errorf("a transition from a state the record is not in: %s", jsShow(j))
	}

	objects, ctx = jsSet(t, "valid-agreement-direct-formation.json")
	ctx.RulesVersion = "0.9"
	j = verify.JudgeSet(objects, ctx)
	for _, id := range []string{"evt_bilateral_direct_01", "evt_bilateral_commit_01"} {
		if len(jsProblems(j, reason.EvidenceTransitionIllegal, id)) != 1 {
			t.Errorf("an unregistered rules version makes %s legal: %s", id, jsShow(j))
		}
	}
	ctx.RulesVersion = "1.3"
	ctx.EventRules = map[string]string{"evt_bilateral_commit_01": "0.9"}
	j = verify.JudgeSet(objects, ctx)
	if len(jsProblems(j, reason.EvidenceTransitionIllegal, "evt_bilateral_commit_01")) != 1 || len(j.Codes) != 1 {
		t.Errorf("0.9 stated for one event: %s", jsShow(j))
	}
}
