package object_test

import (
	"encoding/json"
	"testing"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
)

func over(t protocol.ObjectType, payload map[string]any) *object.View {
	return object.Over(nil, map[string]any{"object_type": string(t), "payload": payload})
}

// TestParseEventRefusesOtherObjects: bytes read as an event must hold one.
func TestParseEventRefusesOtherObjects(t *testing.T) {
	t.Parallel()
	if _, err := object.ParseEvent([]byte(`{"id":"obl_1","object_type":"obligation","payload":{}}`)); err == nil {
		t.Error("an obligation parsed as an event")
	}
	ev, err := object.ParseEvent([]byte(`{"id":"evt_1","object_type":"transaction_event","payload":{"sequence":2}}`))
	if err != nil || ev.Seq() != 2 {
		t.Errorf("an event: %v, %v", ev, err)
	}
}

// TestTypedViewsOnlyOfTheirType: a typed view is made only from a view of
// its type; anything else, or nothing, is nil.
func TestTypedViewsOnlyOfTheirType(t *testing.T) {
	t.Parallel()
	offer := over(protocol.Offer, nil)
	obl := over(protocol.Obligation, nil)
	if object.AsOffer(offer) == nil || object.AsObligation(obl) == nil {
		t.Fatal("a view of its own type was refused")
	}
	for name, got := range map[string]bool{
		"offer as obligation":      object.AsObligation(offer) != nil,
		"obligation as offer":      object.AsOffer(obl) != nil,
		"offer as agreement":       object.AsAgreement(offer) != nil,
		"obligation as response":   object.AsResponse(obl) != nil,
		"obligation as settlement": object.AsSettlement(obl) != nil,
		"obligation as event":      object.AsEvent(obl) != nil,
		"nil as offer":             object.AsOffer(nil) != nil,
	} {
		if got {
			t.Errorf("%s: made a typed view", name)
		}
	}
}

// TestTypedViewsReadTheirMembers: each accessor reads the member it is
// named after.
func TestTypedViewsReadTheirMembers(t *testing.T) {
	t.Parallel()
	party := func(org, agent string) map[string]any {
		return map[string]any{"organization_id": org, "agent_id": agent}
	}
	o := object.AsOffer(over(protocol.Offer, map[string]any{
		"offeror": party("org_a", "agt_a"), "offeree": party("org_b", "agt_b"), "session_id": "ses_1", "supersedes_offer_id": "off_0",
	}))
	a := object.AsAgreement(object.Over(nil, map[string]any{"object_type": "agreement", "previous_version_id": "agr_0",
		"payload": map[string]any{"buyer": party("org_b", ""), "supplier": party("org_a", ""), "accepted_offer_id": "off_1", "terms_hash": "h"}}))
	ob := object.AsObligation(over(protocol.Obligation, map[string]any{
		"agreement_id": "agr_1", "obligor": party("org_a", "agt_a"), "obligee": party("org_b", "agt_b"), "quantity": "3", "unit_code": "EA",
	}))
	r := object.AsResponse(over(protocol.ObligationResponse, map[string]any{
		"obligation_id": "obl_1", "response_type": "accept", "assertion_id": "prf_1", "accepted_quantity": "2",
	}))
	s := object.AsSettlement(over(protocol.Settlement, map[string]any{
		"obligation_id": "obl_1", "agreement_id": "agr_1", "payer_organization_id": "org_b", "payee_organization_id": "org_a",
		"rail": "mock", "idempotency_key": "idem-12345678",
	}))
	for _, c := range []struct{ got, want string }{
		{o.Offeror(), "org_a"}, {o.Offeree(), "org_b"}, {o.OffereeAgent(), "agt_b"},
		{o.SessionID(), "ses_1"}, {o.Supersedes(), "off_0"},
		{a.AcceptedOfferID(), "off_1"},
		{ob.AgreementID(), "agr_1"}, {ob.Obligor(), "org_a"}, {ob.ObligorAgent(), "agt_a"}, {ob.Obligee(), "org_b"},
		{ob.ObligeeAgent(), "agt_b"}, {ob.Quantity(), "3"}, {ob.UnitCode(), "EA"},
		{r.ObligationID(), "obl_1"}, {string(r.ResponseType()), "accept"},
		{s.ObligationID(), "obl_1"}, {s.AgreementID(), "agr_1"}, {s.Payer(), "org_b"}, {s.Payee(), "org_a"},
		{s.Rail(), "mock"}, {s.IdempotencyKey(), "idem-12345678"},
	} {
		if c.got != c.want {
			t.Errorf("read %q, want %q", c.got, c.want)
		}
	}
	ev := object.AsEvent(over(protocol.TransactionEvent, map[string]any{
		"sequence": json.Number("3"), "event_type": "agreement.direct", "from_state": "draft", "to_state": "agreement_pending",
		"previous_event_hash": "sha256:01", "data": map[string]any{"agreement_id": "agr_1"},
	}))
	if ev.Seq() != 3 {
		t.Errorf("sequence read %d, want 3", ev.Seq())
	}
	for _, c := range []struct{ got, want string }{
		{string(ev.EventType()), "agreement.direct"}, {string(ev.From()), "draft"}, {string(ev.To()), "agreement_pending"},
		{ev.Previous(), "sha256:01"}, {ev.Data("agreement_id"), "agr_1"}, {ev.Data("absent"), ""},
	} {
		if c.got != c.want {
			t.Errorf("event read %q, want %q", c.got, c.want)
		}
	}
	// The first offer of a session supersedes none: a null member reads "".
	if got := object.AsOffer(over(protocol.Offer, map[string]any{"supersedes_offer_id": nil})).Supersedes(); got != "" {
		t.Errorf("supersedes of a first offer: %q", got)
	}
}
