package verify

import (
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
)

// Step 5: replay every disclosed event (§4 step 5; pilot state machine §9).
// Each event gets four checks, A202-EVIDENCE-TRANSITION-ILLEGAL when they
// fail, and a fifth on its approvals:
//
//   - transition_legality: (from_state, event_type, to_state) is a row of
//     the machine under the rules version in force when the event appended
//     (never the newest), and from_state is the state the replay reached.
//   - transition_guard: the parts of the transition's guard that the
//     bundle's objects can show held.
//   - mandate_authority: the mandate the event was appended under resolves,
//     its proof verifies, and it covered the act at occurred_at: subject,
//     organisation, interval, action, scope, delegation chain, and no
//     revocation_record in the bundle putting it out of service at the
//     append (the latest effective by then decides; one effective later
//     is named). A
//     mandate's live status at append time is a fact of its status
//     endpoint, which an offline verifier does not consult; the detail says
//     so.
//   - policy_decision: the decision the event names resolves, is an allow
//     by the acting party over the event's action_hash, and is signed. A
//     decision not disclosed is not_checkable, never verified (canonical
//     model §9.1 rule 4).
//   - approval, on an event whose acting mandate the bundle holds: every
//     approval the mandate chain's approval rules call for over the
//     event's act, rebuilt from the record, was given (approvals.go),
//     A202-APPROVAL-REQUIRED or A202-APPROVAL-HASH-MISMATCH when not.
//
// Obligation objects move by new versions; consecutive versions whose
// state differs are replayed against the obligation table (obligation
// §6.1) as obligation_state. The guards the objects carry themselves are
// judged last, on the objects (objectGuards).
func (r *run) step5() {
	session := false
	for _, s := range r.streams {
		session = session || s.kind == "session"
	}
	// Legality replays each stream in order, one state after another; the
	// other checks of an event stand alone and run concurrently. The
	// report lists an event's checks together, in stream order.
	type slot struct {
		s *stream
		i int
	}
	var slots []slot
	for _, s := range r.streams {
		for i := range s.events {
			slots = append(slots, slot{s, i})
		}
	}
	legal := r.newItems(len(slots), 1)
	n := 0
	for _, s := range r.streams {
		state := map[string]string{}
		for i, e := range s.events {
			legal.do(0, n, func(c *run) { c.legality(s, i, e, state) })
			n++
		}
	}
	rest := r.newItems(len(slots), r.workers(len(slots)))
	r.parallel(len(slots), func(w, k int) {
		rest.do(w, k, func(c *run) {
			s, i := slots[k].s, slots[k].i
			e := s.events[i]
			c.guard(s, i, e, session)
			a := c.actOf(e)
			c.authority(e, a)
			c.decision(e)
			c.approval(e, a)
		})
	})
	r.joinItems(legal, rest)
	r.obligationVersions()
	r.objectGuards()
}

// machineFor picks the machine an event replays against, and the key its
// state is tracked under: a session stream's events move the session; a
// transaction stream's move the aggregate, except an event whose data
// names an obligation and whose states are obligation states.
func machineFor(s *stream, p map[string]any, version, from string, event protocol.EventType, to string) (rules.Machine, string, bool) {
	switch s.kind {
	case "session":
		return rules.Session, "session", true
	case "transaction":
		data, _ := objAt(p, "data")
		if obl, ok := strAt(data, "obligation_id"); ok && !rules.Legal(version, rules.Aggregate, from, event, to) &&
			(from == "" || rules.IsState(rules.Obligation, from)) && rules.IsState(rules.Obligation, to) {
			return rules.Obligation, "obligation/" + obl, true
		}
		return rules.Aggregate, "aggregate", true
	}
	return "", "", false
}

