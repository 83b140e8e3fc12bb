package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// localNumber are the columns that hold a transaction's local number
// (migrations 29, 30): transactions.seq and the tseq of its objects,
// events and approval requests.
var localNumber = map[string]bool{"seq": true, "tseq": true}

// Rows are a table's rows about one transaction, every column, as the
// database holds them (TEXT as string, BLOB as []byte, INTEGER as int64,
// NULL as nil): what TransactionRows reads and Txn.InsertRows writes back,
// for a tool that writes many transactions shaped like one held already
// (package history, the benchmarks' history generator) without taking
// every act again.
type Rows struct {
	Table   string
	Columns []string
	Values  [][]any
}

// transactionTables are the tables that hold rows about a transaction,
// the column that names it, and the order their rows are read in (the
// order they were written, where the table keeps one). The outbox and
// the forks are not among them: a transaction copied is one whose
// messages were all delivered and which forked nowhere. Neither are the
// idempotency rows, which name a request and not the transaction.
var transactionTables = []struct{ table, column, order string }{
	{"transactions", "id", "rowid"},
	{"objects", "transaction_id", "rowid"},
	{"events", "transaction_id", "sequence"},
	{"obligation_states", "transaction_id", "rowid"},
	{"settlements", "transaction_id", "rowid"},
	{"spend", "transaction_id", "act_id"},
	{"spend_payments", "transaction_id", "instruction_id"},
	{"approval_requests", "transaction_id", "rowid"},
	{"withdrawals", "transaction_id", "rowid"},
	{"inbox", "transaction_id", "received_at, message_key"},
	{"alerts", "transaction_id", "subject_id"},
}

// TransactionRows reads every row about txn in the tables that hold rows
// about a transaction (transactionTables), a table with none left out.
// It refuses a transaction with messages still in its outbox or forks
// recorded, which a copy of its rows would not carry.
func (s *Store) TransactionRows(ctx context.Context, txn string) ([]Rows, error) {
	for _, t := range []string{"outbox", "forks"} {
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t+" WHERE transaction_id = ?", txn).Scan(&n); err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, fmt.Errorf("store: transaction %s has %d rows in %s, which are not copied", txn, n, t)
		}
	}
	var out []Rows
	for _, t := range transactionTables {
		rows, err := s.db.QueryContext(ctx, fmt.Sprintf("SELECT * FROM %s WHERE %s = ? ORDER BY %s", t.table, t.column, t.order), txn)
		if err != nil {
			return nil, err
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		// The transaction's local number (migration 29) is not the row's
		// content but where this database filed it: InsertRows gives a
		// copy a number of its own.
		keep := make([]int, 0, len(cols))
		r := Rows{Table: t.table}
		for i, c := range cols {
			if !localNumber[c] {
				keep = append(keep, i)
				r.Columns = append(r.Columns, c)
			}
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			row := make([]any, len(keep))
			for j, i := range keep {
				row[j] = vals[i]
			}
			r.Values = append(r.Values, row)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
		if len(r.Values) > 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// InsertRows writes rows as they are, into a table TransactionRows reads.
func (t *Txn) InsertRows(r Rows) error {
	known := false
	for _, tt := range transactionTables {
		known = known || tt.table == r.Table
	}
	if !known {
		return fmt.Errorf("store: %s is not a table of transaction rows", r.Table)
	}
	cols := strings.Join(r.Columns, ", ")
	vals := strings.TrimSuffix(strings.Repeat("?, ", len(r.Columns)), ", ")
	// The transaction's local number, which TransactionRows leaves out:
	// the copy's own, given as CreateTransaction and putChecked give it.
	num := -1
	switch r.Table {
	case "transactions", "objects", "events", "approval_requests", "obligation_states", "settlements", "spend", "spend_payments":
		col, local := "transaction_id", "tseq"
		if r.Table == "transactions" {
			col, local = "id", "seq"
		}
		if num = slices.Index(r.Columns, col); num < 0 {
			return fmt.Errorf("store: rows of %s without their %s", r.Table, col)
		}
		cols, vals = cols+", "+local, vals+", "+txnSeqAt(num+1)
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", r.Table, cols, vals)
	for _, v := range r.Values {
		if len(v) != len(r.Columns) {
			return fmt.Errorf("store: a row of %d values for %d columns of %s", len(v), len(r.Columns), r.Table)
		}
		if num >= 0 {
			if id, ok := v[num].(string); ok {
				if err := t.number(id); err != nil {
					return err
				}
			}
		}
		if _, err := t.exec(q, v...); err != nil {
			return fmt.Errorf("store: insert into %s: %w", r.Table, err)
		}
	}
	return nil
}
