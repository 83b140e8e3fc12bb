package verify

import (
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// The exception path (pilot state machine §5 rows exception.opened,
// remediation.accepted, exception.resolved, transaction.terminated; §11
// tests 12 and 13), as far as a bundle shows it. The record engine's
// countersigner gets these guards through Extend.
//
// The kernel defers the exception object's payload (canonical model §5.6;
// spec-map C17), so its form is party's (docs/record-protocol.md,
// "Exceptions and disputes (issue 17, items 1–8)"), a closed object:
//
//	{"exception_type": "settlement_failed" | "obligation_disputed" | "obligation_outstanding",
//	 "obligation_id": the obligation the exception is about (its scope),
//	 "dispute_id": the dispute, for obligation_disputed, else null,
//	 "settlement_instruction_id", "adapter_receipt_id": the instruction
//	     and its failed receipt, for settlement_failed, else null,
//	 "evidence_refs": at least one full evidence reference}
//
// CheckException judges that shape. The guards:
//
//   - exception.opened ("exception type, scope, and evidence supplied"):
//     the exception the event names is held, of that shape, made by the
//     appender, about an obligation of the transaction (the event's
//     obligation_id); each evidence reference resolves to evidence held
//     with that hash and type. A settlement_failed exception names an
//     instruction paying that obligation and a receipt of it whose status
//     is failed, and its evidence includes an adapter_receipt evidence
//     over that receipt's content hash. An obligation_disputed exception
//     names the appender's dispute whose subject (an obligation_state: the
//     assertion or response that placed the obligation in its state) is
//     that obligation, and its evidence is the dispute's. An
//     obligation_outstanding exception is about the remainder of a partial
//     acceptance recorded before it, neither accepted, waived nor released
//     by then, and its evidence includes a signed_document over that
//     acceptance's content hash (outstandingGuard).
//   - remediation.accepted ("parties accept remediation hash"): the event
//     names the exception in force (the last opened) and the remediation
//     obligation it activates, which performs the exception's obligation
//     again: the same agreement, commitment, parties, subject, unit and
//     quantity, no consideration of its own (the consideration stays on
//     the obligation remedied), due at a time, pending; for an
//     obligation_outstanding exception it is the remainder itself, nothing
//     issued, and the record's due time is "". remediation_hash is
//     the SHA-256 of the RFC 8785 bytes of the remediation record
//     (RemediationRecord) recomputed from those objects, and
//     remediation_signatures requires a signed_document over it by each
//     party.
//   - exception.resolved ("resolution conditions met"): the event names
//     the exception in force, and is appended by the party that opened it;
//     an obligation_disputed exception is resolved only once a
//     determination of its dispute is recorded.
//   - transaction.terminated ("termination authority and evidence
//     valid"): the event names the exception in force and binds the
//     termination record of consensual termination (TerminationRecord:
//     every obligation not yet terminal named, released), which the
//     appending party signed (termination_signatures, by that party
//     alone: it is not an agreement).

// The exception types (party's, the payload being deferred).
const (
	excSettlementFailed      = string(protocol.ExceptionSettlementFailed)
	excObligationDisputed    = string(protocol.ExceptionObligationDisputed)
	excObligationOutstanding = string(protocol.ExceptionObligationOutstanding)
)

// OutstandingEvidenceClaim is the claim of the evidence an
// obligation_outstanding exception presents: a signed_document whose
// artifact_hash is the content hash of the partial acceptance that left
// the obligation owed as its remainder (free text: only its equality is
// read).
const OutstandingEvidenceClaim = "The partial acceptance whose content hash is this artifact_hash leaves the exception's obligation owed as its remainder"

var exceptionMembers = []string{"exception_type", "obligation_id", "dispute_id", "settlement_instruction_id", "adapter_receipt_id", "evidence_refs"}

// CheckException returns what is wrong with an exception payload's shape
// (nil when nothing is).
func CheckException(p map[string]any) []string {
	var out []string
	for k := range p {
		if !contains(exceptionMembers, k) {
			out = append(out, fmt.Sprintf("member %q is not one of an exception's", k))
		}
	}
	need := func(member, prefix string) {
		if s, ok := strAt(p, member); !ok || !strings.HasPrefix(s, prefix+"_") {
			out = append(out, fmt.Sprintf("%s names no %s_ object", member, prefix))
		}
	}
	none := func(member string) {
		if v, ok := p[member]; !ok || v != nil {
			out = append(out, fmt.Sprintf("%s is null for this exception type", member))
		}
	}
	need("obligation_id", "obl")
	switch str(p, "exception_type") {
	case excSettlementFailed:
		need("settlement_instruction_id", "stl")
		need("adapter_receipt_id", "adp")
		none("dispute_id")
	case excObligationDisputed:
		need("dispute_id", "dsp")
		none("settlement_instruction_id")
		none("adapter_receipt_id")
	case excObligationOutstanding:
		none("dispute_id")
		none("settlement_instruction_id")
		none("adapter_receipt_id")
	default:
		out = append(out, fmt.Sprintf("exception_type %q is none of %s, %s and %s", str(p, "exception_type"), excSettlementFailed, excObligationDisputed, excObligationOutstanding))
	}
	refs, _ := arrAt(p, "evidence_refs")
	if len(refs) == 0 {
		out = append(out, "an exception supplies at least one evidence reference")
	}
	for i, ref := range refs {
		m, ok := ref.(map[string]any)
		if !ok {
			out = append(out, fmt.Sprintf("evidence reference %d is not in the full form", i))
			continue
		}
		for _, k := range []string{"evidence_id", "content_hash", "evidence_type"} {
			if _, ok := strAt(m, k); !ok {
				out = append(out, fmt.Sprintf("evidence reference %d has no %s", i, k))
			}
		}
		if _, ok := objAt(m, "signed_by"); !ok {
			out = append(out, fmt.Sprintf("evidence reference %d names no signer", i))
		}
	}
	return out
}

// RemediationRecord is the record both parties sign to accept a
// remediation: the obligation remedied is performed again, quantity in
// unit, due at dueAt (RFC 3339), after the event previousEventHash, under
// the exception exceptionID.
func RemediationRecord(transactionID, agreementID, exceptionID, previousEventHash, obligationID, quantity, unit, dueAt string) map[string]any {
	return map[string]any{
		"record_type":         "remediation",
		"transaction_id":      transactionID,
		"agreement_id":        agreementID,
		"exception_id":        exceptionID,
		"previous_event_hash": previousEventHash,
		"obligation_id":       obligationID,
		"quantity":            quantity,
		"unit_code":           unit,
		"due_at":              dueAt,
	}
}

// RemediationHash is the remediation_hash of a record: the SHA-256 of its
// RFC 8785 bytes.
func RemediationHash(transactionID, agreementID, exceptionID, previousEventHash, obligationID, quantity, unit, dueAt string) (string, error) {
	return canonical.Hash(RemediationRecord(transactionID, agreementID, exceptionID, previousEventHash, obligationID, quantity, unit, dueAt))
}

// RemediationDelay is how long after the offer to remedy the remediation
// obligation falls due: the remediation record is computed by both parties
// from the objects both hold, so its due time is a rule, not a choice.
const RemediationDelay = 21 * 24 * time.Hour

// RemediationSignatureClaim is the claim of the signed_document by which a
// party signs a remediation record (free text: nothing reads it).
const RemediationSignatureClaim = "Accepts the remediation whose record's SHA-256 is this artifact_hash"

// TerminatedSignatureClaim is the claim of the signed_document by which
// the terminating party signs the termination record of
// transaction.terminated (free text: nothing reads it).
const TerminatedSignatureClaim = "Ends the transaction through its open exception by the termination record whose SHA-256 is this artifact_hash"

// exceptionInForce returns the exception the last exception.opened before
// position i of s names, or "".
func exceptionInForce(s *stream, i int) string {
	for j := i - 1; j >= 0; j-- {
		p := s.events[j].payload
		if eventType(p) == protocol.EvExceptionOpened {
			d, _ := objAt(p, "data")
			return str(d, "exception_id")
		}
	}
	return ""
}

// evidenceHeld settles whether each full reference resolves to evidence
// the bundle holds with that hash and type.
func (r *run) evidenceHeld(v *verdict, refs []any) []*object {
	var out []*object
	for _, ref := range refs {
		m, _ := ref.(map[string]any)
		id := str(m, "evidence_id")
		o, held := r.heldAs(id, protocol.Evidence)
		switch {
		case !held:
			v.unsure("the evidence %s is not in the bundle", orNone(id))
			r.missing(id)
		case o.recomputed != str(m, "content_hash") || o.hashErr != nil:
			v.fail("the reference to %s does not carry its content hash", o.subject)
		case str(o.payload, "evidence_type") != str(m, "evidence_type"):
			v.fail("the reference to %s names type %s, the evidence is %s", o.subject, str(m, "evidence_type"), str(o.payload, "evidence_type"))
		default:
			out = append(out, o)
		}
	}
	return out
}

func (r *run) exceptionOpenedGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	exc := r.held(v, data, "exception_id", protocol.Exception)
	if exc == nil {
		return
	}
	p := exc.payload
	if problems := CheckException(p); len(problems) > 0 {
		v.fail("%s is not an exception of the form party records: %s", exc.subject, strings.Join(problems, "; "))
		return
	}
	if createdBy(exc) != createdBy(e) {
		v.fail("%s is %s's, the event %s's", exc.subject, createdBy(exc), createdBy(e))
	}
	txn := str(e.val, "transaction_id")
	oblID := str(p, "obligation_id")
	if str(data, "obligation_id") != oblID {
		v.fail("the event names obligation %s, the exception %s", orNone(str(data, "obligation_id")), oblID)
	}
	if obl, held := r.heldAs(oblID, protocol.Obligation); !held {
		v.unsure("the obligation %s is not in the bundle", oblID)
		r.missing(oblID)
	} else if str(obl.val, "transaction_id") != txn {
		v.fail("%s belongs to another transaction", obl.subject)
	}
	refs, _ := arrAt(p, "evidence_refs")
	evidence := r.evidenceHeld(v, refs)
	switch str(p, "exception_type") {
	case excSettlementFailed:
		stlID, adpID := str(p, "settlement_instruction_id"), str(p, "adapter_receipt_id")
		if str(data, "settlement_instruction_id") != stlID || str(data, "adapter_receipt_id") != adpID {
			v.fail("the event names another instruction or receipt than the exception")
		}
		stl, okS := r.heldAs(stlID, protocol.Settlement)
		adp, okA := r.heldAs(adpID, protocol.AdapterReceipt)
		if !okS || !okA {
			v.unsure("the instruction %s or its receipt %s is not in the bundle", stlID, adpID)
			r.missing(stlID)
			r.missing(adpID)
			return
		}
		switch {
		case str(stl.payload, "obligation_id") != oblID:
			v.fail("%s pays %s, not %s", stl.subject, str(stl.payload, "obligation_id"), oblID)
		case str(adp.payload, "settlement_instruction_id") != stlID:
			v.fail("%s answers %s, not %s", adp.subject, str(adp.payload, "settlement_instruction_id"), stlID)
		case str(adp.payload, "status") != "failed":
			v.fail("%s reports %s: the settlement did not fail", adp.subject, str(adp.payload, "status"))
		default:
			v.pass("%s reports the settlement of %s failed", adp.subject, oblID)
		}
		found := false
		for _, ev := range evidence {
			if str(ev.payload, "evidence_type") == "adapter_receipt" && str(ev.payload, "artifact_hash") == adp.recomputed {
				found = true
			}
		}
		if !found && len(evidence) == len(refs) {
			v.fail("no adapter_receipt evidence of the exception is over %s", adp.subject)
		}
	case excObligationDisputed:
		dspID := str(p, "dispute_id")
		if str(data, "dispute_id") != dspID {
			v.fail("the event names dispute %s, the exception %s", orNone(str(data, "dispute_id")), dspID)
		}
		dsp, held := r.heldAs(dspID, protocol.Dispute)
		if !held {
			v.unsure("the dispute %s is not in the bundle", dspID)
			r.missing(dspID)
			return
		}
		dp := dsp.payload
		if createdBy(dsp) != createdBy(e) {
			v.fail("%s was raised by %s, not by the party opening the exception", dsp.subject, createdBy(dsp))
		}
		subject := r.subjectOf(str(dp, "subject_hash"))
		switch {
		case str(dp, "subject_type") != "obligation_state":
			v.fail("%s is about a %s, not an obligation's state", dsp.subject, str(dp, "subject_type"))
		case subject == nil:
			v.unsure("the subject of %s is not in the bundle", dsp.subject)
		case str(subject.payload, "obligation_id") != oblID:
			v.fail("%s disputes the state of %s, not of %s", dsp.subject, orNone(str(subject.payload, "obligation_id")), oblID)
		default:
			v.pass("%s disputes the state %s placed %s in", dsp.subject, subject.subject, oblID)
		}
		if !sameJSON(dp["evidence_refs"], p["evidence_refs"]) {
			v.fail("the exception's evidence is not its dispute's")
		}
	case excObligationOutstanding:
		r.outstandingGuard(v, s, i, e, oblID, evidence)
	}
	if len(evidence) == len(refs) && len(refs) > 0 {
		v.pass("its %d evidence reference(s) resolve", len(refs))
	}
}