func (r *run) legality(s *stream, i int, e *object, state map[string]string) {
	p := e.payload
	version := r.rulesFor(e.id)
	event := eventType(p)
	from, fromOK := strAt(p, "from_state")
	to, toOK := strAt(p, "to_state")
	switch {
	case version == "":
		r.add(5, "transition_legality", e.subject, NotCheckable, "", "no rules version is stated for the record, so no transition table applies")
		r.missing(rules.PilotID + "@(unstated)")
		return
	case !knownRules(version):
		r.add(5, "transition_legality", e.subject, NotCheckable, "", fmt.Sprintf("rules version %q does not resolve", version))
		r.missing(rules.PilotID + "@" + version)
		return
	case event == "" || !toOK || (!fromOK && !isNull(p, "from_state")):
		r.add(5, "transition_legality", e.subject, Failed, reason.EvidenceTransitionIllegal, "the event does not state event_type, from_state and to_state")
		return
	}
	machine, key, ok := machineFor(s, p, version, from, event, to)
	if !ok {
		r.add(5, "transition_legality", e.subject, NotCheckable, "", fmt.Sprintf("stream kind %q has no state machine", s.kind))
		return
	}
	expected := ""
	switch {
	case i == 0 && s.fromStart && machine == rules.Aggregate:
		expected = "draft"
	case i == 0 && s.fromStart && machine == rules.Session:
		expected = "opened"
	case i > 0 && s.linked[i]:
		expected = state[key]
	}
	state[key] = to
	if !rules.Legal(version, machine, from, event, to) {
		detail := fmt.Sprintf("%s --%s--> %s is not a %s transition under rules %s", orNone(from), event, to, machine, version)
		if since := rules.Since(machine, from, event); since != "" {
			detail += " (it is registered from " + since + ")"
		}
		r.add(5, "transition_legality", e.subject, Failed, reason.EvidenceTransitionIllegal, detail)
		return
	}
	if expected != "" && from != expected {
		r.add(5, "transition_legality", e.subject, Failed, reason.EvidenceTransitionIllegal,
			fmt.Sprintf("from_state is %s, but the replay had reached %s", orNone(from), expected))
		return
	}
	r.add(5, "transition_legality", e.subject, Verified, "", fmt.Sprintf("%s --%s--> %s under rules %s", orNone(from), event, to, version))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// guards states, for the transitions whose guards concern objects no
// bundle carries, what the guard is, so that a not_checkable says what was
// not established (pilot state machine §5).
var guards = map[protocol.EventType]string{
	"approval.requested":             "an approval rule matched",
	"approval.rejected":              "the approval binds the selected offer hash",
	"acceptance.withdrawn":           "the withdrawal is authorised and before commitment",
	protocol.EvDeadlineElapsed:       "the authoritative clock is past the deadline",
	protocol.EvExceptionOpened:       "the exception's type, scope and evidence are supplied",
	protocol.EvRemediationAccepted:   "the parties accept the remediation hash",
	protocol.EvExceptionResolved:     "the resolution conditions are met",
	protocol.EvTransactionTerminated: "termination authority and evidence are valid",
}

// guard checks what the bundle can show of the event's guard.
func (r *run) guard(s *stream, i int, e *object, session bool) {
	p := e.payload
	event := eventType(p)
	data, _ := objAt(p, "data")
	var v verdict
	switch event {
	case protocol.EvAgreementDirect:
		r.directGuard(&v, e, data, session)
	case protocol.EvAgreementCommitted:
		r.commitGuard(&v, s, i, e, data)
	case protocol.EvObligationActivated:
		r.activationGuard(&v, e, data)
	case protocol.EvPerformanceDeclared:
		r.declarationGuard(&v, data)
	case protocol.EvAcceptanceGranted, protocol.EvAcceptanceRejected:
		r.responseGuard(&v, event, data)
	case protocol.EvSettlementInstructed:
		r.instructedGuard(&v, s, i, e, data)
	case protocol.EvTransactionCompleted:
		r.completedGuard(&v, s, i, e, data)
	case protocol.EvTransactionCancelled:
		r.cancelledGuard(&v, s, i, e, data)
	case protocol.EvDeadlineElapsed:
		if s.kind != "transaction" {
			v.unsure("the guard of deadline.elapsed on a %s stream (the session's deadline) is not established from the objects of a bundle", s.kind)
			break
		}
		r.expiredGuard(&v, s, i, e, data)
	case protocol.EvTerminationAgreed:
		r.terminationGuard(&v, s, i, e, data)
	case protocol.EvAgreementAmended:
		r.amendedGuard(&v, s, i, e, data)
	case protocol.EvExceptionOpened:
		r.exceptionOpenedGuard(&v, s, i, e, data)
	case protocol.EvRemediationAccepted:
		r.remediationGuard(&v, s, i, e, data)
	case protocol.EvExceptionResolved:
		r.resolvedGuard(&v, s, i, e, data)
	case protocol.EvTransactionTerminated:
		r.terminatedGuard(&v, s, i, e, data)
	default:
		if g, ok := guards[event]; ok {
			v.unsure("the guard of %s (%s) is not established from the objects of a bundle", event, g)
		} else if operated(event) {
			v.unsure("%s is an operated-only transition: its guard concerns a venue, and the bilateral scope has no objects for it", event)
		} else {
			v.unsure("no guard is known for %q", event)
		}
	}
	res, detail := v.result()
	r.add(5, "transition_guard", e.subject, res, reason.EvidenceTransitionIllegal, detail)
}

func operated(event protocol.EventType) bool {
	for _, m := range []rules.Machine{rules.Aggregate, rules.Session} {
		for _, t := range rules.Table(rules.Latest(), m) {
			if t.Event == event && t.Operated {
				return true
			}
		}
	}
	return false
}

// held returns the object data[member] names, if the bundle holds one of
// type typ; otherwise it records why in v and returns nil.
func (r *run) held(v *verdict, data map[string]any, member string, typ protocol.ObjectType) *object {
	id, ok := strAt(data, member)
	if !ok {
		v.unsure("the event's data names no %s", member)
		return nil
	}
	o, held := r.byID[id]
	switch {
	case !held:
		v.unsure("%s is not in the bundle", id)
		r.missing(id)
		return nil
	case o.typ != typ:
		v.fail("%s is a %s, not a %s", id, o.typ, typ)
		return nil
	}
	return o
}

func partyOrg(m map[string]any, member string) string {
	pm, _ := objAt(m, member)
	return str(pm, "organization_id")
}

// signedBy settles whether o carries a valid signature by org's key.
func (r *run) signedBy(o *object, org string) (Result, string) {
	if org == "" {
		return Failed, fmt.Sprintf("%s names no party to have signed it", o.subject)
	}
	var unknown []string
	for i, sc := range o.sigs {
		switch sc.result {
		case Verified:
			c := r.controllerOf(sc.keyID)
			if c == org {
				return Verified, fmt.Sprintf("%s is signed by %s", o.subject, org)
			}
			if c == "" {
				unknown = append(unknown, fmt.Sprintf("signature[%d] of %s verifies, but whose key %s is is not established", i, o.subject, sc.keyID))
			}
		case NotCheckable:
			unknown = append(unknown, fmt.Sprintf("signature[%d] of %s could not be checked", i, o.subject))
		}
	}
	if len(unknown) > 0 {
		return NotCheckable, strings.Join(unknown, "; ")
	}
	return Failed, fmt.Sprintf("no valid signature of %s is by %s", o.subject, org)
}

// directGuard: pilot state machine §5.3, the four guards of agreement.direct.
func (r *run) directGuard(v *verdict, e *object, data map[string]any, session bool) {
	if session {
		v.fail("the bundle discloses a session stream: the direct path is not a way around an open negotiation")
	} else {
		v.pass("no session stream")
	}
	offer := r.held(v, data, "offer_id", protocol.Offer)
	acc := r.held(v, data, "acceptance_id", protocol.Acceptance)
	occurred, okT := timeAt(e.payload, "occurred_at")
	if offer != nil {
		until, okU := timeAt(offer.payload, "valid_until")
		created, okC := timeAt(offer.val, "created_at")
		switch {
		case !okT || !okU || !okC:
			v.fail("the times that make %s current are not readable", offer.subject)
		case !until.After(created):
			v.fail("%s expires at or before its creation", offer.subject)
		case !occurred.Before(until):
			v.fail("%s had expired (valid_until %s) when the event occurred", offer.subject, str(offer.payload, "valid_until"))
		default:
			v.pass("%s was current", offer.subject)
		}
		for _, o := range r.objs {
			if o.typ == protocol.Offer && str(o.payload, "supersedes_offer_id") == offer.id {
				v.fail("%s is superseded by %s", offer.subject, o.subject)
			}
		}
		v.take(r.signedBy(offer, partyOrg(offer.payload, "offeror")))
	}
	if acc != nil {
		if offer != nil {
			if str(acc.payload, "offer_id") != offer.id {
				v.fail("%s accepts %s, not %s", acc.subject, str(acc.payload, "offer_id"), offer.id)
			} else if str(acc.payload, "offer_hash") != offer.recomputed || offer.hashErr != nil {
				v.fail("%s does not sign the exact bytes of %s", acc.subject, offer.subject)
			} else {
				v.pass("%s signs the exact offer hash", acc.subject)
			}
			ap, _ := objAt(acc.payload, "accepting_party")
			oe, _ := objAt(offer.payload, "offeree")
			if str(ap, "organization_id") != str(oe, "organization_id") || str(ap, "agent_id") != str(oe, "agent_id") {
				v.fail("%s is by %s/%s, not the offeree %s/%s", acc.subject, orNone(str(ap, "organization_id")), orNone(str(ap, "agent_id")),
					orNone(str(oe, "organization_id")), orNone(str(oe, "agent_id")))
			}
		}
		v.take(r.signedBy(acc, partyOrg(acc.payload, "accepting_party")))
	}
}

// commitGuard: approvals complete (formationApprovals); the agreement
// names the acceptance; both parties sign the same hash.
func (r *run) commitGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	agr := r.held(v, data, "agreement_id", protocol.Agreement)
	if agr == nil {
		return
	}
	accID := str(agr.payload, "acceptance_id")
	for j := i - 1; j >= 0; j-- {
		ep := s.events[j].payload
		if eventType(ep) == protocol.EvAgreementDirect {
			d, _ := objAt(ep, "data")
			if named := str(d, "acceptance_id"); named != accID {
				v.fail("%s names acceptance %s, but the record formed on %s", agr.subject, accID, named)
			}
			break
		}
	}
	if acc, held := r.byID[accID]; held && acc.typ == protocol.Acceptance {
		if str(acc.payload, "offer_id") != str(agr.payload, "accepted_offer_id") {
			v.fail("%s accepts %s, not the agreement's offer %s", accID, str(acc.payload, "offer_id"), str(agr.payload, "accepted_offer_id"))
		} else {
			v.pass("%s names the acceptance %s of its offer", agr.subject, accID)
		}
	} else {
		v.unsure("the acceptance %s is not in the bundle", accID)
		r.missing(accID)
	}
	buyer, supplier := partyOrg(agr.payload, "buyer"), partyOrg(agr.payload, "supplier")
	if buyer == supplier {
		v.fail("%s names one organisation as buyer and supplier", agr.subject)
	}
	v.take(r.signedBy(agr, buyer))
	v.take(r.signedBy(agr, supplier))
	r.formationApprovals(v, s, i, e, agr)
}

