package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// The kill-point matrix's flows for the acts of issue 15 (crash_test.go):
// cancellation, a waiver (an act recorded by its objects alone),
// consensual termination (a proposal, then the agreement), and an
// amendment (its offer, then its acceptance, which the offeror's instance
// co-signs with the event). Each runs through every kill point of each
// side and must converge.
func lifecycleFlows() []flow {
	var txn, offer, obl, rem string
	cancel := flow{
		name: "cancel",
		setup: func(t *testing.T, h *harness) string {
			o := recordtest.Offer(t, h.s, "3200.00")
			txn = o.TransactionID
			return txn
		},
		steps: []step{
			{"cancel_transaction", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.CancelTransaction(ctx, h.b.Actor(), record.CancelInput{MandateID: h.b.Mandate, TransactionID: txn})
			}, nil},
		},
		want: []string{"transaction.cancelled"},
	}
	waiver := flow{
		name: "waiver",
		setup: func(t *testing.T, h *harness) string {
			ctx := context.Background()
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			out, err := h.b.Engine.IssueObligation(ctx, h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			if err != nil {
				t.Fatal(err)
			}
			obl = out.Objects["obligation"]
			assertPerformance(t, h.s, obl, "20")
			out, err = h.b.Engine.Respond(ctx, h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15"})
			if err != nil {
				t.Fatal(err)
			}
			rem = out.Objects["remainder_obligation"]
			return txn
		},
		steps: []step{
			{"waive_obligation", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.WaiveObligation(ctx, h.b.Actor(), record.WaiveInput{MandateID: h.b.Mandate, ObligationID: rem})
			}, nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted"},
		check: func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				if st := obligationStates(t, sd, txn); st[rem] != "waived" {
					t.Fatalf("%s: the remainder is %s", sd.Node.Org.Config().OrganizationID, st[rem])
				}
			}
		},
	}
	termination := flow{
		name: "termination",
		setup: func(t *testing.T, h *harness) string {
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			out, err := h.b.Engine.IssueObligation(context.Background(), h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			if err != nil {
				t.Fatal(err)
			}
			obl = out.Objects["obligation"]
			return txn
		},
		steps: []step{
			{"propose_termination", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.ProposeTermination(ctx, h.b.Actor(), record.TerminationInput{MandateID: h.b.Mandate, TransactionID: txn})
			}, nil},
			{"agree_termination", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.AgreeTermination(ctx, h.s.Actor(), record.TerminationInput{MandateID: h.s.Mandate, TransactionID: txn})
			}, nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "termination.agreed"},
		check: func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				if st := obligationStates(t, sd, txn); st[obl] != "released" {
					t.Fatalf("%s: the obligation is %s", sd.Node.Org.Config().OrganizationID, st[obl])
				}
			}
		},
	}
	amendment := flow{
		name: "amendment",
		setup: func(t *testing.T, h *harness) string {
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			out, err := h.b.Engine.IssueObligation(context.Background(), h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			if err != nil {
				t.Fatal(err)
			}
			obl = out.Objects["obligation"]
			offer = ""
			return txn
		},
		steps: []step{
			{"propose_amendment", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				terms := recordtest.Terms("3760.00")
				terms["core"].(map[string]any)["quantity"] = "24"
				return h.s.Engine.ProposeOffer(ctx, h.s.Actor(), record.OfferInput{MandateID: h.s.Mandate, Counterparty: "org_northstar", Terms: terms,
					ValidUntil: envelope.Timestamp(h.c.Now().Add(24 * time.Hour)), TransactionID: txn})
			}, func(out record.Outcome) { offer = out.Objects["offer"] }},
			{"accept_amendment", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.AcceptAmendment(ctx, h.b.Actor(), record.AmendInput{MandateID: h.b.Mandate, OfferID: offer,
					AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}})
			}, nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "agreement.amended"},
		check: func(t *testing.T, h *harness, txn string) {
			for _, sd := range []*recordtest.Side{h.b, h.s} {
				agrs, err := sd.Node.Org.Store.TransactionObjectsOfType(context.Background(), txn, "agreement")
				if err != nil || len(agrs) != 2 {
					t.Fatalf("%s holds %d agreements: %v", sd.Node.Org.Config().OrganizationID, len(agrs), err)
				}
				if sigs := mustDecode(t, agrs[1])["signatures"].([]any); len(sigs) != 2 {
					t.Fatalf("%s: version 2 carries %d signatures", sd.Node.Org.Config().OrganizationID, len(sigs))
				}
				if n := len(obligationStates(t, sd, txn)); n != 2 {
					t.Fatalf("%s holds %d obligations", sd.Node.Org.Config().OrganizationID, n)
				}
			}
		},
	}
	return []flow{cancel, waiver, termination, amendment}
}
