package record_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
)

// Several agents per instance (issue 16 item 3): the buyer's procurement
// team runs a second agent under a child mandate of its lead agent's,
// narrowed on every axis; it sees and acts only under its own mandates,
// and the supplier's instance resolves the chain and refuses a child that
// widens its parent.

const buyerTwo = "agt_northstar_buyer_two"

// delegated gives the buyer a second agent, a parent mandate for its
// primary agent that allows delegation, and a narrower child of it for
// the second agent; it returns the parent and the child.
func delegated(t *testing.T, b *recordtest.Side) (parent, child string) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Princ.AddAgent(ctx, buyerTwo); err != nil {
		t.Fatal(err)
	}
	now := b.Node.Org.Clock()
	scope := map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{"org_delta"}}
	p, err := b.Princ.IssueMandate(ctx, authority.IssueRequest{
		ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(30 * 24 * time.Hour)),
		Actions: []string{"offer.accept", "agreement.sign", "obligation.activated"}, Scope: scope,
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		Delegation:    &authority.Delegation{Allowed: true, MaximumDepth: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent = p["id"].(string)
	c, err := b.Princ.IssueMandate(ctx, authority.IssueRequest{
		Subject:   authority.Subject{AgentID: buyerTwo},
		ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(7 * 24 * time.Hour)),
		Actions: []string{"offer.accept", "agreement.sign"}, Scope: scope,
		SpendingLimit:   &authority.SpendingLimit{Currency: "EUR", Amount: "3500.00"},
		ParentMandateID: &parent,
	})
	if err != nil {
		t.Fatal(err)
	}
	return parent, c["id"].(string)
}

// offerTo has the supplier offer to the buyer's agent agentID.
func offerTo(t *testing.T, s *recordtest.Side, c *recordtest.Clock, agentID, amount string) record.Outcome {
	t.Helper()
	out, err := s.Engine.ProposeOffer(context.Background(), s.Actor(), record.OfferInput{
		MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms(amount), OffereeAgentID: agentID,
		ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDelegatedAgentActsAcrossInstances: the second agent sees only its
// own mandate, accepts the offer addressed to it under its child mandate,
// and the supplier's instance, fetching the child and its parent, resolves
// the chain and countersigns; both records verify clean. The lead agent
// cannot act under the second agent's mandate, nor the second under the
// lead's; an offer addressed to one agent is not accepted by the other.
func TestDelegatedAgentActsAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	parent, child := delegated(t, b)

	two := agent.NewFor(b.Node.Org, buyerTwo)
	who, err := two.Whoami(ctx)
	if err != nil || who.AgentID != buyerTwo || len(who.Mandates) != 1 || who.Mandates[0].MandateID != child || who.Mandates[0].ParentID != parent {
		t.Fatalf("the second agent's whoami: %+v %v", who, err)
	}
	if _, err := two.Mandate(ctx, parent); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("the second agent reads its lead's mandate: %v", err)
	}
	lead, err := agent.New(b.Node.Org).Whoami(ctx)
	if err != nil || len(lead.Mandates) != 2 {
		t.Fatalf("the lead agent's whoami: %+v %v", lead, err)
	}

	o := offerTo(t, s, c, buyerTwo, "3200.00")
	asTwo := actorFor(t, b, buyerTwo)
	asLead := actorFor(t, b, b.Node.Org.Config().AgentID)
	if _, err := b.Engine.AcceptOffer(ctx, asLead, record.AcceptInput{MandateID: child, OfferID: o.Objects["offer"]}); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("the lead agent acting under the second agent's mandate: %v", err)
	}
	if _, err := b.Engine.AcceptOffer(ctx, asLead, record.AcceptInput{MandateID: parent, OfferID: o.Objects["offer"]}); !hasCode(err, reason.StreamMismatch) {
		t.Fatalf("the lead agent accepting an offer addressed to the second: %v", err)
	}
	out, err := b.Engine.AcceptOffer(ctx, asTwo, record.AcceptInput{MandateID: child, OfferID: o.Objects["offer"]})
	if err != nil || out.State != protocol.Committed {
		v, _ := b.Engine.Transaction(ctx, o.TransactionID)
		t.Fatalf("the second agent's acceptance: %+v %v; %+v", out, err, v.Notice)
	}
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
	for _, sd := range []*recordtest.Side{b, s} {
		buyer, _ := agreementParties(t, sd, o.TransactionID)
		if buyer != "org_northstar" {
			t.Fatalf("agreement names buyer %s", buyer)
		}
		verifiesClean(t, sd, o.TransactionID)
	}
	// The supplier holds the chain it resolved.
	for _, id := range []string{child, parent} {
		if rec, err := s.Node.Org.Store.GetMandate(ctx, id); err != nil || rec.Origin != "org_northstar" {
			t.Fatalf("the supplier does not hold %s: %v", id, err)
		}
	}
	// Above the child's narrower limit the second agent is denied though
	// its parent would allow it.
	o2 := offerTo(t, s, c, buyerTwo, "3800.00")
	if _, err := b.Engine.AcceptOffer(ctx, asTwo, record.AcceptInput{MandateID: child, OfferID: o2.Objects["offer"]}); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("an acceptance above the child's limit: %v", err)
	}
}

