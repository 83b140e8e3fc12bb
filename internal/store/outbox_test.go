package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
)

// enqueue stores one message in its own Update, as an act would, and
// returns its id. What Enqueue returned is what GetOutbox reads back (the
// engine attempts the returned message without reading it).
func enqueue(t *testing.T, s *Store, peer, txn, key string, objects [][]byte, act []byte, now time.Time, lease Lease) int64 {
	t.Helper()
	var m OutboxMessage
	err := s.Update(context.Background(), func(tx *Txn) error {
		var err error
		m, err = tx.Enqueue(peer, txn, key, objects, act, now, lease)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOutbox(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("Enqueue returned %+v, GetOutbox reads %+v", m, got)
	}
	return m.ID
}

func ids(list []OutboxMessage) []int64 {
	out := make([]int64, len(list))
	for i, m := range list {
		out[i] = m.ID
	}
	return out
}

func TestOutboxLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s := open(t, path)
	now := time.Unix(1_700_000_000, 123456789)
	objs := [][]byte{[]byte(`{"a":1}`), {0, 1, 2, 255}}
	act := []byte(`{"act":"propose"}`)
	id := enqueue(t, s, "org_delta", "txn_1", "k1", objs, act, now, Lease{})
	if err := s.Update(ctx, func(tx *Txn) error {
		_, err := tx.Enqueue("org_delta", "txn_1", "k2", nil, nil, now, Lease{})
		return err
	}); err == nil {
		t.Fatal("an empty message was enqueued")
	}
	due, err := s.DueOutbox(ctx, now, 10)
	if err != nil || len(due) != 1 || due[0].ID != id || string(due[0].Objects[1]) != string(objs[1]) {
		t.Fatalf("due %+v %v", due, err)
	}
	m := due[0]
	if m.Peer != "org_delta" || m.TransactionID != "txn_1" || m.MessageKey != "k1" || m.Status != OutboxPending ||
		m.Attempts != 0 || !m.NextAttempt.Equal(now) || string(m.Act) != string(act) || m.EnqueuedAt.IsZero() {
		t.Fatalf("message %+v", m)
	}
	// Not due a nanosecond early.
	if due, _ := s.DueOutbox(ctx, now.Add(-1), 10); len(due) != 0 {
		t.Fatal("message due before it was enqueued")
	}
	lease := Lease{Owner: "p1", Until: now.Add(time.Minute)}
	ok, err := s.LeaseOutbox(ctx, id, now, lease)
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	// A second lease while the first holds is refused, and a leased
	// message is not due.
	if ok, _ := s.LeaseOutbox(ctx, id, now, Lease{Owner: "p2", Until: now.Add(time.Minute)}); ok {
		t.Fatal("two leases on one message")
	}
	if due, _ := s.DueOutbox(ctx, now, 10); len(due) != 0 {
		t.Fatal("leased message listed as due")
	}
	if next, ok, _ := s.NextOutboxAttempt(ctx); !ok || !next.Equal(lease.Until) {
		t.Fatalf("next attempt of a leased message %v %v, want the end of its lease", next, ok)
	}
	if err := s.RetryOutbox(ctx, id, now.Add(time.Hour), "peer down"); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DueOutbox(ctx, now.Add(time.Hour-1), 10); len(due) != 0 {
		t.Fatal("message due before its next attempt")
	}
	next, ok, err := s.NextOutboxAttempt(ctx)
	if err != nil || !ok || !next.Equal(now.Add(time.Hour)) {
		t.Fatalf("next attempt %v %v %v", next, ok, err)
	}
	// The message survives a reopen.
	s.Close()
	s = open(t, path)
	pending, err := s.PendingOutbox(ctx)
	if err != nil || len(pending) != 1 || pending[0].Attempts != 1 || pending[0].LastError != "peer down" || string(pending[0].Act) != string(act) {
		t.Fatalf("pending after reopen %+v %v", pending, err)
	}
	if list, _ := s.TransactionOutbox(ctx, "txn_1"); len(list) != 1 || list[0].ID != id {
		t.Fatalf("transaction outbox %+v", list)
	}
	if list, _ := s.PendingOutboxTransactions(ctx); len(list) != 1 || list[0] != "txn_1" {
		t.Fatalf("pending transactions %v", list)
	}
	// Delivered deletes the row, in the transaction that stores the reply.
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Delivered(id) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOutbox(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a delivered message is kept: %v", err)
	}
	for name, settle := range map[string]func(*Txn) error{
		"delivered": func(tx *Txn) error { return tx.Delivered(id) },
		"failed":    func(tx *Txn) error { return tx.Failed(id, "late", now) },
		"rewritten": func(tx *Txn) error { return tx.Rewrite(id, "k9", objs, nil, now) },
	} {
		if err := s.Update(ctx, settle); !errors.Is(err, ErrConflict) {
			t.Fatalf("a delivered message was %s again: %v", name, err)
		}
	}
	if err := s.RetryOutbox(ctx, id, now, "late"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a delivered message was retried: %v", err)
	}
	if pending, _ := s.PendingOutbox(ctx); len(pending) != 0 {
		t.Fatal("delivered message still pending")
	}
	if _, ok, _ := s.NextOutboxAttempt(ctx); ok {
		t.Fatal("next attempt with nothing pending")
	}
	if list, _ := s.PendingOutboxTransactions(ctx); len(list) != 0 {
		t.Fatalf("pending transactions %v", list)
	}
}

func TestEnqueueBelongsToItsTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Unix(1_700_000_000, 0)
	// The act fails after enqueueing: its message goes with it.
	boom := errors.New("the act failed")
	err := s.Update(ctx, func(tx *Txn) error {
		if _, err := tx.Enqueue("org_delta", "txn_1", "k1", [][]byte{[]byte("x")}, nil, now, Lease{}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if p, _ := s.PendingOutbox(ctx); len(p) != 0 {
		t.Fatalf("the message of a rolled-back act was kept: %+v", p)
	}
	// Enqueued leased, as an act that attempts at once does: no worker
	// can take it until the lease ends.
	lease := Lease{Owner: "p1", Until: now.Add(30 * time.Second)}
	id := enqueue(t, s, "org_delta", "txn_1", "k1", [][]byte{[]byte("x")}, nil, now, lease)
	if m, _ := s.GetOutbox(ctx, id); m.Act != nil {
		t.Fatalf("act %q, want none", m.Act)
	}
	if due, _ := s.DueOutbox(ctx, now, 10); len(due) != 0 {
		t.Fatal("a message enqueued leased is due")
	}
	if ok, _ := s.LeaseOutbox(ctx, id, now, Lease{Owner: "p2", Until: now.Add(time.Minute)}); ok {
		t.Fatal("a worker took a message enqueued leased")
	}
	if head, _ := s.OutboxHead(ctx, id); !head {
		t.Fatal("the only message of a transaction is not its head")
	}
	// The lease runs out: the message is due and can be leased again.
	end := lease.Until
	if due, _ := s.DueOutbox(ctx, end, 10); len(due) != 1 {
		t.Fatal("not due when the lease ended")
	}
	if ok, _ := s.LeaseOutbox(ctx, id, end, Lease{Owner: "p2", Until: end.Add(time.Minute)}); !ok {
		t.Fatal("an expired lease still holds")
	}
	// Releasing makes it due at the earlier of its next attempt and the
	// time given, without the lease.
	if err := s.ReleaseOutbox(ctx, id, end.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.GetOutbox(ctx, id); !m.NextAttempt.Equal(now) {
		t.Fatalf("release moved the next attempt later: %v", m.NextAttempt)
	}
	if due, _ := s.DueOutbox(ctx, end, 10); len(due) != 1 {
		t.Fatal("released message not due")
	}
}

func TestVoidLeases(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Unix(1_700_000_000, 0)
	x := [][]byte{[]byte("x")}
	dead := enqueue(t, s, "org_delta", "txn_1", "k1", x, nil, now, Lease{Owner: "dead", Until: now.Add(time.Minute)})
	own := enqueue(t, s, "org_delta", "txn_2", "k2", x, nil, now, Lease{Owner: "live", Until: now.Add(time.Minute)})
	free := enqueue(t, s, "org_delta", "txn_3", "k3", x, nil, now, Lease{})
	later := enqueue(t, s, "org_delta", "txn_4", "k4", x, nil, now, Lease{})
	if err := s.RetryOutbox(ctx, later, now.Add(time.Hour), "peer down"); err != nil {
		t.Fatal(err)
	}
	failed := enqueue(t, s, "org_delta", "txn_5", "k5", x, nil, now, Lease{Owner: "dead", Until: now.Add(time.Minute)})
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Failed(failed, "refused", now) }); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Second)
	if due, _ := s.DueOutbox(ctx, at, 10); fmt.Sprint(ids(due)) != fmt.Sprint([]int64{free}) {
		t.Fatalf("due before voiding %v", ids(due))
	}
	n, err := s.VoidLeases(ctx, "live", at)
	if err != nil || n != 1 {
		t.Fatalf("voided %d %v, want only the other owner's lease", n, err)
	}
	// The dead process's message is due at once, not when its lease
	// would have ended; this process's own lease holds; a message waiting
	// for its retry keeps waiting.
	if due, _ := s.DueOutbox(ctx, at, 10); fmt.Sprint(ids(due)) != fmt.Sprint([]int64{dead, free}) {
		t.Fatalf("due after voiding %v", ids(due))
	}
	if ok, _ := s.LeaseOutbox(ctx, own, at, Lease{Owner: "other", Until: at.Add(time.Minute)}); ok {
		t.Fatal("the own lease was voided")
	}
	if m, _ := s.GetOutbox(ctx, later); !m.NextAttempt.Equal(now.Add(time.Hour)) {
		t.Fatalf("a scheduled retry was moved: %v", m.NextAttempt)
	}
	if m, _ := s.GetOutbox(ctx, failed); m.Status != OutboxFailed {
		t.Fatalf("a failed message was touched: %+v", m)
	}
	// Nothing is left to void.
	if n, _ := s.VoidLeases(ctx, "live", at); n != 0 {
		t.Fatalf("voided %d again", n)
	}
}

func TestOutboxFailedKeepsRow(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Unix(1_700_000_000, 0)
	id := enqueue(t, s, "org_delta", "txn_1", "k1", [][]byte{[]byte("x")}, []byte("act"), now, Lease{Owner: "p1", Until: now.Add(time.Minute)})
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Failed(id, "A202-STATE-TRANSITION-DENIED", now) }); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetOutbox(ctx, id)
	if err != nil || m.Status != OutboxFailed || m.Attempts != 1 || m.LastError != "A202-STATE-TRANSITION-DENIED" || string(m.Act) != "act" {
		t.Fatalf("%+v %v", m, err)
	}
	if p, _ := s.PendingOutbox(ctx); len(p) != 0 {
		t.Fatal("a failed message is pending")
	}
	if due, _ := s.DueOutbox(ctx, now.Add(time.Hour), 10); len(due) != 0 {
		t.Fatal("a failed message is due")
	}
	if ok, _ := s.LeaseOutbox(ctx, id, now.Add(time.Hour), Lease{Owner: "p2", Until: now.Add(2 * time.Hour)}); ok {
		t.Fatal("a failed message was leased")
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Delivered(id) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("a failed message was delivered: %v", err)
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Failed(id, "again", now) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("a failed message failed twice: %v", err)
	}
	if err := s.RetryOutbox(ctx, id, now, "late"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a failed message was retried: %v", err)
	}
	if m2, _ := s.GetOutbox(ctx, id); m2.Attempts != 1 || m2.LastError != m.LastError {
		t.Fatalf("a failed message changed: %+v", m2)
	}
}

func TestOutboxDeliversInOrderPerTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Unix(1_700_000_000, 0)
	obj := [][]byte{[]byte("x")}
	first := enqueue(t, s, "org_delta", "txn_1", "k1", obj, nil, now, Lease{})
	second := enqueue(t, s, "org_delta", "txn_1", "k2", obj, nil, now, Lease{})
	other := enqueue(t, s, "org_delta", "txn_2", "k3", obj, nil, now, Lease{Owner: "p1", Until: now.Add(time.Minute)})
	// The same transaction to another peer is another queue.
	elsewhere := enqueue(t, s, "org_echo", "txn_1", "k4", obj, nil, now, Lease{})
	due, err := s.DueOutbox(ctx, now, 10)
	if err != nil || fmt.Sprint(ids(due)) != fmt.Sprint([]int64{first, elsewhere}) {
		t.Fatalf("due %v %v", ids(due), err)
	}
	if due, _ := s.DueOutbox(ctx, now, 1); len(due) != 1 || due[0].ID != first {
		t.Fatalf("limit: %v", ids(due))
	}
	if head, _ := s.OutboxHead(ctx, second); head {
		t.Fatal("second message of a transaction is a head")
	}
	if head, _ := s.OutboxHead(ctx, other); !head {
		t.Fatal("another transaction is held up")
	}
	// A message enqueued leased is not due until released.
	if ok, _ := s.LeaseOutbox(ctx, other, now, Lease{Owner: "p2", Until: now.Add(time.Minute)}); ok {
		t.Fatal("leased twice")
	}
	if err := s.ReleaseOutbox(ctx, other, now); err != nil {
		t.Fatal(err)
	}
	// A successor waiting for its head is not what the worker waits for.
	if err := s.RetryOutbox(ctx, first, now.Add(time.Hour), "down"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Delivered(elsewhere) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Delivered(other) }); err != nil {
		t.Fatal(err)
	}
	if next, ok, _ := s.NextOutboxAttempt(ctx); !ok || !next.Equal(now.Add(time.Hour)) {
		t.Fatalf("next attempt %v %v, want the head's", next, ok)
	}
	// The head failing for good lets its successor go.
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Failed(first, "refused", now) }); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueOutbox(ctx, now, 10)
	if fmt.Sprint(ids(due)) != fmt.Sprint([]int64{second}) {
		t.Fatalf("after the head failed: %v", ids(due))
	}
	if head, _ := s.OutboxHead(ctx, second); !head {
		t.Fatal("successor of a failed head is not the head")
	}
}

