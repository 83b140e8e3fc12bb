package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/reason"
)

// A record built by hand: the buyer (northstar) issued the supplier's
// (delta's) duty to calibrate 8 units for 3200.00 EUR.
const (
	buyer    = "org_northstar"
	supplier = "org_delta"
	txnID    = "txn_000000000000000000000001"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

type rec struct {
	objs   []map[string]any
	events []map[string]any
	n      int
	clock  time.Time
}

func newRec() *rec { return &rec{clock: t0} }

func (r *rec) tick() time.Time { r.clock = r.clock.Add(time.Second); return r.clock }

func (r *rec) obj(typ, id, org string, payload map[string]any) map[string]any {
	r.n++
	o := map[string]any{
		"id": id, "object_type": typ, "transaction_id": txnID, "created_at": r.tick().Format(time.RFC3339),
		"created_by": map[string]any{"organization_id": org}, "content_hash": fmt.Sprintf("%064x", r.n), "payload": payload,
	}
	r.objs = append(r.objs, o)
	return o
}

func (r *rec) event(kind, org string, data map[string]any) map[string]any {
	r.n++
	e := map[string]any{
		"id": fmt.Sprintf("evt_%024d", r.n), "object_type": "transaction_event", "transaction_id": txnID,
		"created_at": r.tick().Format(time.RFC3339), "created_by": map[string]any{"organization_id": org}, "content_hash": fmt.Sprintf("%064x", r.n),
		"payload": map[string]any{"sequence": json.Number(fmt.Sprint(len(r.events) + 1)), "event_type": kind, "occurred_at": r.clock.Format(time.RFC3339), "data": data},
	}
	r.events = append(r.events, e)
	return e
}

func mon(cur, amt string) map[string]any { return map[string]any{"currency": cur, "amount": amt} }

func party(org string) map[string]any {
	return map[string]any{"organization_id": org, "agent_id": "agt_" + org[4:]}
}

func (r *rec) agreement() {
	r.obj("agreement", "agr_1", buyer, map[string]any{"buyer": party(buyer), "supplier": party(supplier),
		"terms": map[string]any{"core": map[string]any{"quantity": "8", "unit_code": "C62", "total": mon("EUR", "3200.00")}}})
}

func (r *rec) obligation(id, qty string, cons any, obligor, obligee, path string) map[string]any {
	return r.obj("obligation", id, obligee, map[string]any{"agreement_id": "agr_1", "obligor": party(obligor), "obligee": party(obligee),
		"subject": map[string]any{"agreement_id": "agr_1", "term_path": path}, "quantity": qty, "unit_code": "C62", "consideration": cons, "state": "pending"})
}

func (r *rec) accept(id, obl, qty, remainder string) map[string]any {
	p := map[string]any{"obligation_id": obl, "response_type": "accept", "accepted_quantity": qty}
	if remainder != "" {
		p["remainder_obligation_id"] = remainder
	}
	o := r.obj("obligation_response", id, buyer, p)
	r.event("acceptance.granted", buyer, map[string]any{"obligation_id": obl, "obligation_response_id": id})
	return o
}

func (r *rec) instruct(id, obl, amount, key string) {
	r.obj("settlement_instruction", id, buyer, map[string]any{"obligation_id": obl, "agreement_id": "agr_1", "amount": mon("EUR", amount),
		"payer_organization_id": buyer, "payee_organization_id": supplier, "idempotency_key": key, "rail": "rail_test_sandbox"})
	r.event("settlement.instructed", buyer, map[string]any{"settlement_instruction_id": id, "obligation_id": obl})
}

func (r *rec) receipt(id, stl, key string, attempt int, status, code string) {
	var c any
	if code != "" {
		c = code
	}
	r.obj("adapter_receipt", id, buyer, map[string]any{"settlement_instruction_id": stl, "idempotency_key": key, "attempt": json.Number(fmt.Sprint(attempt)),
		"status": status, "error_code": c})
}

func (r *rec) record() Record { return Record{TransactionID: txnID, Objects: r.objs, Events: r.events} }

// accepted8 is the record up to the acceptance of all 8 units.
func accepted8() *rec {
	r := newRec()
	r.agreement()
	r.obligation("obl_1", "8", mon("EUR", "3200.00"), supplier, buyer, "$.terms.core.quantity")
	r.event("obligation.activated", buyer, map[string]any{"obligation_id": "obl_1"})
	r.accept("obr_1", "obl_1", "8", "")
	return r
}

func want(t *testing.T, b *Balance, status, owed, paid, inFlight, outstanding string, settled bool) {
	t.Helper()
	if b == nil {
		t.Fatal("no balance")
	}
	if b.Status != status || b.Owed.Amount != owed || b.Paid.Amount != paid || b.InFlight.Amount != inFlight || b.Outstanding.Amount != outstanding || b.Settled != settled {
		t.Fatalf("balance %+v; want %s owed %s paid %s in flight %s outstanding %s settled %v", b, status, owed, paid, inFlight, outstanding, settled)
	}
}

func code(t *testing.T, f *Finding, c reason.Code) {
	t.Helper()
	if f == nil || f.Code != c {
		t.Fatalf("finding %+v, want %s", f, c)
	}
}

func TestPaidInFull(t *testing.T) {
	t.Parallel()
	r := accepted8()
	l := Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "0.00", "3200.00", false)
	code(t, l.Completable("evt_x"), reason.StateTransitionDenied)
	if _, h, ok := l.AcceptingAct("obl_1"); !ok || h != r.objs[2]["content_hash"] {
		t.Fatalf("accepting act hash %s", h)
	}
	r.instruct("stl_1", "obl_1", "3200.00", "key-00000001")
	l = Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "3200.00", "0.00", false)
	code(t, l.Completable("evt_x"), reason.StateTransitionDenied) // in flight
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "succeeded", "")
	l = Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "3200.00", "0.00", "0.00", true)
	if f := l.Completable("evt_x"); f != nil {
		t.Fatal(f)
	}
	// Paying again, under any key, is refused: nothing is outstanding.
	code(t, l.Instructable("stl_2", "obl_1", Money{"EUR", "0.01"}, buyer, supplier), reason.SettlementTriggerAbsent)
}

