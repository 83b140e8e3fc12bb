package bench

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partyd/party/internal/instance"
)

// BenchmarkPagesWritten shows where each act that writes puts its pages:
// on the buyer's database of a generated history of N transactions
// (-history.sizes, as BenchmarkHistory), it empties the write-ahead log,
// runs the act once (with its untimed preparation before), and reads the
// log back: each frame is one page one commit wrote, and SQLite's dbstat
// table names the b-tree each page belongs to. It reports the frames an
// act writes (pages/op) and logs them by b-tree and page type (-v).
//
//	TMPDIR=/var/tmp go test -run '^$' -bench PagesWritten -benchtime 3x -v ./internal/bench -history.sizes=100000 -history.buyer-only
//
// What to read in it: an index whose new entries go to a random place (a
// random id leading its key) writes one leaf an act wherever that lands,
// and at a million transactions that leaf is in no cache; an index keyed
// by the transaction's local number writes the leaves the acts before
// left warm. The count alone does not tell the two apart; the sizes do:
// run it at 10 000 and at 100 000 and compare (docs/performance.md, "A
// year of history"). Pages of objects, the largest table, are left out of
// the map (reading its pages would read the database), and so are pages
// the act allocated: both show as "objects or new".
func BenchmarkPagesWritten(b *testing.B) {
	sizes, err := historySizeList()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("txns=%d", n), func(b *testing.B) {
			p := newHistoryPair(b, n)
			path := filepath.Join(p.b.Node.Dir, instance.DatabaseFile)
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			names, pageSize, err := btreePages(db)
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range historyActs {
				if !writes[a.name] {
					continue
				}
				b.Run(a.name, func(b *testing.B) {
					var total int
					var last map[string]int
					for range b.N {
						run := a.prep(b, p)
						if err := emptyLog(db); err != nil {
							b.Fatal(err)
						}
						if err := run(); err != nil {
							b.Fatal(err)
						}
						frames, err := logFrames(path+"-wal", pageSize)
						if err != nil {
							b.Fatal(err)
						}
						last = map[string]int{}
						for _, pg := range frames {
							name, ok := names[pg]
							if !ok {
								name = "objects or new"
							}
							last[name]++
						}
						total += len(frames)
					}
					b.ReportMetric(float64(total)/float64(b.N), "pages/op")
					keys := make([]string, 0, len(last))
					for k := range last {
						keys = append(keys, k)
					}
					slices.Sort(keys)
					var sb strings.Builder
					for _, k := range keys {
						fmt.Fprintf(&sb, "\n\t%-48s %d", k, last[k])
					}
					b.Logf("pages the last run wrote, by b-tree:%s", sb.String())
				})
			}
		})
	}
}

// writes are the acts of historyActs that write.
var writes = map[string]bool{"propose_offer": true, "accept_offer": true, "issue_obligation": true,
	"instruct_settlement": true, "request_approval": true, "approve": true}

// btreePages maps each page of the database but those of objects to
// its b-tree and page type, and returns the page size.
func btreePages(db *sql.DB) (map[uint32]string, int, error) {
	var size int
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
		return nil, 0, err
	}
	rows, err := db.Query(`SELECT name, pageno, pagetype FROM dbstat WHERE name != 'objects'`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	names := map[uint32]string{}
	for rows.Next() {
		var name, typ string
		var pg uint32
		if err := rows.Scan(&name, &pg, &typ); err != nil {
			return nil, 0, err
		}
		names[pg] = name + " " + typ
	}
	return names, size, rows.Err()
}

// emptyLog checkpoints the write-ahead log into the database and
// truncates it, so that the log then holds only what comes after; it
// fails when a reader held the log (SQLite then truncates nothing).
func emptyLog(db *sql.DB) error {
	var busy, frames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil {
		return err
	}
	if busy != 0 {
		return fmt.Errorf("the write-ahead log is in use: %d frames, %d checkpointed", frames, done)
	}
	return nil
}

// logFrames reads the page number of each frame of the write-ahead log at
// path: a 32-byte header, then frames of a 24-byte header (the page
// number first, big-endian) and one page.
func logFrames(path string, pageSize int) ([]uint32, error) {
	wal, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []uint32
	for off := 32; off+24+pageSize <= len(wal); off += 24 + pageSize {
		out = append(out, binary.BigEndian.Uint32(wal[off:]))
	}
	return out, nil
}
