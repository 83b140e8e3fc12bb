package gate

import (
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/reason"
)

// CheckBindings checks the hashes and references that bind one object to
// another inside a set (evidence verification §4 step 1's carried hashes,
// and the cross-object rules of the kernel documents). A reference to an
// object the set does not hold is a boundary, except where the rule is
// that the disclosed subset must verify on its own (evidence verification
// §6 rule 1): a response whose assertion, or a determination whose
// dispute, is neither disclosed nor a stated gap is
// A202-EVIDENCE-DISCLOSURE-INCOMPLETE.
func CheckBindings(objects []map[string]any, ctx SetContext) []Problem {
	r := index(objects)
	b := &binder{r: r, ctx: ctx}
	for _, o := range objects {
		p := payloadOf(o)
		switch typeOf(o) {
		case "acceptance":
			b.acceptance(o, p)
		case "agreement":
			b.agreement(o, p)
		case "obligation":
			b.obligation(o, p)
		case "commitment":
			b.commitment(o, p)
		case "performance_event":
			b.performance(o, p)
		case "obligation_response":
			b.response(o, p)
		case "dispute":
			b.dispute(o, p)
		case "determination":
			b.determination(o, p)
		case "settlement_instruction":
			b.settlement(o, p)
		}
		b.evidenceRefs(o, p)
	}
	return b.ps
}

type binder struct {
	r   *record
	ctx SetContext
	ps  []Problem
}

func (b *binder) add(o map[string]any, code reason.Code, path, format string, args ...any) {
	b.ps = append(b.ps, at(o, code, path, format, args...))
}

func (b *binder) gap(id string) bool { return contains(b.ctx.StatedGaps, id) }

func (b *binder) resolvable(hash string) bool {
	_, held := b.r.byHash[hash]
	return held || contains(b.ctx.ResolvableHashes, hash)
}

// The acceptance signs the exact offer hash (canonical model §10 step 3).
func (b *binder) acceptance(o, p map[string]any) {
	offerID, _ := strAt(p, "offer_id")
	if offer, ok := b.r.get(offerID, "offer"); ok {
		if mustStr(p, "offer_hash") != mustStr(offer, "content_hash") {
			b.add(o, reason.AgreementHashMismatch, "/payload/offer_hash", "offer_hash is not the content hash of %s", offerID)
		}
	}
}

// The agreement names the accepted offer by its hash, carries that
// offer's terms, and names an acceptance of that offer (canonical model
// §10 steps 3 and 6); a later version is reached through a fresh offer
// and acceptance (§10.1).
func (b *binder) agreement(o, p map[string]any) {
	offerID, _ := strAt(p, "accepted_offer_id")
	if offer, ok := b.r.get(offerID, "offer"); ok {
		if mustStr(p, "accepted_offer_hash") != mustStr(offer, "content_hash") {
			b.add(o, reason.AgreementHashMismatch, "/payload/accepted_offer_hash", "accepted_offer_hash is not the content hash of %s", offerID)
		}
		if h, err := canonical.Hash(payloadOf(offer)["terms"]); err != nil || h != mustStr(p, "terms_hash") {
			b.add(o, reason.AgreementHashMismatch, "/payload/terms_hash", "the agreement's terms are not the terms of the accepted offer %s", offerID)
		}
	}
	accID, _ := strAt(p, "acceptance_id")
	if acc, ok := b.r.get(accID, "acceptance"); ok {
		if named := mustStr(payloadOf(acc), "offer_id"); named != offerID {
			b.add(o, reason.AgreementHashMismatch, "/payload/acceptance_id", "acceptance %s accepts %s, not the accepted offer %s", accID, named, offerID)
		}
	}
	prevID, _ := strAt(o, "previous_version_id")
	if prev, ok := b.r.get(prevID, "agreement"); ok {
		pp := payloadOf(prev)
		if accID != "" && accID == mustStr(pp, "acceptance_id") {
			b.add(o, reason.AgreementAmendmentUnaccepted, "/payload/acceptance_id", "the amendment reuses the acceptance of %s instead of a fresh one", prevID)
		}
		if offerID != "" && offerID == mustStr(pp, "accepted_offer_id") {
			b.add(o, reason.AgreementAmendmentUnaccepted, "/payload/accepted_offer_id", "the amendment reuses the accepted offer of %s instead of a fresh one", prevID)
		}
	}
}