// activationGuard: the obligation derives from the agreement.
func (r *run) activationGuard(v *verdict, e *object, data map[string]any) {
	obl := r.held(v, data, "obligation_id", protocol.Obligation)
	if obl == nil {
		return
	}
	agrID := str(obl.payload, "agreement_id")
	h, agr, ok := r.agreementTermsHash(agrID)
	if agr == nil {
		v.unsure("the agreement %s is not in the bundle", agrID)
		r.missing(agrID)
		return
	}
	if !ok {
		v.fail("%s is not an agreement with terms", agrID)
		return
	}
	subj, _ := objAt(obl.payload, "subject")
	if str(subj, "agreement_id") != agrID || str(subj, "terms_hash") != h {
		v.fail("the subject of %s is not the terms of %s", obl.subject, agrID)
	} else {
		v.pass("%s derives from the terms of %s", obl.subject, agrID)
	}
	if str(agr.val, "transaction_id") != str(e.val, "transaction_id") {
		v.fail("%s belongs to another transaction", agrID)
	}
	parties := []string{partyOrg(agr.payload, "buyer"), partyOrg(agr.payload, "supplier")}
	obligor, obligee := partyOrg(obl.payload, "obligor"), partyOrg(obl.payload, "obligee")
	if !contains(parties, obligor) || !contains(parties, obligee) || obligor == obligee {
		v.fail("the obligor %s and obligee %s of %s are not the two parties of %s", obligor, obligee, obl.subject, agrID)
	}
}