func (r *run) remediationGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	exc := r.inForce(v, s, i, data)
	rem := r.held(v, data, "obligation_id", protocol.Obligation)
	hash, ok := strAt(data, "remediation_hash")
	if !ok {
		v.fail("the event names no remediation record")
	}
	agr := r.held(v, data, "agreement_id", protocol.Agreement)
	if exc == nil || rem == nil || agr == nil || !ok {
		if ok && agr != nil {
			r.pairSignatures(e, agr, hash, "remediation_signatures")
		}
		return
	}
	if inForce := agreementInForce(s, i); inForce != "" && inForce != agr.id {
		v.fail("the remediation names %s, but the agreement in force is %s", agr.id, inForce)
	}
	oblID := str(exc.payload, "obligation_id")
	// Both kinds of remediation are checked against the hash of one
	// record: what is owed again, and by when ("" for a remainder).
	checkHash := func(quantity, unitCode, due string) {
		got, err := RemediationHash(str(e.val, "transaction_id"), agr.id, exc.id, str(e.payload, "previous_event_hash"), oblID,
			quantity, unitCode, due)
		switch {
		case err != nil:
			v.fail("the remediation record has no canonical form: %v", err)
		case got != hash:
			v.fail("remediation_hash %s is not the hash of the record of this remediation (%s)", short(hash), short(got))
		default:
			v.pass("remediation_hash is the hash of the record of this remediation")
		}
	}
	orig, held := r.heldAs(oblID, protocol.Obligation)
	switch {
	case !held:
		v.unsure("the obligation %s the exception is about is not in the bundle", oblID)
		r.missing(oblID)
	case str(exc.payload, "exception_type") == excObligationOutstanding:
		// The remainder itself is performed: no obligation is activated,
		// and it keeps its own due condition and consideration.
		if rem.id != oblID {
			v.fail("the remediation of an outstanding remainder names %s, not the remainder %s", rem.id, oblID)
		} else {
			v.pass("%s, still owed, is performed", oblID)
		}
		checkHash(str(orig.payload, "quantity"), str(orig.payload, "unit_code"), "")
	default:
		rp, op := rem.payload, orig.payload
		due, _ := objAt(rp, "due_condition")
		switch {
		case str(rp, "agreement_id") != str(op, "agreement_id") || str(rp, "commitment_id") != str(op, "commitment_id"):
			v.fail("%s performs another agreement or commitment than %s", rem.subject, oblID)
		case !sameJSON(rp["obligor"], op["obligor"]) || !sameJSON(rp["obligee"], op["obligee"]):
			v.fail("%s names other parties than %s", rem.subject, oblID)
		case !sameJSON(rp["subject"], op["subject"]) || str(rp, "unit_code") != str(op, "unit_code") || str(rp, "quantity") != str(op, "quantity"):
			v.fail("%s does not owe again what %s owes", rem.subject, oblID)
		case rp["consideration"] != nil:
			v.fail("%s carries a consideration of its own; the consideration stays on %s", rem.subject, oblID)
		case str(due, "type") != "due_at_time" || str(due, "at") == "":
			v.fail("%s is not due at a time", rem.subject)
		case str(rp, "state") != "pending":
			v.fail("%s is not issued pending", rem.subject)
		default:
			v.pass("%s performs %s again, with no consideration of its own", rem.subject, oblID)
		}
		checkHash(str(rp, "quantity"), str(rp, "unit_code"), str(due, "at"))
	}
	r.pairSignatures(e, agr, hash, "remediation_signatures")
}