func TestTokenPaymentDoesNotComplete(t *testing.T) {
	t.Parallel()
	r := accepted8()
	r.instruct("stl_1", "obl_1", "0.01", "key-00000001")
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "succeeded", "")
	l := Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "0.01", "0.00", "3199.99", false)
	f := l.Completable("evt_c")
	code(t, f, reason.StateTransitionDenied)
	if !strings.Contains(f.Detail, "owed 3200.00 EUR and was paid 0.01") {
		t.Fatal(f.Detail)
	}
	// The completion appended anyway is what Audit finds.
	r.event("transaction.completed", buyer, map[string]any{"agreement_id": "agr_1"})
	fs := Audit(r.record())
	if len(fs) != 1 || fs[0].Rule != "completion_paid" || fs[0].Subject != r.events[len(r.events)-1]["id"] {
		t.Fatalf("findings %+v", fs)
	}
}

func TestInstalmentsAndOverpayment(t *testing.T) {
	t.Parallel()
	r := accepted8()
	for i, a := range []string{"1000.00", "1000.00", "1200.00"} {
		l := Compute(r.record())
		if f := l.Instructable("stl_new", "obl_1", Money{"EUR", a}, buyer, supplier); f != nil {
			t.Fatalf("instalment %d: %v", i, f)
		}
		id, key := fmt.Sprintf("stl_%d", i), fmt.Sprintf("key-0000000%d", i)
		r.instruct(id, "obl_1", a, key)
		// While in flight, the rest is all that is outstanding.
		l = Compute(r.record())
		code(t, l.Instructable("stl_new", "obl_1", Money{"EUR", "2200.01"}, buyer, supplier), reason.SettlementTriggerAbsent)
		r.receipt(fmt.Sprintf("adp_%d", i), id, key, 1, "succeeded", "")
	}
	l := Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "3200.00", "0.00", "0.00", true)
	// A fourth instruction recorded anyway is the one Audit names.
	r.instruct("stl_9", "obl_1", "1.00", "key-00000009")
	fs := Audit(r.record())
	if len(fs) != 1 || fs[0].Subject != "stl_9" || fs[0].Code != reason.SettlementTriggerAbsent {
		t.Fatalf("findings %+v", fs)
	}
	// Wrong currency, nothing, the wrong direction.
	r2 := accepted8()
	l = Compute(r2.record())
	code(t, l.Instructable("s", "obl_1", Money{"USD", "1.00"}, buyer, supplier), reason.TermsInvalid)
	code(t, l.Instructable("s", "obl_1", Money{"EUR", "0"}, buyer, supplier), reason.TermsInvalid)
	code(t, l.Instructable("s", "obl_1", Money{"EUR", "1.00"}, supplier, buyer), reason.SettlementCustodyRefused)
	code(t, l.Instructable("s", "obl_404", Money{"EUR", "1.00"}, buyer, supplier), reason.SettlementTriggerAbsent)
}

