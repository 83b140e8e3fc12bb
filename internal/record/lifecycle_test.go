package record_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
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
func stateOf(t *testing.T, sd *recordtest.Side, txn string) readmodel.TransactionView {
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
	o, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: offerOnly, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	txn := o.TransactionID
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
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
	if _, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: offerOnly, Counterparty: "org_northstar", Terms: recordtest.Terms("3100.00"),
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn, SupersedesOfferID: o.Objects["offer"]}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("a new offer in agreement_pending: %v", err)
	}
	// The buyer cancels; the supplier countersigns.
	out, err = b.Engine.CancelTransaction(ctx, b.Actor(), record.CancelInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.State != "cancelled" || out.Status != record.StatusRecorded {
		t.Fatalf("cancel: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 2)
	if types[1] != "transaction.cancelled" {
		t.Fatalf("events %v", types)
	}
	bothVerifyClean(t, b, s, txn)
	// Nothing follows a cancelled transaction.
	if _, err := s.Engine.CancelTransaction(ctx, s.Actor(), record.CancelInput{MandateID: offerOnly, TransactionID: txn}); !hasCode(err, reason.StateTransitionDenied) {
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
	out, err := s.Engine.CancelTransaction(ctx, s.Actor(), record.CancelInput{MandateID: s.Mandate, TransactionID: o.TransactionID})
	if err != nil || out.State != "cancelled" {
		t.Fatalf("cancel: %+v %v", out, err)
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 1)
	bothVerifyClean(t, b, s, o.TransactionID)
	// The offer can no longer be accepted.
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("accept after cancel: %v", err)
	}
}

func TestCancelAfterCommitRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	refused(t, "cancel after commit", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.CancelTransaction(ctx, b.Actor(), record.CancelInput{MandateID: b.Mandate, TransactionID: txn})
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
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw([][]byte{raw}))
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
		return b.Engine.CancelTransaction(ctx, b.Actor(), record.CancelInput{MandateID: b.Mandate, TransactionID: txn})
	})
	forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(event(t, objs))["data"] = map[string]any{"offer_id": "off_0123456789abcdef01234567"}
		return objs
	})
	refusedWith(t, "a cancellation naming an offer this transaction does not hold", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
	// The genuine message goes through.
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg)); err != nil {
		t.Fatalf("the genuine cancellation: %v", err)
	}
}

// partial brings a pair to settlement_pending with a remainder: the
// supplier asserts 20, the buyer accepts 15, the remainder owes 5.
func partial(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, obl, rem string) {
	t.Helper()
	b, s, c, txn, obl = committed(t)
	assertPerformance(t, s, obl, "20")
	out, err := b.Engine.Respond(context.Background(), b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15"})
	if err != nil || out.State != "settlement_pending" || out.Objects["remainder_obligation"] == "" {
		t.Fatalf("partial acceptance: %+v %v", out, err)
	}
	return b, s, c, txn, obl, out.Objects["remainder_obligation"]
}

func TestWaivedRemainderThenCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl, rem := partial(t)
	if out, err := instruct(b, obl, "pay-remainder-0001")(); err != nil || out.Status != record.StatusRecorded {
		t.Fatalf("instruct: %+v %v", out, err)
	}
	// The remainder cannot be performed in settlement_pending, and blocks
	// completion while it is owed.
	refused(t, "completion with the remainder owed", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn})
		return err
	})
	out, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: rem})
	if err != nil || out.Status != record.StatusDelivered || out.State != "settlement_pending" {
		t.Fatalf("waive: %+v %v", out, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[rem] != "waived" || st[obl] != "accepted" {
			t.Fatalf("%s: %v", sd.Node.Org.Config().OrganizationID, st)
		}
	}
	refused(t, "a second waiver", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: rem})
		return err
	})
	out, err = s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn})
	if err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 7)
	if types[6] != "transaction.completed" {
		t.Fatalf("events %v", types)
	}
	bothVerifyClean(t, b, s, txn)
}

func TestWaiverRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl, rem := partial(t)
	refused(t, "the obligor waives", b, s, txn, reason.ObligationResponseUnauthorized, func() error {
		_, err := s.Engine.WaiveObligation(ctx, s.Actor(), record.WaiveInput{MandateID: s.Mandate, ObligationID: rem})
		return err
	})
	refused(t, "waiving an accepted obligation", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: obl})
		return err
	})
	// A waiver signed by the obligor, built by hand, is refused by the
	// obligee's instance.
	_, obrRaw := forge(t, s, c, "obligation_response", txn, "object_issuance", map[string]any{"obligation_id": rem, "response_type": "waive"})
	_, polRaw := forge(t, s, c, "policy_decision", txn, "policy_decision", map[string]any{
		"action_hash": canonical.SHA256Hex([]byte("waive")), "decision": "allow", "reason_codes": []any{}, "evaluated_at": envelope.Timestamp(c.Now()),
		"mandate_ids": []any{s.Mandate}, "stream": map[string]any{"kind": "transaction", "id": txn}, "stream_sequence": 6, "visibility": "transaction_parties",
	})
	refusedWith(t, "a waiver by the obligor", b, s, txn, reason.ObligationResponseUnauthorized, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw([][]byte{obrRaw, polRaw}))
		return err
	})
	// The obligee's genuine waiver, edited to release the obligation it
	// accepted and signed again with its valid key, is refused by the
	// obligor's instance.
	msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: rem})
	})
	forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "obligation_response"))["obligation_id"] = obl
		return objs
	})
	refusedWith(t, "a waiver of an accepted obligation", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
	// Nor may a waiver name an obligation of no transaction held.
	forged = reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "obligation_response"))["obligation_id"] = "obl_0123456789abcdef01234567"
		return objs
	})
	refusedWith(t, "a waiver of an unknown obligation", b, s, txn, reason.ObligationSubjectUnreferenced, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
	// The genuine waiver still goes through.
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg)); err != nil {
		t.Fatalf("the genuine waiver: %v", err)
	}
	if st := obligationStates(t, s, txn); st[rem] != "waived" {
		t.Fatalf("supplier: %v", st)
	}
}

func TestWaiverOfOutstandingAssertionRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	assertPerformance(t, s, obl, "20")
	refused(t, "waiving an outstanding assertion", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: obl})
		return err
	})
	// After a rejection the duty is still owed, and may be waived.
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: b.Mandate, ObligationID: obl}); err != nil {
		t.Fatal(err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[obl] != "waived" {
			t.Fatalf("%v", st)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// terminate has the buyer propose and the supplier agree to end txn, and
// checks both records: terminated, the given obligations released, the
// rest as they were, both verifying clean, and the termination illegal
// replayed under rules 1.1 (test 25).
func terminate(t *testing.T, b, s *recordtest.Side, txn string, events int, released []string) {
	t.Helper()
	ctx := context.Background()
	before := obligationStates(t, b, txn)
	out, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("propose: %+v %v", out, err)
	}
	hash := out.Objects["termination_record_hash"]
	var current []readmodel.TerminationView
	for _, p := range stateOf(t, s, txn).TerminationProposals {
		if p.Current {
			current = append(current, p)
		}
	}
	if len(current) != 1 || current[0].TerminationRecordHash != hash {
		t.Fatalf("the supplier sees %+v", current)
	}
	ds, _ := current[0].Record["dispositions"].([]any)
	if len(ds) != len(released) {
		t.Fatalf("the record names %v, want %v", ds, released)
	}
	// The proposer cannot agree to its own proposal.
	if _, err := b.Engine.AgreeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("the proposer agrees: %v", err)
	}
	out, err = s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn})
	if err != nil || out.State != "terminated" || out.Status != record.StatusRecorded {
		t.Fatalf("agree: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, events+1)
	if types[events] != "termination.agreed" {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		st := obligationStates(t, sd, txn)
		for id, was := range before {
			want := was
			if slices.Contains(released, id) {
				want = "released"
			}
			if st[id] != want {
				t.Fatalf("%s: obligation %s is %s, want %s (%v)", sd.Node.Org.Config().OrganizationID, id, st[id], want, st)
			}
		}
		if len(stateOf(t, sd, txn).TerminationProposals) != 0 {
			t.Fatal("a terminated transaction lists proposals")
		}
		verifiesClean(t, sd, txn)
		c, _, err := export.Collect(ctx, sd.Node.Org.Store, txn)
		if err != nil {
			t.Fatal(err)
		}
		rep := verify.Verify(verify.Input{Objects: c.Objects, Mandates: c.Mandates, Keys: c.Keys}, verify.Options{RulesVersion: "1.1"})
		illegal := false
		for _, ch := range rep.Checks {
			if ch.Name == "transition_legality" && ch.Result == verify.Failed && ch.Code == reason.EvidenceTransitionIllegal && strings.Contains(ch.Detail, "termination.agreed") {
				illegal = true
			}
		}
		if !illegal {
			t.Fatalf("%s: under rules 1.1 the termination replays legal", sd.Node.Org.Config().OrganizationID)
		}
	}
	// Nothing follows a terminated transaction.
	if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("propose after termination: %v", err)
	}
}

func TestTerminationFromEachCommittedState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("committed", func(t *testing.T) {
		t.Parallel()
		b, s, _ := recordtest.Pair(t)
		txn := recordtest.Form(t, b, s, "3200.00")
		terminate(t, b, s, txn, 2, nil)
	})
	t.Run("in_performance", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, obl := committed(t)
		terminate(t, b, s, txn, 3, []string{obl})
	})
	t.Run("acceptance_pending", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, obl := committed(t)
		assertPerformance(t, s, obl, "20")
		terminate(t, b, s, txn, 4, []string{obl})
	})
	t.Run("in_performance after a rejection", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, obl := committed(t)
		assertPerformance(t, s, obl, "20")
		if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "quantity_short"}); err != nil {
			t.Fatal(err)
		}
		terminate(t, b, s, txn, 5, []string{obl})
	})
	t.Run("settlement_pending", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, _, rem := partial(t)
		terminate(t, b, s, txn, 5, []string{rem})
	})
}

func TestTerminationOneSignatureRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, _ := committed(t)
	// The buyer's proposal reaches the supplier but never stood in the
	// buyer's own record (the buyer's instance removed it): the supplier's
	// genuine agreement carries the supplier's signature only, as far as
	// the buyer's record holds.
	prop := recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn})
	})
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(prop)); err != nil {
		t.Fatal(err)
	}
	msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
		return s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn})
	})
	refusedWith(t, "a termination the buyer never signed", b, s, txn, reason.EvidenceSignatureInvalid, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(msg))
		return err
	})
	// Nor does the supplier's signature alone make one: without it, the
	// event binds a record nobody signed in the message.
	bare := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any { return without(objs, "evidence") })
	refusedWith(t, "a termination carrying no signature", b, s, txn, reason.EvidenceSignatureInvalid, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(bare))
		return err
	})
}

func TestTerminationUnnamedObligationRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); err != nil {
		t.Fatal(err)
	}
	msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
		return s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn})
	})
	// The supplier's genuine agreement, edited to bind a record that names
	// no disposition for the open obligation, both its signature and the
	// event signed again with the supplier's valid key.
	evs, _ := b.Node.Org.Store.Events(ctx, txn)
	agrs, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "agreement")
	agr, _ := canonical.DecodeObject(agrs[0])
	for name, open := range map[string][]string{"no obligation named": nil, "another obligation named": {"obl_0123456789abcdef01234567"}} {
		unnamed, err := verify.TerminationRecordHash(txn, agr["id"].(string), evs[len(evs)-1].ContentHash, open)
		if err != nil {
			t.Fatal(err)
		}
		forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(ofType(t, objs, "evidence"))["artifact_hash"] = unnamed
			payloadOf(event(t, objs))["data"].(map[string]any)["termination_record_hash"] = unnamed
			return objs
		})
		refusedWith(t, "a termination record with "+name, b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
			return err
		})
	}
	// The genuine agreement releases the obligation.
	if _, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(msg)); err != nil {
		t.Fatalf("the genuine termination: %v", err)
	}
	if st := obligationStates(t, b, txn); st[obl] != "released" {
		t.Fatalf("buyer: %v", st)
	}
}

func TestTerminationStaleOrTerminalRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); err != nil {
		t.Fatal(err)
	}
	// The record moves on after the proposal: it no longer names what is
	// open where it stands.
	assertPerformance(t, s, obl, "20")
	refused(t, "agreeing to a stale proposal", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn})
		return err
	})
	if v := stateOf(t, s, txn); len(v.TerminationProposals) != 1 || v.TerminationProposals[0].Current {
		t.Fatalf("the stale proposal: %+v", v.TerminationProposals)
	}
	// Proposed again where the record stands, it is agreed.
	terminate(t, b, s, txn, 4, []string{obl})

	// From a terminal state the rules give no termination.agreed: a
	// termination of a cancelled transaction, built by hand and signed
	// with the buyer's valid key, is refused.
	// Signed at the second pair's time: its keys' validity starts on its
	// own clock.
	b2, s2, c2 := recordtest.Pair(t)
	o := recordtest.Offer(t, s2, "3200.00")
	if _, err := s2.Engine.CancelTransaction(ctx, s2.Actor(), record.CancelInput{MandateID: s2.Mandate, TransactionID: o.TransactionID}); err != nil {
		t.Fatal(err)
	}
	refused(t, "proposing to end a cancelled transaction", b2, s2, o.TransactionID, reason.StateTransitionDenied, func() error {
		_, err := b2.Engine.ProposeTermination(ctx, b2.Actor(), record.TerminationInput{MandateID: b2.Mandate, TransactionID: o.TransactionID})
		return err
	})
	evs, _ := b2.Node.Org.Store.Events(ctx, o.TransactionID)
	_, raw := forge(t, b2, c2, "transaction_event", o.TransactionID, "event_append", map[string]any{
		"stream": map[string]any{"kind": "transaction", "id": o.TransactionID}, "sequence": 2, "event_type": "termination.agreed",
		"occurred_at": envelope.Timestamp(c2.Now()), "previous_event_hash": evs[0].ContentHash,
		"action_hash": canonical.SHA256Hex([]byte("act")), "policy_decision_id": "pol_0123456789abcdef01234567",
		"from_state": "cancelled", "to_state": "terminated", "data": map[string]any{"termination_record_hash": canonical.SHA256Hex([]byte("record"))},
	})
	refused(t, "termination.agreed from cancelled", b2, s2, o.TransactionID, reason.StateTransitionDenied, func() error {
		_, err := s2.Engine.Receive(ctx, "org_northstar", o.TransactionID, delivery.Raw([][]byte{raw}))
		return err
	})
}

// twoDeliverables are the walkthrough's 20 transmitters performed as two
// obligations: 12 calibrated (1920.00 EUR) and the certificates for 8
// (1280.00 EUR).
func twoDeliverables() []record.DeliverableInput {
	return []record.DeliverableInput{
		{Quantity: "12", Consideration: &record.Money{Currency: "EUR", Amount: "1920.00"}},
		{TermPath: "$.terms.profile_terms.acceptance.certificate_required", Quantity: "8", Consideration: &record.Money{Currency: "EUR", Amount: "1280.00"}},
	}
}

func TestTwoObligationsPerformedAndAcceptedSeparately(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	// Together they must owe exactly the terms.
	short := twoDeliverables()
	short[1].Quantity = "7"
	refused(t, "obligations owing less than the terms", b, s, txn, reason.ObligationTermsMutated, func() error {
		_, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, Deliverables: short})
		return err
	})
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, Deliverables: twoDeliverables()})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("issue: %+v %v", out, err)
	}
	oblA, oblB := out.Objects["obligation"], out.Objects["obligation_2"]
	if oblA == "" || oblB == "" {
		t.Fatalf("issue: %+v", out)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[oblA] != "pending" || st[oblB] != "pending" {
			t.Fatalf("%v", st)
		}
	}
	// One declaration asserts every obligation still owed.
	refused(t, "a declaration leaving an owed obligation out", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: oblA, AssertedQuantity: "12", Evidence: evidence("12 calibrated")})
		return err
	})
	out, err = s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: oblA, AssertedQuantity: "12", Evidence: evidence("12 calibrated"),
		Assertions: []record.AssertionInput{{ObligationID: oblB, AssertedQuantity: "8", Evidence: evidence("8 certificates")}}})
	if err != nil || out.State != "acceptance_pending" {
		t.Fatalf("assert: %+v %v", out, err)
	}
	// The buyer accepts the first, rejects the second: acceptance.rejected,
	// back to in_performance, the first accepted for good.
	refused(t, "a response event leaving an outstanding assertion unanswered", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: oblA, ResponseType: "accept"})
		return err
	})
	out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: oblA, ResponseType: "accept",
		Responses: []record.ResponseInput{{ObligationID: oblB, ResponseType: "reject", ReasonCode: "evidence_insufficient"}}})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("respond: %+v %v", out, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[oblA] != "accepted" || st[oblB] != "rejected" {
			t.Fatalf("%v", st)
		}
	}
	// The second is performed again, on its own, and accepted.
	out, err = s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: oblB, AssertedQuantity: "8", Evidence: evidence("8 certificates, reissued")})
	if err != nil || out.State != "acceptance_pending" {
		t.Fatalf("assert again: %+v %v", out, err)
	}
	out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: oblB, ResponseType: "accept"})
	if err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	// Each is paid on its own, then the transaction completes.
	for i, obl := range []string{oblA, oblB} {
		if out, err := instruct(b, obl, "pay-deliverable-000"+string(rune('1'+i)))(); err != nil || out.Status != record.StatusRecorded {
			t.Fatalf("instruct %s: %+v %v", obl, out, err)
		}
	}
	out, err = s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn})
	if err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 10)
	want := []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.rejected",
		"performance.declared", "acceptance.granted", "settlement.instructed", "settlement.instructed", "transaction.completed"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v", types)
	}
	bothVerifyClean(t, b, s, txn)
}

