package authority

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
)

// FuzzEvaluate feeds random constraint types, operators, paths and values,
// and random act members, to the evaluator: once through a whole signed
// mandate, and once to the constraint and approval-rule steps alone with the
// schema and gate bypassed. It must never panic, and an unregistered type
// or operator, or a pair outside the matrix, must never allow.
//
//	go test ./internal/authority -run '^$' -fuzz FuzzEvaluate -fuzztime 30s
func FuzzEvaluate(f *testing.F) {
	for _, c := range matrixCases[:12] {
		f.Add(c.typ, c.op, "$.x", []byte(c.value), []byte(c.act), OnFailureDeny)
	}
	f.Add(TypeDecimal, OpMaximum, "$.proposed_terms.core.total.amount", []byte(`"4000.00"`), []byte(`"4e3"`), OnFailureRequireApproval)
	f.Add("commercial.percent", OpMaximum, "$.x", []byte(`"1"`), []byte(`"0"`), OnFailureDeny)
	f.Add(TypeString, "approximately", "$.x", []byte(`"a"`), []byte(`"a"`), OnFailureDeny)
	f.Add(TypeString, OpMatches, "$.x", []byte(`"(a+)+$"`), []byte(`"aaaaaaaaaaaaaaaaaaaaaaaa!"`), OnFailureDeny)
	f.Add(TypeSet, OpOneOf, "$.x.y", []byte(`[]`), []byte(`{"y":["a"]}`), OnFailureDeny)
	f.Add(TypeTimestamp, OpBefore, "$.x", []byte(`"2026-02-30T00:00:00Z"`), []byte(`"2026-08-21T00:00:00+14:00"`), OnFailureDeny)

	priv, err := keys.Generate()
	if err != nil {
		f.Fatal(err)
	}
	principal, _ := signature.NewES256("key_northstar_principal_01", priv)
	agentPriv, _ := keys.Generate()
	clock := func() time.Time { return t0 }
	ring := &keyring{keys: map[string]Key{
		"key_northstar_principal_01": {Public: &priv.PublicKey, OrganizationID: orgBuyer, HolderID: "prn_northstar_procurement_director", Status: envelope.KeyActive},
		"key_northstar_agent_01":     {Public: &agentPriv.PublicKey, OrganizationID: orgBuyer, HolderID: "agt_northstar_buyer_01", Status: envelope.KeyActive},
	}}
	ev := &Evaluator{Keys: ring, Status: staticStatus{clock, status.Active}, Clock: clock, Evidence: verifiedEvidence{"evd_calibration_cert_01": true}}
	actor := Actor{OrganizationID: orgBuyer, AgentID: "agt_northstar_buyer_01", KeyID: "key_northstar_agent_01"}

	f.Fuzz(func(t *testing.T, typ, op, path string, value, actValue []byte, onFailure string) {
		expected, err := canonical.Decode(value)
		if err != nil {
			return
		}
		refs := map[string]any{"geography": "NL"}
		if x, err := canonical.Decode(actValue); err == nil && x != nil {
			refs["x"] = x
		}
		act := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), refs)
		c := map[string]any{"id": "c_fuzz", "type": typ, "path": path, "operator": op, "value": expected, "on_failure": onFailure}
		rule := map[string]any{"id": "a_fuzz", "when": map[string]any{"path": path, "operator": op, "value": expected},
			"approver": map[string]any{"organization_id": orgBuyer, "role": "procurement_director"}, "expires_after_seconds": 600}
		outside := !OperatorApplies(typ, op)

		// The runtime steps alone, no schema, no gate.
		res := &Result{}
		r := &run{e: ev, ctx: context.Background(), now: t0, res: res, act: act}
		r.checkConstraints(map[string]any{"id": "mnd_fuzz_runtime_01", "constraints": []any{c}}, act)
		r.checkRules(map[string]any{"id": "mnd_fuzz_runtime_01", "approval_rules": []any{rule}}, act)
		d := decide(res.Findings)
		if outside {
			if d == Allow {
				t.Fatalf("%q × %q allowed at runtime", typ, op)
			}
			if res.Constraints[0].Code != reason.MandateConstraintUnknown {
				t.Fatalf("%q × %q: code %s", typ, op, res.Constraints[0].Code)
			}
		}

		// The whole evaluator over a signed mandate carrying the constraint.
		req := IssueRequest{
			Issuer:                    Issuer{OrganizationID: orgBuyer, PrincipalID: "prn_northstar_procurement_director", KeyID: "key_northstar_principal_01"},
			Subject:                   Subject{AgentID: actor.AgentID, KeyID: actor.KeyID},
			RepresentedOrganizationID: orgBuyer,
			ValidFrom:                 validFrom, ValidUntil: validTo,
			StatusEndpoint: "https://status.northstar.invalid/v1/mandates/mnd_fuzz_mandate_01/status",
			Actions:        []string{ActOfferAccept},
			Scope:          map[string]any{"transaction_ids": []any{txn}},
			Constraints:    []map[string]any{c},
			ApprovalRules:  []map[string]any{rule},
			MandateID:      "mnd_fuzz_mandate_01",
		}
		m, err := req.Draft()
		if err != nil {
			return
		}
		if err := signature.SignMandate(m, principal, t0); err != nil {
			t.Fatal(err)
		}
		full := ev.Evaluate(context.Background(), Request{Mandate: m, Act: act, Actor: actor})
		if outside && full.Decision == Allow {
			t.Fatalf("%q × %q allowed through the evaluator", typ, op)
		}
		if full.Decision == Allow && d != Allow {
			t.Fatalf("the evaluator allowed what its constraint steps did not: %s", findings(full))
		}
	})
}

// BenchmarkEvaluateDelegatedChain measures one act against a one-hop
// delegated chain (two proofs, two status lookups served from the cache,
// narrowing, two mandates' actions, scope and constraints, profile terms).
//
//	go test ./internal/authority -run '^$' -bench EvaluateDelegatedChain -benchmem
func BenchmarkEvaluateDelegatedChain(b *testing.B) {
	w := newWorld(b)
	_, child := w.delegatedChain()
	act := acceptAct("2000.00")
	req := Request{Mandate: child, Act: act, Actor: w.junior.actor()}
	ctx := context.Background()
	wantDecision(b, w.ev.Evaluate(ctx, req), Allow) // fills the status cache
	fetches := w.hits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := w.ev.Evaluate(ctx, req); r.Decision != Allow {
			b.Fatal(r.Decision)
		}
	}
	b.StopTimer()
	if w.hits.Load() != fetches {
		b.Fatalf("status fetched %d times inside the loop", w.hits.Load()-fetches)
	}
}
