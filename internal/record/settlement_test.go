package record_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// Settlement and completion between the two instances (settlement
// handoff §2–§7; pilot state machine §5 and test 26): the buyer, obligee
// of the supplier's service, pays its consideration on the sandbox rail
// once it accepted the performance; the rail's answers land in both
// records as receipts; either party closes the transaction.

// accepted brings a pair to settlement_pending: formed, the obligation
// issued, performance asserted and accepted in full.
func accepted(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, obl string) {
	t.Helper()
	b, s, c, txn, obl = committed(t)
	assertPerformance(t, s, obl, "20")
	out, err := b.Engine.Respond(context.Background(), b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept"})
	if err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	return b, s, c, txn, obl
}

func instruct(b *recordtest.Side, obl, key string) func() (record.Outcome, error) {
	return func() (record.Outcome, error) {
		return b.Engine.InstructSettlement(context.Background(), b.Actor(), record.InstructInput{MandateID: b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox", IdempotencyKey: key})
	}
}

// sandbox reopens a side's sandbox ledger to read what the rail did.
func sandbox(t *testing.T, sd *recordtest.Side) *rails.Sandbox {
	t.Helper()
	x, err := rails.NewSandbox("rail_test_sandbox", nil, filepath.Join(sd.Node.Dir, "rails", "rail_test_sandbox.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestSettlementThroughCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := accepted(t)
	out, err := instruct(b, obl, "pay-calibration-0001")()
	if err != nil || out.Status != record.StatusRecorded || out.State != "settlement_pending" {
		t.Fatalf("instruct: %+v %v", out, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		st, err := sd.Engine.SettlementStatus(ctx, txn)
		if err != nil || len(st) != 1 || st[0].State != "succeeded" || len(st[0].Receipts) != 1 || st[0].Receipts[0].Status != "succeeded" {
			t.Fatalf("%s's settlement: %+v %v", sd.Node.Org.Config().OrganizationID, st, err)
		}
	}
	if n := sandbox(t, b).Executions("pay-calibration-0001"); n != 1 {
		t.Fatalf("the rail moved money %d times", n)
	}
	// The supplier closes the deal.
	done, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn})
	if err != nil || done.State != "completed" || done.Status != record.StatusRecorded {
		t.Fatalf("complete: %+v %v", done, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 7)
	want := []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted", "settlement.instructed", "transaction.completed"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v", types)
	}
	// Both records hold the instruction and the receipt, byte for byte.
	for _, typ := range []string{"settlement_instruction", "adapter_receipt"} {
		bo, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, typ)
		so, _ := s.Node.Org.Store.TransactionObjectsOfType(ctx, txn, typ)
		if len(bo) != 1 || len(so) != 1 || string(bo[0]) != string(so[0]) {
			t.Fatalf("%s: the records differ (%d, %d)", typ, len(bo), len(so))
		}
	}
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, txn)
	}
}

func TestSettlementBeforeAcceptanceRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	assertPerformance(t, s, obl, "20")
	refused(t, "a settlement instruction before acceptance", b, s, txn, reason.SettlementTriggerAbsent, func() error {
		_, err := instruct(b, obl, "pay-early-00001")()
		return err
	})
	_ = ctx
}

// instructionMessage captures the buyer's genuine settlement.instructed
// message; neither record moves.
func instructionMessage(t *testing.T) (b, s *recordtest.Side, txn, obl string, msg [][]byte) {
	t.Helper()
	b, s, _, txn, obl = accepted(t)
	msg = recordtest.Capture(t, b, instruct(b, obl, "pay-captured-001"))
	return b, s, txn, obl, msg
}

func TestHostileInstructionsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		what string
		code reason.Code
		edit func(t *testing.T, s *recordtest.Side, p map[string]any)
	}{
		{"an unregistered rail", reason.SettlementRailUnknown, func(_ *testing.T, _ *recordtest.Side, p map[string]any) { p["rail"] = "rail_some_other_bank" }},
		{"the payee as payer (reversed direction)", reason.SettlementCustodyRefused, func(_ *testing.T, _ *recordtest.Side, p map[string]any) {
			p["payer_organization_id"], p["payee_organization_id"] = "org_delta", "org_northstar"
		}},
		{"a third party as payee (custody)", reason.SettlementCustodyRefused, func(_ *testing.T, _ *recordtest.Side, p map[string]any) { p["payee_organization_id"] = "org_escrow" }},
		{"payer and payee the same", reason.SettlementCustodyRefused, func(_ *testing.T, _ *recordtest.Side, p map[string]any) { p["payee_organization_id"] = "org_northstar" }},
		{"a trigger bound to another act", reason.SettlementTriggerAbsent, func(_ *testing.T, _ *recordtest.Side, p map[string]any) {
			p["trigger"].(map[string]any)["accepting_act_hash"] = canonical.SHA256Hex([]byte("the assertion, say"))
		}},
		// Beyond what is outstanding nothing has made a payment due.
		{"an amount above the consideration", reason.SettlementTriggerAbsent, func(_ *testing.T, _ *recordtest.Side, p map[string]any) {
			p["amount"] = map[string]any{"currency": "EUR", "amount": "9999.00"}
		}},
		{"a cent more than is owed", reason.SettlementTriggerAbsent, func(_ *testing.T, _ *recordtest.Side, p map[string]any) {
			p["amount"] = map[string]any{"currency": "EUR", "amount": "3200.01"}
		}},
		{"another currency", reason.TermsInvalid, func(_ *testing.T, _ *recordtest.Side, p map[string]any) {
			p["amount"] = map[string]any{"currency": "USD", "amount": "3200.00"}
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			b, s, txn, _, msg := instructionMessage(t)
			forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
				c.edit(t, s, payloadOf(ofType(t, objs, "settlement_instruction")))
				// The event names the edited instruction by id, so it is
				// sealed and signed again too (reseal does it).
				return objs
			})
			refusedWith(t, c.what, b, s, txn, c.code, func() error {
				_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
				return err
			})
		})
	}
}

