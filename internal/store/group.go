package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Group commit.
//
// Every Update is one database transaction, and every commit is one fsync
// of the WAL (synchronous=FULL). When several goroutines write at once
// (eight agents' acts, the peer's messages, the outbox worker), they used
// to queue on the write lock and commit one after the other, each writing
// the same hot pages (the right-most leaves of objects, events and outbox)
// and paying its own fsync. Now the writers that are waiting when the
// previous commit ends are written as one SQLite transaction: the first
// to get the lock (the leader) runs each waiting Update's function in
// turn, each inside a savepoint of its own, and commits once for all.
//
// What each caller sees is unchanged:
//   - its function runs alone against the database as the previous
//     functions left it, exactly as if the Updates had run one after the
//     other (they do: one goroutine, one transaction, in queue order);
//   - a function that returns an error (a refusal, a conflict) or panics
//     is rolled back to its savepoint, leaving no trace, and only its
//     caller sees the error (or the panic, raised again in its own
//     goroutine); the others commit;
//   - Update returns nil only once the commit that holds its writes is
//     durable, and an error if that commit failed, for every member of
//     the group alike (as a failed commit of its own would);
//   - an Update whose context ended while it waited is not run.
//
// If a savepoint cannot be rolled back (SQLite gave up the whole
// transaction, on an I/O error say), the group's transaction is rolled
// back and every member not yet answered gets that error: nothing of
// theirs was committed.
//
// A group holds at most maxGroup functions, so a leader's own caller
// waits for a bounded amount of others' work. Alone, an Update costs what
// it did: no savepoints are taken for a group of one.

// errGroupAbandoned answers an Update whose group's leader stopped before
// committing (see runGroup).
var errGroupAbandoned = errors.New("store: write abandoned: another write in its group stopped its goroutine")

// maxGroup bounds the Updates committed together.
const maxGroup = 32

// update is one caller's Update, queued for a leader.
type update struct {
	s        *Store
	ctx      context.Context
	fn       func(*Txn) error
	err      error
	panicked any
	answered bool // finish was called; read and written by the leader only
	done     chan struct{}
	// after are the functions fn asked to run once its writes are
	// committed (Txn.AfterCommit), run by Update's caller.
	after []func()
}

// group is the queue of waiting Updates and the leader token.
type group struct {
	mu    sync.Mutex
	queue []*update
	// lead holds a token while a leader runs a group: acquiring it is
	// sending into the one-slot buffer.
	lead chan struct{}
}

// Update runs fn in one database transaction, committing if fn returns nil.
// Updates that wait at the same moment may share the transaction and its
// commit (see Group commit above); each is still all or nothing.
func (s *Store) Update(ctx context.Context, fn func(*Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u := &update{s: s, ctx: ctx, fn: fn, done: make(chan struct{})}
	s.group.mu.Lock()
	s.group.queue = append(s.group.queue, u)
	s.group.mu.Unlock()
	for {
		select {
		case <-u.done:
			return u.committed()
		case s.group.lead <- struct{}{}:
		}
		// Leader: unless a leader before us answered u meanwhile, run the
		// queue, u among it (u leaves the queue only in a group).
		select {
		case <-u.done:
			<-s.group.lead
			return u.committed()
		default:
		}
		s.lead()
		// u was in the group unless more than maxGroup were ahead of it;
		// then it waits again (or leads the next group).
	}
}

// lead takes up to maxGroup waiting Updates off the queue, runs them as
// one group, and gives the leader token back.
func (s *Store) lead() {
	defer func() { <-s.group.lead }()
	s.group.mu.Lock()
	n := min(len(s.group.queue), maxGroup)
	batch := s.group.queue[:n:n]
	s.group.queue = s.group.queue[n:]
	if len(s.group.queue) == 0 {
		s.group.queue = nil
	}
	s.group.mu.Unlock()
	s.runGroup(batch)
}

// result is what Update returns to u's caller: its error, or its panic
// raised again in the caller's own goroutine.
func (u *update) result() error {
	if u.panicked != nil {
		panic(u.panicked)
	}
	return u.err
}

// committed is result, with the functions u asked to run after its
// commit run first when it committed.
func (u *update) committed() error {
	err := u.result()
	if err == nil {
		for _, f := range u.after {
			f()
		}
	}
	return err
}

// finish answers u.
func (u *update) finish(err error) {
	u.answered = true
	u.err = err
	u.s.forgetKeyVersion(u.ctx) // objects.go; committed or not, as a failed commit may have
	close(u.done)
}

// finishAt answers u, committed, with n as the key records' number its
// memo holds (holdKeyVersion), set before its caller resumes.
func (u *update) finishAt(n int64) {
	u.answered = true
	u.s.holdKeyVersion(u.ctx, n)
	close(u.done)
}

// runGroup runs batch in one transaction and answers every member. Called
// by the holder of the leader token.
func (s *Store) runGroup(batch []*update) {
	// A function that never returns to runGroup (runtime.Goexit, as a
	// test's t.Fatal calls) leaves the rest unanswered; they are answered
	// here, so no caller waits for good.
	defer func() {
		for _, u := range batch {
			if !u.answered {
				u.finish(errGroupAbandoned)
			}
		}
	}()
	live := batch[:0:0]
	for _, u := range batch {
		if err := u.ctx.Err(); err != nil {
			u.finish(err)
			continue
		}
		live = append(live, u)
	}
	if len(live) == 0 {
		return
	}
	tx, err := s.beginWrite(detach(live[0].ctx))
	if err != nil {
		for _, u := range live {
			u.finish(err)
		}
		return
	}
	defer tx.Rollback() // after a commit, or a rollback below, a no-op
	grouped := len(live) > 1
	var ok []*update
	for i, u := range live {
		t := &Txn{tx: tx, ctx: detach(u.ctx), s: s, u: u}
		if grouped {
			if _, err := t.exec(`SAVEPOINT grp`); err != nil {
				s.abandon(tx, ok, live[i:], err)
				return
			}
		}
		err := u.run(t)
		if err == nil && u.panicked == nil {
			if grouped {
				if _, err := t.exec(`RELEASE grp`); err != nil {
					s.abandon(tx, ok, live[i:], err)
					return
				}
			}
			ok = append(ok, u)
			continue
		}
		if !grouped {
			tx.Rollback()
			u.finish(err)
			return
		}
		_, rerr := t.exec(`ROLLBACK TO grp`)
		if rerr == nil {
			_, rerr = t.exec(`RELEASE grp`)
		}
		u.finish(err)
		if rerr != nil {
			s.abandon(tx, ok, live[i+1:], fmt.Errorf("store: group commit: rolling back one update: %w", rerr))
			return
		}
	}
	if len(ok) == 0 {
		return
	}
	// The key records' number as this commit leaves it, read on the warm
	// writer connection for the members that hold one (WithKeyVersionMemo):
	// read after the commit on a pool connection instead, it costs a read
	// transaction on a page cache the commit emptied, several an act.
	var version int64
	held := false
	for _, u := range ok {
		if keyVersionMemoOf(u.ctx) != nil {
			t := &Txn{tx: tx, ctx: detach(u.ctx), s: s, u: u}
			held = t.queryRow(keyVersionQuery).Scan(&version) == nil // prepared once
			break
		}
	}
	err = tx.Commit()
	if err == nil {
		s.commits.Add(1)
	}
	for _, u := range ok {
		if err == nil && held {
			u.finishAt(version)
			continue
		}
		u.finish(err)
	}
}

// abandon rolls the group's transaction back and answers every member not
// yet answered, those that had succeeded and those not yet run, with err.
func (s *Store) abandon(tx *sql.Tx, ran, rest []*update, err error) {
	tx.Rollback()
	for _, u := range ran {
		u.finish(err)
	}
	for _, u := range rest {
		u.finish(err)
	}
}

// run calls u's function, turning a panic into u.panicked.
func (u *update) run(t *Txn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			u.panicked = p
		}
	}()
	if err := u.fn(t); err != nil {
		return err
	}
	return t.settleCounts() // budgetsums.go: the totals commit with the rows they count
}

