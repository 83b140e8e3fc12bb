package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// holdLeader starts an Update whose function waits until release is
// closed, and returns once that function runs: until then every other
// Update queues behind it. done receives the held Update's result.
func holdLeader(t *testing.T, s *Store, fn func(*Txn) error) (release chan struct{}, done chan error) {
	t.Helper()
	release, done = make(chan struct{}), make(chan error, 1)
	running := make(chan struct{})
	go func() {
		done <- s.Update(context.Background(), func(tx *Txn) error {
			close(running)
			<-release
			return fn(tx)
		})
	}()
	<-running
	return release, done
}

// queued waits until n Updates are queued behind the leader.
func queued(s *Store, n int) {
	for {
		s.group.mu.Lock()
		got := len(s.group.queue)
		s.group.mu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}

func groupTable(t *testing.T) *Store {
	t.Helper()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if _, err := s.db.Exec(`CREATE TABLE g(k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func insertKey(k string) func(*Txn) error {
	return func(tx *Txn) error {
		_, err := tx.exec(`INSERT INTO g(k) VALUES (?)`, k)
		return err
	}
}

func keys(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.db.Query(`SELECT k FROM g ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

// TestGroupCommit: Updates that wait together commit in one transaction,
// each as if alone: a refusal, a failed statement and a panic leave no
// trace and reach only their own caller, a later member sees an earlier
// member's writes, and one whose context ended while it waited never
// runs.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := groupTable(t)
	errRefused := errors.New("refused")
	release, first := holdLeader(t, s, insertKey("first"))
	before := s.Commits()

	cancelled, cancel := context.WithCancel(context.Background())
	ran := map[string]bool{}
	members := []struct {
		name string
		ctx  context.Context
		fn   func(*Txn) error
	}{
		{"ok1", context.Background(), insertKey("ok1")},
		{"refused", context.Background(), func(tx *Txn) error {
			if err := insertKey("refused")(tx); err != nil {
				return err
			}
			return errRefused
		}},
		{"panics", context.Background(), func(tx *Txn) error {
			if err := insertKey("panics")(tx); err != nil {
				return err
			}
			panic("boom")
		}},
		// ok1 is not committed yet, but this member runs after it in the
		// same transaction, so it sees it, as it would have alone.
		{"duplicate", context.Background(), insertKey("ok1")},
		{"cancelled", cancelled, func(tx *Txn) error {
			ran["cancelled"] = true
			return insertKey("cancelled")(tx)
		}},
		{"ok2", context.Background(), func(tx *Txn) error {
			var n int
			if err := tx.queryRow(`SELECT COUNT(*) FROM g WHERE k IN ('first', 'ok1')`).Scan(&n); err != nil {
				return err
			}
			if n != 2 {
				return errors.New("ok2 does not see the writes before it in its group")
			}
			return insertKey("ok2")(tx)
		}},
	}
	type outcome struct {
		err      error
		panicked any
	}
	results := make([]chan outcome, len(members))
	for i, m := range members {
		results[i] = make(chan outcome, 1)
		go func() {
			var o outcome
			defer func() {
				o.panicked = recover()
				results[i] <- o
			}()
			o.err = s.Update(m.ctx, m.fn)
		}()
		queued(s, i+1)
	}
	cancel()
	close(release)

	if err := <-first; err != nil {
		t.Fatalf("the held Update: %v", err)
	}
	got := map[string]outcome{}
	for i, m := range members {
		got[m.name] = <-results[i]
	}
	for _, name := range []string{"ok1", "ok2"} {
		if o := got[name]; o.err != nil || o.panicked != nil {
			t.Errorf("%s: %v, panic %v", name, o.err, o.panicked)
		}
	}
	if o := got["refused"]; !errors.Is(o.err, errRefused) {
		t.Errorf("refused: %v", o.err)
	}
	if o := got["panics"]; o.panicked != "boom" {
		t.Errorf("panics: the panic reached its caller as %v (error %v)", o.panicked, o.err)
	}
	if o := got["duplicate"]; o.err == nil {
		t.Error("duplicate: a second insert of ok1 in the same group succeeded")
	}
	if o := got["cancelled"]; !errors.Is(o.err, context.Canceled) || ran["cancelled"] {
		t.Errorf("cancelled: %v, ran %v", o.err, ran["cancelled"])
	}
	if k, want := keys(t, s), []string{"first", "ok1", "ok2"}; !slices.Equal(k, want) {
		t.Errorf("stored %v, want %v", k, want)
	}
	// The held Update committed alone, the six waiting behind it as one.
	if n := s.Commits() - before; n != 2 {
		t.Errorf("%d commits, want 2", n)
	}
}

// TestGroupAbandoned: when a member leaves the group's transaction
// unusable (here it ends it with a bare ROLLBACK; in life, an I/O error
// SQLite answers by rolling back), nothing of the group is committed and
// every member not yet answered, the one before it included, gets an
// error: none is told its write is durable.
func TestGroupAbandoned(t *testing.T) {
	t.Parallel()
	s := groupTable(t)
	release, first := holdLeader(t, s, insertKey("first"))
	fns := []func(*Txn) error{
		insertKey("a"),
		func(tx *Txn) error {
			if _, err := tx.tx.Exec(`ROLLBACK`); err != nil {
				return err
			}
			return errors.New("gave up")
		},
		insertKey("b"),
	}
	errs := make([]chan error, len(fns))
	for i, fn := range fns {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- s.Update(context.Background(), fn) }()
		queued(s, i+1)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range fns {
		if err := <-errs[i]; err == nil {
			t.Errorf("member %d: told its write committed", i)
		}
	}
	if k := keys(t, s); !slices.Equal(k, []string{"first"}) {
		t.Errorf("stored %v, want only the held Update's", k)
	}
	// The next write goes through.
	if err := s.Update(context.Background(), insertKey("after")); err != nil {
		t.Fatal(err)
	}
}

// TestWriterAndAnotherProcess: the writer connection keeps its page
// cache between writes; another process's writes in between (a principal's
// CLI beside serve, here a second Store on the same file) are still seen
// by the next write, which would otherwise overwrite them.
func TestWriterAndAnotherProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "party.db")
	a := open(t, path)
	if _, err := a.db.Exec(`CREATE TABLE g(k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	b := open(t, path)
	ctx := context.Background()
	for i, k := range []string{"a1", "b1", "a2", "b2", "a3"} {
		s := a
		if i%2 == 1 {
			s = b
		}
		if err := s.Update(ctx, insertKey(k)); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := a.Update(ctx, func(tx *Txn) error {
		return tx.queryRow(`SELECT COUNT(*) FROM g`).Scan(&n)
	}); err != nil || n != 5 {
		t.Fatalf("the writer sees %d rows (%v), want 5", n, err)
	}
}

// TestTempStoreInMemory: a group's savepoints keep the pages they change
// in memory (temp_store), not in a temporary file.
func TestTempStoreInMemory(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	var mode int
	if err := s.db.QueryRow(`PRAGMA temp_store`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("temp_store is %d, want 2 (memory)", mode)
	}
}

// TestGroupCommitUnderLoad: many writers at once, every third refused;
// every write told it committed is there and no refused one is, however
// the leaders happened to group them.
func TestGroupCommitUnderLoad(t *testing.T) {
	t.Parallel()
	s := groupTable(t)
	const writers, each = 16, 40
	errRefused := errors.New("refused")
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("w%02d-%02d", w, i)
				err := s.Update(context.Background(), func(tx *Txn) error {
					if err := insertKey(k)(tx); err != nil {
						return err
					}
					if i%3 == 0 {
						return errRefused
					}
					return nil
				})
				if (i%3 == 0) != errors.Is(err, errRefused) || err != nil && !errors.Is(err, errRefused) {
					errs <- fmt.Errorf("%s: %v", k, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := keys(t, s)
	want := writers * (each - (each+2)/3)
	if len(got) != want {
		t.Fatalf("%d rows, want %d", len(got), want)
	}
	for _, k := range got {
		var i int
		fmt.Sscanf(k[4:], "%d", &i)
		if i%3 == 0 {
			t.Errorf("refused write %s stored", k)
		}
	}
}

// TestAfterCommit: a function an Update asks to run after its commit runs
// once the writes are visible to another reader, and never for an Update
// rolled back, alone or in a group.
func TestAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "party.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saw := map[string]bool{}
	var mu sync.Mutex
	write := func(id string, fail bool) error {
		return s.Update(ctx, func(tx *Txn) error {
			if err := tx.CreateTransaction(id, "org_peer", "buyer", "ses_"+id[4:], "draft"); err != nil {
				return err
			}
			tx.AfterCommit(func() {
				// The commit is visible to a reader on another connection.
				_, err := s.GetTransaction(ctx, id)
				mu.Lock()
				saw[id] = err == nil
				mu.Unlock()
			})
			if fail {
				return errors.New("refused")
			}
			return nil
		})
	}
	if err := write("txn_000000000000000000000001", false); err != nil {
		t.Fatal(err)
	}
	if err := write("txn_000000000000000000000002", true); err == nil {
		t.Fatal("a failing update committed")
	}
	// In a group: one committed, one rolled back.
	release, done := holdLeader(t, s, func(*Txn) error { return nil })
	var wg sync.WaitGroup
	for i, fail := range []bool{false, true} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = write(fmt.Sprintf("txn_00000000000000000000001%d", i), fail) }()
	}
	queued(s, 2)
	close(release)
	<-done
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !saw["txn_000000000000000000000001"] || !saw["txn_000000000000000000000010"] {
		t.Fatalf("an after-commit function did not run, or ran before the commit was visible: %v", saw)
	}
	if _, ran := saw["txn_000000000000000000000002"]; ran {
		t.Fatal("an after-commit function ran for a rolled-back update")
	}
	if _, ran := saw["txn_000000000000000000000011"]; ran {
		t.Fatal("an after-commit function ran for a rolled-back member of a group")
	}
}
