package verify

import (
	"fmt"
	"strings"

	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Step 5, continued: the guards the objects carry themselves. Four rules
// of the kernel documents are guards of a transition (pilot state
// machine §5, obligation §6.1) that hold or not by the objects alone, so
// they are judged on the objects whether or not the bundle discloses the
// event, as consecutive obligation versions are:
//
//   - agreement_amendment, on a later agreement version: it was formed on
//     a fresh offer and a fresh acceptance, not on its predecessor's
//     (canonical model §10.1; agreement.amended's guard),
//     A202-AGREEMENT-AMENDMENT-UNACCEPTED. It sits in step 5 rather than
//     step 1 because it compares references, not hashes: it is the
//     condition under which a record may move to the new version.
//   - obligation_parties and obligation_subject_term, on an obligation:
//     its obligor and obligee are the parties of its agreement, its
//     subject's profile is the agreement's and its term path resolves in
//     the agreement's terms (obligation §3, §3.1; obligation.activated's
//     guard), A202-OBLIGATION-SUBJECT-UNREFERENCED. The subject's terms
//     hash is step 1's subject_terms_hash.
//   - commitment_binding, on a commitment: its committed party is one of
//     its agreement's parties as the agreement names it (organisation and
//     agent), and its subject's profile and term path are the agreement's
//     (kernel schema, commitmentPayload: a reference into the terms, never
//     a restatement), A202-AGREEMENT-HASH-MISMATCH (decided,
//     docs/record-protocol.md). The subject's terms hash is step 1's.
//   - due_condition_acyclic, on an obligation whose due condition waits
//     on the discharge of another: no obligation on a cycle of such
//     conditions could ever become due (obligation §4; obligation.due's
//     guard), A202-OBLIGATION-CONDITION-CYCLIC.
//   - approval, on a dispute and on a determination: acts that no event
//     of their own records (docs/record-protocol.md, "Exceptions and
//     disputes (issue 17, items 1–8)"),
//     judged as an event's act is (approvals.go), the act found through
//     its party's policy decision (standaloneApproval).
//   - acceptance_remainder, on an accepting response: accepting less than
//     owed names a remainder obligation of the same agreement and subject
//     for the difference (obligation §5.2 rule 3; acceptance.granted's
//     guard), A202-OBLIGATION-REMAINDER-MISSING.
func (r *run) objectGuards() {
	var cyclic map[string][]gate.Problem
	for _, o := range r.objs {
		switch o.typ {
		case protocol.Agreement:
			r.amendment(o)
		case protocol.Commitment:
			r.commitmentAgreement(o)
		case protocol.Obligation:
			r.obligationAgreement(o)
			if len(gate.DischargeTargets(o.payload["due_condition"])) > 0 {
				if cyclic == nil {
					cyclic = map[string][]gate.Problem{}
					for _, p := range gate.CheckConditionCycles(r.values()) {
						cyclic[p.Object] = append(cyclic[p.Object], p)
					}
				}
				r.acyclic(o, cyclic[o.id])
			}
		case protocol.Evidence:
			r.recordSignature(o)
			r.remediationSignature(o)
			r.adjustmentSignature(o)
		case protocol.Dispute:
			r.standaloneApproval(o, "dispute.raise", "subject_id")
		case protocol.Determination:
			r.standaloneApproval(o, "determination.issue", "dispute_id")
		case protocol.ObligationResponse:
			switch str(o.payload, "response_type") {
			case "accept":
				r.remainder(o)
			case "waive":
				r.waiverState(o)
			}
		}
	}
}

func (r *run) amendment(o *object) {
	prevID, ok := strAt(o.val, "previous_version_id")
	if !ok {
		return
	}
	prev, held := r.byID[prevID]
	switch {
	case !held:
		r.add(5, "agreement_amendment", o.subject, NotCheckable, "",
			prevID+" is not in the bundle: whether this version reuses its offer or acceptance is not established")
		r.missing(prevID)
		return
	case prev.typ != protocol.Agreement:
		return // the version chain check says why
	}
	ps := r.bindings([]map[string]any{o.val, prev.val}, o.id, reason.AgreementAmendmentUnaccepted)
	r.fromGate(5, "agreement_amendment", o.subject, ps, fmt.Sprintf("formed on offer %s and acceptance %s, neither of them %s's",
		orNone(str(o.payload, "accepted_offer_id")), orNone(str(o.payload, "acceptance_id")), prevID))
}

// commitmentAgreement reports commitment_binding: the commitment's
// committed party is one of its agreement's parties, as the agreement
// names it, and its subject's profile and term path are the agreement's
// (gate.CheckBindings, the commitment rule).
func (r *run) commitmentAgreement(o *object) {
	agr, agrID, ok := r.agreementOf(o, "commitment_binding")
	if !ok {
		return
	}
	subj, _ := objAt(o.payload, "subject")
	r.fromGate(5, "commitment_binding", o.subject, r.bindings([]map[string]any{o.val, agr.val}, o.id, reason.AgreementHashMismatch),
		fmt.Sprintf("committed party %s is a party to %s, and profile %s and term path %s are its terms'", orNone(partyOrg(o.payload, "committed_party")), agrID,
			orNone(str(subj, "profile")), orNone(str(subj, "term_path"))))
}

// agreementOf returns the agreement o (an obligation, a commitment)
// names, and its id. When the bundle does not hold it, each of rules is
// not checkable for o and ok is false; when o names none, or names
// something else, step 1 says so and ok is false, nothing added here.
func (r *run) agreementOf(o *object, rules ...string) (agr *object, agrID string, ok bool) {
	agrID, ok = strAt(o.payload, "agreement_id")
	if !ok {
		return nil, "", false
	}
	agr, held := r.byID[agrID]
	switch {
	case !held:
		for _, name := range rules {
			r.add(5, name, o.subject, NotCheckable, "", fmt.Sprintf("the agreement %s is not in the bundle, so its parties and terms are not known", agrID))
		}
		r.missing(agrID)
		return nil, agrID, false
	case agr.typ != protocol.Agreement:
		return nil, agrID, false
	}
	return agr, agrID, true
}

func (r *run) obligationAgreement(o *object) {
	agr, agrID, ok := r.agreementOf(o, "obligation_parties", "obligation_subject_term")
	if !ok {
		return
	}
	ps := r.bindings([]map[string]any{o.val, agr.val}, o.id, reason.ObligationSubjectUnreferenced)
	r.fromGate(5, "obligation_parties", o.subject, atPaths(ps, "/payload/obligor", "/payload/obligee"),
		fmt.Sprintf("obligor %s and obligee %s are parties to %s", orNone(partyOrg(o.payload, "obligor")), orNone(partyOrg(o.payload, "obligee")), agrID))
	subj, _ := objAt(o.payload, "subject")
	r.fromGate(5, "obligation_subject_term", o.subject, atPaths(ps, "/payload/subject/profile", "/payload/subject/term_path"),
		fmt.Sprintf("profile %s is that of %s and term path %s resolves in its terms", orNone(str(subj, "profile")), agrID, orNone(str(subj, "term_path"))))
}

// acyclic reports due_condition_acyclic for an obligation that waits on
// another's discharge. Off a cycle among the obligations held, it is
// verified only if every obligation it waits on, directly or through
// others, is held: a cycle could pass through one that is not.
func (r *run) acyclic(o *object, cycle []gate.Problem) {
	if len(cycle) > 0 {
		r.fromGate(5, "due_condition_acyclic", o.subject, cycle, "")
		return
	}
	seen := map[string]bool{o.id: true}
	queue := gate.DischargeTargets(o.payload["due_condition"])
	direct := strings.Join(queue, ", ")
	var absent []string
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		t, held := r.heldAs(id, protocol.Obligation)
		if !held {
			absent = append(absent, id)
			r.missing(id)
			continue
		}
		queue = append(queue, gate.DischargeTargets(t.payload["due_condition"])...)
	}
	if len(absent) > 0 {
		r.add(5, "due_condition_acyclic", o.subject, NotCheckable, "", fmt.Sprintf("it waits on the discharge of %s; %s not in the bundle, so a cycle through %s is not excluded",
			direct, strings.Join(absent, ", "), plural(len(absent), "it is", "they are")))
		return
	}
	r.add(5, "due_condition_acyclic", o.subject, Verified, "", fmt.Sprintf("it waits on the discharge of %s, and no chain of discharge conditions leads back to it", direct))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (r *run) remainder(o *object) {
	p := o.payload
	oblID := str(p, "obligation_id")
	obl, held := r.heldAs(oblID, protocol.Obligation)
	if !held {
		r.add(5, "acceptance_remainder", o.subject, NotCheckable, "", fmt.Sprintf("the obligation %s is not in the bundle, so the quantity owed is not known", orNone(oblID)))
		r.missing(oblID)
		return
	}
	set := []map[string]any{o.val, obl.val}
	remID, named := strAt(p, "remainder_obligation_id")
	rem, remHeld := r.heldAs(remID, protocol.Obligation)
	if remHeld {
		set = append(set, rem.val)
	}
	ps := r.bindings(set, o.id, reason.ObligationRemainderMissing, reason.TermsInvalid)
	if len(ps) > 0 {
		r.fromGate(5, "acceptance_remainder", o.subject, ps, "")
		return
	}
	// The gate found nothing: the quantities parse, and either the whole
	// quantity was accepted or a remainder is named.
	owed, _ := decimal.ParseQuantity(str(obl.payload, "quantity"))
	accepted, _ := decimal.ParseQuantity(str(p, "accepted_quantity"))
	switch {
	case accepted.Cmp(owed) >= 0:
		r.add(5, "acceptance_remainder", o.subject, Verified, "", fmt.Sprintf("accepts %s of the %s owed: no remainder is due", accepted, owed))
	case named && !remHeld:
		r.add(5, "acceptance_remainder", o.subject, NotCheckable, "",
			fmt.Sprintf("accepts %s of %s and names the remainder %s, which is not in the bundle: whether it owes the difference is not established", accepted, owed, remID))
		r.missing(remID)
	default:
		r.add(5, "acceptance_remainder", o.subject, Verified, "",
			fmt.Sprintf("accepts %s of %s and names the remainder %s, of the same agreement and subject, for the difference", accepted, owed, remID))
	}
}
