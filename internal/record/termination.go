package record

// Consensual termination (pilot state machine §5 row termination.agreed,
// §5.2, tests 22–23; obligation §6.1 obligation.released).
//
// Both parties end a committed transaction by agreement, from committed,
// in_performance, acceptance_pending or settlement_pending (and
// exception_open, which nothing here reaches). The guard: both parties
// signed the same termination record hash, and the record names the
// disposition of every obligation not yet terminal; the named obligations
// move to released, and the transaction to terminated.
//
// The kernel has no object type for the termination record (spec-map C16,
// D19), so its form is decided here (docs/record-protocol.md,
// "Cancellation, termination, waivers and amendment (issue 15, items
// 1–5)" item 2): the RFC 8785 document verify.TerminationRecord builds —
// record_type "termination", the transaction, the agreement in force, the
// content hash of the event the termination follows (the head, so that a
// record is about one point of the chain), and one disposition
// {obligation_id, disposition: "released"} for every obligation still open
// (pending, asserted or rejected: neither accepted, waived nor released),
// sorted by id. Its SHA-256 is the termination_record_hash. A party signs
// it by issuing an evidence object of type signed_document whose
// artifact_hash is that hash (an existing kernel type whose schema fits: a
// claim, the hash it rests on, its issuer; signed by its creator). Every
// member of the record is in the record already, so neither instance needs
// the other's copy of it, and a third party recomputes it from a bundle.
//
// Two acts, each the party's own termination.agree (document: the
// agreement's terms and agreement_id):
//
//	proposer: propose_termination → its signed_document over the hash + its decision   → stored by the other
//	agreer:   agree_termination   → its signed_document over the same hash + decision
//	                                + event termination.agreed {agreement_id, termination_record_hash}
//	                                → countersigned by the proposer, whose instance checks that it signed
//	                                  that very hash and that the hash is the record of its own copy
//
// Each instance computes the record from its own copy; a proposal made at
// another point of the chain (the record moved since) or naming another
// set of obligations does not match, and the agreer's instance refuses to
// agree to it (propose again). The countersigner refuses a termination
// whose record leaves an open obligation unnamed (A202-STATE-TRANSITION-
// DENIED; A202-EVIDENCE-TRANSITION-ILLEGAL at replay), one it never signed
// itself (A202-EVIDENCE-SIGNATURE-INVALID: one signature is not an
// agreement), and one from a state the rules do not allow
// (A202-STATE-TRANSITION-DENIED). Replayed under rules 1.0 or 1.1, where
// termination.agreed is not a row, the event is
// A202-EVIDENCE-TRANSITION-ILLEGAL (test 25).

