package authority

import (
	"context"
	"fmt"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
)

// verifiedEvidence verifies exactly the evidence identifiers it holds.
type verifiedEvidence map[string]bool

func (v verifiedEvidence) EvidenceVerified(_ context.Context, ref any) bool {
	if m, ok := ref.(map[string]any); ok {
		ref = m["evidence_id"]
	}
	s, _ := ref.(string)
	return v[s]
}

// matrixCase is one cell of the type×operator matrix with an act value
// (JSON, "" for a path that does not resolve) and a constraint value (JSON).
type matrixCase struct {
	typ, op, act, value string
	holds               bool
}

// matrixCases covers every cell of the matrix in both directions.
var matrixCases = []matrixCase{
	{TypeDecimal, OpEquals, `"20.00"`, `"20"`, true},
	{TypeDecimal, OpEquals, `"20.00"`, `"20.01"`, false},
	{TypeDecimal, OpNotEquals, `"20"`, `"21"`, true},
	{TypeDecimal, OpNotEquals, `"20"`, `"20.0"`, false},
	{TypeDecimal, OpOneOf, `"20"`, `["10","20.000"]`, true},
	{TypeDecimal, OpOneOf, `"20"`, `["10"]`, false},
	{TypeDecimal, OpNoneOf, `"20"`, `["10"]`, true},
	{TypeDecimal, OpNoneOf, `"20"`, `["20.0"]`, false},
	{TypeDecimal, OpMinimum, `"20"`, `"19.999999999999999999"`, true},
	{TypeDecimal, OpMinimum, `"20"`, `"20.000000000000000001"`, false},
	{TypeDecimal, OpMaximum, `"4000.00"`, `"4000"`, true},
	{TypeDecimal, OpMaximum, `"4000.000000000000000001"`, `"4000"`, false},
	{TypeDecimal, OpPresent, `"1"`, `true`, true},
	{TypeDecimal, OpPresent, ``, `true`, false},
	{TypeDecimal, OpAbsent, ``, `true`, true},
	{TypeDecimal, OpAbsent, `"1"`, `true`, false},

	{TypeInteger, OpEquals, `15`, `15`, true},
	{TypeInteger, OpEquals, `15`, `16`, false},
	{TypeInteger, OpNotEquals, `15`, `16`, true},
	{TypeInteger, OpNotEquals, `15`, `15`, false},
	{TypeInteger, OpOneOf, `15`, `[1,15]`, true},
	{TypeInteger, OpOneOf, `15`, `[1]`, false},
	{TypeInteger, OpNoneOf, `15`, `[1]`, true},
	{TypeInteger, OpNoneOf, `15`, `[15]`, false},
	{TypeInteger, OpMinimum, `-3`, `-3`, true},
	{TypeInteger, OpMinimum, `-3`, `-2`, false},
	{TypeInteger, OpMaximum, `10`, `10`, true},
	{TypeInteger, OpMaximum, `11`, `10`, false},
	{TypeInteger, OpPresent, `0`, `null`, true},
	{TypeInteger, OpAbsent, `0`, `null`, false},

	{TypeString, OpEquals, `"EUR"`, `"EUR"`, true},
	{TypeString, OpEquals, `"EUR"`, `"eur"`, false},
	{TypeString, OpNotEquals, `"EUR"`, `"USD"`, true},
	{TypeString, OpNotEquals, `"EUR"`, `"EUR"`, false},
	{TypeString, OpOneOf, `"EUR"`, `["USD","EUR"]`, true},
	{TypeString, OpOneOf, `"EUR"`, `["USD"]`, false},
	{TypeString, OpNoneOf, `"EUR"`, `["USD"]`, true},
	{TypeString, OpNoneOf, `"EUR"`, `["EUR"]`, false},
	{TypeString, OpMatches, `"H87"`, `"^[A-Z0-9]{2,3}$"`, true},
	{TypeString, OpMatches, `"H87 "`, `"^[A-Z0-9]{2,3}$"`, false},
	{TypeString, OpPresent, `""`, `true`, true},
	{TypeString, OpAbsent, ``, `true`, true},

	{TypeBoolean, OpEquals, `true`, `true`, true},
	{TypeBoolean, OpEquals, `true`, `false`, false},
	{TypeBoolean, OpNotEquals, `true`, `false`, true},
	{TypeBoolean, OpNotEquals, `false`, `false`, false},
	{TypeBoolean, OpPresent, `false`, `true`, true},
	{TypeBoolean, OpAbsent, `false`, `true`, false},

	{TypeTimestamp, OpEquals, `"2026-08-21T12:00:00Z"`, `"2026-08-21T14:00:00+02:00"`, true},
	{TypeTimestamp, OpEquals, `"2026-08-21T12:00:00Z"`, `"2026-08-21T12:00:01Z"`, false},
	{TypeTimestamp, OpNotEquals, `"2026-08-21T12:00:00Z"`, `"2026-08-21T12:00:01Z"`, true},
	{TypeTimestamp, OpNotEquals, `"2026-08-21T12:00:00Z"`, `"2026-08-21T12:00:00.000Z"`, false},
	{TypeTimestamp, OpBefore, `"2026-08-21T12:00:00Z"`, `"2026-08-21T12:00:01Z"`, true},
	{TypeTimestamp, OpBefore, `"2026-08-21T12:00:00Z"`, `"2026-08-21T12:00:00Z"`, false},
	{TypeTimestamp, OpAfter, `"2026-08-21T12:00:00Z"`, `"2026-08-21T11:59:59Z"`, true},
	{TypeTimestamp, OpAfter, `"2026-08-21T12:00:00Z"`, `"2026-08-21T12:00:00Z"`, false},
	{TypeTimestamp, OpPresent, `"2026-08-21T12:00:00Z"`, `true`, true},
	{TypeTimestamp, OpAbsent, ``, `true`, true},

	{TypeSet, OpEquals, `["a","b"]`, `["b","a"]`, true},
	{TypeSet, OpEquals, `["a","b"]`, `["a"]`, false},
	{TypeSet, OpNotEquals, `["a","b"]`, `["a"]`, true},
	{TypeSet, OpNotEquals, `["a"]`, `["a"]`, false},
	{TypeSet, OpOneOf, `["a","b"]`, `["a","b","c"]`, true},
	{TypeSet, OpOneOf, `"c"`, `["a","b","c"]`, true},
	{TypeSet, OpOneOf, `["a","d"]`, `["a","b","c"]`, false},
	{TypeSet, OpNoneOf, `["a","b"]`, `["c"]`, true},
	{TypeSet, OpNoneOf, `["a","b"]`, `["b"]`, false},
	{TypeSet, OpPresent, `[]`, `true`, true},
	{TypeSet, OpAbsent, `[]`, `true`, false},

	{TypeDisclosure, OpPresent, `{"k":1}`, `true`, true},
	{TypeDisclosure, OpPresent, ``, `true`, false},
	{TypeDisclosure, OpAbsent, ``, `true`, true},
	{TypeDisclosure, OpAbsent, `{}`, `true`, false},

	{TypeEvidence, OpEvidenceVerified, `"evd_calibration_cert_01"`, `true`, true},
	{TypeEvidence, OpEvidenceVerified, `[{"evidence_id":"evd_calibration_cert_01"}]`, `true`, true},
	{TypeEvidence, OpEvidenceVerified, `"evd_unverified_cert_01"`, `true`, false},
	{TypeEvidence, OpEvidenceVerified, `["evd_calibration_cert_01","evd_unverified_cert_01"]`, `true`, false},
	{TypeEvidence, OpEvidenceVerified, `[]`, `true`, false},
	{TypeEvidence, OpEvidenceVerified, ``, `true`, false},
	{TypeEvidence, OpPresent, `"evd_calibration_cert_01"`, `true`, true},
	{TypeEvidence, OpAbsent, `"evd_calibration_cert_01"`, `true`, false},

	{TypeCounterparty, OpEquals, `"org_delta"`, `"org_delta"`, true},
	{TypeCounterparty, OpEquals, `"org_delta"`, `"org_meridian"`, false},
	{TypeCounterparty, OpNotEquals, `"org_delta"`, `"org_meridian"`, true},
	{TypeCounterparty, OpNotEquals, `"org_delta"`, `"org_delta"`, false},
	{TypeCounterparty, OpOneOf, `"org_delta"`, `["org_meridian","org_delta"]`, true},
	{TypeCounterparty, OpOneOf, `"org_delta"`, `["org_meridian"]`, false},
	{TypeCounterparty, OpNoneOf, `"org_delta"`, `["org_meridian"]`, true},
	{TypeCounterparty, OpNoneOf, `"org_delta"`, `["org_delta"]`, false},
	{TypeCounterparty, OpPresent, `"org_delta"`, `true`, true},
	{TypeCounterparty, OpAbsent, ``, `true`, true},

	{TypeGeography, OpEquals, `"NL"`, `"NL"`, true},
	{TypeGeography, OpEquals, `"NL"`, `"BE"`, false},
	{TypeGeography, OpNotEquals, `"NL"`, `"BE"`, true},
	{TypeGeography, OpNotEquals, `"NL"`, `"NL"`, false},
	{TypeGeography, OpOneOf, `"NL"`, `["BE","NL"]`, true},
	{TypeGeography, OpOneOf, `"NL"`, `["BE"]`, false},
	{TypeGeography, OpNoneOf, `"NL"`, `["BE"]`, true},
	{TypeGeography, OpNoneOf, `"NL"`, `["NL"]`, false},
	{TypeGeography, OpPresent, `"NL"`, `true`, true},
	{TypeGeography, OpAbsent, `"NL"`, `true`, false},
}

