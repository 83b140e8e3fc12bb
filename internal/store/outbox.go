package store

// The delivery outbox and inbox (migrations 3 and 7), used by the record
// engine through package delivery.
//
//	-- Messages this instance sends. A message is enqueued in the same
//	-- database transaction as the act it carries, so an act is never
//	-- stored without its message, nor a message without its act; it is
//	-- deleted in the same transaction that stores its reply, so a reply
//	-- is never marked delivered and then lost.
//	CREATE TABLE outbox (
//	  id             INTEGER PRIMARY KEY AUTOINCREMENT,
//	  peer           TEXT NOT NULL,      -- the receiving organisation
//	  transaction_id TEXT NOT NULL,      -- the correlation id ("" for none)
//	  message_key    TEXT NOT NULL,      -- what the receiver dedupes on
//	  objects        BLOB NOT NULL,      -- the objects' exact bytes (JSON array of base64)
//	  status         TEXT NOT NULL,      -- pending | failed (delivered rows are deleted)
//	  attempts       INTEGER NOT NULL,   -- attempts made so far
//	  next_attempt   INTEGER NOT NULL,   -- unix nanoseconds; due when <= now
//	  lease_until    INTEGER NOT NULL,   -- unix nanoseconds; an attempt in flight
//	  lease_owner    TEXT NOT NULL,      -- the process holding the lease
//	  act            BLOB,               -- the act the message carries, as its
//	                                     -- sender evaluated it (for renewal)
//	  last_error     TEXT NOT NULL,      -- why the last attempt failed (local only)
//	  reply          BLOB,               -- unused since migration 7
//	  enqueued_at    TEXT NOT NULL,
//	  finished_at    TEXT
//	);
//	-- Messages this instance received and answered, so that a redelivery
//	-- is answered with the first reply instead of being processed twice.
//	-- The row is written in the same database transaction as what the
//	-- message moved. reply_ids names the reply's objects, whose bytes the
//	-- record holds; reply holds bytes only for rows older than migration 7.
//	CREATE TABLE inbox (
//	  from_org       TEXT NOT NULL,
//	  message_key    TEXT NOT NULL,
//	  transaction_id TEXT NOT NULL,
//	  reply          BLOB NOT NULL,
//	  reply_ids      TEXT,               -- JSON array of object ids
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
	OutboxPending = "pending"
	OutboxFailed  = "failed"
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
	EnqueuedAt    time.Time
	// Act is what the sender stored beside the message about the act it
	// carries (the record engine: the act document and mandate it was
	// decided under), or nil.
	Act []byte
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

// Lease is an attempt's claim on an outbox message: until when, and by
// which process.
type Lease struct {
	Owner string
	Until time.Time
}

