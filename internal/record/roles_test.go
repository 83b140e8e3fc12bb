package record_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// Roles by terms, not by who speaks first (issue 16 item 1): an offer
// states which side its offeror takes, either side may open, counter,
// revise or withdraw, and the agreement names the parties by the sides the
// session established.

// tradingMandate issues sd's agent a further trading mandate like the
// pair's, for the given actions, and returns its id.
func tradingMandate(t *testing.T, sd *recordtest.Side, counterparty string, actions []string, rules []map[string]any) string {
	t.Helper()
	now := sd.Node.Org.Clock()
	m, err := sd.Princ.IssueMandate(context.Background(), authority.IssueRequest{
		ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(30 * 24 * time.Hour)),
		Actions:       actions,
		Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		ApprovalRules: rules,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m["id"].(string)
}

// agreementParties reads the buyer and supplier organisations the
// transaction's agreement names in sd's record.
func agreementParties(t *testing.T, sd *recordtest.Side, txn string) (buyer, supplier string) {
	t.Helper()
	raws, err := sd.Node.Org.Store.TransactionObjects(context.Background(), txn)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range raws {
		o, _ := canonical.DecodeObject(raw)
		if o["object_type"] == "agreement" {
			p := o["payload"].(map[string]any)
			return p["buyer"].(map[string]any)["organization_id"].(string), p["supplier"].(map[string]any)["organization_id"].(string)
		}
	}
	t.Fatalf("%s holds no agreement for %s", sd.Node.Org.Config().OrganizationID, txn)
	return "", ""
}

func roleOf(t *testing.T, sd *recordtest.Side, txn string) string {
	t.Helper()
	tx, err := sd.Node.Org.Store.GetTransaction(context.Background(), txn)
	if err != nil {
		t.Fatal(err)
	}
	return tx.Role
}

// TestBuyerOpensWithOffer: a buyer opens the transaction with a purchase
// order, the supplier accepts it, and both records name the buyer as
// buyer and the supplier as supplier; both verify clean.
func TestBuyerOpensWithOffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"offer.submit", "agreement.sign"}, nil)
	sm := tradingMandate(t, s, "org_northstar", []string{"offer.accept", "agreement.sign"}, nil)
	o, err := b.Engine.ProposeOffer(ctx, b.Actor(), record.OfferInput{
		MandateID: bm, Counterparty: "org_delta", Terms: recordtest.Terms("3200.00"), Role: protocol.Buyer,
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)),
	})
	if err != nil || o.Status != record.StatusDelivered {
		t.Fatalf("the buyer's offer: %+v %v", o, err)
	}
	txn := o.TransactionID
	if roleOf(t, b, txn) != "buyer" || roleOf(t, s, txn) != "supplier" {
		t.Fatalf("roles held: buyer side %s, supplier side %s", roleOf(t, b, txn), roleOf(t, s, txn))
	}
	out, err := s.Engine.AcceptOffer(ctx, s.Actor(), record.AcceptInput{MandateID: sm, OfferID: o.Objects["offer"]})
	if err != nil || out.State != protocol.Committed {
		t.Fatalf("the supplier's acceptance: %+v %v", out, err)
	}
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, txn, 2)
	for _, sd := range []*recordtest.Side{b, s} {
		buyer, supplier := agreementParties(t, sd, txn)
		if buyer != "org_northstar" || supplier != "org_delta" {
			t.Fatalf("%s's agreement names buyer %s and supplier %s", sd.Node.Org.Config().OrganizationID, buyer, supplier)
		}
		verifiesClean(t, sd, txn)
	}
}

