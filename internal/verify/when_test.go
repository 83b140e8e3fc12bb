package verify

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/spectest"
)

// The approval-rule matcher reads a `when` as the evaluator does: exact
// decimals, absence satisfying only none_of and absent, an uncomparable
// value holding the act, a malformed `when` denying it.
func TestEvalWhen(t *testing.T) {
	for _, c := range whenCases {
		got, why := evalWhen(map[string]any{"path": c.path, "operator": c.op, "value": c.value}, whenAct)
		if got != c.want {
			t.Errorf("%s %s %v: got %d (%s), want %d", c.path, c.op, c.value, got, why, c.want)
		}
	}
}

var whenAct = map[string]any{
	"action_type":    "offer.accept",
	"transaction_id": "txn_when_0001",
	"proposed_terms": map[string]any{"core": map[string]any{
		"quantity": "20", "unit_code": "H87",
		"total": map[string]any{"currency": "EUR", "amount": "3000.00"},
	}},
	"count":     json.Number("7"),
	"due":       "2026-12-02T10:00:00Z",
	"geography": "DE",
}

var whenCases = []struct {
	path, op string
	value    any
	want     whenOutcome
}{
	{"$.action_type", "equals", "offer.accept", whenMatches},
	{"$.action_type", "equals", "offer.submit", whenNoMatch},
	{"$.action_type", "not_equals", "offer.submit", whenMatches},
	{"$.action_type", "one_of", []any{"offer.submit", "offer.accept"}, whenMatches},
	{"$.action_type", "none_of", []any{"offer.accept"}, whenNoMatch},
	{"$.proposed_terms.core.total.amount", "minimum", "3000", whenMatches},
	{"$.proposed_terms.core.total.amount", "minimum", "3000.000000000000000001", whenNoMatch},
	{"$.proposed_terms.core.total.amount", "maximum", "2999.999999999999999999", whenNoMatch},
	{"$.proposed_terms.core.total.amount", "maximum", "3000.0", whenMatches},
	{"$.proposed_terms.core.total.amount", "equals", "3000", whenMatches},
	{"$.proposed_terms.core.total.amount", "one_of", []any{"1", "3000.000"}, whenMatches},
	{"$.proposed_terms.core.total", "equals", map[string]any{"amount": "3000.00", "currency": "EUR"}, whenMatches},
	{"$.proposed_terms.core.total", "equals", map[string]any{"amount": "3000.00", "currency": "USD"}, whenNoMatch},
	{"$.count", "minimum", json.Number("7"), whenMatches},
	{"$.count", "maximum", json.Number("6"), whenNoMatch},
	{"$.due", "before", "2026-12-02T10:00:01Z", whenMatches},
	{"$.due", "after", "2026-12-02T10:00:00Z", whenNoMatch},
	{"$.geography", "matches", "^D[EK]$", whenMatches},
	{"$.category", "present", true, whenNoMatch},
	{"$.category", "absent", nil, whenMatches},
	{"$.category", "equals", "x", whenNoMatch},
	{"$.category", "none_of", []any{"x"}, whenMatches},
	{"$.action_type.deeper", "present", nil, whenNoMatch},
	// An act value the comparison cannot read holds the act.
	{"$.action_type", "minimum", "10", whenMatches},
	{"$.proposed_terms.core.total", "maximum", "10", whenMatches},
	{"$.count", "before", "2026-12-02T10:00:00Z", whenMatches},
	// evidence_verified is not decided offline.
	{"$.action_type", "evidence_verified", nil, whenOpen},
	// Malformed `when`s.
	{"$.action_type", "resembles", "offer", whenBroken},
	{"action_type", "equals", "offer.accept", whenBroken},
	{"$..action_type", "equals", "offer.accept", whenBroken},
	{"$.proposed_terms.core.total.amount", "maximum", "3e3", whenBroken},
	{"$.proposed_terms.core.total.amount", "maximum", true, whenBroken},
	{"$.due", "before", "yesterday", whenBroken},
	{"$.geography", "matches", "(", whenBroken},
	{"$.action_type", "one_of", []any{}, whenBroken},
	{"$.action_type", "none_of", "offer.accept", whenBroken},
}

