package store

// Settlement instructions (migrations 8 and 18), as both records hold them, and
// the rail work of the ones this instance pays.
//
//	CREATE TABLE settlements (
//	  instruction_id  TEXT PRIMARY KEY,  -- stl_...
//	  transaction_id  TEXT NOT NULL,
//	  obligation_id   TEXT NOT NULL,
//	  rail            TEXT NOT NULL,
//	  idempotency_key TEXT NOT NULL,
//	  fingerprint     TEXT NOT NULL,     -- what the key must keep meaning
//	  ours            INTEGER NOT NULL,  -- 1 when this instance is the payer
//	  state           TEXT NOT NULL,     -- instructed | pending | succeeded | failed | reversed (migration 18)
//	  attempts        INTEGER NOT NULL,  -- submissions made to the rail
//	  next_attempt    INTEGER NOT NULL,  -- unix nanoseconds; when to ask the rail again
//	  last_error      TEXT NOT NULL,
//	  UNIQUE (transaction_id, idempotency_key)
//	);
//
// A row is written in the database transaction that records the
// settlement.instructed event; the (transaction, idempotency key) pair is
// unique, which is what makes a retry return the original instruction
// rather than make a second one (settlement §5).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Settlement is one settlements row.
type Settlement struct {
	InstructionID  string
	TransactionID  string
	ObligationID   string
	Rail           string
	IdempotencyKey string
	Fingerprint    string
	Ours           bool
	State          string
	Attempts       int
	NextAttempt    time.Time
	LastError      string
}

// Settlement states.
const (
	SettlementInstructed = "instructed"
	SettlementPending    = "pending"
	SettlementSucceeded  = "succeeded"
	SettlementFailed     = "failed"
	// SettlementReversed: succeeded, then reported reversed by the rail
	// (ledger.ReversedCode).
	SettlementReversed = "reversed"
)

const settlementColumns = `instruction_id, transaction_id, obligation_id, rail, idempotency_key, fingerprint, ours, state, attempts, next_attempt, last_error`

func scanSettlement(row rowScanner) (Settlement, error) {
	var s Settlement
	var ours int
	var next int64
	err := row.Scan(&s.InstructionID, &s.TransactionID, &s.ObligationID, &s.Rail, &s.IdempotencyKey, &s.Fingerprint, &ours, &s.State, &s.Attempts, &next, &s.LastError)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("%w: settlement", ErrNotFound)
	}
	s.Ours, s.NextAttempt = ours == 1, time.Unix(0, next)
	return s, err
}

// PutSettlement records an instruction inside the transaction that records
// its event. The same instruction again is a no-op; another instruction
// under the same (transaction, idempotency key) is ErrConflict.
func (t *Txn) PutSettlement(s Settlement) error {
	ours := 0
	if s.Ours {
		ours = 1
	}
	if s.State == "" {
		s.State = SettlementInstructed
	}
	if err := t.number(s.TransactionID); err != nil {
		return err
	}
	res, err := t.exec(`INSERT INTO settlements(`+settlementColumns+`, tseq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, 0, '', `+txnSeqAt(2)+`) ON CONFLICT DO NOTHING`,
		s.InstructionID, s.TransactionID, s.ObligationID, s.Rail, s.IdempotencyKey, s.Fingerprint, ours, s.State)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	held, err := scanSettlement(t.queryRow(`SELECT `+settlementColumns+` FROM settlements WHERE instruction_id = ?1
		UNION ALL SELECT `+settlementColumns+` FROM settlements WHERE tseq = `+txnSeqAt(2)+` AND idempotency_key = ?3 LIMIT 1`,
		s.InstructionID, s.TransactionID, s.IdempotencyKey))
	if err != nil {
		return err
	}
	if held.InstructionID != s.InstructionID || held.Fingerprint != s.Fingerprint {
		return fmt.Errorf("%w: idempotency key %s names instruction %s", ErrConflict, s.IdempotencyKey, held.InstructionID)
	}
	return nil
}

