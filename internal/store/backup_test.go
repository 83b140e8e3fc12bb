package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// backupEvents is how many events addTransaction gives each transaction.
const backupEvents = 3

// addTransaction writes transaction txn_<n> with its backupEvents events
// and their objects, in one write transaction: a copy that holds the
// transaction row and not all its events is not a consistent one.
func addTransaction(ctx context.Context, s *Store, n int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	txn := fmt.Sprintf("txn_%06d", n)
	if _, err := tx.ExecContext(ctx, `INSERT INTO transaction_numbers(id, seq) VALUES (?, ?)`, txn, n+1); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at, seq) VALUES (?, 'org_a', 'buyer', 'committed', ?, ?, ?)`, txn, now(), now(), n+1); err != nil {
		return err
	}
	for seq := 1; seq <= backupEvents; seq++ {
		id := fmt.Sprintf("evt_%06d_%d", n, seq)
		hash := fmt.Sprintf("h_%s", id)
		if _, err := tx.ExecContext(ctx, `INSERT INTO objects(id, object_type, transaction_id, tseq, content_hash, body, origin) VALUES (?, 'transaction_event', ?, ?, ?, ?, 'local')`,
			id, txn, n+1, hash, []byte(fmt.Sprintf(`{"n":%d,"sequence":%d}`, n, seq))); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO events(transaction_id, tseq, sequence, event_id, content_hash, event_type, to_state, appended_by, status) VALUES (?, ?, ?, ?, ?, 'agreement.direct', 'committed', 'org_a', 'recorded')`,
			txn, n+1, seq, id, hash); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// backupHolds opens the backup at path with Open and checks it: SQLite's
// integrity check passes, and every transaction it holds has all its
// events, each with its object. It returns the transactions' ids.
func backupHolds(t *testing.T, path string) []string {
	t.Helper()
	ctx := context.Background()
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(path + suffix); err == nil {
			t.Fatalf("a backup has a %s file beside it", suffix)
		}
	}
	b := open(t, path)
	var ok string
	if err := b.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
	txns, err := b.Transactions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range txns {
		evs, err := b.Events(ctx, x.ID)
		if err != nil || len(evs) != backupEvents {
			t.Fatalf("the backup holds %s with %d events (%v), want %d", x.ID, len(evs), err, backupEvents)
		}
		for _, e := range evs {
			if _, err := b.GetObject(ctx, x.ID, e.EventID); err != nil {
				t.Fatalf("the backup holds event %s of %s without its object: %v", e.EventID, x.ID, err)
			}
		}
		ids = append(ids, x.ID)
	}
	return ids
}

func TestBackupCopiesTheRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "party.db"))
	for n := range 5 {
		if err := addTransaction(ctx, s, n); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "backup.db")
	sum, err := s.Backup(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Path != out || sum.Transactions != 5 || sum.Bytes <= 0 {
		t.Fatalf("summary %+v", sum)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() != sum.Bytes {
		t.Fatalf("backup file: %v, %v; summary says %d bytes", fi, err, sum.Bytes)
	}
	if leftover, _ := filepath.Glob(out + ".new-*"); len(leftover) != 0 {
		t.Fatalf("temporary files left: %v", leftover)
	}
	if ids := backupHolds(t, out); len(ids) != 5 {
		t.Fatalf("the backup holds %v", ids)
	}
	// The same rows, byte for byte.
	b := open(t, out)
	for n := range 5 {
		txn, id := fmt.Sprintf("txn_%06d", n), fmt.Sprintf("evt_%06d_2", n)
		want, _ := s.GetObject(ctx, txn, id)
		got, err := b.GetObject(ctx, txn, id)
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s: %q (%v), want %q", id, got, err, want)
		}
	}
	if v, _ := b.Version(); v != len(migrations) {
		t.Fatalf("the backup is at version %d, want %d", v, len(migrations))
	}
}

func TestBackupRefusesAnExistingPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "party.db"))
	if err := addTransaction(ctx, s, 1); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(out, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, out); !errors.Is(err, ErrBackupExists) {
		t.Fatalf("backup over an existing file: %v", err)
	}
	if data, _ := os.ReadFile(out); string(data) != "keep me" {
		t.Fatalf("the existing file now holds %q", data)
	}
	// Nor an empty one, which VACUUM INTO itself would take.
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	if _, err := s.Backup(ctx, empty); !errors.Is(err, ErrBackupExists) {
		t.Fatalf("backup over an empty file: %v", err)
	}
	if leftover, _ := filepath.Glob(filepath.Join(dir, "*.new-*")); len(leftover) != 0 {
		t.Fatalf("temporary files left: %v", leftover)
	}
}

// TestBackupWhileWriting takes backups while another goroutine, on
// another connection, keeps committing transactions: each backup is the
// database as of one commit.
func TestBackupWhileWriting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "party.db"))
	for n := range 20 {
		if err := addTransaction(ctx, s, n); err != nil {
			t.Fatal(err)
		}
	}
	// The writer is another Store on the database, as `party serve` is
	// beside `party backup`.
	w := open(t, filepath.Join(dir, "party.db"))
	var wg sync.WaitGroup
	var written int
	var werr error
	wg.Go(func() {
		for n := 20; ctx.Err() == nil; n++ {
			if err := addTransaction(context.Background(), w, n); err != nil {
				werr = err
				return
			}
			written = n + 1
		}
	})
	var last int
	for i := range 4 {
		out := filepath.Join(dir, fmt.Sprintf("backup-%d.db", i))
		sum, err := s.Backup(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		ids := backupHolds(t, out)
		if len(ids) != sum.Transactions || sum.Transactions < 20 || sum.Transactions < last {
			t.Fatalf("backup %d holds %d transactions, says %d; the one before held %d", i, len(ids), sum.Transactions, last)
		}
		last = sum.Transactions
	}
	cancel()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("the writer committed %d transactions; the last backup held %d", written, last)
}

// TestBackupWritesPagesOfPageSize: a database created with 4 KiB pages
// (before pageSize) is copied in pages of pageSize, with its rows, so a
// backup restored moves it to them.
func TestBackupWritesPagesOfPageSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	old := filepath.Join(dir, "old.db")
	raw, err := sql.Open("sqlite", "file:"+old+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	s := open(t, old)
	if err := addTransaction(ctx, s, 1); err != nil {
		t.Fatal(err)
	}
	pages := func(s *Store) string {
		var n string
		if err := s.db.QueryRow(`PRAGMA page_size`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := pages(s); got != "4096" {
		t.Fatalf("the old database's pages are %s bytes, want 4096", got)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if _, err := s.Backup(ctx, copyPath); err != nil {
		t.Fatal(err)
	}
	if got := backupHolds(t, copyPath); len(got) != 1 {
		t.Errorf("the backup holds %v", got)
	}
	if got := pages(open(t, copyPath)); got != pageSize {
		t.Errorf("the backup's pages are %s bytes, want %s", got, pageSize)
	}
}
