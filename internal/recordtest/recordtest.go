// Package recordtest sets up two peered party instances for tests: the
// published walkthrough's buyer (northstar) and supplier (delta), each with
// its principal's trading mandate, their record engines linked in process
// by a carrier that applies the same byte-level checks as the real ones.
package recordtest

import (
	"github.com/partyd/party/bindings/peer"

	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/demo"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// Link is an in-process carrier between two engines: a delivery.Transport
// that does what a binding does on the wire (the carrier checks on the
// exact bytes, then the receiver), without TLS. The sending engine's real
// outbox drives it. Down simulates an unreachable peer (every attempt
// fails as a network failure would, and the message waits in the
// outbox); DropReplies simulates a reply lost on the way back (the peer
// processed the message, the sender never hears).
type Link struct {
	mu          sync.Mutex
	from        string
	to          *record.Engine
	Down        bool
	DropReplies bool
	tamper      func([][]byte) [][]byte
	tamperReply func(objs, reply [][]byte) [][]byte
	intercept   func(txn string, objs [][]byte) error
	peerCrashed bool
	// Sent counts the messages that reached the peer.
	Sent int
}

// Crash is what a crash harness panics with at a kill point: the engine
// stops where it stands, as a killed process would.
type Crash struct{ Point string }

// PeerCrashed reports whether the peer crashed while receiving over this
// link (and clears the mark).
func (l *Link) PeerCrashed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.peerCrashed
	l.peerCrashed = false
	return c
}

// Deliver implements delivery.Transport. A peer that crashes while it
// receives (a Crash panic in its engine) is, to the sender, a connection
// that broke: an error worth retrying. The messages are handed on as
// bytes (delivery.Raw), for the receiving engine to check.
func (l *Link) Deliver(ctx context.Context, peer, txn string, objs [][]byte) (delivery.Message, error) {
	reply, err := l.deliver(ctx, peer, txn, objs)
	return delivery.Raw(reply), err
}

func (l *Link) deliver(ctx context.Context, peer, txn string, objs [][]byte) (reply [][]byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, ok := p.(Crash)
			if !ok {
				panic(p)
			}
			l.mu.Lock()
			l.peerCrashed = true
			l.mu.Unlock()
			reply, err = nil, fmt.Errorf("%w: %s crashed at %s", delivery.ErrUnavailable, peer, c.Point)
		}
	}()
	l.mu.Lock()
	down, drop, tamper, tamperReply, intercept := l.Down, l.DropReplies, l.tamper, l.tamperReply, l.intercept
	if !down {
		l.Sent++
	}
	l.mu.Unlock()
	if down {
		return nil, fmt.Errorf("%w: link to %s is down", delivery.ErrUnavailable, peer)
	}
	if tamper != nil {
		objs = tamper(objs)
	}
	if intercept != nil {
		if err := intercept(txn, objs); err != nil {
			return nil, err
		}
	}
	if err := delivery.CheckMessage(txn, objs); err != nil {
		return nil, err
	}
	l.mu.Lock()
	to := l.to
	l.mu.Unlock()
	reply, err = to.Receive(ctx, l.from, txn, delivery.Raw(objs))
	if err == nil && drop {
		return nil, fmt.Errorf("%w: the reply from %s was lost", delivery.ErrUnavailable, peer)
	}
	if err == nil && tamperReply != nil {
		reply = tamperReply(objs, reply)
	}
	return reply, err
}

// Probe answers as the peer would a probe (record.Prober): not while the
// link is down.
func (l *Link) Probe(ctx context.Context, peer string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Down {
		return fmt.Errorf("%w: link to %s is down", delivery.ErrUnavailable, peer)
	}
	return nil
}

// Intercept sets a hook that sees every message before the peer does; an
// error it returns is the attempt's outcome and the message never reaches
// the peer (nil removes the hook).
func (l *Link) Intercept(f func(txn string, objs [][]byte) error) {
	l.mu.Lock()
	l.intercept = f
	l.mu.Unlock()
}

