package record_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// The commitment in the answer (docs/record-protocol.md): the offeree's
// agreement.sign rides with its acceptance; the offeror, when it signs the
// agreement, appends agreement.committed in its answer; the offeree
// countersigns it in the write that stores that answer and sends the
// countersignature back on its own. Each test below is what a lying
// counterparty could send at one of those steps, signed with its own
// valid keys: refused, both records as they were.

// riderOf returns the decision a decoded acceptance message carries beside
// the one its event names: the offeree's agreement.sign.
func riderOf(t *testing.T, objs []map[string]any) map[string]any {
	t.Helper()
	lead := leadDecision(t, objs)
	for _, o := range objs {
		if o["object_type"] == "policy_decision" && o["id"] != lead["id"] {
			return o
		}
	}
	t.Fatal("no agreement.sign rides with the acceptance")
	return nil
}

func TestAcceptanceCarriesTheOffereesAgreementSign(t *testing.T) {
	t.Parallel()
	_, _, txn, msg := acceptance(t)
	objs := decodeAll(t, msg)
	p := payloadOf(riderOf(t, objs))
	stream := p["stream"].(map[string]any)
	if p["decision"] != "allow" || stream["id"] != txn || fmt.Sprint(p["stream_sequence"]) != "2" {
		t.Fatalf("the rider is %v on %v at %v, want an allow at position 2 of %s", p["decision"], stream["id"], p["stream_sequence"], txn)
	}
}

func TestRiderSignForgedRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := canonical.SHA256Hex([]byte("another act"))
	cases := []struct {
		name string
		// code is the refusal's; "" for a refusal without one (what may
		// travel with an event is bounded, carries).
		code reason.Code
		edit func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any
	}{
		{"made for position 1", reason.EvidenceTransitionIllegal, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			payloadOf(riderOf(t, objs))["stream_sequence"] = 1
			return resealed(t, b, objs, "policy_decision")
		}},
		{"made on another transaction's stream", reason.EvidenceTransitionIllegal, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			payloadOf(riderOf(t, objs))["stream"] = map[string]any{"kind": "transaction", "id": "txn_0123456789abcdef01234567"}
			return resealed(t, b, objs, "policy_decision")
		}},
		{"allowing another act", reason.PolicyDenied, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			payloadOf(riderOf(t, objs))["action_hash"] = other
			return resealed(t, b, objs, "policy_decision")
		}},
		{"signed by the buyer's principal key", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			pol := riderOf(t, objs)
			at, _ := envelope.ParseTimestamp(pol["signatures"].([]any)[0].(map[string]any)["signed_at"].(string))
			pol["signatures"] = []any{}
			if err := signature.Sign(pol, principalSigner(t, b), "policy_decision", at); err != nil {
				t.Fatal(err)
			}
			return objs
		}},
		{"riding with no agreement to sign", reason.PolicyDenied, func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			return without(objs, "agreement")
		}},
		{"twice", "", func(t *testing.T, b *recordtest.Side, objs []map[string]any) []map[string]any {
			raw, _ := canonical.Marshal(riderOf(t, objs))
			again, _ := canonical.DecodeObject(raw)
			id, _ := envelope.NewID("pol")
			again["id"] = id
			objs = append(objs[:len(objs)-1:len(objs)-1], again, objs[len(objs)-1])
			return resealed(t, b, objs, "policy_decision")
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
				refusedIf(t, "an acceptance whose agreement.sign rides "+c.name, b, s, txn, "what it may carry", func(err error) bool {
					return err != nil && strings.Contains(err.Error(), "does not carry policy_decision")
				}, receive)
			} else {
				refusedWith(t, "an acceptance whose agreement.sign rides "+c.name, b, s, txn, c.code, receive)
			}
			// The genuine acceptance after the forgery: answered with the
			// agreement signed by both and the supplier's agreement.committed.
			reply, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(msg))
			if err != nil {
				t.Fatalf("the genuine acceptance after the forgery: %v", err)
			}
			last, _ := canonical.DecodeObject(reply[len(reply)-1])
			if last["object_type"] != "transaction_event" || payloadOf(last)["event_type"] != "agreement.committed" {
				t.Fatalf("the genuine acceptance is answered without agreement.committed: %s", reply[len(reply)-1])
			}
		})
	}
}

// countersignature forms the agreement up to the buyer's storing of the
// supplier's answer and returns the buyer's genuine countersignature of
// the supplier's agreement.committed, still waiting in the buyer's outbox
// (no worker has run): the buyer's copy is committed, the supplier's holds
// its agreement.committed pending.
func countersignature(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn string, msg [][]byte) {
	t.Helper()
	ctx := context.Background()
	b, s, c = recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.State != "committed" || out.Status != record.StatusRecorded {
		t.Fatalf("accept: %+v %v", out, err)
	}
	p := b.Pending(t)
	if len(p) != 1 || len(p[0].Objects) != 1 {
		t.Fatalf("the buyer holds %d messages, want its countersignature alone", len(p))
	}
	return b, s, c, o.TransactionID, p[0].Objects
}