// declarationGuard: the obligor's signed assertion, with evidence, names
// the obligation. The specification's "evidence manifest" is a
// control-plane object (spec-map C15); the bilateral reading is the
// assertion's own evidence references.
func (r *run) declarationGuard(v *verdict, data map[string]any) {
	prf := r.held(v, data, "performance_event_id", protocol.PerformanceEvent)
	if prf == nil {
		return
	}
	oblID := str(prf.payload, "obligation_id")
	if named, ok := strAt(data, "obligation_id"); ok && named != oblID {
		v.fail("%s asserts performance of %s, not %s", prf.subject, oblID, named)
	}
	if refs, _ := prf.payload["evidence_refs"].([]any); len(refs) == 0 {
		v.fail("%s carries no evidence", prf.subject)
	} else {
		v.pass("%s carries %d evidence reference(s)", prf.subject, len(refs))
	}
	if obl, held := r.byID[oblID]; held && obl.typ == protocol.Obligation {
		v.take(r.signedBy(prf, partyOrg(obl.payload, "obligor")))
	} else {
		v.unsure("the obligation %s is not in the bundle, so its obligor is unknown", oblID)
		r.missing(oblID)
	}
}

// responseGuard: the obligee's response of the right type, over the exact
// assertion.
func (r *run) responseGuard(v *verdict, event protocol.EventType, data map[string]any) {
	obr := r.held(v, data, "obligation_response_id", protocol.ObligationResponse)
	if obr == nil {
		return
	}
	want := "accept"
	if event == protocol.EvAcceptanceRejected {
		want = "reject"
	}
	if got := str(obr.payload, "response_type"); got != want {
		v.fail("%s is a %q response, not %q", obr.subject, got, want)
	}
	oblID := str(obr.payload, "obligation_id")
	if named, ok := strAt(data, "obligation_id"); ok && named != oblID {
		v.fail("%s responds on %s, not %s", obr.subject, oblID, named)
	}
	prfID := str(obr.payload, "assertion_id")
	if prf, held := r.byID[prfID]; held && prf.typ == protocol.PerformanceEvent {
		if str(obr.payload, "assertion_hash") != prf.recomputed || prf.hashErr != nil {
			v.fail("%s is not over the exact bytes of %s", obr.subject, prfID)
		} else {
			v.pass("%s binds the exact assertion %s", obr.subject, prfID)
		}
	} else {
		v.unsure("the assertion %s is not in the bundle", prfID)
		r.missing(prfID)
	}
	if obl, held := r.byID[oblID]; held && obl.typ == protocol.Obligation {
		v.take(r.signedBy(obr, partyOrg(obl.payload, "obligee")))
	} else {
		v.unsure("the obligation %s is not in the bundle, so its obligee is unknown", oblID)
		r.missing(oblID)
	}
}

