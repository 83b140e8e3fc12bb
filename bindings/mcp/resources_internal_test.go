package mcp

import (
	"context"
	"crypto/sha256"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
)

// fakeRecord is a RecordSource of no transactions and an empty inbox.
type fakeRecord struct{}

func (fakeRecord) Transaction(context.Context, string) (readmodel.TransactionView, error) {
	return readmodel.TransactionView{}, nil
}
func (fakeRecord) ListTransactions(context.Context, readmodel.ListFilter) (readmodel.TransactionPage, error) {
	return readmodel.TransactionPage{Transactions: []readmodel.TransactionSummary{}}, nil
}
func (fakeRecord) Agent(string) (record.Actor, error) { return record.Actor{}, nil }
func (fakeRecord) Inbox(context.Context, record.Actor, string, int) ([]readmodel.InboxItem, error) {
	return []readmodel.InboxItem{}, nil
}
func (fakeRecord) Subscribe(func(record.Change)) func() { return func() {} }

// TestNoNotificationsBeforeASubscription: changes are not queued for
// notification until a subscription is admitted, and are after.
func TestNoNotificationsBeforeASubscription(t *testing.T) {
	t.Parallel()
	r := &resources{src: fakeRecord{}, wake: make(chan struct{}, 1), dirty: map[string]bool{},
		subs: map[string]map[*sdk.ServerSession]bool{}, sent: map[string][sha256.Size]byte{}}
	r.heard(record.Change{TransactionID: "txn_one"})
	if len(r.wake) != 0 || len(r.dirty) != 0 {
		t.Fatalf("a change was queued with no subscriber: %d wakes, %v", len(r.wake), r.dirty)
	}
	if err := r.subscribe(context.Background(), &sdk.SubscribeRequest{Params: &sdk.SubscribeParams{URI: InboxURI}}); err != nil {
		t.Fatal(err)
	}
	r.heard(record.Change{TransactionID: "txn_two"})
	if len(r.wake) != 1 || !r.dirty[TransactionURIPrefix+"txn_two"] || !r.dirty[InboxURI] {
		t.Fatalf("a change after a subscription was not queued: %d wakes, %v", len(r.wake), r.dirty)
	}
}
