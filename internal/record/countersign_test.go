package record_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// The countersignature means "this instance's own verifier accepts the
// record extended by this event" (issue: a countersignature that checks
// everything the verifier checks). Each test below is a message a lying
// counterparty could send: built from the counterparty's own genuine
// message, edited, and signed again with the counterparty's valid keys,
// delivered from the counterparty's pinned identity. Each is refused and
// leaves both records as they were.

// refusedWith is refused for a refusal carrying code (among others).
func refusedWith(t *testing.T, what string, b, s *recordtest.Side, txn string, code reason.Code, act func() error) {
	t.Helper()
	refusedIf(t, what, b, s, txn, string(code), func(err error) bool { return slices.Contains(reason.CodesOf(err), code) }, act)
}

// acceptance captures the buyer's genuine agreement.direct message for the
// supplier's offer: the buyer's engine builds and signs it, the capture
// removes it again, and neither record moves.
func acceptance(t *testing.T) (b, s *recordtest.Side, txn string, msg [][]byte) {
	t.Helper()
	b, s, _ = recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	msg = recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.AcceptOffer(context.Background(), b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	})
	return b, s, o.TransactionID, msg
}

// commitMessage forms the agreement up to its commitment and captures the
// buyer's genuine agreement.committed message: both records stand at
// agreement_pending with the agreement signed by both. The buyer appends
// it when no agreement.sign of its own rode with its acceptance
// (offereeCommits), and only then.
func commitMessage(t *testing.T) (b, s *recordtest.Side, txn string, msg [][]byte) {
	t.Helper()
	ctx := context.Background()
	b, s, _ = recordtest.Pair(t)
	offereeCommits(t, b, s)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	b.Out.Intercept(func(_ string, objs [][]byte) error {
		last := string(objs[len(objs)-1])
		if strings.Contains(last, `"event_type":"agreement.committed"`) {
			msg = objs
			return reason.Refuse("captured by the test")
		}
		return nil
	})
	_, _ = b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	b.Out.Intercept(nil)
	if msg == nil {
		t.Fatal("no agreement.committed message was sent")
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 1)
	return b, s, o.TransactionID, msg
}

// leadDecision returns the decision the event of a decoded message names:
// the act's own, not a rider's (an acceptance carries the offeree's
// agreement.sign beside it).
func leadDecision(t *testing.T, objs []map[string]any) map[string]any {
	t.Helper()
	id := payloadOf(event(t, objs))["policy_decision_id"]
	for _, o := range objs {
		if o["object_type"] == "policy_decision" && o["id"] == id {
			return o
		}
	}
	t.Fatalf("no decision %v travels with the event", id)
	return nil
}

// offereeCommits gives the buyer an engine whose acceptances carry no
// agreement.sign of its own (Options.TestingOnlyOffereeCommits): the
// offeror then countersigns agreement.direct and signs the agreement, and
// the buyer appends agreement.committed itself, as an offeree whose
// policy held that act when it accepted does.
func offereeCommits(t *testing.T, b, s *recordtest.Side) {
	t.Helper()
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) { o.TestingOnlyOffereeCommits = true })
	s.Out.Reconnect(b.Engine)
}

// event returns the event of a decoded message.
func event(t *testing.T, objs []map[string]any) map[string]any {
	t.Helper()
	return ofType(t, objs, "transaction_event")
}

func TestActionHashOfAnotherActRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := canonical.SHA256Hex([]byte("another act"))
	t.Run("agreement.direct", func(t *testing.T) {
		t.Parallel()
		b, s, txn, msg := acceptance(t)
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(event(t, objs))["action_hash"] = other
			return objs
		})
		refusedWith(t, "agreement.direct naming another act's hash", b, s, txn, reason.EvidenceTransitionIllegal, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
	})
	t.Run("agreement.committed", func(t *testing.T) {
		t.Parallel()
		b, s, txn, msg := commitMessage(t)
		forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
			payloadOf(event(t, objs))["action_hash"] = other
			return objs
		})
		refusedWith(t, "agreement.committed naming another act's hash", b, s, txn, reason.EvidenceTransitionIllegal, func() error {
			_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
			return err
		})
		// The genuine message still goes through afterwards.
		if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg)); err != nil {
			t.Fatalf("the genuine commitment: %v", err)
		}
	})
}

func TestDecisionNotTravellingRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, txn, msg := acceptance(t)
	forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
		id, _ := envelope.NewID("pol")
		payloadOf(event(t, objs))["policy_decision_id"] = id
		return objs
	})
	refusedWith(t, "an event naming a decision that does not travel", b, s, txn, reason.PolicyDenied, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
	// Nor may the named decision be dropped from the message.
	dropped := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any { return without(objs, "policy_decision") })
	refusedWith(t, "an event whose decision was left out", b, s, txn, reason.PolicyDenied, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(dropped))
		return err
	})
}

func TestDecisionForAnotherStreamOrPositionRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		what string
		edit func(p map[string]any)
	}{
		{"a decision made on another transaction's stream", func(p map[string]any) {
			p["stream"] = map[string]any{"kind": "transaction", "id": "txn_0123456789abcdef01234567"}
		}},
		{"a decision made for another position", func(p map[string]any) { p["stream_sequence"] = 2 }},
		{"a decision made for position 0", func(p map[string]any) { p["stream_sequence"] = 0 }},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			b, s, txn, msg := acceptance(t)
			forged := reseal(t, agentSigner(t, b), msg, func(objs []map[string]any) []map[string]any {
				c.edit(payloadOf(leadDecision(t, objs)))
				return objs
			})
			refusedWith(t, c.what, b, s, txn, reason.EvidenceTransitionIllegal, func() error {
				_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
				return err
			})
		})
	}
}

func TestForgedAnnotationsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, txn, msg := acceptance(t)
	// Annotations sit outside the hashed and signed bytes, so every
	// signature still verifies: only the rule that nothing bilateral
	// carries them refuses the message.
	var forged [][]byte
	for _, raw := range msg {
		o, err := canonical.DecodeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		if o["object_type"] == "acceptance" {
			o["kernel_annotations"] = map[string]any{"venue_sequence": 7, "annotated_by": "org_venue"}
		}
		out, err := canonical.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		forged = append(forged, out)
	}
	refused(t, "an acceptance carrying kernel_annotations", b, s, txn, reason.AnnotationForged, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
		return err
	})
}

func TestCommitQueuedIsPendingNotAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	offereeCommits(t, b, s)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	b.Out.Intercept(func(_ string, objs [][]byte) error {
		if strings.Contains(string(objs[len(objs)-1]), `"event_type":"agreement.committed"`) {
			return delivery.ErrUnavailable
		}
		return nil
	})
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != record.StatusPending || out.State != "agreement_pending" || !strings.Contains(out.WaitingFor, "agreement.committed") {
		t.Fatalf("accept_offer with agreement.committed queued: %+v %v", out, err)
	}
	b.Out.Intercept(nil)
}

// TestCountersignatureQueuedIsNotWaiting: when the offeror appends
// agreement.committed in its answer, the offeree's copy is committed once
// it stores that answer, and accept_offer says so, whether or not the
// countersignature has reached the offeror yet; the offeror's copy holds
// its event pending until it does, and then both hold the same record.
func TestCountersignatureQueuedIsNotWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	txn := o.TransactionID
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != record.StatusRecorded || out.State != "committed" || out.WaitingFor != "" {
		t.Fatalf("accept_offer: %+v %v", out, err)
	}
	// The countersignature cannot get through for now.
	b.Out.SetDown(true)
	recordtest.Flush(ctx, b, s)
	if p := b.Pending(t); len(p) != 1 {
		t.Fatalf("the buyer holds %d messages, want its countersignature", len(p))
	}
	if v, err := b.Engine.Transaction(ctx, txn); err != nil || v.State != "committed" {
		t.Fatalf("the buyer's copy: %+v %v", v, err)
	}
	evs, err := s.Node.Org.Store.Events(ctx, txn)
	if err != nil || len(evs) != 2 || evs[0].Status != store.EventRecorded || evs[1].Status != store.EventPending || evs[1].AppendedBy != "org_delta" {
		t.Fatalf("the supplier holds %+v %v, want agreement.direct recorded and its own agreement.committed pending", evs, err)
	}
	if v, err := s.Engine.Transaction(ctx, txn); err != nil || v.State != "agreement_pending" {
		t.Fatalf("the supplier's copy: %+v %v", v, err)
	}
	b.Out.SetDown(false)
	for i := 0; i < 20 && len(b.Pending(t)) > 0; i++ {
		c.Add(10 * time.Second)
		recordtest.Flush(ctx, b, s)
	}
	recordtest.SameRecord(t, b, s, txn, 2)
}

