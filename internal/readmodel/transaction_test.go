package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// fakeDerived answers a transaction view's questions without an engine.
type fakeDerived struct {
	orgs   map[string]string    // key id → organisation
	away   map[string]time.Time // peer → unreachable since
	due    map[string]DueView   // obligation id → its timing
	dueFor []string             // the transactions Due was asked about
}

func (f *fakeDerived) Parse(raw []byte) (*object.View, error) { return object.Parse(raw) }

func (f *fakeDerived) SignerOrg(_ context.Context, keyID string) (string, bool) {
	org, ok := f.orgs[keyID]
	return org, ok
}

func (f *fakeDerived) Carries(m store.OutboxMessage) string { return "message " + m.MessageKey }

func (f *fakeDerived) WaitingFor(t store.Transaction, m store.OutboxMessage) string {
	return t.Counterparty + " to receive message " + m.MessageKey
}

func (f *fakeDerived) UnreachableSince(peer string) (time.Time, bool) {
	at, ok := f.away[peer]
	return at, ok
}

func (f *fakeDerived) Due(_ context.Context, txn string, _ []store.ObligationState) (map[string]DueView, error) {
	f.dueFor = append(f.dueFor, txn)
	return f.due, nil
}

func (f *fakeDerived) TerminationProposals(context.Context, store.Transaction) ([]TerminationView, error) {
	return []TerminationView{}, nil
}

