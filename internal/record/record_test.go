package record_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// link is an in-process carrier between two engines: what delivery does
// on the wire (the carrier checks on the exact bytes, then the receiver),
// without TLS. down simulates an unreachable peer: messages queue.
type link struct {
	mu     sync.Mutex
	from   string
	to     *record.Engine
	down   bool
	queue  []queued
	tamper func([][]byte) [][]byte
}

type queued struct {
	txn  string
	objs [][]byte
}

func (l *link) Send(ctx context.Context, peer, txn string, objs [][]byte) ([][]byte, error) {
	l.mu.Lock()
	if l.down {
		l.queue = append(l.queue, queued{txn, objs})
		l.mu.Unlock()
		return nil, record.ErrQueued
	}
	tamper := l.tamper
	l.mu.Unlock()
	if tamper != nil {
		objs = tamper(objs)
	}
	if err := delivery.CheckMessage(txn, objs); err != nil {
		return nil, err
	}
	return l.to.Receive(ctx, l.from, txn, objs)
}

type side struct {
	node    *orgtest.Node
	engine  *record.Engine
	agent   *agent.Surface
	princ   *principal.Surface
	mandate string
	out     *link
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func terms(amount string) map[string]any {
	return map[string]any{
		"profile": "a202-profile/calibration-service/0.1",
		"core": map[string]any{
			"description": "Calibration and digital certificates for 20 pressure transmitters",
			"quantity":    "20", "unit_code": "H87", "unit_name": "piece",
			"total": map[string]any{"currency": "EUR", "amount": amount},
		},
		"profile_terms": map[string]any{
			"completion": map[string]any{"business_days_after_collection": 8, "business_calendar": "DE"},
			"payment":    map[string]any{"prepayment_percent": "25", "balance_trigger": "buyer_acceptance"},
			"acceptance": map[string]any{"certificate_required": true, "machine_readable_result_required": true, "qualification_standard": "ISO/IEC 17025:2017"},
			"rework":     map[string]any{"included_attempts": 1},
		},
	}
}

// pair sets up the walkthrough: delta (supplier) and northstar (buyer),
// peered, each with its principal's trading mandate (4000.00 EUR), the
// buyer's acceptances held for its procurement lead.
func pair(t *testing.T) (buyer, supplier *side, c *clock) {
	t.Helper()
	ctx := context.Background()
	c = &clock{t: time.Now().UTC().Truncate(time.Second)}
	bn := orgtest.New(t, "org_northstar", c.now, true)
	sn := orgtest.New(t, "org_delta", c.now, true)
	orgtest.Peer(t, bn, sn)
	mk := func(n *orgtest.Node, actions []string, counterparty string, rules []map[string]any) *side {
		m, err := principal.New(n.Org).IssueMandate(ctx, authority.IssueRequest{
			ValidFrom: envelope.Timestamp(c.t.Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.t.Add(30 * 24 * time.Hour)),
			Actions:       actions,
			Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
			SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
			ApprovalRules: rules,
		})
		if err != nil {
			t.Fatal(err)
		}
		return &side{node: n, agent: agent.New(n.Org), princ: principal.New(n.Org), mandate: m["id"].(string)}
	}
	buyer = mk(bn, []string{"offer.accept", "agreement.sign", "obligation.activated", "acceptance.granted", "acceptance.rejected"}, "org_delta",
		[]map[string]any{{
			"id":                    "r_acceptance",
			"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": "offer.accept"},
			"approver":              map[string]any{"organization_id": "org_northstar", "role": "procurement_lead"},
			"expires_after_seconds": 3600,
		}})
	supplier = mk(sn, []string{"offer.submit", "agreement.sign", "performance.declared"}, "org_northstar", nil)
	for _, s := range []*side{buyer, supplier} {
		s.engine = record.New(s.node.Org, record.Options{Mandates: record.HTTPMandates{Clients: s.node.Org.Clients}})
		s.node.Mux.Handle(record.MandatesPath, record.MandatesHandler(s.node.Org.Store, s.node.Org.Peers, nil))
	}
	buyer.out = &link{from: "org_northstar", to: supplier.engine}
	supplier.out = &link{from: "org_delta", to: buyer.engine}
	buyer.engine.SetSender(buyer.out)
	supplier.engine.SetSender(supplier.out)
	return buyer, supplier, c
}

