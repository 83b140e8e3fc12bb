package record_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

// The money of a transaction, through the engines: the ledger the acting
// side pays by, the countersigner's refusal of what it does not allow,
// and completion only once the payee is paid what it is owed.

// balance is obl's balance as sd's copy holds it.
func balance(t *testing.T, sd *recordtest.Side, txn, obl string) ledger.Balance {
	t.Helper()
	bs, err := sd.Engine.Balances(context.Background(), txn)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.ObligationID == obl {
			return b
		}
	}
	t.Fatalf("%s holds no balance of %s", sd.Node.Org.Config().OrganizationID, obl)
	return ledger.Balance{}
}

// sameBalance checks both copies read the same money for obl.
func sameBalance(t *testing.T, b, s *recordtest.Side, txn, obl, owed, paid, inFlight, outstanding, settlement string) {
	t.Helper()
	for _, sd := range []*recordtest.Side{b, s} {
		x := balance(t, sd, txn, obl)
		if x.Owed.Amount != owed || x.Paid.Amount != paid || x.InFlight.Amount != inFlight || x.Outstanding.Amount != outstanding || x.Settlement != settlement {
			t.Fatalf("%s: %s owed %s paid %s in flight %s outstanding %s (%s); want %s %s %s %s (%s)", sd.Node.Org.Config().OrganizationID, obl,
				x.Owed.Amount, x.Paid.Amount, x.InFlight.Amount, x.Outstanding.Amount, x.Settlement, owed, paid, inFlight, outstanding, settlement)
		}
	}
}

