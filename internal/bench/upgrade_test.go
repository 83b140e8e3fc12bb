package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/partyd/party/internal/store"
)

// BenchmarkUpgrade measures what an operator of a long-lived instance
// waits for, on the buyer's database of a generated history of N
// transactions (-history.sizes, as BenchmarkHistory): `party backup` of it
// while it is open; the upgrade of a database from the release before
// store migration 31 (upgrade-31), which rebuilds the ledger's tables
// (obligation states, settlements, commitments, payments, their counts)
// keyed by their transaction's local number; from the release before
// store migration 29 (upgrade-29), which rebuilds objects and events
// keyed by their transaction's local number and keys the approval
// requests by it (30); from the release before
// store migration 27 (upgrade-27), which builds three indexes (27, 28),
// one of them read from every object, and then 29; the upgrade from the release before store
// migration 26 (upgrade-26), which rebuilds objects, the largest
// table, and events, keyed by transaction and id; and the upgrade from
// before migration 22 (upgrade), which rewrites every row of objects too
// and applies 23 to 29 after it (computing the budgets' running totals
// of every transaction on the way). Each is timed as the Open of the next
// `party serve`. See docs/deploy.md, "Upgrading a large database".
//
//	TMPDIR=/var/tmp go test -run '^$' -bench Upgrade -benchtime 1x -timeout 2h ./internal/bench
//
// The databases behind are made from backups: for upgrade-29, objects and
// events rebuilt as before 29 and version 29 forgotten; for upgrade-27,
// that and 27's and 28's indexes dropped; for upgrade-26, objects and
// events rebuilt as before 26 too and version 26 forgotten; for upgrade, that
// and stored_at added back to objects and filled with a time in the
// format it held (31 bytes a row), the migrations after 22 undone, and
// versions from 22 on forgotten; each file vacuumed, so that its rows are
// packed as a database written before the migration holds them. Each
// upgrade runs on a fresh copy.
func BenchmarkUpgrade(b *testing.B) {
	sizes, err := historySizeList()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("txns=%d", n), func(b *testing.B) {
			ctx := context.Background()
			p := newHistoryPair(b, n)
			dir := b.TempDir()
			live := p.b.Node.Org.Store
			b.Run("backup", func(b *testing.B) {
				var bytes int64
				for i := range b.N {
					s, err := live.Backup(ctx, filepath.Join(dir, fmt.Sprintf("backup-%d.db", i)))
					if err != nil {
						b.Fatal(err)
					}
					bytes = s.Bytes
				}
				b.ReportMetric(float64(bytes)/1e6, "MB")
			})
			want, err := live.Version()
			if err != nil {
				b.Fatal(err)
			}
			for _, u := range []struct {
				name string
				// undo takes a backup back to the version upgraded from.
				undo func(*testing.B, string)
				// upgraded fails b when an upgraded copy kept what the
				// migrations remove.
				upgraded func(b *testing.B, path string)
			}{
				// From the release before migration 31: the ledger's
				// tables rebuilt, keyed by the local number.
				{"upgrade-31", unmigrate31, func(b *testing.B, path string) {
					if indexHeld(b, path, "spend_by_transaction") || !columnHeld(b, path, "spend", "tseq") {
						b.Fatal("the upgrade left the ledger keyed by transaction id")
					}
				}},
				// From the release before migration 29: objects and
				// events rebuilt, keyed by the local number.
				{"upgrade-29", unmigrate29, func(b *testing.B, path string) {
					if !indexHeld(b, path, "transactions_by_seq") {
						b.Fatal("the upgrade left objects keyed by transaction id")
					}
				}},
				// From the release before migration 27: three indexes
				// built (27, 28), one of them over the objects at
				// issue, which reads all of objects once.
				{"upgrade-27", unmigrate27, func(b *testing.B, path string) {
					if !indexHeld(b, path, "objects_at_issue") || !indexHeld(b, path, "transactions_by_counterparty") || !indexHeld(b, path, "approval_requests_by_mandate") {
						b.Fatal("the upgrade left out migration 27's or 28's indexes")
					}
				}},
				// From the release before migration 26: objects and
				// events rebuilt, keyed by transaction and id.
				{"upgrade-26", unmigrate26, func(b *testing.B, path string) {
					if !indexHeld(b, path, "objects_by_key") {
						b.Fatal("the upgrade left objects keyed by id")
					}
				}},
				// From before migration 22: every row of objects
				// rewritten twice (22 and 26), and 23 to 25 between.
				{"upgrade", unmigrate, func(b *testing.B, path string) {
					if columnHeld(b, path, "objects", "stored_at") {
						b.Fatal("the upgrade left stored_at in objects")
					}
				}},
			} {
				// Made inside the sub-benchmark, so that one left out by
				// -bench is not made (an undo rewrites the database).
				behind := filepath.Join(dir, "behind-"+u.name+".db")
				b.Run(u.name, func(b *testing.B) {
					b.StopTimer()
					if _, err := os.Stat(behind); err != nil {
						if _, err := live.Backup(ctx, behind); err != nil {
							b.Fatal(err)
						}
						u.undo(b, behind)
					}
					b.ResetTimer()
					timeUpgrade(b, dir, behind, want, u.upgraded)
				})
				os.Remove(behind)
			}
		})
	}
}

