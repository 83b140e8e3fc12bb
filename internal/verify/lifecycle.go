package verify

import (
	"fmt"
	"iter"
	"sort"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// The guards of the transitions that walk away from a transaction or
// change its course (pilot state machine §5, §5.2; canonical model §10.1;
// obligation §5.2, §6.1), as far as a bundle shows them. The record
// engine's countersigner gets them through Extend.
//
// transaction.cancelled: the offer the event names is held and of this
// transaction, and nothing was committed before it on the stream
// ("canceller has authority; no committed agreement": the authority is
// mandate_authority's question).
//
// termination.agreed (pilot state machine §5.2): the termination record
// has no object type in the kernel (spec-map C16, D19), so its form is
// party's (docs/record-protocol.md, "Cancellation, termination, waivers
// and amendment (issue 15, items 1–5)" item 2): the RFC 8785
// document TerminationRecord builds, naming the transaction, the
// agreement in force, the event the termination follows
// (previous_event_hash) and the disposition ("released") of every
// obligation not yet terminal, sorted by id; its SHA-256 is the event's
// termination_record_hash. Each party signs that hash by issuing an
// evidence object of type signed_document whose artifact_hash is it.
// The guard recomputes the record from the bundle's objects (every
// obligation of the transaction issued by then, less those accepted or
// waived by then) and compares hashes; a record that leaves an open
// obligation unnamed, or names one that is not open, fails
// A202-EVIDENCE-TRANSITION-ILLEGAL. termination_signatures requires a
// signed_document over the hash validly signed by each party, and fails
// A202-EVIDENCE-SIGNATURE-INVALID with one.
//
// agreement.amended (canonical model §10.1): the agreement the event
// names is a new version (version + 1, previous_version_id the agreement
// in force before it on the stream), formed on the offer and acceptance
// the event names, the acceptance over that offer's exact hash by its
// offeree, and signed by both parties. That it reuses neither its
// predecessor's offer nor its acceptance is agreement_amendment's
// question, on the object (A202-AGREEMENT-AMENDMENT-UNACCEPTED).
//
// waiver_state, on a waive response (obligation §6.1: pending, due,
// asserted or rejected → waived): the obligation was not accepted or
// waived before it, and no termination released it before.

// TerminationRecord is the record both parties of a consensual
// termination sign (see above): open are the obligations not yet
// terminal, in any order.
func TerminationRecord(transactionID, agreementID, previousEventHash string, open []string) map[string]any {
	ids := append([]string(nil), open...)
	sort.Strings(ids)
	dispositions := make([]any, 0, len(ids))
	for _, id := range ids {
		dispositions = append(dispositions, map[string]any{"obligation_id": id, "disposition": "released"})
	}
	return map[string]any{
		"record_type":         "termination",
		"transaction_id":      transactionID,
		"agreement_id":        agreementID,
		"previous_event_hash": previousEventHash,
		"dispositions":        dispositions,
	}
}

// TerminationRecordHash is the termination_record_hash of a record: the
// SHA-256 of its RFC 8785 bytes.
func TerminationRecordHash(transactionID, agreementID, previousEventHash string, open []string) (string, error) {
	return canonical.Hash(TerminationRecord(transactionID, agreementID, previousEventHash, open))
}

// TerminationSignatureClaim is the claim of the signed_document by which
// a party signs a termination record (free text: nothing reads it).
const TerminationSignatureClaim = "Agrees to end the transaction by the termination record whose SHA-256 is this artifact_hash"

// createdBy is the organisation that created o.
func createdBy(o *object) string {
	by, _ := objAt(o.val, "created_by")
	return str(by, "organization_id")
}

// createdNoLater reports whether o was created at or before t.
func createdNoLater(o *object, t time.Time) bool {
	at, ok := timeAt(o.val, "created_at")
	return ok && !at.After(t)
}

// obligationsAt returns the obligations of txn the bundle holds that were
// issued by t (first versions only: a later version is the same duty).
func (r *run) obligationsAt(txn string, t time.Time) []*object {
	var out []*object
	for _, o := range r.objs {
		if o.typ != protocol.Obligation || str(o.val, "transaction_id") != txn || !createdNoLater(o, t) {
			continue
		}
		if _, versioned := strAt(o.val, "previous_version_id"); versioned {
			continue
		}
		out = append(out, o)
	}
	return out
}

// responseOf returns the obligee's first response of type rt to obligation
// obl made by t, or nil.
func (r *run) responseOf(obl *object, rt string, t time.Time) *object {
	obligee := partyOrg(obl.payload, "obligee")
	for _, o := range r.objs {
		if o.typ == protocol.ObligationResponse && str(o.payload, "obligation_id") == obl.id && str(o.payload, "response_type") == rt &&
			createdBy(o) == obligee && createdNoLater(o, t) {
			return o
		}
	}
	return nil
}

// openAt returns the ids of the obligations of txn still open at t: issued
// by then, neither accepted nor waived by then.
func (r *run) openAt(txn string, t time.Time) []string {
	var out []string
	for _, o := range r.obligationsAt(txn, t) {
		if r.responseOf(o, "accept", t) == nil && r.responseOf(o, "waive", t) == nil {
			out = append(out, o.id)
		}
	}
	return out
}

// agreementInForce returns the agreement the last agreement.committed or
// agreement.amended before position i of s names, or "".
func agreementInForce(s *stream, i int) string {
	for j := i - 1; j >= 0; j-- {
		p := s.events[j].payload
		switch eventType(p) {
		case protocol.EvAgreementCommitted, protocol.EvAgreementAmended:
			d, _ := objAt(p, "data")
			return str(d, "agreement_id")
		}
	}
	return ""
}

func (r *run) cancelledGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	offer := r.held(v, data, "offer_id", protocol.Offer)
	if offer != nil {
		if str(offer.val, "transaction_id") != str(e.val, "transaction_id") {
			v.fail("%s belongs to another transaction", offer.subject)
		} else {
			v.pass("%s is this transaction's offer", offer.subject)
		}
	}
	for j := 0; j < i; j++ {
		if eventType(s.events[j].payload) == protocol.EvAgreementCommitted {
			v.fail("an agreement was committed at position %d: a committed transaction is not cancelled", j+1)
			return
		}
	}
	if !s.fromStart {
		v.unsure("the stream is not disclosed from its start, so that nothing was committed before is not established")
		return
	}
	v.pass("nothing was committed before it")
}

