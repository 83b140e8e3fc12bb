package verify

import (
	"bytes"
	"fmt"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Step 1: canonicalise every object and check its content hash, then every
// hash one object carries about another (§4 step 1).
//
// A carried hash is compared with the hash of the bytes the bundle holds
// for its target, never with the target's own declared content_hash: a
// binding says "these bytes", and a target whose bytes changed no longer
// is them, whatever it declares.
//
// Where the document that defines a binding names its own refusal code
// for a mismatch, the check carries that code: an agreement's terms_hash
// and accepted_offer_hash and an acceptance's offer_hash
// A202-AGREEMENT-HASH-MISMATCH (canonical model §10, §12), an obligation
// response's assertion_hash A202-OBLIGATION-RESPONSE-HASH-MISMATCH
// (obligation §5.2 rule 2), an obligation's subject terms_hash
// A202-OBLIGATION-SUBJECT-UNREFERENCED (obligation §3.1). Every other
// mismatch is A202-EVIDENCE-HASH-MISMATCH.
func (r *run) step1() {
	for _, o := range r.objs {
		r.contentHash(o)
	}
	for _, o := range r.objs {
		p := o.payload
		switch o.typ {
		case protocol.Acceptance:
			r.bindObject(o, "offer_hash_binding", reason.AgreementHashMismatch, p["offer_hash"], p["offer_id"], protocol.Offer)
		case protocol.Agreement:
			r.termsHash(o)
			r.bindObject(o, "accepted_offer_hash", reason.AgreementHashMismatch, p["accepted_offer_hash"], p["accepted_offer_id"], protocol.Offer)
			r.offerTerms(o)
		case protocol.Obligation:
			r.subjectTerms(o, reason.ObligationSubjectUnreferenced)
		case protocol.Commitment:
			r.subjectTerms(o, reason.EvidenceHashMismatch)
		case protocol.ObligationResponse:
			if _, named := p["assertion_id"]; named {
				r.bindObject(o, "assertion_hash_binding", reason.ObligationResponseHashMismatch, p["assertion_hash"], p["assertion_id"], protocol.PerformanceEvent)
			}
		case protocol.Determination:
			if s, ok := objAt(p, "supersedes"); ok {
				r.bindObject(o, "supersedes_hash_binding", reason.EvidenceHashMismatch, s["determination_hash"], s["determination_id"], protocol.Determination)
			}
		case protocol.Dispute:
			r.subjectHash(o)
		}
	}
	for _, o := range r.objs {
		r.evidenceRefs(o.subject, o.payload)
	}
	for _, m := range r.mandates {
		// A mandate's only reference member is its own evidence_refs.
		r.evidenceRefs(m.id, map[string]any{"evidence_refs": m.val["evidence_refs"]})
	}
}

// signedByCreator reports whether a full-form evidence reference's
// signed_by, when it states one, names the organisation and agent that
// made the evidence object.
func signedByCreator(ref map[string]any, e *object) bool {
	sb, ok := objAt(ref, "signed_by")
	if !ok {
		return true
	}
	by, _ := objAt(e.val, "created_by")
	if str(sb, "organization_id") != str(by, "organization_id") {
		return false
	}
	agent, stated := strAt(sb, "agent_id")
	return !stated || agent == str(by, "agent_id")
}

func (r *run) contentHash(o *object) {
	declared, present := o.val["content_hash"]
	switch {
	case !present || declared == nil:
		r.add(1, "content_hash", o.subject, Failed, reason.EvidenceHashMismatch, "the object declares no content_hash")
	case o.declared == "":
		r.add(1, "content_hash", o.subject, Failed, reason.EvidenceHashMismatch, "content_hash is not a string")
	case o.hashErr != nil:
		r.add(1, "content_hash", o.subject, Failed, reason.EvidenceHashMismatch, "the object has no canonical form: "+o.hashErr.Error())
	case o.declared != o.recomputed:
		r.add(1, "content_hash", o.subject, Failed, reason.EvidenceHashMismatch,
			fmt.Sprintf("declared %s, the canonical bytes hash to %s", short(o.declared), short(o.recomputed)))
	default:
		r.add(1, "content_hash", o.subject, Verified, "", "")
	}
}

// bindObject checks that carried is the content hash of the bytes of the
// object targetID names, which must be of type typ.
func (r *run) bindObject(o *object, name string, code reason.Code, carried, targetID any, typ protocol.ObjectType) {
	h, ok := carried.(string)
	if !ok {
		r.add(1, name, o.subject, Failed, code, fmt.Sprintf("the carried hash is %s, not a string", show(carried)))
		return
	}
	id, ok := targetID.(string)
	if !ok {
		r.add(1, name, o.subject, Failed, code, fmt.Sprintf("the %s it binds is named by %s, not an identifier", typ, show(targetID)))
		return
	}
	t, held := r.byID[id]
	if !held {
		r.add(1, name, o.subject, NotCheckable, "", fmt.Sprintf("%s is not in the bundle", id))
		r.missing(id)
		return
	}
	switch {
	case t.typ != typ:
		r.add(1, name, o.subject, Failed, code, fmt.Sprintf("%s is a %s, not a %s", id, t.typ, typ))
	case t.hashErr != nil:
		r.add(1, name, o.subject, Failed, code, fmt.Sprintf("%s has no canonical form to hash", id))
	case h != t.recomputed:
		r.add(1, name, o.subject, Failed, code, fmt.Sprintf("carries %s, but the bytes of %s hash to %s", short(h), id, short(t.recomputed)))
	default:
		r.add(1, name, o.subject, Verified, "", "equals the hash of "+id)
	}
}

// termsHash recomputes an agreement's terms_hash over its own terms.
func (r *run) termsHash(o *object) {
	carried, ok := strAt(o.payload, "terms_hash")
	terms, hasTerms := objAt(o.payload, "terms")
	switch {
	case !ok:
		r.add(1, "terms_hash", o.subject, Failed, reason.AgreementHashMismatch, "the agreement carries no terms_hash string")
	case !hasTerms:
		r.add(1, "terms_hash", o.subject, Failed, reason.AgreementHashMismatch, "the agreement carries no terms to recompute terms_hash over")
	default:
		h, err := canonical.Hash(terms)
		switch {
		case err != nil:
			r.add(1, "terms_hash", o.subject, Failed, reason.AgreementHashMismatch, "the terms have no canonical form: "+err.Error())
		case h != carried:
			r.add(1, "terms_hash", o.subject, Failed, reason.AgreementHashMismatch,
				fmt.Sprintf("terms_hash is %s, the terms hash to %s", short(carried), short(h)))
		default:
			r.add(1, "terms_hash", o.subject, Verified, "", "")
		}
	}
}

// offerTerms checks that an agreement's terms are exactly the terms of
// the offer it accepted, canonical byte for canonical byte (canonical
// model §10 step 6): an agreement states what was accepted, not something
// close to it. accepted_offer_hash binds the offer; this binds the terms
// to the offer, which terms_hash alone does not (it is computed over the
// agreement's own terms).
func (r *run) offerTerms(o *object) {
	id, ok := strAt(o.payload, "accepted_offer_id")
	if !ok {
		r.add(1, "agreement_offer_terms", o.subject, Failed, reason.AgreementHashMismatch, "the agreement names no accepted_offer_id")
		return
	}
	offer, held := r.byID[id]
	switch {
	case !held:
		r.add(1, "agreement_offer_terms", o.subject, NotCheckable, "", fmt.Sprintf("the accepted offer %s is not in the bundle, so its terms cannot be compared", id))
		r.missing(id)
		return
	case offer.typ != protocol.Offer:
		r.add(1, "agreement_offer_terms", o.subject, Failed, reason.AgreementHashMismatch, fmt.Sprintf("%s is a %s, not an offer", id, offer.typ))
		return
	}
	mine, err1 := canonical.Marshal(o.payload["terms"])
	theirs, err2 := canonical.Marshal(offer.payload["terms"])
	_, hasMine := objAt(o.payload, "terms")
	_, hasTheirs := objAt(offer.payload, "terms")
	switch {
	case !hasMine || err1 != nil:
		r.add(1, "agreement_offer_terms", o.subject, Failed, reason.AgreementHashMismatch, "the agreement carries no terms object with a canonical form")
	case !hasTheirs || err2 != nil:
		r.add(1, "agreement_offer_terms", o.subject, Failed, reason.AgreementHashMismatch, fmt.Sprintf("the accepted offer %s carries no terms object with a canonical form", id))
	case !bytes.Equal(mine, theirs):
		r.add(1, "agreement_offer_terms", o.subject, Failed, reason.AgreementHashMismatch,
			fmt.Sprintf("the agreement's terms (hash %s) are not the terms of the accepted offer %s (hash %s)", short(canonical.SHA256Hex(mine)), id, short(canonical.SHA256Hex(theirs))))
	default:
		r.add(1, "agreement_offer_terms", o.subject, Verified, "", "the terms are the canonical bytes of the terms of "+id)
	}
}

// agreementTermsHash is the hash of the terms the agreement id names, as
// the bundle holds them.
func (r *run) agreementTermsHash(id string) (string, *object, bool) {
	a, held := r.byID[id]
	if !held || a.typ != protocol.Agreement {
		return "", a, false
	}
	terms, ok := objAt(a.payload, "terms")
	if !ok {
		return "", a, false
	}
	h, err := canonical.Hash(terms)
	return h, a, err == nil
}

// subjectTerms checks that an obligation's or commitment's subject names
// the terms hash of the agreement it names.
func (r *run) subjectTerms(o *object, code reason.Code) {
	subj, ok := objAt(o.payload, "subject")
	if !ok {
		r.add(1, "subject_terms_hash", o.subject, Failed, code, "the object carries no subject")
		return
	}
	carried, ok1 := strAt(subj, "terms_hash")
	agr, ok2 := strAt(subj, "agreement_id")
	if !ok1 || !ok2 {
		r.add(1, "subject_terms_hash", o.subject, Failed, code, "the subject names no agreement_id and terms_hash")
		return
	}
	if a, held := r.byID[agr]; !held {
		r.add(1, "subject_terms_hash", o.subject, NotCheckable, "", agr+" is not in the bundle")
		r.missing(agr)
		return
	} else if a.typ != protocol.Agreement {
		r.add(1, "subject_terms_hash", o.subject, Failed, code, fmt.Sprintf("%s is a %s, not an agreement", agr, a.typ))
		return
	}
	h, _, ok := r.agreementTermsHash(agr)
	switch {
	case !ok:
		r.add(1, "subject_terms_hash", o.subject, Failed, code, fmt.Sprintf("%s carries no terms to hash", agr))
	case h != carried:
		r.add(1, "subject_terms_hash", o.subject, Failed, code,
			fmt.Sprintf("the subject names terms hash %s, the terms of %s hash to %s", short(carried), agr, short(h)))
	default:
		r.add(1, "subject_terms_hash", o.subject, Verified, "", "equals the hash of the terms of "+agr)
	}
}

// subjectHash checks that a dispute's subject_hash is the hash of an
// object the bundle holds. The dispute rules proper (subject reference,
// window) are step 6's.
func (r *run) subjectHash(o *object) {
	h, ok := strAt(o.payload, "subject_hash")
	if !ok {
		r.add(1, "subject_hash_resolves", o.subject, Failed, reason.EvidenceHashMismatch, "the dispute carries no subject_hash string")
		return
	}
	if t, held := r.byHash[h]; held {
		r.add(1, "subject_hash_resolves", o.subject, Verified, "", "the bytes of "+t.subject+" hash to it")
		return
	}
	if t, held := r.byDeclared[h]; held {
		r.add(1, "subject_hash_resolves", o.subject, Failed, reason.EvidenceHashMismatch,
			fmt.Sprintf("%s declares it, but its bytes hash to %s", t.subject, short(t.recomputed)))
		return
	}
	r.add(1, "subject_hash_resolves", o.subject, NotCheckable, "", "no object in the bundle has content hash "+short(h))
	r.missing(h)
}

// evidenceRefMembers are the members that hold evidence references
// (evidence verification §3.3 rule 1).
var evidenceRefMembers = map[string]bool{
	"evidence_refs": true, "assurance_evidence_refs": true, "identity_evidence_refs": true,
	"authority_evidence_refs": true, "evidence_relied_on": true,
}

// evidenceRefs finds every evidence reference in v and checks it.
func (r *run) evidenceRefs(subject string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range refKeys(x) {
			if evidenceRefMembers[k] {
				if list, ok := x[k].([]any); ok {
					for _, ref := range list {
						r.evidenceRef(subject, ref)
					}
					continue
				}
			}
			r.evidenceRefs(subject, x[k])
		}
	case []any:
		for _, e := range x {
			r.evidenceRefs(subject, e)
		}
	}
}