import (
	"context"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// TerminationInput names the transaction to end by agreement.
type TerminationInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
	// ApprovalID is an approval of exactly this act, when the mandate
	// holds termination.agree for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// terminationRecord is a transaction's termination record as this copy
// holds it now: the record, its hash, the agreement in force.
type terminationRecord struct {
	record    map[string]any
	hash      string
	agreement *object.Agreement
	open      []string
}

// terminationRecordOf computes the termination record of st's copy
// (verify.TerminationRecord, the one definition both instances and the
// verifier use).
func (e *Engine) terminationRecordOf(ctx context.Context, st *state) (terminationRecord, error) {
	agr, err := e.agreementOf(ctx, st.t.ID)
	if err != nil {
		return terminationRecord{}, err
	}
	if agr == nil {
		return terminationRecord{}, refusef(reason.StateTransitionDenied, "transaction %s has no agreement to terminate", st.t.ID)
	}
	obls, err := e.db.ObligationStates(ctx, st.t.ID)
	if err != nil {
		return terminationRecord{}, err
	}
	open := []string{}
	for _, os := range obls {
		if protocol.ObligationState(os.State).Open() {
			open = append(open, os.ObligationID)
		}
	}
	rec := verify.TerminationRecord(st.t.ID, agr.ID(), st.t.HeadHash, open)
	h, err := verify.TerminationRecordHash(st.t.ID, agr.ID(), st.t.HeadHash, open)
	if err != nil {
		return terminationRecord{}, err
	}
	return terminationRecord{record: rec, hash: h, agreement: agr, open: open}, nil
}

// terminable refuses a transaction the rules give no termination.agreed
// from.
func terminable(st *state) error {
	if _, ok := rules.Next(RulesVersion, rules.Aggregate, st.t.State, protocol.EvTerminationAgreed); !ok {
		return refusef(reason.StateTransitionDenied, "transaction %s is %s: termination.agreed leaves committed, in_performance, acceptance_pending, "+
			"settlement_pending or exception_open (rules %s)", st.t.ID, st.t.State, RulesVersion)
	}
	return nil
}

// terminableRecord is the termination record of st's copy, refused where
// the rules give no termination.agreed: what a proposal and an agreement,
// made here or received, are both over.
func (e *Engine) terminableRecord(ctx context.Context, st *state) (terminationRecord, error) {
	if err := terminable(st); err != nil {
		return terminationRecord{}, err
	}
	return e.terminationRecordOf(ctx, st)
}

// act is the act document a termination by agreement is decided on: the
// terms of the agreement in force, which it references. The pointer
// receiver lets an actSpec take rec.act before check has computed rec.
func (rec *terminationRecord) act(context.Context, *state) (terms, refs map[string]any, err error) {
	return rec.agreement.Terms(), map[string]any{"agreement_id": rec.agreement.ID()}, nil
}

// sign issues this organisation's signature over rec (the claim says which
// event it is for) and names it, with the record's hash, in the outcome.
func (rec *terminationRecord) sign(b *builder, claim string) error {
	evd, err := signRecord(b, claim, rec.hash)
	if err != nil {
		return err
	}
	b.name("termination_signature", evd.ID())
	b.name("termination_record_hash", rec.hash)
	return nil
}

// ProposeTermination signs the termination record of the transaction as
// it stands and sends the signature to the counterparty, which agrees to
// it with AgreeTermination.
func (e *Engine) ProposeTermination(ctx context.Context, a Actor, in TerminationInput) (Outcome, error) {
	return terminationPropose.perform(ctx, e, a, in)
}

// terminationPropose is termination.agree's first half: the proposer's
// signature over the termination record, travelling without an event.
var terminationPropose = &act[TerminationInput]{
	name: protocol.ActTerminationAgree,
	lines: []actLine{
		{recognise: signatureOver(""), objects: terminationProposalAct},
	},
	spec: proposeTerminationSpec,
}

func proposeTerminationSpec(ctx context.Context, e *Engine, a Actor, in TerminationInput) (actSpec, error) {
	var rec terminationRecord
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			var err error
			if rec, err = e.terminableRecord(ctx, st); err != nil {
				return err
			}
			if mine, err := e.heldSignature(ctx, st.t.ID, e.org.Config().OrganizationID, verify.TerminationSignatureClaim, rec.hash); err != nil || mine != nil {
				if err == nil {
					err = refusef(reason.StateTransitionDenied, "this organisation proposed termination record %s already (%s); the counterparty agrees to it with agree_termination", rec.hash, mine.ID())
				}
				return err
			}
			return nil
		},
		act: rec.act,
		build: func(ctx context.Context, st *state, b *builder) error {
			return rec.sign(b, verify.TerminationSignatureClaim)
		},
	}, nil
}

// terminationProposalAct is the other party's side of a proposal
// (receiveObjects): the proposer's signature over the termination record, which must be the
// record of this copy as it stands, and its decision, checked like any act.
func terminationProposalAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	evd, err := r.signature(verify.TerminationSignatureClaim, "signature over a termination record")
	if err != nil {
		return objectAct{}, err
	}
	rec, err := e.terminableRecord(ctx, r.st)
	if err != nil {
		return objectAct{}, err
	}
	if evd.P("artifact_hash") != rec.hash {
		return objectAct{}, refusef(reason.StateTransitionDenied, "the proposed termination record %s is not this record's (%s): it must follow event %d and name the disposition of every open obligation (%v)",
			evd.P("artifact_hash"), rec.hash, r.st.t.HeadSequence, rec.open)
	}
	terms, refs, _ := rec.act(ctx, r.st)
	return objectAct{over: evd,
		doc:  actDoc{name: protocol.ActTerminationAgree, terms: terms, refs: refs},
		what: "termination proposed by the counterparty", key: "termination_record_hash", id: rec.hash}, nil
}

// AgreeTermination agrees to the counterparty's proposal for the record as
// it stands: this organisation's signature over the same hash, and
// termination.agreed (→ terminated), countersigned by the proposer; every
// open obligation is released.
func (e *Engine) AgreeTermination(ctx context.Context, a Actor, in TerminationInput) (Outcome, error) {
	return terminationAgree.perform(ctx, e, a, in)
}

