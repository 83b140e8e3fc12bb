// Package store is one party instance's durable record, in SQLite.
//
// It holds every object the instance emitted or received, as the exact
// canonical bytes that were signed and verified, with a few indexed columns
// beside them for lookup. It never holds a private key: those live in the
// state directory's keys/ folder, files of mode 0600, and nothing in this
// package reads them.
//
// The schema, as of the latest migration:
//
//	-- Each transaction id this instance has met, numbered in the order
//	-- it met them (migration 29): a transaction's objects and events
//	-- (29), approval requests (30) and ledger rows (31: obligation
//	-- states, settlements, commitments, payments and their counts) are
//	-- keyed by the number, so a new transaction's rows go to the end of
//	-- each index, not to a random leaf of it.
//	CREATE TABLE transaction_numbers (id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE) WITHOUT ROWID;
//	-- Every envelope object, keyed by its transaction (its number) and
//	-- its id (migrations 26, 29), or by its id among the objects bound to
//	-- no transaction (key and revocation records). body is the exact
//	-- canonical bytes; content_hash is over body minus content_hash,
//	-- signatures and kernel_annotations, so adding a countersignature
//	-- changes body and leaves content_hash alone. The hash covers the id,
//	-- so it is unique with it (migration 16 dropped the index that
//	-- repeated that).
//	CREATE TABLE objects (
//	  id             TEXT NOT NULL,
//	  object_type    TEXT NOT NULL,
//	  transaction_id TEXT,             -- NULL for an object bound to none
//	  tseq           INTEGER,          -- its transaction's number, NULL with it
//	  content_hash   TEXT NOT NULL,
//	  body           BLOB NOT NULL,
//	  origin         TEXT NOT NULL     -- "local" or the sending organisation
//	);
//	CREATE UNIQUE INDEX objects_by_key ON objects(tseq, id);
//	CREATE UNIQUE INDEX objects_unbound ON objects(id) WHERE transaction_id IS NULL;
//	-- The objects an agent names by id alone: one id, one transaction.
//	CREATE UNIQUE INDEX objects_named ON objects(id) WHERE object_type IN ('offer', 'obligation', 'dispute');
//	-- Standalone mandate documents (a202-mandate/0.1), ours and peers'.
//	CREATE TABLE mandates (
//	  id               TEXT PRIMARY KEY,
//	  organization_id  TEXT NOT NULL,  -- represented_organization_id
//	  subject_agent_id TEXT,
//	  body             BLOB NOT NULL,
//	  status           TEXT NOT NULL,  -- active | suspended | revoked (ours only)
//	  status_changed   TEXT NOT NULL,
//	  origin           TEXT NOT NULL,
//	  stored_at        TEXT NOT NULL
//	);
//	CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
//
// Migrations are numbered, applied in order inside one transaction each
// (one that rebuilds a table others reference with foreign keys off for
// it, and every foreign key checked before it commits: fkOffMigrations),
// and recorded in schema_migrations, so an old database opens under a new
// binary and a new database never opens under an old one (Open refuses a
// database whose recorded version is newer than this binary knows). A
// new database is a copy of the first one the process migrated
// (fresh.go): the same schema, without replaying every migration on it.
//
// Concurrency: the database runs in WAL mode with a busy timeout, so the
// serve process and a principal's command-line call (which opens the same
// database) can both write. Changes that must not race, such as adding a
// countersignature to a stored object, are compare-and-swap updates: the
// UPDATE names the bytes it expects to replace, and zero rows affected means
// another writer got there first (ErrConflict), never a silent overwrite.
// Within one process every write runs on one connection, and writes that
// wait at the same moment are committed together, each in a savepoint of
// its own, with one fsync (group.go, "Group commit"). A read runs on that
// connection too when no write holds it, since its page cache is the only
// one the commits leave warm, and on another connection of the pool when
// one does, never waiting for the writer (group.go, "Reads on the idle
// writer").
//
// Backups: Backup writes a copy of the live database with SQLite's VACUUM
// INTO (backup.go): one read transaction, so the copy is the database as
// of one commit while other connections and processes keep writing; the
// copy is compacted and one self-contained file, put in place only when
// whole.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrNotFound means no row has the requested key.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict means a compare-and-swap found other bytes than expected,
	// or an insert found a different row under the same key.
	ErrConflict = errors.New("store: conflict")
	// ErrHeldElsewhere means an offer, obligation or dispute was stored
	// under an id another transaction's holds (NamedObjectTransaction): it
	// comes with ErrConflict.
	ErrHeldElsewhere = errors.New("store: id held in another transaction")
	// ErrOtherContent means an object was stored under the key of one
	// held with another content hash: two objects claiming one identity,
	// not a copy of it with other signatures. It comes with ErrConflict.
	ErrOtherContent = errors.New("store: id held with other content")
	// ErrTooNew means the database was written by a newer party.
	ErrTooNew = errors.New("store: database schema is newer than this binary")
)

// Store is an open database, or a snapshot of one (Snapshot): what the
// two share is the database's. It is safe for concurrent use.
type Store struct {
	*database
	// snap, in a snapshot, is the read transaction its reads run in.
	snap *sql.Tx
}

// database is an open database's state, shared by its snapshots.
type database struct {
	db *sql.DB
	// group queues the Updates waiting to be committed together, and its
	// leader token serialises this process's write transactions
	// (group.go). SQLite admits one writer at a time; without the token,
	// writers in one process queue on the busy handler's fixed sleeps
	// instead of on each other, which under concurrent acts cost more time
	// sleeping than writing. Other processes (a principal's CLI beside
	// serve) still queue on the busy timeout.
	group group
	// writer is the connection every write transaction runs on
	// (beginWrite), used by the holder of the leader token only.
	writer *sql.Conn
	// writerStmts are the reads prepared on writer (idleWriter), used by
	// the holder of the leader token only.
	writerStmts map[string]*sql.Stmt
	// stmts holds the statements prepared once for the hot paths (stmt).
	stmts sync.Map // query string → *sql.Stmt
	// commits counts the write transactions committed by this process:
	// each is one durable commit (synchronous=FULL), which is what an act
	// costs in fsyncs. Tests and benchmarks read it through Commits.
	commits atomic.Int64
	// mandates keeps the mandate rows read (GetMandate).
	mandates versionCache[MandateRecord]
	// minGrades keeps the mandates' local policies read (MinimumGrade).
	minGrades versionCache[map[string]int]
}

// Commits returns the number of write transactions this Store committed.
func (s *Store) Commits() int64 { return s.commits.Load() }

// detach is the context a statement runs under: the caller's values (the
// key version memo) without its cancellation. A statement, once begun, runs
// to its end; a write transaction checks the caller's context before BEGIN
// instead (begin, exec), so a cancelled call starts none. Why: handed a
// cancellable context, modernc.org/sqlite starts a goroutine and installs
// a progress handler to interrupt every statement, and database/sql starts
// another goroutine to watch every Rows and Tx, for statements that take
// tens of microseconds; about a twentieth of a formation's CPU went there.
// Nothing the store runs is long enough to need interrupting: the longest
// are single-transaction reads with an index, and a cancelled act's
// statements finishing is the same as it finishing a moment sooner (the
// act itself is idempotent by its request id). The price: a write waiting
// for another process's write lock (busy_timeout, ten seconds) is not cut
// short when its caller goes away, so a shutdown may wait that long for a
// principal's CLI that holds the lock.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// stmt returns the prepared statement for query, preparing it on first
// use. Statements of the hot paths are prepared once per process instead
// of on every call.
func (s *Store) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(detach(ctx), query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// Prepared returns the statements prepared on this store so far (stmt,
// which every statement of an act or a read goes through), in no order:
// what a test explains (Plan) to find one that reads a whole table.
func (s *Store) Prepared() []string {
	var out []string
	s.stmts.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	return out
}

// Plan returns how SQLite runs query with args, as EXPLAIN QUERY PLAN
// reports it: its steps, one a line ("SEARCH objects USING INDEX ...",
// "SCAN events", ...). Without args, every parameter is NULL.
func (s *Store) Plan(ctx context.Context, query string, args ...any) (string, error) {
	if len(args) == 0 {
		args = make([]any, strings.Count(query, "?"))
	}
	rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var step string
		if err := rows.Scan(&id, &parent, &unused, &step); err != nil {
			return "", err
		}
		steps = append(steps, step)
	}
	return strings.Join(steps, "\n"), rows.Err()
}

