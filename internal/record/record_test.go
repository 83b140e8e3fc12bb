package record_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
)

func TestFormationThroughCommit(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	types := recordtest.SameRecord(t, b, s, txn, 2)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed"}) {
		t.Fatalf("events %v", types)
	}
	// The acceptance signs the exact offer hash.
	ctx := context.Background()
	for _, sd := range []*recordtest.Side{b, s} {
		objs, _ := sd.Node.Org.Store.TransactionObjects(ctx, txn)
		var off, acc map[string]any
		for _, raw := range objs {
			o, _ := canonical.DecodeObject(raw)
			switch o["object_type"] {
			case "offer":
				off = o
			case "acceptance":
				acc = o
			}
		}
		if acc == nil || off == nil || acc["payload"].(map[string]any)["offer_hash"] != off["content_hash"] {
			t.Fatal("the acceptance does not sign the exact offer hash")
		}
	}
	for _, sd := range []*recordtest.Side{b, s} {
		tx, _ := sd.Node.Org.Store.GetTransaction(ctx, txn)
		if tx.State != "committed" {
			t.Fatalf("%s is %s", sd.Node.Org.Config().OrganizationID, tx.State)
		}
	}
}

func TestWalkthroughToSettlementPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("issue: %+v %v", out, err)
	}
	obl := out.Objects["obligation"]
	out, err = s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: []record.EvidenceInput{{
		EvidenceType: "third_party_certificate", Claim: "Calibration certificates for 20 transmitters",
		ArtifactHash: canonical.SHA256Hex([]byte("certificate bundle")),
	}}})
	if err != nil || out.State != "acceptance_pending" {
		t.Fatalf("assert: %+v %v", out, err)
	}
	out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept"})
	if err != nil || out.State != "settlement_pending" {
		t.Fatalf("respond: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 5)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted"}) {
		t.Fatalf("events %v", types)
	}
}

func TestRefusalsLeaveNoTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	// Above the supplier's own limit: denied locally, nothing sent.
	if _, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("4800.00"),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour))}); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("offer over the limit: %v", err)
	}
	if txs, _ := b.Node.Org.Store.Transactions(ctx); len(txs) != 0 {
		t.Fatal("a denied offer reached the buyer")
	}
	o := recordtest.Offer(t, s, "3200.00")
	// Without the approval the acceptance is held and nothing is recorded.
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"]}); !hasCode(err, reason.ApprovalRequired) {
		t.Fatalf("accept without approval: %v", err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if evs, _ := sd.Node.Org.Store.Events(ctx, o.TransactionID); len(evs) != 0 {
			t.Fatal("a held acceptance left an event")
		}
	}
	// An expired offer is refused.
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	c.Add(25 * time.Hour)
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.OfferExpired) {
		t.Fatalf("accept after expiry: %v", err)
	}
}

func TestSupplierRevocationRefusesNextAct(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Princ.Revoke(ctx, s.Mandate, "test"); err != nil {
		t.Fatal(err)
	}
	c.Add(61 * time.Second)
	_, err = s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: out.Objects["obligation"], Evidence: []record.EvidenceInput{{
		EvidenceType: "third_party_certificate", Claim: "certs", ArtifactHash: canonical.SHA256Hex([]byte("x")),
	}}})
	if !hasCode(err, reason.MandateInactive) {
		t.Fatalf("act under a revoked mandate: %v", err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if evs, _ := sd.Node.Org.Store.Events(ctx, txn); len(evs) != 3 {
			t.Fatalf("%d events after a refused act, want 3", len(evs))
		}
	}
}

func TestPendingUntilCountersignedThenConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	b.Out.SetDown(true)
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != "pending" || out.State != "draft" {
		t.Fatalf("accept while the supplier is unreachable: %+v %v", out, err)
	}
	// The supplier receives the queued message twice (a retry after a lost
	// reply): it answers the same both times; then the buyer's outbox
	// delivers it again, and the buyer records it once and formation goes
	// on by itself.
	b.Out.SetDown(false)
	pending := b.Pending(t)
	if len(pending) != 1 {
		t.Fatalf("%d messages wait in the buyer's outbox", len(pending))
	}
	var first [][]byte
	for i := 0; i < 2; i++ {
		reply, err := s.Engine.Receive(ctx, "org_northstar", pending[0].TransactionID, delivery.Raw(pending[0].Objects))
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && !slices.EqualFunc(first, reply, bytes.Equal) {
			t.Fatal("a redelivered message got another answer")
		}
		first = reply
	}
	c.Add(time.Minute)
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
	tx, _ := b.Node.Org.Store.GetTransaction(ctx, o.TransactionID)
	if tx.State != "committed" {
		t.Fatalf("buyer is %s after the late countersignature", tx.State)
	}
}

func TestForgedEventsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	before, _ := s.Node.Org.Store.Events(ctx, txn)
	// An event signed by a key the supplier does not trust, built from
	// the buyer's own agreement.direct.
	evs, _ := b.Node.Org.Store.Events(ctx, txn)
	raw, _ := b.Node.Org.Store.GetObject(ctx, txn, evs[0].EventID)
	forged, _ := canonical.DecodeObject(raw)
	p := forged["payload"].(map[string]any)
	p["sequence"] = 3
	p["previous_event_hash"] = evs[1].ContentHash
	p["from_state"] = "committed"
	p["to_state"] = "completed"
	p["event_type"] = "transaction.completed"
	forged["id"], _ = envelope.NewID("evt")
	forged["signatures"] = []any{}
	envelope.Seal(forged)
	k, _ := signatureKey(t)
	signature.Sign(forged, k, "event_append", time.Now())
	fb, _ := canonical.Marshal(forged)
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw([][]byte{fb})); !hasCode(err, reason.EvidenceSignatureInvalid) {
		t.Fatalf("untrusted key: %v", err)
	}
	// A transition the rules do not allow, signed with the real key.
	forged["signatures"] = []any{}
	bs, _ := b.Node.Org.AgentSigner()
	signature.Sign(forged, bs, "event_append", time.Now())
	fb, _ = canonical.Marshal(forged)
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw([][]byte{fb})); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("illegal transition: %v", err)
	}
	// A second successor of an existing event: a fork, refused and kept.
	p["sequence"] = 2
	p["previous_event_hash"] = evs[0].ContentHash
	p["from_state"] = "agreement_pending"
	p["to_state"] = "committed"
	p["event_type"] = "agreement.committed"
	forged["signatures"] = []any{}
	envelope.Seal(forged)
	signature.Sign(forged, bs, "event_append", time.Now())
	fb, _ = canonical.Marshal(forged)
	_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw([][]byte{fb}))
	if !errors.Is(err, delivery.ErrConflict) || !hasCode(err, reason.EvidenceChainGap) {
		t.Fatalf("fork: %v", err)
	}
	forks, _ := s.Node.Org.Store.Forks(ctx, txn)
	if len(forks) != 1 {
		t.Fatalf("%d forks kept", len(forks))
	}
	after, _ := s.Node.Org.Store.Events(ctx, txn)
	if len(after) != len(before) {
		t.Fatal("a forged event changed the record")
	}
}

func signatureKey(t *testing.T) (signature.Signer, error) {
	k, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	return signature.NewSigner("key_0123456789abcdef01234567", k)
}

func hasCode(err error, c reason.Code) bool {
	return slices.Contains(reason.CodesOf(err), c)
}

func TestRevisedOfferSupersedesAndStaleIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	first := recordtest.Offer(t, s, "3500.00")
	txn := first.TransactionID
	// A revision that names anything but the session's latest offer is stale.
	if _, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour)), TransactionID: txn, SupersedesOfferID: "off_000000000000000000000000"}); !hasCode(err, reason.OfferStale) {
		t.Fatalf("revision naming another offer: %v", err)
	}
	second, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour)), TransactionID: txn, SupersedesOfferID: first.Objects["offer"]})
	if err != nil || second.Status != "delivered" {
		t.Fatalf("revision: %+v %v", second, err)
	}
	// The buyer's inbox shows only the latest offer.
	inbox, err := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 0)
	if err != nil || len(inbox) != 1 || inbox[0].OfferID != second.Objects["offer"] {
		t.Fatalf("inbox %+v %v", inbox, err)
	}
	// Accepting the superseded offer is stale; the latest forms.
	apr := recordtest.Approve(t, b, first.Objects["offer"])
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: first.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.OfferStale) {
		t.Fatalf("accepting a superseded offer: %v", err)
	}
	apr = recordtest.Approve(t, b, second.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: second.Objects["offer"], ApprovalID: apr})
	if err != nil || out.State != "committed" {
		t.Fatalf("accepting the latest offer: %+v %v", out, err)
	}
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, txn, 2)
	// After commitment an offer is an amendment offer (amendment.go): it
	// supersedes nothing, and one naming the agreed offer is stale.
	if _, err := s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("3000.00"),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour)), TransactionID: txn, SupersedesOfferID: second.Objects["offer"]}); !hasCode(err, reason.OfferStale) {
		t.Fatalf("an offer after commitment superseding the agreed one: %v", err)
	}
}

func TestApprovalForAnotherActKeepsTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	one := recordtest.Offer(t, s, "3200.00")
	two := recordtest.Offer(t, s, "3100.00")
	// An approval given for the acceptance of one offer releases nothing
	// for another: the hold stays and nothing is recorded.
	apr := recordtest.Approve(t, b, one.Objects["offer"])
	_, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: two.Objects["offer"], ApprovalID: apr})
	if err == nil || hasCode(err, reason.PolicyDenied) {
		t.Fatalf("accepting with another act's approval: %v", err)
	}
	// The approval is the other transaction's, so it is not this one's to
	// present (an approval is found under its act's transaction).
	if !hasCode(err, reason.ApprovalRequired) || !strings.Contains(err.Error(), "not held for transaction "+two.TransactionID) {
		t.Fatalf("want the approval refused as not this transaction's: %v", err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if evs, _ := sd.Node.Org.Store.Events(ctx, two.TransactionID); len(evs) != 0 {
			t.Fatal("an unapproved acceptance left an event")
		}
	}
}

// TestCounterpartyRefusesActUnderRevokedMandate shows the buyer's instance
// refusing, by its own status check, an act made under the supplier's
// mandate before the supplier's principal revoked it, once the buyer's
// cached status of that mandate is past its 60-second bound. The supplier's
// own instance refuses its next act at once (it reads its own mandates'
// status from its record, issue 39), so the act that reaches the buyer is
// one the supplier's engine made a moment before the revocation: captured,
// and delivered afterwards.
func TestCounterpartyRefusesActUnderRevokedMandate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	assert := func() (record.Outcome, error) {
		return s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: out.Objects["obligation"],
			Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: "certs", ArtifactHash: canonical.SHA256Hex([]byte("x"))}}})
	}
	// 59 seconds on, the buyer's status of the supplier's mandate, read
	// during formation, is still cached; the supplier's act is made then.
	c.Add(59 * time.Second)
	msg := recordtest.Capture(t, s, assert)
	if err := s.Princ.Revoke(ctx, s.Mandate, "the supplier's director withdrew the agent's authority"); err != nil {
		t.Fatal(err)
	}
	if _, err := assert(); !hasCode(err, reason.MandateInactive) {
		t.Fatalf("the supplier's own instance let its next act through: %v", err)
	}
	// The buyer's status of the supplier's mandate keeps its bound: still
	// the cached active now; two seconds later, past it, asked again.
	statusAtBuyer := func() string {
		t.Helper()
		rec, err := s.Node.Org.Store.GetMandate(ctx, s.Mandate)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := canonical.DecodeObject(rec.Body)
		doc, err := b.Node.Org.Evaluator().Status.Resolve(ctx, s.Mandate, m["status_endpoint"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return doc.Status
	}
	if st := statusAtBuyer(); st != "active" {
		t.Fatalf("the buyer's status of the supplier's mandate within its cache bound: %s", st)
	}
	c.Add(2 * time.Second)
	if st := statusAtBuyer(); st != "revoked" {
		t.Fatalf("the buyer's status of the supplier's mandate past its cache bound: %s", st)
	}
	// So the buyer refuses the act made before the revocation, its
	// decision still fresh.
	if _, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(msg)); !hasCode(err, reason.MandateInactive) {
		t.Fatalf("the buyer's instance did not refuse the act: %v", err)
	}
	recordtest.SameRecord(t, b, s, txn, 3)
	for _, sd := range []*recordtest.Side{b, s} {
		objs, _ := sd.Node.Org.Store.TransactionObjects(ctx, txn)
		for _, raw := range objs {
			o, _ := canonical.DecodeObject(raw)
			if o["object_type"] == "performance_event" || o["object_type"] == "evidence" {
				t.Fatalf("%s kept the refused act's %v", sd.Node.Org.Config().OrganizationID, o["object_type"])
			}
		}
	}
}