// The subject resolves against the agreement: same terms hash, same
// profile, a term path that exists, and obligor and obligee are its
// parties (obligation §3.1).
func (b *binder) obligation(o, p map[string]any) {
	agrID, _ := strAt(p, "agreement_id")
	agr, ok := b.r.get(agrID, "agreement")
	if !ok {
		return
	}
	ap := payloadOf(agr)
	subject, _ := objAt(p, "subject")
	if mustStr(subject, "terms_hash") != mustStr(ap, "terms_hash") {
		b.add(o, reason.ObligationSubjectUnreferenced, "/payload/subject/terms_hash", "subject.terms_hash is not the terms hash of %s", agrID)
	}
	terms, _ := objAt(ap, "terms")
	b.subjectInTerms(o, subject, terms, agrID, reason.ObligationSubjectUnreferenced)
	parties := map[string]bool{}
	for _, role := range []string{"buyer", "supplier"} {
		party, _ := objAt(ap, role)
		parties[mustStr(party, "organization_id")] = true
	}
	for _, role := range []string{"obligor", "obligee"} {
		party, _ := objAt(p, role)
		if org := mustStr(party, "organization_id"); !parties[org] || org == "" {
			b.add(o, reason.ObligationSubjectUnreferenced, "/payload/"+role, "the %s is not a party to %s", role, agrID)
		}
	}
}

// A commitment is one party's promise derived from its agreement (kernel
// schema, commitmentPayload): its subject references the agreement's
// terms as an obligation's does (the same profile, a term path that
// resolves in them; the terms hash is a carried hash, evidence
// verification step 1), and its committed party is one of the
// agreement's two parties, organisation and agent as the agreement names
// it. A reference that drifts from the agreement while both stay validly
// signed is what the schema warns of: A202-AGREEMENT-HASH-MISMATCH, the
// code of a commitment that does not bind its agreement (decided here,
// docs/record-protocol.md, "The commitment in the answer").
func (b *binder) commitment(o, p map[string]any) {
	agrID, _ := strAt(p, "agreement_id")
	agr, ok := b.r.get(agrID, "agreement")
	if !ok {
		return
	}
	ap := payloadOf(agr)
	subject, _ := objAt(p, "subject")
	terms, _ := objAt(ap, "terms")
	if mustStr(subject, "agreement_id") != agrID {
		b.add(o, reason.AgreementHashMismatch, "/payload/subject/agreement_id", "the subject names %s, the commitment %s", mustStr(subject, "agreement_id"), agrID)
	}
	b.subjectInTerms(o, subject, terms, agrID, reason.AgreementHashMismatch)
	committed, _ := objAt(p, "committed_party")
	party := false
	for _, role := range []string{"buyer", "supplier"} {
		named, _ := objAt(ap, role)
		if mustStr(named, "organization_id") != "" && mustStr(named, "organization_id") == mustStr(committed, "organization_id") &&
			mustStr(named, "agent_id") == mustStr(committed, "agent_id") {
			party = true
		}
	}
	if !party {
		b.add(o, reason.AgreementHashMismatch, "/payload/committed_party", "the committed party is not one of %s's parties as it names them", agrID)
	}
}

// subjectInTerms reports, under code, a subject (an obligation's, a
// commitment's) that does not reference terms, those of agreement agrID:
// another profile, or a term path that does not resolve in them. A term
// path that is not one at all is the schema's to refuse.
func (b *binder) subjectInTerms(o, subject, terms map[string]any, agrID string, code reason.Code) {
	if mustStr(subject, "profile") != mustStr(terms, "profile") {
		b.add(o, code, "/payload/subject/profile", "subject.profile is not the profile of %s", agrID)
	}
	if path, ok := strAt(subject, "term_path"); ok && termPathPattern.MatchString(path) && !resolvesTerm(terms, path) {
		b.add(o, code, "/payload/subject/term_path", "term_path %s does not resolve in the terms of %s", path, agrID)
	}
}