// Enqueue stores a message to send inside the database transaction of the
// act it carries, due at now, and returns it as stored. A non-zero lease
// enqueues it already claimed by the caller, which attempts it at once, so
// that no worker races it.
func (t *Txn) Enqueue(peer, transactionID, messageKey string, objects [][]byte, act []byte, now time.Time, lease Lease) (OutboxMessage, error) {
	if len(objects) == 0 {
		return OutboxMessage{}, errors.New("store: enqueue: a message carries at least one object")
	}
	body, err := encodeObjects(objects)
	if err != nil {
		return OutboxMessage{}, err
	}
	var until int64
	if !lease.Until.IsZero() {
		until = lease.Until.UnixNano()
	}
	enqueued := now.UTC().Format(time.RFC3339Nano)
	res, err := t.exec(`INSERT INTO outbox(peer, transaction_id, message_key, objects, act, status, next_attempt, lease_until, lease_owner, enqueued_at)
		VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)`, peer, transactionID, messageKey, body, act, now.UnixNano(), until, lease.Owner, enqueued)
	if err != nil {
		return OutboxMessage{}, fmt.Errorf("store: enqueue: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return OutboxMessage{}, fmt.Errorf("store: enqueue: %w", err)
	}
	// The message as GetOutbox would read it once committed, so that the
	// sender attempts it without reading back what it just wrote.
	m := OutboxMessage{ID: id, Peer: peer, TransactionID: transactionID, MessageKey: messageKey,
		Objects: objects, Status: OutboxPending, NextAttempt: time.Unix(0, now.UnixNano()), Act: act}
	m.EnqueuedAt, _ = time.Parse(time.RFC3339Nano, enqueued)
	return m, nil
}

// Delivered removes message id, inside the database transaction that
// stored what its reply moved: once the reply is in the record the
// message has no further use, and keeping its bytes would only copy the
// record.
func (t *Txn) Delivered(id int64) error {
	res, err := t.exec(`DELETE FROM outbox WHERE id = ? AND status = 'pending'`, id)
	if err != nil {
		return fmt.Errorf("store: outbox %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: outbox message %d is not pending", ErrConflict, id)
	}
	return nil
}

// Failed marks message id as refused for good, inside the database
// transaction that removed what it carried. The row stays, so the
// instance keeps a trace of what it tried and why it failed.
func (t *Txn) Failed(id int64, lastError string, now time.Time) error {
	res, err := t.exec(`UPDATE outbox SET status = 'failed', attempts = attempts + 1, lease_until = 0, lease_owner = '', last_error = ?, finished_at = ?
		WHERE id = ? AND status = 'pending'`, lastError, now.UTC().Format(time.RFC3339Nano), id)
	if err != nil {
		return fmt.Errorf("store: outbox %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: outbox message %d is not pending", ErrConflict, id)
	}
	return nil
}

// Rewrite replaces the objects of pending message id (a renewed act:
// a fresh decision and event in place of stale ones), keeping its place
// in its transaction's order, and makes it due at next.
func (t *Txn) Rewrite(id int64, messageKey string, objects [][]byte, act []byte, next time.Time) error {
	body, err := encodeObjects(objects)
	if err != nil {
		return err
	}
	res, err := t.exec(`UPDATE outbox SET objects = ?, message_key = ?, act = ?, next_attempt = ?, lease_until = 0, lease_owner = '', attempts = attempts + 1, last_error = 'renewed'
		WHERE id = ? AND status = 'pending'`, body, messageKey, act, next.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: outbox %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: outbox message %d is not pending", ErrConflict, id)
	}
	return nil
}

const outboxColumns = `id, peer, transaction_id, message_key, objects, status, attempts, next_attempt, last_error, enqueued_at, act`

func scanOutbox(row rowScanner) (OutboxMessage, error) {
	var m OutboxMessage
	var objects []byte
	var next int64
	var enqueued string
	if err := row.Scan(&m.ID, &m.Peer, &m.TransactionID, &m.MessageKey, &objects, &m.Status, &m.Attempts, &next, &m.LastError, &enqueued, &m.Act); err != nil {
		return OutboxMessage{}, err
	}
	var err error
	if m.Objects, err = decodeObjects(objects); err != nil {
		return OutboxMessage{}, err
	}
	m.NextAttempt = time.Unix(0, next)
	m.EnqueuedAt, _ = time.Parse(time.RFC3339Nano, enqueued)
	return m, nil
}

func (s *Store) queryOutbox(ctx context.Context, query string, args ...any) ([]OutboxMessage, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	rows, err := st.QueryContext(detach(ctx), args...)
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	return collect(rows, scanOutbox)
}

// GetOutbox returns one outbox message.
func (s *Store) GetOutbox(ctx context.Context, id int64) (OutboxMessage, error) {
	list, err := s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE id = ?`, id)
	if err != nil {
		return OutboxMessage{}, err
	}
	if len(list) == 0 {
		return OutboxMessage{}, fmt.Errorf("%w: outbox message %d", ErrNotFound, id)
	}
	return list[0], nil
}

// PendingOutbox returns every message not yet delivered or failed, oldest
// first.
func (s *Store) PendingOutbox(ctx context.Context) ([]OutboxMessage, error) {
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE status = 'pending' ORDER BY id`)
}

