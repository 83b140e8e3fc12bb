package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestOutboxLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "party.db")
	s := open(t, path)
	objs := [][]byte{[]byte(`{"a":1}`), {0, 1, 2, 255}}
	id, err := s.EnqueueOutbox(ctx, "org_delta", "txn_1", "k1", objs, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueOutbox(ctx, "org_delta", "txn_1", "k2", nil, time.Time{}); err == nil {
		t.Fatal("an empty message was enqueued")
	}
	now := time.Now()
	due, err := s.DueOutbox(ctx, now, 10)
	if err != nil || len(due) != 1 || due[0].ID != id || string(due[0].Objects[1]) != string(objs[1]) {
		t.Fatalf("due %+v %v", due, err)
	}
	ok, err := s.LeaseOutbox(ctx, id, now, now.Add(time.Minute))
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	// A second lease while the first holds is refused, and a leased
	// message is not due.
	if ok, _ := s.LeaseOutbox(ctx, id, now, now.Add(time.Minute)); ok {
		t.Fatal("two leases on one message")
	}
	if due, _ := s.DueOutbox(ctx, now, 10); len(due) != 0 {
		t.Fatal("leased message listed as due")
	}
	if err := s.RetryOutbox(ctx, id, now.Add(time.Hour), "peer down"); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DueOutbox(ctx, now, 10); len(due) != 0 {
		t.Fatal("message due before its next attempt")
	}
	next, ok, err := s.NextOutboxAttempt(ctx)
	if err != nil || !ok || next.UnixNano() != now.Add(time.Hour).UnixNano() {
		t.Fatalf("next attempt %v %v %v", next, ok, err)
	}
	// The message survives a reopen.
	s.Close()
	s = open(t, path)
	pending, err := s.PendingOutbox(ctx)
	if err != nil || len(pending) != 1 || pending[0].Attempts != 1 || pending[0].LastError != "peer down" {
		t.Fatalf("pending after reopen %+v %v", pending, err)
	}
	if err := s.MarkOutboxDelivered(ctx, id, [][]byte{[]byte("reply")}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkOutboxFailed(ctx, id, "late"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a delivered message was marked failed: %v", err)
	}
	m, err := s.GetOutbox(ctx, id)
	if err != nil || m.Status != OutboxDelivered || string(m.Reply[0]) != "reply" || m.Attempts != 2 {
		t.Fatalf("%+v %v", m, err)
	}
	if pending, _ := s.PendingOutbox(ctx); len(pending) != 0 {
		t.Fatal("delivered message still pending")
	}
	if _, ok, _ := s.NextOutboxAttempt(ctx); ok {
		t.Fatal("next attempt with nothing pending")
	}
}

func TestInboxKeepsFirstReply(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if _, err := s.InboxReply(ctx, "org_a", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty inbox: %v", err)
	}
	got, err := s.PutInbox(ctx, "org_a", "k", "txn_1", [][]byte{[]byte("first")})
	if err != nil || len(got) != 1 || string(got[0]) != "first" {
		t.Fatalf("%q %v", got, err)
	}
	got, err = s.PutInbox(ctx, "org_a", "k", "txn_1", [][]byte{[]byte("second")})
	if err != nil || string(got[0]) != "first" {
		t.Fatalf("the first reply was replaced: %q %v", got, err)
	}
	// The same key from another organisation is another message.
	if _, err := s.InboxReply(ctx, "org_b", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inbox shared across senders: %v", err)
	}
	// An empty reply is a reply.
	got, err = s.PutInbox(ctx, "org_b", "k", "txn_1", nil)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty reply: %q %v", got, err)
	}
}

func TestOutboxDeliversInOrderPerTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	obj := [][]byte{[]byte("x")}
	first, _ := s.EnqueueOutbox(ctx, "org_delta", "txn_1", "k1", obj, time.Time{})
	second, _ := s.EnqueueOutbox(ctx, "org_delta", "txn_1", "k2", obj, time.Time{})
	other, _ := s.EnqueueOutbox(ctx, "org_delta", "txn_2", "k3", obj, time.Now().Add(time.Hour))
	now := time.Now()
	due, err := s.DueOutbox(ctx, now, 10)
	if err != nil || len(due) != 1 || due[0].ID != first {
		t.Fatalf("due %+v %v", due, err)
	}
	if head, _ := s.OutboxHead(ctx, second); head {
		t.Fatal("second message of a transaction is a head")
	}
	if head, _ := s.OutboxHead(ctx, other); !head {
		t.Fatal("another transaction is held up")
	}
	// A message enqueued leased is not due until released.
	if ok, _ := s.LeaseOutbox(ctx, other, now, now.Add(time.Minute)); ok {
		t.Fatal("leased twice")
	}
	if err := s.ReleaseOutbox(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkOutboxFailed(ctx, first, "refused"); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueOutbox(ctx, time.Now(), 10)
	if len(due) != 2 || due[0].ID != second || due[1].ID != other {
		t.Fatalf("after the head failed: %+v", due)
	}
}
