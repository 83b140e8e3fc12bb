package mcp_test

import (
	"context"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/recordtest"
)

// TestDisputeToolsOverMCP drives the acts of issue 17 through the agent
// tools of two in-process instances: the supplier disputes the buyer's
// rejection, the buyer concedes with a presumptive determination, the
// supplier then disputes the obligation's state (an exception opens), and
// the buyer ends the transaction through it; get_transaction_record shows
// the disputes, the determination and the exception on both sides.
func TestDisputeToolsOverMCP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	mandate := func(sd *recordtest.Side, counterparty string) string {
		m, err := sd.Princ.IssueMandate(ctx, authority.IssueRequest{
			ValidFrom: envelope.Timestamp(c.Now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.Now().Add(30 * 24 * time.Hour)),
			Actions: []string{"obligation.activated", "performance.declared", "acceptance.rejected", "dispute.raise", "determination.issue",
				"exception.open", "transaction.terminate"},
			Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
			SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return m["id"].(string)
	}
	bm, sm := mandate(b, "org_delta"), mandate(s, "org_northstar")
	sessions := map[string]*sdk.ClientSession{
		"buyer":    connect(t, mcp.NewAgentServer(b.Node.Org.Config().AgentID, mcp.RecordTools(b.Engine), b.Node.Org.Store, nil)),
		"supplier": connect(t, mcp.NewAgentServer(s.Node.Org.Config().AgentID, mcp.RecordTools(s.Engine), s.Node.Org.Store, nil)),
	}
	call := func(who, name string, args map[string]any) map[string]any {
		t.Helper()
		out, isErr := callJSON(t, sessions[who], name, args)
		if isErr {
			t.Fatalf("%s: %v", name, out)
		}
		return out
	}
	txn := recordtest.Form(t, b, s, "3200.00")
	obl := call("buyer", "issue_obligation", map[string]any{"mandate_id": bm, "transaction_id": txn})["objects"].(map[string]any)["obligation"].(string)
	claim := "20 calibration certificates"
	call("supplier", "assert_performance", map[string]any{"mandate_id": sm, "obligation_id": obl, "asserted_quantity": "20",
		"evidence": []any{map[string]any{"evidence_type": "third_party_certificate", "claim": claim, "artifact_hash": canonical.SHA256Hex([]byte(claim))}}})
	out := call("buyer", "respond_to_assertion", map[string]any{"mandate_id": bm, "obligation_id": obl, "response_type": "reject", "reason_code": "quantity_short"})
	rej := ""
	for k, v := range out["objects"].(map[string]any) {
		if k == "obligation_response" {
			rej = v.(string)
		}
	}
	if rej == "" {
		t.Fatalf("respond: %v", out)
	}
	var evd []any
	for _, o := range call("supplier", "get_transaction_record", map[string]any{"transaction_id": txn})["objects"].([]any) {
		if o.(map[string]any)["object_type"] == "evidence" {
			evd = append(evd, o.(map[string]any)["id"])
		}
	}
	out = call("supplier", "raise_dispute", map[string]any{"mandate_id": sm, "transaction_id": txn, "subject_type": "act", "subject_id": rej,
		"grounds": []any{"obligation_wrongly_rejected"}, "evidence_ids": evd, "description": "The certificate covers all twenty."})
	if out["state"] != "in_performance" || out["status"] != "delivered" {
		t.Fatalf("raise: %v", out)
	}
	dsp := out["objects"].(map[string]any)["dispute"].(string)
	out = call("buyer", "issue_determination", map[string]any{"mandate_id": bm, "dispute_id": dsp, "effect": "presumptive",
		"finding": "The certificate presented covers all twenty; the rejection is not supported."})
	det := out["objects"].(map[string]any)["determination"].(string)
	out = call("supplier", "raise_dispute", map[string]any{"mandate_id": sm, "transaction_id": txn, "subject_type": "obligation_state", "subject_id": obl,
		"grounds": []any{"obligation_wrongly_rejected"}, "evidence_ids": evd})
	if out["state"] != "exception_open" {
		t.Fatalf("raise over the obligation's state: %v", out)
	}
	if out = call("buyer", "terminate_transaction", map[string]any{"mandate_id": bm, "transaction_id": txn}); out["state"] != "terminated" {
		t.Fatalf("terminate: %v", out)
	}
	for _, who := range []string{"buyer", "supplier"} {
		v := call(who, "get_transaction_record", map[string]any{"transaction_id": txn})
		disputes, dets, excs := v["disputes"].([]any), v["determinations"].([]any), v["exceptions"].([]any)
		if len(disputes) != 2 || len(dets) != 1 || len(excs) != 1 {
			t.Fatalf("%s shows %d disputes, %d determinations, %d exceptions", who, len(disputes), len(dets), len(excs))
		}
		if d := dets[0].(map[string]any); d["determination_id"] != det || d["dispute_id"] != dsp || d["effect"] != "presumptive" {
			t.Fatalf("%s shows determination %v", who, d)
		}
		if x := excs[0].(map[string]any); x["status"] != "terminated" || x["exception_type"] != "obligation_disputed" || x["obligation_id"] != obl {
			t.Fatalf("%s shows exception %v", who, x)
		}
		if v["state"] != "terminated" {
			t.Fatalf("%s is %v", who, v["state"])
		}
	}
}