// migrations are applied in order; index i is schema version i+1. Never
// edit a migration that has shipped: add a new one.
var migrations = []string{
	// 1: objects and mandates.
	`CREATE TABLE objects (
		id             TEXT PRIMARY KEY,
		object_type    TEXT NOT NULL,
		transaction_id TEXT,
		content_hash   TEXT NOT NULL UNIQUE,
		body           BLOB NOT NULL,
		origin         TEXT NOT NULL,
		stored_at      TEXT NOT NULL
	);
	CREATE INDEX objects_by_transaction ON objects(transaction_id, object_type);
	CREATE TABLE mandates (
		id               TEXT PRIMARY KEY,
		organization_id  TEXT NOT NULL,
		subject_agent_id TEXT,
		body             BLOB NOT NULL,
		status           TEXT NOT NULL CHECK (status IN ('active','suspended','revoked')),
		status_changed   TEXT NOT NULL,
		origin           TEXT NOT NULL,
		stored_at        TEXT NOT NULL
	);
	CREATE INDEX mandates_by_agent ON mandates(subject_agent_id);`,
	// 2: idempotent tool calls (see idempotency.go).
	`CREATE TABLE idempotency (
		scope      TEXT NOT NULL,
		request_id TEXT NOT NULL,
		args_hash  TEXT NOT NULL,
		state      TEXT NOT NULL CHECK (state IN ('running','done')),
		result     BLOB,
		created_at TEXT NOT NULL,
		PRIMARY KEY (scope, request_id)
	);`,
	// 3: the delivery outbox and inbox (see outbox.go).
	`CREATE TABLE outbox (
		id             INTEGER PRIMARY KEY AUTOINCREMENT,
		peer           TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		message_key    TEXT NOT NULL,
		objects        BLOB NOT NULL,
		status         TEXT NOT NULL CHECK (status IN ('pending','delivered','failed')),
		attempts       INTEGER NOT NULL DEFAULT 0,
		next_attempt   INTEGER NOT NULL,
		lease_until    INTEGER NOT NULL DEFAULT 0,
		last_error     TEXT NOT NULL DEFAULT '',
		reply          BLOB,
		enqueued_at    TEXT NOT NULL,
		finished_at    TEXT
	);
	CREATE INDEX outbox_due ON outbox(status, next_attempt);
	CREATE TABLE inbox (
		from_org       TEXT NOT NULL,
		message_key    TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		reply          BLOB NOT NULL,
		received_at    TEXT NOT NULL,
		PRIMARY KEY (from_org, message_key)
	);`,
	// 4: approval requests and the revocation record behind each status
	// change (see approvals.go and mandates.go).
	`ALTER TABLE mandates ADD COLUMN revocation_id TEXT;
	CREATE TABLE approval_requests (
		id             TEXT PRIMARY KEY,
		mandate_id     TEXT NOT NULL,
		transaction_id TEXT,
		action_hash    TEXT NOT NULL,
		act            BLOB NOT NULL,
		rules          TEXT NOT NULL,
		status         TEXT NOT NULL CHECK (status IN ('pending','approved','rejected')),
		approval_id    TEXT,
		requested_at   TEXT NOT NULL,
		decided_at     TEXT
	);
	CREATE INDEX approval_requests_by_status ON approval_requests(status, requested_at);`,
	// 5: the dual-held transaction record (see record.go).
	`CREATE TABLE transactions (
		id            TEXT PRIMARY KEY,
		counterparty  TEXT NOT NULL,
		role          TEXT NOT NULL CHECK (role IN ('buyer','supplier')),
		session_id    TEXT,
		state         TEXT NOT NULL,
		head_sequence INTEGER NOT NULL DEFAULT 0,
		head_hash     TEXT,
		created_at    TEXT NOT NULL,
		updated_at    TEXT NOT NULL
	);
	CREATE TABLE events (
		transaction_id      TEXT NOT NULL REFERENCES transactions(id),
		sequence            INTEGER NOT NULL,
		event_id            TEXT NOT NULL UNIQUE REFERENCES objects(id),
		content_hash        TEXT NOT NULL UNIQUE,
		previous_event_hash TEXT,
		event_type          TEXT NOT NULL,
		from_state          TEXT,
		to_state            TEXT NOT NULL,
		appended_by         TEXT NOT NULL,
		status              TEXT NOT NULL CHECK (status IN ('pending','recorded')),
		PRIMARY KEY (transaction_id, sequence)
	);
	CREATE TABLE forks (
		id             INTEGER PRIMARY KEY AUTOINCREMENT,
		transaction_id TEXT NOT NULL,
		sequence       INTEGER NOT NULL,
		event_id       TEXT NOT NULL,
		content_hash   TEXT NOT NULL,
		body           BLOB NOT NULL,
		from_org       TEXT NOT NULL,
		detail         TEXT NOT NULL,
		detected_at    TEXT NOT NULL,
		UNIQUE (content_hash)
	);`,
	// 6: offers withdrawn before acceptance (see record.go).
	`CREATE TABLE withdrawals (
		offer_id       TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		decision_id    TEXT NOT NULL,
		withdrawn_at   TEXT NOT NULL
	);`,
	// 7: costs that do not grow with history (see work.go): lookups by
	// type and by state are indexed; an outbox lease names the process
	// that holds it, so a restarted instance voids its dead predecessor's
	// leases at once; an inbox row names the objects of its reply instead
	// of copying their bytes (the record holds them); an idempotent call
	// names the act it recorded; obligation state is kept as events are
	// recorded instead of being re-derived from the whole chain.
	`CREATE INDEX objects_by_type ON objects(object_type, transaction_id);
	CREATE INDEX transactions_by_state ON transactions(state, updated_at);
	CREATE INDEX transactions_by_updated ON transactions(updated_at);
	ALTER TABLE outbox ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';
	ALTER TABLE outbox ADD COLUMN act BLOB;
	CREATE INDEX outbox_by_transaction ON outbox(transaction_id, status);
	ALTER TABLE inbox ADD COLUMN reply_ids TEXT;
	ALTER TABLE idempotency ADD COLUMN act TEXT;
	CREATE TABLE obligation_states (
		obligation_id  TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		state          TEXT NOT NULL,
		assertions     TEXT NOT NULL DEFAULT '[]',
		updated_seq    INTEGER NOT NULL
	);
	CREATE INDEX obligation_states_by_transaction ON obligation_states(transaction_id);
	ALTER TABLE transactions ADD COLUMN notice TEXT;
	CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);`,
	// 8: settlement instructions and their rail work (see settlements.go).
	`CREATE TABLE settlements (
		instruction_id  TEXT PRIMARY KEY,
		transaction_id  TEXT NOT NULL,
		obligation_id   TEXT NOT NULL,
		rail            TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		fingerprint     TEXT NOT NULL,
		ours            INTEGER NOT NULL,
		state           TEXT NOT NULL CHECK (state IN ('instructed','pending','succeeded','failed')),
		attempts        INTEGER NOT NULL DEFAULT 0,
		next_attempt    INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT NOT NULL DEFAULT '',
		UNIQUE (transaction_id, idempotency_key)
	);
	CREATE INDEX settlements_due ON settlements(ours, state, next_attempt);
	ALTER TABLE obligation_states ADD COLUMN accepted_by TEXT NOT NULL DEFAULT '';`,
	// 9: conformance grades held about organisations, and the principal's
	// local, deny-only policy beside a mandate (see grades.go).
	`CREATE TABLE grades (
		determination_id TEXT PRIMARY KEY,
		subject_org      TEXT NOT NULL,
		issuer_org       TEXT NOT NULL,
		issued_at        TEXT NOT NULL,
		expires_at       TEXT NOT NULL,
		body             BLOB NOT NULL,
		assessment       BLOB,
		stored_at        TEXT NOT NULL
	);
	CREATE INDEX grades_by_subject ON grades(subject_org, issued_at);
	CREATE TABLE mandate_policies (
		mandate_id    TEXT PRIMARY KEY,
		minimum_grade TEXT NOT NULL,
		set_at        TEXT NOT NULL
	);`,
	// 10: which transactions may hold an offer from the counterparty that
	// is still open (an offer in draft, an amendment offer later): set when
	// one is received (Txn.OfferReceived), cleared by the event that takes
	// it or ends the transaction (Txn.OffersTaken) and by the inbox when it
	// finds none open there (Store.OffersClosed), so that list_inbox reads
	// those transactions and no others, however many the instance holds.
	// When the column arrives it is set on every draft, and on every formed
	// transaction that holds an offer stored after its latest agreement (an
	// amendment offer perhaps open): a superset, which the first inbox
	// trims.
	`ALTER TABLE transactions ADD COLUMN open_offer INTEGER NOT NULL DEFAULT 0;
	UPDATE transactions SET open_offer = 1 WHERE state = 'draft'
		OR (state IN ('committed', 'in_performance')
			AND (SELECT MAX(rowid) FROM objects o WHERE o.transaction_id = transactions.id AND o.object_type = 'offer')
			  > COALESCE((SELECT MAX(rowid) FROM objects a WHERE a.transaction_id = transactions.id AND a.object_type = 'agreement'), 0));
	CREATE INDEX transactions_open_offer ON transactions(open_offer, updated_at);`,
	// 11: a number that moves whenever a key record or a revocation record
	// is stored, changed or removed, by this process or another (a
	// principal's CLI beside serve), so that what is read at every key
	// resolution can be kept until it does (KeyObjectsVersion).
	`CREATE TABLE key_objects_version (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
	INSERT INTO key_objects_version(id, n) VALUES (1, 0);
	CREATE TRIGGER key_objects_inserted AFTER INSERT ON objects
		WHEN NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_updated AFTER UPDATE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record') OR NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_deleted AFTER DELETE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;`,
	// 12: a transaction's events by type, so that an act finds the few
	// events its guards look back to (and the latest of a type) without
	// reading every event of a long transaction (EventsOfTypes,
	// LatestEventOfType).
	//
	// And a transaction's obligation responses by response type (read
	// from the stored canonical bytes, which hold each member once), so
	// that the accepting and waiving ones are found without reading the
	// rejections, one per round (ObligationResponsesOfTypes).
	`CREATE INDEX events_by_type ON events(transaction_id, event_type, sequence);
	CREATE INDEX obligation_responses_by_type ON objects(transaction_id, json_extract(CAST(body AS TEXT), '$.payload.response_type'))
		WHERE object_type = 'obligation_response';`,
	// 13: objects by type for the key and revocation records only, the
	// one kind read by type across transactions (ObjectsOfType). Every
	// other object is read by its id or its transaction, and an index of
	// every object by type and transaction puts each stored object on a
	// page of its own once the instance holds many transactions (the ids
	// are random): one page more to write at every object of every act.
	`DROP INDEX objects_by_type;
	CREATE INDEX key_objects ON objects(object_type) WHERE object_type = 'key_record' OR object_type = 'revocation_record';`,
	// 14: migration 11's number moves with the mandates too (one stored,
	// its status changed, one removed), so that a mandate read at every
	// act is kept until it does (GetMandate): a mandate is judged by the
	// same processes and with the same keys as the key records.
	`CREATE TRIGGER mandates_inserted AFTER INSERT ON mandates
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER mandates_updated AFTER UPDATE ON mandates
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER mandates_deleted AFTER DELETE ON mandates
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;`,
	// 15: and with a mandate's local policy (its minimum grade, set from
	// the principal's CLI), so that the policy read at every act is kept
	// until it does (MinimumGrade).
	`CREATE TRIGGER mandate_policies_inserted AFTER INSERT ON mandate_policies
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER mandate_policies_updated AFTER UPDATE ON mandate_policies
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER mandate_policies_deleted AFTER DELETE ON mandate_policies
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;`,
	// 16: objects and events without a unique index on content_hash. The
	// hash is of the object with its id (canonical model §4), and the
	// store recomputes it before it stores one (objectInfo, PutVerified),
	// so two rows can share it only if their ids are equal, which the
	// primary key and events' unique event_id already refuse; the index
	// only repeated their work, and its keys being random, every object
	// and event stored wrote a leaf of it of its own once the instance
	// held many transactions (a fifth of an acceptance's WAL writes at
	// 10 000). SQLite drops a column constraint only by rebuilding the
	// table, and objects is the parent of events' foreign key, so this
	// migration runs with foreign keys off and checked after
	// (fkOffMigrations); rowids are kept, so storage order is too.
	`CREATE TABLE objects_new (
		id             TEXT PRIMARY KEY,
		object_type    TEXT NOT NULL,
		transaction_id TEXT,
		content_hash   TEXT NOT NULL,
		body           BLOB NOT NULL,
		origin         TEXT NOT NULL,
		stored_at      TEXT NOT NULL
	);
	INSERT INTO objects_new(rowid, id, object_type, transaction_id, content_hash, body, origin, stored_at)
		SELECT rowid, id, object_type, transaction_id, content_hash, body, origin, stored_at FROM objects ORDER BY rowid;
	DROP TABLE objects;
	ALTER TABLE objects_new RENAME TO objects;
	CREATE INDEX objects_by_transaction ON objects(transaction_id, object_type);
	CREATE INDEX key_objects ON objects(object_type) WHERE object_type = 'key_record' OR object_type = 'revocation_record';
	CREATE INDEX obligation_responses_by_type ON objects(transaction_id, json_extract(CAST(body AS TEXT), '$.payload.response_type'))
		WHERE object_type = 'obligation_response';
	CREATE TRIGGER key_objects_inserted AFTER INSERT ON objects
		WHEN NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_updated AFTER UPDATE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record') OR NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_deleted AFTER DELETE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TABLE events_new (
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
	);
	INSERT INTO events_new(rowid, transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status)
		SELECT rowid, transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status FROM events ORDER BY rowid;
	DROP TABLE events;
	ALTER TABLE events_new RENAME TO events;
	CREATE INDEX events_by_type ON events(transaction_id, event_type, sequence);
	UPDATE key_objects_version SET n = n + 1 WHERE id = 1;`,
	// 17: fewer pages written a commit (read back from the WAL after a
	// batch of formations at eight agents: 14–22 frames a commit).
	//   - transactions_open_offer holds only the transactions with an
	//     open offer (the only ones list_inbox asks it for): every event
	//     moves updated_at, and on the offeror's side, where no offer is
	//     ever open, each moved an entry of an index no query read (0.86
	//     of its 14.4 frames a commit).
	//   - events, inbox and idempotency are WITHOUT ROWID, keyed by their
	//     primary keys: their rows are small, no query reads their rowid,
	//     and a rowid table with a primary key other than an integer is
	//     two b-trees (the rows, and the key's index), each written on
	//     every insert (1.5–2 frames a commit between them).
	// events is a child of objects and transactions, so this migration
	// runs with foreign keys off and checked after (fkOffMigrations).
	`DROP INDEX transactions_open_offer;
	CREATE INDEX transactions_open_offer ON transactions(updated_at) WHERE open_offer = 1;
	CREATE TABLE events_new (
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
	) WITHOUT ROWID;
	INSERT INTO events_new(transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status)
		SELECT transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status FROM events;
	DROP TABLE events;
	ALTER TABLE events_new RENAME TO events;
	CREATE INDEX events_by_type ON events(transaction_id, event_type, sequence);
	CREATE TABLE inbox_new (
		from_org       TEXT NOT NULL,
		message_key    TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		reply          BLOB NOT NULL,
		received_at    TEXT NOT NULL,
		reply_ids      TEXT,
		PRIMARY KEY (from_org, message_key)
	) WITHOUT ROWID;
	INSERT INTO inbox_new(from_org, message_key, transaction_id, reply, received_at, reply_ids)
		SELECT from_org, message_key, transaction_id, reply, received_at, reply_ids FROM inbox;
	DROP TABLE inbox;
	ALTER TABLE inbox_new RENAME TO inbox;
	CREATE TABLE idempotency_new (
		scope      TEXT NOT NULL,
		request_id TEXT NOT NULL,
		args_hash  TEXT NOT NULL,
		state      TEXT NOT NULL CHECK (state IN ('running','done')),
		result     BLOB,
		created_at TEXT NOT NULL,
		act        TEXT,
		PRIMARY KEY (scope, request_id)
	) WITHOUT ROWID;
	INSERT INTO idempotency_new(scope, request_id, args_hash, state, result, created_at, act)
		SELECT scope, request_id, args_hash, state, result, created_at, act FROM idempotency;
	DROP TABLE idempotency;
	ALTER TABLE idempotency_new RENAME TO idempotency;`,
	// 18: a settlement a rail reported reversed after it succeeded (the
	// ledger's status, settlements.go). SQLite changes a CHECK only by
	// rebuilding the table; nothing references settlements, and rowids
	// are kept (Settlements orders by them).
	`CREATE TABLE settlements_new (
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
	);
	INSERT INTO settlements_new(rowid, instruction_id, transaction_id, obligation_id, rail, idempotency_key, fingerprint, ours, state, attempts, next_attempt, last_error)
		SELECT rowid, instruction_id, transaction_id, obligation_id, rail, idempotency_key, fingerprint, ours, state, attempts, next_attempt, last_error FROM settlements ORDER BY rowid;
	DROP TABLE settlements;
	ALTER TABLE settlements_new RENAME TO settlements;
	CREATE INDEX settlements_due ON settlements(ours, state, next_attempt);`,
	// 19: the alerts raised about a transaction's timing (an obligation
	// due, or overdue; record/timing.go), once each: the row is written
	// before the alert is handed on, so a restart raises none twice. And
	// the approval requests by decision time, which the engine reads from
	// where it last stopped (ApprovalRequestsDecidedSince), not whole.
	`CREATE INDEX approval_requests_by_decision ON approval_requests(decided_at);
	CREATE TABLE alerts (
		subject_id     TEXT NOT NULL,
		kind           TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		at             TEXT NOT NULL,
		raised_at      TEXT NOT NULL,
		PRIMARY KEY (subject_id, kind)
	) WITHOUT ROWID;`,
	// 20: budgets, the principal's deny-only spending limits, and what
	// they count: each transaction's commitment and each payment this
	// organisation made as buyer (budgets.go). And why an approval
	// request holds an act beyond its mandate's rules (a budget's
	// threshold), for the principal to read.
	`CREATE TABLE budgets (
		id            TEXT PRIMARY KEY,
		kind          TEXT NOT NULL CHECK (kind IN ('spend','exposure')),
		period        TEXT NOT NULL CHECK (period IN ('day','week','month','quarter')),
		currency      TEXT NOT NULL,
		limit_amount  TEXT NOT NULL,
		approve_above TEXT NOT NULL DEFAULT '',
		agent_id      TEXT NOT NULL DEFAULT '',
		counterparty  TEXT NOT NULL DEFAULT '',
		set_at        TEXT NOT NULL
	);
	CREATE TABLE spend (
		act_id         TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		agent_id       TEXT NOT NULL,
		amount         TEXT NOT NULL,
		at             INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX spend_by_transaction ON spend(transaction_id, currency);
	CREATE INDEX spend_by_time ON spend(currency, at);
	CREATE INDEX spend_by_counterparty ON spend(counterparty, currency);
	CREATE TABLE spend_payments (
		instruction_id TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		agent_id       TEXT NOT NULL,
		amount         TEXT NOT NULL,
		at             INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX spend_payments_by_transaction ON spend_payments(transaction_id);
	CREATE INDEX spend_payments_by_counterparty ON spend_payments(counterparty, currency, at);
	ALTER TABLE approval_requests ADD COLUMN note TEXT NOT NULL DEFAULT '';`,
	// 21: the approvals page and a transaction's timeline read what they
	// show, not the history (BenchmarkHistory: at 1 000 transactions the
	// page took 40 times as long as at 10). A transaction's requests are
	// read by their transaction; the version the page polls (requests
	// filed plus requests decided, ApprovalRequestsVersion) is kept by
	// triggers instead of counted, starting from the count.
	`CREATE INDEX approval_requests_by_transaction ON approval_requests(transaction_id, requested_at);
	CREATE TABLE approval_requests_version (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
	INSERT INTO approval_requests_version(id, n) SELECT 1, COUNT(*) + COUNT(decided_at) FROM approval_requests;
	CREATE TRIGGER approval_requests_filed AFTER INSERT ON approval_requests
		BEGIN UPDATE approval_requests_version SET n = n + 1 + (NEW.decided_at IS NOT NULL) WHERE id = 1; END;
	CREATE TRIGGER approval_requests_decided AFTER UPDATE OF decided_at ON approval_requests
		WHEN OLD.decided_at IS NULL AND NEW.decided_at IS NOT NULL
		BEGIN UPDATE approval_requests_version SET n = n + 1 WHERE id = 1; END;`,
	// 22: objects without stored_at, the time a row was written. Nothing
	// read it: what an object says of time is in its bytes (created_at,
	// signatures' signed_at), and its transaction's rows keep when it
	// moved. It was 31 bytes of each of a completed transaction's 27
	// rows, 2.6 % of the record they hold (docs/performance.md, "Bytes
	// per transaction"). SQLite drops a column by rewriting every row of
	// the table, so this is the migration of a long-lived instance's
	// largest table: measured at 100 000 transactions in
	// BenchmarkUpgrade (internal/bench; docs/deploy.md, "Upgrading a
	// large database"). The pages it frees inside the table are reused by
	// the rows written after it; a `party backup` of the database writes
	// them packed.
	`ALTER TABLE objects DROP COLUMN stored_at;`,
	// 23: the count of transactions by state the metrics read at each
	// scrape (Gauges), kept by triggers instead of counted: GROUP BY
	// state read an entry of every transaction ever held, 1 ms at 10 000
	// against 60 µs at 10, and linear beyond. A state that held
	// transactions keeps its row at zero. Each act that moves a state
	// writes this table's one page beside the transaction's own (the
	// formation benchmarks, alternated with and without it, do not see
	// it).
	`CREATE TABLE transaction_states (state TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
	INSERT INTO transaction_states(state, n) SELECT state, COUNT(*) FROM transactions GROUP BY state;
	CREATE TRIGGER transaction_states_created AFTER INSERT ON transactions
		BEGIN INSERT INTO transaction_states(state, n) VALUES (NEW.state, 1) ON CONFLICT(state) DO UPDATE SET n = n + 1; END;
	CREATE TRIGGER transaction_states_moved AFTER UPDATE OF state ON transactions
		WHEN OLD.state IS NOT NEW.state
		BEGIN
			UPDATE transaction_states SET n = n - 1 WHERE state = OLD.state;
			INSERT INTO transaction_states(state, n) VALUES (NEW.state, 1) ON CONFLICT(state) DO UPDATE SET n = n + 1;
		END;
	CREATE TRIGGER transaction_states_deleted AFTER DELETE ON transactions
		BEGIN UPDATE transaction_states SET n = n - 1 WHERE state = OLD.state; END;`,
	// 24: the last lookups that read a whole table (found by explaining
	// every statement the tests prepare, TestNoStatementReadsTheHistory):
	//   - the requests for one act, which filing an approval request and
	//     releasing a held act read (ApprovalRequestsFor): every request
	//     ever filed, 6 ms at 10 000 transactions against 0.5 at 10;
	//   - a withdrawal by the decision it was recorded with
	//     (RenameWithdrawalDecision);
	//   - a transaction's forks (Forks), few, but as many as a
	//     counterparty cares to sign.
	`CREATE INDEX approval_requests_by_act ON approval_requests(mandate_id, action_hash);
	CREATE INDEX withdrawals_by_decision ON withdrawals(decision_id);
	CREATE INDEX forks_by_transaction ON forks(transaction_id);`,
	// 25: budgets count from running totals (budgets.go, "Running
	// totals"): a budget read every transaction of its period at each act
	// it applied to (accept_offer under a monthly budget with 10 000
	// transactions in the month: 270 ms against 10 without it), and the
	// approvals page every transaction under a pending request's mandate
	// (6.5–7.3 s a view at 100 000). Each transaction's counted
	// commitment and each payment's counted amount are kept, with their
	// sums by day, hour and second; triggers name the transactions whose rows
	// changed, and the write that changed them brings the totals up to
	// date before it commits. The totals of a database that already
	// holds commitments are computed when it is opened after this
	// migration (budget_backlog, emptied in batches). The indexes that
	// served the old readings go. A move between two states that have not
	// ended changes no count (budget.Commitment; TestOpenMovesCountNothing
	// pins it), so it names no transaction: most of a formation's writes.
	`CREATE TABLE spend_counts (
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		at             INTEGER NOT NULL,
		agent_id       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		counted        TEXT NOT NULL,
		unpaid         TEXT,
		PRIMARY KEY (transaction_id, currency)
	) WITHOUT ROWID;
	CREATE TABLE payment_counts (
		instruction_id TEXT PRIMARY KEY,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		at             INTEGER NOT NULL,
		counted        TEXT NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX payment_counts_by_transaction ON payment_counts(transaction_id);
	CREATE TABLE budget_sums (
		what         TEXT NOT NULL CHECK (what IN ('spend','paid','unpaid')),
		currency     TEXT NOT NULL,
		agent_id     TEXT NOT NULL,
		counterparty TEXT NOT NULL,
		span         INTEGER NOT NULL,
		start        INTEGER NOT NULL,
		total        TEXT NOT NULL CHECK (substr(total, 1, 1) <> '-'),
		n            INTEGER NOT NULL CHECK (n >= 0),
		PRIMARY KEY (what, currency, agent_id, span, start, counterparty)
	) WITHOUT ROWID;
	CREATE TABLE budget_dirty (transaction_id TEXT PRIMARY KEY) WITHOUT ROWID;
	CREATE TABLE budget_backlog (transaction_id TEXT PRIMARY KEY) WITHOUT ROWID;
	INSERT INTO budget_backlog SELECT transaction_id FROM spend UNION SELECT transaction_id FROM spend_payments;
	CREATE TRIGGER budget_spend_in AFTER INSERT ON spend
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_spend_changed AFTER UPDATE ON spend
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id), (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_spend_out AFTER DELETE ON spend
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_paid_in AFTER INSERT ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_paid_changed AFTER UPDATE ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id), (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_paid_out AFTER DELETE ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_settlement_in AFTER INSERT ON settlements
		WHEN EXISTS (SELECT 1 FROM spend_payments WHERE instruction_id = NEW.instruction_id)
		BEGIN INSERT INTO budget_dirty SELECT transaction_id FROM spend_payments WHERE instruction_id = NEW.instruction_id ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_settlement_moved AFTER UPDATE OF state ON settlements
		WHEN OLD.state IS NOT NEW.state AND EXISTS (SELECT 1 FROM spend_payments WHERE instruction_id = NEW.instruction_id)
		BEGIN INSERT INTO budget_dirty SELECT transaction_id FROM spend_payments WHERE instruction_id = NEW.instruction_id ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_settlement_out AFTER DELETE ON settlements
		WHEN EXISTS (SELECT 1 FROM spend_payments WHERE instruction_id = OLD.instruction_id)
		BEGIN INSERT INTO budget_dirty SELECT transaction_id FROM spend_payments WHERE instruction_id = OLD.instruction_id ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_transaction_in AFTER INSERT ON transactions
		WHEN EXISTS (SELECT 1 FROM spend WHERE transaction_id = NEW.id)
		BEGIN INSERT INTO budget_dirty VALUES (NEW.id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_transaction_moved AFTER UPDATE OF state ON transactions
		WHEN OLD.state IS NOT NEW.state
			AND (OLD.state IN ('completed','cancelled','expired','terminated') OR NEW.state IN ('completed','cancelled','expired','terminated'))
			AND EXISTS (SELECT 1 FROM spend WHERE transaction_id = NEW.id)
		BEGIN INSERT INTO budget_dirty VALUES (NEW.id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_transaction_out AFTER DELETE ON transactions
		WHEN EXISTS (SELECT 1 FROM spend_counts WHERE transaction_id = OLD.id)
		BEGIN INSERT INTO budget_dirty VALUES (OLD.id) ON CONFLICT DO NOTHING; END;
	DROP INDEX spend_by_time;
	DROP INDEX spend_by_counterparty;
	DROP INDEX spend_payments_by_counterparty;`,
	// 26: an object is keyed by its transaction and its id, not its id
	// alone. Identifiers are random (decisions.md item 4), so an index
	// keyed by id alone put each object an act stored on a leaf of its
	// own once the instance held many transactions: 7 to 9 leaves of the
	// objects' id index written by each side at every acceptance at
	// 10 000 transactions, and more at each tenfold (docs/performance.md,
	// "What grows"). Keyed by transaction first, an act's objects and
	// events share their transaction's leaves at any size, as the index
	// by transaction and type always did. An object bound to no
	// transaction (a key record, a revocation record) is keyed by its id
	// among those (a partial index). The offers, obligations and disputes,
	// which an agent names by their id alone (accept_offer's offer_id),
	// keep an index by id, unique across transactions as before (a
	// partial index, one leaf written an offer, obligation or dispute
	// stored: NamedObjectTransaction). Rows keep their rowids, so storage
	// order is kept. events names its object by the same key, so its
	// foreign key and its unique event id move to the pair; both tables
	// are rebuilt, with foreign keys off and checked after
	// (fkOffMigrations).
	`CREATE TABLE objects_new (
		id             TEXT NOT NULL,
		object_type    TEXT NOT NULL,
		transaction_id TEXT,
		content_hash   TEXT NOT NULL,
		body           BLOB NOT NULL,
		origin         TEXT NOT NULL
	);
	INSERT INTO objects_new(rowid, id, object_type, transaction_id, content_hash, body, origin)
		SELECT rowid, id, object_type, transaction_id, content_hash, body, origin FROM objects ORDER BY rowid;
	DROP TABLE objects;
	ALTER TABLE objects_new RENAME TO objects;
	CREATE UNIQUE INDEX objects_by_key ON objects(transaction_id, id);
	CREATE UNIQUE INDEX objects_unbound ON objects(id) WHERE transaction_id IS NULL;
	CREATE UNIQUE INDEX objects_named ON objects(id) WHERE object_type IN ('offer', 'obligation', 'dispute');
	CREATE INDEX objects_by_transaction ON objects(transaction_id, object_type);
	CREATE INDEX key_objects ON objects(object_type) WHERE object_type = 'key_record' OR object_type = 'revocation_record';
	CREATE INDEX obligation_responses_by_type ON objects(transaction_id, json_extract(CAST(body AS TEXT), '$.payload.response_type'))
		WHERE object_type = 'obligation_response';
	CREATE TRIGGER key_objects_inserted AFTER INSERT ON objects
		WHEN NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_updated AFTER UPDATE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record') OR NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_deleted AFTER DELETE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TABLE events_new (
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
	) WITHOUT ROWID;
	INSERT INTO events_new(transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status)
		SELECT transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status FROM events;
	DROP TABLE events;
	ALTER TABLE events_new RENAME TO events;
	CREATE INDEX events_by_type ON events(transaction_id, event_type, sequence);
	UPDATE key_objects_version SET n = n + 1 WHERE id = 1;`,
	// 27: the last two reads that walked every transaction held, however
	// few they were after:
	//   - list_transactions filtered by a counterparty walked the
	//     transactions newest first until its page was full: for a
	//     counterparty that holds few of them, every transaction held.
	//     By counterparty, then update time and id (the page's order and
	//     cursor), a page reads a page. An act that moves a transaction
	//     moves its entry to the end of its counterparty's range, a leaf
	//     the counterparty's other acts keep warm.
	//   - `party disputes` read each transaction's disputes,
	//     determinations and exceptions, four queries a transaction; at a
	//     million, a million transactions to find the few at issue. A
	//     partial index holds only those three types' rows (an act that
	//     stores none of them does not touch it), so the transactions at
	//     issue are read from it (TransactionsAtIssue). Building it reads
	//     the objects table once (docs/deploy.md, "Upgrading").
	`CREATE INDEX transactions_by_counterparty ON transactions(counterparty, updated_at, id);
	CREATE INDEX objects_at_issue ON objects(transaction_id, object_type) WHERE object_type IN ('dispute', 'determination', 'exception');`,
	// 28: an agent's latest approval requests (its approval resources,
	// read again at every filing and decision while it is subscribed)
	// were every request filed under its mandates, sorted for a page of
	// 50: at a million requests, a million rows a read. By mandate and
	// time, each mandate's latest are a page's read (AgentApprovalRequests);
	// a new request goes to the end of its mandate's range.
	`CREATE INDEX approval_requests_by_mandate ON approval_requests(mandate_id, requested_at);`,
	// 29: a transaction's objects and events are keyed by its local
	// number, not its id. Identifiers are random (decisions.md item 4),
	// so keyed by transaction id a new transaction's rows went to a
	// random leaf of each of the objects' and events' indexes; at a
	// million transactions those indexes are gigabytes, most of their
	// leaves in no cache, and each act read and wrote a cold leaf of
	// each (docs/performance.md, "A year of history"). A local number
	// given in the order this instance first met the transaction's id
	// (transaction_numbers: an approval may name a transaction before it
	// is held) puts a new transaction's rows at the end of each index, on
	// the leaves the last acts left warm, at any size. A query names a
	// transaction by id and finds its number in transaction_numbers
	// (txnSeq); the id stays on every row, for what reads across
	// transactions. transactions.seq repeats the number of a transaction
	// held, for events' foreign key (explicit, since VACUUM may renumber
	// implicit rowids). The numbers follow the rowids of the transactions
	// held, then of the first objects of those named and not held.
	// objects and events are rebuilt with the number (fkOffMigrations);
	// the CHECK keeps every object bound to a transaction numbered.
	`CREATE TABLE transaction_numbers (
		id  TEXT PRIMARY KEY,
		seq INTEGER NOT NULL UNIQUE
	) WITHOUT ROWID;
	INSERT INTO transaction_numbers(id, seq) SELECT id, rowid FROM transactions;
	INSERT INTO transaction_numbers(id, seq)
		SELECT transaction_id, (SELECT IFNULL(MAX(rowid), 0) FROM transactions) + ROW_NUMBER() OVER (ORDER BY MIN(rowid))
		FROM objects WHERE transaction_id IS NOT NULL AND transaction_id NOT IN (SELECT id FROM transactions)
		GROUP BY transaction_id;
	ALTER TABLE transactions ADD COLUMN seq INTEGER;
	UPDATE transactions SET seq = rowid;
	CREATE UNIQUE INDEX transactions_by_seq ON transactions(seq);
	CREATE TABLE objects_new (
		id             TEXT NOT NULL,
		object_type    TEXT NOT NULL,
		transaction_id TEXT,
		tseq           INTEGER,
		content_hash   TEXT NOT NULL,
		body           BLOB NOT NULL,
		origin         TEXT NOT NULL,
		CHECK ((transaction_id IS NULL) = (tseq IS NULL))
	);
	INSERT INTO objects_new(rowid, id, object_type, transaction_id, tseq, content_hash, body, origin)
		SELECT o.rowid, o.id, o.object_type, o.transaction_id, t.seq, o.content_hash, o.body, o.origin
		FROM objects o LEFT JOIN transaction_numbers t ON t.id = o.transaction_id ORDER BY o.rowid;
	DROP TABLE objects;
	ALTER TABLE objects_new RENAME TO objects;
	CREATE UNIQUE INDEX objects_by_key ON objects(tseq, id);
	CREATE UNIQUE INDEX objects_unbound ON objects(id) WHERE transaction_id IS NULL;
	CREATE UNIQUE INDEX objects_named ON objects(id) WHERE object_type IN ('offer', 'obligation', 'dispute');
	CREATE INDEX objects_by_transaction ON objects(tseq, object_type);
	CREATE INDEX key_objects ON objects(object_type) WHERE object_type = 'key_record' OR object_type = 'revocation_record';
	CREATE INDEX obligation_responses_by_type ON objects(tseq, json_extract(CAST(body AS TEXT), '$.payload.response_type'))
		WHERE object_type = 'obligation_response';
	CREATE INDEX objects_at_issue ON objects(tseq, object_type) WHERE object_type IN ('dispute', 'determination', 'exception');
	CREATE TRIGGER key_objects_inserted AFTER INSERT ON objects
		WHEN NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_updated AFTER UPDATE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record') OR NEW.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TRIGGER key_objects_deleted AFTER DELETE ON objects
		WHEN OLD.object_type IN ('key_record', 'revocation_record')
		BEGIN UPDATE key_objects_version SET n = n + 1 WHERE id = 1; END;
	CREATE TABLE events_new (
		transaction_id      TEXT NOT NULL,
		tseq                INTEGER NOT NULL REFERENCES transactions(seq),
		sequence            INTEGER NOT NULL,
		event_id            TEXT NOT NULL,
		content_hash        TEXT NOT NULL,
		previous_event_hash TEXT,
		event_type          TEXT NOT NULL,
		from_state          TEXT,
		to_state            TEXT NOT NULL,
		appended_by         TEXT NOT NULL,
		status              TEXT NOT NULL CHECK (status IN ('pending','recorded')),
		PRIMARY KEY (tseq, sequence),
		UNIQUE (tseq, event_id),
		FOREIGN KEY (tseq, event_id) REFERENCES objects(tseq, id)
	) WITHOUT ROWID;
	INSERT INTO events_new(transaction_id, tseq, sequence, event_id, content_hash, previous_event_hash, event_type, from_state, to_state, appended_by, status)
		SELECT e.transaction_id, t.seq, e.sequence, e.event_id, e.content_hash, e.previous_event_hash, e.event_type, e.from_state, e.to_state, e.appended_by, e.status
		FROM events e JOIN transaction_numbers t ON t.id = e.transaction_id ORDER BY t.seq, e.sequence;
	DROP TABLE events;
	ALTER TABLE events_new RENAME TO events;
	CREATE INDEX events_by_type ON events(tseq, event_type, sequence);
	UPDATE key_objects_version SET n = n + 1 WHERE id = 1;`,
	// 30: a transaction's approval requests are keyed by its local number
	// too (migration 29). Filing one wrote three random leaves: its id,
	// its transaction's place in approval_requests_by_transaction, and
	// its act's (mandate, action hash) in approval_requests_by_act. The
	// action hash covers the act's transaction (the act document names
	// it), so an act's requests are found under their transaction as
	// well: one index by (number, mandate, action hash) finds an act's
	// requests and a transaction's (its timeline, sorted: a transaction
	// holds a few), and a new transaction's go to its end. A request
	// bound to no transaction has none (tseq NULL). The transactions
	// requests name that no object named yet are numbered first, after
	// the others.
	`INSERT INTO transaction_numbers(id, seq)
		SELECT transaction_id, (SELECT IFNULL(MAX(seq), 0) FROM transaction_numbers) + ROW_NUMBER() OVER (ORDER BY MIN(rowid))
		FROM approval_requests WHERE transaction_id IS NOT NULL AND transaction_id != '' AND transaction_id NOT IN (SELECT id FROM transaction_numbers)
		GROUP BY transaction_id;
	ALTER TABLE approval_requests ADD COLUMN tseq INTEGER;
	UPDATE approval_requests SET tseq = (SELECT seq FROM transaction_numbers WHERE id = approval_requests.transaction_id)
		WHERE transaction_id IS NOT NULL AND transaction_id != '';
	DROP INDEX approval_requests_by_transaction;
	DROP INDEX approval_requests_by_act;
	CREATE INDEX approval_requests_by_act ON approval_requests(tseq, mandate_id, action_hash);`,
	// 31: the ledger's rows are keyed by their transaction's local number
	// too (migration 29): an obligation's state, a settlement's
	// idempotency key, a commitment and a payment, and their counts. Each
	// was keyed by a random id (the obligation's, the act's, the
	// instruction's) or by the transaction's, so at a million
	// transactions each act that committed, issued or paid read and
	// wrote a cold leaf of each of those keys and their indexes by
	// transaction: by their keys, three an acceptance under a budget and
	// six an instruction (docs/performance.md, "A year of history").
	// Keyed by number first, a new transaction's rows go to the ends the
	// last acts left warm, and its rows are found together. A settlement
	// keeps its key by instruction id, which the rails name alone. The
	// tables are rebuilt (nothing
	// references them; rowids kept, so the order obligations were issued
	// and instructions made is too); the triggers that keep the budgets'
	// counts (migration 25) go with them and come back keyed by the
	// number. Transactions these rows name and no object named are
	// numbered first, after the others.
	`INSERT INTO transaction_numbers(id, seq)
		SELECT transaction_id, (SELECT IFNULL(MAX(seq), 0) FROM transaction_numbers) + ROW_NUMBER() OVER (ORDER BY transaction_id)
		FROM (SELECT transaction_id FROM obligation_states UNION SELECT transaction_id FROM settlements
			UNION SELECT transaction_id FROM spend UNION SELECT transaction_id FROM spend_payments
			UNION SELECT transaction_id FROM spend_counts UNION SELECT transaction_id FROM payment_counts)
		WHERE transaction_id NOT IN (SELECT id FROM transaction_numbers);
	DROP TRIGGER budget_transaction_in;
	DROP TRIGGER budget_transaction_moved;
	DROP TRIGGER budget_transaction_out;
	CREATE TABLE obligation_states_new (
		obligation_id  TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		tseq           INTEGER NOT NULL,
		state          TEXT NOT NULL,
		assertions     TEXT NOT NULL DEFAULT '[]',
		updated_seq    INTEGER NOT NULL,
		accepted_by    TEXT NOT NULL DEFAULT '',
		UNIQUE (tseq, obligation_id)
	);
	INSERT INTO obligation_states_new(rowid, obligation_id, transaction_id, tseq, state, assertions, updated_seq, accepted_by)
		SELECT o.rowid, o.obligation_id, o.transaction_id, n.seq, o.state, o.assertions, o.updated_seq, o.accepted_by
		FROM obligation_states o JOIN transaction_numbers n ON n.id = o.transaction_id ORDER BY o.rowid;
	DROP TABLE obligation_states;
	ALTER TABLE obligation_states_new RENAME TO obligation_states;
	CREATE TABLE settlements_new (
		instruction_id  TEXT PRIMARY KEY,
		transaction_id  TEXT NOT NULL,
		tseq            INTEGER NOT NULL,
		obligation_id   TEXT NOT NULL,
		rail            TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		fingerprint     TEXT NOT NULL,
		ours            INTEGER NOT NULL,
		state           TEXT NOT NULL CHECK (state IN ('instructed','pending','succeeded','failed','reversed')),
		attempts        INTEGER NOT NULL DEFAULT 0,
		next_attempt    INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT NOT NULL DEFAULT '',
		UNIQUE (tseq, idempotency_key)
	);
	INSERT INTO settlements_new(rowid, instruction_id, transaction_id, tseq, obligation_id, rail, idempotency_key, fingerprint, ours, state, attempts, next_attempt, last_error)
		SELECT s.rowid, s.instruction_id, s.transaction_id, n.seq, s.obligation_id, s.rail, s.idempotency_key, s.fingerprint, s.ours, s.state, s.attempts, s.next_attempt, s.last_error
		FROM settlements s JOIN transaction_numbers n ON n.id = s.transaction_id ORDER BY s.rowid;
	DROP TABLE settlements;
	ALTER TABLE settlements_new RENAME TO settlements;
	CREATE INDEX settlements_due ON settlements(ours, state, next_attempt);
	CREATE TABLE spend_new (
		tseq           INTEGER NOT NULL,
		act_id         TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		agent_id       TEXT NOT NULL,
		amount         TEXT NOT NULL,
		at             INTEGER NOT NULL,
		PRIMARY KEY (tseq, act_id)
	) WITHOUT ROWID;
	INSERT INTO spend_new(tseq, act_id, transaction_id, currency, counterparty, agent_id, amount, at)
		SELECT n.seq, s.act_id, s.transaction_id, s.currency, s.counterparty, s.agent_id, s.amount, s.at
		FROM spend s JOIN transaction_numbers n ON n.id = s.transaction_id;
	DROP TABLE spend;
	ALTER TABLE spend_new RENAME TO spend;
	CREATE TABLE spend_payments_new (
		tseq           INTEGER NOT NULL,
		instruction_id TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		agent_id       TEXT NOT NULL,
		amount         TEXT NOT NULL,
		at             INTEGER NOT NULL,
		PRIMARY KEY (tseq, instruction_id)
	) WITHOUT ROWID;
	INSERT INTO spend_payments_new(tseq, instruction_id, transaction_id, currency, counterparty, agent_id, amount, at)
		SELECT n.seq, p.instruction_id, p.transaction_id, p.currency, p.counterparty, p.agent_id, p.amount, p.at
		FROM spend_payments p JOIN transaction_numbers n ON n.id = p.transaction_id;
	DROP TABLE spend_payments;
	ALTER TABLE spend_payments_new RENAME TO spend_payments;
	CREATE TABLE spend_counts_new (
		tseq           INTEGER NOT NULL,
		currency       TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		at             INTEGER NOT NULL,
		agent_id       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		counted        TEXT NOT NULL,
		unpaid         TEXT,
		PRIMARY KEY (tseq, currency)
	) WITHOUT ROWID;
	INSERT INTO spend_counts_new(tseq, currency, transaction_id, at, agent_id, counterparty, counted, unpaid)
		SELECT n.seq, c.currency, c.transaction_id, c.at, c.agent_id, c.counterparty, c.counted, c.unpaid
		FROM spend_counts c JOIN transaction_numbers n ON n.id = c.transaction_id;
	DROP TABLE spend_counts;
	ALTER TABLE spend_counts_new RENAME TO spend_counts;
	CREATE TABLE payment_counts_new (
		tseq           INTEGER NOT NULL,
		instruction_id TEXT NOT NULL,
		transaction_id TEXT NOT NULL,
		currency       TEXT NOT NULL,
		counterparty   TEXT NOT NULL,
		at             INTEGER NOT NULL,
		counted        TEXT NOT NULL,
		PRIMARY KEY (tseq, instruction_id)
	) WITHOUT ROWID;
	INSERT INTO payment_counts_new(tseq, instruction_id, transaction_id, currency, counterparty, at, counted)
		SELECT n.seq, c.instruction_id, c.transaction_id, c.currency, c.counterparty, c.at, c.counted
		FROM payment_counts c JOIN transaction_numbers n ON n.id = c.transaction_id;
	DROP TABLE payment_counts;
	ALTER TABLE payment_counts_new RENAME TO payment_counts;
	CREATE TRIGGER budget_spend_in AFTER INSERT ON spend
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_spend_changed AFTER UPDATE ON spend
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id), (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_spend_out AFTER DELETE ON spend
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_paid_in AFTER INSERT ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_paid_changed AFTER UPDATE ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id), (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_paid_out AFTER DELETE ON spend_payments
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_settlement_in AFTER INSERT ON settlements
		WHEN EXISTS (SELECT 1 FROM spend_payments WHERE tseq = NEW.tseq AND instruction_id = NEW.instruction_id)
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_settlement_moved AFTER UPDATE OF state ON settlements
		WHEN OLD.state IS NOT NEW.state AND EXISTS (SELECT 1 FROM spend_payments WHERE tseq = NEW.tseq AND instruction_id = NEW.instruction_id)
		BEGIN INSERT INTO budget_dirty VALUES (NEW.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_settlement_out AFTER DELETE ON settlements
		WHEN EXISTS (SELECT 1 FROM spend_payments WHERE tseq = OLD.tseq AND instruction_id = OLD.instruction_id)
		BEGIN INSERT INTO budget_dirty VALUES (OLD.transaction_id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_transaction_in AFTER INSERT ON transactions
		WHEN EXISTS (SELECT 1 FROM spend WHERE tseq = (SELECT seq FROM transaction_numbers WHERE id = NEW.id))
		BEGIN INSERT INTO budget_dirty VALUES (NEW.id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_transaction_moved AFTER UPDATE OF state ON transactions
		WHEN OLD.state IS NOT NEW.state
			AND (OLD.state IN ('completed','cancelled','expired','terminated') OR NEW.state IN ('completed','cancelled','expired','terminated'))
			AND EXISTS (SELECT 1 FROM spend WHERE tseq = (SELECT seq FROM transaction_numbers WHERE id = NEW.id))
		BEGIN INSERT INTO budget_dirty VALUES (NEW.id) ON CONFLICT DO NOTHING; END;
	CREATE TRIGGER budget_transaction_out AFTER DELETE ON transactions
		WHEN EXISTS (SELECT 1 FROM spend_counts WHERE tseq = (SELECT seq FROM transaction_numbers WHERE id = OLD.id))
		BEGIN INSERT INTO budget_dirty VALUES (OLD.id) ON CONFLICT DO NOTHING; END;`,
}

