package record

// The exception path (pilot state machine §5, the rows exception.opened,
// remediation.accepted, exception.resolved, transaction.terminated and
// termination.agreed from exception_open; §11 tests 12 and 13; obligation
// §6.2; settlement handoff §4: a rail's refusal or reversal does not
// cancel an obligation).
//
// The kernel defers the exception's payload (spec-map C17): party's form
// is verify.CheckException's (docs/record-protocol.md,
// "Exceptions and disputes (issue 17, items 1–8)"), an exception object
// (exc_) travelling with
// exception.opened, which names it. Three exceptions are opened:
//
//   - settlement_failed (OpenException, act exception.open): by either
//     party, when an instruction on the transaction failed or was
//     reversed, as the ledger reads its receipts; the obligation paid is
//     its scope, and its evidence an adapter_receipt evidence over the
//     receipt that said so. The obligation stays as it stands (accepted):
//     the state machine pauses it by leaving settlement_pending, nothing
//     else.
//   - obligation_outstanding (OpenException with an obligation_id; issue
//     38): by either party, in settlement_pending, over a partial
//     acceptance's remainder still pending; its evidence a signed_document
//     over the partial acceptance's content hash. Its remediation performs
//     the remainder itself: remediation.accepted names it and issues no
//     obligation, and the remediation record's due time is "" (the
//     remainder keeps its own due condition).
//   - obligation_disputed: a dispute over an obligation's state
//     (disputes.go) opens it, riding the same event with its own decision
//     (dispute.raise); the obligation moves to disputed.
//
// From exception_open:
//
//	remediation: the obligor of the exception's obligation offers to perform it again
//	  propose_remediation → its signed_document over the remediation record + decision
//	                        (act remediation.accept)                          → stored by the obligee
//	  accept_remediation  → the obligee's signed_document over the same record, the
//	                        remediation obligation (the duty again: same agreement, parties,
//	                        subject, unit and quantity, no consideration of its own, due
//	                        verify.RemediationDelay after the offer), decision, event
//	                        remediation.accepted {agreement_id, exception_id, obligation_id,
//	                        remediation_hash} (→ in_performance; the obligation pending)
//	resolve_exception     → exception.resolved {agreement_id, exception_id} (→ settlement_pending),
//	                        by the party that opened the exception; a disputed obligation's
//	                        exception once its dispute is determined
//	terminate_transaction → the terminating party's signed_document over the termination
//	                        record (verify.TerminationRecord: every open obligation released)
//	                        + event transaction.terminated {agreement_id, exception_id,
//	                        termination_record_hash} (→ terminated), by either party
//	propose_termination / agree_termination (termination.go): termination.agreed
//
// The remediation record (verify.RemediationRecord) names the transaction,
// the agreement in force, the exception, the event the remediation follows
// (the head), the obligation performed again, its quantity and unit, and
// the due time; every member is in both records once the offer to remedy
// is held, so each party computes it and signs its hash, and a third party
// recomputes it. After a failed payment, resolving the exception and
// instructing again is the ordinary way on; remediation is the way when the
// parties agree that the duty is performed again (a wrong delivery; or a
// delivery to be made again before payment is tried again).
//
// Each countersigner's check mirrors the acting side's (one function where
// the rule is the same), and the verifier's guards (verify/exceptions.go)
// follow in verify.Extend.

