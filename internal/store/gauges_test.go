package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
)

// countedStates is the count of transactions by state read whole, for
// Gauges' kept count to be compared with.
func countedStates(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT state, COUNT(*) FROM transactions GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			t.Fatal(err)
		}
		m[state] = n
	}
	return m
}

// checkStates fails unless Gauges' count of transactions by state is the
// count read whole, a state no transaction is in any longer at zero.
func checkStates(t *testing.T, s *Store, when string) map[string]int {
	t.Helper()
	g, err := s.Gauges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := maps.Clone(g.Transactions)
	for state, n := range got {
		if n < 0 {
			t.Fatalf("%s: %d transactions %s", when, n, state)
		}
		if n == 0 {
			delete(got, state)
		}
	}
	if want := countedStates(t, s.db); !maps.Equal(got, want) {
		t.Fatalf("%s: kept %v, counted %v", when, g.Transactions, want)
	}
	return g.Transactions
}

// TestTransactionStatesKept: the count of transactions by state that the
// metrics read (migration 23's triggers) follows every way a row of
// transactions is written: created, moved by an event, left in its
// state by one, deleted, and written back by InsertRows.
func TestTransactionStatesKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	checkStates(t, s, "empty")
	if err := s.Update(ctx, func(tx *Txn) error {
		for i := range 4 {
			if err := tx.CreateTransaction(fmt.Sprintf("txn_%d", i), "org_b", "buyer", "", "draft"); err != nil {
				return err
			}
		}
		// A second creation of one held is a no-op.
		return tx.CreateTransaction("txn_0", "org_b", "buyer", "", "draft")
	}); err != nil {
		t.Fatal(err)
	}
	if got := checkStates(t, s, "created"); got["draft"] != 4 {
		t.Fatalf("created four drafts, kept %v", got)
	}
	move := func(id, state string) {
		t.Helper()
		if _, err := s.db.Exec(`UPDATE transactions SET state = ?, updated_at = ? WHERE id = ?`, state, now(), id); err != nil {
			t.Fatal(err)
		}
	}
	move("txn_0", "committed")
	move("txn_1", "committed")
	move("txn_1", "committed") // an event that leaves the state as it was
	move("txn_2", "completed")
	move("txn_0", "in_performance")
	got := checkStates(t, s, "moved")
	if want := map[string]int{"draft": 1, "committed": 1, "in_performance": 1, "completed": 1}; !maps.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	rows, err := s.TransactionRows(ctx, "txn_2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.DeleteTransaction("txn_3"); err != nil {
			return err
		}
		return tx.DeleteTransaction("txn_2")
	}); err != nil {
		t.Fatal(err)
	}
	if got := checkStates(t, s, "deleted"); got["draft"] != 0 || got["completed"] != 0 {
		t.Fatalf("deleted the draft and the completed one, kept %v", got)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		for _, r := range rows {
			if err := tx.InsertRows(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := checkStates(t, s, "copied"); got["completed"] != 1 {
		t.Fatalf("wrote a completed transaction back, kept %v", got)
	}
}

// TestTransactionStatesMigration: a database that held transactions
// before migration 23 starts the count from them.
func TestTransactionStatesMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	const before = 22
	db := migratedTo(t, "file:"+path, before)
	for i, state := range []string{"draft", "committed", "committed", "completed", "completed", "completed"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at) VALUES (?, 'org_a', 'buyer', ?, ?, ?)`,
			fmt.Sprintf("txn_%d", i), state, now(), now()); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := open(t, path)
	if got, want := checkStates(t, s, "migrated"), (map[string]int{"draft": 1, "committed": 2, "completed": 3}); !maps.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}