func TestFailedFreesReversedReopens(t *testing.T) {
	t.Parallel()
	r := accepted8()
	r.instruct("stl_1", "obl_1", "3200.00", "key-00000001")
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "failed", "insufficient_funds")
	l := Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "0.00", "3200.00", false)
	if l.Balance("obl_1").Failed.Amount != "3200.00" {
		t.Fatal(l.Balance("obl_1").Failed)
	}
	r.instruct("stl_2", "obl_1", "3200.00", "key-00000002")
	r.receipt("adp_2", "stl_2", "key-00000002", 1, "succeeded", "")
	// A later failed receipt that is no reversal contradicts the success:
	// kept, listed, changes nothing.
	r.receipt("adp_3", "stl_2", "key-00000002", 2, "failed", "timeout")
	l = Compute(r.record())
	b := l.Balance("obl_1")
	want(t, b, StatusAccepted, "3200.00", "3200.00", "0.00", "0.00", true)
	if in := b.Instructions[1]; in.Status != InstrSucceeded || !slices.Equal(in.Contradicting, []string{"adp_3"}) {
		t.Fatalf("instruction %+v", in)
	}
	// A reversal, reported as one, reopens what it paid.
	r.receipt("adp_4", "stl_2", "key-00000002", 3, "failed", ReversedCode)
	l = Compute(r.record())
	b = l.Balance("obl_1")
	want(t, b, StatusAccepted, "3200.00", "0.00", "0.00", "3200.00", false)
	if b.Instructions[1].Status != InstrReversed || b.Reversed.Amount != "3200.00" {
		t.Fatalf("after the reversal %+v", b)
	}
}

func TestPartialAcceptanceShare(t *testing.T) {
	t.Parallel()
	r := newRec()
	r.agreement()
	obl := r.obligation("obl_1", "8", mon("EUR", "3200.00"), supplier, buyer, "$.terms.core.quantity")
	r.event("obligation.activated", buyer, map[string]any{"obligation_id": "obl_1"})
	cons, err := RemainderConsideration(obl, "6")
	if err != nil || cons["amount"] != "800.00" {
		t.Fatalf("remainder consideration %v %v", cons, err)
	}
	rem := r.obligation("obl_2", "2", cons, supplier, buyer, "$.terms.core.quantity")
	resp := r.accept("obr_1", "obl_1", "6", "obl_2")
	l := Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "2400.00", "0.00", "0.00", "2400.00", false)
	want(t, l.Balance("obl_2"), StatusOpen, "0.00", "0.00", "0.00", "0.00", false)
	if l.Balance("obl_2").RemainderOf != "obl_1" || l.Balance("obl_2").Consideration.Amount != "800.00" {
		t.Fatalf("remainder %+v", l.Balance("obl_2"))
	}
	if f := RemainderShare(obl, resp, rem); f != nil {
		t.Fatal(f)
	}
	// No consideration (the payee loses the rest), or the whole again (the
	// payer owes it twice), is refused.
	for _, c := range []any{nil, mon("EUR", "3200.00"), mon("USD", "800.00")} {
		bad := map[string]any{"id": "obl_2", "payload": map[string]any{"consideration": c}}
		code(t, RemainderShare(obl, resp, bad), reason.ObligationTermsMutated)
	}
	if Audit(r.record()) == nil || len(Audit(r.record())) != 0 {
		t.Fatalf("findings %+v", Audit(r.record()))
	}
	// Completion waits for the remainder: accepted and paid, or waived.
	r.instruct("stl_1", "obl_1", "2400.00", "key-00000001")
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "succeeded", "")
	code(t, Compute(r.record()).Completable("c"), reason.StateTransitionDenied)
	r.obj("obligation_response", "obr_w", buyer, map[string]any{"obligation_id": "obl_2", "response_type": "waive"})
	l = Compute(r.record())
	want(t, l.Balance("obl_2"), StatusWaived, "0.00", "0.00", "0.00", "0.00", true)
	if f := l.Completable("c"); f != nil {
		t.Fatal(f)
	}
}