// evidenceRef checks one reference. A short form resolves only against an
// evidence object in the same bundle (§3.3 rule 2) and is never carried
// across bundles; a full form's content_hash must be the hash of the
// evidence bytes held. An unregistered type is a gap, not a failure
// (§3.1.1).
func (r *run) evidenceRef(subject string, ref any) {
	switch x := ref.(type) {
	case string:
		r.referenced[x] = true
		e, held := r.byID[x]
		switch {
		case !held:
			r.add(1, "evidence_ref", subject, NotCheckable, "", fmt.Sprintf("short-form reference %s: the evidence is not in the bundle", x))
			r.missing(x)
		case e.typ != protocol.Evidence:
			r.add(1, "evidence_ref", subject, Failed, reason.EvidenceHashMismatch, fmt.Sprintf("short-form reference %s names a %s, not evidence", x, e.typ))
		default:
			r.add(1, "evidence_ref", subject, Verified, "", fmt.Sprintf("short-form reference %s resolves to the evidence held in this bundle, which is checked as an object in its own right", x))
			r.evidenceType(str(e.payload, "evidence_type"))
		}
	case map[string]any:
		id, _ := strAt(x, "evidence_id")
		if id != "" {
			r.referenced[id] = true
		}
		typ, hasType := strAt(x, "evidence_type")
		if hasType {
			r.evidenceType(typ)
		}
		h, hasHash := strAt(x, "content_hash")
		if id == "" || !hasHash {
			r.add(1, "evidence_ref", subject, Failed, reason.EvidenceHashMismatch, "a full-form reference without evidence_id and content_hash binds nothing")
			return
		}
		e, held := r.byID[id]
		switch {
		case !held:
			r.add(1, "evidence_ref", subject, NotCheckable, "", fmt.Sprintf("%s is not in the bundle", id))
			r.missing(id)
		case e.typ != protocol.Evidence:
			r.add(1, "evidence_ref", subject, Failed, reason.EvidenceHashMismatch, fmt.Sprintf("%s is a %s, not evidence", id, e.typ))
		case e.hashErr != nil || h != e.recomputed:
			r.add(1, "evidence_ref", subject, Failed, reason.EvidenceHashMismatch,
				fmt.Sprintf("the reference to %s carries %s, the evidence bytes hash to %s", id, short(h), short(e.recomputed)))
		case hasType && typ != str(e.payload, "evidence_type"):
			r.add(1, "evidence_ref", subject, Failed, reason.EvidenceHashMismatch,
				fmt.Sprintf("the reference to %s names type %s, the evidence is %s", id, typ, orNone(str(e.payload, "evidence_type"))))
		case !signedByCreator(x, e):
			// A full-form reference names who signed the evidence (evidence
			// verification §3): naming another party than the one whose
			// signed object it is misattributes it.
			sb, _ := objAt(x, "signed_by")
			by, _ := objAt(e.val, "created_by")
			r.add(1, "evidence_ref", subject, Failed, reason.EvidenceSignatureInvalid,
				fmt.Sprintf("the reference to %s names it signed by %s/%s; it was made by %s/%s", id,
					orNone(str(sb, "organization_id")), orNone(str(sb, "agent_id")), orNone(str(by, "organization_id")), orNone(str(by, "agent_id"))))
		default:
			r.add(1, "evidence_ref", subject, Verified, "", "equals the hash of "+id)
		}
	default:
		r.add(1, "evidence_ref", subject, Failed, reason.EvidenceHashMismatch, fmt.Sprintf("an evidence reference is %s", show(ref)))
	}
}
