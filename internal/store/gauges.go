package store

import (
	"context"
	"database/sql"
	"time"
)

// Gauges are the counts an operator's metrics read from the database at
// each scrape (package metrics): what waits, and where the transactions
// stand. Each is one indexed read of what is open or waiting, or of a
// count kept as it changes, never of the history; nothing here runs on
// an act's path.
type Gauges struct {
	// Outbox is, for each counterparty messages wait for, how many and
	// since when the oldest.
	Outbox []PeerQueue
	// ApprovalsPending counts the approval requests no principal has
	// decided yet; OldestApproval is when the oldest was filed (zero
	// when none waits).
	ApprovalsPending int
	OldestApproval   time.Time
	// Transactions counts the transactions held, by state; a state no
	// transaction is in any longer may be there at zero.
	Transactions map[string]int
	// ObligationsDue counts the obligations still owed (pending or
	// rejected) of open transactions whose due alert was raised;
	// ObligationsOverdue those whose overdue alert was (package record,
	// timing.go, decides both and records them in alerts).
	ObligationsDue, ObligationsOverdue int
}

// PeerQueue is the outbox's messages waiting for one counterparty.
type PeerQueue struct {
	Peer    string
	Pending int
	// Oldest is when the oldest of them was queued.
	Oldest time.Time
}

// Gauges reads the gauges.
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	g := Gauges{Transactions: map[string]int{}}
	each := func(query string, scan func(*sql.Rows) error) error {
		rows, err := s.query(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	// The bare enqueued_at is the row MIN(id) picked (SQLite's rule for
	// one min() aggregate): ids grow, so the lowest is the oldest.
	err := each(`SELECT peer, COUNT(*), MIN(id), enqueued_at FROM outbox WHERE status = 'pending' GROUP BY peer ORDER BY peer`, func(rows *sql.Rows) error {
		var q PeerQueue
		var id int64
		var at string
		if err := rows.Scan(&q.Peer, &q.Pending, &id, &at); err != nil {
			return err
		}
		q.Oldest, _ = time.Parse(time.RFC3339Nano, at)
		g.Outbox = append(g.Outbox, q)
		return nil
	})
	if err != nil {
		return g, err
	}
	var oldest string
	if err := s.queryRow(ctx, `SELECT COUNT(*), COALESCE(MIN(requested_at), '') FROM approval_requests WHERE status = 'pending'`).Scan(&g.ApprovalsPending, &oldest); err != nil {
		return g, err
	}
	if oldest != "" {
		g.OldestApproval, _ = time.Parse(time.RFC3339Nano, oldest)
	}
	// Kept by triggers (migration 23): counting them read every
	// transaction ever held.
	err = each(`SELECT state, n FROM transaction_states`, func(rows *sql.Rows) error {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return err
		}
		g.Transactions[state] = n
		return nil
	})
	if err != nil {
		return g, err
	}
	// Owed and open as package record defines them (timing.go: owed,
	// performing).
	err = each(`SELECT a.kind, COUNT(*) FROM transactions t
		JOIN obligation_states o ON o.tseq = t.seq
		JOIN alerts a ON a.subject_id = o.obligation_id
		WHERE a.kind IN ('obligation.due', 'obligation.overdue') AND o.state IN ('pending', 'rejected')
		AND t.state IN ('committed', 'in_performance', 'acceptance_pending', 'settlement_pending', 'exception_open')
		GROUP BY a.kind`, func(rows *sql.Rows) error {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			return err
		}
		if kind == "obligation.due" {
			g.ObligationsDue = n
		} else {
			g.ObligationsOverdue = n
		}
		return nil
	})
	return g, err
}

// ReadyProbe proves the database takes a write: it records when it was
// last probed (meta "ready_probe_at") in a write transaction of its own,
// committed like an act's. A full disk or a lock held past the busy
// timeout fails it.
func (s *Store) ReadyProbe(ctx context.Context, at time.Time) error {
	return s.Update(ctx, func(t *Txn) error { return t.SetMeta("ready_probe_at", at.UTC().Format(time.RFC3339Nano)) })
}