// actFor returns the act behind an event by actor org
// (authority.EventActName): for agreement.direct the offeree's acceptance
// or the offeror's submission, by which party appended it.
func (r *run) actFor(e *object, org string) (string, bool) {
	data, _ := objAt(e.payload, "data")
	a, ok := authority.EventActName(protocol.EventType(eventType(e.payload)), data, org, r.lookup)
	return string(a), ok
}

// maxDelegation bounds how far up a delegation chain authority is followed.
const maxDelegation = 16

// actOf rebuilds the act behind e under its acting mandate, when the
// bundle holds that mandate.
func (r *run) actOf(e *object) act {
	by, _ := objAt(e.val, "created_by")
	m, held := r.mandateBy[str(by, "mandate_id")]
	if !held {
		return act{why: fmt.Sprintf("the mandate %s is not in the bundle", orNone(str(by, "mandate_id")))}
	}
	return r.eventAct(e, m)
}

// authority checks the actor's mandate at the event's append time; a is
// the event's act, rebuilt from the record.
func (r *run) authority(e *object, a act) {
	var v verdict
	by, _ := objAt(e.val, "created_by")
	org, agent, mid := str(by, "organization_id"), str(by, "agent_id"), str(by, "mandate_id")
	m, held := r.mandateBy[mid]
	if !held {
		r.add(5, "mandate_authority", e.subject, NotCheckable, "", fmt.Sprintf("the mandate %s the event was appended under is not in the bundle", orNone(mid)))
		r.missing(mid)
		return
	}
	occurred, okT := timeAt(e.payload, "occurred_at")
	if !okT {
		v.fail("occurred_at is not a timestamp")
	}
	subj, _ := objAt(m.val, "subject")
	if str(subj, "agent_id") != agent {
		v.fail("%s is issued to %s, not to the appending agent %s", mid, str(subj, "agent_id"), agent)
	}
	if len(e.sigs) > 0 && str(subj, "key_id") != e.sigs[0].keyID {
		v.fail("%s names key %s, but the appender signed with %s", mid, str(subj, "key_id"), e.sigs[0].keyID)
	}
	if str(m.val, "represented_organization_id") != org {
		v.fail("%s represents %s, not %s", mid, str(m.val, "represented_organization_id"), org)
	}
	if name, ok := r.actFor(e, org); !ok {
		v.unsure("no act name is registered for %s by %s (decisions.md item 6)", eventType(e.payload), org)
	} else if actions, _ := canonical.Strings(m.val["actions"]); !contains(actions, name) {
		v.fail("%s does not list %s", mid, name)
	} else {
		v.pass("%s lists %s", mid, name)
	}
	r.scope(&v, m, e, org, a)
	// Authority flows down the delegation chain: every mandate on it must
	// have a verified proof, cover the append time and, for a child, be no
	// wider than its parent.
	seen := map[string]bool{}
	for cur, depth := m, 0; cur != nil; depth++ {
		if seen[cur.id] || depth > maxDelegation {
			v.fail("the delegation chain of %s loops or is deeper than %d", mid, maxDelegation)
			break
		}
		seen[cur.id] = true
		switch cur.proof.result {
		case Verified:
		case Failed:
			v.fail("the proof of %s does not verify", cur.id)
		default:
			v.unsure("the proof of %s could not be checked", cur.id)
		}
		if okT {
			from, ok1 := timeAt(cur.val, "valid_from")
			until, ok2 := timeAt(cur.val, "valid_until")
			if !ok1 || !ok2 || occurred.Before(from) || !occurred.Before(until) {
				v.fail("%s did not cover %s (valid %s to %s)", cur.id, str(e.payload, "occurred_at"), str(cur.val, "valid_from"), str(cur.val, "valid_until"))
			}
			r.revoked(&v, "mandate", cur.id, str(cur.val, "represented_organization_id"), occurred)
		}
		pid, delegated := strAt(cur.val, "parent_mandate_id")
		if !delegated {
			break
		}
		parent, held := r.mandateBy[pid]
		if !held {
			v.unsure("the parent mandate %s is not in the bundle", pid)
			r.missing(pid)
			break
		}
		for _, p := range gate.Narrowing(parent.val, cur.val) {
			v.fail("%s widens its parent %s: %s", cur.id, pid, p.Detail)
		}
		cur = parent
	}
	if len(v.failed) == 0 && len(v.unknown) == 0 {
		v.pass("its live status at append time is a fact of its status endpoint, which an offline verifier does not consult; no revocation_record in the bundle affects it")
	}
	res, detail := v.result()
	r.add(5, "mandate_authority", e.subject, res, reason.EvidenceTransitionIllegal, detail)
}

