package store

import (
	"context"
	"fmt"
)

// Footprint is what a database holds on the disk against the record it
// holds: how an operator sizes the disk for a year of trade, and what
// TestDatabaseStaysNearTheRecord (internal/record) measures.
type Footprint struct {
	// DatabaseBytes is the database file's size once its write-ahead log
	// is checkpointed into it (page count × page size), FreeBytes the part
	// of it on the free list (pages a deletion left, reused before the file
	// grows).
	DatabaseBytes, FreeBytes int64
	// RecordBytes is the exact bytes of the objects of transactions: what
	// `party export` writes of them, key records and mandates aside.
	RecordBytes int64
	// Transactions is how many transactions the database holds.
	Transactions int64
}

// Footprint checkpoints the write-ahead log into the database file (what
// SQLite does on its own every thousand pages; nothing waits for it but
// readers of the log) and measures the database against its record.
func (s *Store) Footprint(ctx context.Context) (Footprint, error) {
	var f Footprint
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return f, fmt.Errorf("store: checkpoint: %w", err)
	}
	var pages, free, size int64
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT page_count FROM pragma_page_count), (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_size FROM pragma_page_size),
		(SELECT COALESCE(SUM(LENGTH(body)), 0) FROM objects WHERE transaction_id IS NOT NULL), (SELECT COUNT(*) FROM transactions)`).Scan(&pages, &free, &size, &f.RecordBytes, &f.Transactions)
	if err != nil {
		return f, fmt.Errorf("store: footprint: %w", err)
	}
	f.DatabaseBytes, f.FreeBytes = pages*size, free*size
	return f, nil
}
