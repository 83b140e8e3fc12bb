package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// TestBothAppendAtOnePosition is the race seam where two writers meet:
// both parties append an event at the same position of one transaction at
// once (the buyer issues the supplier's duty on the committed agreement
// while the supplier agrees the termination the buyer proposed), each
// message held in its sender's outbox until both are pending. Then
// the messages cross, in either order. The party whose organisation
// identifier sorts first (org_delta) keeps the place on both sides; the
// other's act is removed, with a notice, and nothing forks.
func TestBothAppendAtOnePosition(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"northstar's message first", "delta's message first"} {
		t.Run(first, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, s, c := recordtest.Pair(t)
			txn := recordtest.Form(t, b, s, "3200.00")
			// The buyer proposes to end the transaction; then, at once, it
			// issues the supplier's duty while the supplier agrees the
			// termination: two events at position 3.
			if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); err != nil {
				t.Fatal(err)
			}
			hold := func(string, [][]byte) error { return delivery.ErrUnavailable }
			b.Out.Intercept(hold)
			s.Out.Intercept(hold)
			for _, act := range []func() (record.Outcome, error){
				func() (record.Outcome, error) {
					return b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
				},
				func() (record.Outcome, error) {
					return s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn})
				},
			} {
				if out, err := act(); err != nil || out.Status != record.StatusPending {
					t.Fatalf("an act held in its outbox: %+v %v", out, err)
				}
			}
			b.Out.Intercept(nil)
			s.Out.Intercept(nil)
			c.Add(time.Minute)
			order := []*recordtest.Side{b, s}
			if first == "delta's message first" {
				order = []*recordtest.Side{s, b}
			}
			for i := 0; i < 5; i++ {
				recordtest.Flush(ctx, order...)
				c.Add(10 * time.Second)
			}
			types := recordtest.SameRecord(t, b, s, txn, 3)
			if types[2] != "termination.agreed" {
				t.Fatalf("events %v", types)
			}
			v, err := b.Engine.Transaction(ctx, txn)
			if err != nil {
				t.Fatal(err)
			}
			if v.Events[2].AppendedBy != "org_delta" {
				t.Fatalf("%s kept the place; org_delta sorts first", v.Events[2].AppendedBy)
			}
			if v.Notice == nil || len(v.Notice.Codes) == 0 || v.Notice.Codes[0] != "A202-SEQUENCE-CONFLICT" {
				t.Fatalf("northstar's agent is not told its act gave way: %+v", v.Notice)
			}
			for _, sd := range []*recordtest.Side{b, s} {
				if forks, _ := sd.Node.Org.Store.Forks(ctx, txn); len(forks) != 0 {
					t.Fatalf("a fork at %s", sd.Node.Org.Config().OrganizationID)
				}
				if p := sd.Pending(t); len(p) != 0 {
					t.Fatalf("%d messages still wait", len(p))
				}
				verifiesClean(t, sd, txn)
			}
		})
	}
}
