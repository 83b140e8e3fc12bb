package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
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

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/rails"
)

// Money through the processes a user runs: two `party serve` instances,
// the buyer paying on a webhook rail into its own payment system (run by
// the test, over TLS under a private CA given by ca_file), both agents
// driven over MCP. The payment system counts, per idempotency key, how
// often money moved, so "paid once" is read where the money is, not from
// either record.

const bankRail = "rail_test_bank"

// moneyActs are the acts the flows need, on both mandates.
var moneyActs = []string{"offer.submit", "offer.accept", "agreement.sign", "obligation.activated", "performance.declared",
	"acceptance.granted", "acceptance.rejected", "settlement.instruct", "transaction.complete", "obligation.waive",
	"dispute.raise", "determination.issue", "exception.open", "exception.resolve"}

// payment is what the payment system holds under one idempotency key.
type payment struct {
	instruction string // what the key names: instruction, obligation, money, parties
	amount      string
	submissions int // POSTs under the key
	moved       int // times money moved under the key
	answer      []byte
}

// hold makes the payment system hold the next new payment once its money
// moved, before answering, until released.
type hold struct {
	reached  chan string   // the key, once held
	release  func()        // lets the answer go
	released chan struct{} // closed by release
	answered chan struct{} // closed once the answer is written and flushed
}

// paySystem is an organisation's payment system behind its webhook rail,
// honouring the contract of internal/rails/webhook.go.
type paySystem struct {
	secret []byte
	srv    *httptest.Server

	mu       sync.Mutex
	payments map[string]*payment
	refused  []string // requests it refused, and why: none expected
	next     *hold
	seq      int
}

func newPaySystem(t *testing.T) *paySystem {
	t.Helper()
	ps := &paySystem{secret: []byte(rand.Text()), payments: map[string]*payment{}}
	ps.srv = httptest.NewTLSServer(ps)
	t.Cleanup(ps.srv.Close)
	return ps
}

func (ps *paySystem) refuse(w http.ResponseWriter, status int, why string) {
	ps.mu.Lock()
	ps.refused = append(ps.refused, why)
	ps.mu.Unlock()
	http.Error(w, why, status)
}