func TestSeveralObligationsHostile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("activation owing other than the terms", func(t *testing.T) {
		t.Parallel()
		b, s, _ := recordtest.Pair(t)
		txn := recordtest.Form(t, b, s, "3200.00")
		msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
			return b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, Deliverables: twoDeliverables()})
		})
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			for _, o := range objs {
				if o["object_type"] == "obligation" && payloadOf(o)["quantity"] == "8" {
					payloadOf(o)["quantity"] = "9"
				}
			}
			return objs
		})
		refusedWith(t, "obligations owing 21 of 20", b, s, txn, reason.ObligationTermsMutated, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
		// A further obligation whose decision was left out.
		var riderDecision string
		for _, raw := range msg {
			o, _ := canonical.DecodeObject(raw)
			if o["object_type"] == "transaction_event" {
				riderDecision = payloadOf(o)["policy_decision_id"].(string)
			}
		}
		dropped := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			return slices.DeleteFunc(objs, func(o map[string]any) bool { return o["object_type"] == "policy_decision" && o["id"] != riderDecision })
		})
		refusedWith(t, "a further obligation with no decision of its own", b, s, txn, reason.PolicyDenied, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(dropped))
			return err
		})
		if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg)); err != nil {
			t.Fatalf("the genuine activation: %v", err)
		}
	})
	t.Run("declaration leaving an owed obligation out", func(t *testing.T) {
		t.Parallel()
		b, s, _ := recordtest.Pair(t)
		txn := recordtest.Form(t, b, s, "3200.00")
		out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, Deliverables: twoDeliverables()})
		if err != nil {
			t.Fatal(err)
		}
		oblA, oblB := out.Objects["obligation"], out.Objects["obligation_2"]
		msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
			return s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: oblA, AssertedQuantity: "12", Evidence: evidence("12 calibrated"),
				Assertions: []record.AssertionInput{{ObligationID: oblB, AssertedQuantity: "8", Evidence: evidence("8 certificates")}}})
		})
		var leadDecision, prfB, evdB string
		for _, raw := range msg {
			o, _ := canonical.DecodeObject(raw)
			switch p := payloadOf(o); o["object_type"] {
			case "transaction_event":
				leadDecision = p["policy_decision_id"].(string)
			case "performance_event":
				if p["obligation_id"] == oblB {
					prfB = o["id"].(string)
					evdB = p["evidence_refs"].([]any)[0].(map[string]any)["evidence_id"].(string)
				}
			}
		}
		forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
			return slices.DeleteFunc(objs, func(o map[string]any) bool {
				return o["id"] == prfB || o["id"] == evdB || (o["object_type"] == "policy_decision" && o["id"] != leadDecision)
			})
		})
		refusedWith(t, "a declaration leaving the second obligation unasserted", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
			return err
		})
	})
}

// amendmentOffer has the supplier offer new terms on a committed
// transaction: 24 transmitters for 3760.00 EUR.
func amendmentOffer(t *testing.T, s *recordtest.Side, c *recordtest.Clock, txn, supersedes string) string {
	t.Helper()
	terms := recordtest.Terms("3760.00")
	terms["core"].(map[string]any)["quantity"] = "24"
	terms["core"].(map[string]any)["description"] = "Calibration and digital certificates for 24 pressure transmitters"
	out, err := s.Engine.ProposeOffer(context.Background(), s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: terms,
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn, SupersedesOfferID: supersedes})
	if err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("amendment offer: %+v %v", out, err)
	}
	return out.Objects["offer"]
}