// actorFor is the engine's Actor for agentID, one of sd's agents.
func actorFor(t *testing.T, sd *recordtest.Side, agentID string) record.Actor {
	t.Helper()
	a, err := sd.Engine.Agent(agentID)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// principalSigner reads the buyer's principal key from its state
// directory, as a test that forges a mandate the principal's surface would
// refuse to issue must.
func principalSigner(t *testing.T, sd *recordtest.Side) signature.Signer {
	t.Helper()
	k, err := keys.ReadPrivateFile(filepath.Join(sd.Node.Dir, filepath.FromSlash(instance.PrincipalKeyFile)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewSigner(sd.Node.Org.Config().PrincipalKeyID, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChildWideningRefusedByCountersigner: the buyer's principal key signs
// a child mandate that widens its parent (a limit above the parent's),
// which the principal's surface refuses to issue; an acceptance by the
// second agent under it, built by hand and signed with the second agent's
// real key, is refused by the supplier's countersigner with
// A202-MANDATE-DELEGATION-WIDENING, and neither record moves.
func TestChildWideningRefusedByCountersigner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	parent, child := delegated(t, b)
	o := offerTo(t, s, c, buyerTwo, "3200.00")
	asTwo := actorFor(t, b, buyerTwo)
	msg := recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.AcceptOffer(ctx, asTwo, record.AcceptInput{MandateID: child, OfferID: o.Objects["offer"]})
	})

	// The widened child, as the principal's surface would refuse to sign it.
	now := b.Node.Org.Clock()
	kid, _ := b.Node.Org.Config().KeyOf(buyerTwo)
	req := authority.IssueRequest{
		Issuer:                    authority.Issuer{OrganizationID: "org_northstar", PrincipalID: b.Node.Org.Config().PrincipalID, KeyID: b.Node.Org.Config().PrincipalKeyID},
		Subject:                   authority.Subject{AgentID: buyerTwo, KeyID: kid},
		RepresentedOrganizationID: "org_northstar",
		ValidFrom:                 envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(7 * 24 * time.Hour)),
		Actions:         []string{"offer.accept", "agreement.sign"},
		Scope:           map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{"org_delta"}},
		SpendingLimit:   &authority.SpendingLimit{Currency: "EUR", Amount: "9000.00"},
		ParentMandateID: &parent,
	}
	if _, err := b.Princ.IssueMandate(ctx, req); !hasCode(err, reason.MandateDelegationWidening) {
		t.Fatalf("the principal's surface issued a widening child: %v", err)
	}
	id, _ := envelope.NewID("mnd")
	req.MandateID = id
	req.StatusEndpoint = "https://" + b.Node.Org.Config().PeerAddr + "/v1/mandates/" + id + "/status"
	wide, err := req.Draft()
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.SignMandate(wide, principalSigner(t, b), now); err != nil {
		t.Fatal(err)
	}
	raw, err := canonical.Marshal(wide)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Node.Org.Store.PutMandate(ctx, raw, "local"); err != nil {
		t.Fatal(err)
	}
	m, err := canonical.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	two, err := b.Node.Org.SignerFor(buyerTwo)
	if err != nil {
		t.Fatal(err)
	}
	forged := reseal(t, two, msg, func(objs []map[string]any) []map[string]any {
		for _, o := range objs {
			o["created_by"].(map[string]any)["mandate_id"] = id
		}
		pol := leadDecision(t, objs)
		payloadOf(pol)["mandate_ids"] = []any{id, parent}
		offer, _ := b.Node.Org.Store.GetObject(ctx, o.TransactionID, o.Objects["offer"])
		ov, _ := canonical.DecodeObject(offer)
		doc := authority.Document("offer.accept", o.TransactionID, "org_delta", payloadOf(ov)["terms"].(map[string]any), nil, m)
		h, err := authority.ActionHash(doc)
		if err != nil {
			t.Fatal(err)
		}
		payloadOf(pol)["action_hash"] = h
		payloadOf(event(t, objs))["action_hash"] = h
		return objs
	})
	refusedWith(t, "an acceptance under a child that widens its parent", b, s, o.TransactionID, reason.MandateDelegationWidening, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", o.TransactionID, delivery.Raw(forged))
		return err
	})
}

// TestActsNeedAnActor: an act is taken for an agent the engine handed out
// (Engine.Agent), never for nobody. The zero Actor and an agent this
// instance does not have are refused with A202-POLICY-DENIED, and nothing
// is recorded on either side: the check cannot be skipped by a caller that
// forgets to name the agent.
func TestActsNeedAnActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	if _, err := b.Engine.Agent("agt_stranger"); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("an Actor for an agent the instance does not have: %v", err)
	}
	if _, err := b.Engine.Agent(""); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("an Actor for no agent: %v", err)
	}
	o := offerTo(t, s, c, b.Node.Org.Config().AgentID, "3200.00")
	refusedWith(t, "an acceptance for nobody", b, s, o.TransactionID, reason.PolicyDenied, func() error {
		_, err := b.Engine.AcceptOffer(ctx, record.Actor{}, record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"]})
		return err
	})
	if _, err := b.Engine.Inbox(ctx, record.Actor{}, "", 0); !hasCode(err, reason.PolicyDenied) {
		t.Fatalf("the inbox of nobody: %v", err)
	}
}