func offer(t *testing.T, s *side, amount string) record.Outcome {
	t.Helper()
	out, err := s.engine.ProposeOffer(context.Background(), record.OfferInput{
		MandateID: s.mandate, Counterparty: "org_northstar", Terms: terms(amount),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(24 * time.Hour)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// approve walks the buyer's approval: the exact act, held, requested,
// approved by the principal.
func approve(t *testing.T, b *side, offerID string) string {
	t.Helper()
	ctx := context.Background()
	act, err := b.engine.AcceptanceAct(ctx, b.mandate, offerID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.agent.VerifyMandate(ctx, agent.VerifyInput{MandateID: b.mandate, ProposedAction: act})
	if err != nil || v.Decision != authority.RequireApproval {
		t.Fatalf("verify offer.accept: %+v %v", v, err)
	}
	req, err := b.agent.RequestApproval(ctx, agent.VerifyInput{MandateID: b.mandate, ProposedAction: act})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := b.princ.Decide(ctx, req.ApprovalRequestID, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ap["id"].(string)
}

func form(t *testing.T, b, s *side, amount string) string {
	t.Helper()
	ctx := context.Background()
	o := offer(t, s, amount)
	if o.Status != "delivered" {
		t.Fatalf("offer: %+v", o)
	}
	apr := approve(t, b, o.Objects["offer"])
	out, err := b.engine.AcceptOffer(ctx, record.AcceptInput{MandateID: b.mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != "committed" || out.Status != "recorded" {
		t.Fatalf("accept: %+v", out)
	}
	return o.TransactionID
}

// sameRecord asserts both instances hold byte-identical events, each with
// the two parties' signatures, verifying under the two agent keys.
func sameRecord(t *testing.T, b, s *side, txn string, want int) []string {
	t.Helper()
	ctx := context.Background()
	be, _ := b.node.Org.Store.Events(ctx, txn)
	se, _ := s.node.Org.Store.Events(ctx, txn)
	if len(be) != want || len(se) != want {
		t.Fatalf("buyer holds %d events, supplier %d, want %d", len(be), len(se), want)
	}
	var types []string
	for i := range be {
		bb, _ := b.node.Org.Store.GetObject(ctx, be[i].EventID)
		sb, _ := s.node.Org.Store.GetObject(ctx, se[i].EventID)
		if !bytes.Equal(bb, sb) || be[i].Status != store.EventRecorded || se[i].Status != store.EventRecorded {
			t.Fatalf("event %d differs between the records or is not recorded", i+1)
		}
		obj, _ := canonical.DecodeObject(bb)
		entries, _ := signature.Entries(obj)
		if len(entries) != 2 {
			t.Fatalf("event %d carries %d signatures", i+1, len(entries))
		}
		keys := map[string]bool{}
		for j, en := range entries {
			kid := en["key_id"].(string)
			var pub any
			switch kid {
			case b.node.Org.Config().AgentKeyID:
				pub = b.node.Org.In.AgentKey().Public()
			case s.node.Org.Config().AgentKeyID:
				pub = s.node.Org.In.AgentKey().Public()
			default:
				t.Fatalf("event %d signed by %s, not an agent key of the two parties", i+1, kid)
			}
			keys[kid] = true
			if err := signature.VerifyEntry(obj, j, pub); err != nil {
				t.Fatal(err)
			}
		}
		if len(keys) != 2 {
			t.Fatalf("event %d is not signed by both parties", i+1)
		}
		types = append(types, be[i].EventType)
	}
	return types
}

func TestFormationThroughCommit(t *testing.T) {
	b, s, _ := pair(t)
	txn := form(t, b, s, "3200.00")
	types := sameRecord(t, b, s, txn, 2)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed"}) {
		t.Fatalf("events %v", types)
	}
	// The acceptance signs the exact offer hash.
	ctx := context.Background()
	for _, sd := range []*side{b, s} {
		objs, _ := sd.node.Org.Store.TransactionObjects(ctx, txn)
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
	for _, sd := range []*side{b, s} {
		tx, _ := sd.node.Org.Store.GetTransaction(ctx, txn)
		if tx.State != "committed" {
			t.Fatalf("%s is %s", sd.node.Org.Config().OrganizationID, tx.State)
		}
	}
}

func TestWalkthroughToSettlementPending(t *testing.T) {
	ctx := context.Background()
	b, s, _ := pair(t)
	txn := form(t, b, s, "3200.00")
	out, err := b.engine.IssueObligation(ctx, record.ObligationInput{MandateID: b.mandate, TransactionID: txn})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("issue: %+v %v", out, err)
	}
	obl := out.Objects["obligation"]
	out, err = s.engine.AssertPerformance(ctx, record.AssertInput{MandateID: s.mandate, ObligationID: obl, Evidence: []record.EvidenceInput{{
		EvidenceType: "third_party_certificate", Claim: "Calibration certificates for 20 transmitters",
		ArtifactHash: canonical.SHA256Hex([]byte("certificate bundle")),
	}}})
	if err != nil || out.State != "acceptance_pending" {
		t.Fatalf("assert: %+v %v", out, err)
	}
	out, err = b.engine.Respond(ctx, record.RespondInput{MandateID: b.mandate, ObligationID: obl, ResponseType: "accept"})
	if err != nil || out.State != "settlement_pending" {
		t.Fatalf("respond: %+v %v", out, err)
	}
	types := sameRecord(t, b, s, txn, 5)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted"}) {
		t.Fatalf("events %v", types)
	}
}

func TestRefusalsLeaveNoTrace(t *testing.T) {
	ctx := context.Background()
	b, s, c := pair(t)
	// Above the supplier's own limit: denied locally, nothing sent.
	if _, err := s.engine.ProposeOffer(ctx, record.OfferInput{MandateID: s.mandate, Counterparty: "org_northstar", Terms: terms("4800.00"),
		ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour))}); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("offer over the limit: %v", err)
	}
	if txs, _ := b.node.Org.Store.Transactions(ctx); len(txs) != 0 {
		t.Fatal("a denied offer reached the buyer")
	}
	o := offer(t, s, "3200.00")
	// Without the approval the acceptance is held and nothing is recorded.
	if _, err := b.engine.AcceptOffer(ctx, record.AcceptInput{MandateID: b.mandate, OfferID: o.Objects["offer"]}); !hasCode(err, reason.ApprovalRequired) {
		t.Fatalf("accept without approval: %v", err)
	}
	for _, sd := range []*side{b, s} {
		if evs, _ := sd.node.Org.Store.Events(ctx, o.TransactionID); len(evs) != 0 {
			t.Fatal("a held acceptance left an event")
		}
	}
	// An expired offer is refused.
	apr := approve(t, b, o.Objects["offer"])
	c.add(25 * time.Hour)
	if _, err := b.engine.AcceptOffer(ctx, record.AcceptInput{MandateID: b.mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); !hasCode(err, reason.OfferExpired) {
		t.Fatalf("accept after expiry: %v", err)
	}
}

func TestSupplierRevocationRefusesNextAct(t *testing.T) {
	ctx := context.Background()
	b, s, c := pair(t)
	txn := form(t, b, s, "3200.00")
	out, err := b.engine.IssueObligation(ctx, record.ObligationInput{MandateID: b.mandate, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.princ.Revoke(ctx, s.mandate, "test"); err != nil {
		t.Fatal(err)
	}
	c.add(61 * time.Second)
	_, err = s.engine.AssertPerformance(ctx, record.AssertInput{MandateID: s.mandate, ObligationID: out.Objects["obligation"], Evidence: []record.EvidenceInput{{
		EvidenceType: "third_party_certificate", Claim: "certs", ArtifactHash: canonical.SHA256Hex([]byte("x")),
	}}})
	if !hasCode(err, reason.MandateInactive) {
		t.Fatalf("act under a revoked mandate: %v", err)
	}
	for _, sd := range []*side{b, s} {
		if evs, _ := sd.node.Org.Store.Events(ctx, txn); len(evs) != 3 {
			t.Fatalf("%d events after a refused act, want 3", len(evs))
		}
	}
}

func TestPendingUntilCountersignedThenConverges(t *testing.T) {
	ctx := context.Background()
	b, s, _ := pair(t)
	o := offer(t, s, "3200.00")
	apr := approve(t, b, o.Objects["offer"])
	b.out.down = true
	out, err := b.engine.AcceptOffer(ctx, record.AcceptInput{MandateID: b.mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != "pending" || out.State != "draft" {
		t.Fatalf("accept while the supplier is unreachable: %+v %v", out, err)
	}
	// Deliver the queued message twice (a retry after a lost reply): the
	// supplier answers the same both times, the buyer records once.
	b.out.down = false
	q := b.out.queue[0]
	for i := 0; i < 2; i++ {
		reply, err := s.engine.Receive(ctx, "org_northstar", q.txn, q.objs)
		if err != nil {
			t.Fatal(err)
		}
		b.engine.HandleReply(ctx, "org_delta", q.txn, q.objs, reply)
	}
	sameRecord(t, b, s, o.TransactionID, 2)
	tx, _ := b.node.Org.Store.GetTransaction(ctx, o.TransactionID)
	if tx.State != "committed" {
		t.Fatalf("buyer is %s after the late countersignature", tx.State)
	}
}

func TestForgedEventsRefused(t *testing.T) {
	ctx := context.Background()
	b, s, _ := pair(t)
	txn := form(t, b, s, "3200.00")
	before, _ := s.node.Org.Store.Events(ctx, txn)
	// An event signed by a key the supplier does not trust.
	evs, _ := b.node.Org.Store.Events(ctx, txn)
	raw, _ := b.node.Org.Store.GetObject(ctx, evs[1].EventID)
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
	if _, err := s.engine.Receive(ctx, "org_northstar", txn, [][]byte{fb}); !hasCode(err, reason.EvidenceSignatureInvalid) {
		t.Fatalf("untrusted key: %v", err)
	}
	// A transition the rules do not allow, signed with the real key.
	forged["signatures"] = []any{}
	bs, _ := b.node.Org.AgentSigner()
	signature.Sign(forged, bs, "event_append", time.Now())
	fb, _ = canonical.Marshal(forged)
	if _, err := s.engine.Receive(ctx, "org_northstar", txn, [][]byte{fb}); !hasCode(err, reason.StateTransitionDenied) {
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
	_, err := s.engine.Receive(ctx, "org_northstar", txn, [][]byte{fb})
	if !errors.Is(err, delivery.ErrConflict) || !hasCode(err, reason.EvidenceChainGap) {
		t.Fatalf("fork: %v", err)
	}
	forks, _ := s.node.Org.Store.Forks(ctx, txn)
	if len(forks) != 1 {
		t.Fatalf("%d forks kept", len(forks))
	}
	after, _ := s.node.Org.Store.Events(ctx, txn)
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
