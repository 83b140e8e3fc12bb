package authority

import (
	"fmt"

	"github.com/partyd/party/internal/protocol"
)

// Acts as the record shows them. An event's action_hash is the hash of the
// act document its appender evaluated. The document is not in the record,
// but every member of it is, so the counterparty that countersigns the
// event, the actor that renews a stale decision, and a third-party
// verifier all rebuild it the same way, here, and only here:
//
//	event                 act (by the appender)   proposed_terms                         references
//	agreement.direct      offer.accept            the offer's terms                      —
//	agreement.committed   agreement.sign          the agreement's terms                  agreement_id
//	obligation.activated  obligation.activated    core{quantity, unit_code, total}       agreement_id
//	                                              of the obligation
//	performance.declared  performance.declared    core{asserted quantity, unit,          obligation_id
//	                                              the obligation's consideration}
//	acceptance.granted    acceptance.granted      core{accepted quantity, unit,          assertion_id
//	                                              consideration}
//	acceptance.rejected   acceptance.rejected     as granted, with the asserted quantity assertion_id
//	settlement.instructed settlement.instruct     core{total: the instruction's amount}  agreement_id, obligation_id
//	transaction.completed transaction.complete    the agreement's terms                  agreement_id
//	transaction.cancelled transaction.cancel      the latest offer's terms               —
//	deadline.elapsed      transaction.expire      the lapsed offer's terms               —
//	termination.agreed    termination.agree       the agreement's terms                  agreement_id
//	agreement.amended     agreement.amend         the new version's terms                agreement_id: the version
//	                                                                                     it amends
//	exception.opened      exception.open          the agreement's terms                  agreement_id
//	remediation.accepted  remediation.accept      the agreement's terms                  agreement_id
//	exception.resolved    exception.resolve       the agreement's terms                  agreement_id
//	transaction.terminated transaction.terminate  the agreement's terms                  agreement_id
//
// Which act an event records is the protocol's ([protocol.EventType.Act]).
// The rows reading "the agreement's terms, agreement_id" are the default:
// a new event recording an act on the agreement as it stands needs no
// line here. On agreement.direct an offeror's appending would be its
// offer.submit; only the offeree appends it.
//
// An event may carry, besides the act its data names, further acts of the
// same party at the same position (riders: a second obligation issued with
// the first, an assertion of each obligation still owed, a response to
// each outstanding assertion, the duties an amendment adds or waives).
// Each rider is its own act with its own decision, and its document is
// rebuilt from its object alone (ObjectAct):
//
//	object                       act                     proposed_terms                         references
//	obligation                   obligation.activated    core{quantity, unit_code, total}       agreement_id
//	performance_event            performance.declared    core{asserted quantity, unit,          obligation_id
//	                                                     the obligation's total}
//	obligation_response accept   acceptance.granted      core{accepted quantity, unit,          assertion_id
//	                                                     consideration}
//	obligation_response reject   acceptance.rejected     as granted, the asserted quantity      assertion_id
//	obligation_response waive    obligation.waive        core{quantity, unit_code, total}       obligation_id
//	                                                     of the obligation waived
//
// An obligation's total in these documents (and in the events' rows
// above) is its consideration, or zero in the agreement's currency when it
// has none (ObligationTotal).
//
// A waiver travelling on its own (no event) is evaluated by the same
// document.
//
// Acts about the transaction as a whole that travel on their own, or ride
// an event with a document of their own, take the terms in force (the
// agreement's, before one the latest offer's) and agreement_id when there
// is an agreement (record package, disputes.go, exceptions.go):
//
//	object                       act                     further reference
//	dispute                      dispute.raise           subject_id
//	determination                determination.issue     dispute_id
//	signed_document over a       remediation.accept      —
//	remediation record (offer)

// Document is an act's document as both parties build it (decisions.md 6;
// docs/record-protocol.md decision 4): ActDocument with, when the acting
// mandate's scope names categories or geographies, the first of each as a
// member, because the evaluator requires them of a mandate scoped on them
// and the counterparty must rebuild the same bytes from the mandate alone.
func Document(name, txn, counterparty string, terms, refs map[string]any, mandate map[string]any) map[string]any {
	members := map[string]any{}
	for k, v := range refs {
		members[k] = v
	}
	scope, _ := mandate["scope"].(map[string]any)
	if cs, ok := scope["categories"].([]any); ok && len(cs) > 0 {
		members["category"] = cs[0]
	}
	if gs, ok := scope["geographies"].([]any); ok && len(gs) > 0 {
		members["geography"] = gs[0]
	}
	return ActDocument(name, txn, counterparty, terms, members)
}

