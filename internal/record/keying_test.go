package record_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

// The store keys an object by its transaction and its id (store migration
// 26; docs/record-protocol.md, decision 22), but the offers, obligations
// and disputes an agent names by their id alone keep ids unique across the
// instance. These are the counterparty's lies about that: an object of a
// new act carrying the id of one already held in another transaction.

// swapID replaces the string from with to wherever it appears in v.
func swapID(v any, from, to string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = swapID(e, from, to)
		}
	case []any:
		for i, e := range x {
			x[i] = swapID(e, from, to)
		}
	case string:
		if x == from {
			return to
		}
	}
	return v
}

func TestOfferReusingAnotherTransactionsIDRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	one := recordtest.Offer(t, s, "3200.00")
	reused := one.Objects["offer"]
	before := []held{holding(t, b, one.TransactionID), holding(t, s, one.TransactionID)}
	// The supplier's next opening offer reaches the buyer under the first
	// offer's id, every object naming it re-signed with the supplier's
	// real agent key.
	var fresh string
	err := tampered(t, s, func(objs []map[string]any) []map[string]any {
		fresh = ofType(t, objs, "offer")["id"].(string)
		for i := range objs {
			objs[i] = swapID(objs[i], fresh, reused).(map[string]any)
		}
		return objs
	}, func() error {
		_, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar",
			Terms: recordtest.Terms("3100.00"), ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour))})
		return err
	})()
	if !hasCode(err, reason.StreamMismatch) {
		t.Fatalf("an opening offer reusing an offer id of another transaction: %v", err)
	}
	if fresh == "" || fresh == reused {
		t.Fatalf("the offer was not rewritten (%q)", fresh)
	}
	for i, sd := range []*recordtest.Side{b, s} {
		if after := holding(t, sd, one.TransactionID); !reflect.DeepEqual(before[i], after) {
			t.Fatalf("%s: the first transaction changed", sd.Node.Org.Config().OrganizationID)
		}
		// The agent's id still names the first offer, in its transaction.
		if txn, err := sd.Node.Org.Store.NamedObjectTransaction(ctx, reused); err != nil || txn != one.TransactionID {
			t.Fatalf("%s: %s names transaction %q (%v), want %s", sd.Node.Org.Config().OrganizationID, reused, txn, err, one.TransactionID)
		}
	}
	// Neither keeps anything of the refused offer: no other transaction
	// than the first (the supplier's own draft is removed with its act).
	for _, sd := range []*recordtest.Side{b, s} {
		ts, err := sd.Node.Org.Store.Transactions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || ts[0].ID != one.TransactionID {
			t.Fatalf("%s holds %d transactions after the refusal", sd.Node.Org.Config().OrganizationID, len(ts))
		}
	}
	if _, err := b.Node.Org.Store.GetObject(ctx, one.TransactionID, fresh); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the buyer holds the supplier's real offer id: %v", err)
	}
}

func TestRemainderReusingAnotherTransactionsObligationRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	// A second transaction between the same organisations, with its own
	// obligation.
	other := recordtest.Form(t, b, s, "900.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: other})
	if err != nil {
		t.Fatalf("issue on the second transaction: %+v %v", out, err)
	}
	otherObl := out.Objects["obligation"]
	prf := assertPerformance(t, s, obl, "20")
	otherBefore := []held{holding(t, b, other), holding(t, s, other)}
	// The buyer accepts part; its remainder reaches the supplier under the
	// id of the second transaction's obligation, re-signed with the
	// buyer's real agent key.
	refused(t, "a remainder under another transaction's obligation id", b, s, txn, reason.ObligationRemainderMissing, tampered(t, b,
		func(objs []map[string]any) []map[string]any {
			rem := ofType(t, objs, "obligation")["id"].(string)
			for i := range objs {
				objs[i] = swapID(objs[i], rem, otherObl).(map[string]any)
			}
			return objs
		}, func() error {
			_, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15",
				AssertionID: prf.Objects["performance_event"], AssertionHash: prf.Objects["assertion_hash"]})
			return err
		}))
	for i, sd := range []*recordtest.Side{b, s} {
		if after := holding(t, sd, other); !reflect.DeepEqual(otherBefore[i], after) {
			t.Fatalf("%s: the second transaction changed", sd.Node.Org.Config().OrganizationID)
		}
	}
}

// rehashed makes every reference in objs to an object of objs carry that
// object's content hash as reseal will seal it (edits change hashes), in
// the message's order, so that a forged message's references all hold and
// only the lie it was built for is left to refuse.
func rehashed(t *testing.T, objs []map[string]any) []map[string]any {
	t.Helper()
	for _, o := range objs {
		was, _ := o["content_hash"].(string)
		now, err := canonical.ContentHash(o)
		if err != nil {
			t.Fatal(err)
		}
		if was != "" && was != now {
			for i := range objs {
				objs[i] = swapID(objs[i], was, now).(map[string]any)
			}
		}
	}
	return objs
}

// TestEvidenceReusingAHeldIDRefused: within one transaction an id names
// one object. The supplier's assertion after a rejection carries new
// evidence under the id of the evidence the buyer already holds, other
// bytes re-signed with the supplier's real agent key and every reference
// to it rehashed. The buyer checks the message's copy; its record keeps
// the first, so its countersignature would vouch for a record it does not
// hold. Until putReceived refused it, the buyer countersigned. Refused
// (A202-EVIDENCE-CHAIN-GAP, two objects claiming one identity), and
// neither record moves.
func TestEvidenceReusingAHeldIDRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	assertPerformance(t, s, obl, "20")
	first := evidenceOf(t, b, txn)
	if len(first) != 1 {
		t.Fatalf("evidence held %v", first)
	}
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "quantity_short"}); err != nil {
		t.Fatal(err)
	}
	refused(t, "new evidence under the held evidence's id", b, s, txn, reason.EvidenceChainGap, tampered(t, s, func(objs []map[string]any) []map[string]any {
		fresh := ofType(t, objs, "evidence")["id"].(string)
		for i := range objs {
			objs[i] = swapID(objs[i], fresh, first[0]).(map[string]any)
		}
		return rehashed(t, objs)
	}, func() error {
		_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, AssertedQuantity: "20",
			Evidence: evidence("other certificates, 20 transmitters")})
		return err
	}))
	if got := evidenceOf(t, b, txn); !reflect.DeepEqual(got, first) {
		t.Fatalf("evidence held after the refusal %v, want %v", got, first)
	}
}