func pay(b *recordtest.Side, obl, key, amount string) func() (record.Outcome, error) {
	return func() (record.Outcome, error) {
		in := record.InstructInput{MandateID: b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox", IdempotencyKey: key}
		if amount != "" {
			in.Amount = &record.Money{Currency: "EUR", Amount: amount}
		}
		return b.Engine.InstructSettlement(context.Background(), b.Actor(), in)
	}
}

func completeBy(sd *recordtest.Side, txn string) func() error {
	return func() error {
		_, err := sd.Engine.CompleteTransaction(context.Background(), sd.Actor(), record.CompleteInput{MandateID: sd.Mandate, TransactionID: txn})
		return err
	}
}

// TestInstalmentsUpToWhatIsOwed: instalments that add up to the amount
// owed are paid, each once; anything past it is refused, with any key or
// none, and never reaches the rail; completion waits for the last.
func TestInstalmentsUpToWhatIsOwed(t *testing.T) {
	t.Parallel()
	b, s, _, txn, obl := accepted(t)
	for i, a := range []string{"1000.00", "1000.00", "1200.00"} {
		if i == 2 {
			// Before the last instalment the payee is not paid in full.
			refused(t, "completion after two of three instalments", b, s, txn, reason.StateTransitionDenied, completeBy(s, txn))
		}
		if _, err := pay(b, obl, fmt.Sprintf("instalment-%04d", i), a)(); err != nil {
			t.Fatalf("instalment %d: %v", i, err)
		}
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "3200.00", "0.00", "0.00", ledger.SettlementSettled)
	for _, key := range []string{"instalment-0099", ""} {
		refused(t, "a payment past what is owed, key "+key, b, s, txn, reason.SettlementTriggerAbsent, func() error {
			_, err := pay(b, obl, key, "0.01")()
			return err
		})
		refused(t, "the default amount once nothing is outstanding, key "+key, b, s, txn, reason.SettlementTriggerAbsent, func() error {
			_, err := pay(b, obl, key, "")()
			return err
		})
	}
	rail := sandbox(t, b)
	for i := 0; i < 3; i++ {
		if n := rail.Executions(fmt.Sprintf("instalment-%04d", i)); n != 1 {
			t.Fatalf("instalment %d moved money %d times", i, n)
		}
	}
	if n := rail.Submissions("instalment-0099"); n != 0 {
		t.Fatal("a refused payment reached the rail")
	}
	if out, err := s.Engine.CompleteTransaction(context.Background(), s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	bothVerifyClean(t, b, s, txn)
}

// TestRacingInstructionsPayOnce: two agent sessions instruct payment of
// the same obligation at once, each under its own key and the default
// amount: one pays, the other is refused, and money moves once.
func TestRacingInstructionsPayOnce(t *testing.T) {
	t.Parallel()
	b, s, _, txn, obl := accepted(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = pay(b, obl, fmt.Sprintf("racing-key-%04d", i), "")()
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !hasCode(err, reason.SettlementTriggerAbsent):
			t.Fatalf("the losing call: %v", err)
		}
	}
	rail := sandbox(t, b)
	if ok != 1 || rail.Executions("racing-key-0000")+rail.Executions("racing-key-0001") != 1 {
		t.Fatalf("%d calls paid; the rail moved money %d+%d times", ok, rail.Executions("racing-key-0000"), rail.Executions("racing-key-0001"))
	}
	recordtest.SameRecord(t, b, s, txn, 6)
	sameBalance(t, b, s, txn, obl, "3200.00", "3200.00", "0.00", "0.00", ledger.SettlementSettled)
}

// TestTokenPaymentDoesNotComplete: 0.01 of 3200.00 paid and succeeded;
// neither party may complete, and a payer whose own database was doctored
// to say it paid in full still cannot: the payee's countersigner reads
// its own copy.
func TestTokenPaymentDoesNotComplete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := accepted(t)
	out, err := pay(b, obl, "token-pay-0001", "0.01")()
	if err != nil {
		t.Fatal(err)
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "0.01", "0.00", "3199.99", ledger.SettlementUnpaid)
	refused(t, "completion by the payee after a token payment", b, s, txn, reason.StateTransitionDenied, completeBy(s, txn))
	refused(t, "completion by the payer after a token payment", b, s, txn, reason.StateTransitionDenied, completeBy(b, txn))
	// The payer lies: its own copy of the instruction now says 3200.00,
	// signed with its real key. It appends the completion its copy allows.
	stl := out.Objects["settlement_instruction"]
	raw, err := b.Node.Org.Store.GetObject(ctx, txn, stl)
	if err != nil {
		t.Fatal(err)
	}
	forged := reseal(t, agentSigner(t, b), [][]byte{raw}, func(objs []map[string]any) []map[string]any {
		payloadOf(objs[0])["amount"] = map[string]any{"currency": "EUR", "amount": "3200.00"}
		return objs
	})[0]
	orig, err := canonical.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Node.Org.Store.Update(ctx, func(tx *store.Txn) error {
		return tx.ReplaceVerified(store.ObjectInfo{ID: stl, TransactionID: txn, ContentHash: orig["content_hash"].(string)}, raw, forged)
	}); err != nil {
		t.Fatal(err)
	}
	if bal := balance(t, b, txn, obl); bal.Paid.Amount != "3200.00" {
		t.Fatalf("the doctored copy reads %+v", bal)
	}
	refusedIf(t, "the doctored payer's completion", b, s, txn, string(reason.StateTransitionDenied), func(err error) bool {
		return hasCode(err, reason.StateTransitionDenied)
	}, completeBy(b, txn))
	if bal := balance(t, s, txn, obl); bal.Paid.Amount != "0.01" || bal.Outstanding.Amount != "3199.99" {
		t.Fatalf("the payee reads %+v", bal)
	}
}

