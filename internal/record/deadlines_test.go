package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// offerFor proposes the supplier's offer, valid for d from now.
func offerFor(t *testing.T, s *recordtest.Side, c *recordtest.Clock, d time.Duration) record.Outcome {
	t.Helper()
	out, err := s.Engine.ProposeOffer(context.Background(), s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar",
		Terms: recordtest.Terms("3200.00"), ValidUntil: envelope.Timestamp(c.Now().Add(d))})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOfferLapsesAndTheTransactionExpires: an offer nobody accepted
// lapses; once the grace for the parties' clocks has passed too, either
// instance's deadline work appends deadline.elapsed (draft → expired),
// which the other countersigns by its own clock; it is not done before,
// and it leaves the inbox.
func TestOfferLapsesAndTheTransactionExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := offerFor(t, s, c, time.Hour)
	txn := o.TransactionID
	if inbox, _ := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 10); len(inbox) != 1 {
		t.Fatalf("inbox %+v", inbox)
	}
	c.Add(time.Hour) // lapsed, but the grace for a clock behind has not passed
	if n := b.Engine.WorkDeadlines(ctx) + s.Engine.WorkDeadlines(ctx); n != 0 {
		t.Fatalf("%d expired within the grace", n)
	}
	c.Add(record.ExpiryGrace)
	if n := b.Engine.WorkDeadlines(ctx); n != 1 {
		t.Fatalf("%d expired", n)
	}
	if types := recordtest.SameRecord(t, b, s, txn, 1); types[0] != "deadline.elapsed" {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if v := stateOf(t, sd, txn); v.State != "expired" {
			t.Fatalf("%s: %s", sd.Node.Org.Config().OrganizationID, v.State)
		}
	}
	if inbox, _ := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 10); len(inbox) != 0 {
		t.Fatalf("an expired offer is still in the inbox: %+v", inbox)
	}
	if n := s.Engine.WorkDeadlines(ctx); n != 0 {
		t.Fatal("an expired transaction expired again")
	}
	bothVerifyClean(t, b, s, txn)
}

// TestWithdrawnOfferExpires: an offer its offeror withdrew can no longer
// be accepted; its transaction expires from the withdrawal's time, and
// the verifier reads the deadline off the withdrawal's decision.
func TestWithdrawnOfferExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := offerFor(t, s, c, 24*time.Hour)
	if _, err := s.Engine.WithdrawOffer(ctx, s.Actor(), record.WithdrawInput{MandateID: s.Mandate, OfferID: o.Objects["offer"]}); err != nil {
		t.Fatal(err)
	}
	c.Add(record.ExpiryGrace)
	if n := s.Engine.WorkDeadlines(ctx); n != 1 {
		t.Fatalf("%d expired", n)
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 1)
	bothVerifyClean(t, b, s, o.TransactionID)
}