func (ps *paySystem) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		ps.refuse(w, http.StatusBadRequest, "unreadable body")
		return
	}
	ts := r.Header.Get("X-Party-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		ps.refuse(w, http.StatusUnauthorized, "timestamp "+ts)
		return
	}
	if !hmac.Equal([]byte(r.Header.Get("X-Party-Signature")), []byte(rails.Sign(ps.secret, ts, body))) {
		ps.refuse(w, http.StatusUnauthorized, "bad signature")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if r.Method == http.MethodGet {
		ps.mu.Lock()
		p := ps.payments[key]
		ps.mu.Unlock()
		if p == nil || r.URL.Path != "/pay/"+key {
			ps.refuse(w, http.StatusNotFound, "status of unknown key "+key)
			return
		}
		w.Write(p.answer)
		return
	}
	var req struct {
		Version        string            `json:"a202_settlement"`
		InstructionID  string            `json:"settlement_instruction_id"`
		IdempotencyKey string            `json:"idempotency_key"`
		TransactionID  string            `json:"transaction_id"`
		ObligationID   string            `json:"obligation_id"`
		Amount         map[string]string `json:"amount"`
		Payer          string            `json:"payer_organization_id"`
		Payee          string            `json:"payee_organization_id"`
		Attempt        int               `json:"attempt"`
		Instruction    []byte            `json:"instruction"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if r.Method != http.MethodPost || r.URL.Path != "/pay" || dec.Decode(&req) != nil || req.Version != "0.1" || req.IdempotencyKey != key || req.Attempt < 1 {
		ps.refuse(w, http.StatusBadRequest, "not the contract's request")
		return
	}
	// The signed instruction itself must say what the request says.
	stl, err := canonical.DecodeObject(req.Instruction)
	if err != nil {
		ps.refuse(w, http.StatusBadRequest, "instruction unreadable")
		return
	}
	sp, _ := stl["payload"].(map[string]any)
	sa, _ := sp["amount"].(map[string]any)
	if stl["id"] != req.InstructionID || sp["idempotency_key"] != key || sp["obligation_id"] != req.ObligationID || sp["rail"] != bankRail ||
		sa["currency"] != req.Amount["currency"] || sa["amount"] != req.Amount["amount"] || sp["payer_organization_id"] != req.Payer ||
		sp["payee_organization_id"] != req.Payee {
		ps.refuse(w, http.StatusBadRequest, "the request is not its signed instruction")
		return
	}
	what := strings.Join([]string{req.InstructionID, req.ObligationID, req.Amount["currency"], req.Amount["amount"], req.Payer, req.Payee}, "|")
	ps.mu.Lock()
	p := ps.payments[key]
	if p != nil && p.instruction != what {
		ps.mu.Unlock()
		ps.refuse(w, http.StatusConflict, "key "+key+" reused for another instruction")
		return
	}
	var h *hold
	if p == nil {
		// A new key: the money moves now, once, before any answer.
		ps.seq++
		ans, _ := json.Marshal(map[string]any{"status": "succeeded", "external_reference": fmt.Sprintf("bank-%04d", ps.seq), "error_code": nil})
		p = &payment{instruction: what, amount: req.Amount["amount"], moved: 1, answer: ans}
		ps.payments[key] = p
		h, ps.next = ps.next, nil
	}
	p.submissions++
	answer := p.answer
	ps.mu.Unlock()
	if h != nil {
		h.reached <- key
		select {
		case <-h.released:
		case <-r.Context().Done():
			return // the caller went away without an answer
		}
	}
	// Content-Length: the whole answer is on the wire once flushed.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.Write(answer)
	w.(http.Flusher).Flush()
	if h != nil {
		close(h.answered)
	}
}

// holdNext arms a hold for the next new payment.
func (ps *paySystem) holdNext(t *testing.T) *hold {
	h := &hold{reached: make(chan string, 1), released: make(chan struct{}), answered: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.released) })
	t.Cleanup(h.release)
	ps.mu.Lock()
	ps.next = h
	ps.mu.Unlock()
	return h
}

// ledger returns a copy of the payments by key, and the refusals.
func (ps *paySystem) ledger() (map[string]payment, []string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := map[string]payment{}
	for k, p := range ps.payments {
		out[k] = *p
	}
	return out, slices.Clone(ps.refused)
}

// movedOnce checks that money moved under exactly the keys named, once
// each, for the amounts named, and that nothing was refused.
func (ps *paySystem) movedOnce(t *testing.T, want map[string]string) map[string]payment {
	t.Helper()
	got, refused := ps.ledger()
	if len(refused) > 0 {
		t.Errorf("the payment system refused requests: %v", refused)
	}
	if len(got) != len(want) {
		t.Errorf("money moved under keys %v, want exactly %v", keysOf(got), want)
	}
	for k, amount := range want {
		p, ok := got[k]
		if !ok || p.moved != 1 || p.amount != amount {
			t.Errorf("key %s: moved %d times, %s; want once, %s", k, p.moved, p.amount, amount)
		}
	}
	return got
}

func keysOf(m map[string]payment) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// moneyFlow is one pair of serving instances (served), one transaction,
// one payment system.
type moneyFlow struct {
	*served
	bank, payeeBank *paySystem
	txn, obl        string
}

// newMoneyFlow inits both organisations with the CLI (setup), has each
// configure edit them, gives each a webhook rail into a payment system of
// its own, issues both mandates for moneyActs, starts both `party serve`
// and connects both agents.
func newMoneyFlow(t *testing.T, configure ...func(buyer, supplier *demo.Party)) *moneyFlow {
	t.Helper()
	buyer, supplier := setup(t)
	for _, c := range configure {
		c(buyer, supplier)
	}
	bank := newPaySystem(t)
	offerRail(t, buyer, bank)
	// The payee's instance countersigns an instruction only on a rail its
	// own config.json names (gate.RegisterRails): it names the same rail,
	// into its own payment system, which must never be asked to pay.
	payeeBank := newPaySystem(t)
	offerRail(t, supplier, payeeBank)
	buyer.MandateID = issueMandate(t, buyer, supplier.Org)
	supplier.MandateID = issueMandate(t, supplier, buyer.Org)
	return &moneyFlow{served: serveBoth(t, buyer, supplier), bank: bank, payeeBank: payeeBank, txn: buyer.TransactionID}
}

// offerRail makes p's instance offer bankRail, a webhook into ps. The
// rail's secret and ps's CA live in p's state directory, named relative
// to it as an operator would.
func offerRail(t *testing.T, p *demo.Party, ps *paySystem) {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ps.srv.Certificate().Raw})
	for name, data := range map[string][]byte{"rails/bank.secret": ps.secret, "rails/bank-ca.pem": ca} {
		path := filepath.Join(p.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	editConfig(t, p.Dir, func(c map[string]any) {
		c["rails"] = []any{map[string]any{"id": bankRail, "kind": "webhook", "url": ps.srv.URL + "/pay",
			"secret_file": "rails/bank.secret", "ca_file": "rails/bank-ca.pem", "timeout_seconds": 10}}
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// editConfig rewrites dir's config.json, before serve reads it.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, instance.ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	data, _ = json.MarshalIndent(c, "", "  ")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := instance.LoadConfig(dir); err != nil {
		t.Fatal(err)
	}
}

// issueMandate issues p's agent a mandate for moneyActs through the
// principal's CLI, scoped to the agreed transaction and the counterparty.
func issueMandate(t *testing.T, p *demo.Party, other string) string {
	t.Helper()
	now := time.Now().UTC()
	b, _ := json.Marshal(map[string]any{
		"valid_from": envelope.Timestamp(now.Add(-time.Minute)), "valid_until": envelope.Timestamp(now.Add(24 * time.Hour)),
		"actions":        moneyActs,
		"scope":          map[string]any{"transaction_ids": []any{p.TransactionID}, "counterparty_organization_ids": []any{other}},
		"spending_limit": map[string]any{"currency": "EUR", "amount": "4000.00"},
	})
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

// refused checks a tool call is refused with code.
func (f *moneyFlow) refused(what, code string, a *demo.Agent, tool string, args map[string]any) {
	f.t.Helper()
	out, err := a.Call(f.ctx, tool, args)
	if err == nil || out["outcome"] != "refused" || !slices.Contains(out["reason_codes"].([]any), any(code)) {
		f.t.Fatalf("%s: %v %v, want refused with %s", what, out, err, code)
	}
}

func objectOf(out map[string]any, role string) string {
	id, _ := out["objects"].(map[string]any)[role].(string)
	return id
}

// perform forms the transaction (3200.00 EUR for 20 units), issues the
// supplier's obligation and has it assert all 20: acceptance_pending.
func (f *moneyFlow) perform() {
	f.t.Helper()
	offer := f.offer(time.Now().UTC().Add(time.Hour))["offer_id"]
	if acc := f.call(f.ba, "accept_offer", map[string]any{"mandate_id": f.buyer.MandateID, "offer_id": offer}); acc["state"] != "committed" {
		f.t.Fatalf("accept_offer: %v", acc)
	}
	f.obl = objectOf(f.call(f.ba, "issue_obligation", map[string]any{"mandate_id": f.buyer.MandateID, "transaction_id": f.txn}), "obligation")
	as := f.call(f.sa, "assert_performance", map[string]any{"mandate_id": f.supplier.MandateID, "obligation_id": f.obl,
		"evidence": []any{map[string]any{"evidence_type": "third_party_certificate",
			"claim":         "Calibration certificates issued for 20 transmitters under ISO/IEC 17025:2017",
			"artifact_hash": canonical.SHA256Hex([]byte("calibration certificates, 20 transmitters " + f.txn))}}})
	if as["state"] != "acceptance_pending" {
		f.t.Fatalf("assert_performance: %v", as)
	}
}

// accept has the buyer accept the assertion (all of it, or qty).
func (f *moneyFlow) accept(qty string) map[string]any {
	f.t.Helper()
	args := map[string]any{"mandate_id": f.buyer.MandateID, "obligation_id": f.obl, "response_type": "accept"}
	if qty != "" {
		args["accepted_quantity"] = qty
	}
	out := f.call(f.ba, "respond_to_assertion", args)
	if out["state"] != "settlement_pending" {
		f.t.Fatalf("accept: %v", out)
	}
	return out
}

func (f *moneyFlow) payArgs(obl, key, amount string) map[string]any {
	args := map[string]any{"mandate_id": f.buyer.MandateID, "obligation_id": obl, "rail": bankRail}
	if key != "" {
		args["idempotency_key"] = key
	}
	if amount != "" {
		args["amount"] = map[string]any{"currency": "EUR", "amount": amount}
	}
	return args
}

func (f *moneyFlow) completeArgs() map[string]any {
	return map[string]any{"mandate_id": f.supplier.MandateID, "transaction_id": f.txn}
}

// complete has the supplier, the payee, close the transaction.
func (f *moneyFlow) complete() {
	f.t.Helper()
	if out := f.call(f.sa, "complete_transaction", f.completeArgs()); out["state"] != "completed" {
		f.t.Fatalf("complete_transaction: %v", out)
	}
}

// balance is obl's balance as a's instance reads it (settlement_status).
func (f *moneyFlow) balance(a *demo.Agent, obl string) map[string]any {
	f.t.Helper()
	for _, b := range f.call(a, "settlement_status", map[string]any{"transaction_id": f.txn})["obligations"].([]any) {
		if b := b.(map[string]any); b["obligation_id"] == obl {
			return b
		}
	}
	f.t.Fatalf("%s holds no balance of %s", a.Party.Name, obl)
	return nil
}

func amountOf(b map[string]any, member string) string {
	m, _ := b[member].(map[string]any)
	return fmt.Sprint(m["amount"])
}

// sameBalance checks both instances read obl's money alike.
func (f *moneyFlow) sameBalance(obl, owed, paid, inFlight, outstanding, settlement string) {
	f.t.Helper()
	for _, a := range []*demo.Agent{f.ba, f.sa} {
		b := f.balance(a, obl)
		got := []string{amountOf(b, "owed"), amountOf(b, "paid"), amountOf(b, "in_flight"), amountOf(b, "outstanding"), fmt.Sprint(b["settlement"])}
		if want := []string{owed, paid, inFlight, outstanding, settlement}; !slices.Equal(got, want) {
			f.t.Fatalf("%s reads %s as owed, paid, in flight, outstanding, settlement %v; want %v", a.Party.Name, obl, got, want)
		}
	}
}

// awaitSucceeded waits until both records hold a succeeded receipt of
// the instruction under key.
func (f *moneyFlow) awaitSucceeded(key string) {
	f.t.Helper()
	for _, a := range []*demo.Agent{f.ba, f.sa} {
		var last any
		eventually(f.t, a.Party.Name+" holds a succeeded receipt under "+key, func() bool {
			st, err := a.Call(f.ctx, "settlement_status", map[string]any{"transaction_id": f.txn})
			if err != nil {
				last = err
				return false
			}
			last = st["settlements"]
			for _, s := range st["settlements"].([]any) {
				s := s.(map[string]any)
				if s["idempotency_key"] != key || s["state"] != "succeeded" {
					continue
				}
				for _, r := range s["receipts"].([]any) {
					if r.(map[string]any)["status"] == "succeeded" {
						return true
					}
				}
			}
			return false
		}, func() any { return last })
	}
}

// verified exports both records with `party export`, verifies both
// bundles with `party verify --json`, and checks that no check failed, the
// ledger has no finding, every obligation is settled and the transaction
// completed, as a third party reads it; and that both databases hold the
// same countersigned events.
func (f *moneyFlow) verified() {
	f.t.Helper()
	if got, refused := f.payeeBank.ledger(); len(got) != 0 || len(refused) != 0 {
		f.t.Fatalf("the payee's payment system was asked to pay: %v %v", keysOf(got), refused)
	}
	view := f.call(f.ba, "get_transaction_record", map[string]any{"transaction_id": f.txn})
	records(f.t, f.buyer, f.supplier, f.txn, len(view["events"].([]any)))
	for _, p := range []*demo.Party{f.buyer, f.supplier} {
		out := filepath.Join(f.t.TempDir(), p.Name+"-bundle")
		party(f.t, "export", "--dir", p.Dir, "--transaction", f.txn, out)
		var rep struct {
			Results struct {
				Failed   int `json:"failed"`
				Verified int `json:"verified"`
			} `json:"results"`
			Raised []any `json:"raised"`
			Ledger struct {
				Transactions []struct {
					TransactionID string           `json:"transaction_id"`
					Obligations   []map[string]any `json:"obligations"`
					CompletedBy   string           `json:"completed_by"`
				} `json:"transactions"`
				Findings []any `json:"findings"`
			} `json:"ledger"`
		}
		if err := json.Unmarshal([]byte(party(f.t, "verify", "--json", out)), &rep); err != nil {
			f.t.Fatal(err)
		}
		if rep.Results.Failed != 0 || rep.Results.Verified == 0 || len(rep.Ledger.Findings) != 0 {
			f.t.Fatalf("%s's bundle: %d failed, %d verified, raised %v, ledger findings %v", p.Name, rep.Results.Failed, rep.Results.Verified,
				rep.Raised, rep.Ledger.Findings)
		}
		if len(rep.Ledger.Transactions) != 1 || rep.Ledger.Transactions[0].TransactionID != f.txn || rep.Ledger.Transactions[0].CompletedBy == "" {
			f.t.Fatalf("%s's bundle: the ledger reads %+v", p.Name, rep.Ledger.Transactions)
		}
		for _, b := range rep.Ledger.Transactions[0].Obligations {
			if b["settlement"] != "settled" {
				f.t.Fatalf("%s's bundle: obligation %v is %v", p.Name, b["obligation_id"], b["settlement"])
			}
		}
	}
}

// eventually polls cond until it holds, for up to 30 seconds; seen, when
// given, says what was last seen.
func eventually(t *testing.T, what string, cond func() bool, seen ...func() any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var last []any
			for _, f := range seen {
				last = append(last, f())
			}
			t.Fatalf("timed out waiting until %s; last seen %v", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMoneyInstalments: three instalments adding up to what is owed are
// paid, each reaching the payment system once; a payment past it, under
// a new key or none, is refused and never reaches the payment system;
// completion waits for the last instalment.
func TestMoneyInstalments(t *testing.T) {
	t.Parallel()
	f := newMoneyFlow(t)
	f.perform()
	f.accept("")
	f.sameBalance(f.obl, "3200.00", "0.00", "0.00", "3200.00", "unpaid")
	want := map[string]string{}
	var first, firstKey string
	for i, amount := range []string{"1000.00", "1000.00", "1200.00"} {
		if i == 2 {
			f.refused("completion after two of three instalments", "A202-STATE-TRANSITION-DENIED", f.sa, "complete_transaction", f.completeArgs())
		}
		key := fmt.Sprintf("instalment-%d-%s", i+1, f.txn)
		out := f.call(f.ba, "instruct_settlement", f.payArgs(f.obl, key, amount))
		if out["status"] != "recorded" {
			t.Fatalf("instalment %d: %v", i+1, out)
		}
		if i == 0 {
			first, firstKey = objectOf(out, "settlement_instruction"), key
		}
		want[key] = amount
		f.awaitSucceeded(key)
	}
	f.sameBalance(f.obl, "3200.00", "3200.00", "0.00", "0.00", "settled")
	for _, key := range []string{"one-cent-too-many-" + f.txn, ""} {
		f.refused("0.01 past what is owed, key "+key, "A202-SETTLEMENT-TRIGGER-ABSENT", f.ba, "instruct_settlement", f.payArgs(f.obl, key, "0.01"))
		f.refused("the default once nothing is outstanding, key "+key, "A202-SETTLEMENT-TRIGGER-ABSENT", f.ba, "instruct_settlement", f.payArgs(f.obl, key, ""))
	}
	// The first instalment's key again: its instruction, nothing paid
	// twice; with another amount, a conflict.
	if again := objectOf(f.call(f.ba, "instruct_settlement", f.payArgs(f.obl, firstKey, "1000.00")), "settlement_instruction"); again != first {
		t.Fatalf("the same key again named %s, not the first instruction %s", again, first)
	}
	f.refused("the first key for another amount", "A202-SETTLEMENT-IDEMPOTENCY-CONFLICT", f.ba, "instruct_settlement", f.payArgs(f.obl, firstKey, "1200.00"))
	for k, p := range f.bank.movedOnce(t, want) {
		if p.submissions != 1 {
			t.Errorf("key %s was submitted %d times", k, p.submissions)
		}
	}
	f.complete()
	f.verified()
}

// TestMoneyRacingSessionsPayOnce: two MCP sessions of the buyer's agent
// instruct payment of the whole obligation at the same moment, each under
// its own key: one pays, the other is refused, and money moves once.
func TestMoneyRacingSessionsPayOnce(t *testing.T) {
	t.Parallel()
	f := newMoneyFlow(t)
	f.perform()
	f.accept("")
	agents := []*demo.Agent{f.connect(f.buyer), f.connect(f.buyer)}
	type result struct {
		out map[string]any
		err error
	}
	results := make([]result, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out, err := a.Call(f.ctx, "instruct_settlement", f.payArgs(f.obl, fmt.Sprintf("racing-%d-%s", i, f.txn), ""))
			results[i] = result{out, err}
		}()
	}
	close(start)
	wg.Wait()
	var won []string
	for i, r := range results {
		switch {
		case r.err == nil:
			won = append(won, fmt.Sprintf("racing-%d-%s", i, f.txn))
		case r.out["outcome"] != "refused" || !slices.Contains(r.out["reason_codes"].([]any), any("A202-SETTLEMENT-TRIGGER-ABSENT")):
			t.Fatalf("session %d: %v %v", i, r.out, r.err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d sessions paid: %+v", len(won), results)
	}
	f.awaitSucceeded(won[0])
	f.bank.movedOnce(t, map[string]string{won[0]: "3200.00"})
	f.sameBalance(f.obl, "3200.00", "3200.00", "0.00", "0.00", "settled")
	f.complete()
	f.verified()
}

// TestMoneyBuyerKilledMidPayment: the buyer's `party serve` is killed
// (SIGKILL) in the window between the payment system moving the money and
// the buyer recording its answer: while the payment system holds the
// submission (no answer sent); once it answered, the buyer stopped
// (SIGSTOP) so that it cannot have read the answer; and as the answer
// lands (whether the receipt was recorded first is left to the race).
// Started again on the same directory, the buyer asks the payment system
// again, under the same key only; the payment reaches a succeeded receipt
// in both records, and money moved once.
func TestMoneyBuyerKilledMidPayment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// answer: the payment system answers before the kill; stop: the
		// buyer is stopped before it does; retried: the key must be
		// submitted again.
		answer, stop, retried bool
	}{
		{"held before answering", false, false, true},
		{"answered, not yet read", true, true, true},
		{"as the answer lands", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newMoneyFlow(t)
			f.perform()
			f.accept("")
			key := "pay-through-a-crash-" + f.txn
			h := f.bank.holdNext(t)
			done := make(chan error, 1)
			go func() {
				_, err := f.ba.Call(f.ctx, "instruct_settlement", f.payArgs(f.obl, key, ""))
				done <- err
			}()
			select {
			case got := <-h.reached:
				if got != key {
					t.Fatalf("the payment system held key %s, not %s", got, key)
				}
			case err := <-done:
				t.Fatalf("instruct_settlement returned before the payment system was reached: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the submission did not reach the payment system")
			}
			if c.stop {
				stopped(t, f.bp)
			}
			if c.answer {
				h.release()
				<-h.answered
			}
			f.bp.stop(syscall.SIGKILL)
			<-done // the session ended with its process, however far it got
			f.bp = serve(t, f.buyer.Dir)
			// The dead session is closed now, against the instance that
			// took its place (closing it against none, the MCP client
			// retries for five seconds); closing it again is a no-op.
			f.ba.Close()
			f.ba = f.connect(f.buyer)
			f.awaitSucceeded(key)
			got := f.bank.movedOnce(t, map[string]string{key: "3200.00"})
			if c.retried && got[key].submissions < 2 {
				t.Fatalf("the unanswered submission was never asked again: %d submissions", got[key].submissions)
			}
			t.Logf("%d submissions under %s, money moved %d times", got[key].submissions, key, got[key].moved)
			f.sameBalance(f.obl, "3200.00", "3200.00", "0.00", "0.00", "settled")
			f.complete()
			f.verified()
		})
	}
}

// stopped stops p (SIGSTOP) and waits until every thread of it is
// stopped, so that nothing it is sent afterwards is read.
func stopped(t *testing.T, p *proc) {
	t.Helper()
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the buyer is stopped", func() bool {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return false
		}
		for _, task := range tasks {
			data, err := os.ReadFile(task)
			// The state follows the parenthesised command name.
			i := strings.LastIndexByte(string(data), ')')
			if err != nil || i < 0 || !strings.HasPrefix(string(data[i:]), ") T") {
				return false
			}
		}
		return true
	})
}

// TestMoneyPartialAcceptance: 15 of 20 accepted; the default instruction
// pays the accepted share, 2400.00 of 3200.00; the remainder obligation
// keeps 800.00, and completion waits until the buyer waives it.
func TestMoneyPartialAcceptance(t *testing.T) {
	t.Parallel()
	f := newMoneyFlow(t)
	f.perform()
	rem := objectOf(f.accept("15"), "remainder_obligation")
	if rem == "" {
		t.Fatal("a partial acceptance issued no remainder obligation")
	}
	f.sameBalance(f.obl, "2400.00", "0.00", "0.00", "2400.00", "unpaid")
	for _, a := range []*demo.Agent{f.ba, f.sa} {
		if r := f.balance(a, rem); amountOf(r, "consideration") != "800.00" || r["remainder_of"] != f.obl {
			t.Fatalf("%s reads the remainder as %v", a.Party.Name, r)
		}
	}
	f.refused("the whole consideration on 15 of 20", "A202-SETTLEMENT-TRIGGER-ABSENT", f.ba, "instruct_settlement",
		f.payArgs(f.obl, "pay-whole-"+f.txn, "3200.00"))
	key := "pay-share-" + f.txn
	f.call(f.ba, "instruct_settlement", f.payArgs(f.obl, key, ""))
	f.awaitSucceeded(key)
	f.bank.movedOnce(t, map[string]string{key: "2400.00"})
	f.sameBalance(f.obl, "2400.00", "2400.00", "0.00", "0.00", "settled")
	f.refused("completion with the remainder owed", "A202-STATE-TRANSITION-DENIED", f.sa, "complete_transaction", f.completeArgs())
	f.call(f.ba, "waive_obligation", map[string]any{"mandate_id": f.buyer.MandateID, "obligation_id": rem})
	f.complete()
	f.verified()
}

// TestMoneyDisputedObligation: the buyer rejects the assertion; the
// supplier disputes the obligation's state (which opens an exception) and
// the rejection as an act; the buyer concedes: a binding determination of
// the act dispute with state_result accepted, a presumptive one of the
// state dispute; the supplier resolves the exception; the obligation,
// accepted by the determination, is paid in full, and the transaction
// completes.
func TestMoneyDisputedObligation(t *testing.T) {
	t.Parallel()
	f := newMoneyFlow(t)
	f.perform()
	if out := f.call(f.ba, "respond_to_assertion", map[string]any{"mandate_id": f.buyer.MandateID, "obligation_id": f.obl,
		"response_type": "reject", "reason_code": "quantity_short"}); out["state"] != "in_performance" {
		t.Fatalf("reject: %v", out)
	}
	var evidence []any
	for _, o := range f.call(f.sa, "get_transaction_record", map[string]any{"transaction_id": f.txn})["objects"].([]any) {
		if o := o.(map[string]any); o["object_type"] == "evidence" {
			evidence = append(evidence, o["id"])
		}
	}
	raise := func(subjectType string) map[string]any {
		return f.call(f.sa, "raise_dispute", map[string]any{"mandate_id": f.supplier.MandateID, "transaction_id": f.txn,
			"subject_type": subjectType, "subject_id": f.obl, "grounds": []any{"obligation_wrongly_rejected"}, "evidence_ids": evidence,
			"description": "All twenty transmitters were calibrated; the certificate shows it."})
	}
	state := raise("obligation_state")
	if state["state"] != "exception_open" {
		t.Fatalf("disputing the obligation's state: %v", state)
	}
	// The act dispute names the obligation: a binding state_result must
	// name the determined subject, and only an obligation is moved so.
	act := raise("act")
	f.refused("paying a rejected obligation", "A202-SETTLEMENT-TRIGGER-ABSENT", f.ba, "instruct_settlement", f.payArgs(f.obl, "pay-too-early-"+f.txn, ""))
	det := objectOf(f.call(f.ba, "issue_determination", map[string]any{"mandate_id": f.buyer.MandateID, "dispute_id": objectOf(act, "dispute"),
		"effect": "binding", "finding": "The duty was performed: the certificate covers all twenty.",
		"state_result": map[string]any{"subject_id": f.obl, "state": "accepted"}}), "determination")
	f.call(f.ba, "issue_determination", map[string]any{"mandate_id": f.buyer.MandateID, "dispute_id": objectOf(state, "dispute"),
		"effect": "presumptive", "finding": "Conceded: the obligation stands accepted by the binding determination of the rejection."})
	if out := f.call(f.sa, "resolve_exception", map[string]any{"mandate_id": f.supplier.MandateID, "transaction_id": f.txn}); out["state"] != "settlement_pending" {
		t.Fatalf("resolve_exception: %v", out)
	}
	f.sameBalance(f.obl, "3200.00", "0.00", "0.00", "3200.00", "unpaid")
	for _, a := range []*demo.Agent{f.ba, f.sa} {
		if b := f.balance(a, f.obl); b["accepted_by"] != det {
			t.Fatalf("%s reads %s as accepted by %v, not the determination %s", a.Party.Name, f.obl, b["accepted_by"], det)
		}
	}
	key := "pay-determined-" + f.txn
	f.call(f.ba, "instruct_settlement", f.payArgs(f.obl, key, ""))
	f.awaitSucceeded(key)
	f.bank.movedOnce(t, map[string]string{key: "3200.00"})
	f.sameBalance(f.obl, "3200.00", "3200.00", "0.00", "0.00", "settled")
	f.complete()
	f.verified()
}
