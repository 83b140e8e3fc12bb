package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Transaction is a transaction as this instance holds it. State is the
// state its recorded events reached (a derived view, never an input: the
// events are the record).
type Transaction struct {
	ID           string
	Counterparty string
	Role         string // "buyer" or "supplier"
	SessionID    string
	State        string
	HeadSequence int
	HeadHash     string // content hash of the last recorded event
	CreatedAt    string
	UpdatedAt    string
}

// Event is one transaction event's index row.
type Event struct {
	TransactionID     string
	Sequence          int
	EventID           string
	ContentHash       string
	PreviousEventHash string
	EventType         string
	FromState         string
	ToState           string
	AppendedBy        string
	Status            string // "pending" (awaiting the countersignature) or "recorded"
}

// Event statuses.
const (
	EventPending  = "pending"
	EventRecorded = "recorded"
)

// Txn is a database transaction over the record: every act is written in
// one, so a crash leaves the act wholly recorded or not at all.
type Txn struct {
	tx  *sql.Tx
	ctx context.Context
	s   *Store
	// states holds the state of each transaction this Txn wrote or read
	// (State): the transactions row changes only through it.
	states map[string]string
	// u is the Update t runs for (AfterCommit).
	u *update
	// numbered holds the transactions t gave a local number or found
	// with one (number).
	numbered map[string]bool
}

// AfterCommit has fn run once t's writes are committed and durable, by
// Update's caller before Update returns, and never if they are rolled
// back: how a write wakes a worker that must see it (a worker woken inside
// the transaction would read before the commit and sleep again).
func (t *Txn) AfterCommit(fn func()) {
	if t.u == nil {
		fn() // not run by Update: nothing to wait for
		return
	}
	t.u.after = append(t.u.after, fn)
}

// knowState notes the state transaction id is in within t.
func (t *Txn) knowState(id, state string) {
	if t.states == nil {
		t.states = map[string]string{}
	}
	t.states[id] = state
}

// State returns the state transaction id is in within t: the one t last
// wrote or read for it, else read from the database.
func (t *Txn) State(id string) (string, error) {
	if st, ok := t.states[id]; ok {
		return st, nil
	}
	x, err := t.Transaction(id)
	return x.State, err
}

// exec runs a statement inside the transaction, through the statement
// prepared once for it.
func (t *Txn) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.s.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(t.ctx, st).ExecContext(t.ctx, args...)
}

// queryRow runs a query inside the transaction.
func (t *Txn) queryRow(query string, args ...any) *sql.Row {
	st, err := t.s.stmt(t.ctx, query)
	if err != nil {
		// Preparing failed (a closed database, say): run it unprepared,
		// which reports the same error through the row.
		return t.tx.QueryRowContext(t.ctx, query, args...)
	}
	return t.tx.StmtContext(t.ctx, st).QueryRowContext(t.ctx, args...)
}

// exec runs one write statement as a write transaction of its own (an
// Update, so on the writer connection and perhaps committed with others).
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := s.Update(ctx, func(t *Txn) error {
		var err error
		res, err = t.exec(query, args...)
		return err
	})
	return res, err
}

// queryRow is a read of one row through the statement prepared once for
// it, in s's snapshot if it is one (Snapshot), and otherwise on the idle
// writer when it can be (idleWriter). It runs when its row is scanned.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *row {
	return &row{s: s, ctx: ctx, query: query, args: args}
}

// row is a read of one row that runs when it is scanned (queryRow): the
// writer, when the read takes it, is held for that scan alone.
type row struct {
	s     *Store
	ctx   context.Context
	query string
	args  []any
}

// Scan runs the read and scans its row into dest, as sql.Row.Scan.
func (r *row) Scan(dest ...any) error {
	s, ctx := r.s, detach(r.ctx)
	if s.snap == nil {
		if w, release := s.idleWriter(ctx, r.query); w != nil {
			defer release()
			return w.QueryRowContext(ctx, r.args...).Scan(dest...)
		}
	}
	st, err := s.stmt(ctx, r.query)
	if err != nil {
		return err
	}
	return s.inSnapshot(ctx, st).QueryRowContext(ctx, r.args...).Scan(dest...)
}