func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	v, err := canonical.Decode([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// TestConstraintMatrix runs every cell of the matrix, both directions,
// through the whole evaluator: a signed mandate carrying the one extra
// constraint c_case over $.x, a live status endpoint, and an act carrying x.
func TestConstraintMatrix(t *testing.T) {
	w := newWorld(t)
	w.ev.Evidence = verifiedEvidence{"evd_calibration_cert_01": true}
	covered := map[[2]string]bool{}
	for i, c := range matrixCases {
		covered[[2]string{c.typ, c.op}] = true
		name := fmt.Sprintf("%02d_%s_%s", i, c.typ, c.op)
		t.Run(name, func(t *testing.T) {
			req := w.walkthroughRequest()
			req.Constraints = []map[string]any{{
				"id": "c_case", "type": c.typ, "path": "$.x", "operator": c.op,
				"value": decodeJSON(t, c.value), "on_failure": OnFailureDeny,
			}}
			m := w.issue(req, w.buyer.principalSigner)
			refs := map[string]any{"geography": "NL"}
			if c.act != "" {
				refs["x"] = decodeJSON(t, c.act)
			}
			act := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), refs)
			r := w.evaluate(m, act, w.buyer.actor(), nil)
			if c.holds {
				wantDecision(t, r, Allow)
				return
			}
			wantDecision(t, r, Deny, reason.PolicyDenied)
			if ids := r.DeniedBy(); len(ids) != 1 || ids[0] != "c_case" {
				t.Fatalf("denied by %v", ids)
			}
		})
	}
	for typ, ops := range matrix {
		for op := range ops {
			if !covered[[2]string{typ, op}] {
				t.Errorf("matrix cell %s × %s has no case", typ, op)
			}
		}
	}
}