// timeUpgrade times the Open that upgrades a fresh copy of the database at
// behind to version want, b.N times, and checks each copy with upgraded.
func timeUpgrade(b *testing.B, dir, behind string, want int, upgraded func(b *testing.B, path string)) {
	st, err := os.Stat(behind)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	for i := range b.N {
		path := filepath.Join(dir, fmt.Sprintf("upgrade-%d.db", i))
		copyFile(b, behind, path)
		b.StartTimer()
		s, err := store.Open(path)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if v, err := s.Version(); err != nil || v != want {
			b.Fatalf("upgraded to version %d (%v), want %d", v, err, want)
		}
		s.Close()
		upgraded(b, path)
		os.Remove(path)
	}
	b.ReportMetric(float64(st.Size())/1e6, "MB")
}

// indexHeld reports whether the database at path has an index called name.
func indexHeld(b *testing.B, path, name string) bool {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name = ?`, name).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n == 1
}

// undoneAfter22 is the last migration unmigrate undoes: every migration
// after 22 is undone with it, since the database's version is the
// highest it records and the upgrade would otherwise apply none.
const undoneAfter22 = 31

// unmigrate takes the database at path back to before migration 22, and
// so before those after it (23, the count of transactions by state; 24,
// three indexes; 25, the budgets' running totals, which the Open after it
// computes for every transaction that committed to pay; 26, objects keyed
// by transaction and id, which rewrites objects and events again; 27 and
// 28, three indexes; 29, objects and events keyed by number, rewritten
// once more; 30, approval requests keyed by number; 31, the ledger keyed
// by number), which the upgrade
// applies again.
func unmigrate(b *testing.B, path string) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var version int
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&version); err != nil {
		b.Fatal(err)
	}
	if version != undoneAfter22 {
		b.Fatalf("the database is at version %d; unmigrate undoes the migrations after 22 up to %d only: undo the newer ones too", version, undoneAfter22)
	}
	at := time.Date(2026, 12, 6, 12, 0, 0, 123456789, time.UTC).Format("2006-01-02T15:04:05.000000000Z")
	for _, q := range append(slices.Concat(undo31, undo30, undo29, undo27, undo26), []string{
		`ALTER TABLE objects ADD COLUMN stored_at TEXT NOT NULL DEFAULT ''`,
		`UPDATE objects SET stored_at = '` + at + `'`,
		`DROP TRIGGER transaction_states_created`,
		`DROP TRIGGER transaction_states_moved`,
		`DROP TRIGGER transaction_states_deleted`,
		`DROP TABLE transaction_states`,
		`DROP INDEX approval_requests_by_act`,
		`DROP INDEX withdrawals_by_decision`,
		`DROP INDEX forks_by_transaction`,
		`DROP TRIGGER budget_spend_in`,
		`DROP TRIGGER budget_spend_changed`,
		`DROP TRIGGER budget_spend_out`,
		`DROP TRIGGER budget_paid_in`,
		`DROP TRIGGER budget_paid_changed`,
		`DROP TRIGGER budget_paid_out`,
		`DROP TRIGGER budget_settlement_in`,
		`DROP TRIGGER budget_settlement_moved`,
		`DROP TRIGGER budget_settlement_out`,
		`DROP TRIGGER budget_transaction_in`,
		`DROP TRIGGER budget_transaction_moved`,
		`DROP TRIGGER budget_transaction_out`,
		`DROP TABLE spend_counts`,
		`DROP TABLE payment_counts`,
		`DROP TABLE budget_sums`,
		`DROP TABLE budget_dirty`,
		`DROP TABLE budget_backlog`,
		`CREATE INDEX spend_by_time ON spend(currency, at)`,
		`CREATE INDEX spend_by_counterparty ON spend(counterparty, currency)`,
		`CREATE INDEX spend_payments_by_counterparty ON spend_payments(counterparty, currency, at)`,
		`DELETE FROM schema_migrations WHERE version >= 22`,
		`VACUUM`,
	}...) {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	if !columnHeld(b, path, "objects", "stored_at") {
		b.Fatal("stored_at was not added back")
	}
}

// undo26 takes a database back to before migration 26: objects keyed by
// id, events naming their object so (run with foreign keys off, as
// SQLite's default leaves them on a connection that does not ask).
var undo26 = []string{
	`CREATE TABLE objects_old (
		id             TEXT PRIMARY KEY,
		object_type    TEXT NOT NULL,
		transaction_id TEXT,
		content_hash   TEXT NOT NULL,
		body           BLOB NOT NULL,
		origin         TEXT NOT NULL
	)`,
	`INSERT INTO objects_old(rowid, id, object_type, transaction_id, content_hash, body, origin)
		SELECT rowid, id, object_type, transaction_id, content_hash, body, origin FROM objects ORDER BY rowid`,
	`DROP TABLE objects`,
	`ALTER TABLE objects_old RENAME TO objects`,
	`CREATE INDEX objects_by_transaction ON objects(transaction_id, object_type)`,
	`CREATE INDEX key_objects ON objects(object_type) WHERE object_type = 'key_record' OR object_type = 'revocation_record'`,
	`CREATE INDEX obligation_responses_by_type ON objects(transaction_id, json_extract(CAST(body AS TEXT), '$.payload.response_type'))
		WHERE object_type = 'obligation_response'`,
	`CREATE TRIGGER key_objects_inserted AFTER INSERT ON objects
		WHEN NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END`,
	`CREATE TRIGGER key_objects_updated AFTER UPDATE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record') OR NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END`,
	`CREATE TRIGGER key_objects_deleted AFTER DELETE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END`,
	`CREATE TABLE events_old (
		transaction_id      TEXT NOT NULL REFERENCES transactions(id),
		sequence            INTEGER NOT NULL,
		event_id            TEXT NOT NULL UNIQUE REFERENCES objects(id),
		content_hash        TEXT NOT NULL,
		previous_event_hash TEXT,
		event_type          TEXT NOT NULL,
		from_state          TEXT,
		to_state            TEXT NOT NULL,
		appended_by         TEXT NOT NULL,
		status              TEXT NOT NULL CHECK (status IN ('pending','recorded')),
		PRIMARY KEY (transaction_id, sequence)
	) WITHOUT ROWID`,
	`INSERT INTO events_old SELECT transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status FROM events`,
	`DROP TABLE events`,
	`ALTER TABLE events_old RENAME TO events`,
	`CREATE INDEX events_by_type ON events(transaction_id, event_type, sequence)`,
}