// TestPartialAcceptancePaysItsShare: 15 of 20 accepted; the accepted
// share (2400.00 of 3200.00) is payable at once and is what the default
// instruction pays; the remainder keeps its 800.00; the transaction
// completes once the remainder is waived by its obligee.
func TestPartialAcceptancePaysItsShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	prf := assertPerformance(t, s, obl, "20")
	out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15",
		AssertionID: prf.Objects["performance_event"]})
	if err != nil {
		t.Fatal(err)
	}
	rem := out.Objects["remainder_obligation"]
	sameBalance(t, b, s, txn, obl, "2400.00", "0.00", "0.00", "2400.00", ledger.SettlementUnpaid)
	sameBalance(t, b, s, txn, rem, "0.00", "0.00", "0.00", "0.00", ledger.SettlementNotDue)
	if r := balance(t, s, txn, rem); r.Consideration.Amount != "800.00" || r.RemainderOf != obl {
		t.Fatalf("remainder %+v", r)
	}
	refused(t, "paying the whole consideration on 15 of 20", b, s, txn, reason.SettlementTriggerAbsent, func() error {
		_, err := pay(b, obl, "pay-whole-00001", "3200.00")()
		return err
	})
	if _, err := pay(b, obl, "pay-share-00001", "")(); err != nil {
		t.Fatal(err)
	}
	if n := sandbox(t, b).Executions("pay-share-00001"); n != 1 {
		t.Fatalf("executions %d", n)
	}
	sameBalance(t, b, s, txn, obl, "2400.00", "2400.00", "0.00", "0.00", ledger.SettlementSettled)
	refused(t, "completion with the remainder still owed", b, s, txn, reason.StateTransitionDenied, completeBy(s, txn))
	if _, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: rem}); err != nil {
		t.Fatal(err)
	}
	sameBalance(t, b, s, txn, rem, "0.00", "0.00", "0.00", "0.00", ledger.SettlementSettled)
	if out, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	bothVerifyClean(t, b, s, txn)
}

// TestDisputedObligationPaidAndCompleted: an obligation whose rejection
// was disputed and determined accepted by a binding determination is
// payable, its instruction's trigger bound to the determination, and the
// transaction completes; both records verify.
func TestDisputedObligationPaidAndCompleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	state, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil || state.State != "exception_open" {
		t.Fatalf("raise: %+v %v", state, err)
	}
	out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "act", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil {
		t.Fatal(err)
	}
	det, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: out.Objects["dispute"], Effect: "binding",
		Finding: "The duty was performed.", StateResult: &record.StateResult{SubjectID: obl, State: "accepted"}})
	if err != nil {
		t.Fatal(err)
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "0.00", "0.00", "3200.00", ledger.SettlementUnpaid)
	if x := balance(t, b, txn, obl); x.AcceptedBy != det.Objects["determination"] {
		t.Fatalf("accepted by %s, not the determination %s", x.AcceptedBy, det.Objects["determination"])
	}
	// The question the exception was opened over is answered too (the
	// buyer concedes, presumptively, as the rules grant the class).
	if _, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: state.Objects["dispute"], Effect: "presumptive",
		Finding: "Conceded: the obligation stands accepted by the binding determination of the rejection."}); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Engine.ResolveException(ctx, s.Actor(), record.ExceptionActInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("resolve: %+v %v", out, err)
	}
	out, err = pay(b, obl, "pay-determined-1", "")()
	if err != nil {
		t.Fatal(err)
	}
	stl, _ := b.Node.Org.Store.GetObject(ctx, txn, out.Objects["settlement_instruction"])
	o, _ := canonical.DecodeObject(stl)
	detRaw, _ := b.Node.Org.Store.GetObject(ctx, txn, det.Objects["determination"])
	d, _ := canonical.DecodeObject(detRaw)
	if trig := payloadOf(o)["trigger"].(map[string]any); trig["accepting_act_hash"] != d["content_hash"] {
		t.Fatalf("the trigger binds %v, not the determination %v", trig["accepting_act_hash"], d["content_hash"])
	}
	if out, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "3200.00", "0.00", "0.00", ledger.SettlementSettled)
	bothVerifyClean(t, b, s, txn)
}

