// Package demo is the scripted two-party walkthrough: two organisations
// (northstar, the buyer; delta, the supplier), each with its own state
// directory, keys and record, whose agents are driven over MCP Streamable
// HTTP by a scripted client making the same calls a model would, and whose
// principals act through their own surfaces.
//
// The script is the published walkthrough between two independent
// instances: mandates with a 4000.00 EUR limit (the buyer's acceptances held
// for its procurement lead), an offer of 3200.00 EUR for calibrating 20
// pressure transmitters, the acceptance approved by the buyer's principal,
// the agreement committed, the supplier's obligation issued, performance
// asserted with a third-party certificate, and accepted; paid on the
// sandbox rail and closed: completed.
// Each side then exports its record and verifies it.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/verify"
)

// Party is one organisation of the demo.
type Party struct {
	Name      string // "northstar" or "delta"
	Org       string
	Dir       string
	MandateID string
	// TransactionID is the transaction both mandates are scoped to.
	TransactionID string
	Config        instance.Config
	// MCPURL and AdminURL are where its agent and principal reach it.
	MCPURL, AdminURL       string
	AgentToken, AdminToken string
}

// Ports are the loopback addresses one instance listens on.
type Ports struct{ MCP, Peer, Admin string }

// Setup creates the two state directories under out, exchanges their peer
// files and has each principal issue its agent's mandate. As in the
// published walkthrough, the two organisations agree the transaction's
// identifier beforehand and each mandate is scoped to it, so that a third
// party verifying the record can check the scope from the record alone.
func Setup(ctx context.Context, out string, buyerPorts, supplierPorts Ports) (buyer, supplier *Party, err error) {
	now := time.Now().UTC()
	txn, err := envelope.NewID("txn")
	if err != nil {
		return nil, nil, err
	}
	mk := func(name, orgID, role string, p Ports) (*Party, error) {
		dir := filepath.Join(out, name)
		_, err := instance.Init(dir, instance.InitOptions{
			OrganizationID: orgID, Role: role, MCPAddr: p.MCP, PeerAddr: p.Peer, AdminAddr: p.Admin,
		})
		if err != nil {
			return nil, err
		}
		cfg, err := instance.LoadConfig(dir)
		if err != nil {
			return nil, err
		}
		at, _ := instance.LoadToken(dir, instance.AgentTokenFile)
		ad, _ := instance.LoadToken(dir, instance.AdminTokenFile)
		return &Party{Name: name, Org: orgID, Dir: dir, Config: cfg, MCPURL: "http://" + p.MCP + "/mcp", AdminURL: "http://" + p.Admin,
			AgentToken: at, AdminToken: ad}, nil
	}
	if buyer, err = mk("northstar", "org_northstar", "procurement_lead", buyerPorts); err != nil {
		return nil, nil, err
	}
	if supplier, err = mk("delta", "org_delta", "managing_director", supplierPorts); err != nil {
		return nil, nil, err
	}
	for _, pr := range [][2]*Party{{buyer, supplier}, {supplier, buyer}} {
		data, err := os.ReadFile(filepath.Join(pr[1].Dir, instance.PeerFile))
		if err != nil {
			return nil, nil, err
		}
		if _, err := instance.AddPeer(pr[0].Dir, data); err != nil {
			return nil, nil, err
		}
	}
	issue := func(p *Party, actions []string, counterparty string, rules []map[string]any) error {
		o, err := org.Open(p.Dir, org.Options{})
		if err != nil {
			return err
		}
		defer o.Close()
		ps, err := principal.Open(o)
		if err != nil {
			return err
		}
		m, err := ps.IssueMandate(ctx, authority.IssueRequest{
			ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(30 * 24 * time.Hour)),
			Actions:       actions,
			Scope:         map[string]any{"transaction_ids": []any{txn}, "counterparty_organization_ids": []any{counterparty}},
			SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
			ApprovalRules: rules,
		})
		if err != nil {
			return err
		}
		p.MandateID = m["id"].(string)
		p.TransactionID = txn
		return nil
	}
	if err := issue(buyer, []string{"offer.accept", "agreement.sign", "obligation.activated", "acceptance.granted", "acceptance.rejected",
		"settlement.instruct", "transaction.complete"}, supplier.Org,
		[]map[string]any{{
			"id":                    "r_acceptance_needs_procurement_lead",
			"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": "offer.accept"},
			"approver":              map[string]any{"organization_id": buyer.Org, "role": "procurement_lead"},
			"expires_after_seconds": 3600,
		}}); err != nil {
		return nil, nil, fmt.Errorf("buyer mandate: %w", err)
	}
	if err := issue(supplier, []string{"offer.submit", "agreement.sign", "performance.declared", "transaction.complete"}, buyer.Org, nil); err != nil {
		return nil, nil, fmt.Errorf("supplier mandate: %w", err)
	}
	return buyer, supplier, nil
}

