package verify

import (
	"fmt"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"
)

// Acts rebuilt from the record (decisions.md item 6). An event's
// action_hash is the hash of the act document its appender evaluated; the
// document is not in the record, but every member of it is: the action
// name, the transaction, the counterparty, the terms the act proposes (an
// offer's or agreement's terms, or an obligation act's core of quantity,
// unit and consideration), the references (agreement_id, obligation_id,
// assertion_id), and, where the acting mandate's scope names categories
// or geographies, the first value of each. The verifier rebuilds the
// document and accepts it as the act only when it hashes to the event's
// action_hash and to the action_hash of the event's policy decision: then
// what a mandate's approval rules and category scope say about the act
// can be judged on the act itself. A document that does not hash to the
// recorded value (another implementation's act shape, or an act this
// verifier does not know how to rebuild) leaves those questions open,
// never answered by a guess.
//
// The acts rebuilt, by event:
//
//	agreement.direct      offer.accept by the offeree (offer.submit by the
//	                      offeror): the offer's terms
//	agreement.committed   agreement.sign: the agreement's terms, agreement_id
//	obligation.activated  {core: quantity, unit_code, total: consideration}
//	                      of the obligation, agreement_id
//	performance.declared  {core: asserted quantity and unit, total: the
//	                      obligation's consideration}, obligation_id
//	acceptance.granted    {core: accepted quantity, the obligation's unit
//	                      and consideration}, assertion_id
//	acceptance.rejected   as acceptance.granted, with the asserted quantity

// act is one act as rebuilt from the record.
type act struct {
	name string         // action name (decisions.md item 6)
	doc  map[string]any // the act document
	hash string         // its action_hash
	// matches says the document hashes to the action_hash the record
	// binds (the event's, and its policy decision's when held): only then
	// is it the act.
	matches bool
	why     string // why it was not rebuilt, or does not match
}

// eventAct rebuilds the act the event records, under the acting mandate
// m, and compares its hash with the event's action_hash and with that of
// the policy decision the event names, when the bundle holds it.
func (r *run) eventAct(e *object, m *mandate) act {
	by, _ := objAt(e.val, "created_by")
	org := str(by, "organization_id")
	event := eventType(e.payload)
	name, ok := r.actFor(e, org)
	if !ok {
		return act{why: fmt.Sprintf("no act name is registered for %s by %s", event, orNone(org))}
	}
	terms, refs, why := r.actMembers(event, e)
	if why != "" {
		return act{name: name, why: why}
	}
	a := r.buildAct(name, org, str(e.val, "transaction_id"), terms, refs, m)
	if a.why != "" {
		return a
	}
	bound := str(e.payload, "action_hash")
	if a.hash != bound {
		a.why = fmt.Sprintf("the %s act rebuilt from the record hashes to %s, the event binds %s: the act's document is not established (it may be built in another implementation's shape)",
			name, short(a.hash), short(bound))
		return a
	}
	if d, held := r.byID[str(e.payload, "policy_decision_id")]; held && d.typ == protocol.PolicyDecision {
		if dh := str(d.payload, "action_hash"); dh != a.hash {
			a.why = fmt.Sprintf("the %s act rebuilt from the record hashes to the event's action hash, but the policy decision %s binds %s", name, d.id, short(dh))
			return a
		}
	}
	a.matches = true
	return a
}

// buildAct builds and hashes one act of org on txn under m.
func (r *run) buildAct(name, org, txn string, terms, refs map[string]any, m *mandate) act {
	cp := r.counterparty(txn, org)
	if cp == "" {
		return act{name: name, why: fmt.Sprintf("the counterparty of %s on %s is not established from the bundle", orNone(org), orNone(txn))}
	}
	doc := authority.Document(name, txn, cp, terms, refs, m.val)
	h, err := authority.ActionHash(doc)
	if err != nil {
		return act{name: name, why: "the rebuilt act has no canonical form: " + err.Error()}
	}
	return act{name: name, doc: doc, hash: h}
}

// actMembers returns the proposed terms and references of the act behind
// an event, from the objects the event names (authority.EventActMembers,
// the table every party rebuilds acts by), or why they are not held.
func (r *run) actMembers(event protocol.EventType, e *object) (terms, refs map[string]any, why string) {
	data, _ := objAt(e.payload, "data")
	return authority.EventActMembers(protocol.EventType(event), data, r.lookup)
}

// lookup resolves an object of the bundle by id, for the rules shared with
// the countersigner.
func (r *run) lookup(id string) map[string]any {
	if o, held := r.byID[id]; held {
		return o.val
	}
	return nil
}

// decidedAct finds an act of org that the record shows only through its
// policy decision (no event of its own): the act name under one of org's
// mandates, rebuilt over terms and refs, to which a policy decision by org
// naming that mandate is bound. It returns the act, its mandate and the
// decision's evaluated_at, or found false.
func (r *run) decidedAct(name, org, txn string, terms, refs map[string]any, candidates []*mandate) (act, *mandate, time.Time, bool) {
	for _, m := range candidates {
		a := r.buildAct(name, org, txn, terms, refs, m)
		if a.why != "" {
			continue
		}
		for _, d := range r.objs {
			if d.typ != protocol.PolicyDecision || str(d.payload, "action_hash") != a.hash || str(d.payload, "decision") != "allow" {
				continue
			}
			dby, _ := objAt(d.val, "created_by")
			mids, _ := canonical.Strings(d.payload["mandate_ids"])
			at, ok := timeAt(d.payload, "evaluated_at")
			if str(dby, "organization_id") == org && len(mids) > 0 && mids[0] == m.id && ok {
				a.matches = true
				return a, m, at, true
			}
		}
	}
	return act{}, nil, time.Time{}, false
}
