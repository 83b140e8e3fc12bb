package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/recordtest"
)

// TestLifecycleToolsOverMCP drives the acts of issue 15 through the agent
// tools of two in-process instances: two deliverables issued, both
// asserted, one accepted partly, its remainder waived; an amendment
// proposed and accepted on a second transaction, which both parties then
// end by agreement; a third cancelled in draft. Each tool's arguments go
// through its schema and typed input, and get_transaction_record shows
// what each act left.
func TestLifecycleToolsOverMCP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	bs := connect(t, mcp.NewAgentServer(b.Node.Org.Config().AgentID, mcp.RecordTools(b.Engine), b.Node.Org.Store, nil))
	ss := connect(t, mcp.NewAgentServer(s.Node.Org.Config().AgentID, mcp.RecordTools(s.Engine), s.Node.Org.Store, nil))
	call := func(cs any, name string, args map[string]any) map[string]any {
		t.Helper()
		sess := bs
		if cs == "supplier" {
			sess = ss
		}
		out, isErr := callJSON(t, sess, name, args)
		if isErr {
			t.Fatalf("%s: %v", name, out)
		}
		return out
	}
	evidence := func(claim string) []any {
		return []any{map[string]any{"evidence_type": "third_party_certificate", "claim": claim, "artifact_hash": canonical.SHA256Hex([]byte(claim))}}
	}
	obligation := func(txn, state string) string {
		v := call("buyer", "get_transaction_record", map[string]any{"transaction_id": txn})
		for _, o := range v["obligations"].([]any) {
			if o.(map[string]any)["state"] == state {
				return o.(map[string]any)["obligation_id"].(string)
			}
		}
		t.Fatalf("no %s obligation on %s: %v", state, txn, v["obligations"])
		return ""
	}

	// Two deliverables; a partial acceptance; the remainder waived.
	txn := recordtest.Form(t, b, s, "3200.00")
	out := call("buyer", "issue_obligation", map[string]any{"mandate_id": b.Mandate, "transaction_id": txn, "deliverables": []any{
		map[string]any{"quantity": "12", "consideration": map[string]any{"currency": "EUR", "amount": "1920.00"}},
		map[string]any{"quantity": "8", "consideration": map[string]any{"currency": "EUR", "amount": "1280.00"}, "term_path": "$.terms.profile_terms.rework.included_attempts"},
	}})
	objs := out["objects"].(map[string]any)
	a, o2 := objs["obligation"].(string), objs["obligation_2"].(string)
	call("supplier", "assert_performance", map[string]any{"mandate_id": s.Mandate, "obligation_id": a, "asserted_quantity": "12", "evidence": evidence("12 calibrated"),
		"assertions": []any{map[string]any{"obligation_id": o2, "asserted_quantity": "8", "evidence": evidence("8 certificates")}}})
	out = call("buyer", "respond_to_assertion", map[string]any{"mandate_id": b.Mandate, "obligation_id": a, "response_type": "accept", "accepted_quantity": "10",
		"responses": []any{map[string]any{"obligation_id": o2, "response_type": "accept"}}})
	if out["state"] != "settlement_pending" {
		t.Fatalf("respond: %v", out)
	}
	rem := out["objects"].(map[string]any)["remainder_obligation"].(string)
	out = call("buyer", "waive_obligation", map[string]any{"mandate_id": b.Mandate, "obligation_id": rem})
	if out["status"] != "delivered" {
		t.Fatalf("waive: %v", out)
	}
	if got := obligation(txn, "waived"); got != rem {
		t.Fatalf("waived %s, want the remainder %s", got, rem)
	}

	// An amendment (propose_offer on the committed transaction), then a
	// consensual termination.
	txn2 := recordtest.Form(t, b, s, "3200.00")
	call("buyer", "issue_obligation", map[string]any{"mandate_id": b.Mandate, "transaction_id": txn2})
	terms := recordtest.Terms("3760.00")
	terms["core"].(map[string]any)["quantity"] = "24"
	out = call("supplier", "propose_offer", map[string]any{"mandate_id": s.Mandate, "transaction_id": txn2, "counterparty_organization_id": "org_northstar",
		"terms": terms, "valid_until": envelope.Timestamp(c.Now().Add(24 * time.Hour))})
	offer := out["objects"].(map[string]any)["offer"].(string)
	inbox := call("buyer", "list_inbox", map[string]any{"mandate_id": b.Mandate})
	if offers := inbox["offers"].([]any); len(offers) != 1 || offers[0].(map[string]any)["amendment"] != true {
		t.Fatalf("inbox: %v", inbox)
	}
	out = call("buyer", "accept_amendment", map[string]any{"mandate_id": b.Mandate, "offer_id": offer,
		"add_obligations": []any{map[string]any{"quantity": "4", "consideration": map[string]any{"currency": "EUR", "amount": "560.00"}}}})
	if out["state"] != "in_performance" || out["status"] != "recorded" {
		t.Fatalf("amend: %v", out)
	}
	out = call("buyer", "propose_termination", map[string]any{"mandate_id": b.Mandate, "transaction_id": txn2})
	v := call("supplier", "get_transaction_record", map[string]any{"transaction_id": txn2})
	props := v["termination_proposals"].([]any)
	if len(props) != 1 || props[0].(map[string]any)["current"] != true || props[0].(map[string]any)["termination_record_hash"] != out["objects"].(map[string]any)["termination_record_hash"] {
		t.Fatalf("proposals: %v", props)
	}
	out = call("supplier", "agree_termination", map[string]any{"mandate_id": s.Mandate, "transaction_id": txn2})
	if out["state"] != "terminated" {
		t.Fatalf("agree: %v", out)
	}
	for _, o := range call("buyer", "get_transaction_record", map[string]any{"transaction_id": txn2})["obligations"].([]any) {
		if o.(map[string]any)["state"] != "released" {
			t.Fatalf("after termination: %v", o)
		}
	}

	// A draft cancelled.
	o := recordtest.Offer(t, s, "3200.00")
	out = call("buyer", "cancel_transaction", map[string]any{"mandate_id": b.Mandate, "transaction_id": o.TransactionID})
	if out["state"] != "cancelled" {
		t.Fatalf("cancel: %v", out)
	}
	if tx, _ := s.Node.Org.Store.GetTransaction(ctx, o.TransactionID); tx.State != "cancelled" {
		t.Fatalf("the supplier's copy is %s", tx.State)
	}
}
