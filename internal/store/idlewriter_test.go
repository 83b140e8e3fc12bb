package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// readCalls is the process's read system calls so far (/proc/self/io,
// syscr), ok false where there is no such file.
func readCalls(t *testing.T) (int64, bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("syscr: ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// TestReadAfterCommitOnTheWriter: a read right after a commit runs on
// the idle writer, whose page cache the commit did not empty, so it reads
// no page of the file again (idleWriter). On a pool connection, SQLite
// empties the cache at the start of such a read and each page it needs is
// one pread. Not parallel: the count is the process's.
func TestReadAfterCommitOnTheWriter(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	const n = 20
	for i := range n {
		id := fmt.Sprintf("txn_%024d", i)
		if err := s.Update(ctx, func(tx *Txn) error { return tx.CreateTransaction(id, "org_b", "buyer", "", "draft") }); err != nil {
			t.Fatal(err)
		}
	}
	var calls int64
	for i := range n {
		id := fmt.Sprintf("txn_%024d", i)
		if err := s.Update(ctx, func(tx *Txn) error { return tx.SetNotice(id, "proposed") }); err != nil {
			t.Fatal(err)
		}
		c0, ok := readCalls(t)
		if !ok {
			t.Skip("no /proc/self/io")
		}
		x, err := s.Notice(ctx, id)
		c1, _ := readCalls(t)
		c2, _ := readCalls(t) // what reading the counter itself counts
		c1 -= c2 - c1
		if err != nil || x != "proposed" {
			t.Fatalf("%s: %q, %v; want the notice committed", id, x, err)
		}
		calls += c1 - c0
	}
	// A stray read of the runtime's or the reading of /proc itself may
	// land in a window; a pool connection makes at least one per read.
	if calls > n/4 {
		t.Fatalf("%d read system calls over %d reads that each followed a commit; want none of the database's", calls, n)
	}
	if _, ok := s.writerStmts[`SELECT notice FROM transactions WHERE id = ?`]; !ok {
		t.Fatal("the read was not prepared on the writer")
	}
}

// TestReadDuringWriteDoesNotWait: a store read made while a write holds
// the writer (here, from inside the write's own function) runs on a pool
// connection at once, and sees the committed database, not the write
// under way; once the write commits, a read sees it.
func TestReadDuringWriteDoesNotWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	const id = "txn_000000000000000000000001"
	if err := s.Update(ctx, func(tx *Txn) error { return tx.CreateTransaction(id, "org_b", "buyer", "", "draft") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.SetNotice(id, "proposed"); err != nil {
			return err
		}
		x, err := s.Notice(ctx, id)
		if err != nil {
			return err
		}
		if x != "" {
			return fmt.Errorf("a read beside the write saw the notice %q it has not committed", x)
		}
		evs, err := s.Events(ctx, id)
		if err != nil || len(evs) != 0 {
			return fmt.Errorf("events beside the write: %v, %v", evs, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if x, err := s.Notice(ctx, id); err != nil || x != "proposed" {
		t.Fatalf("after the commit: %q, %v", x, err)
	}
}

// TestReadsAndWritesTogether: reads and writes from many goroutines at
// once, some reads on the writer and some on the pool, each read seeing a
// state some write committed (run with -race).
func TestReadsAndWritesTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	const txns, rounds = 8, 40
	states := []string{"", "proposed", "negotiating"}
	for i := range txns {
		id := fmt.Sprintf("txn_%024d", i)
		if err := s.Update(ctx, func(tx *Txn) error { return tx.CreateTransaction(id, "org_b", "buyer", "", "draft") }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*txns)
	for i := range txns {
		id := fmt.Sprintf("txn_%024d", i)
		wg.Go(func() {
			for r := range rounds {
				if err := s.Update(ctx, func(tx *Txn) error { return tx.SetNotice(id, states[(r+1)%len(states)]) }); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range rounds {
				x, err := s.Notice(ctx, id)
				if err == nil {
					_, err = s.Events(ctx, id)
				}
				if err == nil && !slices.Contains(states, x) {
					err = fmt.Errorf("%s read as %q", id, x)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(func() []error {
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		return all
	}()...); err != nil {
		t.Fatal(err)
	}
	for i := range txns {
		id := fmt.Sprintf("txn_%024d", i)
		if x, err := s.Notice(ctx, id); err != nil || x != states[rounds%len(states)] {
			t.Fatalf("%s: %q, %v", id, x, err)
		}
	}
}