// fkOffMigrations run with foreign key enforcement off, as SQLite's
// procedure for rebuilding a table that others reference asks, and with
// every foreign key checked before they commit (migrate).
var fkOffMigrations = map[int]bool{16: true, 17: true, 26: true, 29: true}

// idleConns is how many connections the pool keeps open between uses.
// database/sql keeps two by default, so when more goroutines than that
// read at once (eight agents' acts and their peers' messages), the extra
// connections were closed as they came back and opened again moments
// later: each open is a SQLite connection set up with its pragmas, an
// empty page cache, and every hot statement prepared again on it (stmt
// prepares once per connection), a tenth of a formation's CPU at eight
// concurrent agents. Eight covers this process's usual concurrency (the
// agents' calls, the peer's messages, the outbox); more may still open
// under a burst and are closed after it. An idle connection holds its
// page cache, at most SQLite's default cache_size (2 MiB) each.
const idleConns = 8

// pageSize is the page size of a database this package creates, in
// bytes. A record's rows are its objects' exact bytes, about 2 KiB each;
// with SQLite's default 4 KiB page, a leaf page held one such row and
// the rest of it stayed empty, so the database was 1.7 times the record
// it held (measured on completed transactions, TestDatabaseStaysNearTheRecord
// in internal/record). 16 KiB pages hold seven, and the database is under
// 1.5 times the record; at a million transactions the b-trees are also a
// level shallower. The page size is fixed when a database is created: one
// created before keeps its own (page_size is a no-op on it) until a
// `party backup` of it, written in pages of pageSize (Backup), is
// restored.
const pageSize = "16384"