// SetSettlementState records what the rail said, inside the transaction
// that stores the receipt.
func (t *Txn) SetSettlementState(instructionID, state string, next time.Time, lastError string) error {
	_, err := t.exec(`UPDATE settlements SET state = ?, next_attempt = ?, last_error = ? WHERE instruction_id = ?`, state, nanos(next), lastError, instructionID)
	return err
}

// SetSettlementAttempts raises an instruction's count of rail calls to n
// (a receipt numbered by a call the count did not record: a confirmation
// whose answer was worth a receipt).
func (t *Txn) SetSettlementAttempts(instructionID string, n int) error {
	_, err := t.exec(`UPDATE settlements SET attempts = MAX(attempts, ?) WHERE instruction_id = ?`, n, instructionID)
	return err
}

// SettlementConfirmed records that the rail still stands by a payment it
// reported succeeded, and when to ask it again.
func (s *Store) SettlementConfirmed(ctx context.Context, instructionID string, next time.Time) error {
	_, err := s.exec(ctx, `UPDATE settlements SET next_attempt = ? WHERE instruction_id = ?`, nanos(next), instructionID)
	return err
}

// nanos is t in Unix nanoseconds, and 0 for the zero time: nothing to do.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SettlementAttempt counts one more submission to the rail, committed
// before the rail is called: after a crash, the count says the rail may
// have been asked already.
func (s *Store) SettlementAttempt(ctx context.Context, instructionID string, next time.Time, lastError string) (int, error) {
	if _, err := s.exec(ctx, `UPDATE settlements SET attempts = attempts + 1, next_attempt = ?, last_error = ? WHERE instruction_id = ?`,
		next.UnixNano(), lastError, instructionID); err != nil {
		return 0, err
	}
	st, err := s.Settlement(ctx, instructionID)
	return st.Attempts, err
}

// Settlement returns one instruction's row.
func (s *Store) Settlement(ctx context.Context, instructionID string) (Settlement, error) {
	return scanSettlement(s.queryRow(ctx, `SELECT `+settlementColumns+` FROM settlements WHERE instruction_id = ?`, instructionID))
}

// SettlementByKey returns the instruction recorded under an idempotency
// key of a transaction.
func (s *Store) SettlementByKey(ctx context.Context, transactionID, key string) (Settlement, error) {
	return scanSettlement(s.queryRow(ctx, `SELECT `+settlementColumns+` FROM settlements WHERE tseq = `+txnSeq+` AND idempotency_key = ?`, transactionID, key))
}

// Settlements returns a transaction's instructions, in the order they were
// recorded.
func (s *Store) Settlements(ctx context.Context, transactionID string) ([]Settlement, error) {
	return all(ctx, s, scanSettlement, `SELECT `+settlementColumns+` FROM settlements WHERE tseq = `+txnSeq+` ORDER BY rowid`, transactionID)
}

// dueWork is the rail work of the instructions this instance pays: those
// not yet submitted or answered pending, and those answered succeeded
// while their transaction is still open to a reversal (settlement_pending
// or exception_open), asked again whether the payment stands.
const dueWork = `ours = 1 AND (state IN ('instructed','pending') OR (state = 'succeeded' AND next_attempt > 0 AND
	transaction_id IN (SELECT id FROM transactions WHERE state IN ('settlement_pending','exception_open'))))`

// DueSettlements returns the instructions this instance pays whose rail
// work is due at t (dueWork).
func (s *Store) DueSettlements(ctx context.Context, t time.Time) ([]Settlement, error) {
	return list(ctx, s, scanSettlement, `SELECT `+settlementColumns+` FROM settlements WHERE `+dueWork+` AND next_attempt <= ? ORDER BY rowid`, t.UnixNano())
}

// NextSettlementAttempt returns when the earliest rail work becomes due.
func (s *Store) NextSettlementAttempt(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullInt64
	if err := s.queryRow(ctx, `SELECT MIN(next_attempt) FROM settlements WHERE `+dueWork).Scan(&next); err != nil {
		return time.Time{}, false, err
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return time.Unix(0, next.Int64), true, nil
}