func TestAmendmentChangesPriceAndAddsDuty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl1 := committed(t)
	v1raw, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "agreement")
	off := amendmentOffer(t, s, c, txn, "")
	inbox, err := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 10)
	if err != nil || len(inbox) != 1 || !inbox[0].Amendment || inbox[0].OfferID != off || inbox[0].AcceptanceAct["action_type"] != "agreement.amend" {
		t.Fatalf("inbox: %+v %v", inbox, err)
	}
	// The added duty: the 4 more transmitters, for the 560.00 EUR more.
	out, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off,
		AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}})
	if err != nil || out.Status != record.StatusRecorded || out.State != "in_performance" {
		t.Fatalf("amend: %+v %v", out, err)
	}
	v2, obl2 := out.Objects["agreement"], out.Objects["obligation"]
	types := recordtest.SameRecord(t, b, s, txn, 4)
	if types[3] != "agreement.amended" {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		agrs, _ := sd.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "agreement")
		if len(agrs) != 2 || string(agrs[0]) != string(v1raw[0]) {
			t.Fatalf("%s: the superseded version is not kept unchanged", sd.Node.Org.Config().OrganizationID)
		}
		a2, _ := canonical.DecodeObject(agrs[1])
		if a2["id"] != v2 || a2["previous_version_id"] != mustDecode(t, v1raw[0])["id"] || a2["version"] != json.Number("2") {
			t.Fatalf("version 2: %v", a2["previous_version_id"])
		}
		if sigs := a2["signatures"].([]any); len(sigs) != 2 {
			t.Fatalf("version 2 carries %d signatures", len(sigs))
		}
		o1, _ := sd.Node.Org.Store.GetObject(ctx, txn, obl1)
		o2, _ := sd.Node.Org.Store.GetObject(ctx, txn, obl2)
		if payloadOf(mustDecode(t, o1))["subject"].(map[string]any)["terms_hash"] != payloadOf(mustDecode(t, v1raw[0]))["terms_hash"] ||
			payloadOf(mustDecode(t, o2))["subject"].(map[string]any)["terms_hash"] != payloadOf(a2)["terms_hash"] {
			t.Fatal("the obligations do not keep their version's terms_hash")
		}
		if st := obligationStates(t, sd, txn); st[obl1] != "pending" || st[obl2] != "pending" {
			t.Fatalf("%v", st)
		}
	}
	bothVerifyClean(t, b, s, txn)
	// The amended deal is performed, paid and completed.
	if _, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl1, AssertedQuantity: "20", Evidence: evidence("20 calibrated"),
		Assertions: []record.AssertionInput{{ObligationID: obl2, AssertedQuantity: "4", Evidence: evidence("4 more calibrated")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl1, ResponseType: "accept",
		Responses: []record.ResponseInput{{ObligationID: obl2, ResponseType: "accept"}}}); err != nil {
		t.Fatal(err)
	}
	for i, obl := range []string{obl1, obl2} {
		if _, err := instruct(b, obl, "pay-amended-0000"+string(rune('1'+i)))(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := b.Engine.CompleteTransaction(ctx, b.Actor(), record.CompleteInput{MandateID: b.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
	bothVerifyClean(t, b, s, txn)
}

func mustDecode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	o, err := canonical.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// decodeAll decodes a message's objects, for a test to edit them.
func decodeAll(t *testing.T, raws [][]byte) []map[string]any {
	t.Helper()
	objs := make([]map[string]any, 0, len(raws))
	for _, raw := range raws {
		objs = append(objs, mustDecode(t, raw))
	}
	return objs
}

// encodeAll is the message of objs, each in its canonical bytes.
func encodeAll(t *testing.T, objs []map[string]any) [][]byte {
	t.Helper()
	raws := make([][]byte, 0, len(objs))
	for _, o := range objs {
		raw, err := canonical.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	return raws
}

func TestAmendmentDropsADutyByWaiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl1 := committed(t)
	off := amendmentOffer(t, s, c, txn, "")
	// A new version whose obligations do not owe its terms is refused.
	refused(t, "an amendment leaving the obligations owing the old terms", b, s, txn, reason.ObligationTermsMutated, func() error {
		_, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off})
		return err
	})
	out, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off, WaiveObligationIDs: []string{obl1},
		AddObligations: []record.DeliverableInput{{Quantity: "24", Consideration: &record.Money{Currency: "EUR", Amount: "3760.00"}}}})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("amend: %+v %v", out, err)
	}
	obl2 := out.Objects["obligation"]
	for _, sd := range []*recordtest.Side{b, s} {
		if st := obligationStates(t, sd, txn); st[obl1] != "waived" || st[obl2] != "pending" {
			t.Fatalf("%v", st)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

func TestAmendmentRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("reusing the acceptance", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, _ := committed(t)
		off := amendmentOffer(t, s, c, txn, "")
		msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
			return b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off,
				AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}})
		})
		agrs, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "agreement")
		v1 := payloadOf(mustDecode(t, agrs[0]))
		for name, edit := range map[string]func(p, data map[string]any){
			"the prior acceptance": func(p, data map[string]any) {
				p["acceptance_id"] = v1["acceptance_id"]
				data["acceptance_id"] = v1["acceptance_id"]
			},
			"the prior offer and acceptance": func(p, data map[string]any) {
				for _, k := range []string{"acceptance_id", "accepted_offer_id", "accepted_offer_hash"} {
					p[k] = v1[k]
				}
				data["acceptance_id"], data["offer_id"] = v1["acceptance_id"], v1["accepted_offer_id"]
			},
		} {
			forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
				edit(payloadOf(ofType(t, objs, "agreement")), payloadOf(event(t, objs))["data"].(map[string]any))
				return objs
			})
			refusedWith(t, "an amendment reusing "+name, b, s, txn, reason.AgreementAmendmentUnaccepted, func() error {
				_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
				return err
			})
		}
		// The genuine amendment goes through.
		reply, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg))
		if err != nil || len(reply) != 3 {
			t.Fatalf("the genuine amendment: %d objects, %v", len(reply), err)
		}
		// The same event again, under another message key (its objects in
		// another order), is answered as the first time: the countersigned
		// event, the new version signed by both, the decision to sign it.
		again := append([][]byte{msg[1], msg[0]}, msg[2:]...)
		reply2, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(again))
		if err != nil || len(reply2) != 3 {
			t.Fatalf("the same amendment again: %d objects, %v", len(reply2), err)
		}
		for i := range reply {
			if string(reply[i]) != string(reply2[i]) {
				t.Fatalf("object %d of the answer differs the second time", i)
			}
		}
	})
	t.Run("from acceptance_pending", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, obl := committed(t)
		assertPerformance(t, s, obl, "20")
		terms := recordtest.Terms("3760.00")
		refused(t, "an amendment offer in acceptance_pending", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: terms,
				ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn})
			return err
		})
	})
	t.Run("a counter-offer within the amendment", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, obl := committed(t)
		first := amendmentOffer(t, s, c, txn, "")
		// A second amendment offer supersedes the first, or is stale.
		terms := recordtest.Terms("3100.00")
		refused(t, "an amendment offer superseding nothing while one is open", b, s, txn, reason.OfferStale, func() error {
			_, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: terms,
				ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn})
			return err
		})
		second, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: terms,
			ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)), TransactionID: txn, SupersedesOfferID: first})
		if err != nil {
			t.Fatal(err)
		}
		refused(t, "accepting the superseded amendment offer", b, s, txn, reason.OfferStale, func() error {
			_, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: first})
			return err
		})
		// A price cut on the same quantity: the one obligation is waived
		// and reissued at the new price.
		out, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: second.Objects["offer"], WaiveObligationIDs: []string{obl},
			AddObligations: []record.DeliverableInput{{Quantity: "20", Consideration: &record.Money{Currency: "EUR", Amount: "3100.00"}}}})
		if err != nil || out.State != "in_performance" {
			t.Fatalf("amend: %+v %v", out, err)
		}
		bothVerifyClean(t, b, s, txn)
	})
}

// approving is a buyer mandate whose principal holds every act of issue 15
// for its procurement lead's approval.
func approving(t *testing.T, b *recordtest.Side, c *recordtest.Clock) string {
	t.Helper()
	var rules []map[string]any
	for _, a := range []string{"transaction.cancel", "termination.agree", "obligation.waive", "agreement.amend"} {
		rules = append(rules, map[string]any{
			"id":                    "r_" + strings.ReplaceAll(a, ".", "_"),
			"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": a},
			"approver":              map[string]any{"organization_id": "org_northstar", "role": "procurement_lead"},
			"expires_after_seconds": 3600,
		})
	}
	return mandateFor(t, b, c, []string{"transaction.cancel", "termination.agree", "obligation.waive", "agreement.amend", "obligation.activated"}, rules)
}