// TestHostileExpiryRefused: an expiry naming another offer, or sent
// before the deadline by the receiver's clock, or while the receiver's
// acceptance of the offer (made in time) is on its way, is refused with
// both records unchanged.
func TestHostileExpiryRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	expiry := func(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn string, msg [][]byte) {
		b, s, c = recordtest.Pair(t)
		o := offerFor(t, s, c, time.Hour)
		c.Add(time.Hour + record.ExpiryGrace)
		msg = recordtest.Capture(t, s, func() (record.Outcome, error) {
			return s.Engine.Expire(ctx, s.Actor(), record.ExpireInput{MandateID: s.Mandate, TransactionID: o.TransactionID})
		})
		return b, s, c, o.TransactionID, msg
	}
	t.Run("another offer", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, msg := expiry(t)
		forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(event(t, objs))["data"].(map[string]any)["offer_id"] = "off_01JZZZZZZZZZZZZZZZZZZZZZZZ"
			return objs
		})
		refusedWith(t, "an expiry naming an offer that is not the latest", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
			return err
		})
	})
	t.Run("before the deadline by the receiver's clock", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, msg := expiry(t)
		c.Add(-time.Hour)
		refusedWith(t, "an expiry before the deadline", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(msg))
			return err
		})
	})
	t.Run("while an acceptance is in flight", func(t *testing.T) {
		t.Parallel()
		b, s, c := recordtest.Pair(t)
		o := offerFor(t, s, c, time.Hour)
		apr := recordtest.Approve(t, b, o.Objects["offer"])
		b.Out.SetDown(true)
		if out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil || out.Status != record.StatusPending {
			t.Fatalf("accept while the supplier is away: %+v %v", out, err)
		}
		c.Add(time.Hour + record.ExpiryGrace)
		msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
			return s.Engine.Expire(ctx, s.Actor(), record.ExpireInput{MandateID: s.Mandate, TransactionID: o.TransactionID})
		})
		before := holding(t, b, o.TransactionID)
		if _, err := b.Engine.Receive(ctx, "org_delta", o.TransactionID, delivery.Raw(msg)); !hasCode(err, reason.StateTransitionDenied) {
			t.Fatalf("an expiry while the acceptance is on its way: %v", err)
		}
		if after := holding(t, b, o.TransactionID); len(after.Events) != len(before.Events) || after.State != before.State {
			t.Fatalf("the buyer's record moved: %+v → %+v", before, after)
		}
		// Whatever then happens to the late acceptance (the supplier, by
		// its clock, finds the offer lapsed), the transaction ends expired
		// on both sides.
		b.Out.SetDown(false)
		for i := 0; i < 10; i++ {
			c.Add(time.Minute)
			recordtest.Flush(ctx, b, s)
			s.Engine.WorkDeadlines(ctx)
			b.Engine.WorkDeadlines(ctx)
		}
		if types := recordtest.SameRecord(t, b, s, o.TransactionID, 1); types[0] != "deadline.elapsed" {
			t.Fatalf("events %v", types)
		}
		bothVerifyClean(t, b, s, o.TransactionID)
	})
}

// deadlineFlows are the kill-point matrix's flows for expiry
// (crash_test.go): an offer that lapses unaccepted, expired by the
// offeree; and one its offeror withdraws and then expires from the
// withdrawal's time. Both end with deadline.elapsed on both sides.
func deadlineFlows() []flow {
	var txn string
	var offer string
	expired := func(t *testing.T, h *harness, txn string) {
		for _, sd := range []*recordtest.Side{h.b, h.s} {
			if v := stateOf(t, sd, txn); v.State != "expired" {
				t.Fatalf("%s: %s", sd.Node.Org.Config().OrganizationID, v.State)
			}
		}
	}
	setup := func(t *testing.T, h *harness) string {
		o := offerFor(t, h.s, h.c, time.Hour)
		txn, offer = o.TransactionID, o.Objects["offer"]
		return txn
	}
	lapse := flow{
		name:  "expiry",
		setup: setup,
		steps: []step{
			{"expire_transaction", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				h.c.Add(time.Hour + record.ExpiryGrace) // again on a repeat: later still
				return h.b.Engine.Expire(ctx, h.b.Actor(), record.ExpireInput{MandateID: h.b.Mandate, TransactionID: txn})
			}, nil},
		},
		want:  []string{"deadline.elapsed"},
		check: expired,
	}
	withdrawn := flow{
		name:  "expiry-withdrawn",
		setup: setup,
		steps: []step{
			{"withdraw_offer", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.WithdrawOffer(ctx, h.s.Actor(), record.WithdrawInput{MandateID: h.s.Mandate, OfferID: offer})
			}, nil},
			{"expire_transaction", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				h.c.Add(record.ExpiryGrace)
				return h.s.Engine.Expire(ctx, h.s.Actor(), record.ExpireInput{MandateID: h.s.Mandate, TransactionID: txn})
			}, nil},
		},
		want:  []string{"deadline.elapsed"},
		check: expired,
	}
	return []flow{lapse, withdrawn}
}
