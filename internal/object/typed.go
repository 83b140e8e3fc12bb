package object

import (
	"fmt"

	"github.com/partyd/party/internal/protocol"
)

// Typed views. Each is an object of one type with the members party reads
// as methods, named after the canonical model's members (canonical model
// §5 offer, §6 agreement; obligation §3; settlement §4). Each embeds the
// *View it was made from: the same bytes, parsed once, with View's own
// accessors still there. A typed view is made only by its As function,
// which refuses a view of another type, so code that holds one knows what
// it holds, and a member misspelt is a compile error rather than an empty
// string. Input not yet checked (the gate, the verifier's bundles) keeps
// map-level access.

// Offer is an offer (canonical model §5).
type Offer struct{ *View }

// AsOffer returns v as an offer, or nil when v is nil or not an offer.
func AsOffer(v *View) *Offer {
	if !is(v, protocol.Offer) {
		return nil
	}
	return &Offer{v}
}

// Offeror is the offering organisation.
func (o *Offer) Offeror() string { return o.PartyOrg("offeror") }

// Offeree is the organisation the offer is made to.
func (o *Offer) Offeree() string { return o.PartyOrg("offeree") }

// OffereeAgent is the agent the offer is addressed to.
func (o *Offer) OffereeAgent() string { return str(o.PSub("offeree")["agent_id"]) }

// SessionID is the negotiation session the offer belongs to.
func (o *Offer) SessionID() string { return o.P("session_id") }

// Supersedes is the offer this one supersedes; "" for the first.
func (o *Offer) Supersedes() string { return o.P("supersedes_offer_id") }

// Agreement is a version of an agreement (canonical model §6).
type Agreement struct{ *View }

// AsAgreement returns v as an agreement, or nil when v is nil or not one.
func AsAgreement(v *View) *Agreement {
	if !is(v, protocol.Agreement) {
		return nil
	}
	return &Agreement{v}
}

// AcceptedOfferID is the offer whose acceptance formed the agreement.
func (a *Agreement) AcceptedOfferID() string { return a.P("accepted_offer_id") }

// Obligation is an obligation (obligation §3).
type Obligation struct{ *View }

// AsObligation returns v as an obligation, or nil when v is nil or not
// one.
func AsObligation(v *View) *Obligation {
	if !is(v, protocol.Obligation) {
		return nil
	}
	return &Obligation{v}
}

// AgreementID is the agreement the obligation derives from.
func (o *Obligation) AgreementID() string { return o.P("agreement_id") }

// Obligor is the organisation that owes the performance.
func (o *Obligation) Obligor() string { return o.PartyOrg("obligor") }

// Obligee is the organisation it is owed to (and that pays its
// consideration).
func (o *Obligation) Obligee() string { return o.PartyOrg("obligee") }

// ObligorAgent is the obligor's agent.
func (o *Obligation) ObligorAgent() string { return str(o.PSub("obligor")["agent_id"]) }

// ObligeeAgent is the obligee's agent.
func (o *Obligation) ObligeeAgent() string { return str(o.PSub("obligee")["agent_id"]) }

// Quantity is the quantity owed, as its decimal string.
func (o *Obligation) Quantity() string { return o.P("quantity") }

// UnitCode is the unit of Quantity.
func (o *Obligation) UnitCode() string { return o.P("unit_code") }

// Response is an obligation response (obligation §5): an acceptance, a
// rejection or a waiver.
type Response struct{ *View }

// AsResponse returns v as an obligation response, or nil when v is nil or
// not one.
func AsResponse(v *View) *Response {
	if !is(v, protocol.ObligationResponse) {
		return nil
	}
	return &Response{v}
}

// ObligationID is the obligation responded to.
func (r *Response) ObligationID() string { return r.P("obligation_id") }

// ResponseType says whether the response accepts, rejects or waives.
func (r *Response) ResponseType() protocol.ResponseType {
	return protocol.ResponseType(r.P("response_type"))
}

// Settlement is a settlement instruction (settlement §4).
type Settlement struct{ *View }

// AsSettlement returns v as a settlement instruction, or nil when v is nil
// or not one.
func AsSettlement(v *View) *Settlement {
	if !is(v, protocol.Settlement) {
		return nil
	}
	return &Settlement{v}
}

// ObligationID is the obligation whose consideration it pays.
func (s *Settlement) ObligationID() string { return s.P("obligation_id") }

// AgreementID is the agreement the obligation paid derives from.
func (s *Settlement) AgreementID() string { return s.P("agreement_id") }

// Payer is the paying organisation.
func (s *Settlement) Payer() string { return s.P("payer_organization_id") }

// Payee is the organisation paid.
func (s *Settlement) Payee() string { return s.P("payee_organization_id") }

// Rail is the rail the instruction is for.
func (s *Settlement) Rail() string { return s.P("rail") }

// IdempotencyKey names the instruction to its rail.
func (s *Settlement) IdempotencyKey() string { return s.P("idempotency_key") }

// Event is a transaction event (protocol state machine §8.1): one link
// of a transaction's chain, moving its state.
type Event struct{ *View }

// AsEvent returns v as an event, or nil when v is nil or not one.
func AsEvent(v *View) *Event {
	if !is(v, protocol.TransactionEvent) {
		return nil
	}
	return &Event{v}
}

// ParseEvent parses bytes that must hold an event ([Parse], then
// [AsEvent]).
func ParseEvent(raw []byte) (*Event, error) { return asEvent(Parse(raw)) }

// ParseEvent is [ParseEvent], sharing the view of bytes parsed before.
func (c *Cache) ParseEvent(raw []byte) (*Event, error) { return asEvent(c.Parse(raw)) }

func asEvent(v *View, err error) (*Event, error) {
	if err != nil {
		return nil, err
	}
	if ev := AsEvent(v); ev != nil {
		return ev, nil
	}
	return nil, fmt.Errorf("object %s is a %s, not a transaction_event", v.ID(), v.Type())
}

// Seq is the event's sequence: its position in the chain, from 1.
func (e *Event) Seq() int { return Int(e.Payload()["sequence"]) }

// EventType is its event_type.
func (e *Event) EventType() protocol.EventType { return protocol.EventType(e.P("event_type")) }

// From is the state it moves from.
func (e *Event) From() protocol.State { return protocol.State(e.P("from_state")) }

// To is the state it moves to.
func (e *Event) To() protocol.State { return protocol.State(e.P("to_state")) }

// Previous is previous_event_hash: the content hash of the event before
// it in the chain.
func (e *Event) Previous() string { return e.P("previous_event_hash") }

// Data returns a string member of its data.
func (e *Event) Data(member string) string { return str(e.PSub("data")[member]) }

func is(v *View, t protocol.ObjectType) bool { return v != nil && v.Type() == t }