// OfferRefs are the references of an offer.submit act whose offeror takes
// role in the transaction it offers in. An offer object names its offeror
// and offeree but not which of them will be the buyer (the kernel's offer
// payload is closed), so the side is stated in the act the offeror's
// signed policy decision binds: an offeror that is the buyer states
// {"offeror_role": "buyer"}; an offeror that is the supplier states
// nothing, so that a supplier's offer hashes exactly as the published
// reference builds it (docs/record-protocol.md, "The offeror's side
// (issue 16, item 1)"). The
// offeror's instance, the receiving instance (which reads the side off the
// decision's action hash) and the verifier (which reads it off the
// agreement's buyer and supplier) build it here.
func OfferRefs(role protocol.Role) map[string]any {
	if role == protocol.Buyer {
		return map[string]any{OfferorRoleMember: string(protocol.Buyer)}
	}
	return nil
}

// OfferorRoleMember is the act-document member that states an offeror's
// side when it is the buyer (OfferRefs); an approval rule can match it
// ($.offeror_role).
const OfferorRoleMember = "offeror_role"

// CoreTerms is the proposed_terms of an obligation act: the quantity, the
// unit and, when there is one, the consideration as total (as the
// published reference builds them, so that a spending limit reads the same
// path, $.proposed_terms.core.total.amount, in every act).
func CoreTerms(quantity, unit string, total any) map[string]any {
	core := map[string]any{"quantity": quantity, "unit_code": unit}
	if total != nil {
		core["total"] = total
	}
	return map[string]any{"core": core}
}

// EventActName returns the act an event records when org appended it.
// For agreement.direct it is the offeree's offer.accept (or, were the
// offeror to append it, offer.submit); get resolves the offer.
func EventActName(event protocol.EventType, data map[string]any, org string, get Lookup) (protocol.Act, bool) {
	if event != protocol.EvAgreementDirect {
		return event.Act()
	}
	offer := get(str(data["offer_id"]))
	if typeOf(offer) != protocol.Offer {
		return "", false
	}
	p, _ := offer["payload"].(map[string]any)
	switch org {
	case partyOrg(p, "offeree"):
		return protocol.ActOfferAccept, true
	case partyOrg(p, "offeror"):
		return protocol.ActOfferSubmit, true
	}
	return "", false
}

// Lookup resolves an object of the record by id, decoded, or returns nil
// when it is not held.
type Lookup func(id string) map[string]any