// resolvesTerm follows "$.terms.a.b" through a terms object.
func resolvesTerm(terms map[string]any, path string) bool {
	var cur any = terms
	for _, seg := range strings.Split(strings.TrimPrefix(path, "$.terms."), ".") {
		m, ok := obj(cur)
		if !ok {
			return false
		}
		if cur, ok = m[seg]; !ok {
			return false
		}
	}
	return true
}

// An assertion is in the obligation's unit (obligation §5.2 rule 4).
func (b *binder) performance(o, p map[string]any) {
	oblID, _ := strAt(p, "obligation_id")
	if obl, ok := b.r.get(oblID, "obligation"); ok {
		if mustStr(p, "unit_code") != mustStr(payloadOf(obl), "unit_code") {
			b.add(o, reason.ObligationTermsMutated, "/payload/unit_code", "the assertion's unit is not the obligation's")
		}
	}
}

// A response is the obligee's act, binds the exact assertion bytes, and a
// short acceptance names a remainder obligation for the difference
// (obligation §5.2 rules 1–3).
func (b *binder) response(o, p map[string]any) {
	oblID, _ := strAt(p, "obligation_id")
	rtype, _ := strAt(p, "response_type")
	if obl, ok := b.r.get(oblID, "obligation"); ok {
		op := payloadOf(obl)
		obligee, _ := objAt(op, "obligee")
		cb, _ := objAt(o, "created_by")
		if mustStr(cb, "organization_id") != mustStr(obligee, "organization_id") {
			b.add(o, reason.ObligationResponseUnauthorized, "/created_by/organization_id", "a response to %s is the obligee's act, including a waiver", oblID)
		}
		if rtype == "accept" {
			b.remainder(o, p, op)
		}
	}
	asrID, hasAssertion := strAt(p, "assertion_id")
	if !hasAssertion {
		return
	}
	if asr, ok := b.r.get(asrID, "performance_event"); ok {
		if mustStr(p, "assertion_hash") != mustStr(asr, "content_hash") {
			b.add(o, reason.ObligationResponseHashMismatch, "/payload/assertion_hash", "assertion_hash is not the content hash of %s", asrID)
		}
		if mustStr(payloadOf(asr), "obligation_id") != oblID {
			b.add(o, reason.ObligationResponseHashMismatch, "/payload/assertion_id", "the assertion %s is about another obligation", asrID)
		}
	} else if !b.gap(asrID) {
		b.add(o, reason.EvidenceDisclosureIncomplete, "/payload/assertion_id", "the response cannot be verified without the assertion %s, which was neither disclosed nor stated as withheld", asrID)
	}
}

func (b *binder) remainder(o, p, op map[string]any) {
	owed, err1 := decimal.ParseQuantity(mustStr(op, "quantity"))
	accepted, err2 := decimal.ParseQuantity(mustStr(p, "accepted_quantity"))
	if err1 != nil || err2 != nil {
		b.add(o, reason.TermsInvalid, "/payload/accepted_quantity", "quantities must parse to be compared")
		return
	}
	if accepted.Cmp(owed) >= 0 {
		return
	}
	remID, ok := strAt(p, "remainder_obligation_id")
	if !ok {
		b.add(o, reason.ObligationRemainderMissing, "/payload/remainder_obligation_id", "accepting %s of %s names no remainder obligation for the difference", accepted, owed)
		return
	}
	rem, held := b.r.get(remID, "obligation")
	if !held {
		return // a boundary: the remainder is named, just not disclosed
	}
	rp := payloadOf(rem)
	want := owed.Sub(accepted)
	got, err := decimal.ParseQuantity(mustStr(rp, "quantity"))
	switch {
	case mustStr(rp, "agreement_id") != mustStr(op, "agreement_id"):
		b.add(o, reason.ObligationRemainderMissing, "/payload/remainder_obligation_id", "the remainder %s derives from another agreement", remID)
	case !sameValue(rp["subject"], op["subject"]):
		b.add(o, reason.ObligationRemainderMissing, "/payload/remainder_obligation_id", "the remainder %s owes another subject", remID)
	case err != nil || got.Cmp(want) != 0:
		b.add(o, reason.ObligationRemainderMissing, "/payload/remainder_obligation_id", "the remainder %s owes %s, not the difference %s", remID, mustStr(rp, "quantity"), want)
	}
}

