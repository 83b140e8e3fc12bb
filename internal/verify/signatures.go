package verify

import (
	"fmt"
	"sort"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
)

// Step 2: every signature (§4 step 2). For each entry: the value over the
// canonical bytes and the protected members, under the declared key; the
// purpose against the object's type; the key's status at signed_at. For
// each object: the minimum count of valid signatures by distinct keys, and
// for a transaction event the countersignature of the bilateral record.
// For each mandate: its proof. For each key: its status now, and that its
// key_records publish the key the bundle declares.
//
// A signature the verifier cannot check (no keys, an undeclared key, the
// fixtures' placeholder) is not_checkable, and nothing that depends on it
// is verified on its account: a count of signatures is verified only by
// signatures that verified.
func (r *run) step2() {
	// Every key's chain is built before the objects are examined
	// concurrently, so that the examining forks only read them.
	used := map[string]bool{}
	for _, o := range r.objs {
		for _, sc := range o.sigs {
			if sc.keyID != "" && sc.signedAt != "" {
				used[sc.keyID] = true
			}
		}
	}
	for _, m := range r.mandates {
		if m.proof.keyID != "" && m.proof.signedAt != "" {
			used[m.proof.keyID] = true
		}
		subj, _ := objAt(m.val, "subject")
		if k := str(subj, "key_id"); k != "" {
			r.chain(k)
		}
	}
	for k := range used {
		r.chain(k)
	}
	r.forEach(len(r.objs), func(c *run, i int) { c.objectSignatures(r.objs[i]) })
	for _, m := range r.mandates {
		r.add(2, "mandate_proof", m.id, m.proof.result, reason.EvidenceSignatureInvalid, m.proof.detail)
		if m.proof.keyMissing {
			r.missing(m.proof.keyID)
		}
		if m.proof.keyID != "" && m.proof.signedAt != "" {
			res, detail := r.atSigning(m.proof.keyID, m.proof.signedAt)
			r.add(2, "key_status_at_signing[proof]", m.id, res, reason.EvidenceSignatureInvalid, detail)
		}
	}
	ids := make([]string, 0, len(used))
	for k := range used {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	for _, k := range ids {
		res, detail := r.current(k)
		r.add(2, "key_status_now", k, res, reason.EvidenceSignatureInvalid, detail)
		if len(r.chain(k).versions) > 0 {
			res, detail := r.recordMatches(k)
			r.add(2, "key_record_matches", k, res, reason.EvidenceSignatureInvalid, detail)
		}
	}
}

// objectSignatures adds the step 2 checks of one object.
func (r *run) objectSignatures(o *object) {
	if o.sigsInvalid != "" {
		r.add(2, "signatures", o.subject, Failed, reason.EvidenceSignatureInvalid, o.sigsInvalid)
	}
	for i, sc := range o.sigs {
		r.add(2, indexed("signature", i), o.subject, sc.result, reason.EvidenceSignatureInvalid, sc.detail)
		if sc.keyMissing {
			r.missing(sc.keyID)
		}
		if sc.keyID != "" && sc.signedAt != "" {
			res, detail := r.atSigning(sc.keyID, sc.signedAt)
			r.add(2, indexed("key_status_at_signing", i), o.subject, res, reason.EvidenceSignatureInvalid, detail)
		}
	}
	r.signatureCount(o)
	r.signerParty(o)
	r.creator(o)
	if o.typ == protocol.TransactionEvent && !r.opt.SingleSignedEvents && !r.opt.awaiting[o.id] {
		res, detail := r.countersignature(o)
		r.add(2, "countersignature", o.subject, res, reason.EvidenceSignatureInvalid, detail)
	}
}

// creator checks, for an object whose created_by names a mandate the bundle
// holds, that the mandate bears it out: issued for the creating
// organisation to the creating agent, under the key that signed first
// (authority.CheckCreator, the rule the countersigner applies too).
func (r *run) creator(o *object) {
	by, _ := objAt(o.val, "created_by")
	m, held := r.mandateBy[str(by, "mandate_id")]
	if !held || authority.PrincipalSigned(protocol.ObjectType(o.typ)) {
		return
	}
	if err := authority.CheckCreator(o.val, m.val); err != nil {
		r.add(2, "creator", o.subject, Failed, reason.EvidenceSignatureInvalid, err.Error())
		return
	}
	r.add(2, "creator", o.subject, Verified, "", fmt.Sprintf("made by %s/%s under %s, issued to that agent and key", str(by, "organization_id"), str(by, "agent_id"), m.id))
}

// signatureCount checks the kernel minimum (agreement two, act types one)
// counting only signatures that verified, by distinct keys.
func (r *run) signatureCount(o *object) {
	need := signature.MinSignatures(string(o.typ))
	if need == 0 {
		return
	}
	if r.opt.awaiting[o.id] && need > 1 {
		need-- // the signature this party is about to add
	}
	valid, open := map[string]bool{}, map[string]bool{}
	for _, sc := range o.sigs {
		switch sc.result {
		case Verified:
			valid[sc.keyID], open[sc.keyID] = true, true
		case NotCheckable:
			open[sc.keyID] = true
		}
	}
	n := len(o.sigs)
	switch {
	case n < need:
		r.add(2, "signature_count", o.subject, Failed, reason.EvidenceSignatureInvalid,
			fmt.Sprintf("carries %d signature(s); a %s needs at least %d", n, o.typ, need))
	case len(valid) >= need:
		r.add(2, "signature_count", o.subject, Verified, "",
			fmt.Sprintf("%d valid signature(s) by distinct keys; a %s needs %d", len(valid), o.typ, need))
	case len(open) >= need:
		r.add(2, "signature_count", o.subject, NotCheckable, "",
			fmt.Sprintf("%d of the %d signatures needed could be checked and verified", len(valid), need))
	default:
		r.add(2, "signature_count", o.subject, Failed, reason.EvidenceSignatureInvalid,
			fmt.Sprintf("%d valid signature(s) by distinct keys; a %s needs at least %d", len(valid), o.typ, need))
	}
}

// countersignature checks the bilateral record's rule for an event: the
// appending party's signature first, the other party's second, both
// event_append (pilot state machine §8.1; decisions.md item 10).
func (r *run) countersignature(o *object) (Result, string) {
	var v verdict
	if len(o.sigs) < 2 {
		v.fail("the event carries %d signature(s); an event enters the bilateral record signed by the appending party and countersigned by the other", len(o.sigs))
		return v.result()
	}
	first, second := o.sigs[0], o.sigs[1]
	if first.keyID == second.keyID {
		v.fail("both signatures are by key %s", first.keyID)
		return v.result()
	}
	for i, sc := range []sigCheck{first, second} {
		switch sc.result {
		case Failed:
			v.fail("signature[%d] does not verify", i)
		case NotCheckable:
			v.unsure("signature[%d] could not be checked", i)
		}
	}
	appender := ""
	if by, ok := objAt(o.val, "created_by"); ok {
		appender = str(by, "organization_id")
	}
	c0, c1 := r.controllerOf(first.keyID), r.controllerOf(second.keyID)
	switch {
	case c0 == "" || c1 == "":
		v.unsure("the organisations of keys %s and %s are not established by a trusted key_record or a verified mandate", first.keyID, second.keyID)
	case c0 != appender:
		v.fail("the first signature is by %s's key %s, not by the appending party %s", c0, first.keyID, appender)
	case c1 == c0:
		v.fail("both signatures are by %s: the other party has not countersigned", c0)
	default:
		v.pass("appended by %s (%s) and countersigned by %s (%s)", c0, first.keyID, c1, second.keyID)
	}
	return v.result()
}

// signerParty checks that an act's object is issued and signed by the
// party whose act it is: an offer by the offeror, an acceptance by the
// accepting party, an agreement by both buyer and supplier (canonical
// model §10 steps 2, 3, 7), an assertion by the obligor and a response by
// the obligee (obligation §5.1, §5.2 rule 1). A signature valid for the
// right purpose by the wrong party is not the act (§4 step 2 item 2).
//
// The object's created_by names its author; an author who is not the
// entitled party fails on the object's own statement. That the signing key
// belongs to the entitled party is established through a trusted key_record
// or a verified mandate naming the key; where neither exists it is
// not_checkable. A response's failure carries obligation §9's
// A202-OBLIGATION-RESPONSE-UNAUTHORIZED.
func (r *run) signerParty(o *object) {
	code := reason.EvidenceSignatureInvalid
	var want []string
	role := ""
	// named is the object of type typ (what, in words) that o names by
	// member; one the bundle does not hold leaves who may sign o unknown.
	named := func(member string, typ protocol.ObjectType, what string) (*object, bool) {
		id := str(o.payload, member)
		x, held := r.byID[id]
		if !held || x.typ != typ {
			r.add(2, "signer_party", o.subject, NotCheckable, "", fmt.Sprintf("the %s %s is not in the bundle, so who may sign %s is unknown", what, orNone(id), o.subject))
			r.missing(id)
			return nil, false
		}
		return x, true
	}
	switch o.typ {
	case protocol.Offer:
		want, role = []string{partyOrg(o.payload, "offeror")}, "the offeror"
	case protocol.Acceptance:
		want, role = []string{partyOrg(o.payload, "accepting_party")}, "the accepting party"
	case protocol.Agreement:
		want, role = []string{partyOrg(o.payload, "buyer"), partyOrg(o.payload, "supplier")}, "buyer and supplier"
	case protocol.Settlement:
		want, role = []string{str(o.payload, "payer_organization_id")}, "the payer"
	case protocol.AdapterReceipt:
		// Bilaterally the payer's instance runs the adapter and signs what
		// the rail answered (docs/record-protocol.md, settlement).
		stl, held := named("settlement_instruction_id", protocol.Settlement, "instruction")
		if !held {
			return
		}
		want, role = []string{str(stl.payload, "payer_organization_id")}, "the payer running the adapter"
	case protocol.PerformanceEvent, protocol.ObligationResponse:
		obl, held := named("obligation_id", protocol.Obligation, "obligation")
		if !held {
			return
		}
		if o.typ == protocol.PerformanceEvent {
			want, role = []string{partyOrg(obl.payload, "obligor")}, "the obligor"
		} else {
			want, role, code = []string{partyOrg(obl.payload, "obligee")}, "the obligee", reason.ObligationResponseUnauthorized
		}
	default:
		return
	}
	var v verdict
	by, _ := objAt(o.val, "created_by")
	if author := str(by, "organization_id"); !contains(want, author) {
		v.fail("%s names %s as its author; only %s (%v) may issue it", o.subject, orNone(author), role, want)
	}
	for _, org := range want {
		if r.opt.awaiting[o.id] && org != str(by, "organization_id") {
			continue // the party checking it signs next
		}
		v.take(r.signedBy(o, org))
	}
	res, detail := v.result()
	r.add(2, "signer_party", o.subject, res, code, detail)
}