import (
	"context"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// ExceptionInput opens an exception over a failed settlement.
type ExceptionInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
	// SettlementInstructionID defaults to the instruction whose latest
	// receipt failed.
	SettlementInstructionID string `json:"settlement_instruction_id,omitempty" jsonschema:"The failed or reversed instruction (stl_...), if several."`
	// ObligationID names a partial acceptance's remainder still owed: the
	// exception is then obligation_outstanding, whose remediation performs
	// the remainder.
	ObligationID string `json:"obligation_id,omitempty" jsonschema:"Instead of a failed payment: a remainder (obl_...) to perform through remediation."`
	ApprovalID   string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// ExceptionActInput names a transaction in exception_open.
type ExceptionActInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
	ApprovalID    string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// exceptionPayload is an exception in party's form.
func exceptionPayload(kind protocol.ExceptionType, obligation string, dispute, stl, adp any, refs []any) map[string]any {
	return map[string]any{
		"exception_type": string(kind), "obligation_id": obligation, "dispute_id": dispute,
		"settlement_instruction_id": stl, "adapter_receipt_id": adp, "evidence_refs": refs,
	}
}

// buildDisputeException opens the exception a dispute over an obligation's
// state opens: the exception, the event's data, and the dispute riding
// with its own decision (act dispute.raise over terms and refs).
func (e *Engine) buildDisputeException(ctx context.Context, st *state, b *builder, dsp, subject *Obj, terms, refs map[string]any) error {
	exc, err := e.addException(ctx, st, b, exceptionPayload(protocol.ExceptionObligationDisputed, subject.P("obligation_id"), dsp.ID(), nil, nil,
		anyList(dsp.Payload()["evidence_refs"])))
	if err != nil {
		return err
	}
	if problems := verify.CheckException(exc.Payload()); len(problems) > 0 {
		return errf("own exception %s: %v", exc.ID(), problems)
	}
	b.data["dispute_id"] = dsp.ID()
	return b.rideAct(ctx, protocol.ActDisputeRaise, terms, refs)
}

// addException issues the exception payload describes (exceptionPayload)
// and makes it the act's: exception.opened names it, the agreement in
// force and the obligation it is about; each kind adds to b.data what
// else its event names.
func (e *Engine) addException(ctx context.Context, st *state, b *builder, payload map[string]any) (*Obj, error) {
	_, agr, err := e.termsInForce(ctx, st.t.ID)
	if err != nil {
		return nil, err
	}
	exc, err := b.add(protocol.Exception, payload, protocol.PurposeObjectIssuance)
	if err != nil {
		return nil, err
	}
	b.data = map[string]any{"agreement_id": agr, "exception_id": exc.ID(), "obligation_id": payload["obligation_id"]}
	b.name("exception", exc.ID())
	return exc, nil
}

// failedSettlement finds the instruction of txn that failed or was
// reversed, as the ledger reads its receipts (id, when given, names it),
// and the receipt that said so. A failed receipt that contradicts an
// earlier success is not a failure (ledger.Next): only a reversal,
// reported as one, undoes a payment.
func (e *Engine) failedSettlement(ctx context.Context, txn, id string) (stl, rcp *Obj, err error) {
	l, err := e.ledgerOf(ctx, txn)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range l.Obligations {
		for _, in := range b.Instructions {
			if (id != "" && in.InstructionID != id) || (in.Status != ledger.InstrFailed && in.Status != ledger.InstrReversed) {
				continue
			}
			o, ok := e.getTyped(ctx, txn, in.InstructionID, protocol.Settlement)
			r, ok2 := e.getTyped(ctx, txn, in.SettledBy, protocol.AdapterReceipt)
			if !ok || !ok2 {
				return nil, nil, errf("instruction %s or its receipt %s is not held", in.InstructionID, in.SettledBy)
			}
			return o, r, nil
		}
	}
	return nil, nil, refusef(reason.StateTransitionDenied, "no settlement instruction of %s failed or was reversed: an exception is opened over a failed settlement", txn)
}

// receiptEvidenceClaim is the claim of the evidence over a failed receipt
// (free text).
const receiptEvidenceClaim = "The adapter receipt whose content hash is this artifact_hash reports the settlement failed"

// OpenException opens an exception (see the top of this file):
// exception.opened, committed…settlement_pending → exception_open. Over a
// failed settlement by default; with an obligation_id, over a partial
// acceptance's remainder still owed (obligation_outstanding), its evidence
// a signed_document over the partial acceptance, from settlement_pending;
// the obligor then offers to perform (propose_remediation) and the obligee
// accepts, which returns the transaction to in_performance with the
// remainder itself to perform. Either party opens either.
func (e *Engine) OpenException(ctx context.Context, a Actor, in ExceptionInput) (Outcome, error) {
	return exceptionOpen.perform(ctx, e, a, in)
}

// exceptionOpen is exception.open: exception.opened with its exception.
var exceptionOpen = &act[ExceptionInput]{
	name: protocol.ActExceptionOpen,
	lines: []actLine{
		{event: protocol.EvExceptionOpened,
			carries: counts{protocol.Exception: 1, protocol.Dispute: 1, protocol.Evidence: -1, protocol.PolicyDecision: 2},
			check:   checkExceptionOpened, apply: moves(disputedByException, responded)},
	},
	spec: openExceptionSpec,
}

func openExceptionSpec(ctx context.Context, e *Engine, a Actor, in ExceptionInput) (actSpec, error) {
	outstanding := in.ObligationID != ""
	var stl, rcp, resp *Obj
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, event: protocol.EvExceptionOpened, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			if in.SettlementInstructionID != "" && outstanding {
				return reason.Refuse("an exception is over a failed payment (settlement_instruction_id) or an outstanding remainder (obligation_id), not both")
			}
			var err error
			if outstanding {
				resp, err = e.outstandingRemainder(ctx, st, in.ObligationID)
			} else {
				stl, rcp, err = e.failedSettlement(ctx, st.t.ID, in.SettlementInstructionID)
			}
			return err
		},
		act: e.inForceAct,
		build: func(ctx context.Context, st *state, b *builder) error {
			if outstanding {
				evd, err := signRecord(b, verify.OutstandingEvidenceClaim, resp.Hash())
				if err != nil {
					return err
				}
				exc, err := e.addException(ctx, st, b, exceptionPayload(protocol.ExceptionObligationOutstanding, in.ObligationID, nil, nil, nil, []any{evidenceRef(evd, "")}))
				if err != nil {
					return err
				}
				if problems := verify.CheckException(exc.Payload()); len(problems) > 0 {
					return errf("own exception %s: %v", exc.ID(), problems)
				}
				return nil
			}
			ref, err := b.evidence(EvidenceInput{EvidenceType: "adapter_receipt", Claim: receiptEvidenceClaim, ArtifactHash: rcp.Hash()})
			if err != nil {
				return err
			}
			if _, err := e.addException(ctx, st, b, exceptionPayload(protocol.ExceptionSettlementFailed, stl.P("obligation_id"), nil, stl.ID(), rcp.ID(), []any{ref})); err != nil {
				return err
			}
			b.data["settlement_instruction_id"], b.data["adapter_receipt_id"] = stl.ID(), rcp.ID()
			return nil
		},
	}, nil
}