// undo27 takes a database back to before migration 27: without the
// index of an agent's approval requests by mandate (28), that of
// transactions by counterparty and that of the objects at issue (27).
var undo27 = []string{
	`DROP INDEX approval_requests_by_mandate`,
	`DROP INDEX transactions_by_counterparty`,
	`DROP INDEX objects_at_issue`,
}

// undo29 takes a database back to before migration 29: objects and
// events keyed by transaction id, no local numbers (run with foreign keys
// off, as SQLite's default leaves them on a connection that does not ask).
var undo29 = []string{
	`CREATE TABLE objects_old (
		id             TEXT NOT NULL,
		object_type    TEXT NOT NULL,
		transaction_id TEXT,
		content_hash   TEXT NOT NULL,
		body           BLOB NOT NULL,
		origin         TEXT NOT NULL
	)`,
	`INSERT INTO objects_old(rowid, id, object_type, transaction_id, content_hash, body, origin)
		SELECT rowid, id, object_type, transaction_id, content_hash, body, origin FROM objects ORDER BY rowid`,
	`DROP TABLE objects`,
	`ALTER TABLE objects_old RENAME TO objects`,
	`CREATE UNIQUE INDEX objects_by_key ON objects(transaction_id, id)`,
	`CREATE UNIQUE INDEX objects_unbound ON objects(id) WHERE transaction_id IS NULL`,
	`CREATE UNIQUE INDEX objects_named ON objects(id) WHERE object_type IN ('offer', 'obligation', 'dispute')`,
	`CREATE INDEX objects_by_transaction ON objects(transaction_id, object_type)`,
	`CREATE INDEX key_objects ON objects(object_type) WHERE object_type = 'key_record' OR object_type = 'revocation_record'`,
	`CREATE INDEX obligation_responses_by_type ON objects(transaction_id, json_extract(CAST(body AS TEXT), '$.payload.response_type'))
		WHERE object_type = 'obligation_response'`,
	`CREATE INDEX objects_at_issue ON objects(transaction_id, object_type) WHERE object_type IN ('dispute', 'determination', 'exception')`,
	`CREATE TRIGGER key_objects_inserted AFTER INSERT ON objects
		WHEN NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END`,
	`CREATE TRIGGER key_objects_updated AFTER UPDATE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record') OR NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END`,
	`CREATE TRIGGER key_objects_deleted AFTER DELETE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END`,
	`CREATE TABLE events_old (
		transaction_id      TEXT NOT NULL REFERENCES transactions(id),
		sequence            INTEGER NOT NULL,
		event_id            TEXT NOT NULL,
		content_hash        TEXT NOT NULL,
		previous_event_hash TEXT,
		event_type          TEXT NOT NULL,
		from_state          TEXT,
		to_state            TEXT NOT NULL,
		appended_by         TEXT NOT NULL,
		status              TEXT NOT NULL CHECK (status IN ('pending','recorded')),
		PRIMARY KEY (transaction_id, sequence),
		UNIQUE (transaction_id, event_id),
		FOREIGN KEY (transaction_id, event_id) REFERENCES objects(transaction_id, id)
	) WITHOUT ROWID`,
	`INSERT INTO events_old SELECT transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status FROM events`,
	`DROP TABLE events`,
	`ALTER TABLE events_old RENAME TO events`,
	`CREATE INDEX events_by_type ON events(transaction_id, event_type, sequence)`,
	`DROP INDEX transactions_by_seq`,
	`ALTER TABLE transactions DROP COLUMN seq`,
	`DROP TABLE transaction_numbers`,
}