// inForce returns the exception the event names, which must be the one in
// force at position i.
func (r *run) inForce(v *verdict, s *stream, i int, data map[string]any) *object {
	exc := r.held(v, data, "exception_id", protocol.Exception)
	if exc == nil {
		return nil
	}
	want := exceptionInForce(s, i)
	switch {
	case want == "" && !s.fromStart:
		v.unsure("the stream is not disclosed from its start, so the exception in force is not established")
	case want != exc.id:
		v.fail("the event names %s, but the exception in force is %s", exc.id, orNone(want))
		return nil
	default:
		v.pass("%s is the exception in force", exc.id)
	}
	return exc
}

func (r *run) resolvedGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	exc := r.inForce(v, s, i, data)
	if exc == nil {
		return
	}
	if createdBy(exc) != createdBy(e) {
		v.fail("%s opened %s; only the party that opened an exception resolves it", createdBy(exc), exc.id)
	}
	if str(exc.payload, "exception_type") != excObligationDisputed {
		v.pass("a %s exception is resolved by the party that opened it", str(exc.payload, "exception_type"))
		return
	}
	dspID := str(exc.payload, "dispute_id")
	occurred, _ := timeAt(e.payload, "occurred_at")
	for _, o := range r.objs {
		if o.typ == protocol.Determination && str(o.payload, "dispute_id") == dspID && createdNoLater(o, occurred) {
			v.pass("%s determined the dispute %s before it", o.subject, dspID)
			return
		}
	}
	v.fail("no determination of the dispute %s is recorded before it: the exception's question is open", dspID)
}

