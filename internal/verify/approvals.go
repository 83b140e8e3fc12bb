package verify

import (
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Approvals (commercial mandate §8; spec-map §3.9). A mandate's approval
// rule holds any act its `when` matches until a principal of the acting
// organisation, in the role the rule names, approves that exact act. The
// record shows whether that happened: the act is rebuilt (acts.go), each
// rule of the acting mandate's chain is evaluated over it (when.go), and
// every rule that applies needs an approval object in the bundle that
//
//   - binds the act's action_hash, on the act's transaction;
//   - hashes to its content_hash and decides "approved";
//   - names as approver the organisation and role the rule names, and that
//     organisation is the acting one;
//   - is signed for object_issuance by a key the bundle shows is the acting
//     organisation's (a trusted key_record naming it as controller), that
//     is not an agent's key (an agent approving its own act) nor another
//     principal's, and that was active when it signed;
//   - was created no later than the act and had not expired at it, and
//     lives no longer than the rule's expires_after_seconds.
//
// The check `approval` (step 5, on each event whose acting mandate the
// bundle holds) is verified when every rule that applies found such an
// approval, or no rule applies, or the chain states none;
// A202-APPROVAL-REQUIRED when a rule applies and no approval releases it,
// A202-APPROVAL-HASH-MISMATCH when the bundle holds no approval of the act
// but an approval on the transaction binds another act; not_checkable when
// the act cannot be rebuilt to the recorded action_hash, a parent mandate
// is not held, or a signature or key_record the decision rests on cannot
// be checked. A `when` the evaluator could not read for its own form
// denies every act under that mandate, so an allow recorded under it
// fails with A202-MANDATE-CONSTRAINT-UNKNOWN.

// rule is one approval rule of one mandate.
type rule struct {
	mandate      *mandate
	id           string
	when         map[string]any
	org, role    string
	expiresAfter int64 // seconds; 0 when unreadable
}

// rulesOf returns the approval rules of m and of its parents, in chain
// order, or why they are not all known.
func (r *run) rulesOf(m *mandate) ([]rule, string) {
	var out []rule
	seen := map[string]bool{}
	for cur, depth := m, 0; ; depth++ {
		if seen[cur.id] || depth > maxDelegation {
			return out, fmt.Sprintf("the delegation chain of %s loops or is deeper than %d", m.id, maxDelegation)
		}
		seen[cur.id] = true
		raw, present := cur.val["approval_rules"]
		list, ok := raw.([]any)
		if present && !ok {
			return out, fmt.Sprintf("the approval_rules of %s are not an array", cur.id)
		}
		for i, x := range list {
			rm, _ := x.(map[string]any)
			ru := rule{mandate: cur, id: str(rm, "id")}
			if ru.id == "" {
				ru.id = fmt.Sprintf("#%d", i)
			}
			ru.when, _ = objAt(rm, "when")
			approver, _ := objAt(rm, "approver")
			ru.org, ru.role = str(approver, "organization_id"), str(approver, "role")
			ru.expiresAfter, _ = intAt(rm, "expires_after_seconds")
			out = append(out, ru)
		}
		pid, delegated := strAt(cur.val, "parent_mandate_id")
		if !delegated {
			return out, ""
		}
		parent, held := r.mandateBy[pid]
		if !held {
			r.missing(pid)
			return out, fmt.Sprintf("the parent mandate %s is not in the bundle, so its approval rules are unknown", pid)
		}
		cur = parent
	}
}

// outcome is a settled check: a result, the code of a failure, a detail.
type outcome struct {
	res    Result
	code   reason.Code
	detail string
}

// approvalsGiven settles whether every approval the approval rules of m's
// chain call for was given for a, performed by org on txn at the instant
// at (atOK false: not readable).
func (r *run) approvalsGiven(a act, m *mandate, org, txn string, at time.Time, atOK bool) outcome {
	rules, why := r.rulesOf(m)
	if why != "" {
		return outcome{res: NotCheckable, detail: why}
	}
	if len(rules) == 0 {
		return outcome{res: Verified, detail: fmt.Sprintf("no mandate of the chain of %s states approval rules", m.id)}
	}
	if !a.matches {
		return outcome{res: NotCheckable, detail: fmt.Sprintf("mandate %s states approval rules; whether every approval they call for was given is not established, because %s", rules[0].mandate.id, a.why)}
	}
	if !atOK {
		return outcome{res: NotCheckable, detail: "the time of the act is not readable, so no approval can be placed before it"}
	}
	var failed, unknown, passed []string
	var code reason.Code
	for _, ru := range rules {
		got, why := evalWhen(ru.when, a.doc)
		name := fmt.Sprintf("rule %s of %s", ru.id, ru.mandate.id)
		switch got {
		case whenNoMatch:
			passed = append(passed, fmt.Sprintf("%s does not apply to the %s act (%s)", name, a.name, why))
		case whenOpen:
			unknown = append(unknown, fmt.Sprintf("whether %s applies is not established: %s", name, why))
		case whenBroken:
			failed = append(failed, fmt.Sprintf("%s cannot be evaluated (%s): an evaluator denies every act under it, so no allow could have been given", name, why))
			if code == "" {
				code = reason.MandateConstraintUnknown
			}
		case whenMatches:
			o := r.approvalFor(ru, a, org, txn, at)
			detail := fmt.Sprintf("%s applies to the %s act %s (%s): %s", name, a.name, short(a.hash), why, o.detail)
			switch o.res {
			case Verified:
				passed = append(passed, detail)
			case Failed:
				failed = append(failed, detail)
				if code == "" {
					code = o.code
				}
			default:
				unknown = append(unknown, detail)
			}
		}
	}
	switch {
	case len(failed) > 0:
		d := strings.Join(failed, "; ")
		if len(unknown) > 0 {
			d += "; also not established: " + strings.Join(unknown, "; ")
		}
		return outcome{res: Failed, code: code, detail: d}
	case len(unknown) > 0:
		return outcome{res: NotCheckable, detail: "not established: " + strings.Join(unknown, "; ")}
	}
	return outcome{res: Verified, detail: strings.Join(passed, "; ")}
}

// approvalFor looks for an approval releasing ru's hold on a.
func (r *run) approvalFor(ru rule, a act, org, txn string, at time.Time) outcome {
	var bound []*object
	var others []string
	for _, o := range r.objs {
		if o.typ != protocol.Approval {
			continue
		}
		if str(o.payload, "action_hash") == a.hash {
			bound = append(bound, o)
		} else if str(o.val, "transaction_id") == txn {
			others = append(others, o.subject)
		}
	}
	if len(bound) == 0 {
		if len(others) > 0 {
			return outcome{res: Failed, code: reason.ApprovalHashMismatch,
				detail: fmt.Sprintf("no approval binds this act; %s on %s bind(s) another act", strings.Join(others, ", "), txn)}
		}
		return outcome{res: Failed, code: reason.ApprovalRequired, detail: "the bundle holds no approval of this act"}
	}
	var problems, unknowns []string
	for _, o := range bound {
		bad, open := r.approvalProblems(o, ru, org, txn, at)
		switch {
		case len(bad) == 0 && len(open) == 0:
			p := o.payload
			who, _ := objAt(p, "approver")
			return outcome{res: Verified, detail: fmt.Sprintf("%s approves it, by %s (%s of %s), created %s, expiring %s",
				o.subject, str(who, "principal_id"), str(who, "role"), str(who, "organization_id"), str(o.val, "created_at"), str(p, "expires_at"))}
		case len(bad) == 0:
			unknowns = append(unknowns, fmt.Sprintf("%s: %s", o.subject, strings.Join(open, "; ")))
		default:
			problems = append(problems, fmt.Sprintf("%s does not release it: %s", o.subject, strings.Join(bad, "; ")))
		}
	}
	if len(unknowns) > 0 {
		return outcome{res: NotCheckable, detail: strings.Join(append(unknowns, problems...), "; ")}
	}
	return outcome{res: Failed, code: reason.ApprovalRequired, detail: strings.Join(problems, "; ")}
}

// approvalProblems lists why approval o, binding the act's hash, does not
// release ru's hold on an act of org on txn at the instant at (bad), and
// what about it could not be established (open).
func (r *run) approvalProblems(o *object, ru rule, org, txn string, at time.Time) (bad, open []string) {
	p := o.payload
	if !o.hashOK() {
		bad = append(bad, "it does not hash to its content_hash")
	}
	if t := str(o.val, "transaction_id"); t != txn {
		bad = append(bad, fmt.Sprintf("it is on transaction %s, the act on %s", orNone(t), txn))
	}
	if d := str(p, "decision"); d != "approved" {
		bad = append(bad, fmt.Sprintf("its decision is %s", show(p["decision"])))
	}
	who, _ := objAt(p, "approver")
	aOrg, role, principal := str(who, "organization_id"), str(who, "role"), str(who, "principal_id")
	if aOrg != ru.org || role != ru.role {
		bad = append(bad, fmt.Sprintf("the approver is %s of %s, the rule names %s of %s", orNone(role), orNone(aOrg), orNone(ru.role), orNone(ru.org)))
	}
	if aOrg != org {
		bad = append(bad, fmt.Sprintf("the approver is of %s, the act is %s's", orNone(aOrg), org))
	}
	created, ok1 := timeAt(o.val, "created_at")
	expires, ok2 := timeAt(p, "expires_at")
	switch {
	case !ok1 || !ok2:
		bad = append(bad, "its created_at or expires_at is not readable")
	case created.After(at):
		bad = append(bad, fmt.Sprintf("it was created at %s, after the act at %s", str(o.val, "created_at"), envelope.Timestamp(at)))
	case !at.Before(expires):
		bad = append(bad, fmt.Sprintf("it expired at %s, not after the act at %s", str(p, "expires_at"), envelope.Timestamp(at)))
	case ru.expiresAfter > 0 && expires.Sub(created) > time.Duration(ru.expiresAfter)*time.Second:
		bad = append(bad, fmt.Sprintf("it lives %s, longer than the rule's %d seconds", expires.Sub(created), ru.expiresAfter))
	}
	sigBad, sigOpen := r.approverSigned(o, org, principal)
	bad = append(bad, sigBad...)
	open = append(open, sigOpen...)
	return bad, open
}

// approverSigned settles whether some object_issuance signature of o is
// by a live key of org that is not an agent's nor another principal's.
// It returns nothing when one is, and otherwise why not (bad) or what
// could not be checked (open).
func (r *run) approverSigned(o *object, org, principal string) (bad, open []string) {
	var why []string
	for i, sc := range o.sigs {
		if sc.purpose != "object_issuance" {
			continue
		}
		switch sc.result {
		case Verified:
		case NotCheckable:
			open = append(open, fmt.Sprintf("signature[%d] could not be checked (%s)", i, sc.detail))
			continue
		default:
			why = append(why, fmt.Sprintf("signature[%d] does not verify", i))
			continue
		}
		ctl := r.recordController(sc.keyID)
		switch {
		case ctl == "":
			open = append(open, fmt.Sprintf("no key_record in the bundle establishes whose key %s is", sc.keyID))
			continue
		case ctl != org:
			why = append(why, fmt.Sprintf("it is signed with %s, a key of %s", sc.keyID, ctl))
			continue
		}
		if agent, m := r.agentKey(sc.keyID); agent != "" {
			why = append(why, fmt.Sprintf("it is signed with %s, agent %s's key under %s: the agent would be approving its own act", sc.keyID, agent, m))
			continue
		}
		if holder := r.principalKey(sc.keyID); holder != "" && holder != principal {
			why = append(why, fmt.Sprintf("it is signed with %s, the key of %s, not of the approver %s", sc.keyID, holder, orNone(principal)))
			continue
		}
		switch res, d := r.atSigning(sc.keyID, sc.signedAt); res {
		case Verified:
			return nil, nil
		case NotCheckable:
			open = append(open, d)
		default:
			why = append(why, d)
		}
	}
	if len(open) > 0 {
		return nil, open
	}
	if len(why) == 0 {
		why = append(why, "it carries no object_issuance signature")
	}
	return why, nil
}

// recordController is the organisation a trusted key_record of keyID
// names as the key's controller, or "".
func (r *run) recordController(keyID string) string {
	for _, v := range r.chain(keyID).versions {
		if v.Trusted && v.Controller != "" {
			return v.Controller
		}
	}
	return ""
}

// agentKey returns the agent whose key keyID is, as a mandate with a
// verified proof names it as its subject's key, and that mandate.
func (r *run) agentKey(keyID string) (string, string) {
	for _, m := range r.mandates {
		if m.proof.result != Verified {
			continue
		}
		subj, _ := objAt(m.val, "subject")
		if str(subj, "key_id") == keyID && str(subj, "agent_id") != "" {
			return str(subj, "agent_id"), m.id
		}
	}
	return "", ""
}

// principalKey returns the principal whose key keyID is, as a mandate
// with a verified proof names it as its issuer's key, or "".
func (r *run) principalKey(keyID string) string {
	for _, m := range r.mandates {
		if m.proof.result != Verified {
			continue
		}
		iss, _ := objAt(m.val, "issuer")
		if str(iss, "key_id") == keyID {
			return str(iss, "principal_id")
		}
	}
	return ""
}

// approval is the step-5 check on an event: every approval the acting
// mandate's chain calls for over the event's act was given. An event
// whose mandate the bundle does not hold has no such check; its
// mandate_authority says the mandate is missing.
func (r *run) approval(e *object, a act) {
	by, _ := objAt(e.val, "created_by")
	m, held := r.mandateBy[str(by, "mandate_id")]
	if !held {
		return
	}
	at, ok := timeAt(e.payload, "occurred_at")
	o := r.approvalsGiven(a, m, str(by, "organization_id"), str(e.val, "transaction_id"), at, ok)
	r.add(5, "approval", e.subject, o.res, o.code, o.detail)
}

// formationApprovals is the "approvals complete" part of
// agreement.committed's guard (pilot state machine §5.3; canonical model
// §10 steps 4–5): the approvals called for by every act that formed the
// agreement were given. Those acts are the offeror's offer.submit, the
// offeree's offer.accept (agreement.direct), and each party's
// agreement.sign (this event's appender's, and the countersigner's). An
// act with an event is rebuilt from it; one without (the offer, the
// countersignature) is found through its party's policy decision, and is
// looked at only when a mandate of that party states approval rules.
func (r *run) formationApprovals(v *verdict, s *stream, i int, e *object, agr *object) {
	txn := str(e.val, "transaction_id")
	events := []*object{e}
	for j := i - 1; j >= 0; j-- {
		if eventType(s.events[j].payload) == protocol.EvAgreementDirect {
			events = append(events, s.events[j])
			break
		}
	}
	for _, ev := range events {
		by, _ := objAt(ev.val, "created_by")
		m, held := r.mandateBy[str(by, "mandate_id")]
		if !held {
			v.unsure("the mandate %s of %s is not in the bundle, so the approvals its act called for are unknown", orNone(str(by, "mandate_id")), ev.subject)
			r.missing(str(by, "mandate_id"))
			continue
		}
		at, ok := timeAt(ev.payload, "occurred_at")
		o := r.approvalsGiven(r.eventAct(ev, m), m, str(by, "organization_id"), txn, at, ok)
		v.take(o.res, fmt.Sprintf("approvals for %s: %s", ev.subject, o.detail))
	}
	terms, _ := objAt(agr.payload, "terms")

	// The offeror's offer.submit, under the mandate the offer names.
	offerID := str(agr.payload, "accepted_offer_id")
	if offer, held := r.byID[offerID]; !held || offer.typ != protocol.Offer {
		v.unsure("the offer %s is not in the bundle, so the approvals the offeror's act called for are unknown", orNone(offerID))
	} else {
		by, _ := objAt(offer.val, "created_by")
		offeror := partyOrg(offer.payload, "offeror")
		m, held := r.mandateBy[str(by, "mandate_id")]
		if !held {
			v.unsure("the mandate %s of %s is not in the bundle, so the approvals the offeror's act called for are unknown", orNone(str(by, "mandate_id")), offer.subject)
			r.missing(str(by, "mandate_id"))
		} else {
			offerTerms, _ := objAt(offer.payload, "terms")
			// The side the offeror stated in its act is the side the
			// agreement gives it (authority.OfferRefs).
			role := protocol.Supplier
			if partyOrg(agr.payload, "buyer") == offeror {
				role = protocol.Buyer
			}
			r.decidedApprovals(v, "offer.submit", offeror, txn, offerTerms, authority.OfferRefs(role), []*mandate{m}, offer.subject)
		}
	}

	// The countersigner's agreement.sign, under whichever of its mandates
	// its policy decision names.
	by, _ := objAt(e.val, "created_by")
	other := r.counterparty(txn, str(by, "organization_id"))
	if other == "" {
		v.unsure("the countersigning party of %s is not established from the bundle", agr.subject)
		return
	}
	candidates := r.mandatesOf(other)
	if len(candidates) == 0 {
		v.unsure("no mandate of %s is in the bundle, so the approvals its agreement.sign called for are unknown", other)
		return
	}
	r.decidedApprovals(v, "agreement.sign", other, txn, terms, map[string]any{"agreement_id": agr.id}, candidates, agr.subject)
}

// mandatesOf returns the bundle's mandates that represent org.
func (r *run) mandatesOf(org string) []*mandate {
	var out []*mandate
	for _, m := range r.mandates {
		if str(m.val, "represented_organization_id") == org {
			out = append(out, m)
		}
	}
	return out
}

// decidedApprovals folds into v the approvals an act without an event of
// its own called for: nothing when none of the candidate mandates' chains
// states approval rules; otherwise the act is found through its policy
// decision (decidedAct) and judged as an event's act is, at the instant
// the decision was made.
func (r *run) decidedApprovals(v *verdict, name, org, txn string, terms, refs map[string]any, candidates []*mandate, subject string) {
	var ruled []*mandate
	for _, m := range candidates {
		rules, why := r.rulesOf(m)
		if why != "" {
			v.unsure("%s's %s on %s: %s", org, name, subject, why)
			return
		}
		if len(rules) > 0 {
			ruled = append(ruled, m)
		}
	}
	if len(ruled) == 0 {
		v.pass("no mandate of %s held for its %s states approval rules", org, name)
		return
	}
	a, m, at, found := r.decidedAct(name, org, txn, terms, refs, candidates)
	if !found {
		v.unsure("%s states approval rules, and %s's %s act on %s is not established: no policy decision in the bundle binds it as rebuilt from the record", ruled[0].id, org, name, subject)
		return
	}
	o := r.approvalsGiven(a, m, org, txn, at, true)
	v.take(o.res, fmt.Sprintf("approvals for %s's %s: %s", org, name, o.detail))
}

// standaloneApproval is the check `approval` on a dispute or a
// determination (acts dispute.raise and determination.issue), which no
// event of their own records: every approval the acting mandate's chain
// calls for over the act was given. The act is rebuilt as the acting
// instance built it, over the transaction as a whole (the terms in force
// and their agreement_id, or, before any agreement, the latest offer's
// terms; and the one reference refName), and found through the party's
// policy decision that binds it (decidedAct), trying each agreement
// version and offer of the transaction: the action hash picks the one
// the act was made over. Like an event's, the check is made only when the
// bundle holds the acting mandate.
func (r *run) standaloneApproval(o *object, name, refName string) {
	by, _ := objAt(o.val, "created_by")
	m, held := r.mandateBy[str(by, "mandate_id")]
	if !held {
		return
	}
	rules, why := r.rulesOf(m)
	switch {
	case why != "":
		r.add(5, "approval", o.subject, NotCheckable, "", why)
		return
	case len(rules) == 0:
		r.add(5, "approval", o.subject, Verified, "", fmt.Sprintf("no mandate of the chain of %s states approval rules", m.id))
		return
	}
	org, txn := str(by, "organization_id"), str(o.val, "transaction_id")
	ref := str(o.payload, refName)
	type candidate struct{ terms, refs map[string]any }
	var cands []candidate
	for _, x := range r.objs {
		if str(x.val, "transaction_id") != txn {
			continue
		}
		terms, _ := objAt(x.payload, "terms")
		switch x.typ {
		case protocol.Agreement:
			cands = append(cands, candidate{terms, map[string]any{"agreement_id": x.id, refName: ref}})
		case protocol.Offer:
			cands = append(cands, candidate{terms, map[string]any{refName: ref}})
		}
	}
	for _, c := range cands {
		if a, am, at, found := r.decidedAct(name, org, txn, c.terms, c.refs, []*mandate{m}); found {
			out := r.approvalsGiven(a, am, org, txn, at, true)
			r.add(5, "approval", o.subject, out.res, out.code, out.detail)
			return
		}
	}
	r.add(5, "approval", o.subject, NotCheckable, "", fmt.Sprintf("%s states approval rules, and %s's %s act is not established: no policy decision in the bundle binds it as rebuilt from the record", rules[0].mandate.id, org, name))
}