// undo30 takes a database back to before migration 30: approval requests
// indexed by transaction id and by act, without their number. The
// numbers 30 gave stay: the transactions they number are numbered again
// by the same rule, and 29's numbers are left as 29 gave them.
var undo30 = []string{
	`DROP INDEX approval_requests_by_act`,
	`ALTER TABLE approval_requests DROP COLUMN tseq`,
	`CREATE INDEX approval_requests_by_transaction ON approval_requests(transaction_id, requested_at)`,
	`CREATE INDEX approval_requests_by_act ON approval_requests(mandate_id, action_hash)`,
}

// undo31 takes a database back to before migration 31: the ledger's
// tables keyed by random ids and by transaction id, without the number,
// and the budgets' triggers as migration 25 made them. The numbers 31
// gave stay, as 30's do (undo30).
var undo31 = []string{
	`DROP TRIGGER budget_transaction_in`,
	`DROP TRIGGER budget_transaction_moved`,
	`DROP TRIGGER budget_transaction_out`,
	`CREATE TABLE obligation_states_old (
		obligation_id  TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		state          TEXT NOT NULL,
		assertions     TEXT NOT NULL DEFAULT '[]',
		updated_seq    INTEGER NOT NULL,
		accepted_by    TEXT NOT NULL DEFAULT ''
	)`,
	`INSERT INTO obligation_states_old(rowid, obligation_id, transaction_id, state, assertions, updated_seq, accepted_by)
		SELECT rowid, obligation_id, transaction_id, state, assertions, updated_seq, accepted_by FROM obligation_states ORDER BY rowid`,
	`DROP TABLE obligation_states`,
	`ALTER TABLE obligation_states_old RENAME TO obligation_states`,
	`CREATE INDEX obligation_states_by_transaction ON obligation_states(transaction_id)`,
	`CREATE TABLE settlements_old (
		instruction_id  TEXT PRIMARY KEY,
		transaction_id  TEXT NOT NULL,
		obligation_id   TEXT NOT NULL,
		rail            TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		fingerprint     TEXT NOT NULL,
		ours            INTEGER NOT NULL,
		state           TEXT NOT NULL CHECK (state IN ('instructed','pending','succeeded','failed','reversed')),
		attempts        INTEGER NOT NULL DEFAULT 0,
		next_attempt    INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT NOT NULL DEFAULT '',
		UNIQUE (transaction_id, idempotency_key)
	)`,
	`INSERT INTO settlements_old(rowid, instruction_id, transaction_id, obligation_id, rail, idempotency_key, fingerprint, ours, state, attempts, next_attempt, last_error)
		SELECT rowid, instruction_id, transaction_id, obligation_id, rail, idempotency_key, fingerprint, ours, state, attempts, next_attempt, last_error FROM settlements ORDER BY rowid`,
	`DROP TABLE settlements`,
	`ALTER TABLE settlements_old RENAME TO settlements`,
	`CREATE INDEX settlements_due ON settlements(ours, state, next_attempt)`,
	`CREATE TABLE spend_old (
		act_id         TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		agent_id       TEXT NOT NULL,
		amount         TEXT NOT NULL,
		at             INTEGER NOT NULL
	) WITHOUT ROWID`,
	`INSERT INTO spend_old SELECT act_id, transaction_id, currency, counterparty, agent_id, amount, at FROM spend`,
	`DROP TABLE spend`,
	`ALTER TABLE spend_old RENAME TO spend`,
	`CREATE INDEX spend_by_transaction ON spend(transaction_id, currency)`,
	`CREATE TABLE spend_payments_old (
		instruction_id TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		agent_id       TEXT NOT NULL,
		amount         TEXT NOT NULL,
		at             INTEGER NOT NULL
	) WITHOUT ROWID`,
	`INSERT INTO spend_payments_old SELECT instruction_id, transaction_id, currency, counterparty, agent_id, amount, at FROM spend_payments`,
	`DROP TABLE spend_payments`,
	`ALTER TABLE spend_payments_old RENAME TO spend_payments`,
	`CREATE INDEX spend_payments_by_transaction ON spend_payments(transaction_id)`,
	`CREATE TABLE spend_counts_old (
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		at             INTEGER NOT NULL,
		agent_id       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		counted        TEXT NOT NULL,
		unpaid         TEXT,
		PRIMARY KEY (transaction_id, currency)
	) WITHOUT ROWID`,
	`INSERT INTO spend_counts_old SELECT transaction_id, currency, at, agent_id, counterparty, counted, unpaid FROM spend_counts`,
	`DROP TABLE spend_counts`,
	`ALTER TABLE spend_counts_old RENAME TO spend_counts`,
	`CREATE TABLE payment_counts_old (
		instruction_id TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		at             INTEGER NOT NULL,
		counted        TEXT NOT NULL
	) WITHOUT ROWID`,
	`INSERT INTO payment_counts_old SELECT instruction_id, transaction_id, currency, counterparty, at, counted FROM payment_counts`,
	`DROP TABLE payment_counts`,
	`ALTER TABLE payment_counts_old RENAME TO payment_counts`,
	`CREATE INDEX payment_counts_by_transaction ON payment_counts(transaction_id)`,
	`CREATE TRIGGER budget_spend_in AFTER INSERT ON spend
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_spend_changed AFTER UPDATE ON spend
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id), (NEW.transaction_id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_spend_out AFTER DELETE ON spend
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_paid_in AFTER INSERT ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_paid_changed AFTER UPDATE ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id), (NEW.transaction_id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_paid_out AFTER DELETE ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_settlement_in AFTER INSERT ON settlements
		WHEN EXISTS (SELECT 1 FROM spend_payments WHERE instruction_id = NEW.instruction_id)
		BEGIN INSERT INTO budget_dirty SELECT transaction_id FROM spend_payments WHERE instruction_id = NEW.instruction_id ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_settlement_moved AFTER UPDATE OF state ON settlements
		WHEN OLD.state IS NOT NEW.state AND EXISTS (SELECT 1 FROM spend_payments WHERE instruction_id = NEW.instruction_id)
		BEGIN INSERT INTO budget_dirty SELECT transaction_id FROM spend_payments WHERE instruction_id = NEW.instruction_id ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_settlement_out AFTER DELETE ON settlements
		WHEN EXISTS (SELECT 1 FROM spend_payments WHERE instruction_id = OLD.instruction_id)
		BEGIN INSERT INTO budget_dirty SELECT transaction_id FROM spend_payments WHERE instruction_id = OLD.instruction_id ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_transaction_in AFTER INSERT ON transactions
		WHEN EXISTS (SELECT 1 FROM spend WHERE transaction_id = NEW.id)
		BEGIN INSERT INTO budget_dirty VALUES (NEW.id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_transaction_moved AFTER UPDATE OF state ON transactions
		WHEN OLD.state IS NOT NEW.state
			AND (OLD.state IN ('completed','cancelled','expired','terminated') OR NEW.state IN ('completed','cancelled','expired','terminated'))
			AND EXISTS (SELECT 1 FROM spend WHERE transaction_id = NEW.id)
		BEGIN INSERT INTO budget_dirty VALUES (NEW.id) ON CONFLICT DO NOTHING; END`,
	`CREATE TRIGGER budget_transaction_out AFTER DELETE ON transactions
		WHEN EXISTS (SELECT 1 FROM spend_counts WHERE transaction_id = OLD.id)
		BEGIN INSERT INTO budget_dirty VALUES (OLD.id) ON CONFLICT DO NOTHING; END`,
}