// scope checks the mandate's scope axes the bundle can evaluate: the
// transaction; where the bundle names the other party, the counterparty;
// and, where the act was rebuilt to its recorded hash, the category and
// geography the act names, which a transaction's objects do not state.
func (r *run) scope(v *verdict, m *mandate, e *object, org string, a act) {
	scope, _ := objAt(m.val, "scope")
	txn := str(e.val, "transaction_id")
	if ids, ok := canonical.Strings(scope["transaction_ids"]); ok {
		if !contains(ids, txn) {
			v.fail("%s is not scoped to %s", m.id, txn)
		} else {
			v.pass("%s is scoped to %s", m.id, txn)
		}
	}
	for _, ax := range []struct{ axis, member string }{{"categories", "category"}, {"geographies", "geography"}} {
		raw, stated := scope[ax.axis]
		if !stated {
			continue
		}
		if !a.matches {
			v.unsure("%s is scoped by %s, and the act's %s is not established: %s", m.id, ax.axis, ax.member, a.why)
			continue
		}
		allowed, _ := canonical.Strings(raw)
		if got, ok := a.doc[ax.member].(string); ok && contains(allowed, got) {
			v.pass("the act, rebuilt to its action hash, names %s %s, within the %s of %s", ax.member, got, ax.axis, m.id)
		} else {
			v.fail("the act, rebuilt to its action hash, names %s %s, outside the %s of %s", ax.member, show(a.doc[ax.member]), ax.axis, m.id)
		}
	}
	if cps, ok := canonical.Strings(scope["counterparty_organization_ids"]); ok {
		if other := r.counterparty(txn, org); other == "" {
			v.unsure("the counterparty of %s on %s is not established from the bundle", org, txn)
		} else if !contains(cps, other) {
			v.fail("%s does not allow dealing with %s", m.id, other)
		}
	}
}

