package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/decimal"
)

func txnIDs(list []Transaction) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = x.ID
	}
	return out
}

func TestListTransactionsPages(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	rows := []struct {
		id, counterparty, state, updated string
	}{
		{"txn_01", "org_a", "draft", "2025-01-01T00:00:01.000000000Z"},
		{"txn_02", "org_b", "negotiating", "2025-01-01T00:00:02.000000000Z"},
		{"txn_03", "org_a", "negotiating", "2025-01-01T00:00:03.000000000Z"},
		// Three updated at one instant: the id breaks the tie, and a
		// page boundary inside the tie loses nothing.
		{"txn_04", "org_b", "negotiating", "2025-01-01T00:00:04.000000000Z"},
		{"txn_05", "org_a", "negotiating", "2025-01-01T00:00:04.000000000Z"},
		{"txn_06", "org_a", "draft", "2025-01-01T00:00:04.000000000Z"},
		{"txn_07", "org_b", "draft", "2025-01-01T00:00:05.000000000Z"},
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		for _, r := range rows {
			if err := tx.CreateTransaction(r.id, r.counterparty, "buyer", "", r.state); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := s.db.ExecContext(ctx, `UPDATE transactions SET updated_at = ? WHERE id = ?`, r.updated, r.id); err != nil {
			t.Fatal(err)
		}
	}
	// pages walks every page of f and returns them.
	pages := func(f TransactionFilter) [][]string {
		t.Helper()
		var out [][]string
		for i := 0; i < 20; i++ {
			list, next, err := s.ListTransactions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, txnIDs(list))
			if next == "" {
				return out
			}
			f.Before = next
		}
		t.Fatal("the cursor never ends")
		return nil
	}
	cases := []struct {
		name string
		f    TransactionFilter
		want string
	}{
		{"all on one page", TransactionFilter{}, "[[txn_07 txn_06 txn_05 txn_04 txn_03 txn_02 txn_01]]"},
		{"pages of three", TransactionFilter{Limit: 3}, "[[txn_07 txn_06 txn_05] [txn_04 txn_03 txn_02] [txn_01]]"},
		{"pages of two", TransactionFilter{Limit: 2}, "[[txn_07 txn_06] [txn_05 txn_04] [txn_03 txn_02] [txn_01]]"},
		{"exactly one page", TransactionFilter{Limit: 7}, "[[txn_07 txn_06 txn_05 txn_04 txn_03 txn_02 txn_01]]"},
		{"state", TransactionFilter{State: "draft", Limit: 2}, "[[txn_07 txn_06] [txn_01]]"},
		{"counterparty", TransactionFilter{Counterparty: "org_b"}, "[[txn_07 txn_04 txn_02]]"},
		{"state and counterparty", TransactionFilter{State: "negotiating", Counterparty: "org_a", Limit: 1}, "[[txn_05] [txn_03]]"},
		{"counterparty in pages of two", TransactionFilter{Counterparty: "org_a", Limit: 2}, "[[txn_06 txn_05] [txn_03 txn_01]]"},
		{"nothing matches", TransactionFilter{State: "completed"}, "[[]]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(pages(c.f)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	list, _, err := s.ListTransactions(ctx, TransactionFilter{Limit: 1})
	if err != nil || len(list) != 1 || list[0].Counterparty != "org_b" || list[0].Role != "buyer" || list[0].State != "draft" || list[0].UpdatedAt != rows[6].updated {
		t.Fatalf("row %+v %v", list, err)
	}
	if _, _, err := s.ListTransactions(ctx, TransactionFilter{Before: "not a cursor"}); err == nil {
		t.Fatal("a cursor this instance never gave was accepted")
	}
	inState, err := s.TransactionsInState(ctx, "draft")
	if err != nil || fmt.Sprint(txnIDs(inState)) != "[txn_01 txn_06 txn_07]" {
		t.Fatalf("in state draft: %v %v", txnIDs(inState), err)
	}
}

func TestObligationStates(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if _, err := s.ObligationState(ctx, "txn_1", "obl_1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown obligation: %v", err)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.PutObligationState(ObligationState{ObligationID: "obl_1", TransactionID: "txn_1", State: "open", UpdatedSeq: 3}); err != nil {
			return err
		}
		if err := tx.PutObligationState(ObligationState{ObligationID: "obl_2", TransactionID: "txn_1", State: "open", UpdatedSeq: 3}); err != nil {
			return err
		}
		if err := tx.PutObligationState(ObligationState{ObligationID: "obl_3", TransactionID: "txn_2", State: "open", UpdatedSeq: 1}); err != nil {
			return err
		}
		// Read back inside the transaction that wrote it.
		o, err := tx.ObligationState("txn_1", "obl_1")
		if err != nil || o.State != "open" || o.Assertions == nil || len(o.Assertions) != 0 {
			return fmt.Errorf("inside the transaction: %+v %v", o, err)
		}
		_, err = tx.ObligationState("txn_1", "obl_9")
		if !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("unknown obligation inside the transaction: %v", err)
		}
		// An obligation is found under its own transaction only
		// (migration 31), and not under one never met.
		for _, k := range [][2]string{{"txn_2", "obl_1"}, {"txn_none", "obl_1"}} {
			if _, err := tx.ObligationState(k[0], k[1]); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%s under %s: %v", k[1], k[0], err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// An event moves obl_1: the row is replaced, not added.
	if err := s.Update(ctx, func(tx *Txn) error {
		return tx.PutObligationState(ObligationState{ObligationID: "obl_1", TransactionID: "txn_1", State: "asserted", Assertions: []string{"prf_a", "prf_b"}, UpdatedSeq: 5})
	}); err != nil {
		t.Fatal(err)
	}
	o, err := s.ObligationState(ctx, "txn_1", "obl_1")
	if err != nil || o.ObligationID != "obl_1" || o.TransactionID != "txn_1" || o.State != "asserted" || fmt.Sprint(o.Assertions) != "[prf_a prf_b]" || o.UpdatedSeq != 5 {
		t.Fatalf("%+v %v", o, err)
	}
	// A transaction's obligations in the order they were issued, the
	// moved one keeping its place.
	list, err := s.ObligationStates(ctx, "txn_1")
	if err != nil || len(list) != 2 || list[0].ObligationID != "obl_1" || list[0].State != "asserted" || list[1].ObligationID != "obl_2" {
		t.Fatalf("obligations of txn_1: %+v %v", list, err)
	}
	if list, _ := s.ObligationStates(ctx, "txn_none"); len(list) != 0 {
		t.Fatalf("obligations of no transaction: %+v", list)
	}
}

func TestMetaAndNotice(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if v, err := s.Meta(ctx, "k"); err != nil || v != "" {
		t.Fatalf("unset meta %q %v", v, err)
	}
	for _, v := range []string{"1", "2"} {
		if err := s.Update(ctx, func(tx *Txn) error { return tx.SetMeta("k", v) }); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := s.Meta(ctx, "k"); err != nil || v != "2" {
		t.Fatalf("meta %q %v", v, err)
	}
	if _, err := s.Notice(ctx, "txn_1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("notice of no transaction: %v", err)
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.CreateTransaction("txn_1", "org_a", "supplier", "", "draft") }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Notice(ctx, "txn_1"); err != nil || n != "" {
		t.Fatalf("fresh notice %q %v", n, err)
	}
	for _, n := range []string{"the accept was refused", "the offer expired"} {
		if err := s.Update(ctx, func(tx *Txn) error { return tx.SetNotice("txn_1", n) }); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Notice(ctx, "txn_1"); err != nil || n != "the offer expired" {
		t.Fatalf("notice %q %v", n, err)
	}
}

func TestCommitsCountsWrites(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Unix(1_700_000_000, 0)
	c0 := s.Commits()
	// One Update of several statements is one commit.
	var id int64
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.CreateTransaction("txn_1", "org_a", "buyer", "", "draft"); err != nil {
			return err
		}
		if err := tx.SetMeta("k", "v"); err != nil {
			return err
		}
		m, err := tx.Enqueue("org_a", "txn_1", "k1", [][]byte{[]byte("x")}, nil, now, Lease{})
		id = m.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if d := s.Commits() - c0; d != 1 {
		t.Fatalf("one Update counted %d commits", d)
	}
	// A rolled-back Update commits nothing.
	if err := s.Update(ctx, func(tx *Txn) error {
		if err := tx.SetMeta("k", "w"); err != nil {
			return err
		}
		return errors.New("abandon")
	}); err == nil {
		t.Fatal("abandoned Update succeeded")
	}
	if d := s.Commits() - c0; d != 1 {
		t.Fatalf("a rolled-back Update was counted: %d", d)
	}
	if v, _ := s.Meta(ctx, "k"); v != "v" {
		t.Fatalf("a rolled-back Update wrote %q", v)
	}
	// Reads commit nothing.
	if _, err := s.PendingOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTransaction(ctx, "txn_1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ListTransactions(ctx, TransactionFilter{}); err != nil {
		t.Fatal(err)
	}
	if d := s.Commits() - c0; d != 1 {
		t.Fatalf("reads were counted: %d", d)
	}
	// A single write outside Update is one commit too.
	if ok, err := s.LeaseOutbox(ctx, id, now, Lease{Owner: "p", Until: now.Add(time.Minute)}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if d := s.Commits() - c0; d != 2 {
		t.Fatalf("a lease counted %d commits in all, want 2", d)
	}
	for range 3 {
		if err := s.Update(ctx, func(tx *Txn) error { return tx.SetMeta("n", "x") }); err != nil {
			t.Fatal(err)
		}
	}
	if d := s.Commits() - c0; d != 5 {
		t.Fatalf("%d commits, want 5", d)
	}
}

// TestOpenOfferMarks: a received offer marks its transaction as one the
// inbox reads; the inbox's "none open here" clears the mark only if no
// offer arrived since it read the transaction.
func TestOpenOfferMarks(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if err := s.Update(ctx, func(tx *Txn) error {
		for _, id := range []string{"txn_quiet", "txn_offered"} {
			if err := tx.CreateTransaction(id, "org_a", "buyer", "", "committed"); err != nil {
				return err
			}
		}
		return tx.OfferReceived("txn_offered")
	}); err != nil {
		t.Fatal(err)
	}
	marked := func() []string {
		t.Helper()
		list, _, err := s.ListTransactions(ctx, TransactionFilter{OpenOffer: true})
		if err != nil {
			t.Fatal(err)
		}
		return txnIDs(list)
	}
	if got := marked(); len(got) != 1 || got[0] != "txn_offered" {
		t.Fatalf("marked %v", got)
	}
	read, err := s.GetTransaction(ctx, "txn_offered")
	if err != nil {
		t.Fatal(err)
	}
	// An offer arrives after the inbox read the transaction: its mark
	// survives the inbox's stale "none open".
	if err := s.Update(ctx, func(tx *Txn) error { return tx.OfferReceived("txn_offered") }); err != nil {
		t.Fatal(err)
	}
	if err := s.OffersClosed(ctx, []Transaction{read}); err != nil {
		t.Fatal(err)
	}
	if got := marked(); len(got) != 1 {
		t.Fatalf("a stale close cleared the mark: %v", got)
	}
	now, _ := s.GetTransaction(ctx, "txn_offered")
	if err := s.OffersClosed(ctx, []Transaction{now}); err != nil {
		t.Fatal(err)
	}
	if got := marked(); len(got) != 0 {
		t.Fatalf("still marked: %v", got)
	}
}

// TestOpenOfferMigration: migration 10 marks, in a database made before
// it, every draft and every formed transaction holding an offer stored
// after its latest agreement, and nothing else.
func TestOpenOfferMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	const before = 9
	db := migratedTo(t, "file:"+path, before)
	for _, r := range []struct{ id, state string }{
		{"txn_draft", "draft"}, {"txn_amending", "committed"}, {"txn_agreed", "in_performance"}, {"txn_done", "completed"},
	} {
		if _, err := db.ExecContext(ctx, `INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at) VALUES (?, 'org_a', 'buyer', ?, ?, ?)`, r.id, r.state, now(), now()); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	object := func(txn, typ string) {
		t.Helper()
		n++
		if _, err := db.ExecContext(ctx, `INSERT INTO objects(id, object_type, transaction_id, content_hash, body, origin, stored_at) VALUES (?, ?, ?, ?, '{}', 'org_a', ?)`,
			fmt.Sprintf("obj_%03d", n), typ, txn, fmt.Sprintf("%064d", n), now()); err != nil {
			t.Fatal(err)
		}
	}
	object("txn_draft", "offer")
	object("txn_amending", "offer")
	object("txn_amending", "agreement")
	object("txn_amending", "offer") // an amendment offer after the agreement
	object("txn_agreed", "offer")
	object("txn_agreed", "agreement")
	object("txn_done", "offer")
	db.Close()

	s := open(t, path)
	list, _, err := s.ListTransactions(ctx, TransactionFilter{OpenOffer: true})
	if err != nil {
		t.Fatal(err)
	}
	got := txnIDs(list)
	slices.Sort(got)
	if want := []string{"txn_amending", "txn_draft"}; !slices.Equal(got, want) {
		t.Fatalf("migration 10 marked %v, want %v", got, want)
	}
}

// TestLatestEventOfTypeAndResponsesOfTypes: the two reads an act's
// working set makes of a long transaction return the latest event of a
// type, and the obligation responses of the response types named, the
// latter through its index (so a transaction's rejections are not read).
func TestLatestEventOfTypeAndResponsesOfTypes(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if err := s.Update(ctx, func(tx *Txn) error { return tx.CreateTransaction("txn_1", "org_a", "buyer", "", "in_performance") }); err != nil {
		t.Fatal(err)
	}
	put := func(id, typ, body string) {
		t.Helper()
		if _, err := s.db.ExecContext(ctx, `INSERT INTO objects(id, object_type, transaction_id, tseq, content_hash, body, origin) VALUES (?, ?, 'txn_1', (SELECT seq FROM transactions WHERE id = 'txn_1'), ?, ?, 'local')`,
			id, typ, "h_"+id, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for seq, typ := range []string{"agreement.direct", "acceptance.rejected", "performance.declared", "acceptance.rejected", "performance.declared"} {
		id := fmt.Sprintf("evt_%d", seq+1)
		put(id, "transaction_event", `{}`)
		if _, err := s.db.ExecContext(ctx, `INSERT INTO events(transaction_id, tseq, sequence, event_id, content_hash, event_type, to_state, appended_by, status) VALUES ('txn_1', (SELECT seq FROM transactions WHERE id = 'txn_1'), ?, ?, ?, ?, 'in_performance', 'org_a', 'recorded')`,
			seq+1, id, "h_"+id, typ); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := s.LatestEventOfType(ctx, "txn_1", "acceptance.rejected"); err != nil || e.Sequence != 4 || e.EventID != "evt_4" {
		t.Fatalf("latest rejection: %+v, %v", e, err)
	}
	if _, err := s.LatestEventOfType(ctx, "txn_1", "acceptance.granted"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no such event: %v", err)
	}
	put("rsp_reject", "obligation_response", `{"payload":{"response_type":"reject"}}`)
	put("rsp_accept", "obligation_response", `{"kernel_annotations":{"response_type":"reject"},"payload":{"note":"\"response_type\":\"reject\"","response_type":"accept"}}`)
	put("rsp_waive", "obligation_response", `{"payload":{"response_type":"waive"}}`)
	put("evt_like", "evidence", `{"payload":{"response_type":"accept"}}`)
	bodies, err := s.ObligationResponsesOfTypes(ctx, "txn_1", "accept", "waive")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bodies {
		got = append(got, string(b))
	}
	if len(got) != 2 || !strings.Contains(got[0], `"response_type":"accept"}`) || !strings.Contains(got[1], "waive") {
		t.Fatalf("responses %q", got)
	}
	if plan := queryPlan(t, s, responsesOfTypesQuery(2), "txn_1", "accept", "waive"); !strings.Contains(plan, "obligation_responses_by_type") {
		t.Fatalf("the responses are not read through their index: %q", plan)
	}
}

// TestRebuildMigration: migration 16 rebuilds objects and events without
// the unique index on content_hash, and 17 rebuilds events, inbox and
// idempotency WITHOUT ROWID, and 22 rewrites objects without stored_at,
// and 26 rebuilds both keyed by transaction and id, and 29 by the
// transaction's local number (30 keys the approval requests by it too),
// in a database made before them: every row
// kept with its bytes (an object with its rowid too), the indexes and
// triggers back, the foreign keys still enforced after them (the
// migrations ran with them off), nothing left of the index 16 dropped, and
// the open-offer index holding only the transactions with an open offer.
func TestRebuildMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	const before = 15
	db := migratedTo(t, "file:"+path+"?_pragma=foreign_keys(1)", before)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at) VALUES ('txn_a', 'org_a', 'buyer', 'draft', ?, ?)`, now(), now())
	type row struct{ id, typ, txn, hash, body string }
	var objs []row
	for i, typ := range []string{"offer", "transaction_event", "key_record", "transaction_event", "obligation_response"} {
		r := row{id: fmt.Sprintf("obj_%03d", i), typ: typ, txn: "txn_a", hash: fmt.Sprintf("%064d", i), body: fmt.Sprintf(`{"n":%d,"payload":{"response_type":"accept"}}`, i)}
		exec(`INSERT INTO objects(id, object_type, transaction_id, content_hash, body, origin, stored_at) VALUES (?, ?, ?, ?, ?, 'org_a', ?)`, r.id, r.typ, r.txn, r.hash, r.body, now())
		objs = append(objs, r)
	}
	exec(`DELETE FROM objects WHERE id = 'obj_000'`) // a gap in the rowids, which must stay
	objs = objs[1:]
	// An approval of an act on a transaction not held yet (29 numbers
	// its transaction after those held).
	exec(`INSERT INTO objects(id, object_type, transaction_id, content_hash, body, origin, stored_at) VALUES ('apr_x', 'approval', 'txn_new', 'hap', '{}', 'local', ?)`, now())
	exec(`INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at) VALUES ('txn_c', 'org_a', 'buyer', 'draft', ?, ?)`, now(), now())
	// Approval requests: one of a transaction held, one of an act on a
	// transaction nothing else names yet, one bound to none (30 numbers
	// the second's transaction after every other).
	exec(`INSERT INTO approval_requests(id, mandate_id, transaction_id, action_hash, act, rules, status, requested_at) VALUES
		('req_a', 'mnd_1', 'txn_a', 'ha', x'7b7d', '[]', 'pending', ?), ('req_q', 'mnd_1', 'txn_req', 'hq', x'7b7d', '[]', 'pending', ?), ('req_n', 'mnd_1', NULL, 'hn', x'7b7d', '[]', 'pending', ?)`, now(), now(), now())
	exec(`INSERT INTO events(transaction_id, sequence, event_id, content_hash, event_type, to_state, appended_by, status) VALUES ('txn_a', 1, 'obj_001', ?, 'agreement.direct', 'agreement_pending', 'org_a', 'recorded')`, objs[0].hash)
	exec(`INSERT INTO events(transaction_id, sequence, event_id, content_hash, previous_event_hash, event_type, to_state, appended_by, status) VALUES ('txn_a', 2, 'obj_003', ?, ?, 'agreement.committed', 'committed', 'org_a', 'pending')`, objs[2].hash, objs[0].hash)
	exec(`INSERT INTO inbox(from_org, message_key, transaction_id, reply, reply_ids, received_at) VALUES ('org_b', 'k1', 'txn_a', x'', '["obj_001"]', ?), ('org_a', 'k2', 'txn_a', x'7b7d', NULL, ?)`, now(), now())
	exec(`INSERT INTO idempotency(scope, request_id, args_hash, state, result, created_at, act) VALUES ('agt_a', 'r1', 'h1', 'done', NULL, ?, 'offer.submit'), ('agt_a', 'r0', 'h0', 'running', x'01', ?, NULL)`, now(), now())
	snapshot := func(d *sql.DB) (string, string) {
		t.Helper()
		var o, e, in, idem string
		if err := d.QueryRowContext(ctx, `SELECT group_concat(rowid || ':' || id || ':' || object_type || ':' || content_hash || ':' || CAST(body AS TEXT), '|') FROM (SELECT rowid, * FROM objects ORDER BY rowid)`).Scan(&o); err != nil {
			t.Fatal(err)
		}
		if err := d.QueryRowContext(ctx, `SELECT group_concat(transaction_id || ':' || sequence || ':' || event_id || ':' || content_hash || ':' || COALESCE(previous_event_hash, '-') || ':' || event_type || ':' || status, '|') FROM (SELECT * FROM events ORDER BY transaction_id, sequence)`).Scan(&e); err != nil {
			t.Fatal(err)
		}
		if err := d.QueryRowContext(ctx, `SELECT group_concat(from_org || ':' || message_key || ':' || transaction_id || ':' || hex(reply) || ':' || COALESCE(reply_ids, '-') || ':' || received_at, '|') FROM (SELECT * FROM inbox ORDER BY from_org, message_key)`).Scan(&in); err != nil {
			t.Fatal(err)
		}
		if err := d.QueryRowContext(ctx, `SELECT group_concat(scope || ':' || request_id || ':' || args_hash || ':' || state || ':' || COALESCE(hex(result), '-') || ':' || created_at || ':' || COALESCE(act, '-'), '|') FROM (SELECT * FROM idempotency ORDER BY scope, request_id)`).Scan(&idem); err != nil {
			t.Fatal(err)
		}
		return o, e + "\n" + in + "\n" + idem
	}
	o0, e0 := snapshot(db)
	var v0 int64
	if err := db.QueryRowContext(ctx, `SELECT n FROM key_objects_version`).Scan(&v0); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path)
	// The log the rewrites filled is emptied once they are done.
	if st, err := os.Stat(path + "-wal"); err != nil {
		t.Fatal(err)
	} else if st.Size() != 0 {
		t.Fatalf("the write-ahead log holds %d bytes after migrating", st.Size())
	}
	if v, err := s.Version(); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d (%v)", v, err)
	}
	if o, e := snapshot(s.db); o != o0 || e != e0 {
		t.Fatalf("rows changed:\n%s\n%s\nwant\n%s\n%s", o, e, o0, e0)
	}
	var indexes string
	if err := s.db.QueryRowContext(ctx, `SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema WHERE type IN ('index', 'trigger') AND tbl_name IN ('objects', 'events') ORDER BY name)`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	// events' primary key is the table itself (17); its one autoindex is
	// the unique (tseq, event_id) of 26 and 29, and objects has none
	// (26: keyed by objects_by_key and objects_unbound); 27 adds the
	// index of the objects at issue.
	want := "events_by_type,key_objects,key_objects_deleted,key_objects_inserted,key_objects_updated,objects_at_issue,objects_by_key,objects_by_transaction,objects_named,objects_unbound,obligation_responses_by_type,sqlite_autoindex_events_2"
	if indexes != want {
		t.Fatalf("indexes and triggers:\n%s\nwant\n%s", indexes, want)
	}
	// Migration 22 dropped stored_at, every row kept (snapshot above).
	var storedAt int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('objects') WHERE name = 'stored_at'`).Scan(&storedAt); err != nil || storedAt != 0 {
		t.Fatalf("objects still has stored_at (%d, %v)", storedAt, err)
	}
	var unique int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_index_list('objects') l, pragma_index_info(l.name) i WHERE l."unique" AND i.name = 'content_hash'`).Scan(&unique); err != nil || unique != 0 {
		t.Fatalf("objects still has a unique index on content_hash (%d, %v)", unique, err)
	}
	// Foreign keys are on again, on every connection: an event naming no
	// object is refused.
	for range 3 {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO events(transaction_id, tseq, sequence, event_id, content_hash, event_type, to_state, appended_by, status) VALUES ('txn_a', 1, 9, 'obj_none', 'h', 'x', 'y', 'org_a', 'pending')`); err == nil {
			t.Fatal("an event naming no object was stored after the migration")
		}
	}
	// An event's id is still unique in its transaction.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO events(transaction_id, tseq, sequence, event_id, content_hash, event_type, to_state, appended_by, status) VALUES ('txn_a', 1, 3, 'obj_001', 'h', 'x', 'y', 'org_a', 'pending')`); err == nil {
		t.Fatal("a second event with the id of another was stored after the migration")
	}
	// Nor an event of a transaction not held (the approval's is numbered).
	if _, err := s.db.ExecContext(ctx, `INSERT INTO events(transaction_id, tseq, sequence, event_id, content_hash, event_type, to_state, appended_by, status) VALUES ('txn_new', 3, 1, 'apr_x', 'hap', 'x', 'y', 'org_a', 'pending')`); err == nil {
		t.Fatal("an event of a transaction not held was stored after the migration")
	}
	// 29: the transactions held numbered in the order they were created,
	// then the one only an object names; 30: then the one only an approval
	// request names. Every row keyed by its number (a request bound to no
	// transaction by none).
	var numbers string
	if err := s.db.QueryRowContext(ctx, `SELECT group_concat(id || '=' || seq, ',') FROM (SELECT * FROM transaction_numbers ORDER BY seq)`).Scan(&numbers); err != nil || numbers != "txn_a=1,txn_c=2,txn_new=3,txn_req=4" {
		t.Fatalf("numbers %q (%v)", numbers, err)
	}
	var unkeyed int
	if err := s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM transactions t WHERE seq IS NOT (SELECT seq FROM transaction_numbers WHERE id = t.id))
		+ (SELECT COUNT(*) FROM objects o WHERE tseq IS NOT (SELECT seq FROM transaction_numbers WHERE id = o.transaction_id))
		+ (SELECT COUNT(*) FROM events e WHERE tseq IS NOT (SELECT seq FROM transaction_numbers WHERE id = e.transaction_id))
		+ (SELECT COUNT(*) FROM approval_requests r WHERE tseq IS NOT (SELECT seq FROM transaction_numbers WHERE id = r.transaction_id))`).Scan(&unkeyed); err != nil || unkeyed != 0 {
		t.Fatalf("%d rows not keyed by their transaction's number (%v)", unkeyed, err)
	}
	if b, err := s.GetObject(ctx, "txn_new", "apr_x"); err != nil || string(b) != "{}" {
		t.Fatalf("the approval of a transaction not held: %q, %v", b, err)
	}
	// The triggers were made again: a key record moves the number.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO objects(id, object_type, content_hash, body, origin) VALUES ('key_x', 'key_record', 'hx', '{}', 'org_a')`); err != nil {
		t.Fatal(err)
	}
	var v1 int64
	if err := s.db.QueryRowContext(ctx, `SELECT n FROM key_objects_version`).Scan(&v1); err != nil {
		t.Fatal(err)
	}
	if v1 != v0+4 { // one for each migration that rebuilt objects (16, 26, 29), one for the key record
		t.Fatalf("key objects version %d -> %d, want +4", v0, v1)
	}
	// And the plans still use the indexes.
	if plan := queryPlan(t, s, `SELECT body FROM objects WHERE tseq = `+txnSeq+` AND object_type = ?`, "txn_a", "offer"); !strings.Contains(plan, "objects_by_transaction") {
		t.Fatalf("plan: %s", plan)
	}
	for _, table := range []string{"events", "inbox", "idempotency"} {
		var wr int
		if err := s.db.QueryRowContext(ctx, `SELECT wr FROM pragma_table_list(?)`, table).Scan(&wr); err != nil || wr != 1 {
			t.Fatalf("%s WITHOUT ROWID: %d (%v)", table, wr, err)
		}
	}
	// The open-offer index holds the transactions with an open offer and
	// no others, and list_inbox's query reads it.
	exec = func(q string, args ...any) {
		t.Helper()
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at, open_offer) VALUES ('txn_b', 'org_a', 'buyer', 'draft', ?, ?, 1)`, now(), now())
	var indexed int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM transactions INDEXED BY transactions_open_offer WHERE open_offer = 1`).Scan(&indexed); err != nil || indexed != 1 {
		t.Fatalf("open-offer index: %d rows (%v)", indexed, err)
	}
	var partial int
	if err := s.db.QueryRowContext(ctx, `SELECT partial FROM pragma_index_list('transactions') WHERE name = 'transactions_open_offer'`).Scan(&partial); err != nil || partial != 1 {
		t.Fatalf("open-offer index partial: %d (%v)", partial, err)
	}
	if _, _, err := s.ListTransactions(ctx, TransactionFilter{OpenOffer: true}); err != nil {
		t.Fatal(err)
	}
	if plan := queryPlan(t, s, `SELECT `+txnColumns+` FROM transactions WHERE 1=1 AND open_offer = 1 ORDER BY updated_at DESC, id DESC LIMIT ?`, 11); !strings.Contains(plan, "transactions_open_offer") {
		t.Fatalf("list_inbox's plan: %s", plan)
	}
}