func TestSettlementIdempotency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := accepted(t)
	part := func(key, amount string) func() (record.Outcome, error) {
		return func() (record.Outcome, error) {
			return b.Engine.InstructSettlement(ctx, b.Actor(), record.InstructInput{MandateID: b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox",
				IdempotencyKey: key, Amount: &record.Money{Currency: "EUR", Amount: amount}})
		}
	}
	first, err := part("pay-once-000001", "3000.00")()
	if err != nil {
		t.Fatal(err)
	}
	// The same key and content again (the amount as given, or left to
	// the default the first call took): the original instruction,
	// nothing new, whatever is outstanding now.
	if again, err := part("pay-once-000001", "3000.00")(); err != nil || again.Objects["settlement_instruction"] != first.Objects["settlement_instruction"] {
		t.Fatalf("the same instruction again: %+v %v", again, err)
	}
	again, err := instruct(b, obl, "pay-once-000001")()
	if err != nil || again.Objects["settlement_instruction"] != first.Objects["settlement_instruction"] {
		t.Fatalf("the same instruction again: %+v %v", again, err)
	}
	recordtest.SameRecord(t, b, s, txn, 6)
	if n := sandbox(t, b).Submissions("pay-once-000001"); n != 1 {
		t.Fatalf("the rail was asked %d times", n)
	}
	// The same key, other content.
	refused(t, "the same key with another amount", b, s, txn, reason.SettlementIdempotencyConflict, func() error {
		_, err := b.Engine.InstructSettlement(ctx, b.Actor(), record.InstructInput{MandateID: b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox",
			IdempotencyKey: "pay-once-000001", Amount: &record.Money{Currency: "EUR", Amount: "100.00"}})
		return err
	})
	// A new instruction, forged at the payee, reusing the key.
	msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.InstructSettlement(ctx, b.Actor(), record.InstructInput{MandateID: b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox",
			IdempotencyKey: "pay-twice-00001", Amount: &record.Money{Currency: "EUR", Amount: "100.00"}})
	})
	forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "settlement_instruction"))["idempotency_key"] = "pay-once-000001"
		return objs
	})
	refusedWith(t, "a new instruction reusing a key", b, s, txn, reason.SettlementIdempotencyConflict, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
}

func TestReceiptsMatchTheirInstruction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := accepted(t)
	out, err := instruct(b, obl, "pay-matched-0001")()
	if err != nil {
		t.Fatal(err)
	}
	rcps, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "adapter_receipt")
	if len(rcps) != 1 {
		t.Fatalf("%d receipts", len(rcps))
	}
	for _, c := range []struct {
		what string
		code reason.Code
		edit func(p map[string]any)
	}{
		{"a receipt for an instruction never issued", reason.SettlementReceiptUnmatched, func(p map[string]any) { p["settlement_instruction_id"] = "stl_0123456789abcdef01234567" }},
		{"a receipt under another idempotency key", reason.SettlementReceiptUnmatched, func(p map[string]any) { p["idempotency_key"] = "some-other-key" }},
		{"a second, different answer to the same attempt", reason.SettlementIdempotencyConflict, func(p map[string]any) {
			p["status"], p["error_code"] = "failed", "rewritten"
		}},
	} {
		forged := reseal(t, agentSigner(t, b), [][]byte{rcps[0]}, func(objs []map[string]any) []map[string]any {
			id, _ := envelope.NewID("adp")
			objs[0]["id"] = id
			c.edit(payloadOf(objs[0]))
			return objs
		})
		refusedWith(t, c.what, b, s, txn, c.code, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
	}
	_ = out
}