func TestWithdrawalBeforeAcceptance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	// The buyer only reads the offer from its inbox while it stands.
	if inbox, _ := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 0); len(inbox) != 1 {
		t.Fatalf("inbox before withdrawal: %d", len(inbox))
	}
	w, err := s.Engine.WithdrawOffer(ctx, s.Actor(), record.WithdrawInput{MandateID: s.Mandate, OfferID: o.Objects["offer"]})
	if err != nil || w.Status != "delivered" {
		t.Fatalf("withdraw: %+v %v", w, err)
	}
	if inbox, _ := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 0); len(inbox) != 0 {
		t.Fatal("a withdrawn offer is still in the buyer's inbox")
	}
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.OfferStale) {
		t.Fatalf("accepting a withdrawn offer: %v", err)
	}
	if _, err := s.Engine.WithdrawOffer(ctx, s.Actor(), record.WithdrawInput{MandateID: s.Mandate, OfferID: o.Objects["offer"]}); !hasCode(err, reason.OfferStale) {
		t.Fatalf("withdrawing twice: %v", err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if evs, _ := sd.Node.Org.Store.Events(ctx, o.TransactionID); len(evs) != 0 {
			t.Fatal("a withdrawn offer's acceptance left an event")
		}
	}
}

func TestWithdrawalNoticeLostStillRefusesAcceptance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	s.Out.SetDown(true) // the notice does not reach the buyer
	w, err := s.Engine.WithdrawOffer(ctx, s.Actor(), record.WithdrawInput{MandateID: s.Mandate, OfferID: o.Objects["offer"]})
	if err != nil || w.Status != "pending" {
		t.Fatalf("withdraw while the buyer is unreachable: %+v %v", w, err)
	}
	// The buyer still believes the offer stands and accepts; the supplier's
	// instance refuses to countersign, and neither record changes.
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.OfferStale) {
		t.Fatalf("acceptance of an offer withdrawn at its offeror: %v", err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if evs, _ := sd.Node.Org.Store.Events(ctx, o.TransactionID); len(evs) != 0 {
			t.Fatal("an event was recorded")
		}
	}
}

func TestWithdrawalAfterAcceptanceRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	objs, _ := s.Node.Org.Store.TransactionObjects(ctx, txn)
	var offerID string
	for _, raw := range objs {
		o, _ := canonical.DecodeObject(raw)
		if o["object_type"] == "offer" {
			offerID = o["id"].(string)
		}
	}
	if _, err := s.Engine.WithdrawOffer(ctx, s.Actor(), record.WithdrawInput{MandateID: s.Mandate, OfferID: offerID}); !hasCode(err, reason.StateTransitionDenied) {
		t.Fatalf("withdrawing an accepted offer: %v", err)
	}
	recordtest.SameRecord(t, b, s, txn, 2)
}

// TestSeparateAgreementProposal: an offeree whose acceptance carried no
// agreement and whose reply to it was stored without one (messages and a
// database of an older build, a draft that failed) proposes it in a write
// of its own, and formation ends committed in both records, three commits
// dearer than with the agreement travelling with the acceptance.
func TestSeparateAgreementProposal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	recordtest.Form(t, b, s, "3100.00")
	commitsOf := func() int64 { return b.Node.Org.Store.Commits() + s.Node.Org.Store.Commits() }
	accept := func() int64 {
		o := recordtest.Offer(t, s, "3200.00")
		apr := recordtest.Approve(t, b, o.Objects["offer"])
		before := commitsOf()
		out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
		if err != nil || out.State != "committed" {
			t.Fatalf("accept: %+v %v", out, err)
		}
		recordtest.Flush(ctx, b, s)
		recordtest.SameRecord(t, b, s, out.TransactionID, 2)
		return commitsOf() - before
	}
	merged := accept()
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) { o.TestingOnlySeparateAgreement = true })
	s.Out.Reconnect(b.Engine)
	separate := accept()
	// On its own the agreement costs the reply's write, its proposal's
	// write, and the offeror's receipt of it, separately.
	if separate != merged+3 {
		t.Fatalf("accepting took %d commits with the agreement travelling with the acceptance, %d without; want three more without", merged, separate)
	}
}