// TestHostileMoneyRefused: for each ledger rule a countersigner applies,
// the genuine message edited to break it and signed again with the
// sender's real key; each is refused with both records unchanged.
func TestHostileMoneyRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("an obligation naming the buyer as obligor of the service", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, _ := committed0(t)
		msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
			return b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
		})
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			p := payloadOf(ofType(t, objs, "obligation"))
			p["obligor"], p["obligee"] = p["obligee"], p["obligor"]
			return objs
		})
		refusedWith(t, "who owes whom inverted", b, s, txn, reason.ObligationSubjectUnreferenced, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
	})
	t.Run("an assertion of 25 units of an obligation of 20", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, obl := committed(t)
		msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
			return s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, AssertedQuantity: "20", Evidence: evidence("certificates")})
		})
		forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(ofType(t, objs, "performance_event"))["asserted_quantity"] = "25"
			// The supplier's own evaluator allows the act it now is: the
			// ledger's rule, not its policy, is what must refuse it.
			return redecide(t, s, objs, "performance.declared", authority.CoreTerms("25", "H87", map[string]any{"currency": "EUR", "amount": "3200.00"}),
				map[string]any{"obligation_id": obl})
		})
		refusedWith(t, "an assertion past what is owed", b, s, txn, reason.ObligationTermsMutated, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
			return err
		})
		refused(t, "the obligor asserting 25 of 20", b, s, txn, reason.ObligationTermsMutated, func() error {
			_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, AssertedQuantity: "25", Evidence: evidence("certificates")})
			return err
		})
	})
	t.Run("a second instruction under another key once paid", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, obl := accepted(t)
		if _, err := pay(b, obl, "pay-first-000001", "3199.99")(); err != nil {
			t.Fatal(err)
		}
		// The last cent, genuine, turned into a second payment in full
		// under another key, decided and signed by the payer's own keys.
		msg := recordtest.Capture(t, b, pay(b, obl, "pay-second-00001", "0.01"))
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			stl := ofType(t, objs, "settlement_instruction")
			total := map[string]any{"currency": "EUR", "amount": "3200.00"}
			payloadOf(stl)["amount"] = total
			return redecide(t, b, objs, "settlement.instruct", map[string]any{"core": map[string]any{"total": total}},
				map[string]any{"agreement_id": payloadOf(stl)["agreement_id"], "obligation_id": obl})
		})
		refusedWith(t, "paying twice under two keys", b, s, txn, reason.SettlementTriggerAbsent, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
	})
	t.Run("a receipt after completion", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, obl := accepted(t)
		if _, err := pay(b, obl, "pay-complete-001", "")(); err != nil {
			t.Fatal(err)
		}
		rcps, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "adapter_receipt")
		if err := completeBy(s, txn)(); err != nil {
			t.Fatal(err)
		}
		forged := reseal(t, agentSigner(t, b), [][]byte{rcps[0]}, func(objs []map[string]any) []map[string]any {
			id, _ := envelope.NewID("adp")
			objs[0]["id"] = id
			p := payloadOf(objs[0])
			p["attempt"], p["status"], p["error_code"] = 2, "failed", ledger.ReversedCode
			return objs
		})
		refusedWith(t, "a reversal after completion", b, s, txn, reason.SettlementReceiptUnmatched, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
	})
}

