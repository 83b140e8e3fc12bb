package readmodel

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/partyd/party/internal/store"
)

// TestNothingReadsAsEmptyLists: a transaction without disputes,
// determinations or exceptions reads as empty lists, never null, which
// the agent's tool output and the pages rely on.
func TestNothingReadsAsEmptyLists(t *testing.T) {
	st, err := store.OpenWith(filepath.Join(t.TempDir(), "party.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := ReadDisputes(context.Background(), st, "txn_none")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"transaction_id":"txn_none","disputes":[],"determinations":[],"exceptions":[]}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	page, err := ListTransactions(context.Background(), st, ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(page); string(b) != `{"transactions":[]}` {
		t.Fatalf("an empty page: %s", b)
	}
	if _, err := ListTransactions(context.Background(), st, ListFilter{Cursor: "not a cursor"}); err == nil {
		t.Fatal("a cursor list_transactions never gave was taken")
	}
}