// TestConstraintOutsideMatrix: every registered type with every registered
// operator outside its row is refused at issue and denies at runtime.
func TestConstraintOutsideMatrix(t *testing.T) {
	w := newWorld(t)
	n := 0
	for typ := range matrix {
		for op := range registeredOperators {
			if OperatorApplies(typ, op) {
				continue
			}
			n++
			c := map[string]any{"id": "c_cell", "type": typ, "path": "$.x", "operator": op, "value": "1", "on_failure": OnFailureDeny}
			req := w.prepare(w.walkthroughRequest())
			req.Constraints = []map[string]any{c}
			_, err := Issue(req, w.buyer.principalSigner, w.clock.Now())
			wantRefusal(t, err, reason.MandateConstraintUnknown)
			r := runConstraintsOnly(t, c, ActDocument(ActOfferAccept, txn, orgSupplier, nil, map[string]any{"x": "1"}))
			wantDecision(t, r, Deny, reason.MandateConstraintUnknown)
		}
	}
	if n != 10*12-56 {
		t.Fatalf("%d cells outside the matrix", n)
	}
}

// TestRuntimeUnregisteredNeverAllows bypasses schema and gate: a type or
// operator added to a schema enum without an evaluator must not allow.
func TestRuntimeUnregisteredNeverAllows(t *testing.T) {
	act := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), nil)
	for _, c := range []map[string]any{
		{"id": "c1", "type": "commercial.percent", "path": "$.proposed_terms.core.total.amount", "operator": OpMaximum, "value": "5000", "on_failure": OnFailureDeny},
		{"id": "c2", "type": TypeDecimal, "path": "$.proposed_terms.core.total.amount", "operator": "less_than", "value": "5000", "on_failure": OnFailureRequireApproval},
		{"id": "c3", "type": "", "path": "$.proposed_terms.core.total.amount", "operator": OpPresent, "value": true, "on_failure": OnFailureDeny},
		{"id": "c4", "type": TypeDisclosure, "path": "$.proposed_terms", "operator": OpPresent, "value": true, "on_failure": "warn"},
		{"id": "c5", "type": TypeDisclosure, "path": "proposed_terms", "operator": OpPresent, "value": true, "on_failure": OnFailureDeny},
		{"id": "c6", "type": TypeDisclosure, "path": "$..proposed_terms", "operator": OpPresent, "value": true, "on_failure": OnFailureDeny},
	} {
		r := runConstraintsOnly(t, c, act)
		if r.Decision == Allow || !hasCode(r, reason.MandateConstraintUnknown) {
			t.Errorf("%s: %s %v", c["id"], r.Decision, r.ReasonCodes)
		}
	}
}