func TestRounding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ cur, total, qty, acc, share, rest string }{
		{"EUR", "100.00", "3", "1", "33.33", "66.67"},
		{"EUR", "100.00", "3", "2", "66.67", "33.33"},
		{"JPY", "1000", "3", "1", "333", "667"},
		{"KWD", "10.000", "3", "1", "3.333", "6.667"},
		{"XAU", "1.5", "4", "1", "0.4", "1.1"}, // no minor unit: the digits written
		{"EUR", "10", "4", "1", "2.50", "7.50"},
	} {
		obl := map[string]any{"id": "obl_1", "payload": map[string]any{"quantity": c.qty, "consideration": mon(c.cur, c.total)}}
		s, _, err := Share(obl, c.acc)
		rest, err2 := RemainderConsideration(obl, c.acc)
		if err != nil || err2 != nil || s.Amount != c.share || rest["amount"] != c.rest {
			t.Errorf("%s %s of %s×%s: share %s rest %v (%v %v), want %s and %s", c.cur, c.acc, c.qty, c.total, s.Amount, rest["amount"], err, err2, c.share, c.rest)
		}
	}
}

func TestRolesAndQuantities(t *testing.T) {
	t.Parallel()
	r := newRec()
	r.agreement()
	agr := r.objs[0]
	good := r.obligation("obl_1", "8", mon("EUR", "3200.00"), supplier, buyer, "$.terms.core.quantity")
	if f := Roles(good, agr); f != nil {
		t.Fatal(f)
	}
	// The buyer as obligor of the service: who owes whom inverted.
	code(t, Roles(r.obligation("obl_2", "8", mon("EUR", "3200.00"), buyer, supplier, "$.terms.core.quantity"), agr), reason.ObligationSubjectUnreferenced)
	// The buyer's duty to pay is the buyer's, with no consideration of its own.
	if f := Roles(r.obligation("obl_3", "1", nil, buyer, supplier, "$.terms.core.total"), agr); f != nil {
		t.Fatal(f)
	}
	code(t, Roles(r.obligation("obl_4", "1", mon("EUR", "1.00"), buyer, supplier, "$.terms.core.total"), agr), reason.ObligationTermsMutated)
	code(t, Roles(r.obligation("obl_5", "1", nil, supplier, buyer, "$.terms.core.total.amount"), agr), reason.ObligationSubjectUnreferenced)
	prf := map[string]any{"id": "prf_1", "payload": map[string]any{"asserted_quantity": "25", "unit_code": "C62"}}
	code(t, AssertionWithin(good, prf), reason.ObligationTermsMutated)
	prf["payload"].(map[string]any)["asserted_quantity"] = "8"
	if f := AssertionWithin(good, prf); f != nil {
		t.Fatal(f)
	}
	prf["payload"].(map[string]any)["unit_code"] = "KGM"
	code(t, AssertionWithin(good, prf), reason.ObligationTermsMutated)
	resp := map[string]any{"id": "obr_1", "payload": map[string]any{"accepted_quantity": "9"}}
	code(t, AcceptanceWithin(good, resp), reason.ObligationTermsMutated)
}

func TestDeterminationAccepts(t *testing.T) {
	t.Parallel()
	r := newRec()
	r.agreement()
	r.obligation("obl_1", "8", mon("EUR", "3200.00"), supplier, buyer, "$.terms.core.quantity")
	r.event("obligation.activated", buyer, map[string]any{"obligation_id": "obl_1"})
	r.obj("performance_event", "prf_1", supplier, map[string]any{"obligation_id": "obl_1", "asserted_quantity": "8", "unit_code": "C62"})
	r.obj("obligation_response", "obr_1", buyer, map[string]any{"obligation_id": "obl_1", "response_type": "reject", "reason_code": "evidence_insufficient"})
	det := map[string]any{"dispute_id": "dsp_1", "effect": "binding", "supersedes": nil,
		"outcome": map[string]any{"state_result": map[string]any{"subject_id": "obl_1", "state": "accepted"}}}
	d := r.obj("determination", "det_1", buyer, det)
	l := Compute(r.record())
	want(t, l.Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "0.00", "3200.00", false)
	if id, h, _ := l.AcceptingAct("obl_1"); id != "det_1" || h != d["content_hash"] {
		t.Fatalf("accepting act %s %s", id, h)
	}
	// Superseded, or not binding, it accepts nothing.
	r.obj("determination", "det_2", buyer, map[string]any{"dispute_id": "dsp_1", "effect": "binding",
		"supersedes": map[string]any{"determination_id": "det_1"}, "outcome": map[string]any{"state_result": nil}})
	want(t, Compute(r.record()).Balance("obl_1"), StatusOpen, "0.00", "0.00", "0.00", "0.00", false)
}