// Terms are the walkthrough's calibration terms.
func Terms(amount string) map[string]any {
	return map[string]any{
		"profile": "a202-profile/calibration-service/0.1",
		"core": map[string]any{
			"description": "Calibration and digital certificates for 20 pressure transmitters",
			"quantity":    "20", "unit_code": "H87", "unit_name": "piece",
			"total": map[string]any{"currency": "EUR", "amount": amount},
		},
		"profile_terms": map[string]any{
			"completion": map[string]any{"business_days_after_collection": 8, "business_calendar": "DE"},
			"payment":    map[string]any{"prepayment_percent": "25", "balance_trigger": "buyer_acceptance"},
			"acceptance": map[string]any{"certificate_required": true, "machine_readable_result_required": true, "qualification_standard": "ISO/IEC 17025:2017"},
			"rework":     map[string]any{"included_attempts": 1},
		},
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Agent is a scripted MCP client acting as one organisation's agent.
type Agent struct {
	Party   *Party
	session *sdk.ClientSession
	log     io.Writer
	// outputs are the output schemas tools/list announced, by tool,
	// resolved once: the agent is a strict client and checks every result
	// against its own.
	outputs map[string]*mcp.Output
	// transcript keeps every tool result as received, so tests can scan
	// what an agent was ever shown.
	transcript bytes.Buffer
}

// Transcript returns every tool result this agent received, as JSON text.
func (a *Agent) Transcript() []byte { return a.transcript.Bytes() }

// Connect opens an MCP session to p's instance with its agent token.
func Connect(ctx context.Context, p *Party, log io.Writer) (*Agent, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "party-demo-agent", Version: "0.1"}, nil)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: p.MCPURL, HTTPClient: &http.Client{Transport: bearer{p.AgentToken}}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: connect MCP: %w", p.Name, err)
	}
	a := &Agent{Party: p, session: s, log: log, outputs: map[string]*mcp.Output{}}
	for tl, err := range s.Tools(ctx, nil) {
		if err == nil {
			a.outputs[tl.Name], err = mcp.ResolveOutput(tl.OutputSchema)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: tools/list: %w", p.Name, err)
		}
	}
	return a, nil
}

// Close ends the session.
func (a *Agent) Close() { a.session.Close() }

// Call calls a tool and returns its structured result; a refusal is an
// error naming its codes.
func (a *Agent) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	res, err := a.session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", a.Party.Name, tool, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	a.transcript.Write(b)
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			a.transcript.WriteString(tc.Text)
		}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s %s: %s", a.Party.Name, tool, b)
	}
	if res.IsError {
		return out, fmt.Errorf("%s %s refused: %v %v", a.Party.Name, tool, out["reason_codes"], out["detail"])
	}
	o, ok := a.outputs[tool]
	if !ok {
		return out, fmt.Errorf("%s %s: tools/list announced no such tool", a.Party.Name, tool)
	}
	if err := o.Check(b); err != nil {
		return out, fmt.Errorf("%s %s: the result breaks the tool's output schema: %w", a.Party.Name, tool, err)
	}
	return out, nil
}