// redecide replaces the lead decision of a captured message of sd's by a
// fresh allow of another act (name, terms, refs), evaluated by sd's own
// evaluator under its mandate and signed with its agent key, and points
// the event at it: what a counterparty with valid credentials and
// modified software sends. The event is signed again by reseal.
func redecide(t *testing.T, sd *recordtest.Side, objs []map[string]any, name string, terms, refs map[string]any) []map[string]any {
	t.Helper()
	ctx := context.Background()
	ev, pol := event(t, objs), leadDecision(t, objs)
	m, err := sd.Agent.Mandate(ctx, sd.Mandate)
	if err != nil {
		t.Fatal(err)
	}
	org := sd.Node.Org.Config().OrganizationID
	other := "org_delta"
	if org == other {
		other = "org_northstar"
	}
	doc := authority.Document(name, ev["transaction_id"].(string), other, terms, refs, m)
	signer := agentSigner(t, sd)
	res := sd.Node.Org.Evaluator().Evaluate(ctx, authority.Request{Mandate: m, Act: doc,
		Actor: authority.Actor{OrganizationID: org, AgentID: m["subject"].(map[string]any)["agent_id"].(string), KeyID: signer.KeyID()}})
	if res.Decision != authority.Allow {
		t.Fatalf("the forger's own policy does not allow the forged act: %+v", res)
	}
	seq, _ := strconv.Atoi(fmt.Sprint(payloadOf(ev)["sequence"]))
	d, err := authority.NewSharedDecision(res, signer, seq)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		if o["id"] == pol["id"] {
			objs[i] = d
		}
	}
	payloadOf(ev)["policy_decision_id"], payloadOf(ev)["action_hash"] = d["id"], res.ActionHash
	return objs
}

// committed0 is committed without the obligation issued: the walkthrough's
// transaction, committed.
func committed0(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, obl string) {
	t.Helper()
	b, s, c = recordtest.Pair(t)
	return b, s, c, recordtest.Form(t, b, s, "3200.00"), ""
}

// TestReceiptsNeverSilentlyChangeASettledStatus: after a succeeded
// receipt, a failed one that is no reversal is kept as evidence and
// changes nothing (no exception may be opened over it); a reversal,
// reported as one, reopens what it paid.
func TestReceiptsNeverSilentlyChangeASettledStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := accepted(t)
	s.Mandate = mandateFor(t, s, c, disputeActs, nil)
	if _, err := pay(b, obl, "pay-settled-0001", "")(); err != nil {
		t.Fatal(err)
	}
	rcps, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "adapter_receipt")
	receipt := func(attempt int, status, code string) [][]byte {
		return reseal(t, agentSigner(t, b), [][]byte{rcps[0]}, func(objs []map[string]any) []map[string]any {
			id, _ := envelope.NewID("adp")
			objs[0]["id"] = id
			p := payloadOf(objs[0])
			p["attempt"], p["status"], p["error_code"] = attempt, status, code
			return objs
		})
	}
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(receipt(2, "failed", "timeout"))); err != nil {
		t.Fatalf("a contradicting receipt is kept as evidence: %v", err)
	}
	x := balance(t, s, txn, obl)
	if x.Paid.Amount != "3200.00" || x.Settlement != ledger.SettlementSettled || len(x.Instructions[0].Contradicting) != 1 {
		t.Fatalf("a contradicting receipt changed the payee's balance: %+v", x)
	}
	if st, _ := s.Engine.SettlementStatus(ctx, txn); st[0].State != "succeeded" {
		t.Fatalf("the settlement's status became %s", st[0].State)
	}
	refused(t, "an exception over a payment that succeeded", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn})
		return err
	})
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(receipt(3, "failed", ledger.ReversedCode))); err != nil {
		t.Fatalf("a reversal: %v", err)
	}
	x = balance(t, s, txn, obl)
	if x.Paid.Amount != "0.00" || x.Reversed.Amount != "3200.00" || x.Outstanding.Amount != "3200.00" || x.Instructions[0].Status != ledger.InstrReversed {
		t.Fatalf("after the reversal the payee reads %+v", x)
	}
	refused(t, "completion after the payment was reversed", b, s, txn, reason.StateTransitionDenied, completeBy(s, txn))
}

// adjustActs are the acts a short settlement needs, with paying and
// completing.
var adjustActs = []string{"settlement.adjust", "settlement.instruct", "transaction.complete"}

