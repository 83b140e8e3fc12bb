package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
)

// issueOpen issues a mandate for actions to agent (primary when "") of
// p, towards other, in any transaction: what an agent that trades all
// month holds.
func issueOpen(t *testing.T, p *demo.Party, agent, other string, actions []string) string {
	t.Helper()
	now := time.Now().UTC()
	req := map[string]any{
		"valid_from": envelope.Timestamp(now.Add(-time.Minute)), "valid_until": envelope.Timestamp(now.Add(24 * time.Hour)),
		"actions":        actions,
		"scope":          map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{other}},
		"spending_limit": map[string]any{"currency": "EUR", "amount": "4000.00"},
	}
	if agent != "" {
		req["subject"] = map[string]any{"agent_id": agent}
	}
	b, _ := json.Marshal(req)
	f := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(party(t, "mandate", "issue", "--dir", p.Dir, "--file", f, "--json")), &m); err != nil {
		t.Fatal(err)
	}
	return m["id"].(string)
}

// TestBudgetAcrossAgentsAndRestart: two of the buyer's agents accept at
// once two offers that each fit its monthly budget and together do not.
// One is taken; the other is refused with the budget named and what is
// left, and the supplier never hears of it. The budget, and what it
// counted, outlive a restart of the buyer's instance.
func TestBudgetAcrossAgentsAndRestart(t *testing.T) {
	t.Parallel()
	buyer, supplier := setup(t)
	const second = "agt_northstar_second"
	party(t, "agent", "add", "--dir", buyer.Dir, "--id", second)
	buyActs := []string{"offer.accept", "agreement.sign"}
	m1 := issueOpen(t, buyer, "", supplier.Org, buyActs)
	m2 := issueOpen(t, buyer, second, supplier.Org, buyActs)
	supplier.MandateID = issueOpen(t, supplier, "", buyer.Org, []string{"offer.submit", "agreement.sign"})
	party(t, "budget", "set", "--dir", buyer.Dir, "--id", "monthly-eur", "--currency", "EUR", "--limit", "5000.00")

	p := serveBoth(t, buyer, supplier)
	other := *buyer
	tok, err := instance.LoadToken(buyer.Dir, filepath.Join("tokens", "agents", second))
	if err != nil {
		t.Fatal(err)
	}
	other.AgentToken = tok
	a2 := p.connect(&other)

	offer := func(amount, to string, a *demo.Agent, mandate string) (txn, offerID string) {
		t.Helper()
		args := map[string]any{"mandate_id": supplier.MandateID, "counterparty_organization_id": buyer.Org,
			"terms": demo.Terms(amount), "valid_until": envelope.Timestamp(time.Now().UTC().Add(time.Hour))}
		if to != "" {
			args["offeree_agent_id"] = to
		}
		out := p.call(p.sa, "propose_offer", args)
		txn, offerID = out["transaction_id"].(string), objectOf(out, "offer")
		eventually(t, "the offer reaches the buyer", func() bool {
			for _, o := range p.call(a, "list_inbox", map[string]any{"mandate_id": mandate})["offers"].([]any) {
				if o.(map[string]any)["offer_id"] == offerID {
					return true
				}
			}
			return false
		}, func() any { return offerID })
		return txn, offerID
	}
	txnA, offA := offer("3000.00", "", p.ba, m1)
	txnB, offB := offer("3000.00", second, a2, m2)

	type result struct {
		out map[string]any
		err error
	}
	res := make([]result, 2)
	var wg sync.WaitGroup
	for i, x := range []struct {
		a       *demo.Agent
		mandate string
		offer   string
	}{{p.ba, m1, offA}, {a2, m2, offB}} {
		wg.Go(func() {
			res[i].out, res[i].err = x.a.Call(p.ctx, "accept_offer", map[string]any{"mandate_id": x.mandate, "offer_id": x.offer})
		})
	}
	wg.Wait()
	taken, refusedAt := -1, -1
	for i, r := range res {
		switch {
		case r.err == nil && r.out["state"] == "committed":
			taken = i
		case r.err != nil && hasCode(r.out["reason_codes"], "A202-POLICY-DENIED"):
			refusedAt = i
			b, _ := r.out["budget"].(map[string]any)
			if b["budget_id"] != "monthly-eur" || b["left"] != "2000.00" || b["used"] != "3000.00" || !strings.Contains(r.out["detail"].(string), "monthly-eur") {
				t.Fatalf("the refusal does not name the budget and what is left: %v", r.out)
			}
		}
	}
	if taken < 0 || refusedAt < 0 {
		t.Fatalf("two acceptances of 3000.00 under a budget of 5000.00: %+v", res)
	}
	refusedTxn := []string{txnA, txnB}[refusedAt]
	supplierState := func() any {
		return p.call(p.sa, "get_transaction_record", map[string]any{"transaction_id": refusedTxn})["state"]
	}
	// The supplier's offer still waits: nothing of the refusal reached it.
	stays(t, "the supplier's refused transaction stays draft", 2*time.Second, func() bool { return supplierState() == "draft" })

	// The buyer's instance restarts: the budget and what it counted stay.
	p.bp.stop(syscall.SIGTERM)
	p.bp = serve(t, buyer.Dir)
	p.ba, a2 = p.connect(buyer), p.connect(&other)
	var list struct {
		Budgets []map[string]any `json:"budgets"`
	}
	if err := json.Unmarshal([]byte(party(t, "budget", "list", "--dir", buyer.Dir, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Budgets) != 1 || list.Budgets[0]["used"] != "3000.00" || list.Budgets[0]["left"] != "2000.00" {
		t.Fatalf("after a restart: %v", list)
	}
	who := p.call(a2, "whoami", nil)
	if bs, _ := who["budgets"].([]any); len(bs) != 1 || bs[0].(map[string]any)["left"] != "2000.00" {
		t.Fatalf("whoami budgets %v", who["budgets"])
	}
	_, offC := offer("2500.00", second, a2, m2)
	out, err := a2.Call(p.ctx, "accept_offer", map[string]any{"mandate_id": m2, "offer_id": offC})
	if err == nil || !hasCode(out["reason_codes"], "A202-POLICY-DENIED") || out["budget"] == nil {
		t.Fatalf("after a restart, an acceptance past the budget: %v %v", out, err)
	}
	again := []struct {
		a       *demo.Agent
		mandate string
	}{{p.ba, m1}, {a2, m2}}[refusedAt]
	if out, err := again.a.Call(p.ctx, "accept_offer", map[string]any{"mandate_id": again.mandate, "offer_id": []string{offA, offB}[refusedAt]}); err == nil {
		t.Fatalf("the refused offer was taken after a restart: %v", out)
	}
}
