package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/orgtest"
)

func setup(t *testing.T) (*orgtest.Node, *sdk.Server, string) {
	t.Helper()
	ctx := context.Background()
	n := orgtest.New(t, "org_northstar", nil, true)
	now := time.Now().UTC()
	m, err := n.Principal(t).IssueMandate(ctx, authority.IssueRequest{
		ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(24 * time.Hour)),
		Actions:       []string{"offer.accept"},
		Scope:         map[string]any{"categories": []any{"services.calibration"}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		ApprovalRules: []map[string]any{{
			"id":                    "r_large",
			"when":                  map[string]any{"path": "$.proposed_terms.core.total.amount", "operator": "minimum", "value": "3000.00"},
			"approver":              map[string]any{"organization_id": "org_northstar", "role": "procurement_lead"},
			"expires_after_seconds": 600,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewAgentServer(n.Org.Config().AgentID, mcp.AgentTools(agent.New(n.Org)), n.Org.Store, nil)
	return n, srv, m["id"].(string)
}

func act(amount string) map[string]any {
	return map[string]any{
		"action_type": "offer.accept", "transaction_id": "txn_0123456789abcdef01234567",
		"counterparty_organization_id": "org_delta", "category": "services.calibration",
		"proposed_terms": map[string]any{
			"profile": "a202-profile/calibration-service/0.1",
			"core": map[string]any{"description": "Calibration", "quantity": "20", "unit_code": "H87",
				"total": map[string]any{"currency": "EUR", "amount": amount}},
			"profile_terms": map[string]any{
				"completion": map[string]any{"business_days_after_collection": 8, "business_calendar": "DE"},
				"payment":    map[string]any{"prepayment_percent": "25", "balance_trigger": "buyer_acceptance"},
				"acceptance": map[string]any{"certificate_required": true, "machine_readable_result_required": true, "qualification_standard": "ISO/IEC 17025:2017"},
				"rework":     map[string]any{"included_attempts": 1},
			},
		},
	}
}

func callJSON(t *testing.T, cs *sdk.ClientSession, name string, args any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s", name, b)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	var again map[string]any
	if err := json.Unmarshal([]byte(text), &again); err != nil || len(again) != len(out) {
		t.Fatalf("%s: text content is not the same JSON: %s", name, text)
	}
	// Every result that is not an error is what the tool's result schema
	// (mcp.ResultsURI) says, with no null in it.
	if !res.IsError {
		if err := resultSchemas(t, cs).Check(name, res.StructuredContent); err != nil {
			t.Fatalf("%s: the result does not conform to its schema: %v\n%.800s", name, err, b)
		}
	}
	return out, res.IsError
}

// resultSchemas reads the result schemas the server gives.
func resultSchemas(t *testing.T, cs *sdk.ClientSession) mcp.Results {
	t.Helper()
	text := readResultSchemas(t, cs)
	r, err := mcp.ResolveResults(text)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readResultSchemas(t *testing.T, cs *sdk.ClientSession) string {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: mcp.ResultsURI})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("%s: %v %v", mcp.ResultsURI, res, err)
	}
	return res.Contents[0].Text
}

func connect(t *testing.T, srv *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestToolsOverInMemoryTransport(t *testing.T) {
	n, srv, mid := setup(t)
	cs := connect(t, srv)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil || tl.Annotations == nil {
			t.Errorf("%s lacks description, input schema or annotations", tl.Name)
		}
		if _, ok := resultSchemas(t, cs)[tl.Name]; !ok {
			t.Errorf("%s has no result schema", tl.Name)
		}
		if tl.Name == "whoami" && !tl.Annotations.ReadOnlyHint {
			t.Error("whoami is not read-only")
		}
	}
	for _, want := range []string{"whoami", "verify_mandate", "request_approval", "approval_status"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s missing from %v", want, names)
		}
	}

	out, isErr := callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid, "proposed_action": act("4800.00")})
	if isErr || out["decision"] != "deny" || !strings.Contains(mustJSON(out["constraints"]), `"id":"c_total_amount","result":"unsatisfied"`) {
		t.Fatalf("deny: %v", out)
	}
	out, _ = callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid, "proposed_action": act("1000.00")})
	if out["decision"] != "allow" {
		t.Fatalf("allow: %v", out)
	}
	out, _ = callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid, "proposed_action": act("3200.00")})
	if out["decision"] != "require_approval" {
		t.Fatalf("hold: %v", out)
	}
	req := map[string]any{"mandate_id": mid, "proposed_action": act("3200.00"), "request_id": "r-1"}
	first, isErr := callJSON(t, cs, "request_approval", req)
	if isErr || first["status"] != "pending" {
		t.Fatalf("request: %v", first)
	}
	again, _ := callJSON(t, cs, "request_approval", req)
	if again["approval_request_id"] != first["approval_request_id"] {
		t.Fatal("a repeated request_id recorded a second request")
	}
	// Without a request_id the same act asked again is the same pending
	// request: what request_approval's idempotentHint promises.
	bare, _ := callJSON(t, cs, "request_approval", map[string]any{"mandate_id": mid, "proposed_action": act("3200.00")})
	if bare["approval_request_id"] != first["approval_request_id"] {
		t.Fatalf("the same act asked again filed %v beside %v", bare["approval_request_id"], first["approval_request_id"])
	}
	other := map[string]any{"mandate_id": mid, "proposed_action": act("3300.00"), "request_id": "r-1"}
	if out, isErr := callJSON(t, cs, "request_approval", other); !isErr || out["outcome"] != "refused" {
		t.Fatalf("request_id reused with other arguments: %v", out)
	}
	if reqs, _ := n.Principal(t).Approvals(context.Background(), true); len(reqs) != 1 {
		t.Fatalf("%d pending requests, want 1", len(reqs))
	}
	// The agent has no tool to approve; the principal's surface decides.
	if _, err := n.Principal(t).Decide(context.Background(), first["approval_request_id"].(string), true, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := callJSON(t, cs, "approval_status", map[string]any{"approval_request_id": first["approval_request_id"]})
	if st["status"] != "approved" {
		t.Fatalf("status: %v", st)
	}
	out, _ = callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid, "proposed_action": act("3200.00"), "approval_id": st["approval_id"]})
	if out["decision"] != "allow" {
		t.Fatalf("with approval: %v", out)
	}
	// Refusals carry outcome and codes; unknown arguments are refused.
	out, isErr = callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": "mnd_000000000000000000000000", "proposed_action": act("1.00")})
	if !isErr || out["outcome"] != "refused" || len(out["reason_codes"].([]any)) == 0 {
		t.Fatalf("refusal: %v", out)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "approve", Arguments: map[string]any{}}); err == nil {
		t.Fatal("an unknown tool is not a protocol error")
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestStreamableHTTPWithBearerToken(t *testing.T) {
	n, srv, mid := setup(t)
	agentTok, _ := instance.LoadToken(n.Dir, instance.AgentTokenFile)
	adminTok, _ := instance.LoadToken(n.Dir, instance.AdminTokenFile)
	var base string
	hs := httptest.NewUnstartedServer(nil)
	hs.Start()
	base = hs.URL
	hs.Config.Handler = mcp.Handler(srv, agentTok, adminTok)
	defer hs.Close()

	// No token: 401 with a challenge naming the metadata.
	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+base+mcp.ProtectedResourcePath+`"`) {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	meta, err := http.Get(base + mcp.ProtectedResourcePath)
	if err != nil || meta.StatusCode != 200 {
		t.Fatalf("metadata: %v", err)
	}
	meta.Body.Close()
	// The admin token is refused with 403.
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("admin token on the agent surface: %d", resp.StatusCode)
	}
	// A wrong token is 401.
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{"wrong"}}, MaxRetries: -1}, nil)
	if err == nil {
		cs.Close()
		t.Fatal("connected with a wrong token")
	}
	// The agent token works end to end, and a call's answer is one JSON
	// body, not an event stream (streamableOptions).
	seen := &contentTypes{base: bearerTransport{agentTok}}
	cs, err = sdk.NewClient(&sdk.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: seen}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, _ := callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid, "proposed_action": act("1000.00")})
	if out["decision"] != "allow" {
		t.Fatalf("over HTTP: %v", out)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.types) == 0 {
		t.Fatal("no answered POST seen")
	}
	for _, ct := range seen.types {
		if !strings.HasPrefix(ct, "application/json") {
			t.Errorf("a POST answered as %q, want application/json", ct)
		}
	}
}