// checkExceptionOpened is the countersigner's live guard of
// exception.opened: the exception travels, is the sender's, of party's
// form, about an obligation of the transaction; a disputed obligation's
// carries the sender's dispute, checked as any dispute is (checkDispute)
// with its own decision; a failed settlement's names an instruction held
// here whose latest receipt failed, with the evidence over that receipt.
func checkExceptionOpened(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	exc := r.one(protocol.Exception)
	if exc == nil || exc.ID() != ev.Data("exception_id") {
		return refusef(reason.StateTransitionDenied, "exception.opened names an exception that does not travel with it")
	}
	if problems := verify.CheckException(exc.Payload()); len(problems) > 0 {
		return refusef(reason.StateTransitionDenied, "exception %s does not state its type, scope and evidence: %v", exc.ID(), problems)
	}
	_, agr, err := e.termsInForce(ctx, r.txn)
	if err != nil {
		return err
	}
	if ev.Data("agreement_id") != agr || ev.Data("obligation_id") != exc.P("obligation_id") {
		return refusef(reason.StateTransitionDenied, "exception.opened names another agreement or obligation than the exception in force")
	}
	if _, ok := e.getTyped(ctx, r.txn, exc.P("obligation_id"), protocol.Obligation); !ok {
		return refusef(reason.ObligationSubjectUnreferenced, "exception %s is about obligation %s, which is not held on %s", exc.ID(), exc.P("obligation_id"), r.txn)
	}
	travelling := map[string]*Obj{}
	for _, o := range r.byType(protocol.Evidence) {
		travelling[o.ID()] = o
	}
	switch protocol.ExceptionType(exc.P("exception_type")) {
	case protocol.ExceptionObligationDisputed:
		dsp := r.one(protocol.Dispute)
		if dsp == nil || dsp.ID() != exc.P("dispute_id") || ev.Data("dispute_id") != dsp.ID() {
			return refusef(reason.DisputeSubjectUnreferenced, "an exception over a disputed obligation travels with the dispute it names")
		}
		if dsp.P("subject_type") != string(protocol.SubjectObligationState) {
			return refusef(reason.StateTransitionDenied, "a dispute over a %s opens no exception: raising suspends nothing", dsp.P("subject_type"))
		}
		subject, err := e.checkDispute(ctx, r.st, dsp, r.from, travelling)
		if err != nil {
			return err
		}
		if subject.P("obligation_id") != exc.P("obligation_id") {
			return refusef(reason.DisputeSubjectUnreferenced, "the dispute is about obligation %s, the exception about %s", subject.P("obligation_id"), exc.P("obligation_id"))
		}
		if string(mustCanonical(dsp.Payload()["evidence_refs"])) != string(mustCanonical(exc.Payload()["evidence_refs"])) {
			return refusef(reason.EvidenceUnverified, "the exception's evidence is not its dispute's")
		}
		terms, refs, err := e.transactionAct(ctx, r.txn, "subject_id", subject.ID())
		if err != nil {
			return err
		}
		return e.checkRiderActs(ctx, r, ev, []riderAct{{obj: dsp, act: actDoc{name: protocol.ActDisputeRaise, terms: terms, refs: refs}}})
	case protocol.ExceptionSettlementFailed:
		if r.one(protocol.Dispute) != nil {
			return reason.Refuse("an exception over a failed settlement carries no dispute")
		}
		stl, rcp, err := e.failedSettlement(ctx, r.txn, exc.P("settlement_instruction_id"))
		if err != nil {
			return err
		}
		if rcp.ID() != exc.P("adapter_receipt_id") || stl.P("obligation_id") != exc.P("obligation_id") ||
			ev.Data("settlement_instruction_id") != stl.ID() || ev.Data("adapter_receipt_id") != rcp.ID() {
			return refusef(reason.SettlementReceiptUnmatched, "exception %s names receipt %s, not the failed latest receipt %s of %s paying %s",
				exc.ID(), exc.P("adapter_receipt_id"), rcp.ID(), stl.ID(), stl.P("obligation_id"))
		}
		if err := e.checkEvidenceRefs(ctx, r.txn, exc.Payload()["evidence_refs"], travelling); err != nil {
			return err
		}
		if len(travelling) != 1 {
			return refusef(reason.EvidenceUnverified, "an exception over a failed settlement presents one evidence item, over the receipt")
		}
		for _, o := range travelling {
			if o.P("evidence_type") != "adapter_receipt" || o.P("artifact_hash") != rcp.Hash() {
				return refusef(reason.EvidenceUnverified, "the exception's evidence is not an adapter_receipt evidence over %s", rcp.ID())
			}
		}
		return e.checkRiderActs(ctx, r, ev, nil)
	case protocol.ExceptionObligationOutstanding:
		if r.one(protocol.Dispute) != nil {
			return reason.Refuse("an exception over an outstanding remainder carries no dispute")
		}
		resp, err := e.outstandingRemainder(ctx, r.st, exc.P("obligation_id"))
		if err != nil {
			return err
		}
		if err := e.checkEvidenceRefs(ctx, r.txn, exc.Payload()["evidence_refs"], travelling); err != nil {
			return err
		}
		if len(travelling) != 1 {
			return refusef(reason.EvidenceUnverified, "an exception over an outstanding remainder presents one evidence item, over the partial acceptance")
		}
		for _, o := range travelling {
			if o.P("evidence_type") != "signed_document" || o.P("artifact_hash") != resp.Hash() || o.P("claim") != verify.OutstandingEvidenceClaim {
				return refusef(reason.EvidenceUnverified, "the exception's evidence is not a signed_document over the partial acceptance %s", resp.ID())
			}
		}
		return e.checkRiderActs(ctx, r, ev, nil)
	}
	return refusef(reason.StateTransitionDenied, "exception type %q", exc.P("exception_type"))
}