// TestLedgerKeyedByNumber: migration 31 rebuilds the ledger's tables
// (obligation states, settlements, commitments, payments and their
// counts) keyed by their transaction's local number, every row and its
// order kept; a transaction only those rows name is numbered after the
// others; the budgets' triggers still name the transactions whose rows
// change; and each table's reads by transaction use the new key.
func TestLedgerKeyedByNumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	db := migratedTo(t, "file:"+path+"?_pragma=foreign_keys(1)", 30)
	exec := func(d *sql.DB, q string, args ...any) {
		t.Helper()
		if _, err := d.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(db, `INSERT INTO transaction_numbers(id, seq) VALUES ('txn_a', 1), ('txn_b', 2)`)
	exec(db, `INSERT INTO transactions(id, counterparty, role, state, created_at, updated_at, seq) VALUES ('txn_a', 'org_b', 'buyer', 'committed', ?1, ?1, 1), ('txn_b', 'org_b', 'buyer', 'completed', ?1, ?1, 2)`, now())
	// Rows of txn_a and txn_b, and of txn_z, which nothing else names
	// (a transaction removed, say); out of order, with a gap, so that
	// the order kept is the rowids'.
	exec(db, `INSERT INTO obligation_states(rowid, obligation_id, transaction_id, state, assertions, updated_seq, accepted_by) VALUES
		(5, 'obl_2', 'txn_a', 'pending', '[]', 3, ''), (2, 'obl_9', 'txn_z', 'accepted', '["prf_1"]', 4, 'obr_1'), (7, 'obl_1', 'txn_a', 'asserted', '["prf_2"]', 5, '')`)
	exec(db, `INSERT INTO settlements(rowid, instruction_id, transaction_id, obligation_id, rail, idempotency_key, fingerprint, ours, state) VALUES
		(4, 'stl_2', 'txn_a', 'obl_2', 'r', 'k2', 'f2', 1, 'pending'), (3, 'stl_1', 'txn_b', 'obl_5', 'r', 'k1', 'f1', 0, 'succeeded'), (9, 'stl_9', 'txn_z', 'obl_9', 'r', 'k1', 'f9', 1, 'failed')`)
	exec(db, `INSERT INTO spend(act_id, transaction_id, currency, counterparty, agent_id, amount, at) VALUES
		('pol_1', 'txn_a', 'EUR', 'org_b', 'agt_1', '10.00', 100), ('pol_2', 'txn_b', 'EUR', 'org_b', 'agt_1', '20.00', 200), ('pol_9', 'txn_z', 'USD', 'org_c', 'agt_2', '9.00', 300)`)
	exec(db, `INSERT INTO spend_payments(instruction_id, transaction_id, currency, counterparty, agent_id, amount, at) VALUES
		('stl_2', 'txn_a', 'EUR', 'org_b', 'agt_1', '4.00', 150), ('stl_1', 'txn_b', 'EUR', 'org_b', 'agt_1', '20.00', 250)`)
	exec(db, `INSERT INTO spend_counts(transaction_id, currency, at, agent_id, counterparty, counted, unpaid) VALUES
		('txn_a', 'EUR', 100, 'agt_1', 'org_b', '10.00', '6.00'), ('txn_b', 'EUR', 200, 'agt_1', 'org_b', '20.00', NULL)`)
	exec(db, `INSERT INTO payment_counts(instruction_id, transaction_id, currency, counterparty, at, counted) VALUES
		('stl_2', 'txn_a', 'EUR', 'org_b', 150, '4.00'), ('stl_1', 'txn_b', 'EUR', 'org_b', 250, '20.00')`)
	exec(db, `DELETE FROM budget_dirty`)
	snapshot := func(d *sql.DB) string {
		t.Helper()
		var out []string
		for _, q := range []string{
			`SELECT group_concat(rowid || ':' || obligation_id || ':' || transaction_id || ':' || state || ':' || assertions || ':' || updated_seq || ':' || accepted_by, '|') FROM (SELECT rowid, * FROM obligation_states ORDER BY rowid)`,
			`SELECT group_concat(rowid || ':' || instruction_id || ':' || transaction_id || ':' || obligation_id || ':' || idempotency_key || ':' || fingerprint || ':' || ours || ':' || state, '|') FROM (SELECT rowid, * FROM settlements ORDER BY rowid)`,
			`SELECT group_concat(act_id || ':' || transaction_id || ':' || currency || ':' || amount || ':' || at, '|') FROM (SELECT * FROM spend ORDER BY act_id)`,
			`SELECT group_concat(instruction_id || ':' || transaction_id || ':' || amount || ':' || at, '|') FROM (SELECT * FROM spend_payments ORDER BY instruction_id)`,
			`SELECT group_concat(transaction_id || ':' || currency || ':' || counted || ':' || COALESCE(unpaid, '-'), '|') FROM (SELECT * FROM spend_counts ORDER BY transaction_id)`,
			`SELECT group_concat(instruction_id || ':' || transaction_id || ':' || counted, '|') FROM (SELECT * FROM payment_counts ORDER BY instruction_id)`,
		} {
			var s string
			if err := d.QueryRowContext(ctx, q).Scan(&s); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			out = append(out, s)
		}
		return strings.Join(out, "\n")
	}
	before := snapshot(db)
	db.Close()

	s := open(t, path)
	if got := snapshot(s.db); got != before {
		t.Fatalf("rows changed:\n%s\nwant\n%s", got, before)
	}
	// The counts above were copied as they were, not computed from the
	// rows (they agree with no sums); computed now, as a database that
	// migration 25 reached has them computed when it is opened.
	exec(s.db, `DELETE FROM spend_counts`)
	exec(s.db, `DELETE FROM payment_counts`)
	exec(s.db, `DELETE FROM budget_sums`)
	exec(s.db, `INSERT INTO budget_backlog VALUES ('txn_a'), ('txn_b'), ('txn_z')`)
	s.Close()
	s = open(t, path)
	var numbers string
	if err := s.db.QueryRowContext(ctx, `SELECT group_concat(id || '=' || seq, ',') FROM (SELECT * FROM transaction_numbers ORDER BY seq)`).Scan(&numbers); err != nil || numbers != "txn_a=1,txn_b=2,txn_z=3" {
		t.Fatalf("numbers %q (%v)", numbers, err)
	}
	var unkeyed int
	q := `SELECT 0`
	for _, table := range []string{"obligation_states", "settlements", "spend", "spend_payments", "spend_counts", "payment_counts"} {
		q += ` + (SELECT COUNT(*) FROM ` + table + ` r WHERE tseq IS NOT (SELECT seq FROM transaction_numbers WHERE id = r.transaction_id))`
	}
	if err := s.db.QueryRowContext(ctx, q).Scan(&unkeyed); err != nil || unkeyed != 0 {
		t.Fatalf("%d rows not keyed by their transaction's number (%v)", unkeyed, err)
	}
	// The indexes by transaction id are gone with their tables.
	var old int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('obligation_states_by_transaction', 'spend_by_transaction', 'spend_payments_by_transaction', 'payment_counts_by_transaction')`).Scan(&old); err != nil || old != 0 {
		t.Fatalf("%d indexes by transaction id left (%v)", old, err)
	}
	// Read by transaction: in the order issued, as before.
	list, err := s.ObligationStates(ctx, "txn_a")
	if err != nil || len(list) != 2 || list[0].ObligationID != "obl_2" || list[1].ObligationID != "obl_1" {
		t.Fatalf("obligations of txn_a: %+v %v", list, err)
	}
	if o, err := s.ObligationState(ctx, "txn_z", "obl_9"); err != nil || o.AcceptedBy != "obr_1" {
		t.Fatalf("obl_9: %+v %v", o, err)
	}
	if st, err := s.SettlementByKey(ctx, "txn_z", "k1"); err != nil || st.InstructionID != "stl_9" {
		t.Fatalf("txn_z's k1: %+v %v", st, err)
	}
	if st, err := s.Settlement(ctx, "stl_1"); err != nil || st.TransactionID != "txn_b" {
		t.Fatalf("stl_1: %+v %v", st, err)
	}
	if c, err := s.Committed(ctx, "txn_a", "EUR"); err != nil || c.String() != "10.00" {
		t.Fatalf("txn_a committed %v %v", c, err)
	}
	// An idempotency key is unique in its transaction, and only there.
	if err := s.Update(ctx, func(tx *Txn) error {
		return tx.PutSettlement(Settlement{InstructionID: "stl_3", TransactionID: "txn_a", ObligationID: "obl_1", Rail: "r", IdempotencyKey: "k2", Fingerprint: "f3", Ours: true})
	}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second instruction under txn_a's k2: %v", err)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		return tx.PutSettlement(Settlement{InstructionID: "stl_4", TransactionID: "txn_b", ObligationID: "obl_5", Rail: "r", IdempotencyKey: "k2", Fingerprint: "f4", Ours: true})
	}); err != nil {
		t.Fatalf("txn_b's own k2: %v", err)
	}
	// The triggers came back: each change names its transaction, and
	// the write that made it recounts it (settleCounts empties
	// budget_dirty). Watched here by the counts they keep.
	counted := func(txn string) string {
		t.Helper()
		var c string
		if err := s.db.QueryRowContext(ctx, `SELECT counted || ':' || COALESCE(unpaid, '-') FROM spend_counts WHERE tseq = `+txnSeq, txn).Scan(&c); err != nil {
			t.Fatalf("%s's count: %v", txn, err)
		}
		return c
	}
	charge := budget.Charge{TransactionID: "txn_a", Currency: "EUR", Counterparty: "org_b", Agent: "agt_1"}
	if err := s.Update(ctx, func(tx *Txn) error {
		return tx.Commit("pol_3", charge, mustDecimal(t, "50.00"), time.Unix(400, 0))
	}); err != nil {
		t.Fatal(err)
	}
	if c := counted("txn_a"); c != "50.00:46.00" {
		t.Fatalf("after a commitment of 50.00, txn_a counts %s", c)
	}
	if err := s.Update(ctx, func(tx *Txn) error {
		return tx.SetSettlementState("stl_2", SettlementFailed, time.Time{}, "declined")
	}); err != nil {
		t.Fatal(err)
	}
	if c := counted("txn_a"); c != "50.00:50.00" {
		t.Fatalf("after its payment failed, txn_a counts %s", c)
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Unspend("txn_a", []string{"pol_3"}) }); err != nil {
		t.Fatal(err)
	}
	if c := counted("txn_a"); c != "10.00:10.00" {
		t.Fatalf("after the commitment was removed, txn_a counts %s", c)
	}
	// The reads by transaction search the new keys.
	for _, c := range []struct{ query, index string }{
		{`SELECT ` + obligationStateColumns + ` FROM obligation_states WHERE tseq = ` + txnSeq + ` ORDER BY rowid`, "sqlite_autoindex_obligation_states_1"},
		{`SELECT ` + settlementColumns + ` FROM settlements WHERE tseq = ` + txnSeq + ` AND idempotency_key = ?`, "sqlite_autoindex_settlements_2"},
		{`SELECT amount FROM spend WHERE tseq = ` + txnSeq + ` AND currency = ?`, "PRIMARY KEY"},
		{`SELECT instruction_id FROM payment_counts WHERE tseq = ` + txnSeq, "PRIMARY KEY"},
	} {
		if plan := queryPlan(t, s, c.query, "txn_a", "EUR"); !strings.Contains(plan, c.index) || !strings.Contains(plan, "tseq=?") {
			t.Errorf("%s: plan %s, want a search of %s by tseq", c.query, plan, c.index)
		}
	}
}

func mustDecimal(t *testing.T, v string) decimal.Decimal {
	t.Helper()
	d, err := decimal.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
