package readmodel

import (
	"context"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// TransactionSummary is one line of list_transactions.
type TransactionSummary struct {
	TransactionID string `json:"transaction_id"`
	Counterparty  string `json:"counterparty_organization_id"`
	Role          string `json:"role"`
	State         string `json:"state"`
	Events        int    `json:"events"`
	UpdatedAt     string `json:"updated_at"`
}

// TransactionPage is one page of list_transactions, most recently updated
// first; Next is the cursor of the following page ("" after the last).
type TransactionPage struct {
	Transactions []TransactionSummary `json:"transactions"`
	Next         string               `json:"next_cursor,omitempty"`
}

// ListFilter selects a page of transactions.
type ListFilter struct {
	State        string    `json:"state,omitempty" jsonschema:"Only transactions in this state, e.g. committed."`
	Counterparty string    `json:"counterparty_organization_id,omitempty" jsonschema:"Only transactions with this organisation (org_...)."`
	Limit        PageLimit `json:"limit,omitempty" jsonschema:"Page size (default 50)."`
	Cursor       string    `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page."`
}

// PageLimit bounds a page of a list: 1 to store.MaxPage; zero takes the
// default (store.DefaultPage).
type PageLimit int

// ListTransactions returns one page of the transactions st holds, filtered and paged in SQL: the cost of a page does not depend on
// how many transactions the instance holds, except filtered by a counterparty that holds few of them, which walks the others
// newest first to fill the page (docs/performance.md, "What still reads in proportion").
func ListTransactions(ctx context.Context, st *store.Store, f ListFilter) (TransactionPage, error) {
	ts, next, err := st.ListTransactions(ctx, store.TransactionFilter{State: f.State, Counterparty: f.Counterparty, Limit: int(f.Limit), Before: f.Cursor})
	if err != nil {
		return TransactionPage{}, reason.Refuse("list_transactions: " + err.Error())
	}
	out := TransactionPage{Transactions: []TransactionSummary{}, Next: next}
	for _, t := range ts {
		out.Transactions = append(out.Transactions, TransactionSummary{TransactionID: t.ID, Counterparty: t.Counterparty, Role: t.Role, State: t.State, Events: t.HeadSequence, UpdatedAt: t.UpdatedAt})
	}
	return out, nil
}

// Transactions lists every transaction st holds (for the
// command line and tests; agents page with ListTransactions).
func Transactions(ctx context.Context, st *store.Store) ([]TransactionSummary, error) {
	ts, err := st.Transactions(ctx)
	if err != nil {
		return nil, err
	}
	out := []TransactionSummary{}
	for _, t := range ts {
		out = append(out, TransactionSummary{TransactionID: t.ID, Counterparty: t.Counterparty, Role: t.Role, State: t.State, Events: t.HeadSequence, UpdatedAt: t.UpdatedAt})
	}
	return out, nil
}