// TestLyingReplyToAcceptanceStoresNothing: the supplier takes the
// acceptance and lies in its answer (about the countersigned event, the
// agreement it signs with it, its commitment, or the agreement.committed
// it appends), each lie signed with a key it holds. The buyer stores none of the reply (its agreement.direct
// stays pending with one signature, the agreement that travelled with it
// keeps only the buyer's, and no commitment or agreement.committed
// follows), notes the refusal's code on the message, and finishes
// formation once the supplier answers truthfully from its inbox.
func TestLyingReplyToAcceptanceStoresNothing(t *testing.T) {
	t.Parallel()
	// appended re-signs the supplier's own agreement.committed with its
	// agent key after edit, as a supplier lying about it would.
	appended := func(edit func(p map[string]any)) func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
		return func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			first := ev["signatures"].([]any)[0].(map[string]any)
			at, err := envelope.ParseTimestamp(first["signed_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			edit(ev["payload"].(map[string]any))
			ev["signatures"] = []any{}
			if err := envelope.Seal(ev); err != nil {
				t.Fatal(err)
			}
			if err := signature.Sign(ev, agentSigner(t, s), "event_append", at); err != nil {
				t.Fatal(err)
			}
			return ev
		}
	}
	lies := []struct {
		name string
		// target is the object_type of the reply's object the lie edits,
		// and for an event its event_type after a colon.
		target string
		code   reason.Code
		lie    func(t *testing.T, s *recordtest.Side, o map[string]any) map[string]any
	}{
		{"countersigned by the supplier's principal key", "transaction_event:agreement.direct", reason.EvidenceSignatureInvalid, func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			return countersignWith(t, ev, principalSigner(t, s))
		}},
		{"countersignature left off", "transaction_event:agreement.direct", reason.EvidenceSignatureInvalid, func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			ev["signatures"] = ev["signatures"].([]any)[:1]
			return ev
		}},
		{"event sealed again with other data", "transaction_event:agreement.direct", reason.EvidenceHashMismatch, func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			ev["payload"].(map[string]any)["data"].(map[string]any)["session_id"] = "ses_000000000000000000000000"
			if err := envelope.Seal(ev); err != nil {
				t.Fatal(err)
			}
			return countersignWith(t, ev, agentSigner(t, s))
		}},
		{"agreement signed by the supplier's principal key", "agreement", reason.EvidenceSignatureInvalid, func(t *testing.T, s *recordtest.Side, agr map[string]any) map[string]any {
			return resignSecond(t, agr, principalSigner(t, s), "agreement_commitment")
		}},
		{"agreement's signature of another purpose", "agreement", reason.EvidenceSignatureInvalid, func(t *testing.T, s *recordtest.Side, agr map[string]any) map[string]any {
			return resignSecond(t, agr, agentSigner(t, s), "object_issuance")
		}},
		{"agreement returned with other terms", "agreement", reason.AgreementHashMismatch, func(t *testing.T, s *recordtest.Side, agr map[string]any) map[string]any {
			agr["payload"].(map[string]any)["terms"].(map[string]any)["core"].(map[string]any)["quantity"] = "21"
			if err := envelope.Seal(agr); err != nil {
				t.Fatal(err)
			}
			return resignSecond(t, agr, agentSigner(t, s), "agreement_commitment")
		}},
		// The supplier's own agreement.committed, appended in its answer.
		{"agreement.committed appended with the supplier's principal key", "transaction_event:agreement.committed", reason.EvidenceSignatureInvalid, func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			first := ev["signatures"].([]any)[0].(map[string]any)
			at, _ := envelope.ParseTimestamp(first["signed_at"].(string))
			ev["signatures"] = []any{}
			if err := signature.Sign(ev, principalSigner(t, s), "event_append", at); err != nil {
				t.Fatal(err)
			}
			return ev
		}},
		{"agreement.committed arriving countersigned already", "transaction_event:agreement.committed", reason.EvidenceSignatureInvalid, func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			if err := signature.Sign(ev, agentSigner(t, s), "event_append", s.Node.Org.Clock()); err != nil {
				t.Fatal(err)
			}
			return ev
		}},
		{"agreement.committed naming another commitment", "transaction_event:agreement.committed", reason.AgreementHashMismatch, appended(func(p map[string]any) {
			p["data"].(map[string]any)["commitment_id"] = "cmt_000000000000000000000000"
		})},
		{"agreement.committed citing a decision that does not travel", "transaction_event:agreement.committed", reason.PolicyDenied, appended(func(p map[string]any) {
			p["policy_decision_id"] = "pol_000000000000000000000000"
		})},
		{"agreement.committed not extending agreement.direct", "transaction_event:agreement.committed", reason.EvidenceChainGap, appended(func(p map[string]any) {
			p["previous_event_hash"] = strings.Repeat("0", 64)
		})},
		{"agreement.committed at another position", "transaction_event:agreement.committed", reason.EvidenceChainGap, appended(func(p map[string]any) {
			p["sequence"] = 3
		})},
		{"agreement.committed moving to in_performance", "transaction_event:agreement.committed", reason.StateTransitionDenied, appended(func(p map[string]any) {
			p["to_state"] = "in_performance"
		})},
		{"agreement.committed naming another act's hash", "transaction_event:agreement.committed", reason.EvidenceTransitionIllegal, appended(func(p map[string]any) {
			p["action_hash"] = canonical.SHA256Hex([]byte("another act"))
		})},
		{"another event in agreement.committed's place", "transaction_event:agreement.committed", reason.StateTransitionDenied, appended(func(p map[string]any) {
			p["event_type"] = "transaction.cancelled"
			p["to_state"] = "cancelled"
		})},
		// Our own agreement.direct, returned under its id as an object
		// of another type: our event with other content.
		{"agreement.direct returned as another type of object", "transaction_event:agreement.direct", reason.EvidenceHashMismatch, func(t *testing.T, s *recordtest.Side, ev map[string]any) map[string]any {
			ev["object_type"] = "commitment"
			ev["signatures"] = []any{}
			if err := envelope.Seal(ev); err != nil {
				t.Fatal(err)
			}
			if err := signature.Sign(ev, agentSigner(t, s), "object_issuance", s.Node.Org.Clock()); err != nil {
				t.Fatal(err)
			}
			return ev
		}},
		{"commitment bound to another agreement", "commitment", reason.AgreementHashMismatch, func(t *testing.T, s *recordtest.Side, cmt map[string]any) map[string]any {
			cmt["payload"].(map[string]any)["agreement_id"] = "agr_000000000000000000000000"
			cmt["signatures"] = []any{}
			if err := envelope.Seal(cmt); err != nil {
				t.Fatal(err)
			}
			if err := signature.Sign(cmt, agentSigner(t, s), "object_issuance", s.Node.Org.Clock()); err != nil {
				t.Fatal(err)
			}
			return cmt
		}},
	}
	for _, l := range lies {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, s, c := recordtest.Pair(t)
			o := recordtest.Offer(t, s, "3200.00")
			apr := recordtest.Approve(t, b, o.Objects["offer"])
			txn := o.TransactionID
			lied := false
			b.Out.TamperReplies(func(objs, reply [][]byte) [][]byte {
				last, err := canonical.DecodeObject(objs[len(objs)-1])
				if err != nil || last["object_type"] != "transaction_event" || last["payload"].(map[string]any)["event_type"] != "agreement.direct" {
					return reply
				}
				out := slices.Clone(reply)
				for i, raw := range out {
					x, err := canonical.DecodeObject(raw)
					if err != nil {
						continue
					}
					typ, _ := x["object_type"].(string)
					if typ == "transaction_event" {
						typ += ":" + x["payload"].(map[string]any)["event_type"].(string)
					}
					if typ != l.target {
						continue
					}
					if out[i], err = canonical.Marshal(l.lie(t, s, x)); err != nil {
						t.Fatal(err)
					}
					lied = true
				}
				return out
			})
			before, err := b.Node.Org.Store.TransactionObjects(ctx, txn)
			if err != nil {
				t.Fatal(err)
			}
			out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
			if err != nil || out.State != "draft" {
				t.Fatalf("accepting against a lying reply: %+v %v", out, err)
			}
			if !lied {
				t.Fatalf("the reply carried no %s to lie about", l.target)
			}
			after, err := b.Node.Org.Store.TransactionObjects(ctx, txn)
			if err != nil {
				t.Fatal(err)
			}
			// The act's own objects (acceptance, the agreement signed by the
			// buyer alone, its agreement.sign decision, the acceptance's
			// decision, pending event) and nothing from the reply or after
			// it.
			for _, raw := range after {
				obj, err := canonical.DecodeObject(raw)
				if err != nil {
					t.Fatal(err)
				}
				switch obj["object_type"] {
				case "agreement", "transaction_event":
					if n := len(obj["signatures"].([]any)); n != 1 {
						t.Fatalf("the buyer keeps its %s with %d signatures", obj["object_type"], n)
					}
					if obj["object_type"] == "transaction_event" && obj["created_by"].(map[string]any)["organization_id"] != "org_northstar" {
						t.Fatalf("the buyer keeps the supplier's event %v after a lying reply", obj["id"])
					}
				case "commitment":
					t.Fatalf("the buyer keeps a commitment after a lying reply to its acceptance")
				}
			}
			if len(after) != len(before)+5 {
				t.Fatalf("the buyer holds %d objects after the lie, %d before the act; want the act's 5 more", len(after), len(before))
			}
			p := b.Pending(t)
			if len(p) != 1 || !strings.Contains(p[0].LastError, string(l.code)) {
				t.Fatalf("the acceptance is not waiting with %s noted: %+v", l.code, p)
			}
			b.Out.TamperReplies(nil)
			for i := 0; i < 20 && (len(b.Pending(t)) > 0 || len(s.Pending(t)) > 0); i++ {
				c.Add(10 * time.Second)
				recordtest.Flush(ctx, b, s)
			}
			if types := recordtest.SameRecord(t, b, s, txn, 2); !slices.Equal(types, []string{"agreement.direct", "agreement.committed"}) {
				t.Fatalf("events %v", types)
			}
		})
	}
}