// mmapSize is how much of the database file a connection reads through a
// memory map: none. SQLite empties a connection's page cache at the start
// of each read transaction that follows another connection's commit (its
// rule in WAL mode), and a mapped connection then also drops its map
// (munmap: the process's page-table entries torn down, every core's TLB
// flushed) and faults each page in again as it reads it. Every act
// commits, so nearly every read transaction pays that: a commit on one
// connection and then a point read on another takes 73 µs read by system
// call and 266 µs mapped (BenchmarkReadAfterCommit), 57 µs and 226 µs on
// a copy of a buyer holding 10 000 transactions. Alternated with the
// mapped build in BenchmarkHistory at 10 000 transactions, every act was
// cheaper (accept_offer 5.0–5.9 ms at 10 and 6.2–7.5 ms at 10 000,
// against 6.2–6.8 and 7.3–8.6 ms), and a formation 8 % faster; see
// docs/performance.md, "What grows". (A map of 2 GiB measured the better
// on the build that adopted it, before the budgets' running totals.)
// Set explicitly, since SQLite's default depends on how it was built;
// pinned by TestReadsAreNotMapped.
const mmapSize = "0"

// cacheSize is each connection's page cache, in SQLite's terms (negative:
// KiB): 16 MiB, against SQLite's default of 2 MiB. Without a memory map
// (mmapSize) a page a connection no longer holds is read again by system
// call, and the pages a page of list_inbox, a timeline or the approvals
// page reads at 10 000 transactions outgrow 2 MiB: without the map and
// at 2 MiB they cost up to 1.25 times their cost at 10, and up to a
// third more than mapped; at 16 MiB, 0.99–1.03 and less than mapped
// (BenchmarkHistory, alternated with the mapped build). A cache fills
// only with pages read, and a reader's is emptied after each commit of
// another connection (SQLite's rule in WAL mode), so it is the
// writer's, and a reader's while no act commits, that grows: at most
// 16 MiB a connection, 144 MiB for the writer and idleConns readers.
const cacheSize = "-16384"

