package gate_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
)

// fixture decodes a published fixture for a test to mutate.
func fixture(t *testing.T, rel string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.FixturesDir(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	o, err := canonical.DecodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func m(v any) map[string]any { return v.(map[string]any) }

// expectCodes fails unless j is refused with exactly the given codes, or
// accepted when none are given.
func expectCodes(t *testing.T, what string, j gate.Judgment, codes ...reason.Code) {
	t.Helper()
	want := reason.Normalize(codes)
	if len(want) == 0 {
		if !j.Accepted() {
			t.Errorf("%s: refused %v, want accepted: %s", what, j.Codes, firstProblems(j, 4))
		}
		return
	}
	if j.Accepted() {
		t.Errorf("%s: accepted, want %v", what, want)
		return
	}
	if len(j.Codes) != len(want) {
		t.Errorf("%s: codes %v, want %v: %s", what, j.Codes, want, firstProblems(j, 4))
		return
	}
	for i := range want {
		if j.Codes[i] != want[i] {
			t.Errorf("%s: codes %v, want %v: %s", what, j.Codes, want, firstProblems(j, 4))
			return
		}
	}
}

func TestNarrowingAxes(t *testing.T) {
	base := fixture(t, "valid-mandate-delegation-chain.json")
	if ps := gate.Narrowing(m(base["parent"]), m(base["child"])); len(ps) != 0 {
		t.Fatalf("the published valid chain widens: %v", ps)
	}
	cases := map[string]func(parent, child map[string]any){
		"other organisation":    func(_, c map[string]any) { c["represented_organization_id"] = "org_elsewhere" },
		"wrong parent":          func(_, c map[string]any) { c["parent_mandate_id"] = "mnd_someone_else" },
		"starts earlier":        func(_, c map[string]any) { c["valid_from"] = "2026-07-01T00:00:00Z" },
		"scope axis dropped":    func(_, c map[string]any) { delete(m(c["scope"]), "geographies") },
		"deny becomes approval": func(_, c map[string]any) { m(c["constraints"].([]any)[0])["on_failure"] = "require_approval" },
		"constraint dropped":    func(_, c map[string]any) { c["constraints"] = c["constraints"].([]any)[:1] },
		"limit unparseable":     func(_, c map[string]any) { m(c["constraints"].([]any)[0])["value"] = "2,500" },
		"parent disallows":      func(p, _ map[string]any) { m(p["delegation"])["allowed"] = false },
		"depth kept":            func(_, c map[string]any) { m(c["delegation"])["maximum_depth"] = 1 },
		"approval rule dropped": func(p, _ map[string]any) {
			p["approval_rules"] = []any{map[string]any{"id": "r1", "when": map[string]any{"path": "$.proposed_terms.core.total.amount", "operator": "maximum", "value": "1000"}, "approver": map[string]any{"organization_id": "org_northstar", "role": "director"}, "expires_after_seconds": 3600}}
		},
	}
	for name, mutate := range cases {
		doc := fixture(t, "valid-mandate-delegation-chain.json")
		parent, child := m(doc["parent"]), m(doc["child"])
		mutate(parent, child)
		ps := gate.Narrowing(parent, child)
		if len(ps) == 0 {
			t.Errorf("%s: no widening found", name)
		}
		for _, p := range ps {
			if p.Code != reason.MandateDelegationWidening {
				t.Errorf("%s: code %s, want only A202-MANDATE-DELEGATION-WIDENING", name, p.Code)
			}
		}
	}
	// Tightening is allowed on every operator family.
	doc := fixture(t, "valid-mandate-delegation-chain.json")
	parent, child := m(doc["parent"]), m(doc["child"])
	set := map[string]any{"id": "c_cc", "type": "counterparty.reference", "path": "$.counterparty_organization_id", "operator": "one_of", "value": []any{"org_delta", "org_meridian"}, "on_failure": "deny"}
	parent["constraints"] = append(parent["constraints"].([]any), set)
	narrower := map[string]any{}
	for k, v := range set {
		narrower[k] = v
	}
	narrower["value"] = []any{"org_delta"}
	child["constraints"] = append(child["constraints"].([]any), narrower)
	if ps := gate.Narrowing(parent, child); len(ps) != 0 {
		t.Errorf("a narrower one_of is reported as widening: %v", ps)
	}
	narrower["value"] = []any{"org_delta", "org_rival"}
	if ps := gate.Narrowing(parent, child); len(ps) == 0 {
		t.Error("a one_of admitting a new counterparty is not reported")
	}
}

func TestDeclarationBothDirections(t *testing.T) {
	card := func(read []any, write string, extra ...any) map[string]any {
		entry := map[string]any{"uri": gate.ExtensionURI, "description": "x", "required": true,
			"params": map[string]any{"read_versions": read, "write_version": write}}
		return map[string]any{"extensions": append([]any{entry}, extra...)}
	}
	local := map[string]any{"read_versions": []any{"0.1", "0.2"}, "write_version": "0.1"}
	expectCodes(t, "compatible", gate.Declaration(local, card([]any{"0.1"}, "0.1")))
	expectCodes(t, "peer does not read what we write", gate.Declaration(local, card([]any{"0.2"}, "0.2")), reason.ExtensionUnsupported)
	expectCodes(t, "we write 0.2, peer reads 0.1", gate.Declaration(map[string]any{"read_versions": []any{"0.1", "0.2"}, "write_version": "0.2"}, card([]any{"0.1"}, "0.1")), reason.ExtensionUnsupported)
	expectCodes(t, "three-part version", gate.Declaration(local, card([]any{"0.1.0"}, "0.1")), reason.ExtensionUnsupported)
	expectCodes(t, "unretrievable card", gate.Declaration(local, nil), reason.ExtensionUnsupported)
	expectCodes(t, "two entries", gate.Declaration(local, card([]any{"0.1"}, "0.1", card([]any{"0.1"}, "0.1")["extensions"].([]any)[0])), reason.ExtensionUnsupported)
	// a2a-go omits required when false: an absent flag is an optional
	// declaration, not a malformed one (declaration_test.go has the rest).
	noFlag := card([]any{"0.1"}, "0.1")
	delete(m(noFlag["extensions"].([]any)[0]), "required")
	expectCodes(t, "no required flag", gate.Declaration(local, noFlag))
}

func TestGradeExpiry(t *testing.T) {
	g := fixture(t, "valid-conformance-grade-bilateral-scope.json")
	expectCodes(t, "clock-free", gate.Grade(g, gate.Options{}))
	expires, _ := time.Parse(time.RFC3339, g["expires_at"].(string))
	j := gate.Grade(g, gate.Options{Now: expires})
	if j.Accepted() {
		t.Error("a grade read at its expiry instant is accepted")
	}
	// An expired grade is not read further: an overclaim in it is not
	// reported as if the grade were readable.
	m(m(g["dimensions"])["B"])["established_from"] = []any{"auction"}
	if j := gate.Grade(g, gate.Options{Now: expires.Add(time.Hour)}); j.Has(reason.GradeScopeOverclaim) {
		t.Error("dimensions of an expired grade were read")
	}
	g = fixture(t, "valid-conformance-grade-bilateral-scope.json")
	g["expires_at"] = "2027-08-30T09:00:00Z"
	if j := gate.Grade(g, gate.Options{}); j.Accepted() {
		t.Error("a grade running 13 months is accepted")
	}
}

func TestReportRules(t *testing.T) {
	doc := fixture(t, "valid-verification-report-bilateral.json")
	report := m(m(doc["context"])["verification_report"])
	if ps := gate.CheckReport(report); len(ps) != 0 {
		t.Fatalf("the published report is refused: %v", ps)
	}
	report["overall"] = "passing"
	if ps := gate.CheckReport(report); len(ps) == 0 {
		t.Error("an unqualified pass over a gap is accepted")
	}
	report["overall"] = "passing_in_scope"
	m(report["checks"].([]any)[0])["result"] = "failed"
	if ps := gate.CheckReport(report); len(ps) == 0 {
		t.Error("a pass over a failed check is accepted")
	}
	report["overall"] = "failing"
	if ps := gate.CheckReport(report); len(ps) != 0 {
		t.Errorf("an honest failing report is refused: %v", ps)
	}
	m(report["scope"])["undisclosed_streams"] = []any{"private_delta_supplier_01", "private_other_01"}
	if ps := gate.CheckReport(report); len(ps) == 0 {
		t.Error("an undisclosed stream missing from the gaps is accepted")
	}
}

func TestEnvelopeRules(t *testing.T) {
	offer := func() map[string]any { return fixture(t, "valid-offer.json") }

	o := offer()
	o["kernel_annotations"] = map[string]any{"policy_decision_id": "pol_x123", "session_id": nil, "session_sequence": 1, "received_at": "2026-07-25T10:00:02Z"}
	expectCodes(t, "annotated offer", gate.Envelope(o, gate.Options{}))

	o = offer()
	o["id"] = "acc_calibration_demo_01"
	if j := gate.Envelope(o, gate.Options{}); j.Accepted() {
		t.Error("an offer with an acc_ id is accepted")
	}

	o = offer()
	o["object_type"] = "commercial_mandate"
	if j := gate.Envelope(o, gate.Options{}); j.Accepted() {
		t.Error("a mandate in envelope form is accepted")
	}

	o = offer()
	o["transaction_id"] = nil
	if j := gate.Envelope(o, gate.Options{}); j.Accepted() {
		t.Error("a transaction-bound offer without a transaction is accepted")
	}

	o = offer()
	o["version"] = 2
	if j := gate.Envelope(o, gate.Options{}); j.Accepted() {
		t.Error("version 2 without a predecessor is accepted")
	}

	o = offer()
	sig := m(o["signatures"].([]any)[0])
	sig["purpose"] = "event_append"
	expectCodes(t, "offer signed for event_append", gate.Envelope(o, gate.Options{}), reason.EvidenceSignatureInvalid)

	o = offer()
	m(m(m(o["payload"])["terms"])["core"])["quantity"] = "20.0000000001"
	expectCodes(t, "quantity with ten decimals", gate.Envelope(o, gate.Options{}), reason.TermsInvalid)

	a := fixture(t, "negative/agreement-terms-hash-mismatch.json")
	sigs := a["signatures"].([]any)
	a["signatures"] = []any{sigs[0], sigs[0]}
	if j := gate.Envelope(a, gate.Options{}); !j.Has(reason.EvidenceSignatureInvalid) {
		t.Error("an agreement signed twice by one key passes the two-signature rule")
	}
}

func TestLocatorAndFreeText(t *testing.T) {
	ev := fixture(t, "valid-evidence-reference.json")
	refs := m(ev["payload"])["evidence_refs"].([]any)
	for _, hint := range []string{
		"https://user:pw@evidence.invalid/x",
		"https://evidence.invalid/x?X-Amz-Signature=abc",
		"mailto:someone@example.invalid",
		"Authorization: Bearer abc",
	} {
		m(refs[0])["locator_hint"] = hint
		if j := gate.Envelope(ev, gate.Options{}); !j.Has(reason.DisclosureDenied) {
			t.Errorf("locator hint %q accepted", hint)
		}
	}
	m(refs[0])["locator_hint"] = "https://evidence.sandbox.a202.invalid/delta/certificate-01?page=2"
	expectCodes(t, "plain locator", gate.Envelope(ev, gate.Options{}))

	d := fixture(t, "valid-dispute.json")
	for desc, leak := range map[string]bool{
		"The act exceeded the mandate of agt_delta_supplier_01.":         false,
		"Certificate issued under ISO/IEC 17025 was not attached.":       false,
		"Our competitor offered better terms.":                           true,
		"The buyer preferred a quotation of 2800.00 EUR.":                true,
		"The offer off_rival_bid_07 was the one selected.":               true,
		"A price of €2,800 was mentioned in the call.":                   true,
		"Accepted by org_northstar on behalf of its procurement office.": false,
	} {
		m(d["payload"])["description"] = desc
		if got := gate.Envelope(d, gate.Options{}).Has(reason.DisclosurePolicyViolation); got != leak {
			t.Errorf("description %q: violation %v, want %v", desc, got, leak)
		}
	}
}

func TestEventDataAllowlist(t *testing.T) {
	doc := fixture(t, "valid-agreement-direct-formation.json")
	var event map[string]any
	for _, o := range doc["objects"].([]any) {
		if m(o)["object_type"] == "transaction_event" {
			event = m(o)
			break
		}
	}
	expectCodes(t, "published event", gate.Envelope(event, gate.Options{}))
	data := m(m(event["payload"])["data"])
	data["offer_id"] = "prc_rival_bid_2999"
	expectCodes(t, "wrong prefix", gate.Envelope(event, gate.Options{}), reason.DisclosurePolicyViolation)
	data["offer_id"] = "off_bilateral_direct_01"
	data["nested"] = map[string]any{"competing_offers": 3}
	if j := gate.Envelope(event, gate.Options{}); !j.Has(reason.DisclosurePolicyViolation) {
		t.Error("a free member carrying rival data is accepted")
	}
	delete(data, "nested")
	m(m(event["payload"])["stream"])["id"] = "txn_someone_else_01"
	if j := gate.Envelope(event, gate.Options{}); !j.Has(reason.StreamMismatch) {
		t.Error("an event on another transaction's stream is accepted")
	}
}