// beginWrite begins a write transaction on the writer connection, opening
// it first if need be. Called by the holder of the leader token.
//
// Every write of this process goes through one connection. In WAL mode a
// connection empties its page cache whenever it starts reading after
// another connection committed, so writes spread over the pool's
// connections found their caches empty and read every page again from the
// file (a system call a page); the writer connection, the only one that
// commits, keeps its cache from one write to the next.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if err := s.openWriter(ctx); err != nil {
		return nil, err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		// Whatever went wrong, the next write starts on a fresh
		// connection.
		s.closeWriter()
	}
	return tx, err
}

// openWriter opens the writer connection if none is open. Called by the
// holder of the leader token.
func (s *Store) openWriter(ctx context.Context) error {
	if s.writer != nil {
		return nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	s.writer = c
	return nil
}

// closeWriter closes the writer connection and the reads prepared on it.
// Called by the holder of the leader token.
func (s *Store) closeWriter() {
	for _, st := range s.writerStmts {
		st.Close()
	}
	s.writerStmts = nil
	if s.writer != nil {
		s.writer.Close()
		s.writer = nil
	}
}

// Reads on the idle writer.
//
// SQLite empties a connection's page cache at the start of each read
// that follows another connection's commit (its rule in WAL mode), and
// every act commits: a read on a pool connection found each row from the
// root of its b-tree, page by page by system call, and a b-tree is a
// level or two deeper at a million transactions than at ten (reads of
// instruct_settlement's pages: 107 at 10 transactions, 140-150 at a
// million; docs/performance.md). The writer connection commits every
// write of this process, so its cache is never emptied by them: it holds
// the pages the acts touch (the numbered tables' right edges, the
// b-trees' upper levels), up to cacheSize.
//
// So a read of one row (queryRow) or a list read in one go (all) runs on
// the writer when no write holds it, and on a pool connection when one
// does: it takes the leader token only if it is free, never waiting for
// it, so concurrent acts read as before and a write waits for at most one
// read, a short one: no statement reads the history whole
// (TestNoStatementReadsTheHistory), and reads of many transactions (list)
// stay on the pool. What a read sees is the same either way: the committed database
// (the token is free only between write transactions). A snapshot's reads
// stay in its own read transaction, on a pool connection.

// idleWriter returns query prepared on the writer connection, and the
// function that gives the writer back, when no write holds the writer;
// nil when one does or the statement cannot be prepared there.
func (s *Store) idleWriter(ctx context.Context, query string) (*sql.Stmt, func()) {
	select {
	case s.group.lead <- struct{}{}:
	default:
		return nil, nil
	}
	release := func() { <-s.group.lead }
	if err := s.openWriter(ctx); err != nil {
		release()
		return nil, nil
	}
	st, ok := s.writerStmts[query]
	if !ok {
		// Prepared on the pool too, once: Prepared lists every read.
		if _, err := s.stmt(ctx, query); err != nil {
			release()
			return nil, nil
		}
		var err error
		if st, err = s.writer.PrepareContext(ctx, query); err != nil {
			release()
			return nil, nil
		}
		if s.writerStmts == nil {
			s.writerStmts = map[string]*sql.Stmt{}
		}
		s.writerStmts[query] = st
	}
	return st, release
}
