package verify

import (
	"fmt"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
)

// Step 6: disputes and determinations (§4 step 6; determination §3–§6).
// What the bundle alone decides is judged, through the gate's own rules
// (gate.Envelope for what one object shows, gate.CheckBindings for what
// it shows against the objects it names); what needs the content of the
// rules is stated as not_checkable.
//
// On each dispute:
//   - dispute_subject: the subject is named by content hash, of a
//     registered subject type, and resolves to an object the bundle holds
//     whose id and type are the ones the dispute names (§3.2),
//     A202-DISPUTE-SUBJECT-UNREFERENCED. A subject the bundle does not
//     hold fails only when the discloser stated what it withheld and did
//     not name it (Input.Disclosure); otherwise it is not_checkable.
//   - dispute_window: the rules_ref resolves to a registered rule set
//     version, and the dispute was raised within the window it sets from
//     the subject act (§3.3), A202-DISPUTE-OUT-OF-WINDOW. The subject
//     act's time is its created_at, so the window is not_checkable when
//     the subject is not held.
//
// On each determination:
//   - determination_question: the question's subject type, hash and id
//     are the dispute's (§4.1), A202-DISPUTE-SUBJECT-UNREFERENCED.
//   - determination_rules_in_force: question.rules_ref cites the rules
//     version in force at the subject act (§4.1): the version stated for
//     the subject event when the subject is an event the bundle holds,
//     otherwise the version stated for the record (Options.RulesVersion),
//     A202-DETERMINATION-NOT-FOLLOWING.
//   - determination_rules_applied: the rules_ref resolves, the rules
//     applied, authority basis and appeal route resolve in it, the outcome
//     is a reasoned finding that names its evidence and hashes its inputs
//     (§4.2, §4.3 as far as it is static), A202-DETERMINATION-NOT-FOLLOWING.
//   - determination_effect: the effect claimed is no more than the rules
//     grant the question class, and a state_result is binding, names the
//     determined subject and a registered state (§6),
//     A202-DETERMINATION-EFFECT-OVERCLAIM (or the code of the part
//     broken).
//   - determination_supersession, on a superseding determination: it
//     states a registered reason and answers the question of the one it
//     supersedes (§5). The superseded hash is step 1's, a fork step 3's.
//   - determination_finding: not_checkable. Whether the finding follows
//     from the rules applied over the inputs, and whether inputs_hash is
//     the hash of those inputs, needs the rules' content and the inputs,
//     which a bundle does not carry.
func (r *run) step6() {
	for _, o := range r.objs {
		switch o.typ {
		case protocol.Dispute:
			r.dispute(o)
		case protocol.Determination:
			r.determination(o)
		}
	}
}

// subjectOf returns the object a content hash names: the one whose bytes
// hash to it, else one that declares it (step 1 fails that one).
func (r *run) subjectOf(hash string) *object {
	if hash == "" {
		return nil
	}
	if o, held := r.byHash[hash]; held {
		return o
	}
	return r.byDeclared[hash]
}

func (r *run) dispute(o *object) {
	static := gate.Envelope(o.val, gate.Options{}).Problems
	subject := r.subjectOf(str(o.payload, "subject_hash"))
	set := []map[string]any{o.val}
	if subject != nil {
		set = append(set, subject.val)
	}
	// Without a stated disclosure, a subject the bundle does not hold is
	// not known to be unresolvable: nobody said it was withheld, nor that
	// it was not.
	var bound []gate.Problem
	if subject != nil || r.stated() {
		bound = r.bindings(set, o.id, reason.DisputeSubjectUnreferenced, reason.DisputeOutOfWindow)
	}

	ps := append(withCode(static, reason.DisputeSubjectUnreferenced), withCode(bound, reason.DisputeSubjectUnreferenced)...)
	switch {
	case len(ps) > 0:
		r.fromGate(6, "dispute_subject", o.subject, ps, "")
	case subject != nil:
		r.add(6, "dispute_subject", o.subject, Verified, "",
			fmt.Sprintf("the subject hash resolves to %s, the %s subject the dispute names", subject.subject, str(o.payload, "subject_type")))
	case r.stated():
		r.add(6, "dispute_subject", o.subject, NotCheckable, "", "the subject is stated as withheld: a boundary of the disclosure")
	default:
		r.add(6, "dispute_subject", o.subject, NotCheckable, "",
			"no object in the bundle has the subject hash, and the bundle states nothing about what it withheld: whether the subject resolves is not established")
	}

	ps = append(withCode(static, reason.DisputeOutOfWindow), withCode(bound, reason.DisputeOutOfWindow)...)
	ref, _ := objAt(o.payload, "rules_ref")
	rules := str(ref, "rule_set_id") + " " + str(ref, "version")
	okAct := false
	if subject != nil {
		_, okAct = timeAt(subject.val, "created_at")
	}
	_, okRaised := timeAt(o.val, "created_at")
	switch {
	case len(ps) > 0:
		r.fromGate(6, "dispute_window", o.subject, ps, "")
	case !okAct:
		r.add(6, "dispute_window", o.subject, NotCheckable, "",
			fmt.Sprintf("when the subject act happened is not established from the bundle, so the window %s sets cannot be run from it", rules))
	case !okRaised:
		r.add(6, "dispute_window", o.subject, NotCheckable, "", "the dispute's created_at is not a timestamp")
	default:
		r.add(6, "dispute_window", o.subject, Verified, "",
			fmt.Sprintf("raised at %s, within the window %s sets from the subject act at %s", str(o.val, "created_at"), rules, str(subject.val, "created_at")))
	}
}

