package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// Issue 39: an instance reads its own mandates' status from its own record
// at the act, never from the status cache it keeps for counterparties'
// mandates, so its principal's revocation or suspension stops its own
// agent's very next act. No test below moves the clock: every status cache
// filled by the first act is still fresh when the next one is refused.

// principalElsewhere is the principal's surface of sd opened as `party
// mandate` opens it in a process of its own: another runtime over the
// same state directory and database.
func principalElsewhere(t *testing.T, sd *recordtest.Side) *principal.Surface {
	t.Helper()
	o, err := org.Open(sd.Node.Dir, org.Options{Clock: sd.Node.Org.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	p, err := principal.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOwnRevocationRefusesTheNextActAtOnce: the supplier offers (its own
// status and the buyer's view of it now read, and cached where they are);
// its principal revokes the mandate from another process; the supplier's
// very next act, a revised offer, is refused with A202-MANDATE-INACTIVE,
// and neither record moves.
func TestOwnRevocationRefusesTheNextActAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	first := recordtest.Offer(t, s, "3200.00")
	if err := principalElsewhere(t, s).Revoke(ctx, s.Mandate, "the agent's authority is withdrawn"); err != nil {
		t.Fatal(err)
	}
	refusedWith(t, "a revised offer under a mandate revoked a moment ago", b, s, first.TransactionID, reason.MandateInactive, func() error {
		_, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("3100.00"),
			ValidUntil: envelope.Timestamp(c.Now().Add(time.Hour)), TransactionID: first.TransactionID, SupersedesOfferID: first.Objects["offer"]})
		return err
	})
	if len(s.Pending(t)) != 0 {
		t.Fatal("the refused act left a message in the supplier's outbox")
	}
}

// TestOwnSuspensionRefusesTheNextActAtOnce: after formation (the buyer's
// own acts read its status), its principal suspends the mandate; the
// buyer's next act is refused at once, and, reinstated, allowed at once.
func TestOwnSuspensionRefusesTheNextActAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	issue := func() error {
		_, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	}
	if err := b.Princ.Suspend(ctx, b.Mandate, "under review"); err != nil {
		t.Fatal(err)
	}
	refusedWith(t, "an obligation under a mandate suspended a moment ago", b, s, txn, reason.MandateInactive, issue)
	if err := b.Princ.Reinstate(ctx, b.Mandate, "review closed"); err != nil {
		t.Fatal(err)
	}
	if err := issue(); err != nil {
		t.Fatalf("the act after reinstatement: %v", err)
	}
	recordtest.SameRecord(t, b, s, txn, 3)
}

// TestOwnParentRevocationRefusesTheChildAtOnce: the second agent acts under
// a child mandate; its principal revokes the parent it issued; the child's
// next act is refused at once.
func TestOwnParentRevocationRefusesTheChildAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	parent, child := delegated(t, b)
	asTwo := actorFor(t, b, buyerTwo)
	o := offerTo(t, s, c, buyerTwo, "3200.00")
	if _, err := b.Engine.AcceptOffer(ctx, asTwo, record.AcceptInput{MandateID: child, OfferID: o.Objects["offer"]}); err != nil {
		t.Fatal(err)
	}
	if err := principalElsewhere(t, b).Revoke(ctx, parent, "the lead's authority is withdrawn"); err != nil {
		t.Fatal(err)
	}
	next := offerTo(t, s, c, buyerTwo, "3100.00")
	refusedWith(t, "an acceptance under a child of a mandate revoked a moment ago", b, s, next.TransactionID, reason.MandateInactive, func() error {
		_, err := b.Engine.AcceptOffer(ctx, asTwo, record.AcceptInput{MandateID: child, OfferID: next.Objects["offer"]})
		return err
	})
}