// outstandingRemainder is the rule both sides apply to an exception over
// an outstanding remainder: obl is the remainder a recorded partial
// acceptance of the transaction named, still pending (neither performed,
// accepted, waived nor released), and the transaction settlement_pending,
// where nothing else performs it. It returns the accepting response.
func (e *Engine) outstandingRemainder(ctx context.Context, st *state, obl string) (*Obj, error) {
	if st.State() != protocol.SettlementPending {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s: a remainder is performed through an exception from settlement_pending (in %s it is simply asserted)",
			st.t.ID, st.t.State, protocol.InPerformance)
	}
	responses, err := e.ofType(ctx, st.t.ID, protocol.ObligationResponse)
	if err != nil {
		return nil, err
	}
	var resp *Obj
	for _, r := range responses {
		if r.P("response_type") == string(protocol.ResponseAccept) && r.P("remainder_obligation_id") == obl {
			resp = r
		}
	}
	if resp == nil {
		return nil, refusef(reason.ObligationRemainderMissing, "obligation %s is no partial acceptance's remainder on %s", obl, st.t.ID)
	}
	os, err := e.obligationState(ctx, st.t.ID, obl)
	if err != nil {
		return nil, err
	}
	if os.State != protocol.OblPending {
		return nil, refusef(reason.StateTransitionDenied, "remainder %s is %q: only one still owed is performed through an exception", obl, os.State)
	}
	return resp, nil
}