// PutObject is Store.PutObject inside the transaction.
func (t *Txn) PutObject(body []byte, origin string) (ObjectInfo, error) {
	return putObject(t, body, origin)
}

// ReplaceObject is Store.ReplaceObject inside the transaction.
func (t *Txn) ReplaceObject(id string, old, new []byte) error {
	info, _, err := objectInfo(new)
	if err != nil {
		return err
	}
	if info.ID != id {
		return fmt.Errorf("store: replacement bytes are object %s, not %s", info.ID, id)
	}
	return t.ReplaceVerified(info, old, new)
}

// GetObject is Store.GetObject inside the transaction.
func (t *Txn) GetObject(transactionID, id string) ([]byte, error) {
	q, args := objectQuery(transactionID, id)
	return objectBody(t.queryRow(q, args...), id)
}

// CreateTransaction records a new transaction in state draft. Creating one
// that exists with the same counterparty and role is a no-op.
func (t *Txn) CreateTransaction(id, counterparty, role, sessionID, state string) error {
	var sess any
	if sessionID != "" {
		sess = sessionID
	}
	ts := now()
	if err := t.number(id); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO transactions(id, counterparty, role, session_id, state, created_at, updated_at, seq)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, `+txnSeqAt(1)+`) ON CONFLICT DO NOTHING`, id, counterparty, role, sess, state, ts, ts)
	if err != nil {
		return err
	}
	got, err := t.Transaction(id)
	if err != nil {
		return err
	}
	if got.Counterparty != counterparty || got.Role != role {
		return fmt.Errorf("%w: transaction %s is held with counterparty %s as %s", ErrConflict, id, got.Counterparty, got.Role)
	}
	return nil
}

const txnColumns = `id, counterparty, role, COALESCE(session_id,''), state, head_sequence, COALESCE(head_hash,''), created_at, updated_at`

func scanTxn(row rowScanner) (Transaction, error) {
	var x Transaction
	err := row.Scan(&x.ID, &x.Counterparty, &x.Role, &x.SessionID, &x.State, &x.HeadSequence, &x.HeadHash, &x.CreatedAt, &x.UpdatedAt)
	return x, err
}

// scanTransaction reads the row of transaction id, or ErrNotFound.
func scanTransaction(row rowScanner, id string) (Transaction, error) {
	x, err := scanTxn(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Transaction{}, fmt.Errorf("%w: transaction %s", ErrNotFound, id)
	}
	return x, err
}

// Transaction reads a transaction inside the database transaction.
func (t *Txn) Transaction(id string) (Transaction, error) {
	x, err := scanTransaction(t.queryRow(`SELECT `+txnColumns+` FROM transactions WHERE id = ?`, id), id)
	if err == nil {
		t.knowState(id, x.State)
	}
	return x, err
}

// SetSession records the session a transaction's offers belong to, once.
func (t *Txn) SetSession(id, sessionID string) error {
	_, err := t.exec(`UPDATE transactions SET session_id = ? WHERE id = ? AND session_id IS NULL`, sessionID, id)
	return err
}

// InsertEvent records an event's index row. The primary key (transaction,
// sequence) makes a second event at one position impossible; the caller
// detects forks before inserting.
func (t *Txn) InsertEvent(e Event) error {
	var prev any
	if e.PreviousEventHash != "" {
		prev = e.PreviousEventHash
	}
	var from any
	if e.FromState != "" {
		from = e.FromState
	}
	_, err := t.exec(`INSERT INTO events(transaction_id, tseq, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status)
		VALUES (?1, `+txnSeqAt(1)+`, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)`, e.TransactionID, e.Sequence, e.EventID, e.ContentHash, prev, e.EventType, from, e.ToState, e.AppendedBy, e.Status)
	if err != nil {
		return fmt.Errorf("%w: event %d of %s: %v", ErrConflict, e.Sequence, e.TransactionID, err)
	}
	return nil
}

// OfferReceived records that an offer from the counterparty arrived on a
// transaction: it may now hold an open offer (migration 10, the inbox's
// index), and it is active now (its updated_at, by which transactions are
// listed newest first) though no event moved its head: a counter-offer or
// an amendment offer appends none.
func (t *Txn) OfferReceived(id string) error {
	_, err := t.exec(`UPDATE transactions SET open_offer = 1, updated_at = ? WHERE id = ?`, now(), id)
	return err
}

// OffersTaken clears a transaction's open-offer mark in the commit that
// records the event taking its offer (an agreement formed or amended) or
// ending it: no offer on it is open then, and one received later marks it
// again in a later commit.
func (t *Txn) OffersTaken(id string) error {
	_, err := t.exec(`UPDATE transactions SET open_offer = 0 WHERE id = ?`, id)
	return err
}

// OffersClosed records that the inbox found no open offer from the
// counterparty on each of read, as it read them (their updated_at), in one
// commit. An offer received since moved updated_at, so the mark it set
// stays.
func (s *Store) OffersClosed(ctx context.Context, read []Transaction) error {
	if len(read) == 0 {
		return nil
	}
	return s.Update(ctx, func(t *Txn) error {
		for _, x := range read {
			if _, err := t.exec(`UPDATE transactions SET open_offer = 0 WHERE id = ? AND updated_at = ?`, x.ID, x.UpdatedAt); err != nil {
				return err
			}
		}
		return nil
	})
}

// MarkRecorded moves an event from pending to recorded and advances the
// transaction's head and state to it, as a compare-and-swap on the head:
// the event must extend the head the transaction has now.
func (t *Txn) MarkRecorded(e Event) error {
	res, err := t.exec(`UPDATE events SET status = 'recorded' WHERE tseq = `+txnSeq+` AND sequence = ? AND content_hash = ?`,
		e.TransactionID, e.Sequence, e.ContentHash)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: event %d of %s is not the one held", ErrConflict, e.Sequence, e.TransactionID)
	}
	res, err = t.exec(`UPDATE transactions SET head_sequence = ?, head_hash = ?, state = ?, updated_at = ?
		WHERE id = ? AND head_sequence = ?`, e.Sequence, e.ContentHash, e.ToState, now(), e.TransactionID, e.Sequence-1)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: transaction %s head moved", ErrConflict, e.TransactionID)
	}
	t.knowState(e.TransactionID, e.ToState)
	return nil
}

// DeletePendingEvent removes an own event that the counterparty refused,
// with its object: a refused act leaves no trace in the record.
func (t *Txn) DeletePendingEvent(transactionID string, sequence int, eventID string) error {
	res, err := t.exec(`DELETE FROM events WHERE tseq = `+txnSeq+` AND sequence = ? AND event_id = ? AND status = 'pending'`, transactionID, sequence, eventID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: no pending event %s", ErrNotFound, eventID)
	}
	_, err = t.exec(`DELETE FROM objects WHERE tseq = `+txnSeq+` AND id = ?`, transactionID, eventID)
	return err
}

// DeleteObject removes an object of transaction transactionID that
// belongs to an act the counterparty refused. It is used only for objects
// no recorded event references: a recorded event's object stays. NOT
// EXISTS looks that event up by its key's index; NOT IN listed every
// recorded event first, a read of the whole history under the write lock
// for each refusal a counterparty chose to send.
func (t *Txn) DeleteObject(transactionID, id string) error {
	_, err := t.exec(`DELETE FROM objects WHERE tseq = `+txnSeq+` AND id = ?
		AND NOT EXISTS (SELECT 1 FROM events WHERE tseq = objects.tseq AND event_id = ? AND status = 'recorded')`, transactionID, id, id)
	return err
}

// EventAt returns the event at a sequence, or ErrNotFound.
func (t *Txn) EventAt(transactionID string, sequence int) (Event, error) {
	return scanEvent(t.queryRow(`SELECT `+eventColumns+` FROM events WHERE tseq = `+txnSeq+` AND sequence = ?`, transactionID, sequence))
}

// RecordFork keeps a second successor of an event, refused from the
// record but never discarded (state machine §8.1).
func (t *Txn) RecordFork(transactionID string, sequence int, eventID, contentHash string, body []byte, from, detail string) error {
	_, err := t.exec(`INSERT INTO forks(transaction_id, sequence, event_id, content_hash, body, from_org, detail, detected_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, transactionID, sequence, eventID, contentHash, body, from, detail, now())
	return err
}