// resignSecond replaces an object's second signature by one of signer's
// for purpose, at the first's time.
func resignSecond(t *testing.T, o map[string]any, signer signature.Signer, purpose string) map[string]any {
	t.Helper()
	first := o["signatures"].([]any)[0].(map[string]any)
	at, err := envelope.ParseTimestamp(first["signed_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	o["signatures"] = []any{first}
	if err := signature.Sign(o, signer, purpose, at); err != nil {
		t.Fatal(err)
	}
	return o
}

// countersignWith replaces an event's second signature by one of signer's.
func countersignWith(t *testing.T, ev map[string]any, signer signature.Signer) map[string]any {
	t.Helper()
	return resignSecond(t, ev, signer, "event_append")
}

// TestFormationDurableCommits counts the durable commits (one fsync each,
// synchronous=FULL) a formation costs on both sides together: one per act
// and one per received message or stored reply, no separate commits for
// idempotency, outbox or inbox rows. First contact (each side learning the
// other's key records and mandate) happens once per counterparty, in a
// first formation, and is not counted.
func TestFormationDurableCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	recordtest.Form(t, b, s, "3100.00")
	commits := func() int64 { return b.Node.Org.Store.Commits() + s.Node.Org.Store.Commits() }
	start := commits()
	o := recordtest.Offer(t, s, "3200.00")
	offer := commits() - start
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	before := commits()
	sent := b.Out.Sent
	out, err := b.Engine.Idempotent(ctx, "accept_offer", "req-1", "args", func(ctx context.Context) (record.Outcome, error) {
		return b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	})
	if err != nil || out.State != "committed" || out.Status != record.StatusRecorded {
		t.Fatalf("accept: %+v %v", out, err)
	}
	// What accept_offer waited for: the buyer's act, the supplier's
	// receipt (which appends agreement.committed), the buyer's storing of
	// the answer. The countersignature goes back after it returned.
	inCall := commits() - before
	if n := b.Out.Sent - sent; n != 1 {
		t.Fatalf("accept_offer waited for %d messages to the offeror, want 1", n)
	}
	recordtest.Flush(ctx, b, s)
	total := offer + commits() - before
	t.Logf("durable commits: offer %d, accept through commitment %d (%d before accept_offer returned), total %d", offer, commits()-before, inCall, total)
	// Issue 13 asks for at most 12; this build takes 8 (the offeree's
	// agreement and its agreement.sign travel with its acceptance, the
	// offeror answers with the agreement signed by both and its
	// agreement.committed, which the offeree countersigns in the write
	// that stores the answer, settleCommitted), and a step that costs one
	// more is a regression.
	if total > 8 || inCall > 3 {
		t.Fatalf("a formation took %d durable commits on both sides (%d in accept_offer), want at most 8 (3)", total, inCall)
	}
	// Two messages: the acceptance with its agreement, then the
	// countersignature of the offeror's agreement.committed.
	if n := b.Out.Sent - sent; n != 2 {
		t.Fatalf("the acceptance took %d messages to the offeror, want 2", n)
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
}