// The matcher agrees with package authority's evaluator on every `when`
// above the evaluator reads: a rule the matcher says applies is among the
// evaluator's matched rules, and one it says does not apply is not; a
// `when` the matcher calls malformed is one the evaluator denies on.
func TestEvalWhenAgreesWithEvaluator(t *testing.T) {
	priv, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewES256("key_when_principal", priv)
	if err != nil {
		t.Fatal(err)
	}
	ev := authority.Evaluator{
		Keys:  principalKey{pub: &priv.PublicKey},
		Clock: func() time.Time { return time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) },
	}
	for _, c := range whenCases {
		if c.want == whenOpen {
			continue
		}
		m := map[string]any{
			"spec_version":                "a202-mandate/0.1",
			"id":                          "mnd_when_0001",
			"issuer":                      map[string]any{"organization_id": "org_when", "principal_id": "prn_when", "key_id": "key_when_principal"},
			"subject":                     map[string]any{"agent_id": "agt_when", "key_id": "key_when_agent"},
			"represented_organization_id": "org_when",
			"parent_mandate_id":           nil,
			"actions":                     []any{"offer.accept"},
			"scope":                       map[string]any{"transaction_ids": []any{"txn_when_0001"}},
			"constraints": []any{map[string]any{"id": "c_any", "type": "commercial.string", "path": "$.action_type",
				"operator": "present", "value": true, "on_failure": "deny"}},
			"approval_rules": []any{map[string]any{
				"id": "r_when", "when": map[string]any{"path": c.path, "operator": c.op, "value": c.value},
				"approver": map[string]any{"organization_id": "org_when", "role": "lead"}, "expires_after_seconds": json.Number("600"),
			}},
			"delegation":      map[string]any{"allowed": false, "maximum_depth": json.Number("0")},
			"evidence_refs":   []any{},
			"status_endpoint": "https://status.when.invalid/mnd_when_0001",
			"valid_from":      "2026-12-01T00:00:00Z",
			"valid_until":     "2026-12-31T00:00:00Z",
		}
		if err := signature.SignMandate(m, signer, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		res := ev.Evaluate(context.Background(), authority.Request{Mandate: m, Act: whenAct,
			Actor: authority.Actor{OrganizationID: "org_when", AgentID: "agt_when", KeyID: "key_when_agent"}})
		matched := len(res.ApprovalRulesMatched) > 0
		switch c.want {
		case whenMatches, whenNoMatch:
			if matched != (c.want == whenMatches) {
				t.Errorf("%s %s %v: the matcher says %d, the evaluator matched %v (%v)", c.path, c.op, c.value, c.want, matched, res.Findings)
			}
		case whenBroken:
			if matched || res.Decision == authority.Allow {
				t.Errorf("%s %s %v: malformed here, the evaluator matched %v and decided %s", c.path, c.op, c.value, matched, res.Decision)
			}
		}
	}
}

// principalKey resolves the one principal key of the evaluator test.
type principalKey struct{ pub any }

func (k principalKey) ResolveKey(_ context.Context, id string) (authority.Key, error) {
	if id != "key_when_principal" {
		return authority.Key{}, errors.New("unknown key")
	}
	return authority.Key{Public: k.pub, OrganizationID: "org_when", HolderID: "prn_when", Status: "active"}, nil
}

// The act documents the published reference built rebuild here, member
// for member, for every act decisions.md item 6 names after it: the
// shapes interoperate. Its agreement.sign, an act it does not name, has a
// shape of its own; that act's rules and category are left open.
func TestReferenceActsRebuild(t *testing.T) {
	b, err := bundle.Read(spectest.ReferenceVectors(t))
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(BundleInput(b), Options{RulesVersion: b.Manifest.RulesVersion})
	r.prepare()
	r.step4()
	n := 0
	for _, s := range r.streams {
		for _, e := range s.events {
			n++
			a := r.actOf(e)
			want := str(e.payload, "event_type") != "agreement.committed"
			if a.matches != want {
				t.Errorf("%s %s: rebuilt %v, want %v (%s)", e.id, str(e.payload, "event_type"), a.matches, want, a.why)
			}
		}
	}
	if n != 5 {
		t.Errorf("%d events", n)
	}
}