// sizePages gives a database that holds nothing yet (no file, or an empty
// one: createFresh could not write the copy) its page size before it is
// opened. OpenWith's journal_mode(WAL) would fix the default instead: the
// driver runs a DSN's pragmas in name order, journal_mode before
// page_size, and the first change of journal mode writes page 1. Where it
// cannot, the database keeps the default, and works as well.
func sizePages(path string) {
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=page_size("+pageSize+")")
	if err != nil {
		return
	}
	defer db.Close()
	db.Exec(`PRAGMA journal_mode = WAL`)
}

// Options are how OpenWith opens the database.
type Options struct {
	// NoSync commits without waiting for the disk (synchronous=OFF): a
	// commit survives the process being killed, not the machine losing
	// power. Only for tests, whose state directories are thrown away and
	// whose crash harness kills in process: waiting on fsync was most of
	// their wall time, and it proves nothing there (TestDurableByDefault
	// keeps what an instance opens durable).
	NoSync bool
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date. Every commit is durable (synchronous=FULL).
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, opt Options) (*Store, error) {
	// _txlock=immediate makes every write transaction take the write lock at
	// BEGIN, so two writers queue on the busy timeout instead of failing
	// half-way with SQLITE_BUSY on upgrade from a read lock.
	// temp_store(MEMORY) keeps a savepoint's copies of the pages it
	// changes in memory: a group commit (group.go) takes a savepoint per
	// Update, and on disk those copies spilled into a temporary file past
	// 64 KiB, a fifth more bytes written per formation than without
	// groups. Temporary tables and sorts, small here, stay in memory too.
	// mmap_size: see mmapSize.
	sync := "FULL"
	if opt.NoSync {
		sync = "OFF"
	}
	createFresh(path, opt.NoSync)
	sizePages(path)
	db, err := sql.Open("sqlite", dsn(path, sync, mmapSize))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxIdleConns(idleConns)
	s := &Store{database: &database{db: db}}
	s.group.lead = make(chan struct{}, 1)
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.fillCounts(context.Background()); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: budget counts of the transactions held before migration 25: %w", err)
	}
	return s, nil
}