func (r *run) terminatedGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	r.inForce(v, s, i, data)
	want, agr := r.terminationRecord(v, s, i, e, data)
	if want == "" {
		r.add(5, "termination_signatures", e.subject, Failed, reason.EvidenceSignatureInvalid, "the event names no termination record for its appender to have signed")
		return
	}
	var sv verdict
	org := createdBy(e)
	if agr == nil {
		sv.unsure("the agreement is not in the bundle")
	} else if partyOrg(agr.payload, "buyer") != org && partyOrg(agr.payload, "supplier") != org {
		sv.fail("%s is not a party to %s", org, agr.id)
	}
	res, detail := r.signatureOver(org, want)
	sv.take(res, detail)
	res, detail = sv.result()
	r.add(5, "termination_signatures", e.subject, res, reason.EvidenceSignatureInvalid, detail)
}

// signatureOver settles whether org issued and validly signed a
// signed_document over hash.
func (r *run) signatureOver(org, hash string) (Result, string) {
	res, detail := Failed, fmt.Sprintf("no signed_document over %s is signed by %s", short(hash), orNone(org))
	for _, o := range r.objs {
		if o.typ != protocol.Evidence || str(o.payload, "evidence_type") != "signed_document" || str(o.payload, "artifact_hash") != hash || createdBy(o) != org {
			continue
		}
		issuer, _ := objAt(o.payload, "issuer")
		if str(issuer, "organization_id") != org {
			continue
		}
		if got, d := r.signedBy(o, org); got == Verified || res == Failed {
			res, detail = got, d
		}
	}
	return res, detail
}