// unchanged runs act, which must fail with a refusal ok accepts, and checks
// that neither record moved (refusedIf, which also wants every event
// recorded, is this for a record with none pending).
func unchanged(t *testing.T, what string, b, s *recordtest.Side, txn string, ok func(error) bool, act func() error) {
	t.Helper()
	before := []held{holding(t, b, txn), holding(t, s, txn)}
	if err := act(); err == nil || !ok(err) {
		t.Fatalf("%s: %v", what, err)
	}
	for i, sd := range []*recordtest.Side{b, s} {
		if after := holding(t, sd, txn); !reflect.DeepEqual(before[i], after) {
			t.Fatalf("%s: the record of %s changed:\nbefore %+v\nafter  %+v", what, sd.Node.Org.Config().OrganizationID, before[i], after)
		}
	}
}

func TestForgedCountersignatureRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// resealedAs seals the event again after edit and signs it first with
	// signer for the supplier, then countersigns it with the buyer's agent
	// key: what a buyer holding only its own keys can make of it.
	resealedAs := func(t *testing.T, b *recordtest.Side, ev map[string]any, edit func(map[string]any), signer signature.Signer) map[string]any {
		edit(ev)
		ev["signatures"] = []any{}
		if err := envelope.Seal(ev); err != nil {
			t.Fatal(err)
		}
		if err := signature.Sign(ev, signer, "event_append", b.Node.Org.Clock()); err != nil {
			t.Fatal(err)
		}
		if err := signature.Sign(ev, agentSigner(t, b), "event_append", b.Node.Org.Clock()); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	cases := []struct {
		name string
		code reason.Code
		edit func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any
	}{
		{"countersigned by the buyer's principal key", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any {
			return countersignWith(t, ev, principalSigner(t, b))
		}},
		{"countersignature left off", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any {
			ev["signatures"] = ev["signatures"].([]any)[:1]
			return ev
		}},
		{"countersigned twice", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any {
			if err := signature.Sign(ev, agentSigner(t, b), "event_append", b.Node.Org.Clock()); err != nil {
				t.Fatal(err)
			}
			return ev
		}},
		{"with the supplier's signature replaced by the buyer's", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any {
			second := ev["signatures"].([]any)[1].(map[string]any)
			at, _ := envelope.ParseTimestamp(second["signed_at"].(string))
			ev["signatures"] = []any{}
			for range 2 {
				if err := signature.Sign(ev, agentSigner(t, b), "event_append", at); err != nil {
					t.Fatal(err)
				}
			}
			return ev
		}},
		{"over other content", reason.EvidenceHashMismatch, func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any {
			return resealedAs(t, b, ev, func(ev map[string]any) {
				payloadOf(ev)["data"].(map[string]any)["commitment_id"] = "cmt_000000000000000000000000"
			}, agentSigner(t, b))
		}},
		{"of an event the supplier never appended", reason.EvidenceSignatureInvalid, func(t *testing.T, b *recordtest.Side, ev map[string]any) map[string]any {
			return resealedAs(t, b, ev, func(ev map[string]any) {
				ev["id"], _ = envelope.NewID("evt")
				payloadOf(ev)["sequence"] = 3
			}, agentSigner(t, b))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, s, clock, txn, msg := countersignature(t)
			ev, err := canonical.DecodeObject(msg[0])
			if err != nil {
				t.Fatal(err)
			}
			raw, err := canonical.Marshal(c.edit(t, b, ev))
			if err != nil {
				t.Fatal(err)
			}
			unchanged(t, "a countersignature "+c.name, b, s, txn, func(err error) bool { return slices.Contains(reason.CodesOf(err), c.code) }, func() error {
				_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw([][]byte{raw}))
				return err
			})
			// The genuine countersignature still completes the supplier's copy.
			for i := 0; i < 20 && len(b.Pending(t)) > 0; i++ {
				clock.Add(10 * time.Second)
				recordtest.Flush(ctx, b, s)
			}
			recordtest.SameRecord(t, b, s, txn, 2)
		})
	}
	// The genuine countersignature, sent by an organisation the supplier
	// has pinned as a peer but does not hold the transaction with.
	t.Run("sent by another organisation", func(t *testing.T) {
		t.Parallel()
		b, s, clock, txn, msg := countersignature(t)
		orgtest.Peer(t, orgtest.New(t, "org_elsewhere", clock.Now, true), s.Node)
		unchanged(t, "a countersignature from another organisation", b, s, txn, func(err error) bool { return hasCode(err, reason.StreamMismatch) }, func() error {
			_, err := s.Engine.Receive(ctx, "org_elsewhere", txn, delivery.Raw(msg))
			return err
		})
	})
}

