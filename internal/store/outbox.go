package store

// The delivery outbox and inbox (migration 3), used by package delivery.
//
//	-- Messages this instance sends, stored before the first attempt so that
//	-- a peer outage or a restart delays delivery and never loses it.
//	CREATE TABLE outbox (
//	  id             INTEGER PRIMARY KEY AUTOINCREMENT,
//	  peer           TEXT NOT NULL,      -- the receiving organisation
//	  transaction_id TEXT NOT NULL,      -- the correlation id ("" for none)
//	  message_key    TEXT NOT NULL,      -- what the receiver dedupes on
//	  objects        BLOB NOT NULL,      -- the objects' exact bytes (JSON array of base64)
//	  status         TEXT NOT NULL,      -- pending | delivered | failed
//	  attempts       INTEGER NOT NULL,   -- attempts made so far
//	  next_attempt   INTEGER NOT NULL,   -- unix nanoseconds; due when <= now
//	  lease_until    INTEGER NOT NULL,   -- unix nanoseconds; an attempt in flight
//	  last_error     TEXT NOT NULL,      -- why the last attempt failed (local only)
//	  reply          BLOB,               -- the reply objects once delivered
//	  enqueued_at    TEXT NOT NULL,
//	  finished_at    TEXT
//	);
//	-- Messages this instance received and answered, so that a redelivery
//	-- is answered with the first reply instead of being processed twice.
//	CREATE TABLE inbox (
//	  from_org       TEXT NOT NULL,
//	  message_key    TEXT NOT NULL,
//	  transaction_id TEXT NOT NULL,
//	  reply          BLOB NOT NULL,      -- JSON array of base64, as in outbox
//	  received_at    TEXT NOT NULL,
//	  PRIMARY KEY (from_org, message_key)
//	);
//
// Times that are compared (next_attempt, lease_until) are integers, because
// RFC 3339 text with trimmed fractions does not sort as time does.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Outbox message statuses.
const (
	OutboxPending   = "pending"
	OutboxDelivered = "delivered"
	OutboxFailed    = "failed"
)

// OutboxMessage is one row of the outbox.
type OutboxMessage struct {
	ID            int64
	Peer          string
	TransactionID string
	MessageKey    string
	Objects       [][]byte
	Status        string
	Attempts      int
	NextAttempt   time.Time
	LastError     string
	Reply         [][]byte
	EnqueuedAt    time.Time
}

// encodeObjects frames a list of byte strings for one BLOB column. JSON
// turns each []byte into base64, which keeps the bytes exact.
func encodeObjects(objects [][]byte) ([]byte, error) {
	if objects == nil {
		objects = [][]byte{}
	}
	return json.Marshal(objects)
}

func decodeObjects(b []byte) ([][]byte, error) {
	if b == nil {
		return nil, nil
	}
	var out [][]byte
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("store: stored objects: %w", err)
	}
	return out, nil
}

// EnqueueOutbox stores a message to send, due at once, and returns its id.
// The row is committed before this returns, so the message survives a
// crash from here on. A non-zero leaseUntil enqueues the message already
// leased (see LeaseOutbox), for a caller that attempts it at once and must
// not race a worker for it.
func (s *Store) EnqueueOutbox(ctx context.Context, peer, transactionID, messageKey string, objects [][]byte, leaseUntil time.Time) (int64, error) {
	if len(objects) == 0 {
		return 0, errors.New("store: enqueue: a message carries at least one object")
	}
	body, err := encodeObjects(objects)
	if err != nil {
		return 0, err
	}
	var lease int64
	if !leaseUntil.IsZero() {
		lease = leaseUntil.UnixNano()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO outbox(peer, transaction_id, message_key, objects, status, next_attempt, lease_until, enqueued_at)
		VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)`, peer, transactionID, messageKey, body, time.Now().UnixNano(), lease, now())
	if err != nil {
		return 0, fmt.Errorf("store: enqueue: %w", err)
	}
	return res.LastInsertId()
}

const outboxColumns = `id, peer, transaction_id, message_key, objects, status, attempts, next_attempt, last_error, reply, enqueued_at`

func scanOutbox(row interface{ Scan(...any) error }) (OutboxMessage, error) {
	var m OutboxMessage
	var objects, reply []byte
	var next int64
	var enqueued string
	if err := row.Scan(&m.ID, &m.Peer, &m.TransactionID, &m.MessageKey, &objects, &m.Status, &m.Attempts, &next, &m.LastError, &reply, &enqueued); err != nil {
		return OutboxMessage{}, err
	}
	var err error
	if m.Objects, err = decodeObjects(objects); err != nil {
		return OutboxMessage{}, err
	}
	if m.Reply, err = decodeObjects(reply); err != nil {
		return OutboxMessage{}, err
	}
	m.NextAttempt = time.Unix(0, next)
	m.EnqueuedAt, _ = time.Parse(time.RFC3339Nano, enqueued)
	return m, nil
}

func (s *Store) queryOutbox(ctx context.Context, query string, args ...any) ([]OutboxMessage, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxMessage
	for rows.Next() {
		m, err := scanOutbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// GetOutbox returns one outbox message.
func (s *Store) GetOutbox(ctx context.Context, id int64) (OutboxMessage, error) {
	m, err := scanOutbox(s.db.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OutboxMessage{}, fmt.Errorf("%w: outbox message %d", ErrNotFound, id)
	}
	return m, err
}

// PendingOutbox returns every message not yet delivered or failed, oldest
// first.
func (s *Store) PendingOutbox(ctx context.Context) ([]OutboxMessage, error) {
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE status = 'pending' ORDER BY id`)
}

