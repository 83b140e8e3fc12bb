package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrRequestReused means a request id was presented again with other
// arguments: the caller must pick a new id for a new request.
var ErrRequestReused = errors.New("store: request id already used with other arguments")

// ErrRequestRunning means the first call with this request id has not
// finished (or the process stopped while it ran; see Claim).
var ErrRequestRunning = errors.New("store: request with this id is still running")

// Claim starts an idempotent call. If (scope, requestID) is new, it records
// the arguments' hash and returns found=false: the caller runs the call and
// then calls Finish. If the same id finished before with the same
// arguments, it returns found=true and the first result, and the caller
// records nothing. The same id with other arguments is ErrRequestReused.
//
// A claim left running by a crash stays running: the act may or may not
// have been recorded, and only the record can say which, so a retry under
// the same id is refused (ErrRequestRunning) rather than risk recording the
// act twice; the caller retries under a new id after reading the record.
func (s *Store) Claim(ctx context.Context, scope, requestID, argsHash string) (result []byte, found bool, err error) {
	res, err := s.exec(ctx, `INSERT INTO idempotency(scope, request_id, args_hash, state, created_at)
		VALUES (?, ?, ?, 'running', ?) ON CONFLICT DO NOTHING`, scope, requestID, argsHash, now())
	if err != nil {
		return nil, false, fmt.Errorf("store: claim: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil, false, nil
	}
	var held, state string
	var body []byte
	err = s.queryRow(ctx, `SELECT args_hash, state, result FROM idempotency WHERE scope = ? AND request_id = ?`, scope, requestID).
		Scan(&held, &state, &body)
	if err != nil {
		return nil, false, fmt.Errorf("store: claim: %w", err)
	}
	if held != argsHash {
		return nil, false, ErrRequestReused
	}
	if state != "done" {
		return nil, false, ErrRequestRunning
	}
	return body, true, nil
}

// Finish records the result of a claimed call.
func (s *Store) Finish(ctx context.Context, scope, requestID string, result []byte) error {
	res, err := s.exec(ctx, `UPDATE idempotency SET state = 'done', result = ? WHERE scope = ? AND request_id = ? AND state = 'running'`,
		result, scope, requestID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: request %s was not running", ErrConflict, requestID)
	}
	return nil
}

// Release forgets a claim whose call failed before recording anything, so
// the same request id can be retried.
func (s *Store) Release(ctx context.Context, scope, requestID string) error {
	_, err := s.exec(ctx, `DELETE FROM idempotency WHERE scope = ? AND request_id = ? AND state = 'running'`, scope, requestID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}
