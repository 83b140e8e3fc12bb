package record_test

import (
	"context"
	"testing"

	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// The kill-point matrix's flows for the acts of issue 17 (crash_test.go):
// a dispute and its determination (acts recorded by their objects alone),
// a dispute over an obligation's state that opens an exception, then its
// remediation offered and accepted; the same exception ended by
// termination; and an exception opened over a failed payment, then
// resolved. Each runs through every kill point of each side and must
// converge.
func disputeFlows() []flow {
	var txn, obl string
	// rejected forms the transaction, has the supplier assert all 20 and
	// the buyer reject, and gives both mandates listing the acts.
	rejected := func(t *testing.T, h *harness) string {
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
		if _, err := h.b.Engine.Respond(ctx, h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "quantity_short"}); err != nil {
			t.Fatal(err)
		}
		return txn
	}
	raiseAct := func(ctx context.Context, h *harness) (record.Outcome, error) {
		return h.s.Engine.RaiseDispute(ctx, h.s.Actor(), record.DisputeInput{MandateID: h.s.Mandate, TransactionID: txn, SubjectType: "act",
			SubjectID: responseOf(h.t, h.s, txn, obl, "reject"), Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(h.t, h.s, txn)})
	}
	raiseState := func(ctx context.Context, h *harness) (record.Outcome, error) {
		return h.s.Engine.RaiseDispute(ctx, h.s.Actor(), record.DisputeInput{MandateID: h.s.Mandate, TransactionID: txn, SubjectType: "obligation_state",
			SubjectID: obl, Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(h.t, h.s, txn)})
	}
	// determine issues the buyer's determination of the one dispute held
	// (read from the record: the raising call's outcome may be lost).
	determine := func(ctx context.Context, h *harness) (record.Outcome, error) {
		objs, err := h.b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "dispute")
		if err != nil || len(objs) != 1 {
			h.t.Fatalf("the buyer holds %d disputes: %v", len(objs), err)
		}
		return h.b.Engine.IssueDetermination(ctx, h.b.Actor(), record.DeterminationInput{MandateID: h.b.Mandate, DisputeID: mustDecode(h.t, objs[0])["id"].(string), Finding: finding})
	}
	holdsOne := func(types ...string) func(t *testing.T, h *harness, txn string) {
		return func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				for _, typ := range types {
					objs, err := sd.Node.Org.Store.TransactionObjectsOfType(context.Background(), txn, typ)
					if err != nil || len(objs) != 1 {
						t.Fatalf("%s holds %d %s objects: %v", sd.Node.Org.Config().OrganizationID, len(objs), typ, err)
					}
				}
			}
		}
	}
	exceptionAct := func(side func(*harness) *recordtest.Side, f func(*recordtest.Side) func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error)) func(ctx context.Context, h *harness) (record.Outcome, error) {
		return func(ctx context.Context, h *harness) (record.Outcome, error) {
			sd := side(h)
			return f(sd)(ctx, sd.Actor(), record.ExceptionActInput{MandateID: sd.Mandate, TransactionID: txn})
		}
	}
	rejectedEvents := []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.rejected"}
	dispute := flow{
		name:  "dispute",
		setup: rejected,
		steps: []step{
			{"raise_dispute", supplierSide, raiseAct, nil},
			{"issue_determination", buyerSide, determine, nil},
		},
		want:  rejectedEvents,
		check: holdsOne("dispute", "determination"),
	}
	remediation := flow{
		name:  "remediation",
		setup: rejected,
		steps: []step{
			{"raise_dispute", supplierSide, raiseState, nil},
			{"propose_remediation", supplierSide, exceptionAct(supplierSide, func(sd *recordtest.Side) func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error) {
				return sd.Engine.ProposeRemediation
			}), nil},
			{"accept_remediation", buyerSide, exceptionAct(buyerSide, func(sd *recordtest.Side) func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error) {
				return sd.Engine.AcceptRemediation
			}), nil},
		},
		want: append(append([]string{}, rejectedEvents...), "exception.opened", "remediation.accepted"),
		check: func(t *testing.T, h *harness, txn string) {
			holdsOne("dispute", "exception")(t, h, txn)
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				if n := len(obligationStates(t, sd, txn)); n != 2 {
					t.Fatalf("%s holds %d obligations, want the duty and its remediation", sd.Node.Org.Config().OrganizationID, n)
				}
			}
		},
	}
	termination := flow{
		name:  "exception-termination",
		setup: rejected,
		steps: []step{
			{"raise_dispute", supplierSide, raiseState, nil},
			{"terminate_transaction", buyerSide, exceptionAct(buyerSide, func(sd *recordtest.Side) func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error) {
				return sd.Engine.TerminateTransaction
			}), nil},
		},
		want: append(append([]string{}, rejectedEvents...), "exception.opened", "transaction.terminated"),
		check: func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				if st := obligationStates(t, sd, txn); st[obl] != "released" {
					t.Fatalf("%s: the obligation is %s", sd.Node.Org.Config().OrganizationID, st[obl])
				}
			}
		},
	}
	failed := flow{
		name: "failed-settlement",
		setup: func(t *testing.T, h *harness) string {
			ctx := context.Background()
			h.options = func(sd *recordtest.Side, o *record.Options) {
				if sd != h.b {
					return
				}
				reg, err := rails.Open(sd.Node.Dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox", Outcomes: []rails.Status{rails.Failed, rails.Succeeded}}}, sd.Node.Org.Clock)
				if err != nil {
					t.Fatal(err)
				}
				o.Rails = reg
			}
			h.arm(h.b, h.kb)
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			h.b.Mandate = mandateFor(t, h.b, h.c, disputeActs, nil)
			h.s.Mandate = mandateFor(t, h.s, h.c, disputeActs, nil)
			out, err := h.b.Engine.IssueObligation(ctx, h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			if err != nil {
				t.Fatal(err)
			}
			obl = out.Objects["obligation"]
			assertPerformance(t, h.s, obl, "20")
			if _, err := h.b.Engine.Respond(ctx, h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil {
				t.Fatal(err)
			}
			if _, err := instruct(h.b, obl, "pay-fails-crash01")(); err != nil {
				t.Fatal(err)
			}
			if st, err := h.s.Engine.SettlementStatus(ctx, txn); err != nil || len(st) != 1 || st[0].State != "failed" {
				t.Fatalf("the payment did not fail: %+v %v", st, err)
			}
			return txn
		},
		steps: []step{
			{"open_exception", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.OpenException(ctx, h.s.Actor(), record.ExceptionInput{MandateID: h.s.Mandate, TransactionID: txn})
			}, nil},
			{"resolve_exception", supplierSide, exceptionAct(supplierSide, func(sd *recordtest.Side) func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error) {
				return sd.Engine.ResolveException
			}), nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted",
			"settlement.instructed", "exception.opened", "exception.resolved"},
		check: holdsOne("exception"),
	}
	return []flow{dispute, remediation, termination, failed}
}