// counterparty is the other party of txn, as an agreement or offer in the
// bundle names the two, or "" if the bundle does not say.
func (r *run) counterparty(txn, org string) string {
	p, ok := r.parties[txn]
	switch {
	case !ok:
		return ""
	case org == p[0]:
		return p[1]
	case org == p[1]:
		return p[0]
	}
	return ""
}

// revoked fails v when the revocation_records in the bundle about
// subjectID, whose own bytes verify, had it out of service at t: the
// latest of them effective at or before t states a status other than
// active (a reinstatement after a suspension puts it back in service,
// commercial mandate §9); when that one took effect in t's own second,
// the order is not established. One effective only after t is named in
// a pass, so a reader of a counterparty's record sees that the mandate
// was revoked later and that the event came before.
//
// Only the issuing organisation (issuer) changes its mandate's status
// (commercial mandate §9): a record made by anyone else, the other party
// of the record say, is named and changes nothing.
func (r *run) revoked(v *verdict, subjectType, subjectID, issuer string, t time.Time) {
	var latest *object
	var latestAt time.Time
	var later []string
	for _, o := range r.revocations {
		if str(o.payload, "subject_type") != subjectType || str(o.payload, "subject_id") != subjectID {
			continue
		}
		if by, _ := objAt(o.val, "created_by"); str(by, "organization_id") != issuer {
			later = append(later, fmt.Sprintf("%s, about %s, is made by %s, not by its issuer %s, and changes nothing", o.subject, subjectID, str(by, "organization_id"), issuer))
			continue
		}
		status := str(o.payload, "status")
		at, ok := timeAt(o.payload, "effective_at")
		if !ok {
			continue
		}
		if !o.hashOK() {
			if status != "active" && !t.Before(at) {
				v.unsure("%s would take %s out of service but does not hash to its content_hash", o.subject, subjectID)
			}
			continue
		}
		if t.Before(at) {
			if status != "active" {
				later = append(later, fmt.Sprintf("%s records %s as %s from %s, after this event", o.subject, subjectID, status, str(o.payload, "effective_at")))
			}
			continue
		}
		// Of two changes in one second, the one out of service counts:
		// the order of records in a bundle says nothing.
		if latest == nil || at.After(latestAt) || at.Equal(latestAt) && status != "active" {
			latest, latestAt = o, at
		}
	}
	if latest != nil {
		switch status := str(latest.payload, "status"); {
		case status == "active":
		case latestAt.Equal(t):
			// Both instants are whole seconds: an act the mandate still
			// allowed and its revocation a moment later read alike.
			v.unsure("%s records %s as %s from %s, the second the event occurred: the bundle cannot tell which came first", latest.subject, subjectID, status, str(latest.payload, "effective_at"))
		default:
			v.fail("%s records %s as %s from %s", latest.subject, subjectID, status, str(latest.payload, "effective_at"))
		}
	}
	for _, l := range later {
		v.pass("%s", l)
	}
}