// TestReceiptIsEvidenceNotAuthority: settlement handoff §4.2. A rail's
// success moves no state; it does not stand in for the acceptance of an
// obligation; and being able to reach a rail is no authority to pay.
func TestReceiptIsEvidenceNotAuthority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	prf := assertPerformance(t, s, obl, "20")
	// A partial acceptance: the remainder is pending.
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15",
		AssertionID: prf.Objects["performance_event"]}); err != nil {
		t.Fatal(err)
	}
	if _, err := instruct(b, obl, "pay-partial-0001")(); err != nil {
		t.Fatal(err)
	}
	// 1. A succeeded receipt moved nothing: still settlement_pending.
	for _, sd := range []*recordtest.Side{b, s} {
		if tx, _ := sd.Node.Org.Store.GetTransaction(ctx, txn); tx.State != "settlement_pending" {
			t.Fatalf("%s is %s after a receipt", sd.Node.Org.Config().OrganizationID, tx.State)
		}
	}
	// 2. It does not make the remainder accepted: completion is refused.
	refused(t, "completion with the remainder pending", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn})
		return err
	})
	// 3. The supplier can reach the same rail, and has no authority to pay
	// (it is not the obligee, and its mandate lists no settlement.instruct).
	refused(t, "an instruction by the payee", b, s, txn, reason.SettlementCustodyRefused, func() error {
		_, err := s.Engine.InstructSettlement(ctx, s.Actor(), record.InstructInput{MandateID: s.Mandate, ObligationID: obl, Rail: "rail_test_sandbox"})
		return err
	})
}

func TestFailedReceiptThenSucceeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := accepted(t)
	// The sandbox answers the first new key failed, the next succeeded.
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) {
		reg, err := rails.Open(b.Node.Dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox", Outcomes: []rails.Status{rails.Failed, rails.Succeeded}}}, b.Node.Org.Clock)
		if err != nil {
			t.Fatal(err)
		}
		o.Rails = reg
	})
	s.Out.Reconnect(b.Engine)
	if _, err := instruct(b, obl, "pay-try-0000001")(); err != nil {
		t.Fatal(err)
	}
	refused(t, "completion after a failed payment", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.CompleteTransaction(ctx, b.Actor(), record.CompleteInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	})
	if _, err := instruct(b, obl, "pay-try-0000002")(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Engine.CompleteTransaction(ctx, b.Actor(), record.CompleteInput{MandateID: b.Mandate, TransactionID: txn}); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Engine.SettlementStatus(ctx, txn)
	if len(st) != 2 || st[0].State != "failed" || st[1].State != "succeeded" {
		t.Fatalf("both attempts are in the record: %+v", st)
	}
	// Replay is stable: the same report twice.
	r1 := verifiesClean(t, s, txn)
	r2, err := export.VerifyTransaction(ctx, s.Node.Org.Store, txn)
	if err != nil || r1.Results != r2.Results || len(r1.Checks) != len(r2.Checks) {
		t.Fatalf("replay is not stable: %+v, %+v", r1.Results, r2.Results)
	}
}

func TestPendingThenSucceeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := accepted(t)
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) {
		reg, err := rails.Open(b.Node.Dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox", Outcomes: []rails.Status{rails.Pending}}}, b.Node.Org.Clock)
		if err != nil {
			t.Fatal(err)
		}
		o.Rails = reg
	})
	s.Out.Reconnect(b.Engine)
	if _, err := instruct(b, obl, "pay-later-00001")(); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Engine.SettlementStatus(ctx, txn)
	if st[0].State != "pending" {
		t.Fatalf("first answer: %+v", st)
	}
	c.Add(10 * time.Second)
	b.Engine.WorkSettlements(ctx)
	for _, sd := range []*recordtest.Side{b, s} {
		st, _ := sd.Engine.SettlementStatus(ctx, txn)
		if st[0].State != "succeeded" || len(st[0].Receipts) != 2 || st[0].Receipts[1].Attempt != 2 {
			t.Fatalf("%s after asking again: %+v", sd.Node.Org.Config().OrganizationID, st)
		}
	}
	if _, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil {
		t.Fatal(err)
	}
	verifiesClean(t, b, txn)
}

// TestRevokedPayerRefusedLive: the buyer's mandate is revoked between
// acceptance and settlement; the supplier refuses the instruction with
// A202-MANDATE-INACTIVE although its status cache, filled a moment ago,
// still says active: for a payment it asks the issuer at that moment. The
// buyer's own instance refuses its next instruction at once (issue 39), so
// the instruction the supplier judges is the buyer engine's, made a moment
// before the revocation: captured, and delivered after it.
func TestRevokedPayerRefusedLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := accepted(t)
	msg := recordtest.Capture(t, b, instruct(b, obl, "pay-revoked-0001"))
	if err := b.Princ.Revoke(ctx, b.Mandate, "the buyer's agent is withdrawn"); err != nil {
		t.Fatal(err)
	}
	refusedWith(t, "the buyer's own instruction under its mandate revoked a moment ago", b, s, txn, reason.MandateInactive, func() error {
		_, err := instruct(b, obl, "pay-revoked-0002")()
		return err
	})
	// The supplier's 60-second cache has not expired; its live check for a
	// payment refuses.
	refusedWith(t, "an instruction under a mandate revoked a moment ago", b, s, txn, reason.MandateInactive, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg))
		return err
	})
}