// TransactionOutbox returns the pending messages of one transaction,
// oldest first.
func (s *Store) TransactionOutbox(ctx context.Context, transactionID string) ([]OutboxMessage, error) {
	return s.queryOutbox(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE transaction_id = ? AND status = 'pending' ORDER BY id`, transactionID)
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
	st, err := s.stmt(ctx, `SELECT MIN(MAX(next_attempt, lease_until)) FROM outbox o WHERE status = 'pending'`+headOnly)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: outbox: %w", err)
	}
	if err := st.QueryRowContext(detach(ctx)).Scan(&next); err != nil {
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
	st, err := s.stmt(ctx, `SELECT COUNT(*) FROM outbox o WHERE id = ? AND status = 'pending'`+headOnly)
	if err != nil {
		return false, fmt.Errorf("store: outbox: %w", err)
	}
	if err := st.QueryRowContext(detach(ctx), id).Scan(&n); err != nil {
		return false, fmt.Errorf("store: outbox: %w", err)
	}
	return n == 1, nil
}

// LeaseOutbox claims a pending, due message for one attempt until the
// lease ends. It reports false when the message is not pending or another
// attempt holds it, so two workers never deliver one message at once.
func (s *Store) LeaseOutbox(ctx context.Context, id int64, t time.Time, lease Lease) (bool, error) {
	res, err := s.exec(ctx, `UPDATE outbox SET lease_until = ?, lease_owner = ?
		WHERE id = ? AND status = 'pending' AND lease_until <= ?`, lease.Until.UnixNano(), lease.Owner, id, t.UnixNano())
	if err != nil {
		return false, fmt.Errorf("store: lease outbox %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ReleaseOutbox drops the lease on message id, leaving it due at next.
func (s *Store) ReleaseOutbox(ctx context.Context, id int64, next time.Time) error {
	_, err := s.exec(ctx, `UPDATE outbox SET lease_until = 0, lease_owner = '', next_attempt = MIN(next_attempt, ?) WHERE id = ? AND status = 'pending'`, next.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: release outbox %d: %w", id, err)
	}
	return nil
}

// VoidLeases drops every lease not held by owner and makes those messages
// due at once. An instance calls it when it starts: a lease another
// process left behind belongs to a process that died (only one process
// serves a state directory), and waiting for it to run out would only
// delay the act it carries.
func (s *Store) VoidLeases(ctx context.Context, owner string, now time.Time) (int64, error) {
	res, err := s.exec(ctx, `UPDATE outbox SET lease_until = 0, lease_owner = '', next_attempt = MIN(next_attempt, ?)
		WHERE status = 'pending' AND lease_until > 0 AND lease_owner != ?`, now.UnixNano(), owner)
	if err != nil {
		return 0, fmt.Errorf("store: void leases: %w", err)
	}
	return res.RowsAffected()
}

// OutboxDueNow makes every pending message to peer that waits out a
// back-off due at t (not one another process holds leased), and returns
// the peers' count of such messages: the peer answered again, so what
// waited for it need not wait for its back-off to end.
func (s *Store) OutboxDueNow(ctx context.Context, peer string, t time.Time) (int64, error) {
	n := t.UnixNano()
	res, err := s.exec(ctx, `UPDATE outbox SET next_attempt = ? WHERE peer = ? AND status = 'pending' AND next_attempt > ? AND lease_until <= ?`, n, peer, n, n)
	if err != nil {
		return 0, fmt.Errorf("store: outbox: %w", err)
	}
	return res.RowsAffected()
}

// PeersWaiting returns the peers with a pending message waiting out a
// back-off at t.
func (s *Store) PeersWaiting(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := s.query(ctx, `SELECT DISTINCT peer FROM outbox WHERE status = 'pending' AND next_attempt > ?`, t.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("store: outbox: %w", err)
	}
	return collect(rows, scanString)
}

// RetryOutbox records a failed attempt of message id and when to try again.
func (s *Store) RetryOutbox(ctx context.Context, id int64, next time.Time, lastError string) error {
	res, err := s.exec(ctx, `UPDATE outbox SET attempts = attempts + 1, next_attempt = ?, lease_until = 0, lease_owner = '', last_error = ?
		WHERE id = ? AND status = 'pending'`, next.UnixNano(), lastError, id)
	if err != nil {
		return fmt.Errorf("store: outbox %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: outbox message %d is not pending", ErrConflict, id)
	}
	return nil
}

// PutInbox records, inside the database transaction of what the message
// moved, that the message received from fromOrg under messageKey was
// answered with the objects replyIDs (in order). The reply's bytes are
// read from the record when a redelivery asks again.
func (t *Txn) PutInbox(fromOrg, messageKey, transactionID string, replyIDs []string, now time.Time) error {
	if replyIDs == nil {
		replyIDs = []string{}
	}
	ids, err := json.Marshal(replyIDs)
	if err != nil {
		return err
	}
	res, err := t.exec(`INSERT INTO inbox(from_org, message_key, transaction_id, reply, reply_ids, received_at)
		VALUES (?, ?, ?, x'', ?, ?) ON CONFLICT DO NOTHING`, fromOrg, messageKey, transactionID, string(ids), now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("store: inbox: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: message %s from %s was answered already", ErrConflict, messageKey, fromOrg)
	}
	return nil
}

// InboxReply returns the reply recorded for a message received from
// fromOrg under messageKey, as the record holds its objects now, or
// ErrNotFound.
func (s *Store) InboxReply(ctx context.Context, fromOrg, messageKey string) ([][]byte, error) {
	var body []byte
	var ids sql.NullString
	var txn string
	st, err := s.stmt(ctx, `SELECT reply, reply_ids, transaction_id FROM inbox WHERE from_org = ? AND message_key = ?`)
	if err != nil {
		return nil, fmt.Errorf("store: inbox: %w", err)
	}
	err = st.QueryRowContext(detach(ctx), fromOrg, messageKey).Scan(&body, &ids, &txn)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: inbox message %s from %s", ErrNotFound, messageKey, fromOrg)
	}
	if err != nil {
		return nil, fmt.Errorf("store: inbox: %w", err)
	}
	if !ids.Valid {
		return decodeObjects(body)
	}
	var list []string
	if err := json.Unmarshal([]byte(ids.String), &list); err != nil {
		return nil, fmt.Errorf("store: inbox reply ids: %w", err)
	}
	out := make([][]byte, 0, len(list))
	for _, id := range list {
		// The reply's objects are the message's transaction's; one bound
		// to none (a key record) is found by its id alone.
		b, err := s.GetObject(ctx, txn, id)
		if errors.Is(err, ErrNotFound) {
			b, err = s.GetObject(ctx, "", id)
		}
		if err != nil {
			return nil, fmt.Errorf("store: inbox reply object %s: %w", id, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// PutInboxBytes records the reply to a message received from fromOrg as
// bytes, for a receiver whose replies are not objects of the record (the
// generic delivery.Inbox). A second record for the same message keeps the
// first reply and returns it, so the answer to a message never changes
// once given.
func (s *Store) PutInboxBytes(ctx context.Context, fromOrg, messageKey, transactionID string, reply [][]byte) ([][]byte, error) {
	body, err := encodeObjects(reply)
	if err != nil {
		return nil, err
	}
	if _, err := s.exec(ctx, `INSERT INTO inbox(from_org, message_key, transaction_id, reply, received_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, fromOrg, messageKey, transactionID, body, now()); err != nil {
		return nil, fmt.Errorf("store: inbox: %w", err)
	}
	return s.InboxReply(ctx, fromOrg, messageKey)
}

// OutboxWaiting returns how many messages to peer are pending.
func (s *Store) OutboxWaiting(ctx context.Context, peer string) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM outbox WHERE peer = ? AND status = 'pending'`, peer).Scan(&n)
	return n, err
}