// decision checks the policy decision the event names.
func (r *run) decision(e *object) {
	var v verdict
	pid, ok := strAt(e.payload, "policy_decision_id")
	if !ok {
		r.add(5, "policy_decision", e.subject, Failed, reason.EvidenceTransitionIllegal, "the event names no policy decision")
		return
	}
	d, held := r.byID[pid]
	if !held {
		r.add(5, "policy_decision", e.subject, NotCheckable, "", fmt.Sprintf("%s is not in the bundle: a decision the deciding party did not disclose is not checkable, never verified", pid))
		r.missing(pid)
		return
	}
	if d.typ != protocol.PolicyDecision {
		r.add(5, "policy_decision", e.subject, Failed, reason.EvidenceTransitionIllegal, fmt.Sprintf("%s is a %s, not a policy decision", pid, d.typ))
		return
	}
	if !d.hashOK() {
		v.fail("%s does not hash to its content_hash", pid)
	}
	if dec := str(d.payload, "decision"); dec != "allow" {
		v.fail("%s decided %q, and only an allow enters the record", pid, dec)
	}
	if str(d.payload, "action_hash") != str(e.payload, "action_hash") {
		v.fail("%s is bound to action %s, the event to %s", pid, short(str(d.payload, "action_hash")), short(str(e.payload, "action_hash")))
	} else {
		v.pass("%s allows the event's action %s", pid, short(str(e.payload, "action_hash")))
	}
	by, _ := objAt(e.val, "created_by")
	dby, _ := objAt(d.val, "created_by")
	org := str(by, "organization_id")
	if str(dby, "organization_id") != org {
		v.fail("%s was made by %s, not by the acting party %s: a party decides only its own acts", pid, str(dby, "organization_id"), org)
	}
	if mids, _ := canonical.Strings(d.payload["mandate_ids"]); !contains(mids, str(by, "mandate_id")) {
		v.fail("%s does not name the mandate %s the event was appended under", pid, str(by, "mandate_id"))
	}
	r.decisionPosition(&v, d, e)
	v.take(r.signedBy(d, org))
	res, detail := v.result()
	r.add(5, "policy_decision", e.subject, res, reason.EvidenceTransitionIllegal, detail)
}

// decisionPosition checks where a decision was made for (canonical model
// §9 step 3; kernel policyDecision stream and stream_sequence): on the
// event's own stream, and at a position no later than the event's, since
// a decision precedes what it allows. A record may let one decision cover
// the events that complete one act, as the published reference's record
// does for agreement.direct and agreement.committed. A countersigner asks
// more (Extend): between two party instances every event cites a fresh
// decision for its own act and its own position (docs/record-protocol.md
// decision 6), so a decision for another position is refused before
// signing.
func (r *run) decisionPosition(v *verdict, d, e *object) {
	ds, _ := objAt(d.payload, "stream")
	es, _ := objAt(e.payload, "stream")
	if str(ds, "kind") != str(es, "kind") || str(ds, "id") != str(es, "id") {
		v.fail("%s was made for stream %s:%s, the event is on %s:%s", d.id, orNone(str(ds, "kind")), orNone(str(ds, "id")), orNone(str(es, "kind")), orNone(str(es, "id")))
	}
	dseq, ok1 := intAt(d.payload, "stream_sequence")
	eseq, ok2 := intAt(e.payload, "sequence")
	switch {
	case !ok1 || !ok2:
		v.fail("the position %s was made for, or the event's, is not an integer", d.id)
	case dseq > eseq:
		v.fail("%s was made for position %d of its stream, after the event at %d", d.id, dseq, eseq)
	case r.opt.awaiting[e.id] && dseq != eseq:
		v.fail("%s was made for position %d of its stream, the event is at %d: a countersigned event cites a decision made for its own position", d.id, dseq, eseq)
	}
}

// obligationVersions replays the state an obligation's consecutive
// versions record against the obligation table.
func (r *run) obligationVersions() {
	for _, o := range r.objs {
		if o.typ != protocol.Obligation {
			continue
		}
		prevID, ok := strAt(o.val, "previous_version_id")
		if !ok {
			continue
		}
		p, held := r.byID[prevID]
		if !held || p.typ != protocol.Obligation {
			continue // the version chain check says why
		}
		from, to := str(p.payload, "state"), str(o.payload, "state")
		if from == to {
			continue
		}
		version := r.opt.RulesVersion
		if !knownRules(version) {
			r.add(5, "obligation_state", o.subject, NotCheckable, "", fmt.Sprintf("rules version %q does not resolve", version))
			continue
		}
		var via []string
		for _, t := range rules.Table(version, rules.Obligation) {
			if t.From == from && (t.To == to || (t.To == rules.Determined && rules.IsState(rules.Obligation, to))) {
				via = append(via, string(t.Event))
			}
		}
		if len(via) == 0 {
			r.add(5, "obligation_state", o.subject, Failed, reason.EvidenceTransitionIllegal,
				fmt.Sprintf("no obligation transition leads from %s to %s under rules %s", from, to, version))
		} else {
			r.add(5, "obligation_state", o.subject, Verified, "", fmt.Sprintf("%s to %s by %s under rules %s", from, to, strings.Join(via, " or "), version))
		}
	}
}