// Capture returns the message act makes sd send, built and signed by sd's
// own engine, and has the counterparty refuse it unseen, so that sd's
// engine removes the act the way a refusal does and neither record moves.
func Capture(t testing.TB, sd *Side, act func() (record.Outcome, error)) [][]byte {
	t.Helper()
	var got [][]byte
	sd.Out.Intercept(func(_ string, objs [][]byte) error {
		got = objs
		return reason.Refuse("captured by the test")
	})
	_, err := act()
	sd.Out.Intercept(nil)
	if got == nil {
		t.Fatalf("capture: the act sent nothing (%v)", err)
	}
	return got
}

// SetDown takes the link down or up.
func (l *Link) SetDown(down bool) {
	l.mu.Lock()
	l.Down = down
	l.mu.Unlock()
}

// SetDropReplies makes the link lose (or deliver) every reply.
func (l *Link) SetDropReplies(drop bool) {
	l.mu.Lock()
	l.DropReplies = drop
	l.mu.Unlock()
}

// Tamper sets a hook that rewrites every message the link carries before
// the carrier's checks and the receiver see it (nil removes the hook): a
// message altered in flight, or forged by a sender holding its own key.
func (l *Link) Tamper(f func([][]byte) [][]byte) {
	l.mu.Lock()
	l.tamper = f
	l.mu.Unlock()
}

// TamperReplies sets a hook that rewrites every reply the peer gives, with
// the message it answers (nil removes the hook): a peer that processed
// the message and lies in its answer.
func (l *Link) TamperReplies(f func(objs, reply [][]byte) [][]byte) {
	l.mu.Lock()
	l.tamperReply = f
	l.mu.Unlock()
}

// Side is one organisation of the pair: its instance, record engine,
// surfaces, trading mandate and outgoing link.
type Side struct {
	Node    *orgtest.Node
	Engine  *record.Engine
	Agent   *agent.Surface
	Princ   *principal.Surface
	Mandate string
	Out     *Link
}

// Actor is the engine's Actor for the agent the side's mandate is issued
// to: whom the side's acts are taken for.
func (s *Side) Actor() record.Actor {
	rec, err := s.Node.Org.Store.GetMandate(context.Background(), s.Mandate)
	if err != nil {
		panic(fmt.Sprintf("recordtest: the side's mandate %s: %v", s.Mandate, err))
	}
	a, err := s.Engine.Agent(rec.SubjectAgentID)
	if err != nil {
		panic(fmt.Sprintf("recordtest: the side's agent: %v", err))
	}
	return a
}

// Clock is the clock both instances read; tests move it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now is the clock both instances read.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Terms are the walkthrough's calibration terms at amount EUR.
func Terms(amount string) map[string]any { return demo.Terms(amount) }

// Pair sets up the walkthrough: delta (supplier) and northstar (buyer),
// peered, each with its principal's trading mandate (4000.00 EUR), the
// buyer's acceptances held for its procurement lead.
func Pair(t testing.TB) (buyer, supplier *Side, c *Clock) {
	t.Helper()
	ctx := context.Background()
	c = &Clock{t: time.Now().UTC().Truncate(time.Second)}
	bn := orgtest.New(t, "org_northstar", c.Now, true)
	sn := orgtest.New(t, "org_delta", c.Now, true)
	orgtest.Peer(t, bn, sn)
	// The instances' key records are valid from when init ran; the shared
	// clock starts no earlier, as a real clock would.
	c.mu.Lock()
	c.t = time.Now().UTC().Truncate(time.Second)
	c.mu.Unlock()
	mk := func(n *orgtest.Node, actions []string, counterparty string, rules []map[string]any) *Side {
		princ, err := principal.Open(n.Org)
		if err != nil {
			t.Fatal(err)
		}
		m, err := princ.IssueMandate(ctx, authority.IssueRequest{
			ValidFrom: envelope.Timestamp(c.t.Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.t.Add(30 * 24 * time.Hour)),
			Actions:       actions,
			Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
			SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
			ApprovalRules: rules,
		})
		if err != nil {
			t.Fatal(err)
		}
		return &Side{Node: n, Agent: agent.New(n.Org), Princ: princ, Mandate: m["id"].(string)}
	}
	buyer = mk(bn, []string{"offer.accept", "agreement.sign", "obligation.activated", "acceptance.granted", "acceptance.rejected", "settlement.instruct", "transaction.complete",
		"transaction.cancel", "termination.agree", "obligation.waive", "agreement.amend", "offer.submit", "transaction.expire"}, "org_delta",
		[]map[string]any{{
			"id":                    "r_acceptance",
			"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": "offer.accept"},
			"approver":              map[string]any{"organization_id": "org_northstar", "role": "procurement_lead"},
			"expires_after_seconds": 3600,
		}})
	supplier = mk(sn, []string{"offer.submit", "offer.withdraw", "agreement.sign", "performance.declared", "transaction.complete",
		"transaction.cancel", "termination.agree", "agreement.amend", "transaction.expire"}, "org_northstar", nil)
	buyer.Out = &Link{from: "org_northstar"}
	supplier.Out = &Link{from: "org_delta"}
	for _, s := range []*Side{buyer, supplier} {
		s.Engine = NewEngine(t, s.Node, s.Out)
		s.Node.Mux.Handle(peer.MandatesPath, peer.MandatesHandler(s.Node.Org.Store, s.Node.Org.Peers, nil))
	}
	buyer.Out.to = supplier.Engine
	supplier.Out.to = buyer.Engine
	return buyer, supplier, c
}

