package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// A new database is written as a copy of one the migrations built, not
// migrated on its own: twenty migrations of some eighty schema changes,
// each reloading the schema, were most of what opening a new database
// cost, and a process that creates many (the tests: each instance is one)
// spent a quarter of its CPU there under -race. The first database a
// process creates is migrated as before, beside its path, and its bytes
// are kept; later ones are those bytes. The copy is the migrations' own
// output, so the schema keeps one source; TestFreshDatabaseIsTheMigratedOne
// compares the two in sqlite_master. Each is written beside its path and
// linked into place, so two processes creating one database at once find
// one whole file; wherever this route cannot be taken, OpenWith migrates
// the file in place as before.

var fresh struct {
	mu    sync.Mutex
	bytes []byte // a closed, fully migrated, empty database file
}

// createFresh writes a fully migrated database at path when nothing is
// there, on the disk before it is in place unless noSync. It reports
// nothing: where it cannot, the caller's migrations do the work (and
// report what stops them).
func createFresh(path string, noSync bool) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		sweepCopies(path)
		return
	}
	var b [8]byte
	rand.Read(b[:])
	tmp := path + ".new-" + hex.EncodeToString(b[:])
	defer os.Remove(tmp)
	fresh.mu.Lock()
	kept := fresh.bytes
	fresh.mu.Unlock()
	if kept == nil {
		built, err := migrateNew(tmp)
		if err != nil {
			return
		}
		fresh.mu.Lock()
		fresh.bytes = built
		fresh.mu.Unlock()
	} else if err := os.WriteFile(tmp, kept, 0o644); err != nil {
		return
	}
	// In WAL mode a commit waits for the log, not the database file, so
	// the copy's bytes are made durable here, and its name after the link.
	if !noSync && syncPath(tmp) != nil {
		return
	}
	// A link, unlike a rename, never replaces a database another process
	// created meanwhile.
	if os.Link(tmp, path) == nil && !noSync {
		syncPath(filepath.Dir(path))
	}
}

// sweepCopies removes what a creation of the database at path left
// beside it when its process stopped between writing the copy and
// removing it (path.new-…, and its journal). Only once the database is
// there: a process still creating one then finds its link refused, or
// its copy gone, and opens the database that is there, as it would have.
func sweepCopies(path string) {
	left, _ := filepath.Glob(path + ".new-*")
	for _, f := range left {
		os.Remove(f)
	}
}

// syncPath waits for the disk to hold the file or directory at path.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// migrateNew creates a database at path, applies every migration, closes
// it and returns its bytes. Its journal is the default rollback journal,
// so once closed the file alone is the whole database (OpenWith turns WAL
// on when it opens the copy).
func migrateNew(path string) ([]byte, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=page_size("+pageSize+")&_pragma=synchronous(OFF)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	s := &Store{database: &database{db: db}}
	err = s.migrate(context.Background())
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
