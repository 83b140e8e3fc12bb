package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
)

// buyerRequest is an issue request for org's agent: up to 4000.00 EUR of
// calibration services from org_delta, acceptances of 3000.00 EUR or more
// held for the procurement lead of org.
func buyerRequest(org string, now time.Time) string {
	return `{
  "valid_from": "` + envelope.Timestamp(now.Add(-time.Hour)) + `",
  "valid_until": "` + envelope.Timestamp(now.Add(30*24*time.Hour)) + `",
  "actions": ["offer.accept"],
  "scope": {"categories": ["services.calibration"], "counterparty_organization_ids": ["org_delta"]},
  "spending_limit": {"currency": "EUR", "amount": "4000.00"},
  "approval_rules": [{
    "id": "r_large",
    "when": {"path": "$.proposed_terms.core.total.amount", "operator": "minimum", "value": "3000.00"},
    "approver": {"organization_id": "` + org + `", "role": "procurement_lead"},
    "expires_after_seconds": 1800
  }]
}`
}

// acceptAct is an offer.accept act document for a calibration job of the
// given total. The description carries markup and quotes, which every
// surface must show as text.
func acceptAct(amount string) map[string]any {
	return authority.ActDocument("offer.accept", "txn_0123456789abcdef01234567", "org_delta", map[string]any{
		"profile": "a202-profile/calibration-service/0.1",
		"core": map[string]any{
			"description": `Calibrate 20 "PT-100" transmitters <b>on site</b> & report`, "quantity": "20", "unit_code": "H87",
			"total": map[string]any{"currency": "EUR", "amount": amount},
		},
		"profile_terms": map[string]any{
			"completion": map[string]any{"business_days_after_collection": 8, "business_calendar": "DE"},
			"payment":    map[string]any{"prepayment_percent": "25", "balance_trigger": "buyer_acceptance"},
			"acceptance": map[string]any{"certificate_required": true, "machine_readable_result_required": true, "qualification_standard": "ISO/IEC 17025:2017"},
			"rework":     map[string]any{"included_attempts": 1},
		},
	}, map[string]any{"category": "services.calibration"})
}

