package e2e

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/notify"
)

// Deadlines, holds and revocations through the processes a user runs: two
// `party serve` instances, each agent driven over MCP, each principal
// acting with the CLI in processes of its own. Nothing here waits on a
// bare sleep where a condition can be polled: the background loops of
// serve (packages releases and deadlines) act on their own clock, and
// each test polls (eventually) for what they must bring about.

// expiryGrace mirrors record.ExpiryGrace: how long past an offer's
// valid_until an instance waits before it expires the transaction.
const expiryGrace = 10 * time.Second

// deadlineActs are moneyActs and transaction.expire, which an instance
// needs on a mandate of its own to expire a lapsed offer by itself.
var deadlineActs = append(slices.Clone(moneyActs), "transaction.expire")

// issueActs issues p's agent a mandate for actions, with rules, through
// the principal's CLI, scoped to the agreed transaction and the
// counterparty.
func issueActs(t *testing.T, p *demo.Party, other string, actions []string, rules []any) string {
	t.Helper()
	now := time.Now().UTC()
	req := map[string]any{
		"valid_from": envelope.Timestamp(now.Add(-time.Minute)), "valid_until": envelope.Timestamp(now.Add(24 * time.Hour)),
		"actions":        actions,
		"scope":          map[string]any{"transaction_ids": []any{p.TransactionID}, "counterparty_organization_ids": []any{other}},
		"spending_limit": map[string]any{"currency": "EUR", "amount": "4000.00"},
	}
	if rules != nil {
		req["approval_rules"] = rules
	}
	b, _ := json.Marshal(req)
	file := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(party(t, "mandate", "issue", "--dir", p.Dir, "--file", file, "--json")), &m); err != nil {
		t.Fatal(err)
	}
	return m["id"].(string)
}

// approvalRule holds action for the approval of a principal of org in
// role.
func approvalRule(action, org, role string) map[string]any {
	return map[string]any{"id": "r_" + strings.ReplaceAll(action, ".", "_"), "when": map[string]any{"path": "$.action_type", "operator": "equals", "value": action},
		"approver": map[string]any{"organization_id": org, "role": role}, "expires_after_seconds": 3600}
}

// served is two serving instances and their agents.
type served struct {
	t               *testing.T
	ctx             context.Context
	buyer, supplier *demo.Party
	bp, sp          *proc
	ba, sa          *demo.Agent
}

// serveBoth serves both instances and connects both agents; on failure,
// the tail of each serve.log is logged.
func serveBoth(t *testing.T, buyer, supplier *demo.Party) *served {
	t.Helper()
	p := &served{t: t, ctx: context.Background(), buyer: buyer, supplier: supplier}
	t.Cleanup(func() {
		if t.Failed() {
			for _, pt := range []*demo.Party{buyer, supplier} {
				data, _ := os.ReadFile(filepath.Join(pt.Dir, "serve.log"))
				t.Logf("%s serve.log (tail):\n%s", pt.Name, tail(data, 8000))
			}
		}
	})
	p.bp = serve(t, buyer.Dir)
	p.sp = serve(t, supplier.Dir)
	p.ba, p.sa = p.connect(buyer), p.connect(supplier)
	return p
}

