package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/decimal"
)

// TestCommitmentsCounted: the budget reader's commitments, read in one
// statement, are each transaction's largest act, its state now and what
// was paid in it less payments the rail reported failed or reversed; a
// transaction whose first act lies outside the period, in another
// currency or no longer held counts none.
func TestCommitmentsCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	d := func(v string) decimal.Decimal {
		x, err := decimal.Parse(v)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	charge := func(txn, currency string) budget.Charge {
		return budget.Charge{TransactionID: txn, Currency: currency, Counterparty: "org_b", Agent: "agt_a"}
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		for _, x := range []struct{ id, state string }{{"txn_open", "committed"}, {"txn_ended", "terminated"}, {"txn_old", "committed"}, {"txn_usd", "committed"}, {"txn_gone", "draft"}} {
			if err := tx.CreateTransaction(x.id, "org_b", "buyer", "", x.state); err != nil {
				return err
			}
		}
		steps := []func() error{
			// Two acts: the larger counts, dated at the first.
			func() error { return tx.Commit("pol_1", charge("txn_open", "EUR"), d("10.00"), at) },
			func() error { return tx.Commit("pol_2", charge("txn_open", "EUR"), d("15.50"), at.Add(time.Minute)) },
			// Terminated: what was paid counts, less the failed payment.
			func() error { return tx.Commit("pol_3", charge("txn_ended", "EUR"), d("100.00"), at) },
			func() error { return tx.Pay("stl_ok", charge("txn_ended", "EUR"), at) },
			func() error { return tx.Pay("stl_failed", charge("txn_ended", "EUR"), at) },
			func() error { return tx.Pay("stl_pending", charge("txn_ended", "EUR"), at) },
			func() error { return tx.Commit("pol_4", charge("txn_old", "EUR"), d("7.00"), at.Add(-48*time.Hour)) },
			func() error { return tx.Commit("pol_5", charge("txn_usd", "USD"), d("9.00"), at) },
			func() error { return tx.Commit("pol_6", charge("txn_gone", "EUR"), d("3.00"), at) },
			func() error { return tx.DeleteTransaction("txn_gone") },
			func() error {
				return tx.PutSettlement(Settlement{InstructionID: "stl_ok", TransactionID: "txn_ended", ObligationID: "obl_1", Rail: "r", IdempotencyKey: "k1", Fingerprint: "f", Ours: true, State: SettlementSucceeded})
			},
			func() error {
				return tx.PutSettlement(Settlement{InstructionID: "stl_failed", TransactionID: "txn_ended", ObligationID: "obl_1", Rail: "r", IdempotencyKey: "k2", Fingerprint: "f", Ours: true, State: SettlementFailed})
			},
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Payments carry their amounts (Pay records the charge's Amount).
	if err := s.Update(ctx, func(tx *Txn) error {
		_, err := tx.exec(`UPDATE spend_payments SET amount = CASE instruction_id WHEN 'stl_ok' THEN '30.00' WHEN 'stl_failed' THEN '20.00' ELSE '5.25' END`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r := s.BudgetReader(ctx)
	// txn_open counts its larger act, txn_ended what was paid in it less
	// the failed payment; txn_old is outside the period, txn_usd in
	// another currency, txn_gone no longer held.
	spent, n, err := r.Spent("EUR", "", "", at.Add(-time.Hour), at.Add(time.Hour))
	if err != nil || spent.String() != "50.75" || n != 2 {
		t.Fatalf("spent %s in %d transactions (%v), want 15.50 + 35.25 in 2", spent, n, err)
	}
	// Unpaid: txn_open and txn_old, not yet paid; txn_ended has ended.
	if unpaid, err := r.Unpaid("EUR", "org_b"); err != nil || unpaid.String() != "22.50" {
		t.Fatalf("unpaid %s (%v), want 15.50 + 7.00", unpaid, err)
	}
	if paid, n, err := r.Paid("EUR", "org_b", at.Add(-time.Hour), at.Add(time.Hour)); err != nil || paid.String() != "35.25" || n != 3 {
		t.Fatalf("paid %s in %d payments (%v), want 30.00 + 5.25 in 3 (the failed one at zero)", paid, n, err)
	}
	// A write outside Update leaves the totals behind: the reading fails
	// rather than count wrong.
	if _, err := s.db.Exec(`UPDATE spend_payments SET amount = '1.00' WHERE instruction_id = 'stl_ok'`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Paid("EUR", "org_b", at.Add(-time.Hour), at.Add(time.Hour)); err == nil {
		t.Fatal("a reading over totals behind their rows succeeded")
	}
}