// Outbox is the delivery tuning of test engines: quick retries, reckoned
// on the organisation's (the test's) clock.
var Outbox = delivery.OutboxOptions{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, PollInterval: time.Second}

// NewEngine returns a started engine for n, delivering through link, with
// the sandbox rail (rail_test_sandbox, ledger in the state directory).
func NewEngine(t testing.TB, n *orgtest.Node, link *Link, opts ...func(*record.Options)) *record.Engine {
	t.Helper()
	reg, err := rails.Open(n.Dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox"}}, n.Org.Clock)
	if err != nil {
		t.Fatal(err)
	}
	o := record.Options{Transport: link, Mandates: peer.HTTPMandates{Clients: n.Org.Clients}, Outbox: Outbox, Rails: reg}
	for _, f := range opts {
		f(&o)
	}
	e := record.New(record.Of(n.Org), o)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// Reconnect points a link at a new engine (a restarted instance).
func (l *Link) Reconnect(to *record.Engine) {
	l.mu.Lock()
	l.to = to
	l.mu.Unlock()
}

// Flush has both sides' outbox workers attempt every message due now, until
// nothing more is due, and returns how many attempts were made.
func Flush(ctx context.Context, sides ...*Side) int {
	n := 0
	for {
		k := 0
		for _, s := range sides {
			k += s.Engine.Outbox().RunDue(ctx)
		}
		n += k
		if k == 0 {
			return n
		}
	}
}

// Pending returns the side's messages waiting in its outbox.
func (s *Side) Pending(t testing.TB) []store.OutboxMessage {
	t.Helper()
	msgs, err := s.Node.Org.Store.PendingOutbox(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// Offer has the supplier offer the walkthrough terms at amount.
func Offer(t testing.TB, s *Side, amount string) record.Outcome {
	t.Helper()
	out, err := s.Engine.ProposeOffer(context.Background(), s.Actor(), record.OfferInput{
		MandateID: s.Mandate, Counterparty: "org_northstar", Terms: Terms(amount),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(24 * time.Hour)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// approve walks the buyer's approval: the exact act, held, requested,
// approved by the principal.
func Approve(t testing.TB, b *Side, offerID string) string {
	t.Helper()
	ctx := context.Background()
	act, err := b.Engine.AcceptanceAct(ctx, b.Actor(), b.Mandate, offerID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.Agent.VerifyMandate(ctx, agent.VerifyInput{MandateID: b.Mandate, ProposedAction: act})
	if err != nil || v.Decision != authority.RequireApproval {
		t.Fatalf("verify offer.accept: %+v %v", v, err)
	}
	req, err := b.Agent.RequestApproval(ctx, agent.VerifyInput{MandateID: b.Mandate, ProposedAction: act})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := b.Princ.Decide(ctx, req.ApprovalRequestID, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ap["id"].(string)
}

// Form runs formation through committed and returns the transaction id.
func Form(t testing.TB, b, s *Side, amount string) string {
	t.Helper()
	ctx := context.Background()
	o := Offer(t, s, amount)
	if o.Status != "delivered" {
		t.Fatalf("offer: %+v", o)
	}
	apr := Approve(t, b, o.Objects["offer"])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != "committed" || out.Status != "recorded" {
		t.Fatalf("accept: %+v", out)
	}
	// The buyer's countersignature of the supplier's agreement.committed
	// goes back on its own, by the outbox worker: the supplier's copy is
	// committed once it arrives.
	Flush(ctx, b, s)
	return o.TransactionID
}

// sameRecord asserts both instances hold byte-identical events, each with
// the two parties' signatures, verifying under the two agent keys.
func SameRecord(t testing.TB, b, s *Side, txn string, want int) []string {
	t.Helper()
	ctx := context.Background()
	be, _ := b.Node.Org.Store.Events(ctx, txn)
	se, _ := s.Node.Org.Store.Events(ctx, txn)
	if len(be) != want || len(se) != want {
		t.Fatalf("buyer holds %d events, supplier %d, want %d", len(be), len(se), want)
	}
	var types []string
	for i := range be {
		bb, berr := b.Node.Org.Store.GetObject(ctx, txn, be[i].EventID)
		sb, serr := s.Node.Org.Store.GetObject(ctx, txn, se[i].EventID)
		if berr != nil || serr != nil {
			t.Fatalf("event %d: buyer %v, supplier %v", i+1, berr, serr)
		}
		if !bytes.Equal(bb, sb) || be[i].Status != store.EventRecorded || se[i].Status != store.EventRecorded {
			t.Fatalf("event %d differs between the records or is not recorded", i+1)
		}
		obj, _ := canonical.DecodeObject(bb)
		entries, _ := signature.Entries(obj)
		if len(entries) != 2 {
			t.Fatalf("event %d carries %d signatures", i+1, len(entries))
		}
		orgs := map[string]bool{}
		for j, en := range entries {
			kid := en["key_id"].(string)
			// Either party's agent keys, current or rotated out since,
			// as the key records held publish them.
			var k authority.Key
			var err error
			for _, sd := range []*Side{b, s} {
				if k, err = sd.Node.Org.ResolveKey(ctx, kid); err == nil && k.OrganizationID == sd.Node.Org.Config().OrganizationID {
					break
				}
			}
			if err != nil || !strings.HasPrefix(k.HolderID, "agt_") {
				t.Fatalf("event %d signed by %s, not an agent key of the two parties (%v)", i+1, kid, err)
			}
			orgs[k.OrganizationID] = true
			if err := signature.VerifyEntry(obj, j, k.Public); err != nil {
				t.Fatal(err)
			}
		}
		if len(orgs) != 2 {
			t.Fatalf("event %d is not signed by both parties", i+1)
		}
		types = append(types, be[i].EventType)
	}
	return types
}

// Complete takes a committed transaction of the walkthrough to completed:
// the buyer issues the supplier's obligation, the supplier asserts
// performance of all 20 with a certificate, the buyer accepts it and pays
// on the sandbox rail, and the supplier closes the transaction.
func Complete(t testing.TB, b, s *Side, txn string) {
	t.Helper()
	ctx := context.Background()
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("issue: %+v %v", out, err)
	}
	obl := out.Objects["obligation"]
	claim := "calibration certificates, 20 transmitters"
	if out, err = s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, AssertedQuantity: "20",
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: claim, ArtifactHash: canonical.SHA256Hex([]byte(claim))}}}); err != nil || out.State != "acceptance_pending" {
		t.Fatalf("assert: %+v %v", out, err)
	}
	if out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	if out, err = b.Engine.InstructSettlement(ctx, b.Actor(), record.InstructInput{MandateID: b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox", IdempotencyKey: "pay-" + txn}); err != nil {
		t.Fatalf("instruct: %+v %v", out, err)
	}
	if out, err = s.Engine.CompleteTransaction(ctx, s.Actor(), record.CompleteInput{MandateID: s.Mandate, TransactionID: txn}); err != nil || out.State != "completed" {
		t.Fatalf("complete: %+v %v", out, err)
	}
}

// Disputed is what Dispute left on a transaction.
type Disputed struct {
	TransactionID, ObligationID string
	// Rejection is the buyer's response rejecting the assertion.
	Rejection string
	// ActDispute is the supplier's dispute over the buyer's rejection,
	// Determination the buyer's presumptive determination of it, and
	// StateDispute the supplier's dispute over the obligation's state,
	// which opened the exception.
	ActDispute, Determination, StateDispute string
}

// Dispute takes a committed transaction of the walkthrough to
// exception_open the way a wrongful rejection does: the buyer issues the
// obligation, the supplier asserts all 20 with a certificate and the buyer
// rejects it; under mandates listing the dispute acts, the supplier
// disputes the rejection, the buyer concedes with a presumptive
// determination, and the supplier disputes the obligation's state, which
// opens the exception.
func Dispute(t testing.TB, b, s *Side, c *Clock, txn string) Disputed {
	t.Helper()
	ctx := context.Background()
	d := Disputed{TransactionID: txn}
	mandate := func(sd *Side, counterparty string) string {
		m, err := sd.Princ.IssueMandate(ctx, authority.IssueRequest{
			ValidFrom: envelope.Timestamp(c.Now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.Now().Add(30 * 24 * time.Hour)),
			Actions: []string{"obligation.activated", "performance.declared", "acceptance.rejected", "dispute.raise", "determination.issue",
				"exception.open", "remediation.accept", "exception.resolve", "transaction.terminate"},
			Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
			SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return m["id"].(string)
	}
	bm, sm := mandate(b, s.Node.Org.Config().OrganizationID), mandate(s, b.Node.Org.Config().OrganizationID)
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: bm, TransactionID: txn})
	if err != nil {
		t.Fatalf("issue: %+v %v", out, err)
	}
	d.ObligationID = out.Objects["obligation"]
	claim := "calibration certificates, 20 transmitters"
	out, err = s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: sm, ObligationID: d.ObligationID, AssertedQuantity: "20",
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: claim, ArtifactHash: canonical.SHA256Hex([]byte(claim))}}})
	if err != nil {
		t.Fatalf("assert: %+v %v", out, err)
	}
	raws, err := s.Node.Org.Store.TransactionObjectsOfType(ctx, txn, "evidence")
	if err != nil || len(raws) != 1 {
		t.Fatalf("the supplier holds %d evidence objects: %v", len(raws), err)
	}
	eo, err := canonical.DecodeObject(raws[0])
	if err != nil {
		t.Fatal(err)
	}
	evd := eo["id"].(string)
	if out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: bm, ObligationID: d.ObligationID, ResponseType: "reject", ReasonCode: "quantity_short"}); err != nil {
		t.Fatalf("reject: %+v %v", out, err)
	}
	d.Rejection = out.Objects["obligation_response"]
	if out, err = s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: sm, TransactionID: txn, SubjectType: "act", SubjectID: d.Rejection,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: []string{evd}, Description: "The certificate covers all twenty."}); err != nil {
		t.Fatalf("raise: %+v %v", out, err)
	}
	d.ActDispute = out.Objects["dispute"]
	if out, err = b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: bm, DisputeID: d.ActDispute, Effect: "presumptive",
		Finding: "The rejection is not supported by the certificate."}); err != nil {
		t.Fatalf("determine: %+v %v", out, err)
	}
	d.Determination = out.Objects["determination"]
	if out, err = s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: sm, TransactionID: txn, SubjectType: "obligation_state", SubjectID: d.ObligationID,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: []string{evd}}); err != nil || out.State != "exception_open" {
		t.Fatalf("raise over the obligation's state: %+v %v", out, err)
	}
	d.StateDispute = out.Objects["dispute"]
	return d
}