// TestShortPaymentBothSigned: 3000.00 of 3200.00 paid; the payer proposes
// to settle short, the payee accepts; the rest is forgone on both sides,
// nothing more may be paid, and the transaction completes; both records
// verify, the adjustment signatures recognised. The countersigner refuses
// a signature over a record its own copy does not draw.
func TestShortPaymentBothSigned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := accepted(t)
	b.Mandate = mandateFor(t, b, c, adjustActs, nil)
	s.Mandate = mandateFor(t, s, c, adjustActs, nil)
	adjust := func(sd *recordtest.Side, accept bool) func() (record.Outcome, error) {
		return func() (record.Outcome, error) {
			in := record.AdjustmentInput{MandateID: sd.Mandate, ObligationID: obl}
			if accept {
				return sd.Engine.AcceptAdjustment(ctx, sd.Actor(), in)
			}
			return sd.Engine.ProposeAdjustment(ctx, sd.Actor(), in)
		}
	}
	if _, err := pay(b, obl, "pay-most-000001", "3000.00")(); err != nil {
		t.Fatal(err)
	}
	refused(t, "accepting an adjustment nobody proposed", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := adjust(s, true)()
		return err
	})
	// A signature over another record (here: forgoing 100.00 only),
	// decided and signed by the payer's own keys, is refused.
	msg := recordtest.Capture(t, b, adjust(b, false))
	forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "evidence"))["artifact_hash"] = canonical.SHA256Hex([]byte("a record forgoing 100.00"))
		return objs
	})
	refusedWith(t, "a signature over a record this copy does not draw", b, s, txn, reason.EvidenceHashMismatch, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
	out, err := adjust(b, false)()
	if err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("propose: %+v %v", out, err)
	}
	// One signature is a proposal: nothing is forgone yet.
	sameBalance(t, b, s, txn, obl, "3200.00", "3000.00", "0.00", "200.00", ledger.SettlementUnpaid)
	refused(t, "completion on a proposal alone", b, s, txn, reason.StateTransitionDenied, completeBy(s, txn))
	refused(t, "the proposer proposing the same again", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := adjust(b, false)()
		return err
	})
	if out, err := adjust(s, true)(); err != nil || out.Status != record.StatusDelivered || out.Objects["adjustment_hash"] == "" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "3000.00", "0.00", "0.00", ledger.SettlementSettled)
	if x := balance(t, s, txn, obl); x.Forgone.Amount != "200.00" || len(x.Adjustments) != 1 {
		t.Fatalf("the payee reads %+v", x)
	}
	refused(t, "a payment after the obligation was settled short", b, s, txn, reason.SettlementTriggerAbsent, func() error {
		_, err := pay(b, obl, "pay-rest-0000001", "200.00")()
		return err
	})
	if out, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		rep := verifiesClean(t, sd, txn)
		n := 0
		for _, ch := range rep.Checks {
			if ch.Name == "adjustment_signature" && ch.Result == "verified" {
				n++
			}
		}
		if n != 2 || len(rep.UnreferencedEvidence) != 0 || len(rep.Ledger.Findings) != 0 {
			t.Fatalf("%s: %d adjustment signatures recognised, unreferenced %v, findings %+v", sd.Node.Org.Config().OrganizationID, n, rep.UnreferencedEvidence, rep.Ledger.Findings)
		}
	}
}