// openException returns the exception in force on st's transaction: the
// one the last exception.opened names, with the obligation it is about.
func (e *Engine) openException(ctx context.Context, st *state) (exc, obl *Obj, err error) {
	if st.State() != protocol.ExceptionOpen {
		return nil, nil, refusef(reason.StateTransitionDenied, "transaction %s is %s, not exception_open", st.t.ID, st.t.State)
	}
	rows, err := e.db.EventsOfTypes(ctx, st.t.ID, string(protocol.EvExceptionOpened))
	if err != nil {
		return nil, nil, err
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Status != store.EventRecorded {
			continue
		}
		ev, err := e.getEvent(ctx, st.t.ID, rows[i].EventID)
		if err != nil {
			return nil, nil, err
		}
		var ok bool
		if exc, ok = e.getTyped(ctx, st.t.ID, ev.Data("exception_id"), protocol.Exception); !ok {
			return nil, nil, errf("the exception %s is not held", ev.Data("exception_id"))
		}
		if obl, ok = e.getTyped(ctx, st.t.ID, exc.P("obligation_id"), protocol.Obligation); !ok {
			return nil, nil, errf("the obligation %s is not held", exc.P("obligation_id"))
		}
		return exc, obl, nil
	}
	return nil, nil, errf("transaction %s is exception_open with no exception recorded", st.t.ID)
}

// remediation is a remediation record as this copy computes it.
type remediation struct {
	exc, obl *Obj
	agr      *object.Agreement
	due      string
	hash     string
}

// sign issues this organisation's signature over rec, an offer to remedy
// or its acceptance, and names it, with the record's hash, in the outcome.
func (rec *remediation) sign(b *builder) (*Obj, error) {
	evd, err := signRecord(b, verify.RemediationSignatureClaim, rec.hash)
	if err != nil {
		return nil, err
	}
	b.name("remediation_signature", evd.ID())
	b.name("remediation_hash", rec.hash)
	return evd, nil
}

// remediationOf computes the remediation record of st's copy for an offer
// to remedy made at offeredAt.
func (e *Engine) remediationOf(ctx context.Context, st *state, offeredAt string) (remediation, error) {
	exc, obl, err := e.openException(ctx, st)
	if err != nil {
		return remediation{}, err
	}
	agr, err := e.agreementOf(ctx, st.t.ID)
	if err != nil || agr == nil {
		return remediation{}, refusef(reason.StateTransitionDenied, "transaction %s has no agreement", st.t.ID)
	}
	at, err := envelope.ParseTimestamp(offeredAt)
	if err != nil {
		return remediation{}, err
	}
	due := envelope.Timestamp(at.Add(verify.RemediationDelay))
	if exc.P("exception_type") == string(protocol.ExceptionObligationOutstanding) {
		due = "" // the remainder is performed as it is owed, by its own due condition
	}
	h, err := verify.RemediationHash(st.t.ID, agr.ID(), exc.ID(), st.t.HeadHash, obl.ID(), obl.P("quantity"), obl.P("unit_code"), due)
	if err != nil {
		return remediation{}, err
	}
	return remediation{exc: exc, obl: obl, agr: agr, due: due, hash: h}, nil
}

// remediationOffer returns org's offer to remedy that is current on st's
// copy (its record is the record after the head), and the record.
func (e *Engine) remediationOffer(ctx context.Context, st *state, org string) (*Obj, remediation, error) {
	list, err := e.ofType(ctx, st.t.ID, protocol.Evidence)
	if err != nil {
		return nil, remediation{}, err
	}
	for i := len(list) - 1; i >= 0; i-- {
		o := list[i]
		if !isSignature(o, org, verify.RemediationSignatureClaim) {
			continue
		}
		rec, err := e.remediationOf(ctx, st, str(o.Value()["created_at"]))
		if err != nil {
			return nil, remediation{}, err
		}
		if rec.hash == o.P("artifact_hash") {
			return o, rec, nil
		}
	}
	return nil, remediation{}, nil
}

// ProposeRemediation offers, as the obligor of the exception's obligation,
// to perform it again (see the top of this file).
func (e *Engine) ProposeRemediation(ctx context.Context, a Actor, in ExceptionActInput) (Outcome, error) {
	return remediationPropose.perform(ctx, e, a, in)
}

// remediationPropose is remediation.accept's first half: the proposer's
// signature over the remediation, travelling without an event.
var remediationPropose = &act[ExceptionActInput]{
	name: protocol.ActRemediationAccept,
	lines: []actLine{
		{recognise: signatureOver(verify.RemediationSignatureClaim), objects: remediationProposalAct},
	},
	spec: proposeRemediationSpec,
}