// approve has b's principal approve exactly the act doc under mandate.
func approve(t *testing.T, b *recordtest.Side, mandate string, doc map[string]any) string {
	t.Helper()
	ctx := context.Background()
	v, err := b.Agent.VerifyMandate(ctx, agent.VerifyInput{MandateID: mandate, ProposedAction: doc})
	if err != nil || v.Decision != authority.RequireApproval {
		t.Fatalf("verify %v: %+v %v", doc["action_type"], v, err)
	}
	req, err := b.Agent.RequestApproval(ctx, agent.VerifyInput{MandateID: mandate, ProposedAction: doc})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := b.Princ.Decide(ctx, req.ApprovalRequestID, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ap["id"].(string)
}

// act is the document of an act of b under mandate (docs/authority.md).
func actOf(t *testing.T, b *recordtest.Side, mandate string, name, txn string, terms, refs map[string]any) map[string]any {
	t.Helper()
	m, err := b.Agent.Mandate(context.Background(), mandate)
	if err != nil {
		t.Fatal(err)
	}
	return authority.Document(name, txn, "org_delta", terms, refs, m)
}

func TestApprovalsReleaseLifecycleActs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		b, s, c := recordtest.Pair(t)
		m := approving(t, b, c)
		o := recordtest.Offer(t, s, "3200.00")
		refused(t, "a cancellation held for approval", b, s, o.TransactionID, reason.ApprovalRequired, func() error {
			_, err := b.Engine.CancelTransaction(ctx, b.Actor(), record.CancelInput{MandateID: m, TransactionID: o.TransactionID})
			return err
		})
		apr := approve(t, b, m, actOf(t, b, m, "transaction.cancel", o.TransactionID, recordtest.Terms("3200.00"), nil))
		if out, err := b.Engine.CancelTransaction(ctx, b.Actor(), record.CancelInput{MandateID: m, TransactionID: o.TransactionID, ApprovalID: apr}); err != nil || out.State != "cancelled" {
			t.Fatalf("cancel with the approval: %+v %v", out, err)
		}
		bothVerifyClean(t, b, s, o.TransactionID)
	})
	t.Run("waive", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, _, rem := partial(t)
		m := approving(t, b, c)
		refused(t, "a waiver held for approval", b, s, txn, reason.ApprovalRequired, func() error {
			_, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: m, ObligationID: rem})
			return err
		})
		doc := actOf(t, b, m, "obligation.waive", txn, authority.CoreTerms("5", "H87", map[string]any{"currency": "EUR", "amount": "800.00"}), map[string]any{"obligation_id": rem})
		apr := approve(t, b, m, doc)
		if out, err := b.Engine.WaiveObligation(ctx, b.Actor(), record.WaiveInput{MandateID: m, ObligationID: rem, ApprovalID: apr}); err != nil || out.Status != record.StatusDelivered {
			t.Fatalf("waive with the approval: %+v %v", out, err)
		}
		if st := obligationStates(t, s, txn); st[rem] != "waived" {
			t.Fatalf("supplier: %v", st)
		}
	})
	t.Run("amend and terminate", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, _ := committed(t)
		m := approving(t, b, c)
		off := amendmentOffer(t, s, c, txn, "")
		add := []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}
		refused(t, "an amendment held for approval", b, s, txn, reason.ApprovalRequired, func() error {
			_, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: m, OfferID: off, AddObligations: add})
			return err
		})
		doc, err := b.Engine.AmendmentAct(ctx, b.Actor(), m, off)
		if err != nil {
			t.Fatal(err)
		}
		apr := approve(t, b, m, doc)
		out, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: m, OfferID: off, AddObligations: add, ApprovalID: apr})
		if err != nil || out.Status != record.StatusRecorded {
			t.Fatalf("amend with the approval: %+v %v", out, err)
		}
		agrs, _ := b.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "agreement")
		v2 := mustDecode(t, agrs[1])
		refused(t, "a termination proposal held for approval", b, s, txn, reason.ApprovalRequired, func() error {
			_, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: m, TransactionID: txn})
			return err
		})
		apr = approve(t, b, m, actOf(t, b, m, "termination.agree", txn, payloadOf(v2)["terms"].(map[string]any), map[string]any{"agreement_id": v2["id"]}))
		if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: m, TransactionID: txn, ApprovalID: apr}); err != nil {
			t.Fatalf("propose with the approval: %v", err)
		}
		if out, err := s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "terminated" {
			t.Fatalf("agree: %+v %v", out, err)
		}
		bothVerifyClean(t, b, s, txn)
	})
}

// bundleOf collects sd's record of txn as a third party receives it.
func bundleOf(t *testing.T, sd *recordtest.Side, txn string) verify.Input {
	t.Helper()
	c, _, err := export.Collect(context.Background(), sd.Node.Org.Store, txn)
	if err != nil {
		t.Fatal(err)
	}
	return verify.Input{Objects: c.Objects, Mandates: c.Mandates, Keys: c.Keys}
}