func (r *run) determination(o *object) {
	static := gate.Envelope(o.val, gate.Options{}).Problems
	p := o.payload
	question, _ := objAt(p, "question")

	dspID := str(p, "dispute_id")
	if dsp, held := r.heldAs(dspID, protocol.Dispute); held {
		ps := r.bindings([]map[string]any{o.val, dsp.val}, o.id, reason.DisputeSubjectUnreferenced)
		r.fromGate(6, "determination_question", o.subject, ps, fmt.Sprintf("the question's subject type, hash and id are those of %s", dspID))
	} else {
		why := "the bundle states nothing about what it withheld"
		switch {
		case r.statedGap(dspID):
			why = "it is stated as withheld: a boundary of the disclosure"
		case r.stated():
			why = "it is neither disclosed nor stated as withheld (disclosure_complete)"
		}
		r.add(6, "determination_question", o.subject, NotCheckable, "",
			fmt.Sprintf("the dispute %s is not in the bundle, so whether the question is its question is not established; %s", orNone(dspID), why))
		r.missing(dspID)
	}

	ref, _ := objAt(question, "rules_ref")
	if version, basis := r.subjectRules(str(question, "subject_hash")); version == "" {
		r.add(6, "determination_rules_in_force", o.subject, NotCheckable, "",
			"no rules version is stated for the record, so the version in force at the subject act is not established")
	} else {
		ctx := r.statedContext()
		ctx.SubjectRulesVersion = version
		ps := about(withCode(gate.CheckBindings([]map[string]any{o.val}, ctx), reason.DeterminationNotFollowing), o.id)
		r.fromGate(6, "determination_rules_in_force", o.subject, ps,
			fmt.Sprintf("the question cites rules %s, in force at the subject act (%s)", str(ref, "version"), basis))
	}

	r.fromGate(6, "determination_rules_applied", o.subject, withCode(static, reason.DeterminationNotFollowing),
		fmt.Sprintf("rules_ref resolves to %s %s; the rules applied, the authority basis and the appeal route resolve in it; the outcome is a reasoned finding naming its evidence and hashing its inputs",
			str(ref, "rule_set_id"), str(ref, "version")))

	r.fromGate(6, "determination_effect", o.subject,
		withCode(static, reason.DeterminationEffectOverclaim, reason.StateTransitionDenied, reason.DisputeSubjectUnreferenced),
		fmt.Sprintf("effect %s does not exceed what %s %s grants a question of class %s; a state_result, if any, comes under a binding effect and names the determined subject and a registered state",
			orNone(str(p, "effect")), str(ref, "rule_set_id"), str(ref, "version"), orNone(str(question, "subject_type"))))

	if sup, ok := objAt(p, "supersedes"); ok {
		ps := withCode(static, reason.DeterminationSupersessionUnreasoned)
		targetID := str(sup, "determination_id")
		target, held := r.heldAs(targetID, protocol.Determination)
		if held {
			ps = append(ps, r.bindings([]map[string]any{o.val, target.val}, o.id, reason.DisputeSubjectUnreferenced)...)
		}
		switch {
		case len(ps) > 0:
			r.fromGate(6, "determination_supersession", o.subject, ps, "")
		case !held:
			r.add(6, "determination_supersession", o.subject, NotCheckable, "",
				fmt.Sprintf("it states the registered reason %s; the superseded %s is not in the bundle, so whether it answers the same question is not established", str(sup, "reason"), orNone(targetID)))
			r.missing(targetID)
		default:
			r.add(6, "determination_supersession", o.subject, Verified, "",
				fmt.Sprintf("it states the registered reason %s and answers the question %s answered", str(sup, "reason"), targetID))
		}
	}

	r.determinationFinding(o)
}

// InputRef names one input of a determination: an object by id and
// content hash.
type InputRef struct {
	ID   string
	Hash string
}

// DeterminationInputs is the input set a determination is taken against,
// as party defines it (determination §4.3 item 2; docs/record-protocol.md,
// "Exceptions and disputes (issue 17, items 1–8)"): the rules in force
// (question.rules_ref), the
// dispute, its subject, the evidence relied on in the order the outcome
// lists it, and the determination superseded (or null), each object by
// id and content hash. RFC 8785 orders it canonically.
func DeterminationInputs(rulesRef any, dispute, subject InputRef, evidence []InputRef, superseded *InputRef) map[string]any {
	ref := func(x InputRef) map[string]any { return map[string]any{"id": x.ID, "content_hash": x.Hash} }
	ev := make([]any, 0, len(evidence))
	for _, x := range evidence {
		ev = append(ev, ref(x))
	}
	var sup any
	if superseded != nil {
		sup = ref(*superseded)
	}
	return map[string]any{"rules_ref": rulesRef, "dispute": ref(dispute), "subject": ref(subject), "evidence_relied_on": ev, "supersedes": sup}
}

