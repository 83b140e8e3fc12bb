package record_test

import (
	"context"
	"testing"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// The kill-point matrix's flows for money (crash_test.go): instalments
// that add up to what is owed, each handed to the rail after its
// instruction is recorded, and a short settlement both parties sign.
// Every kill point of each side must converge, money moving once per
// idempotency key, and both ledgers must read the same.
func moneyFlows() []flow {
	var txn, obl string
	accepted := func(t *testing.T, h *harness) {
		ctx := context.Background()
		txn = recordtest.Form(t, h.b, h.s, "3200.00")
		out, err := h.b.Engine.IssueObligation(ctx, h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
		if err != nil {
			t.Fatal(err)
		}
		obl = out.Objects["obligation"]
		assertPerformance(t, h.s, obl, "20")
		if _, err := h.b.Engine.Respond(ctx, h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil {
			t.Fatal(err)
		}
	}
	settle := step{"settle_rail", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
		h.b.Engine.WorkSettlements(ctx) // what the settlement worker does
		return record.Outcome{}, nil
	}, nil}
	complete := step{"complete_transaction", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
		return h.s.Engine.CompleteTransaction(ctx, h.s.Actor(), record.CompleteInput{MandateID: h.s.Mandate, TransactionID: txn})
	}, nil}
	settled := func(forgone string) func(t *testing.T, h *harness, txn string) {
		return func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				x := balance(t, sd, txn, obl)
				if x.Settlement != ledger.SettlementSettled || x.Forgone.Amount != forgone || x.Outstanding.Amount != "0.00" {
					t.Fatalf("%s reads %+v", sd.Node.Org.Config().OrganizationID, x)
				}
			}
		}
	}
	instalments := flow{
		name:  "instalments",
		setup: func(t *testing.T, h *harness) string { accepted(t, h); return txn },
		steps: []step{
			{"instruct_first", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.InstructSettlement(ctx, h.b.Actor(), record.InstructInput{MandateID: h.b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox",
					IdempotencyKey: "pay-instalment-1", Amount: &record.Money{Currency: "EUR", Amount: "1000.00"}})
			}, nil},
			settle,
			{"instruct_rest", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.InstructSettlement(ctx, h.b.Actor(), record.InstructInput{MandateID: h.b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox",
					IdempotencyKey: "pay-instalment-2"})
			}, nil},
			settle,
			complete,
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted",
			"settlement.instructed", "settlement.instructed", "transaction.completed"},
		check: func(t *testing.T, h *harness, txn string) {
			settled("0.00")(t, h, txn)
			rail := sandbox(t, h.b)
			for _, key := range []string{"pay-instalment-1", "pay-instalment-2"} {
				if n := rail.Executions(key); n != 1 {
					t.Fatalf("the rail moved money %d times under %s", n, key)
				}
			}
		},
	}
	adjustment := flow{
		name: "adjustment",
		setup: func(t *testing.T, h *harness) string {
			accepted(t, h)
			h.b.Mandate = mandateFor(t, h.b, h.c, adjustActs, nil)
			h.s.Mandate = mandateFor(t, h.s, h.c, adjustActs, nil)
			if _, err := h.b.Engine.InstructSettlement(context.Background(), h.b.Actor(), record.InstructInput{MandateID: h.b.Mandate, ObligationID: obl,
				Rail: "rail_test_sandbox", IdempotencyKey: "pay-most-0000001", Amount: &record.Money{Currency: "EUR", Amount: "3000.00"}}); err != nil {
				t.Fatal(err)
			}
			return txn
		},
		steps: []step{
			{"propose_settlement_adjustment", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.ProposeAdjustment(ctx, h.b.Actor(), record.AdjustmentInput{MandateID: h.b.Mandate, ObligationID: obl})
			}, nil},
			{"accept_settlement_adjustment", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.AcceptAdjustment(ctx, h.s.Actor(), record.AdjustmentInput{MandateID: h.s.Mandate, ObligationID: obl})
			}, nil},
			complete,
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted",
			"settlement.instructed", "transaction.completed"},
		check: settled("200.00"),
	}
	var rem string
	remainder := flow{
		name: "remainder",
		setup: func(t *testing.T, h *harness) string {
			ctx := context.Background()
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			h.b.Mandate = mandateFor(t, h.b, h.c, disputeActs, nil)
			h.s.Mandate = mandateFor(t, h.s, h.c, disputeActs, nil)
			out, err := h.b.Engine.IssueObligation(ctx, h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			if err != nil {
				t.Fatal(err)
			}
			obl = out.Objects["obligation"]
			assertPerformance(t, h.s, obl, "20")
			if out, err = h.b.Engine.Respond(ctx, h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15"}); err != nil {
				t.Fatal(err)
			}
			rem = out.Objects["remainder_obligation"]
			return txn
		},
		steps: []step{
			{"open_exception", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.OpenException(ctx, h.s.Actor(), record.ExceptionInput{MandateID: h.s.Mandate, TransactionID: txn, ObligationID: rem})
			}, nil},
			{"propose_remediation", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.ProposeRemediation(ctx, h.s.Actor(), record.ExceptionActInput{MandateID: h.s.Mandate, TransactionID: txn})
			}, nil},
			{"accept_remediation", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.AcceptRemediation(ctx, h.b.Actor(), record.ExceptionActInput{MandateID: h.b.Mandate, TransactionID: txn})
			}, nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted",
			"exception.opened", "remediation.accepted"},
		check: func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				if st := obligationStates(t, sd, txn); len(st) != 2 || st[rem] != "pending" {
					t.Fatalf("%s: obligations %v, want the duty and its remainder, pending", sd.Node.Org.Config().OrganizationID, st)
				}
				if x := balance(t, sd, txn, rem); x.Consideration.Amount != "800.00" {
					t.Fatalf("%s reads the remainder %+v", sd.Node.Org.Config().OrganizationID, x)
				}
			}
		},
	}
	return []flow{instalments, adjustment, remainder}
}
