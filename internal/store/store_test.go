package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/spectest"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func refObjects(t *testing.T) map[string][]byte {
	dir := spectest.ReferenceVectors(t)
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "*.json"))
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := canonical.Canonicalize(data)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = canon
	}
	return out
}

// refKeyRecords returns the canonical bytes of every key record of the
// reference vectors (at least one).
func refKeyRecords(t *testing.T) [][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(spectest.ReferenceVectors(t), "key_records", "*.json"))
	if len(files) == 0 {
		t.Fatal("no reference key records")
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := canonical.Canonicalize(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// objectTxn is the transaction of the canonical object body ("" when it
// has none), the first half of its key (migration 26).
func objectTxn(t *testing.T, body []byte) string {
	t.Helper()
	info, _, err := objectInfo(body)
	if err != nil {
		t.Fatal(err)
	}
	return info.TransactionID
}

// migratedTo opens the database at dsn, a new file, with the migrations
// up to version applied and recorded, as a binary of that version left
// it: the start of a test of the migration after.
func migratedTo(t *testing.T, dsn string, version int) *sql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= version; v++ {
		if _, err := db.ExecContext(ctx, migrations[v-1]); err != nil {
			t.Fatalf("migration %d: %v", v, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, v, now()); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// queryPlan is SQLite's plan for query (Store.Plan), its steps joined
// by "; ".
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	plan, err := s.Plan(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(plan, "\n", "; ")
}

func TestObjectsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s := open(t, path)
	objs := refObjects(t)
	for _, b := range objs {
		if _, err := s.PutObject(ctx, b, "local"); err != nil {
			t.Fatal(err)
		}
		// Idempotent for the same bytes.
		if _, err := s.PutObject(ctx, b, "local"); err != nil {
			t.Fatalf("second put of identical bytes: %v", err)
		}
	}
	s.Close()
	s2 := open(t, path)
	for id, b := range objs {
		got, err := s2.GetObject(ctx, objectTxn(t, b), id)
		if err != nil || string(got) != string(b) {
			t.Fatalf("%s after reopen: %v", id, err)
		}
	}
	all, err := s2.TransactionObjects(ctx, "txn_calibration_demo_01")
	if err != nil || len(all) != len(objs) {
		t.Fatalf("transaction objects: %d, %v", len(all), err)
	}
	if v, _ := s2.Version(); v != len(migrations) {
		t.Fatalf("schema version %d", v)
	}
}

func TestPutRefusesNonCanonicalAndConflicts(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	objs := refObjects(t)
	off := objs["off_ef88a971e3e0ece2701a1ee1"]
	if off == nil {
		t.Fatal("reference offer missing")
	}
	pretty := []byte(strings.Replace(string(off), ",", ", ", 1))
	if _, err := s.PutObject(ctx, pretty, "local"); err == nil {
		t.Fatal("stored non-canonical bytes")
	}
	if _, err := s.PutObject(ctx, []byte(`{"a":1,"a":2}`), "local"); err == nil {
		t.Fatal("stored a document with duplicate keys")
	}
	if _, err := s.PutObject(ctx, off, "local"); err != nil {
		t.Fatal(err)
	}
	obj, _ := canonical.DecodeObject(off)
	obj["signatures"] = []any{}
	other, _ := canonical.Marshal(obj)
	if _, err := s.PutObject(ctx, other, "org_x"); !errors.Is(err, ErrConflict) {
		t.Fatalf("other bytes under the same id: %v", err)
	}
}

func TestReplaceIsCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	objs := refObjects(t)
	evt := objs["evt_73ca039b6e9ebffcd6748873"]
	obj, _ := canonical.DecodeObject(evt)
	sigs := obj["signatures"].([]any)
	obj["signatures"] = sigs[:1]
	one, _ := canonical.Marshal(obj)
	if _, err := s.PutObject(ctx, one, "local"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceObject(ctx, "evt_73ca039b6e9ebffcd6748873", one, evt); err != nil {
		t.Fatal(err)
	}
	// A second writer holding the stale bytes loses.
	if err := s.ReplaceObject(ctx, "evt_73ca039b6e9ebffcd6748873", one, evt); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale compare-and-swap: %v", err)
	}
	// Changing signed content under the same id is refused.
	obj2, _ := canonical.DecodeObject(evt)
	obj2["payload"].(map[string]any)["to_state"] = "completed"
	forged, _ := canonical.Marshal(obj2)
	if err := s.ReplaceObject(ctx, "evt_73ca039b6e9ebffcd6748873", evt, forged); err == nil {
		t.Fatalf("content change accepted: %v", err)
	}
}

func TestMandateStatus(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	m := []byte(`{"id":"mnd_0123456789abcdef01234567","represented_organization_id":"org_a","subject":{"agent_id":"agt_a","key_id":"key_a"}}`)
	if err := s.PutMandate(ctx, m, "local"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMandateStatus(ctx, "mnd_0123456789abcdef01234567", StatusActive, StatusSuspended); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMandateStatus(ctx, "mnd_0123456789abcdef01234567", StatusActive, StatusRevoked); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale status change: %v", err)
	}
	if err := s.SetMandateStatus(ctx, "mnd_0123456789abcdef01234567", StatusSuspended, StatusRevoked); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMandateStatus(ctx, "mnd_0123456789abcdef01234567", StatusRevoked, StatusActive); err == nil {
		t.Fatal("revocation undone")
	}
	rec, err := s.GetMandate(ctx, "mnd_0123456789abcdef01234567")
	if err != nil || rec.Status != StatusRevoked || rec.SubjectAgentID != "agt_a" {
		t.Fatalf("%+v %v", rec, err)
	}
	if _, err := s.GetMandate(ctx, "mnd_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if _, found, err := s.Claim(ctx, "propose_offer", "r1", "h1"); found || err != nil {
		t.Fatal(found, err)
	}
	if _, _, err := s.Claim(ctx, "propose_offer", "r1", "h1"); !errors.Is(err, ErrRequestRunning) {
		t.Fatalf("claim while running: %v", err)
	}
	if err := s.Finish(ctx, "propose_offer", "r1", []byte(`{"ok":1}`)); err != nil {
		t.Fatal(err)
	}
	res, found, err := s.Claim(ctx, "propose_offer", "r1", "h1")
	if !found || err != nil || string(res) != `{"ok":1}` {
		t.Fatalf("repeat: %s %v %v", res, found, err)
	}
	if _, _, err := s.Claim(ctx, "propose_offer", "r1", "h2"); !errors.Is(err, ErrRequestReused) {
		t.Fatalf("other arguments: %v", err)
	}
	// Another tool may use the same id.
	if _, found, err := s.Claim(ctx, "accept_offer", "r1", "h9"); found || err != nil {
		t.Fatal(found, err)
	}
	if err := s.Release(ctx, "accept_offer", "r1"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Claim(ctx, "accept_offer", "r1", "h9"); found || err != nil {
		t.Fatal("released claim not reusable", found, err)
	}
}

// keyVersion is s.KeyObjectsVersion(ctx), failing t on an error.
func keyVersion(t *testing.T, ctx context.Context, s *Store) int64 {
	t.Helper()
	v, err := s.KeyObjectsVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKeyObjectsVersion: the number moves with every change to the key
// and revocation records, whoever makes it, and with nothing else.
func TestKeyObjectsVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s, other := open(t, path), open(t, path) // other: a second process
	version := func(st *Store) int64 { t.Helper(); return keyVersion(t, ctx, st) }
	v := version(s)
	moved := func(why string) {
		t.Helper()
		if now := version(other); now == v {
			t.Fatalf("%s: the version stayed at %d", why, v)
		} else {
			v = now
		}
		if version(s) != v {
			t.Fatalf("%s: the two connections disagree", why)
		}
	}
	stayed := func(why string) {
		t.Helper()
		if now := version(other); now != v {
			t.Fatalf("%s: the version moved from %d to %d", why, v, now)
		}
	}
	for _, b := range refObjects(t) {
		if _, err := s.PutObject(ctx, b, "local"); err != nil {
			t.Fatal(err)
		}
	}
	stayed("storing the transaction's objects")
	rec := refKeyRecords(t)[0]
	info, err := s.PutObject(ctx, rec, "org_x")
	if err != nil {
		t.Fatal(err)
	}
	moved("storing a key record")
	if _, err := s.PutObject(ctx, rec, "org_x"); err != nil {
		t.Fatal(err)
	}
	stayed("storing the same key record again")
	obj, _ := canonical.DecodeObject(rec)
	obj["signatures"] = []any{}
	unsigned, _ := canonical.Marshal(obj)
	if err := other.ReplaceObject(ctx, info.ID, rec, unsigned); err != nil {
		t.Fatal(err)
	}
	moved("changing a key record's signatures in another process")
	if _, err := s.db.ExecContext(ctx, `DELETE FROM objects WHERE id = ?`, info.ID); err != nil {
		t.Fatal(err)
	}
	moved("removing a key record")

	m := []byte(`{"id":"mnd_0123456789abcdef01234567","represented_organization_id":"org_a","subject":{"agent_id":"agt_a","key_id":"key_a"}}`)
	if err := s.PutMandate(ctx, m, "local"); err != nil {
		t.Fatal(err)
	}
	moved("storing a mandate")
	if err := s.PutMandate(ctx, m, "local"); err != nil {
		t.Fatal(err)
	}
	stayed("storing the same mandate again")
	if err := other.SetMandateStatus(ctx, "mnd_0123456789abcdef01234567", StatusActive, StatusSuspended); err != nil {
		t.Fatal(err)
	}
	moved("suspending a mandate in another process")
	if _, err := s.db.ExecContext(ctx, `DELETE FROM mandates WHERE id = ?`, "mnd_0123456789abcdef01234567"); err != nil {
		t.Fatal(err)
	}
	moved("removing a mandate")
}

// A mandate read is kept until the version moves: a status another
// process sets is read at the next GetMandate, and a removed mandate is
// not found.
func TestGetMandateKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s, other := open(t, path), open(t, path)
	const id = "mnd_0123456789abcdef01234567"
	m := []byte(`{"id":"` + id + `","represented_organization_id":"org_a","subject":{"agent_id":"agt_a","key_id":"key_a"}}`)
	if _, err := s.GetMandate(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before it is stored: %v", err)
	}
	// The absence is kept under the number too, and answered from there.
	if got, ok := s.mandates.get(keyVersion(t, ctx, s), id); !ok || got.ID != "" {
		t.Fatalf("absence not kept: %+v, %v", got, ok)
	}
	if _, err := s.GetMandate(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before it is stored, read again: %v", err)
	}
	if err := other.PutMandate(ctx, m, "org_a"); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		rec, err := s.GetMandate(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Body) != string(m) || rec.Origin != "org_a" || rec.SubjectAgentID != "agt_a" {
			t.Fatalf("read %+v", rec)
		}
		return rec.Status
	}
	if got := status(); got != StatusActive {
		t.Fatalf("stored by another process: %s", got)
	}
	if got := status(); got != StatusActive {
		t.Fatalf("read again: %s", got)
	}
	if err := other.SetMandateStatus(ctx, id, StatusActive, StatusRevoked); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != StatusRevoked {
		t.Fatalf("revoked by another process, read as %s", got)
	}
	if _, err := other.db.ExecContext(ctx, `DELETE FROM mandates WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMandate(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed by another process: %v", err)
	}
}

// TestMinimumGradeKept: a mandate's local policy is kept between reads and
// read again once another process (the principal's CLI beside serve) sets,
// changes or clears it, or changes the row behind the store's back
// (migration 15's triggers).
func TestMinimumGradeKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s, other := open(t, path), open(t, path)
	const id = "mnd_0123456789abcdef01234567"
	read := func() map[string]int {
		t.Helper()
		min, err := s.MinimumGrade(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return min
	}
	if min := read(); min != nil {
		t.Fatalf("before any policy: %v", min)
	}
	if err := other.SetMinimumGrade(ctx, id, map[string]int{"conformance": 2}); err != nil {
		t.Fatal(err)
	}
	if min := read(); min["conformance"] != 2 {
		t.Fatalf("set by another process, read as %v", min)
	}
	if min := read(); min["conformance"] != 2 {
		t.Fatalf("read again: %v", min)
	}
	if err := other.SetMinimumGrade(ctx, id, map[string]int{"conformance": 3}); err != nil {
		t.Fatal(err)
	}
	if min := read(); min["conformance"] != 3 {
		t.Fatalf("changed by another process, read as %v", min)
	}
	if _, err := other.db.ExecContext(ctx, `UPDATE mandate_policies SET minimum_grade = '{"conformance":1}' WHERE mandate_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if min := read(); min["conformance"] != 1 {
		t.Fatalf("row changed directly, read as %v", min)
	}
	if err := other.SetMinimumGrade(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if min := read(); min != nil {
		t.Fatalf("cleared by another process, read as %v", min)
	}
}

// KeyObjectsCache derives its value again only once the version moved,
// whichever handle moved it.
func TestKeyObjectsCache(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s, other := open(t, path), open(t, path)
	reads := 0
	var c KeyObjectsCache[int]
	get := func() int {
		t.Helper()
		v, err := c.Get(ctx, s, func(ctx context.Context) (int, error) {
			reads++
			rows, err := s.ObjectsOfType(ctx, "key_record")
			return len(rows), err
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if n := get(); n != 0 || reads != 1 {
		t.Fatalf("first Get: %d key records after %d reads", n, reads)
	}
	if n := get(); n != 0 || reads != 1 {
		t.Fatalf("second Get, nothing stored: %d key records after %d reads", n, reads)
	}
	if _, err := other.PutObject(ctx, refKeyRecords(t)[0], "org_x"); err != nil {
		t.Fatal(err)
	}
	if n := get(); n != 1 || reads != 2 {
		t.Fatalf("after another handle stored a key record: %d key records after %d reads", n, reads)
	}
}

// Key and revocation records are read through their partial index (a
// query SQLite could not match to it would scan every object the
// instance holds, at every key resolution), and every type still reads
// all of its objects, in storage order, with their origins.
func TestObjectsOfType(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	for _, typ := range []string{"key_record", "revocation_record"} {
		q, args := objectsOfType(typ, "body") // INDEXED BY: no plan at all without the index
		if got := queryPlan(t, s, q, args...); !strings.Contains(got, "USING INDEX key_objects") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s read by %q", typ, got)
		}
	}
	want := map[string]int{}
	for _, b := range refObjects(t) {
		info, err := s.PutObject(ctx, b, "org_x")
		if err != nil {
			t.Fatal(err)
		}
		want[info.ObjectType]++
	}
	for _, rec := range refKeyRecords(t) {
		if _, err := s.PutObject(ctx, rec, "org_x"); err != nil {
			t.Fatal(err)
		}
		want["key_record"]++
	}
	if want["key_record"] == 0 || len(want) < 3 {
		t.Fatalf("reference vectors hold too little: %v", want)
	}
	for typ, n := range want {
		got, err := s.ObjectsOfType(ctx, typ)
		if err != nil || len(got) != n {
			t.Errorf("%s: %d objects, want %d (%v)", typ, len(got), n, err)
		}
		for _, b := range got {
			if o, _ := canonical.DecodeObject(b); o["object_type"] != typ {
				t.Errorf("%s read a %v", typ, o["object_type"])
			}
		}
	}
	withOrigin, err := s.ObjectsWithOrigin(ctx, "key_record")
	if err != nil || len(withOrigin) != want["key_record"] || withOrigin[0].Origin != "org_x" {
		t.Errorf("key records with origin: %d %v", len(withOrigin), err)
	}
}

// Several types of a transaction in one read give what one read per type
// gives, in the order of the types asked, a repeated type once; the read
// goes through the (transaction, type) index.
func TestTransactionObjectsOfTypes(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	txns := map[string]bool{}
	for _, b := range refObjects(t) {
		info, err := s.PutObject(ctx, b, "org_x")
		if err != nil {
			t.Fatal(err)
		}
		if info.TransactionID != "" {
			txns[info.TransactionID] = true
		}
	}
	if len(txns) == 0 {
		t.Fatal("the reference vectors hold no transaction's objects")
	}
	for _, types := range [][]string{
		{"offer", "approval", "obligation"},
		{"agreement", "offer", "transaction_event", "agreement", "commitment", "policy_decision"},
		{"evidence"},
		{"no_such_type", "offer"},
	} {
		for txn := range txns {
			var want [][]byte
			seen := map[string]bool{}
			for _, typ := range types {
				if seen[typ] {
					continue
				}
				seen[typ] = true
				bs, err := s.TransactionObjectsOfType(ctx, txn, typ)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, bs...)
			}
			got, err := s.TransactionObjectsOfTypes(ctx, txn, types...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %v: %d objects, one read per type gives %d", txn, types, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("%s %v: object %d differs from one read per type", txn, types, i)
				}
			}
		}
	}
	q := `SELECT object_type, body FROM objects WHERE tseq = ` + txnSeq + ` AND object_type IN (?, ?) ORDER BY rowid`
	if got := queryPlan(t, s, q, "txn_x", "offer", "agreement"); !strings.Contains(got, "USING INDEX objects_by_transaction") {
		t.Errorf("several types read by %q", got)
	}
}

// Under WithKeyVersionMemo the key objects' version is read once and held
// until this Store commits under that context, which reads it again;
// another process's key record (here a second Store on the same file) is
// seen after that commit and at once by a context without the memo.
func TestKeyVersionMemo(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s, other := open(t, path), open(t, path)
	recs := refKeyRecords(t)
	if len(recs) < 3 {
		t.Fatalf("%d reference key records, want 3", len(recs))
	}
	version := func(ctx context.Context) int64 { t.Helper(); return keyVersion(t, ctx, s) }
	op := WithKeyVersionMemo(ctx)
	if WithKeyVersionMemo(op) != op {
		t.Error("a second memo on one operation's context")
	}
	v0 := version(op)
	if _, err := other.PutObject(ctx, recs[0], "org_x"); err != nil {
		t.Fatal(err)
	}
	if got := version(op); got != v0 {
		t.Errorf("under the memo the version moved to %d before this store committed", got)
	}
	v1 := version(ctx)
	if v1 == v0 {
		t.Fatal("another store's key record did not move the version")
	}
	// A commit of this store under the operation's context, of anything,
	// replaces the number held with the one the commit left.
	if err := s.Update(op, func(tx *Txn) error { _, err := tx.PutObject(recs[1], "org_x"); return err }); err != nil {
		t.Fatal(err)
	}
	if got, now := version(op), version(ctx); got != now || got == v1 {
		t.Errorf("after this store's commit the memo holds %d, the database %d (before it %d)", got, now, v1)
	}
	// The number after the commit was read inside it, not after it: held
	// from the commit on, it does not see another process's change that
	// follows, as no read was made to see it.
	v2 := version(ctx)
	if err := s.Update(op, func(tx *Txn) error {
		_, err := tx.exec(`INSERT INTO meta(key, value) VALUES ('memo_test', 'x')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.db.ExecContext(ctx, `UPDATE key_objects_version SET n = n + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if got, now := version(op), version(ctx); got != v2 || now != v2+1 {
		t.Errorf("the memo holds %d after a commit that left %d, the database now %d", got, v2, now)
	}
	// A group's members hold the number the whole group's commit left,
	// whichever of them stored the key record.
	first, second := WithKeyVersionMemo(ctx), WithKeyVersionMemo(ctx)
	version(first)
	release, held := holdLeader(t, s, func(*Txn) error { return nil })
	errs := make(chan error, 2)
	go func() {
		errs <- s.Update(first, func(tx *Txn) error {
			_, err := tx.exec(`INSERT INTO meta(key, value) VALUES ('memo_first', 'x')`)
			return err
		})
	}()
	queued(s, 1) // first ahead of second in the group
	go func() {
		errs <- s.Update(second, func(tx *Txn) error {
			_, err := tx.exec(`UPDATE key_objects_version SET n = n + 1 WHERE id = 1`)
			return err
		})
	}()
	queued(s, 2)
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Read from the memos only after another process moved the number
	// again: held from the commit, not read after it.
	left := version(ctx)
	if _, err := other.db.ExecContext(ctx, `UPDATE key_objects_version SET n = n + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if a, b := version(first), version(second); a != left || b != left {
		t.Errorf("after one commit for both the memos hold %d and %d, the commit left %d", a, b, left)
	}
	if _, err := s.PutObject(op, recs[2], "org_x"); err != nil {
		t.Fatal(err)
	}
	if got, now := version(op), version(ctx); got != now {
		t.Errorf("after this store's auto-committed write the memo holds %d, the database %d", got, now)
	}
}

// One operation's context may reach two stores (two instances in one
// process, the one's act calling the other's receipt): the memo holds a
// number for each, and a commit of one leaves the other's alone.
func TestKeyVersionMemoPerStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := open(t, filepath.Join(t.TempDir(), "a.db")), open(t, filepath.Join(t.TempDir(), "b.db"))
	for range 5 {
		if _, err := b.db.ExecContext(ctx, `UPDATE key_objects_version SET n = n + 1 WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
	}
	op := WithKeyVersionMemo(ctx)
	va, vb := keyVersion(t, ctx, a), keyVersion(t, ctx, b)
	if va == vb {
		t.Fatalf("both stores at %d", va)
	}
	if got := keyVersion(t, op, a); got != va {
		t.Errorf("a under the memo: %d, want %d", got, va)
	}
	if got := keyVersion(t, op, b); got != vb {
		t.Errorf("b under the memo after a's number: %d, want %d", got, vb)
	}
	if err := a.Update(op, func(tx *Txn) error {
		_, err := tx.exec(`UPDATE key_objects_version SET n = n + 1 WHERE id = 1`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := keyVersion(t, op, a); got != va+1 {
		t.Errorf("a after its commit: %d, want %d", got, va+1)
	}
	if got := keyVersion(t, op, b); got != vb {
		t.Errorf("b after a's commit: %d, want %d", got, vb)
	}
}

// A row read under a number the cache has already moved past (an
// operation's memo taken before a change) does not replace the newer rows.
func TestMandateCacheKeepsTheNewerNumber(t *testing.T) {
	t.Parallel()
	var c versionCache[MandateRecord]
	c.put(2, "mnd_new", MandateRecord{ID: "mnd_new", Status: StatusRevoked})
	c.put(1, "mnd_old", MandateRecord{ID: "mnd_old", Status: StatusActive})
	if m, ok := c.get(2, "mnd_new"); !ok || m.Status != StatusRevoked {
		t.Errorf("the row read under the current number is gone: %+v %v", m, ok)
	}
	if _, ok := c.get(1, "mnd_old"); ok {
		t.Error("a row read under a superseded number was kept")
	}
	c.put(3, "mnd_newer", MandateRecord{ID: "mnd_newer"})
	if _, ok := c.get(3, "mnd_new"); ok {
		t.Error("a row of an older number served under a newer one")
	}
}

// TestCancelledCall: a call whose context is already cancelled starts no
// write (nothing stored), while a write transaction that has begun runs to
// its commit even when its caller's context ends inside it (detach): a
// cancelled act is never left half-applied by an interrupted statement.
func TestCancelledCall(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	objs := refObjects(t)
	acc := objs["acc_12292097c638706e02ddc479"]
	agr := objs["agr_f3d6af902f16489fac9c9eb4"]
	if acc == nil || agr == nil {
		t.Fatal("reference objects missing")
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.PutObject(cancelled, acc, "local"); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutObject under a cancelled context: %v", err)
	}
	if err := s.Update(cancelled, func(tx *Txn) error {
		_, err := tx.PutObject(acc, "local")
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update under a cancelled context: %v", err)
	}
	if _, err := s.GetObject(context.Background(), objectTxn(t, acc), "acc_12292097c638706e02ddc479"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a cancelled call stored the object: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Update(ctx, func(tx *Txn) error {
		if _, err := tx.PutObject(acc, "local"); err != nil {
			return err
		}
		cancel()
		_, err := tx.PutObject(agr, "local")
		return err
	}); err != nil {
		t.Fatalf("a begun transaction did not commit after its caller's cancel: %v", err)
	}
	for id, body := range map[string][]byte{"acc_12292097c638706e02ddc479": acc, "agr_f3d6af902f16489fac9c9eb4": agr} {
		if _, err := s.GetObject(context.Background(), objectTxn(t, body), id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// TestIdleConnectionsKept: connections that were all in use at once go
// back to the pool instead of being closed (idleConns), so the next burst
// of readers finds them open, statements prepared.
func TestIdleConnectionsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	var rows []*sql.Rows
	for range idleConns {
		// An open Rows holds its connection, so these are idleConns
		// connections in use at once.
		r, err := s.db.QueryContext(ctx, `SELECT 1 UNION ALL SELECT 2`)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Next() {
			t.Fatal("no row")
		}
		rows = append(rows, r)
	}
	want := idleConns
	if s.writer != nil {
		want++ // the writer's connection is always in use (idleWriter)
	}
	if got := s.db.Stats().InUse; got != want {
		t.Fatalf("%d connections in use, want %d", got, want)
	}
	for _, r := range rows {
		r.Close()
	}
	st := s.db.Stats()
	if st.MaxIdleClosed != 0 || st.Idle != idleConns {
		t.Fatalf("after the burst: %d idle, %d closed for the idle limit; want %d idle, none closed", st.Idle, st.MaxIdleClosed, idleConns)
	}
}

// TestTxnState: within a write, the state a transaction is in is the one
// the write left it in (MarkRecorded, CreateTransaction), read from the
// database only when the write has not touched it.
func TestTxnState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	var evtID string
	var evt []byte
	for id, body := range refObjects(t) {
		if strings.HasPrefix(id, "evt_") {
			evtID, evt = id, body
			break
		}
	}
	if evt == nil {
		t.Fatal("no reference event")
	}
	// The event's own transaction: an event names its object by its
	// transaction and its id (migration 26).
	txn := objectTxn(t, evt)
	if txn == "" {
		t.Fatalf("reference event %s has no transaction", evtID)
	}
	state := func(tx *Txn, want string) error {
		got, err := tx.State(txn)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("state %q, want %q", got, want)
		}
		return nil
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.CreateTransaction(txn, "org_other", "buyer", "", "draft"); err != nil {
			return err
		}
		return state(tx, "draft")
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := state(tx, "draft"); err != nil { // read: this write has not touched it
			return err
		}
		info, err := tx.PutObject(evt, "local")
		if err != nil {
			return err
		}
		e := Event{TransactionID: txn, Sequence: 1, EventID: evtID, ContentHash: info.ContentHash, EventType: "offer.proposed", ToState: "offered", AppendedBy: "org_other", Status: EventPending}
		if err := tx.InsertEvent(e); err != nil {
			return err
		}
		if err := tx.MarkRecorded(e); err != nil {
			return err
		}
		return state(tx, "offered")
	}); err != nil {
		t.Fatal(err)
	}
	if x, err := s.GetTransaction(ctx, txn); err != nil || x.State != "offered" {
		t.Fatalf("committed state %q (%v), want offered", x.State, err)
	}
}

// TestTypeLiteral: only object type names are written into a query; any
// other string (a quote, upper case, the empty string) stays a parameter,
// and still finds what it names.
func TestTypeLiteral(t *testing.T) {
	t.Parallel()
	for typ, ok := range map[string]bool{
		"offer": true, "transaction_event": true, "key_record": true,
		"": false, "o'x": false, "Offer": false, "offer;": false, "offer ": false, strings.Repeat("a", 65): false,
	} {
		if lit, got := typeLiteral(typ); got != ok || ok && lit != "'"+typ+"'" {
			t.Errorf("%q: %q %v, want %v", typ, lit, got, ok)
		}
	}
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	for _, typ := range []string{"o'x", "offer"} {
		if got, err := s.TransactionObjectsOfTypes(ctx, "txn_none", typ, "agreement"); err != nil || len(got) != 0 {
			t.Errorf("%q: %d objects, %v", typ, len(got), err)
		}
		if got, err := s.ObjectsOfType(ctx, typ); err != nil || len(got) != 0 {
			t.Errorf("%q: %d objects, %v", typ, len(got), err)
		}
	}
}

// BenchmarkTypeInQuery: a read by transaction and object type with the
// type as a parameter (prepared again at every step: typeLiteral) and
// written in.
func BenchmarkTypeInQuery(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "party.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.Run("parameter", func(b *testing.B) {
		for b.Loop() {
			if _, err := list(ctx, s, scanBytes, `SELECT body FROM objects WHERE transaction_id = ? AND object_type = ? ORDER BY rowid`, "txn_x", "offer"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("literal", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TransactionObjectsOfType(ctx, "txn_x", "offer"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSnapshot: reads through a snapshot see the store as it stood when
// the snapshot began, a write committed meanwhile included only after it
// ends; reads through the Store itself are not in it; and a write through
// the snapshot is the database's, as through the Store.
func TestSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	other := open(t, filepath.Join(t.TempDir(), "party.db"))
	var bodies [][]byte
	for _, b := range refObjects(t) {
		bodies = append(bodies, b)
	}
	if _, err := s.PutObject(ctx, bodies[0], "local"); err != nil {
		t.Fatal(err)
	}
	first, _, err := objectInfo(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := objectInfo(bodies[1])
	if err != nil {
		t.Fatal(err)
	}
	snap, done := s.Snapshot(ctx)
	if _, err := snap.GetObject(ctx, first.TransactionID, first.ID); err != nil {
		t.Fatalf("read in the snapshot: %v", err)
	}
	// Written through the snapshot: Update is the database's, not in it.
	if err := snap.Update(ctx, func(tx *Txn) error { _, err := tx.PutObject(bodies[1], "local"); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := snap.GetObject(ctx, second.TransactionID, second.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a write after the snapshot began is seen in it: %v", err)
	}
	if _, err := s.GetObject(ctx, second.TransactionID, second.ID); err != nil {
		t.Fatalf("a read through the Store is in its snapshot: %v", err)
	}
	if _, err := other.GetObject(ctx, first.TransactionID, first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another store holds this one's object: %v", err)
	}
	if again, end := snap.Snapshot(ctx); again != snap {
		t.Error("a snapshot of a snapshot is a new one")
	} else {
		end()
	}
	done()
	if _, err := s.GetObject(ctx, second.TransactionID, second.ID); err != nil {
		t.Fatalf("after the snapshot: %v", err)
	}
}

// Two processes that open a database needing migrations at the same moment
// both read the old version; the one whose turn comes second finds each
// migration recorded by the first and leaves it, where it used to fail on
// the first's tables. Here the second's late turn is played by applying
// every migration again on a database that has them all.
func TestMigrationAppliedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	before, err := s.Version()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for v, m := range allMigrations() {
		if err := migrateOne(ctx, conn, v+1, m, fkOffMigrations[v+1]); err != nil {
			t.Fatalf("migration %d applied meanwhile: %v", v+1, err)
		}
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != before {
		t.Errorf("%d migrations recorded after the second turn, want %d (%v)", n, before, err)
	}
}

// TestDurableByDefault pins what an instance opens: every commit waits for
// the disk (synchronous=FULL, 2), and only a test's NoSync skips it (OFF, 0).
func TestDurableByDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		opt  Options
		want int
	}{{Options{}, 2}, {Options{NoSync: true}, 0}} {
		s, err := OpenWith(filepath.Join(t.TempDir(), "party.db"), c.opt)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := s.db.QueryRow(`PRAGMA synchronous`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got != c.want {
			t.Errorf("OpenWith(%+v): synchronous = %d, want %d", c.opt, got, c.want)
		}
	}
}

// TestReadsAreNotMapped: no connection of the pool, the writer's among
// them, reads the database through a memory map (mmapSize: a map costs
// more than it saves here), and each keeps a page cache of cacheSize.
func TestReadsAreNotMapped(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	ctx := context.Background()
	// Two connections held at once: the pool opens a second.
	var conns []*sql.Conn
	for range 2 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		var got int64
		if err := c.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != 0 {
			t.Errorf("connection %d: mmap_size = %d, want 0", i, got)
		}
		var cache string
		if err := c.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
			t.Fatal(err)
		}
		if cache != cacheSize {
			t.Errorf("connection %d: cache_size = %s, want %s", i, cache, cacheSize)
		}
	}
}

// BenchmarkReadAfterCommit is what decided mmapSize: one commit on a
// connection, then one point read on another, as every act's reads meet
// the commits before them. The database holds 20 000 inbox rows; the
// pool's pragmas are the store's, with and without a memory map.
//
//	go test -run '^$' -bench ReadAfterCommit ./internal/store
func BenchmarkReadAfterCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "party.db")
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const rows = 20000
	if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
		INSERT INTO inbox(from_org, message_key, transaction_id, reply, received_at) SELECT 'org_peer', printf('%064d', i), 'txn_x', randomblob(1000), '2026-01-01T00:00:00Z' FROM n`, rows); err != nil {
		b.Fatal(err)
	}
	s.Close()
	for _, m := range []struct{ name, size string }{{"unmapped", mmapSize}, {"mapped", "2147418112"}} {
		b.Run(m.name, func(b *testing.B) {
			db, err := sql.Open("sqlite", dsn(path, "OFF", m.size))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			w, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			r, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			i := 0
			for b.Loop() {
				i++
				if _, err := w.ExecContext(ctx, `INSERT INTO inbox(from_org, message_key, transaction_id, reply, received_at) VALUES ('org_other', ?, 'txn_y', x'00', '2026-01-01T00:00:00Z')`, fmt.Sprintf("%s-%d", m.name, i)); err != nil {
					b.Fatal(err)
				}
				var n int
				if err := r.QueryRowContext(ctx, `SELECT length(reply) FROM inbox WHERE from_org = 'org_peer' AND message_key = printf('%064d', ?)`, 1+(i*7919)%rows).Scan(&n); err != nil || n != 1000 {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// TestFreshDatabaseIsTheMigratedOne pins that a new database, written as a
// copy of the process's migrated template, is the database the migrations
// build on an empty file one by one: the same schema text, indexes and
// triggers, the same migrations recorded, in WAL mode with foreign keys on,
// with pages of pageSize bytes.
func TestFreshDatabaseIsTheMigratedOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copied := filepath.Join(dir, "copied.db")
	migrated := filepath.Join(dir, "migrated.db")
	// An empty file is not "nothing there": the migrations run on it.
	if err := os.WriteFile(migrated, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	schema := func(path string) string {
		s := open(t, path)
		var b strings.Builder
		rows, err := s.db.Query(`SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var typ, name, tbl, text string
			if err := rows.Scan(&typ, &name, &tbl, &text); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s on %s:\n%s\n", typ, name, tbl, text)
		}
		var versions, mode string
		var fk int
		if err := s.db.QueryRow(`SELECT group_concat(version) FROM (SELECT version FROM schema_migrations ORDER BY version)`).Scan(&versions); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		var pageSize int
		if err := s.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "migrations %s\njournal_mode %s\nforeign_keys %d\npage_size %d\n", versions, mode, fk, pageSize)
		return b.String()
	}
	got, want := schema(copied), schema(migrated)
	if !strings.Contains(got, "\npage_size "+pageSize+"\n") {
		t.Errorf("a new database's pages are not %s bytes:\n%s", pageSize, got)
	}
	if got != want {
		t.Errorf("a new database differs from one migrated step by step:\n--- new\n%s\n--- migrated\n%s", got, want)
	}
	if !strings.Contains(want, "table objects on objects") || !strings.Contains(want, fmt.Sprintf(",%d\n", len(allMigrations()))) {
		t.Errorf("the migrated schema lacks what it should hold:\n%s", want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.new-*")); len(left) > 0 {
		t.Errorf("the copy's temporary file stayed: %v", left)
	}
}

// TestLeftoverCopySwept: the copy a creation leaves beside the database
// when its process stops before removing it (party.db.new-…, and its
// journal) is removed by the next Open; nothing else beside it is.
func TestLeftoverCopySwept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "party.db")
	open(t, path).Close()
	left := []string{path + ".new-0123456789abcdef", path + ".new-0123456789abcdef-journal"}
	kept := []string{path + ".newer", filepath.Join(dir, "other.db.new-0123456789abcdef")}
	for _, f := range append(append([]string{}, left...), kept...) {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	open(t, path)
	for _, f := range left {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after Open (%v)", filepath.Base(f), err)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(f), err)
		}
	}
}

// keyedObject is the canonical bytes of an object with id, object_type
// typ, transaction_id txn (none when txn is "") and a payload holding
// note, with its own content_hash: two calls that differ only in txn or
// note give two objects of the same id.
func keyedObject(t *testing.T, id, typ, txn, note string) []byte {
	t.Helper()
	obj := map[string]any{"id": id, "object_type": typ, "payload": map[string]any{"note": note}, "signatures": []any{}}
	if txn != "" {
		obj["transaction_id"] = txn
	}
	h, err := canonical.ContentHash(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj["content_hash"] = h
	b, err := canonical.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	// What the store indexes is what was meant.
	info, _, err := objectInfo(b)
	if err != nil || info.ID != id || info.ObjectType != typ || info.TransactionID != txn {
		t.Fatalf("built %+v (%v), want %s %s of %q", info, err, typ, id, txn)
	}
	return b
}

// rowsOfID fails t unless s holds want rows of objects under id, in
// whatever transactions.
func rowsOfID(t *testing.T, s *Store, id string, want int) {
	t.Helper()
	var rows int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM objects WHERE id = ?`, id).Scan(&rows); err != nil || rows != want {
		t.Fatalf("%d rows of %s (%v), want %d", rows, id, err, want)
	}
}

// getObjects reads the object id of transaction txn through the Store and
// through a Txn, and fails t when the two disagree.
func getObjects(t *testing.T, s *Store, txn, id string) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	body, err := s.GetObject(ctx, txn, id)
	var inTx []byte
	var errTx error
	if err := s.Update(ctx, func(tx *Txn) error { inTx, errTx = tx.GetObject(txn, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, inTx) || errors.Is(err, ErrNotFound) != errors.Is(errTx, ErrNotFound) || (err == nil) != (errTx == nil) {
		t.Fatalf("GetObject(%q, %s): the Store read %q (%v), a Txn %q (%v)", txn, id, body, err, inTx, errTx)
	}
	return body, err
}

// TestObjectKeyedByTransaction: an object is keyed by its transaction and
// its id (migration 26), so the same id in two transactions is two
// objects, each stored and each read back under its own transaction with
// its own bytes; a transaction holding neither, and the objects bound to
// no transaction, hold no object of that id.
func TestObjectKeyedByTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	// An acceptance: not one of the types whose id is unique across
	// transactions (objects_named).
	const id = "acc_000000000000000000000001"
	const txnA, txnB, txnC = "txn_keyed_a", "txn_keyed_b", "txn_keyed_c"
	a := keyedObject(t, id, "acceptance", txnA, "of a")
	b := keyedObject(t, id, "acceptance", txnB, "of b")
	if bytes.Equal(a, b) {
		t.Fatal("the two objects have the same bytes")
	}
	if _, err := s.PutObject(ctx, a, "local"); err != nil {
		t.Fatal(err)
	}
	if info, err := s.PutObject(ctx, b, "org_b"); err != nil {
		t.Fatalf("the same id in another transaction: %v", err)
	} else if info.TransactionID != txnB || info.ID != id {
		t.Fatalf("stored as %+v", info)
	}
	rowsOfID(t, s, id, 2)
	for txn, want := range map[string][]byte{txnA: a, txnB: b} {
		got, err := getObjects(t, s, txn, id)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s of %s: %q (%v), want %q", id, txn, got, err, want)
		}
		all, err := s.TransactionObjects(ctx, txn)
		if err != nil || len(all) != 1 || !bytes.Equal(all[0], want) {
			t.Fatalf("objects of %s: %q (%v), want its own", txn, all, err)
		}
	}
	for _, txn := range []string{txnC, ""} {
		if got, err := getObjects(t, s, txn, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s of %q: %q (%v), want ErrNotFound", id, txn, got, err)
		}
	}
	// Storing either again is a no-op, each under its own key.
	for _, body := range [][]byte{a, b} {
		if _, err := s.PutObject(ctx, body, "local"); err != nil {
			t.Fatalf("second put of identical bytes: %v", err)
		}
	}
	rowsOfID(t, s, id, 2)
}

// TestObjectConflictInItsTransaction: within one transaction an object id
// is still one object: other bytes under an id it holds are ErrConflict,
// and the held bytes (and those of the same id in another transaction)
// stay as they were.
func TestObjectConflictInItsTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	const id = "acc_000000000000000000000002"
	const txnA, txnB = "txn_conflict_a", "txn_conflict_b"
	first := keyedObject(t, id, "acceptance", txnA, "first")
	second := keyedObject(t, id, "acceptance", txnA, "second")
	elsewhere := keyedObject(t, id, "acceptance", txnB, "elsewhere")
	for _, body := range [][]byte{first, elsewhere} {
		if _, err := s.PutObject(ctx, body, "local"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutObject(ctx, second, "org_x"); !errors.Is(err, ErrConflict) || !errors.Is(err, ErrOtherContent) {
		t.Fatalf("other content under an id its transaction holds: %v", err)
	}
	if err := s.Update(ctx, func(tx *Txn) error { _, err := tx.PutObject(second, "org_x"); return err }); !errors.Is(err, ErrConflict) || !errors.Is(err, ErrOtherContent) {
		t.Fatalf("other content under an id its transaction holds, in a Txn: %v", err)
	}
	// The same content with a signature more is the same object: a
	// conflict of bytes, not of content (the held copy stands).
	o, err := canonical.DecodeObject(first)
	if err != nil {
		t.Fatal(err)
	}
	o["signatures"] = []any{map[string]any{"purpose": "object_issuance"}}
	signed, err := canonical.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject(ctx, signed, "org_x"); !errors.Is(err, ErrConflict) || errors.Is(err, ErrOtherContent) {
		t.Fatalf("the same content with another signature: %v", err)
	}
	for txn, want := range map[string][]byte{txnA: first, txnB: elsewhere} {
		if got, err := getObjects(t, s, txn, id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s of %s after the conflict: %q (%v), want %q", id, txn, got, err, want)
		}
	}
	rowsOfID(t, s, id, 2)
}

// TestUnboundObjectKeyedByID: an object bound to no transaction (a key
// record) is found with transaction "" and under no transaction id, and
// its id is one object among the unbound: other bytes under it are
// ErrConflict (objects_unbound; the key by transaction and id would let
// two rows with no transaction through, NULLs being distinct).
func TestUnboundObjectKeyedByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	const id = "key_keyed_000001"
	rec := keyedObject(t, id, "key_record", "", "first")
	other := keyedObject(t, id, "key_record", "", "second")
	if _, err := s.PutObject(ctx, rec, "org_a"); err != nil {
		t.Fatal(err)
	}
	if got, err := getObjects(t, s, "", id); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("%s unbound: %q (%v), want %q", id, got, err, rec)
	}
	if got, err := getObjects(t, s, "txn_keyed_a", id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("%s under a transaction id: %q (%v), want ErrNotFound", id, got, err)
	}
	if _, err := s.PutObject(ctx, rec, "org_a"); err != nil {
		t.Fatalf("second put of identical bytes: %v", err)
	}
	if _, err := s.PutObject(ctx, other, "org_b"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second unbound object with the same id: %v", err)
	}
	if got, err := getObjects(t, s, "", id); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("%s after the conflict: %q (%v), want %q", id, got, err, rec)
	}
	rowsOfID(t, s, id, 1)
}

// TestObjectReadPlans: the two statements that read an object by its key,
// the ones GetObject prepares, are each a SEARCH of one row: on
// objects_by_key by its transaction's number, or on objects_unbound for
// an object bound to none.
func TestObjectReadPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	for _, c := range []struct{ txn, query, index string }{
		{"txn_plan", `SELECT body FROM objects WHERE tseq = ` + txnSeq + ` AND id = ?`, "objects_by_key"},
		{"", `SELECT body FROM objects WHERE transaction_id IS NULL AND id = ?`, "objects_unbound"},
	} {
		if _, err := s.GetObject(ctx, c.txn, "obj_plan"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetObject(%q): %v", c.txn, err)
		}
		prepared := false
		for _, q := range s.Prepared() {
			prepared = prepared || q == c.query
		}
		if !prepared {
			t.Errorf("GetObject(%q) did not prepare %s", c.txn, c.query)
		}
		args := []any{"obj_plan"}
		if c.txn != "" {
			args = []any{c.txn, "obj_plan"}
		}
		plan := queryPlan(t, s, c.query, args...)
		if !strings.Contains(plan, "SEARCH objects USING INDEX "+c.index+" (") {
			t.Errorf("%s: plan %q, want a SEARCH using %s", c.query, plan, c.index)
		}
	}
}

// TestNamedObjectUniqueAcrossTransactions: an offer, obligation or
// dispute, which an agent names by id alone, keeps its id across
// transactions (objects_named): a second under the same id in another
// transaction is ErrConflict and ErrHeldElsewhere, nothing stored, and
// NamedObjectTransaction finds the first's transaction.
func TestNamedObjectUniqueAcrossTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	for _, c := range []struct{ id, typ string }{
		{"off_000000000000000000000001", "offer"},
		{"obl_000000000000000000000001", "obligation"},
		{"dsp_000000000000000000000001", "dispute"},
	} {
		first := keyedObject(t, c.id, c.typ, "txn_named_a", "first")
		second := keyedObject(t, c.id, c.typ, "txn_named_b", "second")
		if _, err := s.PutObject(ctx, first, "local"); err != nil {
			t.Fatal(err)
		}
		_, err := s.PutObject(ctx, second, "org_b")
		if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrHeldElsewhere) {
			t.Fatalf("%s %s in a second transaction: %v", c.typ, c.id, err)
		}
		if _, err := s.GetObject(ctx, "txn_named_b", c.id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the second %s was stored: %v", c.typ, err)
		}
		if txn, err := s.NamedObjectTransaction(ctx, c.id); err != nil || txn != "txn_named_a" {
			t.Fatalf("%s names %q (%v), want txn_named_a", c.id, txn, err)
		}
	}
	// An acceptance is not named so: its id is the first's transaction's
	// only.
	if _, err := s.NamedObjectTransaction(ctx, "acc_000000000000000000000009"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	if _, err := s.PutObject(ctx, keyedObject(t, "acc_000000000000000000000009", "acceptance", "txn_named_a", "x"), "local"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NamedObjectTransaction(ctx, "acc_000000000000000000000009"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an acceptance found by id alone: %v", err)
	}
	plan := queryPlan(t, s, `SELECT transaction_id FROM objects WHERE id = ? AND object_type IN ('offer', 'obligation', 'dispute')`, "off_000000000000000000000001")
	if !strings.Contains(plan, "USING INDEX objects_named") {
		t.Fatalf("NamedObjectTransaction's plan: %q", plan)
	}
}

// TestTransactionsAtIssue: the transactions `party disputes` shows are
// those holding a dispute, a determination or an exception, oldest
// first, read from their own index (migration 27) and not from every
// transaction: the query names the index (INDEXED BY), and SQLite runs it
// by that index or not at all.
func TestTransactionsAtIssue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	held := map[string]string{
		"txn_at_1": "dispute", "txn_at_2": "offer", "txn_at_3": "determination", "txn_at_4": "",
		"txn_at_5": "exception", "txn_at_6": "obligation",
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		for i := 1; i <= 6; i++ {
			if err := tx.CreateTransaction(fmt.Sprintf("txn_at_%d", i), "org_b", "buyer", "", "draft"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Stored newest transaction first: the list follows the transactions'
	// order, not the objects'.
	for i := 6; i >= 1; i-- {
		txn := fmt.Sprintf("txn_at_%d", i)
		if typ := held[txn]; typ != "" {
			if _, err := s.PutObject(ctx, keyedObject(t, fmt.Sprintf("obj_%024d", i), typ, txn, "at issue?"), "local"); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := s.TransactionsAtIssue(ctx)
	if err != nil || fmt.Sprint(got) != "[txn_at_1 txn_at_3 txn_at_5]" {
		t.Fatalf("at issue: %v %v, want the dispute's, the determination's and the exception's, oldest first", got, err)
	}
}

// TestTransactionNumbers: a transaction is numbered when this instance
// first meets its id (migration 29), whether by an object that names it
// before it is held (an approval of the act that creates it) or by its
// creation, and keeps that number: created after its approval, the
// transaction holds the approval's number, and both are found by id.
// Numbers follow the order met, so a new transaction's rows sort after
// every other's; a number is never given twice, and a rolled-back
// Update gives none.
func TestTransactionNumbers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	number := func(id string) (n int64) {
		t.Helper()
		if err := s.db.QueryRowContext(ctx, `SELECT seq FROM transaction_numbers WHERE id = ?`, id).Scan(&n); err != nil {
			t.Fatalf("number of %s: %v", id, err)
		}
		return n
	}
	create := func(id string) {
		t.Helper()
		if err := s.Update(ctx, func(tx *Txn) error { return tx.CreateTransaction(id, "org_b", "buyer", "", "draft") }); err != nil {
			t.Fatal(err)
		}
	}
	create("txn_num_a")
	apr := keyedObject(t, "apr_000000000000000000000001", "approval", "txn_num_b", "approves the offer that opens b")
	if _, err := s.PutObject(ctx, apr, "local"); err != nil {
		t.Fatal(err)
	}
	create("txn_num_c")
	failed := errors.New("rolled back")
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.CreateTransaction("txn_num_x", "org_b", "buyer", "", "draft"); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("update: %v", err)
	}
	create("txn_num_b")
	create("txn_num_d")
	a, b, c, d := number("txn_num_a"), number("txn_num_b"), number("txn_num_c"), number("txn_num_d")
	if !(a < b && b < c && c < d) || d != a+3 {
		t.Fatalf("numbers a %d, b %d, c %d, d %d: want them in the order met, none skipped", a, b, c, d)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM transaction_numbers WHERE id = 'txn_num_x'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a rolled-back creation left a number (%d, %v)", n, err)
	}
	var held, tseq int64
	if err := s.db.QueryRowContext(ctx, `SELECT (SELECT seq FROM transactions WHERE id = 'txn_num_b'), (SELECT tseq FROM objects WHERE id = 'apr_000000000000000000000001')`).Scan(&held, &tseq); err != nil || held != b || tseq != b {
		t.Fatalf("transaction b holds %d, its approval %d, its number %d (%v)", held, tseq, b, err)
	}
	if got, err := s.GetObject(ctx, "txn_num_b", "apr_000000000000000000000001"); err != nil || !bytes.Equal(got, apr) {
		t.Fatalf("the approval by its transaction's id: %q, %v", got, err)
	}
	// The CHECK keeps every bound object numbered.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO objects(id, object_type, transaction_id, content_hash, body, origin) VALUES ('obj_x', 'evidence', 'txn_num_a', 'h', x'7b7d', 'local')`); err == nil {
		t.Fatal("an object bound to a transaction was stored without its number")
	}
}
