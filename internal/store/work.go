package store

// What migration 7 added so that an act costs the same at event 300 as
// at event 10, and at 10 000 transactions as at 10:
//
//	-- Where each obligation stands, kept as events are recorded (in the
//	-- database transaction that records the event) instead of re-derived
//	-- from the whole chain on every act. It is a view of the record:
//	-- the events remain the record, and the row can be rebuilt from them.
//	CREATE TABLE obligation_states (
//	  obligation_id  TEXT PRIMARY KEY,
//	  transaction_id TEXT NOT NULL,
//	  state          TEXT NOT NULL,     -- obligation §6.1
//	  assertions     TEXT NOT NULL,     -- JSON array of prf_ ids, in record order
//	  updated_seq    INTEGER NOT NULL   -- the event that last moved it
//	);
//	-- Small facts about the database itself.
//	CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
//
// and, on idempotency, the act a request recorded (act: a JSON reference
// the caller defines), written in the act's own database transaction.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ObligationState is one obligation_states row.
type ObligationState struct {
	ObligationID  string
	TransactionID string
	State         string
	// Assertions are the obligor's assertions of it, in record order; the
	// last is outstanding while State is "asserted".
	Assertions []string
	UpdatedSeq int
	// AcceptedBy is the obligee's accepting response (obr_...) once the
	// obligation is accepted: what a settlement's trigger binds.
	AcceptedBy string
}

// PutObligationState writes an obligation's state inside the transaction
// that recorded the event moving it.
func (t *Txn) PutObligationState(o ObligationState) error {
	if o.Assertions == nil {
		o.Assertions = []string{}
	}
	a, err := json.Marshal(o.Assertions)
	if err != nil {
		return err
	}
	if err := t.number(o.TransactionID); err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO obligation_states(obligation_id, transaction_id, tseq, state, assertions, updated_seq, accepted_by)
		VALUES (?1, ?2, `+txnSeqAt(2)+`, ?3, ?4, ?5, ?6)
		ON CONFLICT(tseq, obligation_id) DO UPDATE SET state = excluded.state, assertions = excluded.assertions, updated_seq = excluded.updated_seq, accepted_by = excluded.accepted_by`,
		o.ObligationID, o.TransactionID, o.State, string(a), o.UpdatedSeq, o.AcceptedBy)
	return err
}

func scanObligationState(row rowScanner) (ObligationState, error) {
	var o ObligationState
	var a string
	if err := row.Scan(&o.ObligationID, &o.TransactionID, &o.State, &a, &o.UpdatedSeq, &o.AcceptedBy); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return o, fmt.Errorf("%w: obligation state", ErrNotFound)
		}
		return o, err
	}
	if err := json.Unmarshal([]byte(a), &o.Assertions); err != nil {
		return o, fmt.Errorf("store: obligation %s assertions: %w", o.ObligationID, err)
	}
	return o, nil
}

const obligationStateColumns = `obligation_id, transaction_id, state, assertions, updated_seq, accepted_by`

// ObligationState returns where obligation id of transaction
// transactionID stands, or ErrNotFound when no recorded event of that
// transaction issued it. It is found under its transaction (migration
// 31), whose number leads the key.
func (s *Store) ObligationState(ctx context.Context, transactionID, id string) (ObligationState, error) {
	return scanObligationState(s.queryRow(ctx, `SELECT `+obligationStateColumns+` FROM obligation_states WHERE tseq = `+txnSeq+` AND obligation_id = ?`, transactionID, id))
}

// ObligationState is Store.ObligationState inside the transaction.
func (t *Txn) ObligationState(transactionID, id string) (ObligationState, error) {
	return scanObligationState(t.queryRow(`SELECT `+obligationStateColumns+` FROM obligation_states WHERE tseq = `+txnSeq+` AND obligation_id = ?`, transactionID, id))
}

// ObligationStates returns the obligations of a transaction, in the order
// they were issued.
func (s *Store) ObligationStates(ctx context.Context, transactionID string) ([]ObligationState, error) {
	return all(ctx, s, scanObligationState, `SELECT `+obligationStateColumns+` FROM obligation_states WHERE tseq = `+txnSeq+` ORDER BY rowid`, transactionID)
}

// ObligationStates is Store.ObligationStates inside the transaction.
func (t *Txn) ObligationStates(transactionID string) ([]ObligationState, error) {
	rows, err := t.query(`SELECT `+obligationStateColumns+` FROM obligation_states WHERE tseq = `+txnSeq+` ORDER BY rowid`, transactionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanObligationState)
}

// Meta returns a value of the meta table, or "" when unset.
func (s *Store) Meta(ctx context.Context, key string) (string, error) {
	return stringOrEmpty(s.queryRow(ctx, `SELECT value FROM meta WHERE key = ?`, key))
}

// SetMeta sets a value of the meta table inside the transaction.
func (t *Txn) SetMeta(key, value string) error {
	_, err := t.exec(`INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}