// checksNamed returns the checks of rep named name.
func checksNamed(rep *verify.Report, name string) []verify.Check {
	var out []verify.Check
	for _, c := range rep.Checks {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// failedWith reports whether a check named name failed with code.
func failedWith(rep *verify.Report, name string, code reason.Code) bool {
	for _, c := range checksNamed(rep, name) {
		if c.Result == verify.Failed && c.Code == code {
			return true
		}
	}
	return false
}

// TestVerifierJudgesLifecycleGuards: the verifier decides the new
// transitions' guards from a bundle's objects, and a bundle that lacks what
// a guard rests on, or holds what breaks it, fails with the guard's code.
func TestVerifierJudgesLifecycleGuards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("termination", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, _, rem := partial(t)
		terminate(t, b, s, txn, 5, []string{rem})
		in := bundleOf(t, b, txn)
		for _, name := range []string{"transition_guard", "termination_signatures", "termination_signature"} {
			if len(checksNamed(verify.Verify(in, verify.Options{RulesVersion: record.RulesVersion}), name)) == 0 {
				t.Fatalf("no %s check", name)
			}
		}
		// Without the proposer's signature, one party signed.
		var fewer []map[string]any
		for _, o := range in.Objects {
			p, _ := o["payload"].(map[string]any)
			by, _ := o["created_by"].(map[string]any)
			if o["object_type"] == "evidence" && p["evidence_type"] == "signed_document" && by["organization_id"] == "org_northstar" {
				continue
			}
			fewer = append(fewer, o)
		}
		rep := verify.Verify(verify.Input{Objects: fewer, Mandates: in.Mandates, Keys: in.Keys}, verify.Options{RulesVersion: record.RulesVersion})
		if !failedWith(rep, "termination_signatures", reason.EvidenceSignatureInvalid) {
			t.Fatalf("one signature: %+v", checksNamed(rep, "termination_signatures"))
		}
		// Without the remainder, the bundle shows no open obligation, and the
		// record, which names it, is not the record of what the bundle shows.
		var noRemainder []map[string]any
		var termination string
		for _, o := range in.Objects {
			if o["id"] == rem {
				continue
			}
			if p, _ := o["payload"].(map[string]any); o["object_type"] == "transaction_event" && p["event_type"] == "termination.agreed" {
				termination = o["id"].(string)
			}
			noRemainder = append(noRemainder, o)
		}
		rep = verify.Verify(verify.Input{Objects: noRemainder, Mandates: in.Mandates, Keys: in.Keys}, verify.Options{RulesVersion: record.RulesVersion})
		guard := false
		for _, c := range checksNamed(rep, "transition_guard") {
			if c.Subject == termination && c.Result == verify.Failed && c.Code == reason.EvidenceTransitionIllegal {
				guard = true
			}
		}
		if !guard {
			t.Fatalf("a record naming an obligation the bundle does not show open: %+v", checksNamed(rep, "transition_guard"))
		}
		// Stated as withheld, it is a gap, not a failure.
		rep = verify.Verify(verify.Input{Objects: noRemainder, Mandates: in.Mandates, Keys: in.Keys, Disclosure: &verify.Disclosure{StatedGaps: []string{rem}}},
			verify.Options{RulesVersion: record.RulesVersion})
		for _, c := range checksNamed(rep, "transition_guard") {
			if c.Subject == termination && c.Result != verify.NotCheckable {
				t.Fatalf("the termination's guard with the remainder withheld: %+v", c)
			}
		}
	})
	t.Run("waiver of an accepted obligation", func(t *testing.T) {
		t.Parallel()
		b, _, c, txn, obl, _ := partial(t)
		in := bundleOf(t, b, txn)
		w, _ := forge(t, b, c, "obligation_response", txn, "object_issuance", map[string]any{"obligation_id": obl, "response_type": "waive"})
		rep := verify.Verify(verify.Input{Objects: append(in.Objects, w), Mandates: in.Mandates, Keys: in.Keys}, verify.Options{RulesVersion: record.RulesVersion})
		if !failedWith(rep, "waiver_state", reason.EvidenceTransitionIllegal) {
			t.Fatalf("waiver after acceptance: %+v", checksNamed(rep, "waiver_state"))
		}
	})
	t.Run("amendment", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, _ := committed(t)
		off := amendmentOffer(t, s, c, txn, "")
		if _, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off,
			AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}}); err != nil {
			t.Fatal(err)
		}
		in := bundleOf(t, s, txn)
		// The amendment's guard needs its acceptance: withheld, the guard
		// is not established, never verified.
		var noAcceptance []map[string]any
		var amended string
		for _, o := range in.Objects {
			p, _ := o["payload"].(map[string]any)
			if o["object_type"] == "acceptance" && p["offer_id"] == off {
				continue
			}
			if o["object_type"] == "transaction_event" && p["event_type"] == "agreement.amended" {
				amended = o["id"].(string)
			}
			noAcceptance = append(noAcceptance, o)
		}
		rep := verify.Verify(verify.Input{Objects: noAcceptance, Mandates: in.Mandates, Keys: in.Keys}, verify.Options{RulesVersion: record.RulesVersion})
		for _, ch := range checksNamed(rep, "transition_guard") {
			if ch.Subject == amended && ch.Result != verify.NotCheckable {
				t.Fatalf("the amendment's guard without its acceptance: %+v", ch)
			}
		}
		// Under rules 1.1 the amendment is not a row.
		rep = verify.Verify(in, verify.Options{RulesVersion: "1.1"})
		illegal := false
		for _, ch := range checksNamed(rep, "transition_legality") {
			illegal = illegal || ch.Subject == amended && ch.Result == verify.Failed
		}
		if !illegal {
			t.Fatal("agreement.amended replays legal under rules 1.1")
		}
	})
}

func TestMoreHostileLifecycleMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a proposal over another record", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, _ := committed(t)
		msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
			return b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn})
		})
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(ofType(t, objs, "evidence"))["artifact_hash"] = canonical.SHA256Hex([]byte("a record naming nothing"))
			return objs
		})
		refusedWith(t, "a termination proposal over a record this copy does not produce", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
		if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg)); err != nil {
			t.Fatalf("the genuine proposal: %v", err)
		}
	})
	t.Run("a termination naming another agreement", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, _ := committed(t)
		if _, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txn}); err != nil {
			t.Fatal(err)
		}
		msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
			return s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txn})
		})
		forged := reseal(t, agentSigner(t, s), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(event(t, objs))["data"].(map[string]any)["agreement_id"] = "agr_0123456789abcdef01234567"
			return objs
		})
		refusedWith(t, "a termination naming an agreement not in force", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
			return err
		})
	})
	t.Run("an amendment not carrying the offer's terms", func(t *testing.T) {
		t.Parallel()
		b, s, c, txn, _ := committed(t)
		off := amendmentOffer(t, s, c, txn, "")
		msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
			return b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off,
				AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}})
		})
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			p := payloadOf(ofType(t, objs, "agreement"))
			p["terms"].(map[string]any)["core"].(map[string]any)["total"] = map[string]any{"currency": "EUR", "amount": "3000.00"}
			h, err := canonical.Hash(p["terms"])
			if err != nil {
				t.Fatal(err)
			}
			p["terms_hash"] = h
			return objs
		})
		refusedWith(t, "an amendment restating other terms than the offer's", b, s, txn, reason.AgreementHashMismatch, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
		// An added duty owing more than the new terms.
		forged = reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(ofType(t, objs, "obligation"))["quantity"] = "5"
			return objs
		})
		refusedWith(t, "an amendment whose obligations owe 25 of 24", b, s, txn, reason.ObligationTermsMutated, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
	})
	t.Run("a response event leaving an assertion unanswered", func(t *testing.T) {
		t.Parallel()
		b, s, _ := recordtest.Pair(t)
		txn := recordtest.Form(t, b, s, "3200.00")
		out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, Deliverables: twoDeliverables()})
		if err != nil {
			t.Fatal(err)
		}
		oblA, oblB := out.Objects["obligation"], out.Objects["obligation_2"]
		if _, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: oblA, AssertedQuantity: "12", Evidence: evidence("12 calibrated"),
			Assertions: []record.AssertionInput{{ObligationID: oblB, AssertedQuantity: "8", Evidence: evidence("8 certificates")}}}); err != nil {
			t.Fatal(err)
		}
		msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
			return b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: oblA, ResponseType: "accept",
				Responses: []record.ResponseInput{{ObligationID: oblB, ResponseType: "accept"}}})
		})
		var lead string
		for _, raw := range msg {
			if o := mustDecode(t, raw); o["object_type"] == "transaction_event" {
				lead = payloadOf(o)["policy_decision_id"].(string)
			}
		}
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			return slices.DeleteFunc(objs, func(o map[string]any) bool {
				return (o["object_type"] == "obligation_response" && payloadOf(o)["obligation_id"] == oblB) || (o["object_type"] == "policy_decision" && o["id"] != lead)
			})
		})
		refusedWith(t, "an acceptance leaving the second assertion unanswered", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
		// A rejection among the responses recorded as acceptance.granted.
		forged = reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			for _, o := range objs {
				if o["object_type"] == "obligation_response" && payloadOf(o)["obligation_id"] == oblB {
					p := payloadOf(o)
					delete(p, "accepted_quantity")
					p["response_type"], p["reason_code"] = "reject", "evidence_insufficient"
				}
			}
			return objs
		})
		refusedWith(t, "a rejection recorded as acceptance.granted", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
		if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg)); err != nil {
			t.Fatalf("the genuine response: %v", err)
		}
	})
}

// TestAmendmentOfferBringsItsTransactionForward: an amendment offer
// appends no event, yet it is activity on its transaction: the receiver
// lists that transaction first, and list_inbox finds an amendment of an
// old transaction behind newer ones.
func TestAmendmentOfferBringsItsTransactionForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, old, _ := committed(t)
	c.Add(time.Second)
	newer := recordtest.Form(t, b, s, "1200.00")
	first := func() string {
		t.Helper()
		page, _, err := b.Node.Org.Store.ListTransactions(ctx, store.TransactionFilter{Limit: 1})
		if err != nil || len(page) != 1 {
			t.Fatalf("listing: %v %v", page, err)
		}
		return page[0].ID
	}
	if got := first(); got != newer {
		t.Fatalf("before the amendment offer, %s is listed first, not %s", got, newer)
	}
	off := amendmentOffer(t, s, c, old, "")
	if got := first(); got != old {
		t.Fatalf("after the amendment offer on %s, %s is listed first", old, got)
	}
	inbox, err := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 1)
	if err != nil || len(inbox) != 1 || inbox[0].OfferID != off {
		t.Fatalf("a one-item inbox: %+v %v", inbox, err)
	}
}

// TestInboxReadsOnlyTransactionsWithOpenOffers: list_inbox reads the
// transactions a counterparty's offer may still be open on (store
// migration 10), not the most recent few hundred of each state. The event
// that takes an offer clears its transaction's mark; an amendment offer
// marks it again however old it is; an offer that lapses unanswered is
// found closed by the inbox, which clears the mark itself.
func TestInboxReadsOnlyTransactionsWithOpenOffers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, _ := committed(t)
	marked := func() []string {
		t.Helper()
		list, _, err := b.Node.Org.Store.ListTransactions(ctx, store.TransactionFilter{OpenOffer: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range list {
			ids = append(ids, x.ID)
		}
		return ids
	}
	inbox := func() []readmodel.InboxItem {
		t.Helper()
		items, err := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 10)
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	if got := marked(); len(got) != 0 {
		t.Fatalf("after formation the buyer marks %v: agreement.direct took the offer", got)
	}
	off := amendmentOffer(t, s, c, txn, "")
	if got := marked(); !slices.Equal(got, []string{txn}) {
		t.Fatalf("after the amendment offer the buyer marks %v", got)
	}
	if items := inbox(); len(items) != 1 || items[0].OfferID != off || !items[0].Amendment {
		t.Fatalf("inbox with the amendment offer: %+v", items)
	}
	if _, err := b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off,
		AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := marked(); len(got) != 0 {
		t.Fatalf("still marked after agreement.amended took the offer: %v", got)
	}

	// A second amendment offer, left to lapse.
	amendmentOffer(t, s, c, txn, "")
	if got := marked(); !slices.Equal(got, []string{txn}) {
		t.Fatalf("after the second amendment offer the buyer marks %v", got)
	}
	c.Add(25 * time.Hour)
	if items := inbox(); len(items) != 0 {
		t.Fatalf("inbox after the offer lapsed: %+v", items)
	}
	if got := marked(); len(got) != 0 {
		t.Fatalf("the inbox left %v marked after finding its offer lapsed", got)
	}
}