// expiredGuard: deadline.elapsed on a transaction (draft → expired; D16
// decided in docs/record-protocol.md, "Nothing waits forever (issue
// 39)"). Event data is
// references only, so the event names the offer and nothing else; the
// deadline is derived here as every party derives it: the offer's
// valid_until, or, when the bundle holds its offeror's decision allowing
// the offer's withdrawal (an act found through its policy decision,
// decidedAct), that decision's time if earlier. The offer is this
// transaction's, nothing was accepted before the event, and the event
// occurred at or after the deadline. An event before valid_until with no
// withdrawal this verifier recognises is unsure, not failed: another
// implementation may build its withdrawal act in a shape not rebuilt here.
func (r *run) expiredGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	offer := r.held(v, data, "offer_id", protocol.Offer)
	for j := 0; j < i; j++ {
		if eventType(s.events[j].payload) == protocol.EvAgreementDirect {
			v.fail("the offer was accepted at position %d: an accepted offer does not lapse", j+1)
			return
		}
	}
	if offer == nil {
		return
	}
	txn := str(e.val, "transaction_id")
	if str(offer.val, "transaction_id") != txn {
		v.fail("%s belongs to another transaction", offer.subject)
		return
	}
	occurred, okO := timeAt(e.payload, "occurred_at")
	until, okU := timeAt(offer.payload, "valid_until")
	if !okO || !okU {
		v.fail("the event states no time it occurred, or %s no valid_until", offer.subject)
		return
	}
	if !occurred.Before(until) {
		v.pass("%s could be accepted until %s, and it lapsed unaccepted", offer.subject, until.Format(time.RFC3339))
		return
	}
	offeror := partyOrg(offer.payload, "offeror")
	terms, _ := objAt(offer.payload, "terms")
	_, _, at, found := r.decidedAct(string(protocol.ActOfferWithdraw), offeror, txn, terms, map[string]any{"offer_id": offer.id}, r.mandatesOf(offeror))
	switch {
	case !found:
		v.unsure("it occurred at %s, before %s's valid_until %s, and the bundle shows no withdrawal of it this verifier recognises", occurred.Format(time.RFC3339), offer.subject, until.Format(time.RFC3339))
	case occurred.Before(at):
		v.fail("it occurred at %s, before %s was withdrawn at %s", occurred.Format(time.RFC3339), offer.subject, at.Format(time.RFC3339))
	default:
		v.pass("%s was withdrawn by its offeror at %s, unaccepted", offer.subject, at.Format(time.RFC3339))
	}
}