const eventColumns = `transaction_id, sequence, event_id, content_hash, COALESCE(previous_event_hash,''), event_type, COALESCE(from_state,''), to_state, appended_by, status`

func scanEvent(row rowScanner) (Event, error) {
	var e Event
	err := row.Scan(&e.TransactionID, &e.Sequence, &e.EventID, &e.ContentHash, &e.PreviousEventHash, &e.EventType, &e.FromState, &e.ToState, &e.AppendedBy, &e.Status)
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("%w: event", ErrNotFound)
	}
	return e, err
}

// GetTransaction returns a transaction.
func (s *Store) GetTransaction(ctx context.Context, id string) (Transaction, error) {
	return scanTransaction(s.queryRow(ctx, `SELECT `+txnColumns+` FROM transactions WHERE id = ?`, id), id)
}

// Transactions lists every transaction, oldest first.
func (s *Store) Transactions(ctx context.Context) ([]Transaction, error) {
	rows, err := s.query(ctx, `SELECT `+txnColumns+` FROM transactions ORDER BY created_at, rowid`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanTxn)
}

// TransactionsAtIssue lists the transactions that hold a dispute, a
// determination or an exception, oldest first: what `party disputes`
// shows. It reads the index of those objects alone (migration 27), not
// every transaction.
func (s *Store) TransactionsAtIssue(ctx context.Context) ([]string, error) {
	rows, err := s.query(ctx, `SELECT id FROM transactions
		WHERE seq IN (SELECT tseq FROM objects INDEXED BY objects_at_issue WHERE object_type IN ('dispute', 'determination', 'exception'))
		ORDER BY created_at, rowid`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanString)
}