// TestCountersignatureAgainStoresNothing: the countersignature delivered
// again (a reply lost on its way back) is answered with nothing and
// changes nothing; a different countersignature of an event already
// recorded is not taken either.
func TestCountersignatureAgainStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, msg := countersignature(t)
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, txn, 2)
	before := []held{holding(t, b, txn), holding(t, s, txn)}
	ev, err := canonical.DecodeObject(msg[0])
	if err != nil {
		t.Fatal(err)
	}
	other, err := canonical.Marshal(countersignWith(t, ev, agentSigner(t, b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][][]byte{msg, {other}} {
		reply, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(m))
		if err != nil || len(reply) != 0 {
			t.Fatalf("the countersignature again: %d objects, %v", len(reply), err)
		}
	}
	for i, sd := range []*recordtest.Side{b, s} {
		if after := holding(t, sd, txn); !reflect.DeepEqual(before[i], after) {
			t.Fatalf("the record of %s changed", sd.Node.Org.Config().OrganizationID)
		}
	}
	recordtest.SameRecord(t, b, s, txn, 2)
}

// TestMutatedAnswersNeverStoredUnverifiable is the countersigning property
// (mutation_test.go) for what an offeree stores from an answer: every leaf
// of every object of the supplier's genuine answer to the acceptance (the
// countersigned agreement.direct, the agreement signed by both, the
// commitment, the supplier's decision, its agreement.committed) is mutated
// in turn, the object sealed again and signed with the supplier's agent
// key, and the answer handed to the buyer. Either the buyer stores none of
// it and its record is exactly as it was, or it stores it, and then its
// record, exported, verifies with nothing failed and nothing not
// checkable.
func TestMutatedAnswersNeverStoredUnverifiable(t *testing.T) {
	if testing.Short() {
		t.Skip("the mutation sweep runs in the full suite")
	}
	t.Parallel()
	ctx := context.Background()
	// fixture: the buyer's acceptance taken by the supplier, its answer
	// lost on the way back, so that the buyer's next attempt is answered
	// from the supplier's inbox with the same genuine answer.
	fixture := func(t *testing.T) (b, s *recordtest.Side, txn string, answer [][]byte) {
		b, s, _ = recordtest.Pair(t)
		o := recordtest.Offer(t, s, "3200.00")
		apr := recordtest.Approve(t, b, o.Objects["offer"])
		b.Out.TamperReplies(func(objs, reply [][]byte) [][]byte {
			if answer == nil {
				answer = reply
			}
			return nil
		})
		if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil {
			t.Fatal(err)
		}
		if answer == nil {
			t.Fatal("the acceptance was not answered")
		}
		return b, s, o.TransactionID, answer
	}
	refusedN, stored := sweep(t, "stored", func(t *testing.T) sweepCase {
		b, s, txn, answer := fixture(t)
		return sweepCase{to: b, txn: txn, msg: answer, signer: agentSigner(t, s), take: func(forged [][]byte) (bool, error) {
			b.Out.TamperReplies(func(objs, reply [][]byte) [][]byte { return forged })
			// The buyer's next attempt, made now: a clock moved past its
			// back-off would age the decisions past their 60 seconds.
			for _, m := range b.Pending(t) {
				b.Engine.Attempt(ctx, m)
			}
			evs, err := b.Node.Org.Store.Events(ctx, txn)
			if err != nil {
				t.Fatal(err)
			}
			return len(evs) > 0 && evs[0].Status == store.EventRecorded, nil
		}}
	}, func(orig map[string]any) bool {
		// Signed by both: re-signed by the supplier alone it loses the
		// buyer's signature, which the buyer's checks of its own
		// signature refuse before anything else (record_test.go,
		// TestLyingReplyToAcceptanceStoresNothing, lies about them).
		return len(orig["signatures"].([]any)) != 1
	})
	t.Logf("%d mutations not stored, %d stored and verifying", refusedN, stored)
}

// lateAnswer has sd's next act answered but the answer lost, the link then
// down for five minutes of sd's retries, and up again: the answer the
// counterparty gave then is given again from its inbox, its decisions
// five minutes old.
func lateAnswer(t *testing.T, sd, other *recordtest.Side, c *recordtest.Clock, act func() (record.Outcome, error)) record.Outcome {
	t.Helper()
	ctx := context.Background()
	sd.Out.SetDropReplies(true)
	out, err := act()
	if err != nil || out.Status != record.StatusPending {
		t.Fatalf("the act whose answer was lost: %+v %v", out, err)
	}
	sd.Out.SetDropReplies(false)
	sd.Out.SetDown(true)
	for elapsed := time.Duration(0); elapsed < 5*time.Minute; elapsed += 10 * time.Second {
		c.Add(10 * time.Second)
		recordtest.Flush(ctx, sd, other)
	}
	sd.Out.SetDown(false)
	for i := 0; i < 30 && (len(sd.Pending(t)) > 0 || len(other.Pending(t)) > 0); i++ {
		c.Add(10 * time.Second)
		recordtest.Flush(ctx, sd, other)
	}
	if p := sd.Pending(t); len(p) != 0 {
		t.Fatalf("the late answer was not stored: %s", p[0].LastError)
	}
	return out
}

