package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Approval request statuses. Whether a granted approval has since expired is
// read from the approval object itself, not stored.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// ApprovalRequest is an agent's request that a principal approve one act.
type ApprovalRequest struct {
	ID            string
	MandateID     string
	TransactionID string
	ActionHash    string
	Act           []byte // canonical bytes of the act document
	Rules         string // JSON: the approval rules the act matched
	Status        string
	ApprovalID    string // the signed approval object, once decided
	RequestedAt   string
	DecidedAt     string
	// Note says why the act is held beyond its mandate's approval rules
	// (one of the organisation's budgets), for the principal; "" when the
	// rules alone hold it.
	Note string
}

// FileApprovalRequest records r as a new pending request, unless a request
// for the same act (its mandate and action hash) is pending already: then
// that one is returned, and filed is false. The look and the insert are
// one write transaction, so that two filings of one act at the same moment
// (two agents, or an agent and the instance holding an act it answers)
// leave one pending request, not one each, and the principal is asked
// once.
func (s *Store) FileApprovalRequest(ctx context.Context, r ApprovalRequest) (held ApprovalRequest, filed bool, err error) {
	var txn any
	if r.TransactionID != "" {
		txn = r.TransactionID
	}
	err = s.Update(ctx, func(tx *Txn) error {
		if txn != nil {
			if err := tx.number(r.TransactionID); err != nil {
				return err
			}
		}
		// By the act's own index: the mandate's (migration 28) would walk
		// every request under the mandate, in time order, to this act's.
		cond, args := actKey(r.TransactionID, r.MandateID, r.ActionHash)
		prior, err := scanApproval(tx.queryRow(`SELECT `+approvalColumns+` FROM approval_requests INDEXED BY approval_requests_by_act
			WHERE `+cond+` AND status = 'pending' ORDER BY requested_at, rowid LIMIT 1`, args...))
		switch {
		case err == nil:
			held = prior
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		r.Status, r.ApprovalID, r.RequestedAt, r.DecidedAt = ApprovalPending, "", now(), ""
		if _, err := tx.exec(`INSERT INTO approval_requests(id, mandate_id, transaction_id, tseq, action_hash, act, rules, status, requested_at, note)
			VALUES (?1, ?2, ?3, `+txnSeqAt(3)+`, ?4, ?5, ?6, 'pending', ?7, ?8)`, r.ID, r.MandateID, txn, r.ActionHash, r.Act, r.Rules, r.RequestedAt, r.Note); err != nil {
			return err
		}
		held, filed = r, true
		return nil
	})
	if err != nil {
		return ApprovalRequest{}, false, fmt.Errorf("store: approval request: %w", err)
	}
	return held, filed, nil
}

// actKey is the condition that finds one act's requests (migration 30):
// its transaction's number (none for an act bound to no transaction), its
// mandate and its action hash, the key of approval_requests_by_act.
func actKey(txn, mandateID, actionHash string) (string, []any) {
	if txn == "" {
		return `tseq IS NULL AND mandate_id = ? AND action_hash = ?`, []any{mandateID, actionHash}
	}
	return `tseq = ` + txnSeq + ` AND mandate_id = ? AND action_hash = ?`, []any{txn, mandateID, actionHash}
}

const approvalColumns = `id, mandate_id, COALESCE(transaction_id, ''), action_hash, act, rules, status, COALESCE(approval_id, ''), requested_at, COALESCE(decided_at, ''), note`

// approvalFields are where approvalColumns scan to.
func approvalFields(r *ApprovalRequest) []any {
	return []any{&r.ID, &r.MandateID, &r.TransactionID, &r.ActionHash, &r.Act, &r.Rules, &r.Status, &r.ApprovalID, &r.RequestedAt, &r.DecidedAt, &r.Note}
}

func scanApproval(row rowScanner) (ApprovalRequest, error) {
	var r ApprovalRequest
	err := row.Scan(approvalFields(&r)...)
	return r, err
}

// GetApprovalRequest returns one request.
func (s *Store) GetApprovalRequest(ctx context.Context, id string) (ApprovalRequest, error) {
	r, err := scanApproval(s.queryRow(ctx, `SELECT `+approvalColumns+` FROM approval_requests WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return ApprovalRequest{}, fmt.Errorf("%w: approval request %s", ErrNotFound, id)
	}
	return r, err
}

// ApprovalRequests lists requests, newest last; status "" means all.
// A status is read on its index: pending requests cost what is pending.
func (s *Store) ApprovalRequests(ctx context.Context, status string) ([]ApprovalRequest, error) {
	if status == "" {
		return s.approvals(ctx, `ORDER BY requested_at, rowid`)
	}
	return s.approvals(ctx, `WHERE status = ? ORDER BY status, requested_at, rowid`, status)
}

// ApprovalRequestsShown lists what the approvals page shows: every
// pending request, oldest first, then the latest decided ones, at most
// decided, newest decision first. Its cost is what it returns, not the
// history: pending requests are read by their status and decided ones by
// their decision time, each on its index.
func (s *Store) ApprovalRequestsShown(ctx context.Context, decided int) ([]ApprovalRequest, error) {
	pending, err := s.approvals(ctx, `WHERE status = 'pending' ORDER BY status, requested_at, rowid`)
	if err != nil {
		return nil, err
	}
	latest, err := s.approvals(ctx, `WHERE decided_at IS NOT NULL ORDER BY decided_at DESC, rowid DESC LIMIT ?`, decided)
	if err != nil {
		return nil, err
	}
	return append(pending, latest...), nil
}

// ApprovalRequestsOfTransaction lists one transaction's requests, oldest
// first (its timeline), by the acts' index, which its number leads
// (migration 30).
func (s *Store) ApprovalRequestsOfTransaction(ctx context.Context, txn string) ([]ApprovalRequest, error) {
	return all(ctx, s, scanApproval, `SELECT `+approvalColumns+` FROM approval_requests INDEXED BY approval_requests_by_act WHERE tseq = `+txnSeq+` ORDER BY requested_at, rowid`, txn)
}

// ApprovalRequestsFor lists the requests for one exact act (its
// transaction, "" for none, mandate and action hash), oldest first, by the
// act's index (not the mandate's, which SQLite would otherwise take to
// spare the sort, reading every request under the mandate).
func (s *Store) ApprovalRequestsFor(ctx context.Context, txn, mandateID, actionHash string) ([]ApprovalRequest, error) {
	cond, args := actKey(txn, mandateID, actionHash)
	return all(ctx, s, scanApproval, `SELECT `+approvalColumns+` FROM approval_requests INDEXED BY approval_requests_by_act WHERE `+cond+` ORDER BY requested_at, rowid`, args...)
}

// DecideApproval decides request id in one write transaction: it reads
// the request, hands it to decide, which returns the status
// (ApprovalApproved or ApprovalRejected) and the signed approval object,
// and stores both. A request that is not pending is ErrConflict, and
// decide is not called; nothing is stored when decide fails. Read by the
// writer, whose page cache the acts' commits leave warm (a reader's is
// emptied after each commit, so a reader found the request from the
// root of its id's index again: a page read more at each level the index
// gains), and decided where it was read: no other decision can come
// between. The request moves from pending to approved or rejected once.
func (s *Store) DecideApproval(ctx context.Context, id string, decide func(ApprovalRequest) (status string, approval []byte, err error)) error {
	return s.Update(ctx, func(tx *Txn) error {
		r, err := scanApproval(tx.queryRow(`SELECT `+approvalColumns+` FROM approval_requests WHERE id = ?`, id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: approval request %s", ErrNotFound, id)
		case err != nil:
			return err
		case r.Status != ApprovalPending:
			return fmt.Errorf("%w: approval request %s is already %s", ErrConflict, id, r.Status)
		}
		status, approval, err := decide(r)
		if err != nil {
			return err
		}
		if status != ApprovalApproved && status != ApprovalRejected {
			return fmt.Errorf("store: cannot decide a request as %q", status)
		}
		info, err := putObject(tx, approval, "local")
		if err != nil {
			return err
		}
		res, err := tx.exec(`UPDATE approval_requests SET status = ?, approval_id = ?, decided_at = ? WHERE id = ? AND status = 'pending'`,
			status, info.ID, now(), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: approval request %s is already decided", ErrConflict, id)
		}
		return nil
	})
}

// AgentApprovalRequests returns the latest requests (newest first, at most
// limit; DefaultPage when limit is 0) under the mandates this instance
// issued to agentID: that agent's requests, as its approval resources list
// them (read again at every filing and decision while the agent is
// subscribed). Each mandate's latest are read by its index (migration 28)
// and the latest of them all kept: one query over the agent's mandates
// read every request ever filed under them and sorted them all for a page.
func (s *Store) AgentApprovalRequests(ctx context.Context, agentID string, limit int) ([]ApprovalRequest, error) {
	if limit <= 0 || limit > MaxPage {
		limit = DefaultPage
	}
	rows, err := s.query(ctx, `SELECT id FROM mandates WHERE subject_agent_id = ? AND origin = 'local'`, agentID)
	if err != nil {
		return nil, err
	}
	mandates, err := collect(rows, scanString)
	if err != nil {
		return nil, err
	}
	type filed struct {
		r     ApprovalRequest
		rowid int64
	}
	var all []filed
	for _, m := range mandates {
		rows, err := s.query(ctx, `SELECT rowid, `+approvalColumns+` FROM approval_requests WHERE mandate_id = ?
			ORDER BY requested_at DESC, rowid DESC LIMIT ?`, m, limit)
		if err != nil {
			return nil, err
		}
		latest, err := collect(rows, func(row rowScanner) (filed, error) {
			var f filed
			err := row.Scan(append([]any{&f.rowid}, approvalFields(&f.r)...)...)
			return f, err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, latest...)
	}
	slices.SortFunc(all, func(a, b filed) int {
		if c := strings.Compare(b.r.RequestedAt, a.r.RequestedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.rowid, a.rowid)
	})
	out := make([]ApprovalRequest, 0, min(limit, len(all)))
	for _, f := range all[:min(limit, len(all))] {
		out = append(out, f.r)
	}
	return out, nil
}

// ApprovalRequestsVersion returns a number that grows with every request
// filed and every request decided, whichever process wrote it: requests
// are never removed and are decided once, so the count of requests plus
// the count of decided ones only grows. A reader that saw the same number
// twice saw the same requests.
//
// The number is kept by triggers (migration 21) rather than counted: the
// approvals page reads it on every poll, and counting read every request
// ever filed.
func (s *Store) ApprovalRequestsVersion(ctx context.Context) (int64, error) {
	var n int64
	if err := s.queryRow(ctx, `SELECT n FROM approval_requests_version WHERE id = 1`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: approval requests version: %w", err)
	}
	return n, nil
}

// ApprovalRequestsDecidedSince returns the requests of a transaction
// decided at or after since (a decided_at value; "" for all), oldest
// decision first: what a principal decided since a reader last looked,
// whichever process stored it.
func (s *Store) ApprovalRequestsDecidedSince(ctx context.Context, since string) ([]ApprovalRequest, error) {
	return s.approvals(ctx, `WHERE decided_at >= ? AND transaction_id IS NOT NULL AND transaction_id != '' ORDER BY decided_at, rowid`, since)
}

// approvals reads the requests the clause (WHERE …, ORDER BY …) selects.
func (s *Store) approvals(ctx context.Context, clause string, args ...any) ([]ApprovalRequest, error) {
	return list(ctx, s, scanApproval, `SELECT `+approvalColumns+` FROM approval_requests `+clause, args...)
}