// pairSignatures adds the check named name: each party to agr signed a
// signed_document over hash.
func (r *run) pairSignatures(e *object, agr *object, hash, name string) {
	var v verdict
	for _, role := range []string{"buyer", "supplier"} {
		v.take(r.signatureOver(partyOrg(agr.payload, role), hash))
	}
	res, detail := v.result()
	r.add(5, name, e.subject, res, reason.EvidenceSignatureInvalid, detail)
}

// sameJSON compares two decoded JSON values by their canonical bytes.
func sameJSON(a, b any) bool {
	x, err1 := canonical.Marshal(a)
	y, err2 := canonical.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// remediationSignature recognises a signed_document that is a party's
// signature over a remediation record of its transaction (the offer to
// remedy, or its acceptance): its artifact_hash is the record of the
// exception in force after some event of the stream, for that exception's
// obligation, due RemediationDelay after the offer or at the due time of
// the remediation obligation the bundle holds. Such a signature supports
// the remediation, which no id names, so it is not unreferenced evidence
// (step 7).
func (r *run) remediationSignature(o *object) {
	txn, at, s, want, ok := r.signedRecord(o)
	if !ok {
		return
	}
	// The remediation of an outstanding remainder names no due time ("").
	dues := []string{at.Add(RemediationDelay).UTC().Format(time.RFC3339), ""}
	for _, x := range r.objs {
		if x.typ == protocol.Obligation && str(x.val, "transaction_id") == txn {
			if d, ok := objAt(x.payload, "due_condition"); ok && str(d, "type") == "due_at_time" {
				dues = append(dues, str(d, "at"))
			}
		}
	}
	for k := range signableEvents(s, at) {
		e := s.events[k]
		excID, agr := exceptionInForce(s, k+1), agreementInForce(s, k+1)
		exc, held := r.heldAs(excID, protocol.Exception)
		if !held || agr == "" {
			continue
		}
		obl, held := r.heldAs(str(exc.payload, "obligation_id"), protocol.Obligation)
		if !held {
			continue
		}
		for _, due := range dues {
			h, err := RemediationHash(txn, agr, excID, e.recomputed, obl.id, str(obl.payload, "quantity"), str(obl.payload, "unit_code"), due)
			if err == nil && h == want {
				r.referenced[o.id] = true
				r.add(5, "remediation_signature", o.subject, Verified, "", fmt.Sprintf("%s signs the remediation record of %s after event %d (%s)", createdBy(o), excID, k+1, short(want)))
				return
			}
		}
	}
}

// outstandingGuard is exception.opened's guard for an obligation_outstanding
// exception: the obligation is the remainder a partial acceptance of the
// transaction named, recorded before the event; it is neither accepted,
// waived nor released before it; and the exception's evidence includes a
// signed_document over that acceptance's content hash.
func (r *run) outstandingGuard(v *verdict, s *stream, i int, e *object, oblID string, evidence []*object) {
	occurred, _ := timeAt(e.payload, "occurred_at")
	var resp *object
	for _, o := range r.objs {
		if o.typ == protocol.ObligationResponse && str(o.payload, "response_type") == "accept" && str(o.payload, "remainder_obligation_id") == oblID &&
			createdNoLater(o, occurred) {
			resp = o
		}
	}
	if resp == nil {
		v.fail("%s is the remainder of no partial acceptance recorded before %s", oblID, e.subject)
		return
	}
	if b := r.ledgerAt(s, i).Balance(oblID); b != nil && b.Status != "open" {
		v.fail("%s is %s before %s: it is not outstanding", oblID, b.Status, e.subject)
	} else {
		v.pass("%s, the remainder of %s, is still owed", oblID, resp.subject)
	}
	for _, ev := range evidence {
		if str(ev.payload, "evidence_type") == "signed_document" && str(ev.payload, "artifact_hash") == resp.recomputed {
			v.pass("the exception presents %s over the partial acceptance %s", ev.subject, resp.subject)
			return
		}
	}
	v.fail("no signed_document evidence of the exception is over the partial acceptance %s", resp.subject)
}