// TestTwoPartyRecordsVerifyClean: a record the two instances build
// verifies, on both sides, with nothing failed and nothing not checkable.
func TestTwoPartyRecordsVerifyClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	prf := assertPerformance(t, s, obl, "20")
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient",
		AssertionID: prf.Objects["performance_event"]}); err != nil {
		t.Fatal(err)
	}
	assertPerformance(t, s, obl, "20")
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "18"}); err != nil {
		t.Fatal(err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, txn)
	}
}

// verifiesClean exports a side's record and verifies it as a third party.
func verifiesClean(t *testing.T, sd *recordtest.Side, txn string) *verify.Report {
	t.Helper()
	rep, err := export.VerifyTransaction(context.Background(), sd.Node.Org.Store, txn)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
		for _, c := range rep.Checks {
			if c.Result != verify.Verified {
				t.Errorf("%s: %s %s on %s: %s", sd.Node.Org.Config().OrganizationID, c.Result, c.Name, c.Subject, c.Detail)
			}
		}
		t.Fatalf("%s's record: %+v", sd.Node.Org.Config().OrganizationID, rep.Results)
	}
	return rep
}

// TestAcceptanceCarryingAForgedAgreementRefused: the agreement that travels
// with an acceptance is signed by the offeror in its answer only if it is
// exactly what the offeror would sign on its own. Each forgery below is
// the buyer's genuine acceptance with its agreement edited and signed
// again with one of the buyer's own keys; each is refused whole (the
// acceptance is not countersigned either) and both records stay as they
// were. The genuine message is countersigned afterwards, its agreement
// signed.
func TestAcceptanceCarryingAForgedAgreementRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	agreementOf := func(objs []map[string]any) map[string]any { return ofType(t, objs, "agreement") }
	cases := []struct {
		name string
		code reason.Code
		edit func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any
	}{
		{"signed by the buyer's principal key", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			agr := agreementOf(objs)
			at := agr["signatures"].([]any)[0].(map[string]any)["signed_at"].(string)
			when, _ := envelope.ParseTimestamp(at)
			agr["signatures"] = []any{}
			if err := signature.Sign(agr, principalSigner(t, b), "agreement_commitment", when); err != nil {
				t.Fatal(err)
			}
			return objs
		}},
		{"signed twice by the buyer", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			agr := agreementOf(objs)
			if err := signature.Sign(agr, agentSigner(t, b), "agreement_commitment", time.Now()); err != nil {
				t.Fatal(err)
			}
			return objs
		}},
		{"naming another acceptance", reason.AgreementHashMismatch, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			id, _ := envelope.NewID("acc")
			payloadOf(agreementOf(objs))["acceptance_id"] = id
			return resealed(t, b, objs, "agreement")
		}},
		{"with other terms", reason.AgreementHashMismatch, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			agr := agreementOf(objs)
			core := payloadOf(agr)["terms"].(map[string]any)["core"].(map[string]any)
			core["total"].(map[string]any)["amount"] = "3100.00"
			h, err := canonical.Hash(payloadOf(agr)["terms"])
			if err != nil {
				t.Fatal(err)
			}
			payloadOf(agr)["terms_hash"] = h
			return resealed(t, b, objs, "agreement")
		}},
		{"naming two commitments", reason.AgreementHashMismatch, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			id, _ := envelope.NewID("cmt")
			p := payloadOf(agreementOf(objs))
			p["commitment_ids"] = append(p["commitment_ids"].([]any), id)
			return resealed(t, b, objs, "agreement")
		}},
		{"two agreements", "", func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			raw, _ := canonical.Marshal(agreementOf(objs))
			second, _ := canonical.DecodeObject(raw)
			id, _ := envelope.NewID("agr")
			second["id"] = id
			objs = append(objs[:len(objs)-1:len(objs)-1], second, objs[len(objs)-1])
			return resealed(t, b, objs, "agreement")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, s, txn, msg := acceptance(t)
			objs := decodeAll(t, msg)
			forged := encodeAll(t, c.edit(t, b, objs))
			receive := func() error {
				_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged))
				return err
			}
			if c.code == "" {
				// What travels beside an event is bounded (carries): a
				// refusal without a registered code of its own.
				refusedIf(t, "an acceptance carrying "+c.name, b, s, txn, "what it may carry", func(err error) bool {
					return err != nil && strings.Contains(err.Error(), "does not carry agreement")
				}, receive)
			} else {
				refusedWith(t, "an acceptance carrying an agreement "+c.name, b, s, txn, c.code, receive)
			}
			reply, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg))
			if err != nil {
				t.Fatalf("the genuine acceptance after the forgery: %v", err)
			}
			signedAgreement := false
			for _, raw := range reply {
				o, _ := canonical.DecodeObject(raw)
				if o["object_type"] == "agreement" && len(o["signatures"].([]any)) == 2 {
					signedAgreement = true
				}
			}
			if !signedAgreement {
				t.Fatal("the genuine acceptance's agreement was not signed in the answer")
			}
		})
	}
}