// Events returns a transaction's events in sequence order, pending ones
// included (their Status says so).
func (s *Store) Events(ctx context.Context, transactionID string) ([]Event, error) {
	return all(ctx, s, scanEvent, `SELECT `+eventColumns+` FROM events WHERE tseq = `+txnSeq+` ORDER BY sequence`, transactionID)
}

// Fork is a refused second successor kept for the record.
type Fork struct {
	TransactionID string
	Sequence      int
	EventID       string
	ContentHash   string
	From          string
	Detail        string
	DetectedAt    string
}

// Forks lists the forks detected on a transaction.
func (s *Store) Forks(ctx context.Context, transactionID string) ([]Fork, error) {
	rows, err := s.query(ctx, `SELECT transaction_id, sequence, event_id, content_hash, from_org, detail, detected_at FROM forks WHERE transaction_id = ? ORDER BY id`, transactionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row rowScanner) (Fork, error) {
		var f Fork
		err := row.Scan(&f.TransactionID, &f.Sequence, &f.EventID, &f.ContentHash, &f.From, &f.Detail, &f.DetectedAt)
		return f, err
	})
}

// DeleteTransaction removes a transaction that holds no event, for an
// opening offer the counterparty refused.
func (t *Txn) DeleteTransaction(id string) error {
	_, err := t.exec(`DELETE FROM transactions WHERE id = ? AND NOT EXISTS (SELECT 1 FROM events WHERE tseq = transactions.seq)`, id)
	return err
}