func (f *fakeDerived) Balances(context.Context, string) ([]ledger.Balance, error) {
	return []ledger.Balance{}, nil
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.OpenWith(filepath.Join(t.TempDir(), "party.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// chain writes transaction txn, with counterparty org_b, and its events
// of the given types, each linked to the one before and signed by key
// "key_a" (and "key_b" on the second event on). edit changes an event's
// index row before it is written, to break the chain.
func chain(t *testing.T, st *store.Store, txn, state string, types []string, edit func(*store.Event)) []store.Event {
	t.Helper()
	var rows []store.Event
	err := st.Update(context.Background(), func(tx *store.Txn) error {
		if err := tx.CreateTransaction(txn, "org_b", "buyer", "", state); err != nil {
			return err
		}
		prev := ""
		for i, typ := range types {
			sigs := []any{map[string]any{"key_id": "key_a"}}
			if i > 0 {
				sigs = append(sigs, map[string]any{"key_id": "key_b"})
			}
			obj := map[string]any{
				"id": txn + "_evt" + string(rune('1'+i)), "object_type": "transaction_event", "transaction_id": txn,
				"created_by": map[string]any{"organization_id": "org_a"},
				"payload":    map[string]any{"event_type": typ, "occurred_at": "2026-01-02T03:04:05Z", "data": map[string]any{"n": "x"}},
				"signatures": sigs,
			}
			h, err := canonical.ContentHash(obj)
			if err != nil {
				return err
			}
			obj["content_hash"] = h
			b, err := canonical.Marshal(obj)
			if err != nil {
				return err
			}
			if _, err := tx.PutObject(b, "self"); err != nil {
				return err
			}
			row := store.Event{TransactionID: txn, Sequence: i + 1, EventID: obj["id"].(string), ContentHash: h, PreviousEventHash: prev,
				EventType: typ, ToState: state, AppendedBy: "org_a", Status: store.EventRecorded}
			if edit != nil {
				edit(&row)
			}
			if err := tx.InsertEvent(row); err != nil {
				return err
			}
			rows = append(rows, row)
			prev = h
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestUnknownTransactionIsRefused(t *testing.T) {
	st := openStore(t)
	_, err := Transaction(context.Background(), st, &fakeDerived{}, "txn_unknown")
	var r *reason.Refusal
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "transaction txn_unknown is unknown to this instance; call list_transactions") {
		t.Fatalf("an unknown transaction reads %v, not a refusal", err)
	}
}

// TestChainStatus: an intact chain reads intact, with each signature's
// key resolved to its organisation where the engine knows the key; a
// wrong link or a content hash the event does not have reads broken; a
// kept fork over an intact chain reads forked.
func TestChainStatus(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	d := &fakeDerived{orgs: map[string]string{"key_a": "org_a"}}
	types := []string{"offer.made", "offer.accepted", "agreement.signed"}

	chain(t, st, "txn_intact", "committed", types, nil)
	v, err := Transaction(ctx, st, d, "txn_intact")
	if err != nil || v.ChainStatus != "intact" || len(v.Events) != 3 {
		t.Fatalf("an intact chain reads %q, %d events, %v", v.ChainStatus, len(v.Events), err)
	}
	if got := v.Events[1].SignedBy; len(got) != 2 || got[0] != "org_a" || got[1] != "key_b" {
		t.Fatalf("signed_by %v, want [org_a key_b]", got)
	}
	if e := v.Events[0]; e.OccurredAt != "2026-01-02T03:04:05Z" || e.Data["n"] != "x" || e.EventType != "offer.made" {
		t.Fatalf("the first event reads %+v", e)
	}

	chain(t, st, "txn_link", "committed", types, func(e *store.Event) {
		if e.Sequence == 3 {
			e.PreviousEventHash = strings.Repeat("0", 64)
		}
	})
	chain(t, st, "txn_hash", "committed", types, func(e *store.Event) {
		if e.Sequence == 3 { // the last: no link after it breaks
			e.ContentHash = strings.Repeat("1", 64)
		}
	})
	for _, txn := range []string{"txn_link", "txn_hash"} {
		if v, err := Transaction(ctx, st, d, txn); err != nil || v.ChainStatus != "broken" {
			t.Fatalf("%s reads %q (%v), want broken", txn, v.ChainStatus, err)
		}
	}

	fork := func(txn string) {
		t.Helper()
		if err := st.Update(ctx, func(tx *store.Txn) error {
			return tx.RecordFork(txn, 2, "evt_other", strings.Repeat("2", 64), []byte("{}"), "org_b", "a second successor")
		}); err != nil {
			t.Fatal(err)
		}
	}
	fork("txn_intact")
	v, err = Transaction(ctx, st, d, "txn_intact")
	if err != nil || v.ChainStatus != "forked" || len(v.Forks) != 1 || v.Forks[0].EventID != "evt_other" || v.Forks[0].From != "org_b" {
		t.Fatalf("a kept fork reads %q, %+v, %v", v.ChainStatus, v.Forks, err)
	}
	// A broken chain stays broken, fork or not: broken says more.
	fork("txn_link")
	if v, err := Transaction(ctx, st, d, "txn_link"); err != nil || v.ChainStatus != "broken" {
		t.Fatalf("a broken, forked chain reads %q (%v)", v.ChainStatus, err)
	}
}

// TestWaiting: each message waiting for delivery is listed with what the
// engine says it carries; one to a peer the engine found away says since
// when, one to a peer that answers does not; the oldest says what the
// transaction waits for, and an event pending its countersignature says
// it instead.
func TestWaiting(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	since := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	d := &fakeDerived{away: map[string]time.Time{"org_b": since}}
	chain(t, st, "txn_w", "draft", []string{"offer.made"}, nil)
	now := time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	if err := st.Update(ctx, func(tx *store.Txn) error {
		for _, m := range []struct{ peer, key string }{{"org_b", "k1"}, {"org_c", "k2"}} {
			if _, err := tx.Enqueue(m.peer, "txn_w", m.key, [][]byte{[]byte("{}")}, nil, now, store.Lease{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v, err := Transaction(ctx, st, d, "txn_w")
	if err != nil || len(v.Waiting) != 2 {
		t.Fatalf("waiting %+v, %v", v.Waiting, err)
	}
	if w := v.Waiting[0]; w.Counterparty != "org_b" || w.Carries != "message k1" || w.UnreachableSince != envelope.Timestamp(since) || w.Since != envelope.Timestamp(now) {
		t.Fatalf("the message to the peer away reads %+v", w)
	}
	if w := v.Waiting[1]; w.Counterparty != "org_c" || w.UnreachableSince != "" {
		t.Fatalf("the message to a peer that answers reads %+v", w)
	}
	if v.Pending != "org_b to receive message k1" {
		t.Fatalf("pending %q", v.Pending)
	}
	b, _ := json.Marshal(v.Waiting[0])
	if !strings.Contains(string(b), `"counterparty_unreachable_since":"`+envelope.Timestamp(since)+`"`) {
		t.Fatalf("the waiting message's JSON: %s", b)
	}

	chain(t, st, "txn_p", "draft", []string{"offer.made"}, func(e *store.Event) { e.Status = store.EventPending })
	if err := st.Update(ctx, func(tx *store.Txn) error {
		_, err := tx.Enqueue("org_b", "txn_p", "k3", [][]byte{[]byte("{}")}, nil, now, store.Lease{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if v, err := Transaction(ctx, st, d, "txn_p"); err != nil || v.Pending != "event offer.made waits for org_b's countersignature" {
		t.Fatalf("a pending event reads pending %q (%v)", v.Pending, err)
	}
}

// TestObligationStates: a pending obligation the engine finds due reads
// "due", with its timing; one not yet due stays pending; a rejected one
// stays rejected even when due; an ended transaction asks for no timing.
func TestObligationStates(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	d := &fakeDerived{due: map[string]DueView{
		"obl_due":      {Due: true, DueAt: "2026-01-01T00:00:00Z"},
		"obl_later":    {DueAt: "2027-01-01T00:00:00Z"},
		"obl_rejected": {Due: true, Overdue: true},
	}}
	// Obligation ids are unique across transactions: the ended one's are
	// prefixed, and the fake times only txn_o's.
	for _, txn := range []struct{ id, state, prefix string }{{"txn_o", "in_performance", ""}, {"txn_ended", "completed", "end_"}} {
		chain(t, st, txn.id, txn.state, []string{"offer.made"}, nil)
		if err := st.Update(ctx, func(tx *store.Txn) error {
			for _, o := range []struct{ id, state string }{{"obl_due", "pending"}, {"obl_later", "pending"}, {"obl_rejected", "rejected"}} {
				if err := tx.PutObligationState(store.ObligationState{ObligationID: txn.prefix + o.id, TransactionID: txn.id, State: o.state}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := Transaction(ctx, st, d, "txn_o")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ObligationView{}
	for _, o := range v.Obligations {
		got[o.ObligationID] = o
	}
	if o := got["obl_due"]; o.State != "due" || o.Timing == nil || o.Timing.DueAt != "2026-01-01T00:00:00Z" {
		t.Fatalf("a pending obligation that is due reads %+v", o)
	}
	if o := got["obl_later"]; o.State != "pending" || o.Timing == nil || o.Timing.Due {
		t.Fatalf("a pending obligation not yet due reads %+v", o)
	}
	if o := got["obl_rejected"]; o.State != "rejected" || o.Timing == nil || !o.Timing.Overdue {
		t.Fatalf("a rejected obligation reads %+v", o)
	}
	if _, err := Transaction(ctx, st, d, "txn_ended"); err != nil {
		t.Fatal(err)
	}
	if len(d.dueFor) != 1 || d.dueFor[0] != "txn_o" {
		t.Fatalf("due timing was asked for %v: an ended transaction owes nothing", d.dueFor)
	}
}

// TestEmptyTransactionJSON pins the view's members, their order and its
// empty lists (never null), which the agent's tool output, the pages and
// the golden files rely on; and a stored notice reads back.
func TestEmptyTransactionJSON(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if err := st.Update(ctx, func(tx *store.Txn) error { return tx.CreateTransaction("txn_e", "org_b", "supplier", "", "draft") }); err != nil {
		t.Fatal(err)
	}
	v, err := Transaction(ctx, st, &fakeDerived{}, "txn_e")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	want := `{"transaction_id":"txn_e","counterparty_organization_id":"org_b","role":"supplier","state":"draft","chain_status":"intact",` +
		`"events":[],"objects":[],"obligations":[],"forks":[],"termination_proposals":[],"disputes":[],"determinations":[],"exceptions":[],` +
		`"ledger":[],"waiting":[]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	n := `{"at":"2026-01-02T03:04:05Z","reason_codes":["A202-POLICY-DENIED"],"detail":"no"}`
	if err := st.Update(ctx, func(tx *store.Txn) error { return tx.SetNotice("txn_e", n) }); err != nil {
		t.Fatal(err)
	}
	v, err = Transaction(ctx, st, &fakeDerived{}, "txn_e")
	if err != nil || v.Notice == nil || len(v.Notice.Codes) != 1 || v.Notice.Codes[0] != "A202-POLICY-DENIED" || v.Notice.Detail != "no" {
		t.Fatalf("the notice reads %+v (%v)", v.Notice, err)
	}
	if b, _ := json.Marshal(v.Notice); string(b) != n {
		t.Fatalf("the notice's JSON: %s", b)
	}
}
