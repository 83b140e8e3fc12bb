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
	// outputs are the result schemas the server gives (mcp.ResultsURI),
	// by tool, resolved once: the agent is a strict client and checks
	// every result against its own.
	outputs mcp.Results
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
	a := &Agent{Party: p, session: s, log: log}
	res, err := s.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ResultsURI})
	if err == nil && len(res.Contents) != 1 {
		err = fmt.Errorf("%d contents", len(res.Contents))
	}
	if err == nil {
		a.outputs, err = mcp.ResolveResults(res.Contents[0].Text)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %s: %w", p.Name, mcp.ResultsURI, err)
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
	if err := a.outputs.Check(tool, b); err != nil {
		return out, fmt.Errorf("%s %s: the result breaks the tool's result schema: %w", a.Party.Name, tool, err)
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

// Run is what a walkthrough did: its transaction, its steps, and the deal
// as a person would tell it.
type Run struct {
	TransactionID string
	Steps         []Step
	Deal          Deal
}

// Deal is what was traded, for how much, who approved it and what was
// paid, each as the agents' tools reported it (Tell prints it).
type Deal struct {
	Seller, Buyer Party // Name and Org only
	// What and Quantity are the offer's terms as the buyer's inbox showed
	// them; Price their total.
	What, Quantity, Price string
	// Approval is the buyer principal's approval of the acceptance; nil
	// when the buyer's mandate allowed it without one.
	Approval *Approval
	// Paid is the payment, once its rail answered.
	Paid *Payment
	// State is where the transaction ended.
	State string
}

// Approval is who approved an act, as the mandate's rule required and the
// approval that verified shows.
type Approval struct {
	Role, Organization string
	ApprovalID         string
	DecidedAt          string
}

// Payment is one settlement instruction and its rail's last answer.
type Payment struct {
	Amount, Rail, Status, Receipt, Reference string
}

// Walkthrough drives both agents through the published walkthrough and
// returns the transaction id, the timeline and the deal. Mandates not set
// on the parties are taken from whoami. When the parties agreed a
// transaction id (their mandates are scoped to it), the supplier verifies
// its offer first and opens the transaction under it. When the buyer's
// acceptance is held for approval, approve decides it; with approve nil,
// the walkthrough waits (up to ten minutes) for a person to decide on the
// approvals page.
func Walkthrough(ctx context.Context, buyer, supplier *Agent, amount string, approve Approver) (Run, error) {
	var steps []Step
	deal := Deal{Seller: Party{Name: supplier.Party.Name}, Buyer: Party{Name: buyer.Party.Name}}
	add := func(actor *Agent, act, state, detail string) {
		steps = append(steps, Step{actor.Party.Name, act, state, detail})
	}
	for _, a := range []*Agent{supplier, buyer} {
		who, err := a.Call(ctx, "whoami", nil)
		if err != nil {
			return Run{"", steps, deal}, err
		}
		if a.Party.MandateID == "" {
			ms, _ := who["mandates"].([]any)
			if len(ms) == 0 {
				return Run{"", steps, deal}, fmt.Errorf("%s holds no trading mandate", a.Party.Name)
			}
			a.Party.MandateID = fmt.Sprint(ms[0].(map[string]any)["mandate_id"])
		}
		if a.Party.Org == "" {
			a.Party.Org = fmt.Sprint(who["organization_id"])
		}
	}
	deal.Seller.Org, deal.Buyer.Org = supplier.Party.Org, buyer.Party.Org
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
			return Run{"", steps, deal}, err
		}
		add(supplier, "verify_mandate offer.submit", "", fmt.Sprint(v["decision"]))
		if v["decision"] != "allow" {
			return Run{"", steps, deal}, fmt.Errorf("the supplier's offer was %v: %v", v["decision"], v["findings"])
		}
		args["transaction_id"] = txn
	}
	off, err := supplier.Call(ctx, "propose_offer", args)
	if err != nil {
		return Run{"", steps, deal}, err
	}
	txn = fmt.Sprint(off["transaction_id"])
	add(supplier, "propose_offer", fmt.Sprint(off["state"]), fmt.Sprintf("offer %v %v: %s EUR", off["objects"].(map[string]any)["offer"], off["status"], amount))
	// The buyer sees it and checks the exact acceptance act.
	var item map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for item == nil {
		inbox, err := buyer.Call(ctx, "list_inbox", map[string]any{"mandate_id": bm})
		if err != nil {
			return Run{txn, steps, deal}, err
		}
		offers, _ := inbox["offers"].([]any)
		for _, o := range offers {
			if o.(map[string]any)["transaction_id"] == txn {
				item = o.(map[string]any)
			}
		}
		if item == nil {
			if time.Now().After(deadline) {
				return Run{txn, steps, deal}, fmt.Errorf("the offer did not reach the buyer's inbox")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	deal.What, deal.Quantity, deal.Price = describe(item["terms"])
	accAct := item["acceptance_act"].(map[string]any)
	v, err := buyer.Call(ctx, "verify_mandate", map[string]any{"mandate_id": bm, "proposed_action": accAct})
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	// Whom the acceptance waits for, as the mandate's rule names them.
	approver := Approval{Role: rule(v, "approver_role"), Organization: rule(v, "approver_organization_id")}
	decided := fmt.Sprint(v["decision"])
	if approver.Role != "" {
		decided += ": held for the " + approver.Role + " of " + approver.Organization
	}
	add(buyer, "verify_mandate offer.accept", "", decided)
	accArgs := map[string]any{"mandate_id": bm, "offer_id": item["offer_id"], "request_id": "accept-1"}
	switch v["decision"] {
	case "allow":
	case "require_approval":
		req, err := buyer.Call(ctx, "request_approval", map[string]any{"mandate_id": bm, "proposed_action": accAct, "request_id": "approval-1"})
		if err != nil {
			return Run{txn, steps, deal}, err
		}
		rid := fmt.Sprint(req["approval_request_id"])
		add(buyer, "request_approval", "", rid)
		if approve != nil {
			if err := approve(ctx, rid); err != nil {
				return Run{txn, steps, deal}, err
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
				return Run{txn, steps, deal}, err
			}
			if st["status"] != "pending" || time.Now().After(until) {
				break
			}
			time.Sleep(time.Second)
		}
		if st["status"] != "approved" {
			return Run{txn, steps, deal}, fmt.Errorf("approval request %s is %v", rid, st["status"])
		}
		if approve == nil {
			steps = append(steps, Step{buyer.Party.Name + " principal", "approved (approvals page)", "", rid})
		}
		v, err = buyer.Call(ctx, "verify_mandate", map[string]any{"mandate_id": bm, "proposed_action": accAct, "approval_id": st["approval_id"]})
		if err != nil || v["decision"] != "allow" {
			return Run{txn, steps, deal}, fmt.Errorf("verify with approval: %v %v", v["decision"], err)
		}
		add(buyer, "verify_mandate with approval", "", "allow")
		accArgs["approval_id"] = st["approval_id"]
		// The approval verified for the rule, so it is that role's.
		approver.ApprovalID, approver.DecidedAt = fmt.Sprint(st["approval_id"]), fmt.Sprint(st["decided_at"])
		deal.Approval = &approver
	default:
		return Run{txn, steps, deal}, fmt.Errorf("the buyer's acceptance is denied: %v", v["findings"])
	}
	acc, err := buyer.Call(ctx, "accept_offer", accArgs)
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	add(buyer, "accept_offer", fmt.Sprint(acc["state"]), fmt.Sprint(acc["status"]))
	if acc["state"] != "committed" {
		return Run{txn, steps, deal}, fmt.Errorf("after accept_offer the transaction is %v (%v)", acc["state"], acc["waiting_for"])
	}
	obl, err := buyer.Call(ctx, "issue_obligation", map[string]any{"mandate_id": bm, "transaction_id": txn, "request_id": "obligation-1"})
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	oblID := obl["objects"].(map[string]any)["obligation"]
	add(buyer, "issue_obligation", fmt.Sprint(obl["state"]), fmt.Sprint(oblID))
	as, err := supplier.Call(ctx, "assert_performance", map[string]any{"mandate_id": sm, "obligation_id": oblID, "request_id": "assert-1",
		"evidence": []any{map[string]any{"evidence_type": "third_party_certificate",
			"claim":         "Calibration certificates issued for 20 transmitters under ISO/IEC 17025:2017",
			"artifact_hash": canonical.SHA256Hex([]byte("calibration certificates, 20 transmitters"))}}})
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	add(supplier, "assert_performance", fmt.Sprint(as["state"]), fmt.Sprint(as["objects"].(map[string]any)["performance_event"]))
	rs, err := buyer.Call(ctx, "respond_to_assertion", map[string]any{"mandate_id": bm, "obligation_id": oblID, "response_type": "accept", "request_id": "respond-1"})
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	add(buyer, "respond_to_assertion accept", fmt.Sprint(rs["state"]), fmt.Sprint(rs["objects"].(map[string]any)["obligation_response"]))
	if rs["state"] != "settlement_pending" {
		return Run{txn, steps, deal}, fmt.Errorf("the walkthrough ended in %v", rs["state"])
	}
	// The buyer pays on the sandbox rail; the rail's answer lands in both
	// records as a receipt; the supplier closes the deal.
	pay, err := buyer.Call(ctx, "instruct_settlement", map[string]any{"mandate_id": bm, "obligation_id": oblID, "rail": "rail_test_sandbox",
		"idempotency_key": "pay-" + txn, "request_id": "pay-1"})
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	add(buyer, "instruct_settlement", fmt.Sprint(pay["state"]), fmt.Sprintf("%v: %s EUR on rail_test_sandbox", pay["objects"].(map[string]any)["settlement_instruction"], amount))
	paid, err := awaitReceipt(ctx, supplier, txn)
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	deal.Paid = paid
	add(supplier, "settlement_status", paid.Status, fmt.Sprintf("%s paid; receipt %s in both records", paid.Amount, paid.Receipt))
	done, err := supplier.Call(ctx, "complete_transaction", map[string]any{"mandate_id": sm, "transaction_id": txn, "request_id": "complete-1"})
	if err != nil {
		return Run{txn, steps, deal}, err
	}
	add(supplier, "complete_transaction", fmt.Sprint(done["state"]), fmt.Sprint(done["objects"].(map[string]any)["event"]))
	deal.State = fmt.Sprint(done["state"])
	if done["state"] != "completed" {
		return Run{txn, steps, deal}, fmt.Errorf("the walkthrough ended in %v (%v)", done["state"], done["waiting_for"])
	}
	return Run{txn, steps, deal}, nil
}

// awaitReceipt waits until a side's record holds a succeeded receipt of
// the transaction's payment (the rail's answer travels as its own message)
// and returns the payment as that side's settlement_status shows it.
func awaitReceipt(ctx context.Context, a *Agent, txn string) (*Payment, error) {
	for i := 0; i < 100; i++ {
		st, err := a.Call(ctx, "settlement_status", map[string]any{"transaction_id": txn})
		if err != nil {
			return nil, err
		}
		if list, _ := st["settlements"].([]any); len(list) > 0 {
			if s, _ := list[len(list)-1].(map[string]any); s["state"] == "succeeded" {
				p := &Payment{Rail: fmt.Sprint(s["rail"]), Status: fmt.Sprint(s["state"])}
				if m, ok := s["amount"].(map[string]any); ok {
					p.Amount = fmt.Sprintf("%v %v", m["amount"], m["currency"])
				}
				if rs, _ := s["receipts"].([]any); len(rs) > 0 {
					r, _ := rs[len(rs)-1].(map[string]any)
					p.Receipt = fmt.Sprint(r["adapter_receipt_id"])
					if ref, ok := r["external_reference"].(string); ok {
						p.Reference = ref
					}
				}
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no succeeded receipt of %s reached %s", txn, a.Party.Name)
}

// describe reads the description, quantity and total of an offer's terms.
func describe(terms any) (what, quantity, price string) {
	t, _ := terms.(map[string]any)
	core, _ := t["core"].(map[string]any)
	total, _ := core["total"].(map[string]any)
	unit := core["unit_name"]
	if unit == nil {
		unit = core["unit_code"]
	}
	return fmt.Sprint(core["description"]), fmt.Sprintf("%v %v", core["quantity"], unit), fmt.Sprintf("%v %v", total["amount"], total["currency"])
}

// rule reads a member of the first approval rule a verify_mandate answer
// matched.
func rule(v map[string]any, member string) string {
	rs, _ := v["approval_rules_matched"].([]any)
	if len(rs) == 0 {
		return ""
	}
	r, _ := rs[0].(map[string]any)
	s, _ := r[member].(string)
	return s
}

// Tell prints the deal for a reader: what was traded, between whom, for
// how much, who approved it and what was paid.
func Tell(w io.Writer, d Deal) {
	party := func(p Party) string { return p.Name + " (" + p.Org + ")" }
	fmt.Fprintln(w, "\nThe deal")
	fmt.Fprintf(w, "  Traded     %s: %s\n", d.What, d.Quantity)
	fmt.Fprintf(w, "  Supplier   %s\n", party(d.Seller))
	fmt.Fprintf(w, "  Buyer      %s\n", party(d.Buyer))
	fmt.Fprintf(w, "  Price      %s\n", d.Price)
	if a := d.Approval; a != nil {
		who := a.Organization
		for _, p := range []Party{d.Buyer, d.Seller} {
			if p.Org == who {
				who = p.Name
			}
		}
		at := a.DecidedAt
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			at = t.Local().Format("2006-01-02 15:04:05 MST") // a reader's clock, to the second
		}
		fmt.Fprintf(w, "  Approved   by %s's %s, %s (approval %s)\n", who, a.Role, at, a.ApprovalID)
	} else {
		fmt.Fprintf(w, "  Approved   without a person: %s's mandate allowed the acceptance\n", d.Buyer.Name)
	}
	if p := d.Paid; p != nil {
		line := fmt.Sprintf("  Paid       %s by %s to %s on %s: %s (receipt %s", p.Amount, d.Buyer.Name, d.Seller.Name, p.Rail, p.Status, p.Receipt)
		if p.Reference != "" {
			line += ", rail reference " + p.Reference
		}
		fmt.Fprintln(w, line+")")
	}
	if d.State != "" {
		fmt.Fprintf(w, "  Ended      %s\n", d.State)
	}
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