// A dispute's subject resolves by content hash, and the dispute is raised
// inside the window the rules in force at the subject act set
// (determination §3.2, §3.3).
func (b *binder) dispute(o, p map[string]any) {
	hash, _ := strAt(p, "subject_hash")
	subjectID, _ := strAt(p, "subject_id")
	subject, held := b.r.byHash[hash]
	switch {
	case hash == "":
		return // refused on its own
	case held:
		if idOf(subject) != subjectID {
			b.add(o, reason.DisputeSubjectUnreferenced, "/payload/subject_id", "the subject hash names %s, not %s", idOf(subject), subjectID)
		}
		want := map[string]string{"refusal": "policy_decision", "determination": "determination"}[mustStr(p, "subject_type")]
		if want != "" && typeOf(subject) != want {
			b.add(o, reason.DisputeSubjectUnreferenced, "/payload/subject_type", "a %s subject is a %s, not a %s", mustStr(p, "subject_type"), want, typeOf(subject))
		}
	case contains(b.ctx.ResolvableHashes, hash), b.gap(subjectID):
	default:
		b.add(o, reason.DisputeSubjectUnreferenced, "/payload/subject_hash", "the subject hash resolves to nothing the record holds")
	}

	rs, ok := resolveRulesRef(p["rules_ref"])
	if !ok {
		return // refused on its own
	}
	actAt := b.ctx.SubjectActAt
	if actAt.IsZero() && held {
		actAt, _ = timeAt(subject, "created_at")
	}
	raised, okRaised := timeAt(o, "created_at")
	if actAt.IsZero() || !okRaised {
		return
	}
	window := rs.DisputeWindow
	if mustStr(p, "subject_type") == "determination" {
		window = rs.AppealWindow
	}
	if raised.After(actAt.Add(window)) {
		b.add(o, reason.DisputeOutOfWindow, "/created_at", "raised %s after the subject act, outside the %s window of %s %s", raised.Sub(actAt), window, rs.ID, rs.Version)
	}
}

// A determination answers its dispute's question under the rules in force
// at the subject act, and a supersession names its target exactly and
// never forks (determination §4.1, §5).
func (b *binder) determination(o, p map[string]any) {
	question, _ := objAt(p, "question")
	dspID, _ := strAt(p, "dispute_id")
	if dsp, ok := b.r.get(dspID, "dispute"); ok {
		dp := payloadOf(dsp)
		for _, f := range []string{"subject_type", "subject_hash", "subject_id"} {
			if !sameValue(question[f], dp[f]) {
				b.add(o, reason.DisputeSubjectUnreferenced, "/payload/question/"+f, "the question's %s differs from the dispute's", f)
				break
			}
		}
	} else if dspID != "" && !b.gap(dspID) {
		b.add(o, reason.EvidenceDisclosureIncomplete, "/payload/dispute_id", "the determination cannot be verified without the dispute %s, which was neither disclosed nor stated as withheld", dspID)
	}
	if v := b.ctx.SubjectRulesVersion; v != "" {
		ref, _ := objAt(question, "rules_ref")
		if got := mustStr(ref, "version"); got != v {
			b.add(o, reason.DeterminationNotFollowing, "/payload/question/rules_ref/version", "the question cites rules %s; %s was in force at the subject act", got, v)
		}
	}

	sup, ok := objAt(p, "supersedes")
	if !ok {
		return
	}
	targetID, _ := strAt(sup, "determination_id")
	target, held := b.r.get(targetID, "determination")
	if !held {
		return
	}
	if mustStr(sup, "determination_hash") != mustStr(target, "content_hash") {
		b.add(o, reason.EvidenceHashMismatch, "/payload/supersedes/determination_hash", "determination_hash is not the content hash of %s", targetID)
	}
	tq, _ := objAt(payloadOf(target), "question")
	qh := mustStr(question, "subject_hash")
	if qh != mustStr(tq, "subject_hash") && qh != mustStr(target, "content_hash") {
		b.add(o, reason.DisputeSubjectUnreferenced, "/payload/question/subject_hash", "a superseding determination answers the question of %s", targetID)
	}
	for _, other := range b.r.objects {
		if sameObject(other, o) || typeOf(other) != "determination" {
			continue
		}
		if os, ok := objAt(payloadOf(other), "supersedes"); ok && mustStr(os, "determination_id") == targetID {
			b.add(o, reason.DeterminationSupersessionForked, "/payload/supersedes", "%s is also superseded by %s: the chain forks", targetID, idOf(other))
			break
		}
	}
}