func (p *served) connect(pt *demo.Party) *demo.Agent {
	p.t.Helper()
	a, err := demo.Connect(p.ctx, pt, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(a.Close)
	return a
}

func (p *served) call(a *demo.Agent, tool string, args map[string]any) map[string]any {
	p.t.Helper()
	out, err := a.Call(p.ctx, tool, args)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// view is txn's record as a's instance holds it (get_transaction_record).
func (p *served) view(a *demo.Agent) map[string]any {
	p.t.Helper()
	return p.call(a, "get_transaction_record", map[string]any{"transaction_id": p.buyer.TransactionID})
}

// offer has the supplier offer the walkthrough's terms until validUntil
// and waits until the offer is in the buyer's inbox; it returns the inbox
// item.
func (p *served) offer(validUntil time.Time) map[string]any {
	p.t.Helper()
	off := p.call(p.sa, "propose_offer", map[string]any{"mandate_id": p.supplier.MandateID, "transaction_id": p.supplier.TransactionID,
		"counterparty_organization_id": p.buyer.Org, "terms": demo.Terms("3200.00"), "valid_until": envelope.Timestamp(validUntil)})
	var item map[string]any
	eventually(p.t, "the offer reaches the buyer's inbox", func() bool {
		item = p.inboxItem()
		return item != nil && item["offer_id"] == objectOf(off, "offer")
	}, func() any { return item })
	return item
}

// inboxItem is the buyer's inbox item of the transaction, or nil.
func (p *served) inboxItem() map[string]any {
	p.t.Helper()
	for _, o := range p.call(p.ba, "list_inbox", map[string]any{"mandate_id": p.buyer.MandateID})["offers"].([]any) {
		if o := o.(map[string]any); o["transaction_id"] == p.buyer.TransactionID {
			return o
		}
	}
	return nil
}

// form offers and has the buyer accept, with no approval: committed.
func (p *served) form() {
	p.t.Helper()
	item := p.offer(time.Now().UTC().Add(time.Hour))
	if acc := p.call(p.ba, "accept_offer", map[string]any{"mandate_id": p.buyer.MandateID, "offer_id": item["offer_id"]}); acc["state"] != "committed" {
		p.t.Fatalf("accept_offer: %v", acc)
	}
}

// both checks cond of both sides' views until it holds for both.
func (p *served) both(what string, cond func(v map[string]any) bool) {
	p.t.Helper()
	for _, a := range []*demo.Agent{p.ba, p.sa} {
		var last map[string]any
		eventually(p.t, a.Party.Name+": "+what, func() bool {
			last = p.view(a)
			return cond(last)
		}, func() any { return last })
	}
}

// stays checks that cond keeps holding for d: the bounded wait a "nothing
// more happens" needs.
func stays(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if !cond() {
			t.Fatalf("no longer so: %s", what)
		}
	}
}

func hasCode(codes any, code string) bool {
	list, _ := codes.([]any)
	return slices.Contains(list, any(code))
}

// pendingSign lists dir's pending approval requests for the act
// agreement.sign of txn, with the principal's CLI.
func pendingSign(t *testing.T, dir, txn string) []map[string]any {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal([]byte(party(t, "approvals", "--dir", dir, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range list {
		if act, _ := r["act"].(map[string]any); act["action_type"] == "agreement.sign" && r["transaction_id"] == txn && r["status"] == "pending" {
			out = append(out, r)
		}
	}
	return out
}

// TestHeldCommitDecidedWithTheCLI: a mandate's rule on agreement.sign
// holds formation's commit for its principal, who decides with `party
// approve` or `party reject` in a process of its own while both `party
// serve` run. The hold is the acceptor's own commit (the buyer's rule:
// its instance takes the commit by itself, ReleaseHeld, once approved) or
// the offeror's signature (the supplier's rule: the buyer's instance asks
// again). Approved, both records reach committed with the same two
// countersigned events; rejected, the holder's transaction says so with
// A202-POLICY-DENIED, and nothing more is appended on either side.
func TestHeldCommitDecidedWithTheCLI(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		offeror bool // the supplier's rule holds; else the buyer's
		approve bool
	}{
		{"acceptor approves", false, true},
		{"acceptor rejects", false, false},
		{"offeror approves", true, true},
		{"offeror rejects", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			buyer, supplier := setup(t)
			txn := buyer.TransactionID
			buyerRules := []any{approvalRule("offer.accept", buyer.Org, "procurement_lead")}
			var supplierRules []any
			holder := buyer
			if c.offeror {
				holder = supplier
				supplierRules = []any{approvalRule("agreement.sign", supplier.Org, "managing_director")}
			} else {
				buyerRules = append(buyerRules, approvalRule("agreement.sign", buyer.Org, "procurement_lead"))
			}
			buyer.MandateID = issueActs(t, buyer, supplier.Org, []string{"offer.accept", "agreement.sign"}, buyerRules)
			supplier.MandateID = issueActs(t, supplier, buyer.Org, []string{"offer.submit", "agreement.sign"}, supplierRules)
			p := serveBoth(t, buyer, supplier)

			// The buyer's acceptance, approved by its principal as in
			// the walkthrough.
			item := p.offer(time.Now().UTC().Add(time.Hour))
			req := p.call(p.ba, "request_approval", map[string]any{"mandate_id": buyer.MandateID, "proposed_action": item["acceptance_act"]})
			if err := demo.Approve(p.ctx, buyer, req["approval_request_id"].(string)); err != nil {
				t.Fatal(err)
			}
			st := p.call(p.ba, "approval_status", map[string]any{"approval_request_id": req["approval_request_id"]})
			acc := p.call(p.ba, "accept_offer", map[string]any{"mandate_id": buyer.MandateID, "offer_id": item["offer_id"], "approval_id": st["approval_id"]})
			if acc["state"] != "agreement_pending" {
				t.Fatalf("accept_offer with the commit held: %v", acc)
			}

			// The holder's principal sees exactly one request, for the
			// signature of this transaction's agreement; until it
			// decides, both records hold the acceptance alone.
			var list []map[string]any
			eventually(t, holder.Name+"'s principal lists the held signature", func() bool {
				list = pendingSign(t, holder.Dir, txn)
				return len(list) > 0
			})
			p.both("the acceptance is recorded and the commit waits", func(v map[string]any) bool {
				return v["state"] == "agreement_pending" && len(v["events"].([]any)) == 1
			})
			records(t, buyer, supplier, txn, 1)
			if list = pendingSign(t, holder.Dir, txn); len(list) != 1 {
				t.Fatalf("%s's principal lists %d pending requests for the signature: %v", holder.Name, len(list), list)
			}
			id := list[0]["approval_request_id"].(string)

			if c.approve {
				party(t, "approve", "--dir", holder.Dir, id)
				p.both("committed, nothing pending", func(v map[string]any) bool {
					return v["state"] == "committed" && v["pending"] == nil && len(v["waiting"].([]any)) == 0
				})
				records(t, buyer, supplier, txn, 2)
				for _, a := range []*demo.Agent{p.ba, p.sa} {
					if v := p.view(a); v["notice"] != nil {
						t.Errorf("%s: a committed transaction carries the notice %v", a.Party.Name, v["notice"])
					}
				}
				return
			}

			party(t, "reject", "--dir", holder.Dir, id)
			ha := p.ba
			if c.offeror {
				ha = p.sa
			}
			var notice map[string]any
			eventually(t, holder.Name+"'s transaction tells of the rejection", func() bool {
				notice, _ = p.view(ha)["notice"].(map[string]any)
				return hasCode(notice["reason_codes"], "A202-POLICY-DENIED")
			}, func() any { return notice })
			other := p.sa
			if c.offeror {
				other = p.ba
			}
			t.Logf("%s's notice: %v; %s's: %v", holder.Name, notice, other.Party.Name, p.view(other)["notice"])
			// Nothing more is appended: not at once, and not after the
			// loops of both instances ran again (releases.Run every two
			// seconds, the buyer's outbox asking again).
			unchanged := func() bool {
				for _, a := range []*demo.Agent{p.ba, p.sa} {
					if v := p.view(a); v["state"] != "agreement_pending" || len(v["events"].([]any)) != 1 {
						return false
					}
				}
				return true
			}
			stays(t, "both records hold the acceptance alone, agreement_pending", 5*time.Second, unchanged)
			records(t, buyer, supplier, txn, 1)
			if again := pendingSign(t, holder.Dir, txn); len(again) != 0 {
				t.Fatalf("after the rejection %s's principal is asked again: %v", holder.Name, again)
			}
		})
	}
}

// TestUnacceptedOfferExpires: an offer valid for a few seconds that
// nobody accepts is in the buyer's inbox, then gone; once its deadline is
// ExpiryGrace past, the draft transaction ends expired on both sides by
// one deadline.elapsed, countersigned and byte-identical, appended no
// earlier than the grace allows, by whichever instance's organisation has
// a mandate listing transaction.expire (both: the first to look wins);
// the exported record verifies.
func TestUnacceptedOfferExpires(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                          string
		buyerExpires, supplierExpires bool
	}{
		{"either side may", true, true},
		{"the offeror's instance", false, true},
		{"the offeree's instance", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			buyer, supplier := setup(t)
			txn := buyer.TransactionID
			acts := func(expires bool) []string {
				if expires {
					return deadlineActs
				}
				return moneyActs
			}
			buyer.MandateID = issueActs(t, buyer, supplier.Org, acts(c.buyerExpires), nil)
			supplier.MandateID = issueActs(t, supplier, buyer.Org, acts(c.supplierExpires), nil)
			p := serveBoth(t, buyer, supplier)

			validUntil := time.Now().UTC().Truncate(time.Second).Add(4 * time.Second)
			item := p.offer(validUntil)
			offerID := item["offer_id"]
			if item["valid_until"] != envelope.Timestamp(validUntil) {
				t.Fatalf("the inbox item reads valid_until %v, want %s", item["valid_until"], envelope.Timestamp(validUntil))
			}
			for _, a := range []*demo.Agent{p.ba, p.sa} {
				if v := p.view(a); v["state"] != "draft" || len(v["events"].([]any)) != 0 {
					t.Fatalf("%s holds the offer as %v with %d events", a.Party.Name, v["state"], len(v["events"].([]any)))
				}
			}
			// Both instances may expire it: one deadline.elapsed wins,
			// no fork.
			p.both("the transaction expired", func(v map[string]any) bool {
				return v["state"] == "expired" && v["pending"] == nil && v["chain_status"] == "intact" && len(v["forks"].([]any)) == 0
			})
			records(t, buyer, supplier, txn, 1)
			for _, a := range []*demo.Agent{p.ba, p.sa} {
				v := p.view(a)
				ev := v["events"].([]any)[0].(map[string]any)
				data, _ := ev["data"].(map[string]any)
				if ev["event_type"] != "deadline.elapsed" || ev["from_state"] != "draft" || ev["to_state"] != "expired" || data["offer_id"] != offerID {
					t.Fatalf("%s: the expiry reads %v", a.Party.Name, ev)
				}
				at, err := envelope.ParseTimestamp(fmt.Sprint(ev["occurred_at"]))
				if err != nil || at.Before(validUntil.Add(expiryGrace)) {
					t.Fatalf("%s: deadline.elapsed occurred at %v, before the offer's valid_until %s and the grace", a.Party.Name, ev["occurred_at"], envelope.Timestamp(validUntil))
				}
				if by := ev["appended_by"]; !c.buyerExpires && by != supplier.Org || !c.supplierExpires && by != buyer.Org {
					t.Fatalf("%s: deadline.elapsed appended by %v, whose mandates do not list transaction.expire", a.Party.Name, by)
				}
				t.Logf("%s: deadline.elapsed appended by %v at %v", a.Party.Name, ev["appended_by"], ev["occurred_at"])
			}
			if it := p.inboxItem(); it != nil {
				t.Fatalf("the buyer's inbox still lists the expired offer: %v", it)
			}
			stays(t, "one event on both sides", 2500*time.Millisecond, func() bool {
				for _, a := range []*demo.Agent{p.ba, p.sa} {
					if len(p.view(a)["events"].([]any)) != 1 {
						return false
					}
				}
				return true
			})
			records(t, buyer, supplier, txn, 1)
			out := filepath.Join(t.TempDir(), "bundle")
			party(t, "export", "--dir", supplier.Dir, "--transaction", txn, out)
			party(t, "verify", out)
		})
	}
}