// Request is an idempotent call as recorded with the act it made.
type Request struct {
	ArgsHash string
	// Act is the caller's reference to the act the call recorded.
	Act string
}

// RecordRequest records, inside the database transaction of the act it
// made, that call (scope, requestID) with arguments argsHash made act. A
// crash before the act commits leaves no record, so the same call may be
// retried; after it, the retry finds the act. The same id recorded again
// with other arguments is ErrRequestReused.
func (t *Txn) RecordRequest(scope, requestID, argsHash, act string) error {
	res, err := t.exec(`INSERT INTO idempotency(scope, request_id, args_hash, state, act, created_at) VALUES (?, ?, ?, 'done', ?, ?)
		ON CONFLICT DO NOTHING`, scope, requestID, argsHash, act, now())
	if err != nil {
		return fmt.Errorf("store: request: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var held string
	if err := t.queryRow(`SELECT args_hash FROM idempotency WHERE scope = ? AND request_id = ?`, scope, requestID).Scan(&held); err != nil {
		return err
	}
	if held != argsHash {
		return ErrRequestReused
	}
	return fmt.Errorf("%w: request %s was recorded already", ErrConflict, requestID)
}

// LookupRequest returns the act recorded for (scope, requestID), or
// ErrNotFound.
func (s *Store) LookupRequest(ctx context.Context, scope, requestID string) (Request, error) {
	var r Request
	var act sql.NullString
	err := s.queryRow(ctx, `SELECT args_hash, act FROM idempotency WHERE scope = ? AND request_id = ?`, scope, requestID).Scan(&r.ArgsHash, &act)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: request %s", ErrNotFound, requestID)
	}
	r.Act = act.String
	return r, err
}

// TransactionObjectsOfType returns the bytes of one transaction's objects
// of one type, in storage order, by the (transaction_id, object_type)
// index.
func (s *Store) TransactionObjectsOfType(ctx context.Context, transactionID, objectType string) ([][]byte, error) {
	if lit, ok := typeLiteral(objectType); ok {
		return all(ctx, s, scanBytes, `SELECT body FROM objects WHERE tseq = `+txnSeq+` AND object_type = `+lit+` ORDER BY rowid`, transactionID)
	}
	return all(ctx, s, scanBytes, `SELECT body FROM objects WHERE tseq = `+txnSeq+` AND object_type = ? ORDER BY rowid`, transactionID, objectType)
}

// typeLiteral returns objectType as an SQL string literal, when it is an
// object type's name (lower-case letters and underscores; nothing to
// escape), for queries on objects to name their types in.
//
// Why not a parameter: objects has partial indexes (key_objects,
// obligation_responses_by_type), whose conditions are on object_type.
// When a query compares object_type with a parameter, SQLite notes that
// the parameter's value could decide whether a partial index applies, and
// prepares the statement again at every step after a bind (SQLite's
// "expmask"), even to the same value: 14.5 µs a read by transaction and
// type, 7.8 µs with the type written in, a fiftieth of a formation's CPU
// at eight agents. Each type, or list of types, is then a statement of its
// own, prepared once (the types are the protocol's, a few dozen).
func typeLiteral(objectType string) (string, bool) {
	if objectType == "" || len(objectType) > 64 {
		return "", false
	}
	for i := 0; i < len(objectType); i++ {
		if c := objectType[i]; (c < 'a' || c > 'z') && c != '_' {
			return "", false
		}
	}
	return "'" + objectType + "'", true
}

// TransactionObjectsOfTypes returns the bodies of the transaction's
// objects of the given types: those of the first type in storage order,
// then those of the second, and so on, as one TransactionObjectsOfType
// call per type would, in one query (an act's working set reads four to
// eight types).
func (s *Store) TransactionObjectsOfTypes(ctx context.Context, transactionID string, objectTypes ...string) ([][]byte, error) {
	switch len(objectTypes) {
	case 0:
		return nil, nil
	case 1:
		return s.TransactionObjectsOfType(ctx, transactionID, objectTypes[0])
	}
	order := make(map[string]int, len(objectTypes))
	args := make([]any, 0, len(objectTypes)+1)
	args = append(args, transactionID)
	in := make([]string, 0, len(objectTypes))
	for _, t := range objectTypes {
		if _, dup := order[t]; !dup {
			order[t] = len(order)
			if lit, ok := typeLiteral(t); ok { // typeLiteral says why
				in = append(in, lit)
			} else {
				in = append(in, "?")
				args = append(args, t)
			}
		}
	}
	q := `SELECT object_type, body FROM objects WHERE tseq = ` + txnSeq + ` AND object_type IN (` +
		strings.Join(in, ", ") + `) ORDER BY rowid`
	type typed struct {
		typ  string
		body []byte
	}
	got, err := all(ctx, s, func(row rowScanner) (typed, error) {
		var o typed
		err := row.Scan(&o.typ, &o.body)
		return o, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	byType := make([][][]byte, len(order))
	for _, o := range got {
		i := order[o.typ]
		byType[i] = append(byType[i], o.body)
	}
	n := len(got)
	out := make([][]byte, 0, n)
	for _, bs := range byType {
		out = append(out, bs...)
	}
	return out, nil
}

// PutVerified stores an object whose bytes the caller decoded strictly,
// found canonical and whose content hash it recomputed (info describes
// them): the engine's own objects and received ones it has verified, which
// need not be decoded and hashed a second time here.
func (t *Txn) PutVerified(info ObjectInfo, body []byte, origin string) error {
	if info.ID == "" || info.ObjectType == "" || info.ContentHash == "" {
		return fmt.Errorf("store: object lacks id, object_type or content_hash")
	}
	_, err := putChecked(t, info, body, origin)
	return err
}

// ReplaceVerified swaps the stored bytes of object info.ID of transaction
// info.TransactionID from old to new, as ReplaceObject does, for bytes the
// caller verified.
func (t *Txn) ReplaceVerified(info ObjectInfo, old, new []byte) error {
	cond, key := objectKey(info.TransactionID, info.ID)
	args := append(append([]any{new}, key...), old, info.ContentHash)
	res, err := t.exec(`UPDATE objects SET body = ? WHERE `+cond+` AND body = ? AND content_hash = ?`, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: %s changed or has another content hash", ErrConflict, info.ID)
	}
	return nil
}

// Page sizes of ListTransactions: a zero limit takes DefaultPage, and no
// page is larger than MaxPage.
const (
	DefaultPage = 50
	MaxPage     = 500
)

// TransactionFilter selects a page of transactions (ListTransactions).
type TransactionFilter struct {
	// State, when set, keeps only transactions in that state.
	State string
	// Counterparty, when set, keeps only transactions with that
	// organisation.
	Counterparty string
	// OpenOffer keeps only transactions that may hold an open offer from
	// the counterparty (Txn.OfferReceived, Store.OffersClosed).
	OpenOffer bool
	// Limit bounds the page (default DefaultPage, at most MaxPage).
	Limit int
	// Before is the cursor: the page starts after this (updated_at, id)
	// position, newest first. Empty starts at the newest.
	Before string
}

// ListTransactions returns one page of transactions, most recently updated
// first, filtered in SQL, and the cursor of the next page ("" when this
// was the last).
func (s *Store) ListTransactions(ctx context.Context, f TransactionFilter) ([]Transaction, string, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultPage
	}
	if limit > MaxPage {
		limit = MaxPage
	}
	where := []string{"1=1"}
	var args []any
	if f.State != "" {
		where = append(where, "state = ?")
		args = append(args, f.State)
	}
	if f.Counterparty != "" {
		where = append(where, "counterparty = ?")
		args = append(args, f.Counterparty)
	}
	if f.OpenOffer {
		where = append(where, "open_offer = 1")
	}
	if f.Before != "" {
		at, id, ok := strings.Cut(f.Before, "|")
		if !ok {
			return nil, "", fmt.Errorf("store: cursor %q is not one this instance gave", f.Before)
		}
		where = append(where, "(updated_at < ? OR (updated_at = ? AND id < ?))")
		args = append(args, at, at, id)
	}
	args = append(args, limit+1)
	rows, err := s.query(ctx, `SELECT `+txnColumns+` FROM transactions WHERE `+strings.Join(where, " AND ")+` ORDER BY updated_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, "", err
	}
	out, err := collect(rows, scanTxn)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[len(out)-1]
		next = last.UpdatedAt + "|" + last.ID
	}
	return out, next, nil
}

// TransactionsInState returns the transactions in one state, by the state
// index: what a restart resumes, without walking every transaction.
func (s *Store) TransactionsInState(ctx context.Context, state string) ([]Transaction, error) {
	rows, err := s.query(ctx, `SELECT `+txnColumns+` FROM transactions WHERE state = ? ORDER BY updated_at`, state)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanTxn)
}

// PendingOutboxTransactions returns the distinct transactions with a
// message waiting in the outbox.
func (s *Store) PendingOutboxTransactions(ctx context.Context) ([]string, error) {
	rows, err := s.query(ctx, `SELECT DISTINCT transaction_id FROM outbox WHERE status = 'pending'`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanString)
}

// DeleteTransactionIfEmpty removes a transaction that holds no event and
// no object: what an opening offer the counterparty refused leaves.
func (t *Txn) DeleteTransactionIfEmpty(id string) error {
	_, err := t.exec(`DELETE FROM transactions WHERE id = ? AND NOT EXISTS (SELECT 1 FROM events WHERE tseq = transactions.seq)
		AND NOT EXISTS (SELECT 1 FROM objects WHERE tseq = transactions.seq)`, id)
	return err
}

// SetNotice records what the agent should be told about a transaction (an
// act refused after it was queued, say), replacing the previous notice.
func (t *Txn) SetNotice(id, notice string) error {
	_, err := t.exec(`UPDATE transactions SET notice = ? WHERE id = ?`, notice, id)
	return err
}

// Notice returns a transaction's notice, or "".
func (s *Store) Notice(ctx context.Context, id string) (string, error) {
	var n sql.NullString
	err := s.queryRow(ctx, `SELECT notice FROM transactions WHERE id = ?`, id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: transaction %s", ErrNotFound, id)
	}
	return n.String, err
}

// RenameWithdrawalDecision points a withdrawal at the decision that renewed
// the one it was recorded with.
func (t *Txn) RenameWithdrawalDecision(old, new string) error {
	_, err := t.exec(`UPDATE withdrawals SET decision_id = ? WHERE decision_id = ?`, new, old)
	return err
}

// EventAt returns the event at a position of a transaction, or ErrNotFound.
func (s *Store) EventAt(ctx context.Context, transactionID string, sequence int) (Event, error) {
	return scanEvent(s.queryRow(ctx, `SELECT `+eventColumns+` FROM events WHERE tseq = `+txnSeq+` AND sequence = ?`, transactionID, sequence))
}

// LatestEventOfType returns a transaction's event of the given type with
// the highest sequence, or ErrNotFound when it has none. It reads that
// one event, however many of the type the transaction holds.
func (s *Store) LatestEventOfType(ctx context.Context, transactionID, eventType string) (Event, error) {
	return scanEvent(s.queryRow(ctx, `SELECT `+eventColumns+` FROM events WHERE tseq = `+txnSeq+` AND event_type = ? ORDER BY sequence DESC LIMIT 1`, transactionID, eventType))
}

// ObligationResponsesOfTypes returns a transaction's obligation_response
// objects whose payload response_type is one of types, in storage order,
// through migration 12's index: a long transaction holds one rejection
// per round, and a reader of its acceptances and waivers reads none of
// them.
func (s *Store) ObligationResponsesOfTypes(ctx context.Context, transactionID string, types ...string) ([][]byte, error) {
	if len(types) == 0 {
		return nil, nil
	}
	q := responsesOfTypesQuery(len(types))
	args := []any{transactionID}
	for _, t := range types {
		args = append(args, t)
	}
	return all(ctx, s, scanBytes, q, args...)
}

// responsesOfTypesQuery is ObligationResponsesOfTypes's query for n
// types. The expression and the object_type literal are the index's;
// INDEXED BY makes SQLite use it (without statistics it would take the
// wider objects_by_type and read every response) or fail the query.
func responsesOfTypesQuery(n int) string {
	return `SELECT body FROM objects INDEXED BY obligation_responses_by_type WHERE object_type = 'obligation_response' AND tseq = ` + txnSeq + `
		AND json_extract(CAST(body AS TEXT), '$.payload.response_type') IN (?` + strings.Repeat(", ?", n-1) + `) ORDER BY rowid`
}

// EventsOfTypes returns a transaction's events of the given types, in
// sequence order.
func (s *Store) EventsOfTypes(ctx context.Context, transactionID string, types ...string) ([]Event, error) {
	if len(types) == 0 {
		return nil, nil
	}
	q := `SELECT ` + eventColumns + ` FROM events WHERE tseq = ` + txnSeq + ` AND event_type IN (?` + strings.Repeat(", ?", len(types)-1) + `) ORDER BY sequence`
	args := []any{transactionID}
	for _, t := range types {
		args = append(args, t)
	}
	return all(ctx, s, scanEvent, q, args...)
}

// RaiseAlert records that the alert kind about subject (an obligation
// due, or overdue) was raised, at stands for the instant it concerns; it
// reports false when it was raised before, so that it is raised once.
func (s *Store) RaiseAlert(ctx context.Context, subject, kind, transactionID string, at time.Time) (bool, error) {
	res, err := s.exec(ctx, `INSERT INTO alerts(subject_id, kind, transaction_id, at, raised_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		subject, kind, transactionID, at.UTC().Format(time.RFC3339Nano), now())
	if err != nil {
		return false, fmt.Errorf("store: alerts: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
