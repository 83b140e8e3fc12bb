package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/schema"
)

// destructive are the acts a client should confirm with its user
// (docs/record-protocol.md, "The tool contract"): they pay, bind the
// organisation to terms or to paying for a performance, give up what is
// owed, decide a dispute, or end an offer or a deal.
var destructive = []string{
	"withdraw_offer", "accept_offer", "respond_to_assertion", "instruct_settlement", "complete_transaction",
	"cancel_transaction", "waive_obligation", "propose_settlement_adjustment", "accept_settlement_adjustment",
	"propose_termination", "agree_termination", "accept_amendment", "issue_determination", "terminate_transaction",
}

// TestToolHints holds the annotations to what the tools do. Every hint is
// sent (destructiveHint only where it means something: not on a read);
// destructiveHint is on exactly the destructive acts; only a tool
// whose repetition changes nothing says idempotentHint: the reads, and
// request_approval, which returns the pending request for the same act
// (TestToolsOverInMemoryTransport). No act says it, and this is why: the
// same propose_offer twice without a request_id is two offers in two
// transactions, while with one the retry returns the first result.
func TestToolHints(t *testing.T) {
	t.Parallel()
	_, s, _ := recordtest.Pair(t)
	cs := connect(t, mcp.NewAgentServer(s.Node.Org.Config().AgentID, servedTools(s.Node, s.Engine), s.Node.Org.Store, nil))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		a := tl.Annotations
		if a == nil || a.OpenWorldHint == nil || (a.DestructiveHint == nil) != a.ReadOnlyHint {
			t.Errorf("%s leaves a hint to its default: %+v", tl.Name, a)
			continue
		}
		if a.IdempotentHint && !a.ReadOnlyHint && tl.Name != "request_approval" {
			t.Errorf("%s records and says it is idempotent", tl.Name)
		}
		if d := a.DestructiveHint != nil && *a.DestructiveHint; d != slices.Contains(destructive, tl.Name) {
			t.Errorf("%s: destructiveHint %v", tl.Name, d)
		}
	}
	for _, d := range destructive {
		if !slices.Contains(names, d) {
			t.Errorf("destructive tool %s is not served", d)
		}
	}

	until := envelope.Timestamp(time.Now().UTC().Add(time.Hour))
	offer := func(rid string) map[string]any {
		args := map[string]any{"mandate_id": s.Mandate, "counterparty_organization_id": "org_northstar",
			"terms": recordtest.Terms("900.00"), "valid_until": until}
		if rid != "" {
			args["request_id"] = rid
		}
		out, isErr := callJSON(t, cs, "propose_offer", args)
		if isErr {
			t.Fatalf("propose_offer: %v", out)
		}
		return out
	}
	if one, two := offer(""), offer(""); one["transaction_id"] == two["transaction_id"] {
		t.Fatalf("the same offer twice without a request_id: %v, %v", one, two)
	}
	if one, two := offer("offer-7"), offer("offer-7"); one["transaction_id"] != two["transaction_id"] ||
		one["objects"].(map[string]any)["offer"] != two["objects"].(map[string]any)["offer"] {
		t.Fatalf("a retry under the same request_id: %v, %v", one, two)
	}
}

// TestTermsSchema holds the terms schema propose_offer announces to the
// gate: it accepts the terms the tests trade with, offers every
// registered profile, and refuses what the gate refuses for its shape.
func TestTermsSchema(t *testing.T) {
	t.Parallel()
	n := orgtest.New(t, "org_delta", nil, false)
	cs := connect(t, mcp.NewAgentServer(n.Org.Config().AgentID, servedTools(n, record.New(record.Of(n.Org), record.Options{})), n.Org.Store, nil))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var in jsonschema.Schema
	for _, tl := range res.Tools {
		if tl.Name == "propose_offer" {
			remarshal(t, tl.InputSchema, &in)
		}
	}
	terms := in.Properties["terms"]
	if terms == nil {
		t.Fatal("propose_offer has no terms argument")
	}
	rs, err := terms.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	remarshal(t, terms.Properties["profile"].Enum, &offered)
	if !slices.Equal(offered, schema.Profiles()) {
		t.Errorf("profiles offered %v, registered %v", offered, schema.Profiles())
	}
	asJSON := func(v map[string]any) map[string]any {
		var out map[string]any
		remarshal(t, v, &out)
		return out
	}
	if err := rs.Validate(asJSON(recordtest.Terms("900.00"))); err != nil {
		t.Fatalf("the tests' terms: %v", err)
	}

	for name, spoil := range map[string]func(map[string]any){
		"unregistered profile": func(m map[string]any) { m["profile"] = "a202-profile/unknown/0.1" },
		"another profile's terms": func(m map[string]any) {
			m["profile"] = "a202-profile/freight-spot/0.1"
		},
		"a term missing": func(m map[string]any) { delete(m["profile_terms"].(map[string]any), "rework") },
		"a term of the wrong type": func(m map[string]any) {
			m["profile_terms"].(map[string]any)["rework"] = map[string]any{"included_attempts": "one"}
		},
	} {
		m := asJSON(recordtest.Terms("900.00"))
		spoil(m)
		if err := rs.Validate(m); err == nil {
			t.Errorf("%s: the announced schema accepts %v", name, m)
		}
		if err := schema.ValidateTerms(m); err == nil {
			t.Errorf("%s: the gate accepts what the schema refuses", name)
		}
	}
	// The core is the kernel's: an amount is a string.
	m := asJSON(recordtest.Terms("900.00"))
	m["core"].(map[string]any)["total"] = map[string]any{"currency": "EUR", "amount": json.Number("900")}
	if err := rs.Validate(asJSON(m)); err == nil {
		t.Error("the announced schema accepts an amount as a number")
	}
}

// TestActsOnNoAgentsServerRefused: the record tools act for the agent whose
// server a call reached (NewAgentServer); on a server that is no agent's
// every act and the inbox are refused, never taken for nobody.
func TestActsOnNoAgentsServerRefused(t *testing.T) {
	t.Parallel()
	n := orgtest.New(t, "org_delta", nil, false)
	cs := connect(t, mcp.NewServer(mcp.RecordTools(record.New(record.Of(n.Org), record.Options{})), n.Org.Store, nil))
	for name, args := range map[string]any{
		"cancel_transaction": map[string]any{"mandate_id": "mnd_000000000000000000000000", "transaction_id": "txn_000000000000000000000000"},
		"list_inbox":         map[string]any{},
	} {
		out, isErr := callJSON(t, cs, name, args)
		if codes, _ := out["reason_codes"].([]any); !isErr || len(codes) != 1 || codes[0] != "A202-POLICY-DENIED" {
			t.Errorf("%s on a server that is no agent's: %v", name, out)
		}
	}
}