// hookNotice is one delivery a principal's endpoint accepted.
type hookNotice struct {
	body map[string]any
	at   time.Time
}

// principalHook is a principal's HTTPS endpoint for package notify's
// contract: it checks each delivery's signature and timestamp and keeps
// what it accepted.
type principalHook struct {
	secret []byte
	srv    *httptest.Server

	mu      sync.Mutex
	got     []hookNotice
	refused []string
}

func newPrincipalHook(t *testing.T, org string) *principalHook {
	h := &principalHook{secret: []byte("the webhook secret of " + org + " " + t.Name())}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		ts := r.Header.Get("X-Party-Timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		var m map[string]any
		why := ""
		switch {
		case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json":
			why = "not a JSON POST"
		case err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute:
			why = "timestamp " + ts
		case !hmac.Equal([]byte(r.Header.Get("X-Party-Signature")), []byte(notify.Sign(h.secret, ts, body))):
			why = "bad signature"
		case json.Unmarshal(body, &m) != nil || m["notice_id"] != r.Header.Get("Idempotency-Key") || m["organization_id"] != org:
			why = "not the contract's body: " + string(body)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if why != "" {
			h.refused = append(h.refused, why)
			http.Error(w, why, http.StatusUnauthorized)
			return
		}
		h.got = append(h.got, hookNotice{m, time.Now()})
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// of returns the notices of kind about obligation obl.
func (h *principalHook) of(kind, obl string) []hookNotice {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookNotice
	for _, n := range h.got {
		if n.body["kind"] == kind && n.body["obligation_id"] == obl {
			out = append(out, n)
		}
	}
	return out
}

func (h *principalHook) refusals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.refused)
}

// bearerToken authenticates an MCP client as an agent.
type bearerToken string

func (b bearerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// resourceWatch is an MCP session of an agent that subscribed to one
// resource and notes when each notifications/resources/updated arrived.
type resourceWatch struct {
	cs  *sdk.ClientSession
	uri string

	mu sync.Mutex
	at []time.Time
}

func watchResource(t *testing.T, pt *demo.Party, uri string) *resourceWatch {
	t.Helper()
	w := &resourceWatch{uri: uri}
	c := sdk.NewClient(&sdk.Implementation{Name: "deadline-watcher"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			if req.Params.URI == uri {
				w.mu.Lock()
				w.at = append(w.at, time.Now())
				w.mu.Unlock()
			}
		},
	})
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: pt.MCPURL, HTTPClient: &http.Client{Transport: bearerToken(pt.AgentToken)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	w.cs = cs
	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("%s: subscribe %s: %v", pt.Name, uri, err)
	}
	return w
}

// since counts the updates that arrived at or after t0.
func (w *resourceWatch) since(t0 time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.at {
		if !at.Before(t0) {
			n++
		}
	}
	return n
}

// read reads the watched resource.
func (w *resourceWatch) read(t *testing.T) map[string]any {
	t.Helper()
	res, err := w.cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: w.uri})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// obligationIn is obligation obl of a transaction view, or nil.