func TestOutboxRewriteKeepsPosition(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Unix(1_700_000_000, 0)
	first := enqueue(t, s, "org_delta", "txn_1", "k1", [][]byte{[]byte("stale")}, []byte("act1"), now, Lease{Owner: "p1", Until: now.Add(time.Minute)})
	second := enqueue(t, s, "org_delta", "txn_1", "k2", [][]byte{[]byte("next")}, nil, now, Lease{})
	renewed := [][]byte{[]byte("fresh decision"), []byte("fresh event")}
	at := now.Add(10 * time.Second)
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Rewrite(first, "k1b", renewed, []byte("act1b"), at) }); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetOutbox(ctx, first)
	if err != nil || m.MessageKey != "k1b" || len(m.Objects) != 2 || string(m.Objects[1]) != "fresh event" ||
		string(m.Act) != "act1b" || !m.NextAttempt.Equal(at) || m.Attempts != 1 || m.LastError != "renewed" || m.Status != OutboxPending {
		t.Fatalf("rewritten %+v %v", m, err)
	}
	// Still the head of its transaction, ahead of its successor, and its
	// lease is gone, so it is due at the time given.
	if head, _ := s.OutboxHead(ctx, first); !head {
		t.Fatal("a rewritten message lost its place")
	}
	if head, _ := s.OutboxHead(ctx, second); head {
		t.Fatal("the successor overtook a rewritten message")
	}
	if due, _ := s.DueOutbox(ctx, at.Add(-1), 10); len(due) != 0 {
		t.Fatalf("due before the time given: %v", ids(due))
	}
	if due, _ := s.DueOutbox(ctx, at, 10); fmt.Sprint(ids(due)) != fmt.Sprint([]int64{first}) {
		t.Fatalf("due %v", ids(due))
	}
	if p, _ := s.PendingOutbox(ctx); fmt.Sprint(ids(p)) != fmt.Sprint([]int64{first, second}) {
		t.Fatalf("pending %v", ids(p))
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.Rewrite(999, "k", renewed, nil, at) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("rewrite of no message: %v", err)
	}
}