func TestAdjustment(t *testing.T) {
	t.Parallel()
	r := accepted8()
	r.instruct("stl_1", "obl_1", "3000.00", "key-00000001")
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "succeeded", "")
	l := ComputeAt(r.record(), r.tick())
	rec, h, f := l.AdjustmentRecord("obl_1")
	if f != nil {
		t.Fatal(f)
	}
	if fg := rec["forgone"].(map[string]any); fg["amount"] != "200.00" || fmt.Sprint(rec["settlement_instruction_ids"]) != "[stl_1]" {
		t.Fatalf("record %v", rec)
	}
	sign := func(id, org, hash string) {
		r.obj("evidence", id, org, map[string]any{"evidence_type": "signed_document", "claim": AdjustmentClaim, "artifact_hash": hash,
			"issuer": map[string]any{"organization_id": org}})
	}
	sign("evd_1", supplier, h)
	// One signature is a proposal, not an adjustment.
	want(t, Compute(r.record()).Balance("obl_1"), StatusAccepted, "3200.00", "3000.00", "0.00", "200.00", false)
	sign("evd_2", buyer, h)
	l = Compute(r.record())
	b := l.Balance("obl_1")
	want(t, b, StatusAccepted, "3200.00", "3000.00", "0.00", "0.00", true)
	if b.Forgone.Amount != "200.00" || !slices.Equal(b.Adjustments, []string{h}) {
		t.Fatalf("balance %+v", b)
	}
	if f := l.Completable("c"); f != nil {
		t.Fatal(f)
	}
	if _, _, f := l.AdjustmentRecord("obl_1"); f == nil {
		t.Fatal("a second adjustment was drawn")
	}
	// A signature over a record the ledger never draws is a finding.
	sign("evd_3", buyer, strings.Repeat("ab", 32))
	fs := Audit(r.record())
	if len(fs) != 1 || fs[0].Subject != "evd_3" || fs[0].Code != reason.EvidenceHashMismatch {
		t.Fatalf("findings %+v", fs)
	}
	// The payment it counted reversed: the adjustment still forgives 200.00
	// and no more; the 3000.00 is outstanding again.
	r.receipt("adp_2", "stl_1", "key-00000001", 2, "failed", ReversedCode)
	want(t, Compute(r.record()).Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "0.00", "3000.00", false)
}

func TestReceiptRules(t *testing.T) {
	t.Parallel()
	r := accepted8()
	r.instruct("stl_1", "obl_1", "3200.00", "key-00000001")
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "succeeded", "")
	r.event("transaction.completed", supplier, map[string]any{"agreement_id": "agr_1"})
	r.receipt("adp_2", "stl_1", "key-00000001", 2, "failed", ReversedCode)
	r.receipt("adp_3", "stl_1", "key-other-key", 3, "succeeded", "")
	r.receipt("adp_4", "stl_404", "key-00000001", 1, "succeeded", "")
	var got []string
	for _, f := range Audit(r.record()) {
		got = append(got, f.Rule+":"+f.Subject)
	}
	if want := []string{"receipt_recorded:adp_2", "receipt_recorded:adp_3", "receipt_recorded:adp_4"}; !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
}

func TestInFlightCountsTheCallersOwn(t *testing.T) {
	t.Parallel()
	r := accepted8()
	r.obj("settlement_instruction", "stl_p", buyer, map[string]any{"obligation_id": "obl_1", "amount": mon("EUR", "3200.00"),
		"payer_organization_id": buyer, "payee_organization_id": supplier, "idempotency_key": "key-pending1"})
	rc := r.record()
	want(t, Compute(rc).Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "0.00", "3200.00", false)
	rc.InFlight = []string{"stl_p"}
	want(t, Compute(rc).Balance("obl_1"), StatusAccepted, "3200.00", "0.00", "3200.00", "0.00", false)
}