// DeterminationInputsHash is the inputs_hash of an input set: the SHA-256
// of its RFC 8785 bytes.
func DeterminationInputsHash(rulesRef any, dispute, subject InputRef, evidence []InputRef, superseded *InputRef) (string, error) {
	return canonical.Hash(DeterminationInputs(rulesRef, dispute, subject, evidence, superseded))
}

// determinationFinding: whether the finding follows from the rules over
// the inputs, wherever the inputs are in the bundle (determination §4.3).
// Under the pilot rule set read bilaterally, the determiner the rules
// name (#determiner.authority) is the dispute's respondent, deciding
// against itself (role scopes §4.4), and the determination is its own
// object; the inputs hash recomputes over the dispute, its subject, the
// evidence relied on (each resolving to evidence of the transaction held
// with that hash) and the determination superseded. With every input held,
// anything else is A202-DETERMINATION-NOT-FOLLOWING; with one missing, the
// check is not_checkable.
func (r *run) determinationFinding(o *object) {
	p := o.payload
	question, _ := objAt(p, "question")
	outcome, _ := objAt(p, "outcome")
	var missing []string
	dsp, okD := r.heldAs(str(p, "dispute_id"), protocol.Dispute)
	if !okD {
		missing = append(missing, "the dispute "+orNone(str(p, "dispute_id")))
	}
	subject := r.subjectOf(str(question, "subject_hash"))
	if subject == nil {
		missing = append(missing, "the subject "+short(str(question, "subject_hash")))
	}
	var evidence []InputRef
	evs, _ := arrAt(outcome, "evidence_relied_on")
	for _, x := range evs {
		ref, _ := x.(map[string]any)
		id := str(ref, "evidence_id")
		e, held := r.heldAs(id, protocol.Evidence)
		if !held {
			missing = append(missing, "the evidence "+orNone(id))
			continue
		}
		evidence = append(evidence, InputRef{ID: e.id, Hash: e.recomputed})
	}
	var superseded *InputRef
	if sup, ok := objAt(p, "supersedes"); ok {
		t, held := r.heldAs(str(sup, "determination_id"), protocol.Determination)
		if !held {
			missing = append(missing, "the determination superseded "+orNone(str(sup, "determination_id")))
		} else {
			superseded = &InputRef{ID: t.id, Hash: t.recomputed}
		}
	}
	if len(missing) > 0 {
		r.add(6, "determination_finding", o.subject, NotCheckable, "",
			"whether the finding follows from its rules and inputs is checkable only over the inputs, and "+strings.Join(missing, ", ")+" is not in the bundle")
		return
	}
	var v verdict
	det, _ := objAt(p, "determiner")
	resp, _ := objAt(dsp.payload, "respondent_party")
	switch {
	case !sameJSON(det, resp):
		v.fail("the determiner %s is not the respondent %s of %s, the party the pilot rules name (#determiner.authority)", str(det, "organization_id"), str(resp, "organization_id"), dsp.id)
	case createdBy(o) != str(det, "organization_id"):
		v.fail("%s is made by %s, not by its determiner %s", o.subject, createdBy(o), str(det, "organization_id"))
	default:
		v.pass("it is the determination of the respondent of %s, the party the rules name", dsp.id)
	}
	for _, e := range evidence {
		if ev := r.byID[e.ID]; str(ev.val, "transaction_id") != str(o.val, "transaction_id") {
			v.fail("the evidence %s relied on is not of this transaction", e.ID)
		}
	}
	got, err := DeterminationInputsHash(question["rules_ref"], InputRef{ID: dsp.id, Hash: dsp.recomputed}, InputRef{ID: subject.id, Hash: subject.recomputed}, evidence, superseded)
	switch {
	case err != nil:
		v.fail("the inputs have no canonical form: %v", err)
	case got != str(outcome, "inputs_hash"):
		v.fail("inputs_hash %s is not the hash of the inputs held (%s)", short(str(outcome, "inputs_hash")), short(got))
	default:
		v.pass("inputs_hash is the hash of its inputs: %s, its subject, %d evidence item(s)", dsp.id, len(evidence))
	}
	res, detail := v.result()
	r.add(6, "determination_finding", o.subject, res, reason.DeterminationNotFollowing, detail)
}

// subjectRules is the rules version in force at a determination's subject
// act, and where that was read: the version stated for the subject event,
// if the subject is an event the bundle holds, else the version stated
// for the record.
func (r *run) subjectRules(hash string) (version, basis string) {
	if s := r.subjectOf(hash); s != nil && s.typ == protocol.TransactionEvent {
		return r.rulesFor(s.id), "the version stated for " + s.subject
	}
	return r.opt.RulesVersion, "the version stated for the record"
}