func sameObject(a, b map[string]any) bool {
	return idOf(a) == idOf(b) && mustStr(a, "content_hash") == mustStr(b, "content_hash")
}

// A settlement trigger resolves to the accepting act recorded on this
// transaction, and the money moves between the obligation's parties
// (settlement §3, §6).
func (b *binder) settlement(o, p map[string]any) {
	trigger, _ := objAt(p, "trigger")
	hash, _ := strAt(trigger, "accepting_act_hash")
	if hash == "" {
		return // refused on its own
	}
	oblID, _ := strAt(p, "obligation_id")
	if act, held := b.r.byHash[hash]; held {
		ap := payloadOf(act)
		accepting := false
		switch typeOf(act) {
		case "obligation_response":
			accepting = mustStr(ap, "response_type") == "accept" && mustStr(ap, "obligation_id") == oblID
		case "transaction_event":
			accepting = mustStr(ap, "event_type") == "acceptance.granted"
		}
		if !accepting {
			b.add(o, reason.SettlementTriggerAbsent, "/payload/trigger/accepting_act_hash", "the trigger names %s, which is not an acceptance of %s", idOf(act), oblID)
		}
		if mustStr(act, "transaction_id") != mustStr(o, "transaction_id") {
			b.add(o, reason.SettlementTriggerAbsent, "/payload/trigger/accepting_act_hash", "the accepting act is recorded on another transaction")
		}
	} else if !b.resolvable(hash) {
		b.add(o, reason.SettlementTriggerAbsent, "/payload/trigger/accepting_act_hash", "the accepting act does not resolve")
	}
	if obl, ok := b.r.get(oblID, "obligation"); ok {
		op := payloadOf(obl)
		parties := map[string]bool{}
		for _, role := range []string{"obligor", "obligee"} {
			party, _ := objAt(op, role)
			parties[mustStr(party, "organization_id")] = true
		}
		for _, m := range []string{"payer_organization_id", "payee_organization_id"} {
			if !parties[mustStr(p, m)] {
				b.add(o, reason.SettlementCustodyRefused, "/payload/"+m, "%s is not a party to %s: money moves only between the obligation's parties", mustStr(p, m), oblID)
			}
		}
	}
}

// Every full evidence reference whose evidence object the set holds names
// that object's content hash.
func (b *binder) evidenceRefs(o, p map[string]any) {
	check := func(path string, v any) {
		refs, _ := v.([]any)
		for i, r := range refs {
			ref, ok := obj(r)
			if !ok {
				continue
			}
			id, _ := strAt(ref, "evidence_id")
			ev, held := b.r.get(id, "evidence")
			if !held {
				continue
			}
			if h, ok := strAt(ref, "content_hash"); ok && h != mustStr(ev, "content_hash") {
				b.add(o, reason.EvidenceHashMismatch, pointer(path, i, "content_hash"), "the reference's content hash is not that of %s", id)
			}
		}
	}
	for _, m := range []string{"evidence_refs", "identity_evidence_refs", "authority_evidence_refs"} {
		check(pointer("/payload", m), p[m])
	}
	outcome, _ := objAt(p, "outcome")
	check("/payload/outcome/evidence_relied_on", outcome["evidence_relied_on"])
}