// contentTypes records the Content-Type of every POST answered with a
// body (a notification's 202 has none).
type contentTypes struct {
	base  http.RoundTripper
	mu    sync.Mutex
	types []string
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && resp.StatusCode == http.StatusOK {
		c.mu.Lock()
		c.types = append(c.types, resp.Header.Get("Content-Type"))
		c.mu.Unlock()
	}
	return resp, err
}

// TestEachAgentBehindItsOwnToken: two agents of one instance, each with
// its own MCP server behind its own token (daemon wiring). The token
// decides which agent a client is: whoami names that agent, and a mandate
// issued to the other agent is refused, as are the other agent's approval
// requests.
func TestEachAgentBehindItsOwnToken(t *testing.T) {
	n, _, leadMandate := setup(t)
	ctx := context.Background()
	p := n.Principal(t)
	added, err := p.AddAgent(ctx, "agt_northstar_two")
	if err != nil {
		t.Fatal(err)
	}
	cfg := n.Org.Config()
	servers := map[string]*sdk.Server{}
	toks := map[string]string{}
	for _, id := range cfg.AgentIDs() {
		tok, err := instance.LoadToken(n.Dir, cfg.AgentTokenPath(id))
		if err != nil {
			t.Fatal(err)
		}
		toks[id] = tok
		servers[tok] = mcp.NewAgentServer(id, mcp.AgentTools(agent.NewFor(n.Org, id)), n.Org.Store, nil)
	}
	adminTok, _ := instance.LoadToken(n.Dir, instance.AdminTokenFile)
	hs := httptest.NewServer(mcp.AgentsHandler(servers, adminTok))
	defer hs.Close()
	dial := func(tok string) *sdk.ClientSession {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "t"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{tok}}, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	lead, two := dial(toks[cfg.AgentID]), dial(toks[added.AgentID])
	defer lead.Close()
	defer two.Close()

	if who, _ := callJSON(t, two, "whoami", map[string]any{}); who["agent_id"] != added.AgentID || who["agent_key_id"] != added.KeyID || len(who["mandates"].([]any)) != 0 {
		t.Fatalf("the second agent's whoami: %v", who)
	}
	if who, _ := callJSON(t, lead, "whoami", map[string]any{}); who["agent_id"] != cfg.AgentID || len(who["mandates"].([]any)) != 1 {
		t.Fatalf("the lead agent's whoami: %v", who)
	}
	out, isErr := callJSON(t, two, "verify_mandate", map[string]any{"mandate_id": leadMandate, "proposed_action": act("1000.00")})
	if !isErr || !slices.Contains(out["reason_codes"].([]any), any("A202-POLICY-DENIED")) {
		t.Fatalf("the second agent under the lead's mandate: %v", out)
	}
	req, _ := callJSON(t, lead, "request_approval", map[string]any{"mandate_id": leadMandate, "proposed_action": act("3500.00")})
	id, _ := req["approval_request_id"].(string)
	if id == "" {
		t.Fatalf("request_approval: %v", req)
	}
	if out, isErr := callJSON(t, two, "approval_status", map[string]any{"approval_request_id": id}); !isErr {
		t.Fatalf("the second agent reads the lead's approval request: %v", out)
	}
	if out, isErr := callJSON(t, lead, "approval_status", map[string]any{"approval_request_id": id}); isErr || out["status"] != "pending" {
		t.Fatalf("the lead reads its own request: %v", out)
	}
}

// TestLocalFailureIsRetryable: a call that fails on this instance (its
// database gone: what a full disk or an I/O error looks like to a tool)
// reaches the agent as a retryable error, never as a refusal; a refusal
// is not retryable as it stands.
func TestLocalFailureIsRetryable(t *testing.T) {
	n, srv, mid := setup(t)
	cs := connect(t, srv)
	out, isErr := callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid})
	if !isErr || out["outcome"] != "refused" || out["retryable"] != false {
		t.Fatalf("a refusal: %v", out)
	}
	if err := n.Org.Store.Close(); err != nil {
		t.Fatal(err)
	}
	out, isErr = callJSON(t, cs, "verify_mandate", map[string]any{"mandate_id": mid, "proposed_action": act("100.00")})
	if !isErr || out["outcome"] != "error" || out["retryable"] != true || len(out["reason_codes"].([]any)) != 0 {
		t.Fatalf("a local failure: %v", out)
	}
}