// dsn is the data source name of the pool's connections: the pragmas
// each runs as it opens (see OpenWith).
func dsn(path, sync, mmap string) string {
	return "file:" + path + "?_pragma=cache_size(" + cacheSize + ")&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=synchronous(" + sync + ")&_pragma=temp_store(MEMORY)&_pragma=mmap_size(" + mmap + ")&_txlock=immediate"
}

// Close closes the database; for a snapshot, nothing (its done ends it).
func (s *Store) Close() error {
	if s.snap != nil {
		return nil
	}
	s.stmts.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
	s.group.lead <- struct{}{} // no write is under way, nor begins
	s.closeWriter()
	<-s.group.lead
	return s.db.Close()
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrations table: %w", err)
	}
	var current int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	all := allMigrations()
	if current > len(all) {
		return fmt.Errorf("%w: database at version %d, binary knows %d", ErrTooNew, current, len(all))
	}
	if current == len(all) {
		return nil
	}
	// One connection for them all: the foreign_keys pragma is a
	// connection's, and is set outside a transaction.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for v := current + 1; v <= len(all); v++ {
		if err := migrateOne(ctx, conn, v, all[v-1], fkOffMigrations[v]); err != nil {
			return err
		}
	}
	// A migration that rewrote a table wrote all of it to the write-ahead
	// log, which SQLite copies into the database but does not shrink: the
	// log would stay as large as the table (4 GB at 100 000 transactions,
	// migration 22) for as long as the process runs. Empty it once.
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("store: checkpoint after migrating: %w", err)
	}
	return nil
}

