package mcp_test

import (
	"context"
	"slices"
	"testing"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/spectest"
)

func TestRecordToolsListed(t *testing.T) {
	n := orgtest.New(t, "org_delta", nil, false)
	e := record.New(record.Of(n.Org), record.Options{})
	tools := append(mcp.AgentTools(agent.New(n.Org)), mcp.RecordTools(e)...)
	srv := mcp.NewAgentServer(n.Org.Config().AgentID, tools, n.Org.Store, nil)
	cs := connect(t, srv)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.Annotations.OpenWorldHint == nil {
			t.Errorf("%s has no openWorldHint", tl.Name)
		}
		if slices.Contains([]string{"propose_offer", "accept_offer", "issue_obligation", "assert_performance", "respond_to_assertion",
			"cancel_transaction", "waive_obligation", "propose_termination", "agree_termination", "accept_amendment",
			"instruct_settlement", "complete_transaction", "propose_settlement_adjustment", "accept_settlement_adjustment"}, tl.Name) &&
			(!*tl.Annotations.OpenWorldHint || tl.Annotations.ReadOnlyHint) {
			t.Errorf("%s reaches the counterparty and records: annotations %+v", tl.Name, tl.Annotations)
		}
	}
	for _, want := range []string{"propose_offer", "withdraw_offer", "list_inbox", "accept_offer", "issue_obligation", "assert_performance", "respond_to_assertion",
		"cancel_transaction", "waive_obligation", "propose_termination", "agree_termination", "accept_amendment",
		"instruct_settlement", "settlement_status", "complete_transaction", "propose_settlement_adjustment", "accept_settlement_adjustment",
		"get_transaction_record", "list_transactions"} {
		if !slices.Contains(names, want) {
			t.Errorf("missing tool %s", want)
		}
	}
	// An unknown transaction is refused, not shown as an empty draft.
	out, isErr := callJSON(t, cs, "get_transaction_record", map[string]any{"transaction_id": "txn_0123456789abcdef01234567"})
	if !isErr || out["outcome"] != "refused" {
		t.Fatalf("unknown transaction: %v", out)
	}
	out, isErr = callJSON(t, cs, "list_transactions", map[string]any{})
	if isErr || len(out["transactions"].([]any)) != 0 {
		t.Fatalf("list: %v", out)
	}
}

func TestVerifyEvidence(t *testing.T) {
	n := orgtest.New(t, "org_delta", nil, false)
	srv := mcp.NewAgentServer(n.Org.Config().AgentID, mcp.VerifyTools(n.Org.Store), n.Org.Store, nil)
	cs := connect(t, srv)
	out, isErr := callJSON(t, cs, "verify_evidence", map[string]any{"bundle_dir": spectest.ReferenceVectors(t)})
	if isErr {
		t.Fatalf("verify the reference record: %v", out)
	}
	res := out["results"].(map[string]any)
	if res["failed"].(float64) != 0 || res["verified"].(float64) < 55 {
		t.Fatalf("reference record: %v", res)
	}
	out, _ = callJSON(t, cs, "verify_evidence", map[string]any{"bundle_dir": spectest.ReferenceVectors(t), "rules_version": "1.2"})
	if out["results"].(map[string]any)["failed"].(float64) != 1 {
		t.Fatalf("under rules 1.2: %v", out["results"])
	}
	for _, args := range []map[string]any{{}, {"transaction_id": "txn_0123456789abcdef01234567"}, {"transaction_id": "txn_0123456789abcdef01234567", "bundle_dir": "/tmp"}} {
		if out, isErr := callJSON(t, cs, "verify_evidence", args); !isErr || out["outcome"] != "refused" {
			t.Fatalf("%v: %v", args, out)
		}
	}
}