func proposeRemediationSpec(ctx context.Context, e *Engine, a Actor, in ExceptionActInput) (actSpec, error) {
	var rec remediation
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			var err error
			if rec, err = e.remediationOf(ctx, st, envelope.Timestamp(st.now)); err != nil {
				return err
			}
			if rec.obl.PartyOrg("obligor") != e.org.Config().OrganizationID {
				return refusef(reason.StateTransitionDenied, "the obligor of %s offers to perform it again; this organisation is its obligee (accept_remediation accepts an offer)", rec.obl.ID())
			}
			if mine, _, err := e.remediationOffer(ctx, st, e.org.Config().OrganizationID); err != nil || mine != nil {
				if err == nil {
					err = refusef(reason.StateTransitionDenied, "this organisation offered a remediation at this point already (%s)", mine.ID())
				}
				return err
			}
			return nil
		},
		act: e.inForceAct,
		build: func(ctx context.Context, st *state, b *builder) error {
			evd, err := rec.sign(b)
			if err != nil {
				return err
			}
			if str(evd.Value()["created_at"]) != envelope.Timestamp(st.now) {
				return errf("the offer to remedy is dated %v, its record %s", evd.Value()["created_at"], envelope.Timestamp(st.now))
			}
			return nil
		},
	}, nil
}

// remediationProposalAct is the obligee's side of an offer to remedy
// (receiveObjects):
// the obligor's signature over the remediation record of this copy as it
// stands, and its decision, checked like any act.
func remediationProposalAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	evd, err := r.signature(verify.RemediationSignatureClaim, "signature over a record")
	if err != nil {
		return objectAct{}, err
	}
	rec, err := e.remediationOf(ctx, r.st, str(evd.Value()["created_at"]))
	if err != nil {
		return objectAct{}, err
	}
	if rec.obl.PartyOrg("obligor") != r.from {
		return objectAct{}, refusef(reason.StateTransitionDenied, "only the obligor of %s offers to perform it again", rec.obl.ID())
	}
	if evd.P("artifact_hash") != rec.hash {
		return objectAct{}, refusef(reason.StateTransitionDenied, "the remediation record %s is not this record's (%s): it follows event %d, performs %s again and falls due %s",
			evd.P("artifact_hash"), rec.hash, r.st.t.HeadSequence, rec.obl.ID(), rec.due)
	}
	terms, refs, err := e.transactionAct(ctx, r.txn, "", "")
	if err != nil {
		return objectAct{}, err
	}
	return objectAct{over: evd, doc: actDoc{name: protocol.ActRemediationAccept, terms: terms, refs: refs},
		what: "remediation offered by the counterparty", key: "remediation_hash", id: rec.hash}, nil
}

// remediationObligation is the obligation a remediation activates: the
// exception's obligation performed again (verify.CheckException's
// remediation guard).
func remediationObligation(obl *Obj, due string) map[string]any {
	payload := map[string]any{}
	for k, v := range obl.Payload() {
		payload[k] = v
	}
	payload["consideration"] = nil
	payload["due_condition"] = map[string]any{"type": "due_at_time", "at": due}
	payload["state"] = string(protocol.OblPending)
	return payload
}

// AcceptRemediation accepts, as the obligee, the obligor's current offer
// to perform the exception's obligation again: remediation.accepted
// (exception_open → in_performance).
func (e *Engine) AcceptRemediation(ctx context.Context, a Actor, in ExceptionActInput) (Outcome, error) {
	return remediationAccept.perform(ctx, e, a, in)
}

// remediationAccept is remediation.accept's second half:
// remediation.accepted, carrying the remedial obligation.
var remediationAccept = &act[ExceptionActInput]{
	name: protocol.ActRemediationAccept,
	lines: []actLine{
		{event: protocol.EvRemediationAccepted,
			carries: counts{protocol.Obligation: 1, protocol.Evidence: 1},
			check:   checkRemediationAccepted, apply: moves(carriedPending, responded)},
	},
	spec: acceptRemediationSpec,
}

func acceptRemediationSpec(ctx context.Context, e *Engine, a Actor, in ExceptionActInput) (actSpec, error) {
	var rec remediation
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvRemediationAccepted,
		check: func(ctx context.Context, st *state) error {
			offer, r, err := e.remediationOffer(ctx, st, st.t.Counterparty)
			if err != nil {
				return err
			}
			if offer == nil {
				return refusef(reason.StateTransitionDenied, "%s has offered no remediation of transaction %s as it stands (after event %d): the obligor offers (propose_remediation) and the obligee accepts",
					st.t.Counterparty, st.t.ID, st.t.HeadSequence)
			}
			rec = r
			if rec.obl.PartyOrg("obligee") != e.org.Config().OrganizationID {
				return refusef(reason.StateTransitionDenied, "the obligee of %s accepts its remediation", rec.obl.ID())
			}
			return nil
		},
		act: e.inForceAct,
		build: func(ctx context.Context, st *state, b *builder) error {
			if _, err := rec.sign(b); err != nil {
				return err
			}
			var err error
			obl := rec.obl // an outstanding remainder is itself what is performed
			if rec.exc.P("exception_type") != string(protocol.ExceptionObligationOutstanding) {
				if obl, err = b.add(protocol.Obligation, remediationObligation(rec.obl, rec.due), protocol.PurposeObjectIssuance); err != nil {
					return asRefusal(err, reason.ObligationConditionUnknown)
				}
			}
			b.data = map[string]any{"agreement_id": rec.agr.ID(), "exception_id": rec.exc.ID(), "obligation_id": obl.ID(), "remediation_hash": rec.hash}
			b.name("obligation", obl.ID())
			return nil
		},
	}, nil
}