// migrateOne applies migration v in one transaction on conn, with foreign
// keys off for its duration when fkOff is set (and on again after, for
// the pool's next user of conn), and refuses to commit one that leaves a
// foreign key unmet.
func migrateOne(ctx context.Context, conn *sql.Conn, v int, migration string, fkOff bool) (err error) {
	if fkOff {
		if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return fmt.Errorf("store: migration %d: %w", v, err)
		}
		defer func() {
			if _, ferr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); ferr != nil && err == nil {
				err = fmt.Errorf("store: migration %d: %w", v, ferr)
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Another process may have applied it since migrate read the version
	// (two commands opening a database that needs migrating at the same
	// moment): the write lock BEGIN took orders the two, and the second
	// finds it recorded and leaves it.
	var applied int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, v).Scan(&applied); err != nil {
		return fmt.Errorf("store: migration %d: %w", v, err)
	}
	if applied > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, migration); err != nil {
		return fmt.Errorf("store: migration %d: %w", v, err)
	}
	if fkOff {
		var table string
		switch err := tx.QueryRowContext(ctx, `PRAGMA foreign_key_check`).Scan(&table); {
		case err == nil:
			return fmt.Errorf("store: migration %d: a foreign key of %s is not met", v, table)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("store: migration %d: %w", v, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, v, now()); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migration %d: %w", v, err)
	}
	return nil
}

// Version returns the schema version recorded in the database.
func (s *Store) Version() (int, error) {
	var v int
	err := s.db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func allMigrations() []string { return migrations }

// now is the time a row is written at, in a fixed-width form so that text
// order is time order (updated_at orders and pages transactions).
func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z") }