// TestDecimalGrammarDenies: an act amount outside the base-10 grammar is
// unevaluable, which denies even under on_failure require_approval, where
// the published reference would read 4e3 as 4000.
func TestDecimalGrammarDenies(t *testing.T) {
	c := map[string]any{"id": "c_total_amount", "type": TypeDecimal, "path": "$.proposed_terms.core.total.amount",
		"operator": OpMaximum, "value": "4000.00", "on_failure": OnFailureRequireApproval}
	for _, amount := range []any{"4e3", "+4000", "1_000", "1,000", "NaN", "Infinity", "-1", " 4000", "4000.", ".5", "0x10", "٣", "", 4000} {
		tm := terms("0")
		tm["core"].(map[string]any)["total"].(map[string]any)["amount"] = amount
		r := runConstraintsOnly(t, c, ActDocument(ActOfferAccept, txn, orgSupplier, tm, nil))
		wantDecision(t, r, Deny, reason.PolicyDenied)
		if r.Constraints[0].Result != Unevaluable {
			t.Errorf("%v: %s", amount, r.Constraints[0].Result)
		}
	}
	// The same strictness on the constraint's own value, at issue and at
	// runtime.
	w := newWorld(t)
	for _, limit := range []any{"4e3", "+4000", "NaN", 4000, "4000.0000000000000000001"} {
		bad := map[string]any{"id": "c_total_amount", "type": TypeDecimal, "path": "$.proposed_terms.core.total.amount",
			"operator": OpMaximum, "value": limit, "on_failure": OnFailureDeny}
		req := w.prepare(w.walkthroughRequest())
		req.SpendingLimit = nil
		req.Constraints = []map[string]any{bad}
		_, err := Issue(req, w.buyer.principalSigner, w.clock.Now())
		wantRefusal(t, err, reason.MandateConstraintUnknown)
		wantDecision(t, runConstraintsOnly(t, bad, acceptAct("1.00")), Deny, reason.MandateConstraintUnknown)
	}
}

func TestConstraintValueShapes(t *testing.T) {
	act := ActDocument(ActOfferAccept, txn, orgSupplier, nil, map[string]any{"x": "EUR", "n": decodeJSON(t, "15")})
	for _, c := range []map[string]any{
		{"type": TypeString, "path": "$.x", "operator": OpOneOf, "value": []any{}},
		{"type": TypeString, "path": "$.x", "operator": OpOneOf, "value": "EUR"},
		{"type": TypeString, "path": "$.x", "operator": OpMatches, "value": "(?<=E)UR"},
		{"type": TypeInteger, "path": "$.n", "operator": OpEquals, "value": "15"},
		{"type": TypeCounterparty, "path": "$.x", "operator": OpEquals, "value": "delta"},
		{"type": TypeGeography, "path": "$.x", "operator": OpOneOf, "value": []any{"nl"}},
		{"type": TypeTimestamp, "path": "$.x", "operator": OpBefore, "value": "2026-08-21"},
		{"type": TypeSet, "path": "$.x", "operator": OpOneOf, "value": []any{"a", 1}},
	} {
		c["id"], c["on_failure"] = "c_shape", OnFailureDeny
		wantDecision(t, runConstraintsOnly(t, c, act), Deny, reason.MandateConstraintUnknown)
	}
	// Values of the wrong type in the act deny with POLICY-DENIED.
	for _, c := range []map[string]any{
		{"type": TypeInteger, "path": "$.x", "operator": OpEquals, "value": decodeJSON(t, "15")},
		{"type": TypeBoolean, "path": "$.x", "operator": OpEquals, "value": true},
		{"type": TypeCounterparty, "path": "$.x", "operator": OpEquals, "value": "org_delta"},
		{"type": TypeTimestamp, "path": "$.x", "operator": OpAfter, "value": "2026-08-21T00:00:00Z"},
		{"type": TypeString, "path": "$.n", "operator": OpEquals, "value": "15"},
	} {
		c["id"], c["on_failure"] = "c_value", OnFailureRequireApproval
		r := runConstraintsOnly(t, c, act)
		wantDecision(t, r, Deny, reason.PolicyDenied)
	}
}