// unmigrate31 takes the database at path back to version 30, as the
// release before migration 31 left it.
func unmigrate31(b *testing.B, path string) { unmigrateTo(b, path, 31, undo31) }

// unmigrate29 takes the database at path back to version 28, as the
// release before migration 29 left it (29 to 31 undone).
func unmigrate29(b *testing.B, path string) {
	unmigrateTo(b, path, 29, slices.Concat(undo31, undo30, undo29))
}

// unmigrate27 takes the database at path back to version 26, as the
// release before migration 27 left it (27 to 31 undone).
func unmigrate27(b *testing.B, path string) {
	unmigrateTo(b, path, 27, slices.Concat(undo31, undo30, undo29, undo27))
}

// unmigrate26 takes the database at path back to version 25, as the
// release before migration 26 left it, for the upgrade an operator of
// that release runs.
func unmigrate26(b *testing.B, path string) {
	unmigrateTo(b, path, 26, slices.Concat(undo31, undo30, undo29, undo27, undo26))
}

// unmigrateTo undoes the migrations from version on with the statements
// undo, forgets them, and vacuums the file.
func unmigrateTo(b *testing.B, path string, version int, undo []string) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range append(undo, fmt.Sprintf(`DELETE FROM schema_migrations WHERE version >= %d`, version), `VACUUM`) {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

// columnHeld reports whether table has column in the database at path.
func columnHeld(b *testing.B, path, table, column string) bool {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n == 1
}

// copyFile copies the file at from to to, which must not exist.
func copyFile(b *testing.B, from, to string) {
	b.Helper()
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}