// issueBuyer issues buyerRequest through `party mandate issue --json` and
// returns the mandate id.
func issueBuyer(t *testing.T, dir, org string) string {
	t.Helper()
	req := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(req, []byte(buyerRequest(org, time.Now().UTC())), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustParty(t, "mandate", "issue", "--dir", dir, "--file", req, "--json")
	m, err := canonical.DecodeObject([]byte(strings.TrimSpace(out)))
	if err != nil {
		t.Fatalf("mandate issue --json is not one canonical document: %v\n%s", err, out)
	}
	id, _ := m["id"].(string)
	if !strings.HasPrefix(id, "mnd_") {
		t.Fatalf("mandate id %q", id)
	}
	return id
}

// TestApprovalsFlow: the agent asks for two approvals through its own
// surface; the principal lists them on the command line with the exact
// act, approves one with a condition and rejects the other; the agent
// then sees the decisions, and the approved act is allowed.
func TestApprovalsFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The node serves its mandate status over HTTPS, as `party serve`
	// would, so the agent's evaluations resolve it.
	n := orgtest.New(t, "org_acme", nil, true)
	mid := issueBuyer(t, n.Dir, "org_acme")
	a := agent.New(n.Org)

	big, err := a.RequestApproval(ctx, agent.VerifyInput{MandateID: mid, ProposedAction: acceptAct("3200.00")})
	if err != nil {
		t.Fatal(err)
	}
	bigger, err := a.RequestApproval(ctx, agent.VerifyInput{MandateID: mid, ProposedAction: acceptAct("3900.00")})
	if err != nil {
		t.Fatal(err)
	}

	// Text: every pending request with mandate, transaction, hash, the
	// holding rule and the act, indented from its canonical form.
	out := mustParty(t, "approvals", "--dir", n.Dir)
	for _, want := range []string{
		big.ApprovalRequestID + "  pending", bigger.ApprovalRequestID + "  pending",
		"mandate      " + mid, "transaction  txn_0123456789abcdef01234567",
		"action hash  " + big.ActionHash, "action hash  " + bigger.ActionHash,
		"rule r_large: approver org_acme procurement_lead, approval good for 1800 s",
		`"amount": "3200.00"`, `"amount": "3900.00"`,
		`"description": "Calibrate 20 \"PT-100\" transmitters <b>on site</b> & report"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "DOES NOT MATCH") {
		t.Errorf("an honest act is flagged:\n%s", out)
	}
	// The act shown is the canonical document: stripped of the indentation
	// it hashes to the action hash.
	if block := actBlock(t, out, big.ApprovalRequestID); canonical.SHA256Hex([]byte(block)) != big.ActionHash {
		t.Errorf("the act shown does not hash to %s:\n%s", big.ActionHash, block)
	}

	// JSON: the same requests, with the act as an object.
	var list []principal.Approval
	if err := json.Unmarshal([]byte(mustParty(t, "approvals", "--dir", n.Dir, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Status != "pending" || list[0].Act["action_type"] != "offer.accept" {
		t.Fatalf("approvals --json: %+v", list)
	}

	// Approve the first with a condition.
	out = mustParty(t, "approve", "--dir", n.Dir, "--condition", "collect after 14:00", "--condition", "certificate in PDF", "--json", big.ApprovalRequestID)
	obj, err := canonical.DecodeObject([]byte(strings.TrimSpace(out)))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := obj["payload"].(map[string]any)
	appr, _ := p["approver"].(map[string]any)
	if obj["object_type"] != "approval" || p["decision"] != "approved" || p["action_hash"] != big.ActionHash ||
		appr["principal_id"] != "prn_acme_principal" || appr["role"] != "procurement_lead" ||
		!slices.Equal(p["conditions"].([]any), []any{"collect after 14:00", "certificate in PDF"}) {
		t.Fatalf("approval object: %s", out)
	}
	st, err := a.ApprovalStatus(ctx, big.ApprovalRequestID)
	if err != nil || st.Status != "approved" || st.ApprovalID != obj["id"] {
		t.Fatalf("agent sees %+v %v", st, err)
	}
	v, err := a.VerifyMandate(ctx, agent.VerifyInput{MandateID: mid, ProposedAction: acceptAct("3200.00"), ApprovalID: st.ApprovalID})
	if err != nil || v.Decision != authority.Allow {
		t.Fatalf("approved act: %+v %v", v, err)
	}
	// The approval is bound to its act: the other amount stays held.
	v, err = a.VerifyMandate(ctx, agent.VerifyInput{MandateID: mid, ProposedAction: acceptAct("3900.00"), ApprovalID: st.ApprovalID})
	if err != nil || v.Decision == authority.Allow {
		t.Fatalf("approval reused for another act: %+v %v", v, err)
	}

	// A decision is final: approving again or rejecting is refused.
	for _, verb := range []string{"approve", "reject"} {
		_, errOut, code := runParty(t, "", verb, "--dir", n.Dir, big.ApprovalRequestID)
		if code != 1 || !strings.Contains(errOut, "already decided") {
			t.Fatalf("%s of a decided request: exit %d, %s", verb, code, errOut)
		}
	}

	// Reject the second.
	out = mustParty(t, "reject", "--dir", n.Dir, "--reason", "over this quarter's budget\n ask again in April ", bigger.ApprovalRequestID)
	if !strings.HasPrefix(out, bigger.ApprovalRequestID+" rejected: approval apr_") {
		t.Fatalf("reject output %q", out)
	}
	st, err = a.ApprovalStatus(ctx, bigger.ApprovalRequestID)
	if err != nil || st.Status != "rejected" || !slices.Equal(st.Conditions, []string{"over this quarter's budget", "ask again in April"}) {
		t.Fatalf("agent sees %+v %v", st, err)
	}
	// The reason is signed into the rejection, one condition per line.
	if rej, err := n.Org.Store.GetObject(ctx, st.TransactionID, st.ApprovalID); err != nil || !strings.Contains(string(rej), `"conditions":["over this quarter's budget","ask again in April"]`) {
		t.Fatalf("the rejection %s %v", rej, err)
	}
	v, err = a.VerifyMandate(ctx, agent.VerifyInput{MandateID: mid, ProposedAction: acceptAct("3900.00"), ApprovalID: st.ApprovalID})
	if err != nil || v.Decision == authority.Allow {
		t.Fatalf("rejected act allowed: %+v %v", v, err)
	}

	// Nothing pending; --all shows both decisions.
	if out := mustParty(t, "approvals", "--dir", n.Dir); strings.TrimSpace(out) != "no pending approval requests" {
		t.Fatalf("pending after deciding: %s", out)
	}
	list = nil
	if err := json.Unmarshal([]byte(mustParty(t, "approvals", "--dir", n.Dir, "--all", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, x := range list {
		got[x.RequestID] = x.Status
	}
	if got[big.ApprovalRequestID] != "approved" || got[bigger.ApprovalRequestID] != "rejected" || len(got) != 2 {
		t.Fatalf("approvals --all: %v", got)
	}
}

// actBlock extracts the act printed under request id and removes the
// indentation and line breaks the printer added.
func actBlock(t *testing.T, out, id string) string {
	t.Helper()
	i := strings.Index(out, id)
	j := strings.Index(out[i:], "  act:\n")
	if i < 0 || j < 0 {
		t.Fatalf("no act for %s", id)
	}
	var b strings.Builder
	for _, line := range strings.Split(out[i+j+len("  act:\n"):], "\n") {
		if !strings.HasPrefix(line, "    ") {
			break
		}
		b.WriteString(line)
	}
	// json.Indent adds a space after each colon between member name and
	// value, and whitespace at line starts; re-canonicalise to drop both.
	c, err := canonical.Canonicalize([]byte(b.String()))
	if err != nil {
		t.Fatalf("act block is not JSON: %v\n%s", err, b.String())
	}
	return string(c)
}