// TestRemainderPerformedThroughException: 15 of 20 accepted and their
// share paid; the remainder, still owed in settlement_pending, is
// performed through the exception path: the supplier opens an
// obligation_outstanding exception over it, offers to perform it, the
// buyer accepts (→ in_performance), the supplier asserts the 5 units, the
// buyer accepts them, pays the remainder's 800.00, and the transaction
// completes; both records verify. An exception over an obligation that is
// no remainder is refused, by the acting side and by the countersigner.
func TestRemainderPerformedThroughException(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := committed(t)
	b.Mandate = mandateFor(t, b, c, disputeActs, nil)
	s.Mandate = mandateFor(t, s, c, disputeActs, nil)
	assertPerformance(t, s, obl, "20")
	out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15"})
	if err != nil {
		t.Fatal(err)
	}
	rem := out.Objects["remainder_obligation"]
	if _, err := pay(b, obl, "pay-share-00001", "")(); err != nil {
		t.Fatal(err)
	}
	refused(t, "an exception over an obligation that is no remainder", b, s, txn, reason.ObligationRemainderMissing, func() error {
		_, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn, ObligationID: obl})
		return err
	})
	msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
		return s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn, ObligationID: rem})
	})
	forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "exception"))["obligation_id"] = obl
		payloadOf(event(t, objs))["data"].(map[string]any)["obligation_id"] = obl
		return objs
	})
	refusedWith(t, "a forged exception naming the accepted obligation", b, s, txn, reason.ObligationRemainderMissing, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
		return err
	})
	if out, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn, ObligationID: rem}); err != nil || out.State != "exception_open" {
		t.Fatalf("open: %+v %v", out, err)
	}
	if out, err := s.Engine.ProposeRemediation(ctx, s.Actor(), record.ExceptionActInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("offer to perform: %+v %v", out, err)
	}
	if out, err := b.Engine.AcceptRemediation(ctx, b.Actor(), record.ExceptionActInput{MandateID: b.Mandate, TransactionID: txn}); err != nil || out.State != "in_performance" ||
		out.Objects["obligation"] != rem {
		t.Fatalf("accept remediation: %+v %v", out, err)
	}
	assertPerformance(t, s, rem, "5")
	if out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: rem, ResponseType: "accept"}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept the remainder: %+v %v", out, err)
	}
	sameBalance(t, b, s, txn, rem, "800.00", "0.00", "0.00", "800.00", ledger.SettlementUnpaid)
	if _, err := pay(b, obl, "pay-twice-00001", "")(); !hasCode(err, reason.SettlementTriggerAbsent) {
		t.Fatalf("the first share paid again: %v", err)
	}
	if _, err := pay(b, rem, "pay-remainder-01", "")(); err != nil {
		t.Fatal(err)
	}
	sameBalance(t, b, s, txn, rem, "800.00", "800.00", "0.00", "0.00", ledger.SettlementSettled)
	if out, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	bothVerifyClean(t, b, s, txn)
}

// TestReversalReportedByTheRail: a payment the rail reported succeeded is
// asked about again while the transaction is open; the rail reports it
// reversed, the receipt (failed, error_code reversed) reaches both
// records, what it paid is outstanding again and completion waits; the
// payee opens an exception over it, resolves it, the payer pays again and
// the transaction completes. Once completed, nothing is asked any more.
func TestReversalReportedByTheRail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := committed(t)
	b.Mandate = mandateFor(t, b, c, disputeActs, nil)
	s.Mandate = mandateFor(t, s, c, disputeActs, nil)
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) {
		reg, err := rails.Open(b.Node.Dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox", Outcomes: []rails.Status{rails.Reversed, rails.Succeeded}}}, b.Node.Org.Clock)
		if err != nil {
			t.Fatal(err)
		}
		o.Rails, o.ConfirmEvery = reg, time.Minute
	})
	s.Out.Reconnect(b.Engine)
	assertPerformance(t, s, obl, "20")
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pay(b, obl, "pay-recalled-001", "")(); err != nil {
		t.Fatal(err)
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "3200.00", "0.00", "0.00", ledger.SettlementSettled)
	// Not due yet: nothing is asked.
	if n := b.Engine.WorkSettlements(ctx); n != 0 {
		t.Fatalf("%d confirmations before they were due", n)
	}
	c.Add(time.Minute)
	if n := b.Engine.WorkSettlements(ctx); n != 1 {
		t.Fatalf("%d confirmations due", n)
	}
	if !sandbox(t, b).Reversals("pay-recalled-001") {
		t.Fatal("the rail was not asked about the payment")
	}
	sameBalance(t, b, s, txn, obl, "3200.00", "0.00", "0.00", "3200.00", ledger.SettlementUnpaid)
	for _, sd := range []*recordtest.Side{b, s} {
		x := balance(t, sd, txn, obl)
		if x.Reversed.Amount != "3200.00" || x.Instructions[0].Status != ledger.InstrReversed {
			t.Fatalf("%s reads %+v", sd.Node.Org.Config().OrganizationID, x)
		}
		if st, _ := sd.Engine.SettlementStatus(ctx, txn); st[0].State != store.SettlementReversed {
			t.Fatalf("%s: the settlement is %s", sd.Node.Org.Config().OrganizationID, st[0].State)
		}
	}
	refused(t, "completion after the payment was reversed", b, s, txn, reason.StateTransitionDenied, completeBy(s, txn))
	if out, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "exception_open" {
		t.Fatalf("an exception over the reversal: %+v %v", out, err)
	}
	if out, err := s.Engine.ResolveException(ctx, s.Actor(), record.ExceptionActInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("resolve: %+v %v", out, err)
	}
	if _, err := pay(b, obl, "pay-again-000001", "")(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	c.Add(time.Hour)
	if due, err := b.Node.Org.Store.DueSettlements(ctx, c.Now()); err != nil || len(due) != 0 {
		t.Fatalf("a completed transaction's payments are still asked about: %+v %v", due, err)
	}
	bothVerifyClean(t, b, s, txn)
}

