package https_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/partyd/party/bindings/peer"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

// serveEngines mounts each side's full peer listener, with its record
// engine as the receiver, on the node's HTTPS listener, as `party serve`
// does, and returns the buyer's clients over each carrier.
func serveEngines(t *testing.T, sides ...*recordtest.Side) map[peer.Carrier]*peer.Client {
	t.Helper()
	for _, sd := range sides {
		h, err := peer.Handler(peer.Config{Org: sd.Node.Org, Receiver: sd.Engine})
		if err != nil {
			t.Fatal(err)
		}
		sd.Node.Mux.Handle("/", h)
	}
	out := map[peer.Carrier]*peer.Client{}
	for _, c := range []peer.Carrier{peer.CarrierA2A, peer.CarrierHTTPS} {
		cl, err := peer.NewClient(sides[0].Node.Org, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[c] = cl
	}
	return out
}

// appenderOnly is an event as its appender sent it: the recorded bytes
// without the countersignature.
func appenderOnly(t *testing.T, raw []byte) []byte {
	t.Helper()
	m, err := canonical.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	m["signatures"] = m["signatures"].([]any)[:1]
	b, err := canonical.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResendAnsweredAlikeOverBothBindings: a message the counterparty
// answered before, sent again in any form the engine recognises, gets the
// same answer over A2A (in the response) and over plain HTTPS (at the
// 202's Location), the first time it is answered and every time after:
// the whole message again (its inbox row), the event alone as its
// appender signed it and the agreement alone as its proposer signed it
// (both answered from the record), and this side's countersignature sent
// back (which answers nothing). Before issue 39 the last three answered
// 202 with a Location that answered 404.
func TestResendAnsweredAlikeOverBothBindings(t *testing.T) {
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	carriers := serveEngines(t, b, s)

	// The countersignature of the supplier's agreement.committed is kept
	// from the in-process link, so that it first reaches the supplier over
	// HTTPS below.
	var mu sync.Mutex
	var sent [][][]byte
	var held [][]byte
	b.Out.Intercept(func(_ string, objs [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		if len(objs) == 1 {
			held = objs
			return fmt.Errorf("%w: held back by the test", delivery.ErrUnavailable)
		}
		sent = append(sent, objs)
		return nil
	})
	o := recordtest.Offer(t, s, "3200.00")
	txn := o.TransactionID
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil {
		t.Fatal(err)
	}
	recordtest.Flush(ctx, b, s)
	b.Out.Intercept(nil)
	mu.Lock()
	sentN, direct, countersignature := len(sent), [][]byte(nil), held
	if sentN > 0 {
		direct = sent[0]
	}
	mu.Unlock()
	if sentN != 1 || countersignature == nil {
		t.Fatalf("the buyer sent %d messages and kept %v back", sentN, countersignature != nil)
	}
	x, err := s.Node.Org.Store.EventAt(ctx, txn, 1)
	if err != nil || x.Status != store.EventRecorded {
		t.Fatalf("the supplier's event 1: %+v %v", x, err)
	}

	same := func(what string, msg [][]byte, want [][]byte) [][]byte {
		t.Helper()
		var first [][]byte
		for i, c := range []peer.Carrier{peer.CarrierHTTPS, peer.CarrierA2A, peer.CarrierHTTPS} {
			reply, err := carriers[c].Deliver(ctx, "org_delta", txn, msg)
			got := reply.Objects
			if err != nil {
				t.Fatalf("%s, over %s (attempt %d): %v", what, c, i+1, err)
			}
			if i == 0 {
				first = got
				if want != nil && !slices.EqualFunc(got, want, bytes.Equal) {
					t.Fatalf("%s, over %s: %d objects, not the %d expected", what, c, len(got), len(want))
				}
				continue
			}
			if !slices.EqualFunc(got, first, bytes.Equal) {
				t.Fatalf("%s: over %s the answer differs from the first (%d objects, then %d)", what, c, len(first), len(got))
			}
		}
		return first
	}

	// The countersignature, first over HTTPS, then again over both.
	same("the countersignature of agreement.committed", countersignature, [][]byte{})
	if x, err := s.Node.Org.Store.EventAt(ctx, txn, 2); err != nil || x.Status != store.EventRecorded {
		t.Fatalf("the supplier's event 2 after the countersignature: %+v %v", x, err)
	}
	// The whole message of agreement.direct again.
	first, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(direct))
	if err != nil {
		t.Fatal(err)
	}
	same("agreement.direct's message again", direct, first)
	// The event alone, as the buyer signed it: what the supplier
	// countersigned, answered from its record.
	ev := appenderOnly(t, mustObject(t, s, x.TransactionID, x.EventID))
	if !bytes.Equal(ev, direct[len(direct)-1]) {
		t.Fatal("the event without its countersignature is not the bytes the buyer sent")
	}
	got := same("agreement.direct's event alone", [][]byte{ev}, nil)
	if len(got) == 0 || !bytes.Equal(got[0], mustObject(t, s, x.TransactionID, x.EventID)) {
		t.Fatalf("the event alone is answered with %d objects, not its countersigned bytes first", len(got))
	}
	// The agreement alone, as the buyer proposed it: the supplier answers
	// with what it signed the first time.
	var agr []byte
	for _, raw := range direct {
		if m, _ := canonical.DecodeObject(raw); m["object_type"] == "agreement" {
			agr = raw
		}
	}
	if agr == nil {
		t.Fatal("no agreement travelled with agreement.direct")
	}
	same("the agreement alone", [][]byte{agr}, nil)

	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, txn, 2)
}

func mustObject(t *testing.T, sd *recordtest.Side, txn, id string) []byte {
	t.Helper()
	b, err := sd.Node.Org.Store.GetObject(context.Background(), txn, id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