// checkRemediationAccepted is the obligor's live part of the guard of
// remediation.accepted: the obligee's signature and the remediation
// obligation travel, the obligation issued as any obligation to this
// organisation is (checkIssued), the hash the event binds is the record
// of this copy with the obligation's due time, and this organisation
// offered that very record. The verifier's guard (the obligation performs
// the exception's again; both signatures) follows in verify.Extend.
func checkRemediationAccepted(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	evd, obl := r.one(protocol.Evidence), r.one(protocol.Obligation)
	hash := ev.Data("remediation_hash")
	if evd == nil || !isSignature(evd, r.from, verify.RemediationSignatureClaim) || evd.P("artifact_hash") != hash {
		return refusef(reason.EvidenceSignatureInvalid, "remediation.accepted travels with %s's signed_document over the remediation record %s it binds", r.from, hash)
	}
	mine, rec, err := e.remediationOffer(ctx, r.st, e.org.Config().OrganizationID)
	if err != nil {
		return err
	}
	if mine == nil || rec.hash != hash {
		return refusef(reason.EvidenceSignatureInvalid, "%s never offered remediation record %s at this point: one party's signature is not an accepted remediation", e.org.Config().OrganizationID, hash)
	}
	if ev.Data("exception_id") != rec.exc.ID() || ev.Data("agreement_id") != rec.agr.ID() {
		return refusef(reason.StateTransitionDenied, "remediation.accepted names another exception or agreement than the one in force")
	}
	if rec.exc.P("exception_type") == string(protocol.ExceptionObligationOutstanding) {
		// The remainder itself is performed: nothing is issued.
		if obl != nil || ev.Data("obligation_id") != rec.obl.ID() {
			return refusef(reason.ObligationSubjectUnreferenced, "the remediation of an outstanding remainder performs %s itself and issues nothing", rec.obl.ID())
		}
		return nil
	}
	if obl == nil || obl.ID() != ev.Data("obligation_id") {
		return refusef(reason.ObligationSubjectUnreferenced, "remediation.accepted names an obligation that does not travel with it")
	}
	agr := held(ctx, e, r.txn, rec.obl.P("agreement_id"), object.AsAgreement)
	if agr == nil {
		return errf("the agreement %s is not held", rec.obl.P("agreement_id"))
	}
	if err := e.checkIssued(r.from, agr.View, obl, false); err != nil {
		return err
	}
	if string(mustCanonical(obl.Payload())) != string(mustCanonical(remediationObligation(rec.obl, rec.due))) {
		return refusef(reason.ObligationTermsMutated, "the remediation obligation %s does not perform %s again as offered: the same duty, no consideration, due %s", obl.ID(), rec.obl.ID(), rec.due)
	}
	return nil
}

// ResolveException resolves the exception this organisation opened:
// exception.resolved (exception_open → settlement_pending).
func (e *Engine) ResolveException(ctx context.Context, a Actor, in ExceptionActInput) (Outcome, error) {
	return exceptionResolve.perform(ctx, e, a, in)
}

// exceptionResolve is exception.resolve: exception.resolved.
var exceptionResolve = &act[ExceptionActInput]{
	name: protocol.ActExceptionResolve,
	lines: []actLine{
		{event: protocol.EvExceptionResolved, check: checkExceptionResolved},
	},
	spec: resolveExceptionSpec,
}

func resolveExceptionSpec(ctx context.Context, e *Engine, a Actor, in ExceptionActInput) (actSpec, error) {
	var exc *Obj
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvExceptionResolved,
		check: func(ctx context.Context, st *state) error {
			var err error
			exc, err = e.resolvable(ctx, st, e.org.Config().OrganizationID)
			return err
		},
		act: e.inForceAct,
		build: func(ctx context.Context, st *state, b *builder) error {
			_, agr, err := e.termsInForce(ctx, st.t.ID)
			if err != nil {
				return err
			}
			b.data = map[string]any{"agreement_id": agr, "exception_id": exc.ID()}
			return nil
		},
	}, nil
}