func (r *run) terminationGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	want, agr := r.terminationRecord(v, s, i, e, data)
	if want == "" {
		r.add(5, "termination_signatures", e.subject, Failed, reason.EvidenceSignatureInvalid, "the event names no termination record for the parties to have signed")
		return
	}
	r.terminationSignatures(e, agr, want)
}

// terminationRecord checks the termination record an event binds
// (termination.agreed, transaction.terminated): recomputed from the
// bundle's objects, it names the disposition of every open obligation. It
// returns the hash the event binds ("" when it names none) and the
// agreement.
func (r *run) terminationRecord(v *verdict, s *stream, i int, e *object, data map[string]any) (string, *object) {
	txn := str(e.val, "transaction_id")
	want, ok := strAt(data, "termination_record_hash")
	if !ok {
		v.fail("the event names no termination record")
		return "", nil
	}
	agr := r.held(v, data, "agreement_id", protocol.Agreement)
	occurred, okT := timeAt(e.payload, "occurred_at")
	if !okT {
		v.fail("occurred_at is not a timestamp")
	}
	if agr != nil && okT {
		if inForce := agreementInForce(s, i); inForce != "" && inForce != agr.id {
			v.fail("the record names %s, but the agreement in force is %s", agr.id, inForce)
		}
		prev := str(e.payload, "previous_event_hash")
		open := r.openAt(txn, occurred)
		got, err := TerminationRecordHash(txn, agr.id, prev, open)
		switch {
		case err != nil:
			v.fail("the termination record has no canonical form: %v", err)
		case got != want && !r.obligationsDisclosed(s):
			v.unsure("termination_record_hash %s is not the hash of the record naming the obligations this bundle shows open (%s); the bundle may withhold an obligation",
				short(want), orNone(strings.Join(open, ", ")))
		case got != want:
			v.fail("termination_record_hash %s is not the hash of the record naming the disposition of every open obligation (%s), %s: "+
				"the record leaves an open obligation unnamed or names one that is not open", short(want), orNone(strings.Join(open, ", ")), short(got))
		default:
			v.pass("the termination record names the disposition of every open obligation (%s)", orNone(strings.Join(open, ", ")))
		}
	}
	return want, agr
}

// terminationSignatures: both parties signed the record's hash, each by a
// signed_document over it (see the top of this file).
func (r *run) terminationSignatures(e *object, agr *object, hash string) {
	if agr == nil {
		r.add(5, "termination_signatures", e.subject, NotCheckable, "", "not established: the agreement is not in the bundle, so its parties are not known")
		return
	}
	r.pairSignatures(e, agr, hash, "termination_signatures")
}