// TestLateAnswerStored: an answer that reaches the offeree five minutes
// after the offeror gave it (the reply lost, the network then down) is
// stored: the offeror's decisions in it were made in answer to the
// acceptance, after it (authority.DecidedSince), and are not refused as
// stale, which would leave the acceptance unanswerable for good.
func TestLateAnswerStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	lateAnswer(t, b, s, c, func() (record.Outcome, error) {
		return b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	})
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
	bothVerifyClean(t, b, s, o.TransactionID)
}

// TestLateAmendmentAnswerStored is TestLateAnswerStored for an amendment,
// whose answer carries the offeror's agreement.amend decision.
func TestLateAmendmentAnswerStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, _ := committed(t)
	off := amendmentOffer(t, s, c, txn, "")
	lateAnswer(t, b, s, c, func() (record.Outcome, error) {
		return b.Engine.AcceptAmendment(ctx, b.Actor(), record.AmendInput{MandateID: b.Mandate, OfferID: off,
			AddObligations: []record.DeliverableInput{{Quantity: "4", Consideration: &record.Money{Currency: "EUR", Amount: "560.00"}}}})
	})
	if types := recordtest.SameRecord(t, b, s, txn, 4); types[3] != "agreement.amended" {
		t.Fatalf("events %v", types)
	}
	bothVerifyClean(t, b, s, txn)
}

// denyOnce is a local policy that, once on is set, denies the act named
// act and leaves everything else to base.
type denyOnce struct {
	base authority.Policy
	act  string
	on   *atomic.Bool
}

func (p denyOnce) Deny(ctx context.Context, mandateID string, act map[string]any) []string {
	if p.on.Load() && act["action_type"] == p.act {
		return []string{p.act + " is no longer allowed"}
	}
	if p.base == nil {
		return nil
	}
	return p.base.Deny(ctx, mandateID, act)
}

// TestRenewalDropsARiderNoLongerAllowed: an acceptance queued while the
// offeror is down carries the offeree's agreement.sign as a rider its
// act can go without. When the decisions go stale and the act is renewed
// after the offeree's policy stopped allowing agreement.sign, the rider
// is dropped, not the acceptance: the offeror countersigns
// agreement.direct and signs the agreement, appends no agreement.committed
// of its own, and the offeree, whose policy now denies agreement.sign,
// holds the record at agreement_pending.
func TestRenewalDropsARiderNoLongerAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	var denied atomic.Bool
	ev := b.Node.Org.Evaluator()
	ev.Policy = denyOnce{base: ev.Policy, act: string(protocol.ActAgreementSign), on: &denied}
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	txn := o.TransactionID
	b.Out.SetDown(true)
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != record.StatusPending {
		t.Fatalf("accept while the supplier is down: %+v %v", out, err)
	}
	riderOf(t, decodeAll(t, b.Pending(t)[0].Objects)) // it rides
	denied.Store(true)
	for elapsed := time.Duration(0); elapsed < 5*time.Minute; elapsed += 10 * time.Second {
		c.Add(10 * time.Second)
		recordtest.Flush(ctx, b, s)
	}
	b.Out.SetDown(false)
	for i := 0; i < 20 && (len(b.Pending(t)) > 0 || len(s.Pending(t)) > 0); i++ {
		c.Add(time.Second)
		recordtest.Flush(ctx, b, s)
	}
	if types := recordtest.SameRecord(t, b, s, txn, 1); types[0] != "agreement.direct" {
		t.Fatalf("events %v", types)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if v, err := sd.Engine.Transaction(ctx, txn); err != nil || v.State != "agreement_pending" {
			t.Fatalf("%s holds %+v (%v), want agreement_pending", sd.Node.Org.Config().OrganizationID, v.State, err)
		}
		verifiesClean(t, sd, txn)
	}
	// No decision of the buyer's for agreement.sign reached the supplier.
	raws, err := s.Node.Org.Store.TransactionObjects(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range raws {
		o := mustDecode(t, raw)
		if o["object_type"] == "policy_decision" && o["created_by"].(map[string]any)["organization_id"] == "org_northstar" && payloadOf(o)["stream_sequence"] != nil && fmt.Sprint(payloadOf(o)["stream_sequence"]) == "2" {
			t.Fatalf("the supplier holds the buyer's rider %v", o["id"])
		}
	}
}
