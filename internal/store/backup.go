package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// An online backup is written with SQLite's VACUUM INTO, not by copying
// the file. Copying party.db alone misses whatever the WAL holds, and
// copying it with its -wal beside it races the writer and the
// checkpointer. VACUUM INTO reads the whole database inside one read
// transaction, so the copy is the database as of one commit, whatever
// commits after it begins; in WAL mode a reader never blocks the writer,
// so `party serve` keeps acting while it runs, and the checkpointer only
// waits to reuse the part of the log the read still sees. The copy is
// written page by page from the b-trees, so it is also compacted (no free
// pages) and is one self-contained file, with no -wal or -shm beside it.
// The copy is named path.new-<random> (as createFresh names a new
// database) until it is whole and on the disk, then linked under path, so
// a crash never leaves half a copy under path.

// BackupSummary is what Backup wrote.
type BackupSummary struct {
	// Path is the backup's database file.
	Path string `json:"path"`
	// Bytes is its size.
	Bytes int64 `json:"database_bytes"`
	// Transactions is the number of transactions it holds.
	Transactions int `json:"transactions"`
}

// ErrBackupExists is returned by Backup when its path already exists.
var ErrBackupExists = errors.New("store: backup path already exists")

// Backup writes a consistent copy of the database to path, which must not
// exist, while other connections and processes keep reading and writing
// (see above: one read transaction, VACUUM INTO). The copy is written to
// a temporary file beside path, fsynced, linked into place (a link, unlike
// a rename, never replaces a file another process put there meanwhile)
// and the directory fsynced, so path names either nothing or the whole
// copy. The copy opens with Open like any database; it is at this
// binary's schema version, as the database it copies is once opened.
func (s *Store) Backup(ctx context.Context, path string) (BackupSummary, error) {
	if s.snap != nil {
		return BackupSummary{}, errors.New("store: backup of a snapshot")
	}
	if _, err := os.Lstat(path); err == nil {
		return BackupSummary{}, fmt.Errorf("%w: %s", ErrBackupExists, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	tmp := path + ".new-" + hex.EncodeToString(b[:])
	defer os.Remove(tmp)
	// ctx, not detach(ctx): unlike every other statement here, this one
	// reads the whole database, and a caller that gives up should stop it.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	// The copy is written in pages of pageSize whatever the database's
	// own: page_size cannot change a database in WAL mode, but VACUUM INTO
	// writes its new file at the size the connection asked for. So a
	// database created before pageSize moves to it by a backup restored.
	_, err = conn.ExecContext(ctx, `PRAGMA page_size = `+pageSize)
	if err == nil {
		_, err = conn.ExecContext(ctx, `VACUUM INTO ?`, tmp)
	}
	conn.Close()
	if err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	n, err := countTransactions(ctx, tmp)
	if err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: reading the copy: %w", err)
	}
	if err := syncPath(tmp); err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return BackupSummary{}, fmt.Errorf("%w: %s", ErrBackupExists, path)
		}
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	if err := os.Remove(tmp); err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	if err := syncPath(filepath.Dir(path)); err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return BackupSummary{}, fmt.Errorf("store: backup: %w", err)
	}
	return BackupSummary{Path: path, Bytes: fi.Size(), Transactions: n}, nil
}

// countTransactions counts the transactions of the closed database file
// at path, read as immutable: nothing else has it open, and nothing is
// written beside it (no -shm, no journal).
func countTransactions(ctx context.Context, path string) (int, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM transactions`).Scan(&n)
	return n, err
}