func TestInboxRepliesByID(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	objs := refObjects(t)
	const evtID, offID = "evt_73ca039b6e9ebffcd6748873", "off_ef88a971e3e0ece2701a1ee1"
	evt, off := objs[evtID], objs[offID]
	if evt == nil || off == nil {
		t.Fatal("reference objects missing")
	}
	// The event as first answered carried one signature; the record later
	// holds it with both.
	obj, _ := canonical.DecodeObject(evt)
	obj["signatures"] = obj["signatures"].([]any)[:1]
	one, _ := canonical.Marshal(obj)
	now := time.Unix(1_700_000_000, 0)
	if _, err := s.InboxReply(ctx, "org_a", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty inbox: %v", err)
	}
	// The reply is recorded in the transaction that stores what it names.
	if err := s.Update(ctx, func(tx *Txn) error {
		if _, err := tx.PutObject(off, "org_a"); err != nil {
			return err
		}
		if _, err := tx.PutObject(one, "local"); err != nil {
			return err
		}
		return tx.PutInbox("org_a", "k", "txn_calibration_demo_01", []string{evtID, offID}, now)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.InboxReply(ctx, "org_a", "k")
	if err != nil || len(got) != 2 || string(got[0]) != string(one) || string(got[1]) != string(off) {
		t.Fatalf("reply %d objects, %v", len(got), err)
	}
	if err := s.ReplaceObject(ctx, evtID, one, evt); err != nil {
		t.Fatal(err)
	}
	got, _ = s.InboxReply(ctx, "org_a", "k")
	if len(got) != 2 || string(got[0]) != string(evt) {
		t.Fatal("the reply is not read from the record as it stands")
	}
	// A message is answered once; a second record is a conflict and
	// rolls back its transaction.
	err = s.Update(ctx, func(tx *Txn) error { return tx.PutInbox("org_a", "k", "txn_calibration_demo_01", []string{offID}, now) })
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("second answer: %v", err)
	}
	if got, _ := s.InboxReply(ctx, "org_a", "k"); len(got) != 2 {
		t.Fatal("the first answer was replaced")
	}
	// The bytes form does not replace it either.
	if got, err := s.PutInboxBytes(ctx, "org_a", "k", "txn_calibration_demo_01", [][]byte{[]byte("other")}); err != nil || len(got) != 2 || string(got[1]) != string(off) {
		t.Fatalf("bytes over ids: %d %v", len(got), err)
	}
	// The same key from another organisation is another message; an
	// empty reply is a reply.
	if _, err := s.InboxReply(ctx, "org_b", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inbox shared across senders: %v", err)
	}
	if err := s.Update(ctx, func(tx *Txn) error { return tx.PutInbox("org_b", "k", "txn_1", nil, now) }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.InboxReply(ctx, "org_b", "k"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty reply: %q %v", got, err)
	}
	// A reply naming an object the record does not hold is an error, not
	// an empty answer.
	if err := s.Update(ctx, func(tx *Txn) error { return tx.PutInbox("org_c", "k", "txn_1", []string{"evt_missing"}, now) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InboxReply(ctx, "org_c", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing reply object: %v", err)
	}
}

func TestInboxBytesKeepFirstReply(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	got, err := s.PutInboxBytes(ctx, "org_a", "k", "txn_1", [][]byte{[]byte("first"), {0, 255}})
	if err != nil || len(got) != 2 || string(got[0]) != "first" || string(got[1]) != "\x00\xff" {
		t.Fatalf("%q %v", got, err)
	}
	got, err = s.PutInboxBytes(ctx, "org_a", "k", "txn_1", [][]byte{[]byte("second")})
	if err != nil || string(got[0]) != "first" {
		t.Fatalf("the first reply was replaced: %q %v", got, err)
	}
	if got, err := s.InboxReply(ctx, "org_a", "k"); err != nil || len(got) != 2 || string(got[0]) != "first" {
		t.Fatalf("reply %q %v", got, err)
	}
	if _, err := s.InboxReply(ctx, "org_b", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inbox shared across senders: %v", err)
	}
	got, err = s.PutInboxBytes(ctx, "org_b", "k", "txn_1", nil)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty reply: %q %v", got, err)
	}
}

// TestOutboxDueNowForOnePeer: a peer seen again makes its messages that
// wait out a back-off due at once, and no one else's, nor one another
// process holds leased.
func TestOutboxDueNowForOnePeer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	now := time.Now().UTC()
	x := [][]byte{[]byte("x")}
	waiting := enqueue(t, s, "org_delta", "txn_1", "k1", x, nil, now, Lease{})
	other := enqueue(t, s, "org_acme", "txn_2", "k2", x, nil, now, Lease{})
	for _, id := range []int64{waiting, other} {
		if err := s.RetryOutbox(ctx, id, now.Add(4*time.Minute), "unreachable"); err != nil {
			t.Fatal(err)
		}
	}
	peers, err := s.PeersWaiting(ctx, now)
	if err != nil || len(peers) != 2 {
		t.Fatalf("peers waiting %v %v", peers, err)
	}
	if n, err := s.OutboxWaiting(ctx, "org_delta"); err != nil || n != 1 {
		t.Fatalf("%d waiting for org_delta, %v", n, err)
	}
	if n, err := s.OutboxDueNow(ctx, "org_delta", now); err != nil || n != 1 {
		t.Fatalf("%d made due, %v", n, err)
	}
	for id, due := range map[int64]bool{waiting: true, other: false} {
		m, err := s.GetOutbox(ctx, id)
		if err != nil || m.NextAttempt.After(now) == due {
			t.Fatalf("message %d next attempt %s (%v)", id, m.NextAttempt, err)
		}
	}
}

// TestAlertRaisedOnce: an alert is recorded once; a second raise of the
// same kind about the same subject reports false, another kind true.
func TestAlertRaisedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	at := time.Now()
	for i, c := range []struct {
		kind string
		want bool
	}{{"obligation.due", true}, {"obligation.due", false}, {"obligation.overdue", true}} {
		got, err := s.RaiseAlert(ctx, "obl_1", c.kind, "txn_1", at)
		if err != nil || got != c.want {
			t.Fatalf("raise %d (%s): %v %v", i, c.kind, got, err)
		}
	}
}