// EventActMembers returns the proposed terms and references of the act an
// event records, rebuilt from the objects its data names (the table
// above), or why they cannot be.
func EventActMembers(event protocol.EventType, data map[string]any, get Lookup) (terms, refs map[string]any, why string) {
	fetch := func(id string, t protocol.ObjectType) map[string]any {
		o := get(id)
		if typeOf(o) != t {
			if why == "" {
				why = fmt.Sprintf("the %s %s is not held, so the act cannot be rebuilt", t, orNone(id))
			}
			return nil
		}
		p, _ := o["payload"].(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		return p
	}
	named := func(member string, t protocol.ObjectType) (string, map[string]any) {
		id := str(data[member])
		return id, fetch(id, t)
	}
	termsOf := func(p map[string]any) map[string]any {
		t, _ := p["terms"].(map[string]any)
		return t
	}
	switch event {
	case protocol.EvAgreementDirect:
		if _, p := named("offer_id", protocol.Offer); p != nil {
			terms = termsOf(p)
		}
	case protocol.EvAgreementAmended:
		// The new version's terms; the reference is the version it amends,
		// which the acting party knows before the new version exists (an
		// approval can bind the act before it is made).
		if id := str(data["agreement_id"]); id != "" {
			if o := get(id); typeOf(o) == protocol.Agreement {
				p, _ := o["payload"].(map[string]any)
				prev := str(o["previous_version_id"])
				if prev == "" {
					return nil, nil, fmt.Sprintf("agreement %s amends no version", id)
				}
				terms, refs = termsOf(p), map[string]any{"agreement_id": prev}
			} else {
				why = fmt.Sprintf("the agreement %s is not held, so the act cannot be rebuilt", id)
			}
		} else {
			why = "the event names no agreement"
		}
	case protocol.EvObligationActivated:
		if _, p := named("obligation_id", protocol.Obligation); p != nil {
			terms = CoreTerms(str(p["quantity"]), str(p["unit_code"]), p["consideration"])
			refs = map[string]any{"agreement_id": p["agreement_id"]}
		}
	case protocol.EvPerformanceDeclared:
		if _, pp := named("performance_event_id", protocol.PerformanceEvent); pp != nil {
			if op := fetch(str(pp["obligation_id"]), protocol.Obligation); op != nil {
				total, w := ObligationTotal(op, get)
				if w != "" {
					return nil, nil, w
				}
				terms = CoreTerms(str(pp["asserted_quantity"]), str(pp["unit_code"]), total)
				refs = map[string]any{"obligation_id": pp["obligation_id"]}
			}
		}
	case protocol.EvAcceptanceGranted, protocol.EvAcceptanceRejected:
		if _, rp := named("obligation_response_id", protocol.ObligationResponse); rp != nil {
			op := fetch(str(rp["obligation_id"]), protocol.Obligation)
			qty := str(rp["accepted_quantity"])
			if event == protocol.EvAcceptanceRejected {
				pp := fetch(str(rp["assertion_id"]), protocol.PerformanceEvent)
				if pp == nil {
					return nil, nil, why
				}
				qty = str(pp["asserted_quantity"])
			}
			if op != nil {
				total, w := ObligationTotal(op, get)
				if w != "" {
					return nil, nil, w
				}
				terms = CoreTerms(qty, str(op["unit_code"]), total)
				refs = map[string]any{"assertion_id": rp["assertion_id"]}
			}
		}
	case protocol.EvSettlementInstructed:
		if _, sp := named("settlement_instruction_id", protocol.Settlement); sp != nil {
			terms = map[string]any{"core": map[string]any{"total": sp["amount"]}}
			refs = map[string]any{"agreement_id": sp["agreement_id"], "obligation_id": sp["obligation_id"]}
		}
	case protocol.EvTransactionCancelled, protocol.EvDeadlineElapsed:
		if _, p := named("offer_id", protocol.Offer); p != nil {
			terms = termsOf(p)
		}
	default:
		// Every other event that records an act (agreement.committed,
		// transaction.completed, termination.agreed, exception.opened,
		// remediation.accepted, exception.resolved, transaction.terminated)
		// is an act on the agreement as it stands: its terms, named by
		// agreement_id. An act of that shape adds no line here.
		if _, ok := event.Act(); !ok {
			return nil, nil, fmt.Sprintf("no act document is registered for %s", event)
		}
		if id, p := named("agreement_id", protocol.Agreement); p != nil {
			terms, refs = termsOf(p), map[string]any{"agreement_id": id}
		}
	}
	return terms, refs, why
}

// ObjectAct returns the act an obligation-level object records on its own
// (a rider, or a waiver travelling without an event; see the table at the
// top of this file): its name, proposed terms and references, rebuilt from
// the object and the objects it names, or why they cannot be.
func ObjectAct(obj map[string]any, get Lookup) (name protocol.Act, terms, refs map[string]any, why string) {
	p, _ := obj["payload"].(map[string]any)
	obligation := func(id string) map[string]any {
		o := get(id)
		if typeOf(o) != protocol.Obligation {
			why = fmt.Sprintf("the obligation %s is not held, so the act cannot be rebuilt", orNone(id))
			return nil
		}
		op, _ := o["payload"].(map[string]any)
		return op
	}
	switch typeOf(obj) {
	case protocol.Obligation:
		return protocol.ActObligationActivated, CoreTerms(str(p["quantity"]), str(p["unit_code"]), p["consideration"]), map[string]any{"agreement_id": p["agreement_id"]}, ""
	case protocol.PerformanceEvent:
		op := obligation(str(p["obligation_id"]))
		if op == nil {
			return protocol.ActPerformanceDeclared, nil, nil, why
		}
		total, w := ObligationTotal(op, get)
		if w != "" {
			return protocol.ActPerformanceDeclared, nil, nil, w
		}
		return protocol.ActPerformanceDeclared, CoreTerms(str(p["asserted_quantity"]), str(p["unit_code"]), total), map[string]any{"obligation_id": p["obligation_id"]}, ""
	case protocol.ObligationResponse:
		op := obligation(str(p["obligation_id"]))
		var total any
		if op != nil && str(p["response_type"]) != "waive" {
			var w string
			if total, w = ObligationTotal(op, get); w != "" {
				return "", nil, nil, w
			}
		}
		switch str(p["response_type"]) {
		case "accept":
			if op == nil {
				return protocol.ActAcceptanceGranted, nil, nil, why
			}
			return protocol.ActAcceptanceGranted, CoreTerms(str(p["accepted_quantity"]), str(op["unit_code"]), total), map[string]any{"assertion_id": p["assertion_id"]}, ""
		case "reject":
			if op == nil {
				return protocol.ActAcceptanceRejected, nil, nil, why
			}
			prf := get(str(p["assertion_id"]))
			if typeOf(prf) != protocol.PerformanceEvent {
				return protocol.ActAcceptanceRejected, nil, nil, fmt.Sprintf("the assertion %s is not held, so the act cannot be rebuilt", orNone(str(p["assertion_id"])))
			}
			pp, _ := prf["payload"].(map[string]any)
			return protocol.ActAcceptanceRejected, CoreTerms(str(pp["asserted_quantity"]), str(op["unit_code"]), total), map[string]any{"assertion_id": p["assertion_id"]}, ""
		case "waive":
			if op == nil {
				return protocol.ActObligationWaive, nil, nil, why
			}
			total, why := ObligationTotal(op, get)
			if why != "" {
				return protocol.ActObligationWaive, nil, nil, why
			}
			return protocol.ActObligationWaive, CoreTerms(str(op["quantity"]), str(op["unit_code"]), total), map[string]any{"obligation_id": p["obligation_id"]}, ""
		}
		return "", nil, nil, fmt.Sprintf("response type %q records no act", str(p["response_type"]))
	}
	return "", nil, nil, fmt.Sprintf("a %s records no act of its own", typeOf(obj))
}

// ObligationTotal is the total of the act document of an act on an
// obligation (its performance, a response to it, its waiver): the
// obligation's consideration, or, for an obligation that carries none (a
// partial acceptance's remainder, whose consideration stays on the duty it
// came from, or a remediation obligation, whose duty is paid under the
// obligation it performs again), zero in the agreement's currency, so that
// a mandate's limits on $.proposed_terms.core.total evaluate every act on
// an obligation as they evaluate every other act.
func ObligationTotal(obligation map[string]any, get Lookup) (any, string) {
	if c, ok := obligation["consideration"].(map[string]any); ok && len(c) > 0 {
		return c, ""
	}
	agr := get(str(obligation["agreement_id"]))
	if typeOf(agr) != protocol.Agreement {
		return nil, fmt.Sprintf("the agreement %s is not held, so the act cannot be rebuilt", orNone(str(obligation["agreement_id"])))
	}
	p, _ := agr["payload"].(map[string]any)
	terms, _ := p["terms"].(map[string]any)
	core, _ := terms["core"].(map[string]any)
	total, _ := core["total"].(map[string]any)
	return map[string]any{"currency": str(total["currency"]), "amount": "0"}, ""
}

func typeOf(o map[string]any) protocol.ObjectType {
	if o == nil {
		return ""
	}
	return protocol.ObjectType(str(o["object_type"]))
}

func partyOrg(p map[string]any, member string) string {
	m, _ := p[member].(map[string]any)
	return str(m["organization_id"])
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// PrincipalSigned reports whether objects of type t are signed by a
// principal's key rather than the creating agent's (an approval, a key
// record, a revocation record): their created_by names the agent that asked
// for them, not the key that signed.
func PrincipalSigned(t protocol.ObjectType) bool {
	switch t {
	case protocol.Approval, protocol.KeyRecord, protocol.RevocationRecord:
		return true
	}
	return false
}

// CheckCreator checks that an object's created_by is borne out by the
// mandate it names (canonical model §3 created_by; commercial mandate §3
// subject): the mandate represents the creating organisation and is issued
// to the creating agent under the key that signed the object first. An
// object that claims another agent or mandate than the one whose key made
// it misattributes the act. The countersigner applies it to every object
// of a message (with the mandate resolved live) and the verifier to every
// object whose mandate a bundle holds.
func CheckCreator(obj, mandate map[string]any) error {
	if PrincipalSigned(typeOf(obj)) {
		return nil
	}
	by, _ := obj["created_by"].(map[string]any)
	subj, _ := mandate["subject"].(map[string]any)
	first := ""
	if sigs, _ := obj["signatures"].([]any); len(sigs) > 0 {
		if e, ok := sigs[0].(map[string]any); ok {
			first = str(e["key_id"])
		}
	}
	switch {
	case str(mandate["id"]) != str(by["mandate_id"]):
		return fmt.Errorf("%s names mandate %s, not %s", str(obj["id"]), orNone(str(by["mandate_id"])), orNone(str(mandate["id"])))
	case str(mandate["represented_organization_id"]) != str(by["organization_id"]):
		return fmt.Errorf("%s is created for %s under a mandate of %s", str(obj["id"]), orNone(str(by["organization_id"])), orNone(str(mandate["represented_organization_id"])))
	case str(subj["agent_id"]) != str(by["agent_id"]):
		return fmt.Errorf("%s names agent %s as its creator, but mandate %s is issued to %s", str(obj["id"]), orNone(str(by["agent_id"])), str(mandate["id"]), orNone(str(subj["agent_id"])))
	case first != "" && str(subj["key_id"]) != first:
		return fmt.Errorf("%s is signed first with key %s, but mandate %s names key %s", str(obj["id"]), first, str(mandate["id"]), orNone(str(subj["key_id"])))
	}
	return nil
}