// TestSupplierCountersBuyerAccepts: the supplier opens, the buyer counters
// (an offer by the offeree, stating no side: it keeps the session's), the
// supplier counters again, and the buyer accepts; the agreement names
// them by the sides the opening offer chose. A counter-offer stating the
// other side is refused by its own instance, and one built by hand is
// refused by the receiver; neither record moves.
func TestSupplierCountersBuyerAccepts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"offer.submit", "offer.accept", "agreement.sign"}, nil)
	sm := tradingMandate(t, s, "org_northstar", []string{"offer.submit", "offer.accept", "agreement.sign"}, nil)
	until := envelope.Timestamp(c.Now().Add(24 * time.Hour))
	first := recordtest.Offer(t, s, "3600.00")
	txn := first.TransactionID

	// The buyer cannot turn itself into the supplier with its counter.
	if _, err := b.Engine.ProposeOffer(ctx, b.Actor(), record.OfferInput{MandateID: bm, Counterparty: "org_delta", Terms: recordtest.Terms("3000.00"),
		TransactionID: txn, SupersedesOfferID: first.Objects["offer"], ValidUntil: until, Role: protocol.Supplier}); !hasCode(err, reason.StreamMismatch) {
		t.Fatalf("a counter-offer switching sides: %v", err)
	}
	counter, err := b.Engine.ProposeOffer(ctx, b.Actor(), record.OfferInput{MandateID: bm, Counterparty: "org_delta", Terms: recordtest.Terms("3000.00"),
		TransactionID: txn, SupersedesOfferID: first.Objects["offer"], ValidUntil: until})
	if err != nil || counter.Status != record.StatusDelivered {
		t.Fatalf("the buyer's counter-offer: %+v %v", counter, err)
	}
	// A counter built by hand stating the other side: the supplier's own
	// instance signs it, the buyer's refuses it unseen.
	msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
		return s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: sm, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
			TransactionID: txn, SupersedesOfferID: counter.Objects["offer"], ValidUntil: until})
	})
	forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
		pol := ofType(t, objs, "policy_decision")
		offer := ofType(t, objs, "offer")
		m, err := s.Node.Org.AgentMandate(ctx, s.Actor().AgentID(), sm)
		if err != nil {
			t.Fatal(err)
		}
		doc := authority.Document("offer.submit", txn, "org_northstar", payloadOf(offer)["terms"].(map[string]any), authority.OfferRefs(protocol.Buyer), m)
		h, err := authority.ActionHash(doc)
		if err != nil {
			t.Fatal(err)
		}
		payloadOf(pol)["action_hash"] = h
		return objs
	})
	refusedWith(t, "a counter-offer whose decision states the other side", b, s, txn, reason.StreamMismatch, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
		return err
	})

	again, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: sm, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		TransactionID: txn, SupersedesOfferID: counter.Objects["offer"], ValidUntil: until})
	if err != nil {
		t.Fatalf("the supplier's second offer: %v", err)
	}
	apr := recordtest.Approve(t, b, again.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: again.Objects["offer"], ApprovalID: apr})
	if err != nil || out.State != protocol.Committed {
		t.Fatalf("the buyer's acceptance: %+v %v", out, err)
	}
	recordtest.Flush(ctx, b, s)
	types := recordtest.SameRecord(t, b, s, txn, 2)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed"}) {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		buyer, supplier := agreementParties(t, sd, txn)
		if buyer != "org_northstar" || supplier != "org_delta" {
			t.Fatalf("%s's agreement names buyer %s and supplier %s", sd.Node.Org.Config().OrganizationID, buyer, supplier)
		}
		verifiesClean(t, sd, txn)
	}
}

// TestBuyerCounterAcceptedBySupplier: the supplier opens, the buyer
// counters, the supplier accepts the buyer's counter: the acceptor is the
// supplier and the agreement still names the buyer as buyer.
func TestBuyerCounterAcceptedBySupplier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	bm := tradingMandate(t, b, "org_delta", []string{"offer.submit", "agreement.sign"}, nil)
	sm := tradingMandate(t, s, "org_northstar", []string{"offer.accept", "agreement.sign"}, nil)
	first := recordtest.Offer(t, s, "3600.00")
	counter, err := b.Engine.ProposeOffer(ctx, b.Actor(), record.OfferInput{MandateID: bm, Counterparty: "org_delta", Terms: recordtest.Terms("3000.00"),
		TransactionID: first.TransactionID, SupersedesOfferID: first.Objects["offer"], ValidUntil: envelope.Timestamp(c.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Engine.AcceptOffer(ctx, s.Actor(), record.AcceptInput{MandateID: sm, OfferID: counter.Objects["offer"]})
	if err != nil || out.State != protocol.Committed {
		t.Fatalf("the supplier accepts the counter: %+v %v", out, err)
	}
	recordtest.Flush(ctx, b, s)
	for _, sd := range []*recordtest.Side{b, s} {
		buyer, supplier := agreementParties(t, sd, first.TransactionID)
		if buyer != "org_northstar" || supplier != "org_delta" {
			t.Fatalf("%s's agreement names buyer %s and supplier %s", sd.Node.Org.Config().OrganizationID, buyer, supplier)
		}
		verifiesClean(t, sd, first.TransactionID)
	}
}
