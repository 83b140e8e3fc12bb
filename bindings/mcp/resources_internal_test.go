package mcp

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/record"
)

// TestNoNotificationsBeforeASubscription: changes are not queued for
// notification until a subscription is admitted, and are after.
func TestNoNotificationsBeforeASubscription(t *testing.T) {
	t.Parallel()
	r := &resources{wake: make(chan struct{}, 1), dirty: map[string]bool{}}
	r.heard(record.Change{TransactionID: "txn_one"})
	if len(r.wake) != 0 || len(r.dirty) != 0 {
		t.Fatalf("a change was queued with no subscriber: %d wakes, %v", len(r.wake), r.dirty)
	}
	if err := r.subscribe(context.Background(), &sdk.SubscribeRequest{Params: &sdk.SubscribeParams{URI: InboxURI}}); err != nil {
		t.Fatal(err)
	}
	r.heard(record.Change{TransactionID: "txn_two"})
	if len(r.wake) != 1 || !r.dirty["txn_two"] {
		t.Fatalf("a change after a subscription was not queued: %d wakes, %v", len(r.wake), r.dirty)
	}
}