func (r *run) amendedGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	agr := r.held(v, data, "agreement_id", protocol.Agreement)
	if agr == nil {
		return
	}
	prevID, _ := strAt(agr.val, "previous_version_id")
	inForce := agreementInForce(s, i)
	switch {
	case prevID == "":
		v.fail("%s is a first version: an amendment is a new version of the agreement in force", agr.subject)
	case inForce == "" && !s.fromStart:
		v.unsure("the stream is not disclosed from its start, so the agreement in force is not established")
	case prevID != inForce:
		v.fail("%s supersedes %s, but the agreement in force is %s", agr.subject, prevID, orNone(inForce))
	default:
		v.pass("%s supersedes the agreement in force %s", agr.subject, prevID)
	}
	if prev, held := r.byID[prevID]; held && prev.typ == protocol.Agreement {
		pv, _ := intAt(prev.val, "version")
		av, _ := intAt(agr.val, "version")
		if av != pv+1 {
			v.fail("%s is version %d of %s's version %d", agr.subject, av, prevID, pv)
		}
		for _, role := range []string{"buyer", "supplier"} {
			if partyOrg(agr.payload, role) != partyOrg(prev.payload, role) {
				v.fail("%s names another %s than %s", agr.subject, role, prevID)
			}
		}
	} else if prevID != "" {
		v.unsure("%s is not in the bundle", prevID)
		r.missing(prevID)
	}
	offer := r.held(v, data, "offer_id", protocol.Offer)
	acc := r.held(v, data, "acceptance_id", protocol.Acceptance)
	if offer != nil && str(agr.payload, "accepted_offer_id") != offer.id {
		v.fail("%s is formed on %s, the event names %s", agr.subject, str(agr.payload, "accepted_offer_id"), offer.id)
	}
	if acc != nil && str(agr.payload, "acceptance_id") != acc.id {
		v.fail("%s names acceptance %s, the event %s", agr.subject, str(agr.payload, "acceptance_id"), acc.id)
	}
	if offer != nil && acc != nil {
		ap, _ := objAt(acc.payload, "accepting_party")
		oe, _ := objAt(offer.payload, "offeree")
		switch {
		case str(acc.payload, "offer_id") != offer.id || str(acc.payload, "offer_hash") != offer.recomputed || offer.hashErr != nil:
			v.fail("%s does not sign the exact bytes of %s", acc.subject, offer.subject)
		case str(ap, "organization_id") != str(oe, "organization_id") || str(ap, "agent_id") != str(oe, "agent_id"):
			v.fail("%s is not by the offeree of %s", acc.subject, offer.subject)
		default:
			v.pass("%s signs the exact hash of the fresh offer %s, by its offeree", acc.subject, offer.id)
		}
		occurred, okT := timeAt(e.payload, "occurred_at")
		until, okU := timeAt(offer.payload, "valid_until")
		if !okT || !okU || !occurred.Before(until) {
			v.fail("%s was not current when the amendment was recorded", offer.subject)
		}
		v.take(r.signedBy(offer, partyOrg(offer.payload, "offeror")))
		v.take(r.signedBy(acc, partyOrg(acc.payload, "accepting_party")))
	}
	for _, role := range []string{"buyer", "supplier"} {
		org := partyOrg(agr.payload, role)
		if r.opt.awaiting[agr.id] && org != createdBy(agr) {
			continue // the party checking it signs next
		}
		v.take(r.signedBy(agr, org))
	}
}

// waiverState: a waiver moves an obligation that is still owed (see the
// top of this file).
func (r *run) waiverState(o *object) {
	oblID := str(o.payload, "obligation_id")
	obl, held := r.heldAs(oblID, protocol.Obligation)
	if !held {
		r.add(5, "waiver_state", o.subject, NotCheckable, "", fmt.Sprintf("the obligation %s is not in the bundle", orNone(oblID)))
		r.missing(oblID)
		return
	}
	at, ok := timeAt(o.val, "created_at")
	if !ok {
		r.add(5, "waiver_state", o.subject, Failed, reason.EvidenceTransitionIllegal, "created_at is not a timestamp")
		return
	}
	if acc := r.responseOf(obl, "accept", at); acc != nil {
		r.add(5, "waiver_state", o.subject, Failed, reason.EvidenceTransitionIllegal, fmt.Sprintf("%s was accepted by %s: an accepted obligation is not waived", oblID, acc.id))
		return
	}
	for _, w := range r.objs {
		if w != o && w.typ == protocol.ObligationResponse && str(w.payload, "obligation_id") == oblID && str(w.payload, "response_type") == "waive" && createdNoLater(w, at) && w.pos < o.pos {
			r.add(5, "waiver_state", o.subject, Failed, reason.EvidenceTransitionIllegal, fmt.Sprintf("%s was waived already by %s", oblID, w.id))
			return
		}
	}
	txn := str(obl.val, "transaction_id")
	for _, s := range r.streams {
		if s.kind != "transaction" || s.id != txn {
			continue
		}
		for _, e := range s.events {
			if et := eventType(e.payload); et != protocol.EvTerminationAgreed && et != protocol.EvTransactionTerminated {
				continue
			}
			if t, ok := timeAt(e.payload, "occurred_at"); ok && !t.After(at) {
				r.add(5, "waiver_state", o.subject, Failed, reason.EvidenceTransitionIllegal, fmt.Sprintf("the transaction was terminated by %s before the waiver", e.id))
				return
			}
		}
	}
	r.add(5, "waiver_state", o.subject, Verified, "", fmt.Sprintf("%s was still owed: neither accepted, waived nor released before", oblID))
}