func obligationIn(v map[string]any, obl string) map[string]any {
	for _, o := range v["obligations"].([]any) {
		if o := o.(map[string]any); o["obligation_id"] == obl {
			return o
		}
	}
	return nil
}

// TestObligationFallsDueAndOverdue: an obligation due a few seconds after
// it is issued, never performed. With no act taken, both records' views
// go pending → due → overdue at the instants the due condition and
// deadlines.overdue_after_seconds set; each principal's webhook is posted
// obligation.due and obligation.overdue once each, signed, and not again
// after a restart; each agent subscribed to the transaction is told of
// the change when the obligation falls due.
func TestObligationFallsDueAndOverdue(t *testing.T) {
	t.Parallel()
	const overdueAfter = 3 * time.Second
	buyer, supplier := setup(t)
	txn := buyer.TransactionID
	buyer.MandateID = issueMandate(t, buyer, supplier.Org)
	supplier.MandateID = issueMandate(t, supplier, buyer.Org)
	// Each principal's endpoint, its secret and its private CA (ca_file)
	// in the state directory.
	hooks := map[string]*principalHook{}
	for _, pt := range []*demo.Party{buyer, supplier} {
		h := newPrincipalHook(t, pt.Org)
		hooks[pt.Name] = h
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
		for name, data := range map[string][]byte{"principal-webhook.secret": h.secret, "principal-webhook-ca.pem": ca} {
			if err := os.WriteFile(filepath.Join(pt.Dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		editConfig(t, pt.Dir, func(c map[string]any) {
			c["principal_webhook"] = map[string]any{"url": h.srv.URL + "/party", "secret_file": "principal-webhook.secret",
				"ca_file": "principal-webhook-ca.pem", "timeout_seconds": 5}
			c["deadlines"] = map[string]any{"overdue_after_seconds": int(overdueAfter / time.Second)}
		})
	}
	p := serveBoth(t, buyer, supplier)
	p.form()
	watches := []*resourceWatch{watchResource(t, buyer, "party://transactions/"+txn), watchResource(t, supplier, "party://transactions/"+txn)}

	dueAt := time.Now().UTC().Truncate(time.Second).Add(5 * time.Second)
	out := p.call(p.ba, "issue_obligation", map[string]any{"mandate_id": buyer.MandateID, "transaction_id": txn,
		"due_condition": map[string]any{"type": "due_at_time", "at": envelope.Timestamp(dueAt)}})
	obl := objectOf(out, "obligation")
	if out["status"] != "recorded" || obl == "" {
		t.Fatalf("issue_obligation: %v", out)
	}
	timing := func(v map[string]any) (state string, tm map[string]any) {
		o := obligationIn(v, obl)
		if o == nil {
			return "", nil
		}
		tm, _ = o["timing"].(map[string]any)
		return fmt.Sprint(o["state"]), tm
	}
	// Before the due time: pending, due and overdue instants announced.
	for _, a := range []*demo.Agent{p.ba, p.sa} {
		state, tm := timing(p.view(a))
		if time.Now().After(dueAt) {
			t.Fatal("too slow: the obligation fell due before it was read")
		}
		if state != "pending" || tm["due"] != false || tm["overdue"] != false || tm["due_at"] != envelope.Timestamp(dueAt) ||
			tm["overdue_at"] != envelope.Timestamp(dueAt.Add(overdueAfter)) {
			t.Fatalf("%s reads the obligation as %s %v before it is due", a.Party.Name, state, tm)
		}
	}
	for name, h := range hooks {
		if n := len(h.of("obligation.due", obl)) + len(h.of("obligation.overdue", obl)); n != 0 {
			t.Fatalf("%s's principal was told of the obligation before it was due", name)
		}
	}
	p.both("the obligation is due, not overdue", func(v map[string]any) bool {
		state, tm := timing(v)
		if time.Now().After(dueAt.Add(overdueAfter)) {
			t.Fatal("too slow: the obligation was overdue before it was read as due")
		}
		return state == "due" && tm["due"] == true && tm["overdue"] == false
	})
	// The agent is told, with no act taken: an update of the
	// transaction's resource after the due time, which reads due.
	for _, w := range watches {
		eventually(t, "an update of "+w.uri+" after the due time", func() bool { return w.since(dueAt) > 0 })
		if state, _ := timing(w.read(t)); state != "due" {
			t.Fatalf("after the update %s reads the obligation as %s", w.uri, state)
		}
	}
	p.both("the obligation is overdue", func(v map[string]any) bool {
		state, tm := timing(v)
		return state == "due" && tm["due"] == true && tm["overdue"] == true
	})
	// Each principal is told once of each, in order, of this obligation.
	for name, h := range hooks {
		other := supplier.Org
		if name == supplier.Name {
			other = buyer.Org
		}
		eventually(t, name+"'s principal is told the obligation is due and overdue", func() bool {
			return len(h.of("obligation.due", obl)) > 0 && len(h.of("obligation.overdue", obl)) > 0
		}, func() any { return h.refusals() })
		d, o := h.of("obligation.due", obl)[0], h.of("obligation.overdue", obl)[0]
		for _, n := range []hookNotice{d, o} {
			if n.body["transaction_id"] != txn || n.body["due_at"] != envelope.Timestamp(dueAt) || n.body["counterparty_organization_id"] != other ||
				n.body["party_notice"] != notify.Version {
				t.Fatalf("%s's principal was told %v", name, n.body)
			}
		}
		if o.at.Before(d.at) || o.at.Before(dueAt.Add(overdueAfter)) || d.at.Before(dueAt) {
			t.Fatalf("%s's principal was told due at %v and overdue at %v; due at %v, overdue at %v", name, d.at, o.at, dueAt, dueAt.Add(overdueAfter))
		}
	}
	// The operator sees it on both instances: one obligation due and
	// overdue, each alert raised once; and no line of the SDK's for each
	// notification the watches were sent is in the serve logs.
	for _, pt := range []*demo.Party{buyer, supplier} {
		m := checkOps(t, pt)
		m.want(t, "party_obligations_due", nil, 1)
		m.want(t, "party_obligations_overdue", nil, 1)
		m.want(t, "party_deadline_alerts_total", map[string]string{"kind": "obligation.due"}, 1)
		m.want(t, "party_deadline_alerts_total", map[string]string{"kind": "obligation.overdue"}, 1)
		quietLog(t, pt, "resource updated notification sent")
	}
	// Once each, durably: not again while both serve on (two more rounds
	// of deadlines.Run), nor after the buyer's instance restarts.
	once := func() bool {
		for _, h := range hooks {
			if len(h.of("obligation.due", obl)) != 1 || len(h.of("obligation.overdue", obl)) != 1 || len(h.refusals()) != 0 {
				return false
			}
		}
		return true
	}
	stays(t, "each principal was told once of each", 2500*time.Millisecond, once)
	p.ba.Close()
	p.bp.stop(syscall.SIGTERM)
	p.bp = serve(t, buyer.Dir)
	p.ba = p.connect(buyer)
	// After the restart the engine looks again at once (deadlines.Run
	// starts with a round, then every two seconds): nothing is told again.
	stays(t, "each principal was told once of each after the buyer restarted", 3*time.Second, once)
	state, tm := timing(p.view(p.ba))
	if state != "due" || tm["overdue"] != true {
		t.Fatalf("after the restart the buyer reads the obligation as %s %v", state, tm)
	}
	// Nothing was appended for it: the record is formation and the
	// obligation's activation.
	records(t, buyer, supplier, txn, 3)
}

// TestRevokedMandateRefusedAtOnce: the supplier's agent has just acted
// under its mandate (its instance resolved the mandate's status, active);
// its principal revokes the mandate with `party mandate revoke`, and the
// agent's very next act, with no wait, is refused with
// A202-MANDATE-INACTIVE: nothing is recorded or sent on either side.
func TestRevokedMandateRefusedAtOnce(t *testing.T) {
	t.Parallel()
	buyer, supplier := setup(t)
	txn := buyer.TransactionID
	buyer.MandateID = issueMandate(t, buyer, supplier.Org)
	supplier.MandateID = issueMandate(t, supplier, buyer.Org)
	p := serveBoth(t, buyer, supplier)
	p.form()
	obl := objectOf(p.call(p.ba, "issue_obligation", map[string]any{"mandate_id": buyer.MandateID, "transaction_id": txn}), "obligation")
	assert := map[string]any{"mandate_id": supplier.MandateID, "obligation_id": obl,
		"evidence": []any{map[string]any{"evidence_type": "third_party_certificate",
			"claim":         "Calibration certificates issued for 20 transmitters under ISO/IEC 17025:2017",
			"artifact_hash": strings.Repeat("ab", 32)}}}
	// What each side holds, read through its agent: the events, the
	// objects, the messages waiting, the transactions.
	holding := func() string {
		var s []string
		for _, a := range []*demo.Agent{p.ba, p.sa} {
			v := p.view(a)
			list := p.call(a, "list_transactions", map[string]any{})
			b, _ := json.Marshal([]any{v["state"], v["events"], v["objects"], v["obligations"], v["waiting"], v["pending"], v["notice"], list["transactions"]})
			s = append(s, string(b))
		}
		return strings.Join(s, "\n")
	}
	before := holding()

	party(t, "mandate", "revoke", "--dir", supplier.Dir, "--reason", "the agent is withdrawn", supplier.MandateID)
	out, err := p.sa.Call(p.ctx, "assert_performance", assert)
	if err == nil || out["outcome"] != "refused" || !hasCode(out["reason_codes"], "A202-MANDATE-INACTIVE") {
		t.Fatalf("the first act after the revocation: %v %v, want refused with A202-MANDATE-INACTIVE", out, err)
	}
	if after := holding(); after != before {
		t.Fatalf("the refused act changed what the two sides hold:\nbefore %s\nafter  %s", before, after)
	}
	records(t, buyer, supplier, txn, 3)
}