// TestAmendmentAcceptedBySupplierAddsItsOwnDuty: the duties an amendment
// adds follow the agreement's roles whichever party accepts it. The buyer
// offers 24 units for 3760.00; the supplier accepts, adding the 4 units
// for 560.00: a duty the supplier owes the buyer, issued by the supplier.
// The same acceptance edited so that the buyer owes the added units, and
// signed again with the supplier's real key, is refused.
func TestAmendmentAcceptedBySupplierAddsItsOwnDuty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, _ := committed(t)
	// The supplier issues what it adds: obligation.activated rides its
	// amendment.
	s.Mandate = mandateFor(t, s, c, []string{"agreement.amend", "obligation.activated", "offer.submit"}, nil)
	terms := recordtest.Terms("3760.00")
	terms["core"].(map[string]any)["quantity"] = "24"
	off, err := b.Engine.ProposeOffer(ctx, b.Actor(), record.OfferInput{MandateID: b.Mandate, Counterparty: "org_delta", Terms: terms,
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn})
	if err != nil || off.Status != record.StatusDelivered {
		t.Fatalf("the buyer's amendment offer: %+v %v", off, err)
	}
	accept := func() (record.Outcome, error) {
		return s.Engine.AcceptAmendment(ctx, s.Actor(), record.AmendInput{MandateID: s.Mandate, OfferID: off.Objects["offer"],
			AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}})
	}
	msg := recordtest.Capture(t, s, accept)
	forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
		for _, o := range objs {
			if o["object_type"] == "obligation" {
				p := payloadOf(o)
				p["obligor"], p["obligee"] = p["obligee"], p["obligor"]
			}
		}
		return objs
	})
	refusedWith(t, "an added duty the buyer owes", b, s, txn, reason.ObligationSubjectUnreferenced, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
		return err
	})
	out, err := accept()
	if err != nil || out.Status != record.StatusRecorded {
		t.Fatalf("the supplier accepts the amendment: %+v %v", out, err)
	}
	added := out.Objects["obligation"]
	for _, sd := range []*recordtest.Side{b, s} {
		x := balance(t, sd, txn, added)
		if x.Obligor != "org_delta" || x.Obligee != "org_northstar" || x.Consideration.Amount != "560.00" {
			t.Fatalf("%s reads the added duty %+v", sd.Node.Org.Config().OrganizationID, x)
		}
		if rep := verifiesClean(t, sd, txn); len(rep.Ledger.Findings) != 0 {
			t.Fatalf("findings %+v", rep.Ledger.Findings)
		}
	}
}