// recordSignature recognises a signed_document that is a party's signature
// over a termination record of its transaction (a proposal, or a
// termination's second signature): its artifact_hash is the record after
// some event of the transaction stream, as the bundle's objects show that
// record when the signature was made. Such a signature supports the
// termination it proposes or agrees to, which no id names, so it is not
// unreferenced evidence (step 7).
func (r *run) recordSignature(o *object) {
	txn, at, s, want, ok := r.signedRecord(o)
	if !ok {
		return
	}
	open := r.openAt(txn, at)
	for k := range signableEvents(s, at) {
		e := s.events[k]
		agr := agreementInForce(s, k+1)
		if agr == "" {
			continue
		}
		if h, err := TerminationRecordHash(txn, agr, e.recomputed, open); err == nil && h == want {
			r.referenced[o.id] = true
			r.add(5, "termination_signature", o.subject, Verified, "", fmt.Sprintf("%s signs the termination record of %s after event %d (%s)", createdBy(o), txn, k+1, short(want)))
			return
		}
	}
}

// signedRecord reads o as a signed_document over a record of its
// transaction after some event of the transaction stream (a termination
// record, recordSignature; a remediation record, remediationSignature):
// the transaction, when o was signed, the stream, and the artifact_hash
// signed. ok is false when o is no signed_document, states no time, or
// its transaction's stream is not disclosed.
func (r *run) signedRecord(o *object) (txn string, at time.Time, s *stream, want string, ok bool) {
	if str(o.payload, "evidence_type") != "signed_document" {
		return "", time.Time{}, nil, "", false
	}
	txn = str(o.val, "transaction_id")
	at, hasAt := timeAt(o.val, "created_at")
	s, disclosed := r.streamBy["transaction:"+txn]
	if !hasAt || !disclosed {
		return "", time.Time{}, nil, "", false
	}
	return txn, at, s, str(o.payload, "artifact_hash"), true
}

// signableEvents yields, latest first, the index of each event of s that
// occurred by at and whose hash is known: the events a record signed at
// at can stand after.
func signableEvents(s *stream, at time.Time) iter.Seq[int] {
	return func(yield func(int) bool) {
		for k := len(s.events) - 1; k >= 0; k-- {
			e := s.events[k]
			if t, ok := timeAt(e.payload, "occurred_at"); !ok || t.After(at) || e.hashErr != nil {
				continue
			}
			if !yield(k) {
				return
			}
		}
	}
}

// obligationsDisclosed reports whether the bundle shows every obligation
// of stream s's transaction: the stream is disclosed from its start and
// the discloser states no obligation withheld.
func (r *run) obligationsDisclosed(s *stream) bool {
	if !s.fromStart {
		return false
	}
	if r.in.Disclosure != nil {
		for _, id := range r.in.Disclosure.StatedGaps {
			if strings.HasPrefix(id, "obl_") || strings.HasPrefix(id, "obr_") {
				return false
			}
		}
	}
	return true
}