// terminationAgree is termination.agree's second half: termination.agreed,
// carrying the agreeing party's signature.
var terminationAgree = &act[TerminationInput]{
	name: protocol.ActTerminationAgree,
	lines: []actLine{
		{event: protocol.EvTerminationAgreed, offers: true,
			carries: counts{protocol.Evidence: 1}, check: checkTerminationAgreed, apply: releasesOpen},
	},
	spec: agreeTerminationSpec,
}

func agreeTerminationSpec(ctx context.Context, e *Engine, a Actor, in TerminationInput) (actSpec, error) {
	var rec terminationRecord
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvTerminationAgreed,
		check: func(ctx context.Context, st *state) error {
			var err error
			if rec, err = e.terminableRecord(ctx, st); err != nil {
				return err
			}
			theirs, err := e.heldSignature(ctx, st.t.ID, st.t.Counterparty, verify.TerminationSignatureClaim, rec.hash)
			if err != nil {
				return err
			}
			if theirs == nil {
				return refusef(reason.StateTransitionDenied, "%s has not proposed the termination record of %s as it stands (%s, after event %d); "+
					"agree to a proposal made at this point, or propose one (propose_termination)", st.t.Counterparty, st.t.ID, rec.hash, st.t.HeadSequence)
			}
			return nil
		},
		act: rec.act,
		build: func(ctx context.Context, st *state, b *builder) error {
			if err := rec.sign(b, verify.TerminationSignatureClaim); err != nil {
				return err
			}
			b.data = map[string]any{"agreement_id": rec.agreement.ID(), "termination_record_hash": rec.hash}
			return nil
		},
	}, nil
}

// checkTerminationAgreed is the proposer's live part of the guard of
// termination.agreed: the agreer's signature travels, over the hash the
// event binds; that hash is the termination record of this copy as it
// stands (every open obligation named); this organisation signed that very
// hash; the agreement named is the one in force. The verifier's guard
// (both signatures, the record recomputed from the objects) follows in
// verify.Extend.
func checkTerminationAgreed(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	evd := r.one(protocol.Evidence)
	hash := ev.Data("termination_record_hash")
	if evd == nil || !isSignature(evd, r.from, verify.TerminationSignatureClaim) || evd.P("artifact_hash") != hash {
		return refusef(reason.EvidenceSignatureInvalid, "termination.agreed travels with %s's signed_document over the termination record %s it binds", r.from, hash)
	}
	rec, err := e.terminationRecordOf(ctx, r.st)
	if err != nil {
		return err
	}
	if hash != rec.hash {
		return refusef(reason.StateTransitionDenied, "termination record %s is not this record's (%s): a termination names the disposition of every obligation not yet terminal (%v), after event %d",
			hash, rec.hash, rec.open, r.st.t.HeadSequence)
	}
	if ev.Data("agreement_id") != rec.agreement.ID() {
		return refusef(reason.StateTransitionDenied, "termination.agreed names agreement %s; the agreement in force is %s", ev.Data("agreement_id"), rec.agreement.ID())
	}
	mine, err := e.heldSignature(ctx, r.txn, e.org.Config().OrganizationID, verify.TerminationSignatureClaim, hash)
	if err != nil {
		return err
	}
	if mine == nil {
		return refusef(reason.EvidenceSignatureInvalid, "%s never signed termination record %s: one party's signature is not a consensual termination", e.org.Config().OrganizationID, hash)
	}
	return nil
}

// terminationProposals lists the proposals a transaction holds.
func (e *Engine) terminationProposals(ctx context.Context, t store.Transaction) ([]readmodel.TerminationView, error) {
	out := []readmodel.TerminationView{}
	list, err := e.ofType(ctx, t.ID, protocol.Evidence)
	if err != nil {
		return nil, err
	}
	st := &state{t: t, known: true}
	if terminable(st) != nil {
		return out, nil // ended, or not yet committed: nothing to agree to
	}
	var rec *terminationRecord
	if x, err := e.terminationRecordOf(ctx, st); err == nil {
		rec = &x
	}
	for _, o := range list {
		if !isSignature(o, o.Org(), verify.TerminationSignatureClaim) {
			continue
		}
		v := readmodel.TerminationView{ProposedBy: o.Org(), SignatureID: o.ID(), TerminationRecordHash: o.P("artifact_hash"), ProposedAt: str(o.Value()["created_at"])}
		if rec != nil && rec.hash == v.TerminationRecordHash {
			v.Current, v.Record = true, rec.record
		}
		out = append(out, v)
	}
	return out, nil
}
