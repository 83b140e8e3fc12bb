package readmodel

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/store"
)

// fakeOffers answers the inbox's questions from a map of latest offers.
type fakeOffers struct{ latest map[string]*object.Offer }

func (f fakeOffers) LatestOffer(_ context.Context, txn string) (*object.Offer, error) {
	return f.latest[txn], nil
}

func (fakeOffers) OpenAmendment(context.Context, store.Transaction) (*object.Offer, *object.Agreement, error) {
	return nil, nil, nil
}

func (fakeOffers) AcceptanceAct(offer *object.Offer) map[string]any {
	return map[string]any{"action_type": "offer.accept", "offer": offer.ID()}
}

func (fakeOffers) AmendmentAct(*object.Offer, *object.Agreement) map[string]any { return nil }

func offerFrom(id, org, agent, validUntil string) *object.Offer {
	return object.AsOffer(object.Over(nil, map[string]any{
		"id": id, "object_type": "offer", "created_by": map[string]any{"organization_id": org},
		"payload": map[string]any{"offeree": map[string]any{"organization_id": "org_a", "agent_id": agent},
			"session_id": "ses_1", "valid_until": validUntil, "terms": map[string]any{"core": map[string]any{}}},
	}))
}

// TestInbox: an open offer of the counterparty's, addressed to the calling
// agent, is its item, with the act document; one addressed to another
// agent is not its item but stays in the set; a lapsed offer, or one of
// this organisation's own, is no one's, and its transaction leaves the set
// (store migration 10), so the next inbox does not read it.
func TestInbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	err := st.Update(ctx, func(tx *store.Txn) error {
		for _, id := range []string{"txn_mine", "txn_other", "txn_lapsed", "txn_own"} {
			if err := tx.CreateTransaction(id, "org_b", "buyer", "", "draft"); err != nil {
				return err
			}
			if err := tx.OfferReceived(id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	offers := fakeOffers{latest: map[string]*object.Offer{
		"txn_mine":   offerFrom("off_mine", "org_b", "agt_1", "2026-01-02T04:00:00Z"),
		"txn_other":  offerFrom("off_other", "org_b", "agt_2", "2026-01-02T04:00:00Z"),
		"txn_lapsed": offerFrom("off_lapsed", "org_b", "agt_1", "2026-01-02T02:00:00Z"),
		"txn_own":    offerFrom("off_own", "org_a", "agt_1", "2026-01-02T04:00:00Z"),
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	items, err := Inbox(ctx, st, offers, InboxFor{Agent: "agt_1", Now: now}, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].OfferID != "off_mine" || items[0].From != "org_b" || items[0].SessionID != "ses_1" ||
		items[0].AcceptanceAct["offer"] != "off_mine" {
		t.Fatalf("agt_1's inbox: %+v", items)
	}
	open, _, err := st.ListTransactions(ctx, store.TransactionFilter{OpenOffer: true, Limit: store.MaxPage})
	if err != nil {
		t.Fatal(err)
	}
	still := map[string]bool{}
	for _, x := range open {
		still[x.ID] = true
	}
	if !still["txn_mine"] || !still["txn_other"] || still["txn_lapsed"] || still["txn_own"] {
		t.Fatalf("transactions left with an open offer: %v", still)
	}
	// The organisation's own view (every agent's) holds both open offers.
	all, err := Inbox(ctx, st, offers, InboxFor{AnyAgent: true, Now: now}, log)
	if err != nil || len(all) != 2 {
		t.Fatalf("every agent's inbox: %+v %v", all, err)
	}
}

// TestInboxPageReadsPastOthersOffers: the inbox reads open offers in
// batches of what its page still wants, so a page of one finds the
// calling agent's offer behind newer offers addressed to other agents,
// and a page stops at its limit.
func TestInboxPageReadsPastOthersOffers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	offers := fakeOffers{latest: map[string]*object.Offer{}}
	// txn_mine first, so that the others are newer and listed before it.
	ids := []string{"txn_mine", "txn_other1", "txn_other2", "txn_other3"}
	for _, id := range ids {
		err := st.Update(ctx, func(tx *store.Txn) error {
			if err := tx.CreateTransaction(id, "org_b", "buyer", "", "draft"); err != nil {
				return err
			}
			return tx.OfferReceived(id)
		})
		if err != nil {
			t.Fatal(err)
		}
		agent := "agt_2"
		if id == "txn_mine" {
			agent = "agt_1"
		}
		offers.latest[id] = offerFrom("off_"+id[4:], "org_b", agent, "2026-01-02T04:00:00Z")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	items, err := Inbox(ctx, st, offers, InboxFor{Agent: "agt_1", Now: now, Limit: 1}, log)
	if err != nil || len(items) != 1 || items[0].OfferID != "off_mine" {
		t.Fatalf("agt_1's page of one: %+v %v", items, err)
	}
	all, err := Inbox(ctx, st, offers, InboxFor{AnyAgent: true, Now: now, Limit: 2}, log)
	if err != nil || len(all) != 2 {
		t.Fatalf("every agent's page of two: %+v %v", all, err)
	}
}