// Withdraw records that an offer was withdrawn, with the signed decision
// that withdrew it, in one database transaction with storing that
// decision.
func (t *Txn) Withdraw(offerID, transactionID, decisionID string) error {
	_, err := t.exec(`INSERT INTO withdrawals(offer_id, transaction_id, decision_id, withdrawn_at) VALUES (?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, offerID, transactionID, decisionID, now())
	return err
}

// WithdrawalOf returns the decision that withdrew an offer, or "" when it
// was not withdrawn.
func (s *Store) WithdrawalOf(ctx context.Context, offerID string) (string, error) {
	return stringOrEmpty(s.queryRow(ctx, `SELECT decision_id FROM withdrawals WHERE offer_id = ?`, offerID))
}

// Withdrawn reports whether an offer was withdrawn.
func (s *Store) Withdrawn(ctx context.Context, offerID string) (bool, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM withdrawals WHERE offer_id = ?`, offerID).Scan(&n)
	return n > 0, err
}

// query runs a multi-row read through the statement prepared once for it.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.inSnapshot(ctx, st).QueryContext(detach(ctx), args...)
}

// list reads every row of query with scan, as query does: on a pool
// connection (or in s's snapshot). For reads that may walk many
// transactions, which would hold the writer away from the acts.
func list[T any](ctx context.Context, s *Store, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

// all is list for a read of one transaction's rows: on the idle writer
// when it can be (idleWriter), which it holds until the last row is
// scanned. scan only copies a row's columns: it must not call the store.
func all[T any](ctx context.Context, s *Store, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	if s.snap == nil {
		ctx := detach(ctx)
		if w, release := s.idleWriter(ctx, query); w != nil {
			defer release()
			rows, err := w.QueryContext(ctx, args...)
			if err != nil {
				return nil, err
			}
			return collect(rows, scan)
		}
	}
	return list(ctx, s, scan, query, args...)
}

// rowScanner is a *sql.Row or *sql.Rows, as the scan functions read them.
type rowScanner = interface{ Scan(...any) error }

// collect reads every row of rows with scan, then closes rows: the one
// loop under each read of many rows. It stops at the first error.
func collect[T any](rows *sql.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanString reads a row of one text column.
func scanString(row rowScanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// stringOrEmpty reads a row of one text column, or "" when there is no
// row.
func stringOrEmpty(row rowScanner) (string, error) {
	v, err := scanString(row)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// scanBytes reads a row of one blob column.
func scanBytes(row rowScanner) ([]byte, error) {
	var v []byte
	err := row.Scan(&v)
	return v, err
}

// Snapshot returns a view of this Store whose reads run in one read
// transaction, and the function that ends it (call it once the reads are
// done; the view is not to be read after it). The view is a value the
// caller passes to what reads, not a context: a read through the Store
// itself is outside it. Writes (Update) through the view are the
// database's, as through the Store; the view is never closed (done ends
// it).
//
// A read outside a transaction is one of its own: SQLite takes and gives
// back a WAL read lock for it (two fcntl calls), and after any commit
// since the last, starts it with an empty page cache. An operation that
// reads a dozen times in a row (the working set an extension is checked
// over) pays that once in a snapshot, and reads one consistent state.
// If the transaction cannot begin, the reads run as before.
func (s *Store) Snapshot(ctx context.Context) (*Store, func()) {
	if s.snap != nil {
		return s, func() {} // already one
	}
	tx, err := s.db.BeginTx(detach(ctx), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s, func() {}
	}
	return &Store{database: s.database, snap: tx}, func() { tx.Rollback() }
}

// inSnapshot returns st as it runs in s's read transaction, when s is a
// snapshot, or st itself.
func (s *Store) inSnapshot(ctx context.Context, st *sql.Stmt) *sql.Stmt {
	if s.snap != nil {
		return s.snap.StmtContext(detach(ctx), st)
	}
	return st
}