// resealed seals and signs again, with b's agent key, each object of objs
// of type typ, keeping each first signature's purpose and time.
func resealed(t *testing.T, b *recordtest.Side, objs []map[string]any, typ string) []map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["object_type"] != typ {
			continue
		}
		first := o["signatures"].([]any)[0].(map[string]any)
		when, err := envelope.ParseTimestamp(first["signed_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		o["signatures"] = []any{}
		if err := envelope.Seal(o); err != nil {
			t.Fatal(err)
		}
		if err := signature.Sign(o, agentSigner(t, b), first["purpose"].(string), when); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

// TestAcceptanceAskedAgainAnsweredWithTheSignedAgreement: an acceptance
// the offeror countersigned, asked for again in another message (the same
// event, its agreement left out, so another message key), is answered
// with the countersigned event and what the offeror signed with it, the
// agreement signed by both, its commitment and decision (directAnswer),
// and nothing is stored again.
func TestAcceptanceAskedAgainAnsweredWithTheSignedAgreement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, txn, msg := acceptance(t)
	first, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg))
	if err != nil {
		t.Fatal(err)
	}
	var again [][]byte
	for _, raw := range msg {
		o, err := canonical.DecodeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		if o["object_type"] != "agreement" {
			again = append(again, raw)
		}
	}
	before := []held{holding(t, b, txn), holding(t, s, txn)}
	second, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(again))
	if err != nil {
		t.Fatalf("the same acceptance asked again: %v", err)
	}
	types := func(reply [][]byte) []string {
		var out []string
		for _, raw := range reply {
			o, _ := canonical.DecodeObject(raw)
			out = append(out, o["object_type"].(string))
		}
		slices.Sort(out)
		return out
	}
	// The countersigned agreement.direct and the agreement.committed the
	// offeror appended with its answer.
	if want := []string{"agreement", "commitment", "policy_decision", "transaction_event", "transaction_event"}; !slices.Equal(types(second), want) || !slices.Equal(types(first), want) {
		t.Fatalf("answered first with %v, again with %v; want %v", types(first), types(second), want)
	}
	for _, raw := range second {
		if !slices.ContainsFunc(first, func(f []byte) bool { return string(f) == string(raw) }) {
			t.Fatalf("asked again, the offeror answers with bytes it did not answer with first: %s", raw)
		}
	}
	for i, sd := range []*recordtest.Side{b, s} {
		if after := holding(t, sd, txn); !reflect.DeepEqual(before[i], after) {
			t.Fatalf("the record of %s changed when the acceptance was asked again", sd.Node.Org.Config().OrganizationID)
		}
	}
}