// resolvable is the rule both sides apply to exception.resolved by org:
// the exception in force is org's, and a disputed obligation's has its
// dispute determined.
func (e *Engine) resolvable(ctx context.Context, st *state, org string) (*Obj, error) {
	exc, _, err := e.openException(ctx, st)
	if err != nil {
		return nil, err
	}
	if exc.Org() != org {
		return nil, refusef(reason.StateTransitionDenied, "exception %s is %s's: the party that opened an exception resolves it", exc.ID(), exc.Org())
	}
	if exc.P("exception_type") == string(protocol.ExceptionObligationDisputed) {
		dets, err := e.ofType(ctx, st.t.ID, protocol.Determination)
		if err != nil {
			return nil, err
		}
		for _, d := range dets {
			if d.P("dispute_id") == exc.P("dispute_id") {
				return exc, nil
			}
		}
		return nil, refusef(reason.StateTransitionDenied, "the dispute %s of exception %s is not determined: its question is open", exc.P("dispute_id"), exc.ID())
	}
	return exc, nil
}

// checkExceptionResolved is the countersigner's live guard of
// exception.resolved.
func checkExceptionResolved(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	exc, err := e.resolvable(ctx, r.st, r.from)
	if err != nil {
		return err
	}
	_, agr, err := e.termsInForce(ctx, r.txn)
	if err != nil {
		return err
	}
	if ev.Data("exception_id") != exc.ID() || ev.Data("agreement_id") != agr {
		return refusef(reason.StateTransitionDenied, "exception.resolved names another exception or agreement than the one in force (%s, %s)", exc.ID(), agr)
	}
	return nil
}

// TerminateTransaction ends a transaction through its open exception:
// transaction.terminated (exception_open → terminated), every open
// obligation released.
func (e *Engine) TerminateTransaction(ctx context.Context, a Actor, in ExceptionActInput) (Outcome, error) {
	return transactionTerminate.perform(ctx, e, a, in)
}

// transactionTerminate is transaction.terminate: transaction.terminated
// under an exception, with its termination record.
var transactionTerminate = &act[ExceptionActInput]{
	name: protocol.ActTransactionTerminate,
	lines: []actLine{
		{event: protocol.EvTransactionTerminated, offers: true,
			carries: counts{protocol.Evidence: 1}, check: checkTransactionTerminated, apply: releasesOpen},
	},
	spec: terminateSpec,
}

func terminateSpec(ctx context.Context, e *Engine, a Actor, in ExceptionActInput) (actSpec, error) {
	var rec terminationRecord
	var exc *Obj
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvTransactionTerminated,
		check: func(ctx context.Context, st *state) error {
			var err error
			if exc, _, err = e.openException(ctx, st); err != nil {
				return err
			}
			rec, err = e.terminationRecordOf(ctx, st)
			return err
		},
		act: e.inForceAct,
		build: func(ctx context.Context, st *state, b *builder) error {
			if err := rec.sign(b, verify.TerminatedSignatureClaim); err != nil {
				return err
			}
			b.data = map[string]any{"agreement_id": rec.agreement.ID(), "exception_id": exc.ID(), "termination_record_hash": rec.hash}
			return nil
		},
	}, nil
}

// checkTransactionTerminated is the countersigner's live guard of
// transaction.terminated: the exception in force, the termination record
// of this copy (every open obligation named), signed by the sender.
func checkTransactionTerminated(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	exc, _, err := e.openException(ctx, r.st)
	if err != nil {
		return err
	}
	evd := r.one(protocol.Evidence)
	hash := ev.Data("termination_record_hash")
	if evd == nil || evd.P("evidence_type") != "signed_document" || evd.P("artifact_hash") != hash || str(evd.PSub("issuer")["organization_id"]) != r.from {
		return refusef(reason.EvidenceSignatureInvalid, "transaction.terminated travels with %s's signed_document over the termination record %s", r.from, hash)
	}
	rec, err := e.terminationRecordOf(ctx, r.st)
	if err != nil {
		return err
	}
	if hash != rec.hash {
		return refusef(reason.StateTransitionDenied, "termination record %s is not this record's (%s): it names the disposition of every obligation not yet terminal (%v), after event %d",
			hash, rec.hash, rec.open, r.st.t.HeadSequence)
	}
	if ev.Data("exception_id") != exc.ID() || ev.Data("agreement_id") != rec.agreement.ID() {
		return refusef(reason.StateTransitionDenied, "transaction.terminated names another exception or agreement than the one in force (%s, %s)", exc.ID(), rec.agreement.ID())
	}
	return nil
}