// headOnly restricts a query on outbox o to the oldest pending message of
// each (peer, transaction): messages of one transaction are delivered in
// the order they were enqueued, so a retried event never arrives after
// its successor, while other transactions are not held up.
const headOnly = ` AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.status = 'pending'
	AND p.peer = o.peer AND p.transaction_id = o.transaction_id AND p.id < o.id)`

// DueOutbox returns up to limit pending messages that are due at t, that
// no attempt holds a lease on, and that are the oldest pending message of
// their peer and transaction; oldest first.
func (s *Store) DueOutbox(ctx context.Context, t time.Time, limit int) ([]OutboxMessage, error) {
	n := t.UnixNano()
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox o
		WHERE status = 'pending' AND next_attempt <= ? AND lease_until <= ?`+headOnly+` ORDER BY id LIMIT ?`, n, n, limit)
}

// NextOutboxAttempt returns the earliest time a message DueOutbox would
// return becomes due (its next attempt, or the end of a lease held on
// it), and false when nothing is pending.
func (s *Store) NextOutboxAttempt(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MIN(MAX(next_attempt, lease_until)) FROM outbox o WHERE status = 'pending'`+headOnly).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: outbox: %w", err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return time.Unix(0, next.Int64), true, nil
}

// OutboxHead reports whether message id is the oldest pending message of
// its peer and transaction.
func (s *Store) OutboxHead(ctx context.Context, id int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox o WHERE id = ? AND status = 'pending'`+headOnly, id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: outbox: %w", err)
	}
	return n == 1, nil
}

// ReleaseOutbox drops the lease on message id, leaving it due.
func (s *Store) ReleaseOutbox(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE outbox SET lease_until = 0 WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: release outbox %d: %w", id, err)
	}
	return nil
}

// LeaseOutbox claims a pending, due message for one attempt until the
// lease ends. It reports false when the message is not pending or another
// attempt holds it, so two workers (or two processes sharing the
// database) never deliver one message at once. A lease left behind by a
// crash simply expires.
func (s *Store) LeaseOutbox(ctx context.Context, id int64, t, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE outbox SET lease_until = ?
		WHERE id = ? AND status = 'pending' AND lease_until <= ?`, until.UnixNano(), id, t.UnixNano())
	if err != nil {
		return false, fmt.Errorf("store: lease outbox %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// MarkOutboxDelivered records that message id was delivered with reply.
func (s *Store) MarkOutboxDelivered(ctx context.Context, id int64, reply [][]byte) error {
	body, err := encodeObjects(reply)
	if err != nil {
		return err
	}
	return s.finishOutbox(ctx, `UPDATE outbox SET status = 'delivered', reply = ?, attempts = attempts + 1, lease_until = 0, last_error = '', finished_at = ?
		WHERE id = ? AND status = 'pending'`, id, body, now(), id)
}

// MarkOutboxFailed records that message id will not be delivered (the
// peer refused it). The row stays, so nothing is lost.
func (s *Store) MarkOutboxFailed(ctx context.Context, id int64, lastError string) error {
	return s.finishOutbox(ctx, `UPDATE outbox SET status = 'failed', attempts = attempts + 1, lease_until = 0, last_error = ?, finished_at = ?
		WHERE id = ? AND status = 'pending'`, id, lastError, now(), id)
}

// RetryOutbox records a failed attempt of message id and when to try again.
func (s *Store) RetryOutbox(ctx context.Context, id int64, next time.Time, lastError string) error {
	return s.finishOutbox(ctx, `UPDATE outbox SET attempts = attempts + 1, next_attempt = ?, lease_until = 0, last_error = ?
		WHERE id = ? AND status = 'pending'`, id, next.UnixNano(), lastError, id)
}

func (s *Store) finishOutbox(ctx context.Context, query string, id int64, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("store: outbox %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: outbox message %d is not pending", ErrConflict, id)
	}
	return nil
}

// InboxReply returns the reply recorded for a message received from
// fromOrg under messageKey, or ErrNotFound.
func (s *Store) InboxReply(ctx context.Context, fromOrg, messageKey string) ([][]byte, error) {
	var body []byte
	err := s.db.QueryRowContext(ctx, `SELECT reply FROM inbox WHERE from_org = ? AND message_key = ?`, fromOrg, messageKey).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: inbox message %s from %s", ErrNotFound, messageKey, fromOrg)
	}
	if err != nil {
		return nil, fmt.Errorf("store: inbox: %w", err)
	}
	return decodeObjects(body)
}

// PutInbox records the reply to a message received from fromOrg. A second
// record for the same message keeps the first reply and returns it, so
// the answer to a message never changes once given.
func (s *Store) PutInbox(ctx context.Context, fromOrg, messageKey, transactionID string, reply [][]byte) ([][]byte, error) {
	body, err := encodeObjects(reply)
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO inbox(from_org, message_key, transaction_id, reply, received_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, fromOrg, messageKey, transactionID, body, now()); err != nil {
		return nil, fmt.Errorf("store: inbox: %w", err)
	}
	return s.InboxReply(ctx, fromOrg, messageKey)
}
