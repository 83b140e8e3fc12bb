package record_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// Walking away and changing course (issue 15): cancellation before
// anything is committed, consensual termination from every committed
// state, waivers, amendments, several obligations per agreement. Each act
// is made through the engine on one side and countersigned by the other;
// each countersigner rule has a hostile message built by hand, signed with
// the sender's valid keys, refused with its registered code, leaving both
// records as they were.

// mandateFor issues sd another trading mandate with the given actions,
// scoped like the pair's.
func mandateFor(t *testing.T, sd *recordtest.Side, c *recordtest.Clock, actions []string, rules []map[string]any) string {
	t.Helper()
	counterparty := "org_delta"
	if sd.Node.Org.Config().OrganizationID == "org_delta" {
		counterparty = "org_northstar"
	}
	m, err := sd.Princ.IssueMandate(context.Background(), authority.IssueRequest{
		ValidFrom: envelope.Timestamp(c.Now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.Now().Add(30 * 24 * time.Hour)),
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

// state reads where sd's copy of txn stands.
func stateOf(t *testing.T, sd *recordtest.Side, txn string) record.TransactionView {
	t.Helper()
	v, err := sd.Engine.Transaction(context.Background(), txn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// obligationStates maps each obligation of sd's copy to its state.
func obligationStates(t *testing.T, sd *recordtest.Side, txn string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range stateOf(t, sd, txn).Obligations {
		out[o.ObligationID] = o.State
	}
	return out
}

// bothVerifyClean exports both records and verifies each as a third party.
func bothVerifyClean(t *testing.T, b, s *recordtest.Side, txn string) {
	t.Helper()
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, txn)
	}
}

func TestCancelAfterOfferorDeclinesToSign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	// The supplier offers under a mandate that does not let it sign
	// agreements: its own policy will decline to sign.
	offerOnly := mandateFor(t, s, c, []string{"offer.submit", "transaction.cancel"}, nil)
	o, err := s.Engine.ProposeOffer(ctx, record.OfferInput{MandateID: offerOnly, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	txn := o.TransactionID
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != "agreement_pending" {
		t.Fatalf("accept: %+v", out)
	}
	recordtest.SameRecord(t, b, s, txn, 1)
	// Both agents are told: the buyer by the refusal, the supplier by its
	// own instance.
	for _, sd := range []*recordtest.Side{b, s} {
		v := stateOf(t, sd, txn)
		if v.State != "agreement_pending" || v.Notice == nil || !slices.Contains(v.Notice.Codes, reason.PolicyDenied) {
			t.Fatalf("%s: %s, notice %+v", sd.Node.Org.Config().OrganizationID, v.State, v.Notice)
		}
	}
	// New offers are refused while it stands: offers are made in draft.
	if _, err := s.Engine.ProposeOffer(ctx, record.OfferInput{MandateID: offerOnly, Counterparty: "org_northstar", Terms: recordtest.Terms("3100.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn, SupersedesOfferID: o.Objects["offer"]}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("a new offer in agreement_pending: %v", err)
	}
	// The buyer cancels; the supplier countersigns.
	out, err = b.Engine.CancelTransaction(ctx, record.CancelInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.State != "cancelled" || out.Status != record.StatusRecorded {
		t.Fatalf("cancel: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 2)
	if types[1] != "transaction.cancelled" {
		t.Fatalf("events %v", types)
	}
	bothVerifyClean(t, b, s, txn)
	// Nothing follows a cancelled transaction.
	if _, err := s.Engine.CancelTransaction(ctx, record.CancelInput{MandateID: offerOnly, TransactionID: txn}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("cancel twice: %v", err)
	}
	// A resumed formation does not propose the agreement again.
	b.Engine.Resume(ctx)
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, txn, 2)
}

func TestCancelInDraftBySupplier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	out, err := s.Engine.CancelTransaction(ctx, record.CancelInput{MandateID: s.Mandate, TransactionID: o.TransactionID})
	if err != nil || out.State != "cancelled" {
		t.Fatalf("cancel: %+v %v", out, err)
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 1)
	bothVerifyClean(t, b, s, o.TransactionID)
	// The offer can no longer be accepted.
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	if _, err := b.Engine.AcceptOffer(ctx, record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("accept after cancel: %v", err)
	}
}

func TestCancelAfterCommitRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	refused(t, "cancel after commit", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.CancelTransaction(ctx, record.CancelInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	})
	// A cancellation built by hand over the committed record, signed with
	// the buyer's valid agent key, is refused by the supplier's
	// countersigner: the table has no transaction.cancelled from committed.
	evs, _ := b.Node.Org.Store.Events(ctx, txn)
	offers, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "offer")
	offer, _ := canonical.DecodeObject(offers[0])
	for _, to := range []string{"cancelled", "committed"} {
		_, raw := forge(t, b, c, "transaction_event", txn, "event_append", map[string]any{
			"stream": map[string]any{"kind": "transaction", "id": txn}, "sequence": 3, "event_type": "transaction.cancelled",
			"occurred_at": envelope.Timestamp(c.Now()), "previous_event_hash": evs[1].ContentHash,
			"action_hash": canonical.SHA256Hex([]byte("act")), "policy_decision_id": "pol_0123456789abcdef01234567",
			"from_state": "committed", "to_state": to, "data": map[string]any{"offer_id": offer["id"]},
		})
		refused(t, "transaction.cancelled from committed to "+to, b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, [][]byte{raw})
			return err
		})
	}
}

func TestCancelNamingAnotherOfferRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	txn := o.TransactionID
	msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.CancelTransaction(ctx, record.CancelInput{MandateID: b.Mandate, TransactionID: txn})
	})
	forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(event(t, objs))["data"] = map[string]any{"offer_id": "off_0123456789abcdef01234567"}
		return objs
	})
	refusedWith(t, "a cancellation naming an offer this transaction does not hold", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, forged)
		return err
	})
	// The genuine message goes through.
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, msg); err != nil {
		t.Fatalf("the genuine cancellation: %v", err)
	}
}