// Approve decides an approval request through the principal's admin
// surface, with the admin token, as the buyer's procurement lead would on
// the approvals page.
func Approve(ctx context.Context, p *Party, requestID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.AdminURL+"/api/approvals/"+requestID+"/approve", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("approve %s: %s %s", requestID, resp.Status, b)
	}
	return nil
}

// Step is one line of the timeline.
type Step struct {
	Actor, Act, State, Detail string
}

// Approver decides an approval request on the buyer principal's behalf.
type Approver func(ctx context.Context, requestID string) error

// Walkthrough drives both agents through the published walkthrough and
// returns the transaction id and the timeline. Mandates not set on the
// parties are taken from whoami. When the parties agreed a transaction id
// (their mandates are scoped to it), the supplier verifies its offer first
// and opens the transaction under it. When the buyer's acceptance is held
// for approval, approve decides it; with approve nil, the walkthrough waits
// (up to ten minutes) for a person to decide on the approvals page.
func Walkthrough(ctx context.Context, buyer, supplier *Agent, amount string, approve Approver) (string, []Step, error) {
	var steps []Step
	add := func(actor *Agent, act, state, detail string) {
		steps = append(steps, Step{actor.Party.Name, act, state, detail})
	}
	for _, a := range []*Agent{supplier, buyer} {
		who, err := a.Call(ctx, "whoami", nil)
		if err != nil {
			return "", steps, err
		}
		if a.Party.MandateID == "" {
			ms, _ := who["mandates"].([]any)
			if len(ms) == 0 {
				return "", steps, fmt.Errorf("%s holds no trading mandate", a.Party.Name)
			}
			a.Party.MandateID = fmt.Sprint(ms[0].(map[string]any)["mandate_id"])
		}
		if a.Party.Org == "" {
			a.Party.Org = fmt.Sprint(who["organization_id"])
		}
	}
	sm := supplier.Party.MandateID
	bm := buyer.Party.MandateID
	txn := supplier.Party.TransactionID
	args := map[string]any{"mandate_id": sm, "counterparty_organization_id": buyer.Party.Org,
		"terms": Terms(amount), "valid_until": envelope.Timestamp(time.Now().UTC().Add(24 * time.Hour)), "request_id": "offer-1"}
	if txn != "" {
		// The supplier checks its own act, then offers.
		act := map[string]any{"action_type": "offer.submit", "transaction_id": txn, "counterparty_organization_id": buyer.Party.Org,
			"proposed_terms": Terms(amount)}
		v, err := supplier.Call(ctx, "verify_mandate", map[string]any{"mandate_id": sm, "proposed_action": act})
		if err != nil {
			return "", steps, err
		}
		add(supplier, "verify_mandate offer.submit", "", fmt.Sprint(v["decision"]))
		if v["decision"] != "allow" {
			return "", steps, fmt.Errorf("the supplier's offer was %v: %v", v["decision"], v["findings"])
		}
		args["transaction_id"] = txn
	}
	off, err := supplier.Call(ctx, "propose_offer", args)
	if err != nil {
		return "", steps, err
	}
	txn = fmt.Sprint(off["transaction_id"])
	add(supplier, "propose_offer", fmt.Sprint(off["state"]), fmt.Sprintf("offer %v %v", off["objects"].(map[string]any)["offer"], off["status"]))
	// The buyer sees it and checks the exact acceptance act.
	var item map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for item == nil {
		inbox, err := buyer.Call(ctx, "list_inbox", map[string]any{"mandate_id": bm})
		if err != nil {
			return txn, steps, err
		}
		offers, _ := inbox["offers"].([]any)
		for _, o := range offers {
			if o.(map[string]any)["transaction_id"] == txn {
				item = o.(map[string]any)
			}
		}
		if item == nil {
			if time.Now().After(deadline) {
				return txn, steps, fmt.Errorf("the offer did not reach the buyer's inbox")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	accAct := item["acceptance_act"].(map[string]any)
	v, err := buyer.Call(ctx, "verify_mandate", map[string]any{"mandate_id": bm, "proposed_action": accAct})
	if err != nil {
		return txn, steps, err
	}
	add(buyer, "verify_mandate offer.accept", "", fmt.Sprint(v["decision"]))
	accArgs := map[string]any{"mandate_id": bm, "offer_id": item["offer_id"], "request_id": "accept-1"}
	switch v["decision"] {
	case "allow":
	case "require_approval":
		req, err := buyer.Call(ctx, "request_approval", map[string]any{"mandate_id": bm, "proposed_action": accAct, "request_id": "approval-1"})
		if err != nil {
			return txn, steps, err
		}
		rid := fmt.Sprint(req["approval_request_id"])
		add(buyer, "request_approval", "", rid)
		if approve != nil {
			if err := approve(ctx, rid); err != nil {
				return txn, steps, err
			}
			steps = append(steps, Step{buyer.Party.Name + " principal", "approve (admin surface)", "", rid})
		} else {
			fmt.Fprintf(os.Stderr, "waiting for %s's principal to decide approval request %s on the approvals page\n", buyer.Party.Name, rid)
		}
		var st map[string]any
		until := time.Now().Add(10 * time.Minute)
		for {
			st, err = buyer.Call(ctx, "approval_status", map[string]any{"approval_request_id": rid})
			if err != nil {
				return txn, steps, err
			}
			if st["status"] != "pending" || time.Now().After(until) {
				break
			}
			time.Sleep(time.Second)
		}
		if st["status"] != "approved" {
			return txn, steps, fmt.Errorf("approval request %s is %v", rid, st["status"])
		}
		v, err = buyer.Call(ctx, "verify_mandate", map[string]any{"mandate_id": bm, "proposed_action": accAct, "approval_id": st["approval_id"]})
		if err != nil || v["decision"] != "allow" {
			return txn, steps, fmt.Errorf("verify with approval: %v %v", v["decision"], err)
		}
		add(buyer, "verify_mandate with approval", "", "allow")
		accArgs["approval_id"] = st["approval_id"]
	default:
		return txn, steps, fmt.Errorf("the buyer's acceptance is denied: %v", v["findings"])
	}
	acc, err := buyer.Call(ctx, "accept_offer", accArgs)
	if err != nil {
		return txn, steps, err
	}
	add(buyer, "accept_offer", fmt.Sprint(acc["state"]), fmt.Sprint(acc["status"]))
	if acc["state"] != "committed" {
		return txn, steps, fmt.Errorf("after accept_offer the transaction is %v (%v)", acc["state"], acc["waiting_for"])
	}
	obl, err := buyer.Call(ctx, "issue_obligation", map[string]any{"mandate_id": bm, "transaction_id": txn, "request_id": "obligation-1"})
	if err != nil {
		return txn, steps, err
	}
	oblID := obl["objects"].(map[string]any)["obligation"]
	add(buyer, "issue_obligation", fmt.Sprint(obl["state"]), fmt.Sprint(oblID))
	as, err := supplier.Call(ctx, "assert_performance", map[string]any{"mandate_id": sm, "obligation_id": oblID, "request_id": "assert-1",
		"evidence": []any{map[string]any{"evidence_type": "third_party_certificate",
			"claim":         "Calibration certificates issued for 20 transmitters under ISO/IEC 17025:2017",
			"artifact_hash": canonical.SHA256Hex([]byte("calibration certificates, 20 transmitters"))}}})
	if err != nil {
		return txn, steps, err
	}
	add(supplier, "assert_performance", fmt.Sprint(as["state"]), fmt.Sprint(as["objects"].(map[string]any)["performance_event"]))
	rs, err := buyer.Call(ctx, "respond_to_assertion", map[string]any{"mandate_id": bm, "obligation_id": oblID, "response_type": "accept", "request_id": "respond-1"})
	if err != nil {
		return txn, steps, err
	}
	add(buyer, "respond_to_assertion accept", fmt.Sprint(rs["state"]), fmt.Sprint(rs["objects"].(map[string]any)["obligation_response"]))
	if rs["state"] != "settlement_pending" {
		return txn, steps, fmt.Errorf("the walkthrough ended in %v", rs["state"])
	}
	// The buyer pays on the sandbox rail; the rail's answer lands in both
	// records as a receipt; the supplier closes the deal.
	pay, err := buyer.Call(ctx, "instruct_settlement", map[string]any{"mandate_id": bm, "obligation_id": oblID, "rail": "rail_test_sandbox",
		"idempotency_key": "pay-" + txn, "request_id": "pay-1"})
	if err != nil {
		return txn, steps, err
	}
	add(buyer, "instruct_settlement", fmt.Sprint(pay["state"]), fmt.Sprint(pay["objects"].(map[string]any)["settlement_instruction"]))
	if err := awaitReceipt(ctx, supplier, txn); err != nil {
		return txn, steps, err
	}
	add(supplier, "settlement_status", "succeeded", "receipt in both records")
	done, err := supplier.Call(ctx, "complete_transaction", map[string]any{"mandate_id": sm, "transaction_id": txn, "request_id": "complete-1"})
	if err != nil {
		return txn, steps, err
	}
	add(supplier, "complete_transaction", fmt.Sprint(done["state"]), fmt.Sprint(done["objects"].(map[string]any)["event"]))
	if done["state"] != "completed" {
		return txn, steps, fmt.Errorf("the walkthrough ended in %v (%v)", done["state"], done["waiting_for"])
	}
	return txn, steps, nil
}

// awaitReceipt waits until a side's record holds a succeeded receipt of
// the transaction's payment (the rail's answer travels as its own message).
func awaitReceipt(ctx context.Context, a *Agent, txn string) error {
	for i := 0; i < 100; i++ {
		st, err := a.Call(ctx, "settlement_status", map[string]any{"transaction_id": txn})
		if err != nil {
			return err
		}
		if list, _ := st["settlements"].([]any); len(list) > 0 {
			if s, _ := list[len(list)-1].(map[string]any); s["state"] == "succeeded" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("no succeeded receipt of %s reached %s", txn, a.Party.Name)
}

// Verification is one side's bundle and its report counts.
type Verification struct {
	Party  string
	Bundle string
	Report *verify.Report
	Events []string // content hashes, in sequence order
}

// Check reads a bundle and verifies it.
func Check(dir string) (*verify.Report, []string, error) {
	b, err := bundle.Read(dir)
	if err != nil {
		return nil, nil, err
	}
	rep := verify.Verify(verify.BundleInput(b), verify.Options{RulesVersion: b.Manifest.RulesVersion})
	type ev struct {
		seq  int64
		hash string
	}
	var evs []ev
	for _, o := range b.ObjectValues() {
		if o["object_type"] != "transaction_event" {
			continue
		}
		n, _ := o["payload"].(map[string]any)["sequence"].(json.Number).Int64()
		evs = append(evs, ev{n, o["content_hash"].(string)})
	}
	hashes := make([]string, len(evs))
	for _, e := range evs {
		if e.seq >= 1 && int(e.seq) <= len(hashes) {
			hashes[e.seq-1] = e.hash
		}
	}
	return rep, hashes, nil
}

// Timeline renders the steps and the record for a reader.
func Timeline(w io.Writer, steps []Step, record []map[string]any) {
	fmt.Fprintln(w, "Timeline")
	for _, s := range steps {
		line := fmt.Sprintf("  %-20s %-32s", s.Actor, s.Act)
		if s.State != "" {
			line += " → " + s.State
		}
		if s.Detail != "" {
			line += "  (" + s.Detail + ")"
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	if len(record) > 0 {
		fmt.Fprintln(w, "\nRecord (each event signed by its appender, then countersigned)")
		for _, e := range record {
			fmt.Fprintf(w, "  %v. %-22v %v → %v   signed by %v\n", e["sequence"], e["event_type"], e["from_state"], e["to_state"], e["signed_by"])
		}
	}
}
