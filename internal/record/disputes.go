package record

// Disputes and determinations between the two parties (determination
// §2–§6 and §9, read bilaterally; role scopes §4.4; pilot state machine
// §8.1 for forks).
//
// # Raising
//
// Either party raises a dispute against the other (act dispute.raise, its
// mandate listing it and covering the transaction): exactly one subject,
// named by its content hash and id, of the transaction both parties hold:
//
//	act               any object of the record but a policy decision, a dispute or a determination
//	                  (an event, an offer, an obligation, a response, an instruction, ...)
//	obligation_state  the assertion or response that placed an obligation in the state it stands in
//	                  (asserted, accepted or rejected); subject_id names it (RaiseDispute also
//	                  takes the obligation's own id and finds it)
//	determination     a determination of the respondent's (the appeal path: grounds from both lists,
//	                  which leaves rule_misapplied; the appeal window)
//	refusal           a policy decision of the respondent's that denied: a deny never leaves the
//	                  actor (decisions.md 7), so bilaterally none is ever held to be disputed
//
// with grounds from the closed list of §3.5, at least one full evidence
// reference (evidence the record holds, or new evidence presented with it),
// and rules_ref: the pilot rule set at the version in force at the subject
// act, with its published hash; the dispute is raised within the window
// that version sets from the subject's created_at (168 hours; an appeal
// 336). The raising party is the raiser's own agent, the respondent the
// counterparty. The countersigner's checks (checkDispute) and the raiser's
// are one function; the codes are A202-DISPUTE-SUBJECT-UNREFERENCED,
// -OUT-OF-WINDOW, -GROUNDS-UNKNOWN, A202-EVIDENCE-UNVERIFIED and
// A202-DISCLOSURE-POLICY-VIOLATION (free text naming a third party or a
// price), and a second dispute of the same party over the same question
// (the same subject_type and subject: the act of rejecting, and the state
// that rejection placed an obligation in, are two questions) is
// A202-STATE-TRANSITION-DENIED.
//
// Raising suspends nothing (§3.7): a dispute about an act, a determination
// or a refusal is an act recorded by its objects (the dispute, the evidence
// it presents, the raiser's decision), delivered on its own; no event is
// appended and no state moves. A dispute about an obligation's state is the
// one the pilot machines couple to the aggregate (obligation §6.2: the
// obligation moves to disputed and the transaction to exception_open):
// from committed, in_performance, acceptance_pending or settlement_pending
// it opens the exception (exceptions.go), and the dispute rides the
// exception.opened event with its own decision; in exception_open, where
// exception.opened is no row, it travels on its own and moves only the
// obligation to disputed. From any other state it is refused.
//
// A fork (pilot state machine §8.1 consequence 2: two successors of one
// event, which this instance refuses and keeps, receive.go position) is
// raised as a dispute over the common ancestor, the last event both
// chains share, on the ground state_transition_invalid, with both chains
// as evidence: two signed_document evidence objects whose artifact_hash
// is the chain hash (the SHA-256 of RFC 8785 {"transaction_id",
// "event_hashes"}, as audit_bundle_hash is) of the chain held here and of
// the chain with the counterparty's conflicting event in its place
// (RaiseForkDispute).
//
// # Determining
//
// The determiner is the party the rules name. The pilot rule set's
// #determiner.authority is read bilaterally as the dispute's respondent,
// ordinarily conceding against itself (role scopes §4.4; the published
// determination fixture is the respondent's): only the respondent issues a
// determination of a dispute (act determination.issue). It carries the
// dispute's question (its subject and rules_ref), a reasoned finding, the
// rules applied (resolving in the rules in force), the evidence relied on
// (evidence of the transaction held), inputs_hash (verify.
// DeterminationInputsHash: the rules, the dispute, its subject, the
// evidence relied on and any determination superseded, by id and hash),
// authority_basis_ref #determiner.authority, appeal_route_ref
// #appeal.route (the fixture's; the route itself is operated, C23/D22),
// and an effect no more than the rules grant the question class (act and
// determination binding, obligation_state presumptive, refusal nothing, so
// advisory; A202-DETERMINATION-EFFECT-OVERCLAIM otherwise, read from the
// rules, never from the claim). A state_result is allowed only under a
// binding effect and only when the target machine's guard still passes:
// the subject is an obligation of the transaction standing disputed, and
// determination.recorded takes it to the state named (obligation §6.1);
// anything else is A202-STATE-TRANSITION-DENIED. A later determination on
// the same question supersedes the earlier by id, hash and a registered
// reason (A202-DETERMINATION-SUPERSESSION-UNREASONED without one, and for
// a second determination of a dispute that supersedes nothing); one
// superseding a determination already superseded is
// A202-DETERMINATION-SUPERSESSION-FORKED. Both remain: nothing here, or
// anywhere in party, deletes a determination, and an event that would
// (determination.deleted) is one no instance countersigns
// (A202-STATE-TRANSITION-DENIED).
//
// A determination is an act recorded by its objects, delivered on its own.
// A binding state_result moves the obligation it names on both sides once
// the counterparty took it (applyObjects); an advisory or presumptive one
// moves nothing.
//
// Both acts' documents (decisions.md 6) are the transaction's act shape:
// proposed_terms the terms in force (the agreement's, before one the
// latest offer's), and the references agreement_id (when there is an
// agreement) and subject_id (dispute.raise) or dispute_id
// (determination.issue).

import (
	"context"
	"fmt"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// DisputeInput is a dispute the agent raises against the counterparty.
type DisputeInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...) listing dispute.raise (and exception.open for an obligation's state)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
	// SubjectType is act, obligation_state, determination or refusal.
	SubjectType protocol.DisputeSubject `json:"subject_type" jsonschema:"act, obligation_state, determination (an appeal) or refusal."`
	// SubjectID names the subject; for obligation_state the obligation
	// (obl_...) or the assertion or response that placed it in its state.
	SubjectID string   `json:"subject_id" jsonschema:"The object disputed; for obligation_state the obligation (obl_...)."`
	Grounds   []string `json:"grounds" jsonschema:"At least one of authority_absent, authority_exceeded, state_transition_invalid, obligation_not_performed, obligation_wrongly_rejected, evidence_unverified, disclosure_breach, refusal_incorrect, rule_misapplied."`
	// Description is inert free text (determination §3.6).
	Description string `json:"description,omitempty" jsonschema:"Free text (1024 characters); no third party, no price."`
	// EvidenceIDs are evidence objects the record holds, relied on.
	EvidenceIDs []string `json:"evidence_ids,omitempty" jsonschema:"Evidence in the record (evd_...) it rests on."`
	// Evidence is new evidence presented with the dispute.
	Evidence   Evidence `json:"evidence,omitempty" jsonschema:"New evidence; with evidence_ids at least one item."`
	ApprovalID string   `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// ForkDisputeInput raises a dispute over a fork this instance refused and
// kept.
type ForkDisputeInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...) whose record holds the fork."`
	// Sequence is the forked position; default the first fork kept.
	Sequence    int    `json:"sequence,omitempty" jsonschema:"The position of the fork (default: the first one kept)."`
	Description string `json:"description,omitempty" jsonschema:"Free text, at most 1024 characters."`
	ApprovalID  string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// DeterminationInput is a determination the respondent issues.
type DeterminationInput struct {
	MandateID string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	DisputeID string `json:"dispute_id" jsonschema:"The dispute raised against you (dsp_...)."`
	Finding   string `json:"finding" jsonschema:"The reasoned finding (at most 4096 characters)."`
	// Effect defaults to what the rules grant the question class.
	Effect string `json:"effect,omitempty" jsonschema:"advisory, presumptive or binding, at most the rules' grant (the default)."`
	// RulesApplied default to #determiner.authority and
	// #determination.effect.
	RulesApplied []string `json:"rules_applied,omitempty" jsonschema:"Rule ids, e.g. a202-rules/pilot#determination.effect."`
	// EvidenceIDs default to the dispute's evidence.
	EvidenceIDs []string `json:"evidence_ids,omitempty" jsonschema:"Evidence relied on (default: the dispute's)."`
	// StateResult moves the determined subject, under a binding effect.
	StateResult *StateResult `json:"state_result,omitempty" jsonschema:"Binding effect only: the subject and the state it stands in."`
	// Supersedes names the determination replaced, with a reason.
	Supersedes         string `json:"supersedes,omitempty" jsonschema:"The determination (det_...) this one replaces."`
	SupersessionReason string `json:"supersession_reason,omitempty" jsonschema:"With supersedes: appeal_outcome, corrected_input or rule_misapplication."`
	ApprovalID         string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// StateResult is a determination's state_result.
type StateResult struct {
	SubjectID string `json:"subject_id" jsonschema:"The determined subject's id."`
	State     string `json:"state" jsonschema:"A registered state of the machine it is in."`
}

// termsInForce are the terms an act about the transaction as a whole is
// evaluated over: the agreement in force's, before one the latest
// offer's; and the agreement's id ("" before one).
func (e *Engine) termsInForce(ctx context.Context, txn string) (map[string]any, string, error) {
	agr, err := e.agreementOf(ctx, txn)
	if err != nil {
		return nil, "", err
	}
	if agr != nil {
		return agr.Terms(), agr.ID(), nil
	}
	off, err := e.latestOffer(ctx, txn)
	if err != nil || off == nil {
		return nil, "", refusef(reason.StateTransitionDenied, "transaction %s holds no terms", txn)
	}
	return off.Terms(), "", nil
}

// transactionAct is the document of an act about the transaction as a
// whole: the terms in force, agreement_id and one more reference.
func (e *Engine) transactionAct(ctx context.Context, txn, refName, refValue string) (terms, refs map[string]any, err error) {
	terms, agr, err := e.termsInForce(ctx, txn)
	if err != nil {
		return nil, nil, err
	}
	refs = map[string]any{}
	if agr != "" {
		refs["agreement_id"] = agr
	}
	if refName != "" {
		refs[refName] = refValue
	}
	return terms, refs, nil
}

// inForceAct is transactionAct for an act over the transaction as a
// whole, naming nothing else (an actSpec's act).
func (e *Engine) inForceAct(ctx context.Context, st *state) (terms, refs map[string]any, err error) {
	return e.transactionAct(ctx, st.t.ID, "", "")
}

// pilotRules is the rule set every act here is appended under, and so the
// one in force at every subject act of a record this instance holds.
func pilotRules() (rules.RuleSet, map[string]any) {
	rs, _ := rules.Pilot(RulesVersion)
	return rs, map[string]any{"rule_set_id": rs.ID, "version": rs.Version, "rules_hash": rs.Hash}
}

// counterpartyAgent returns the agent the counterparty acts through on a
// transaction, from the latest object of its there.
func (e *Engine) counterpartyAgent(ctx context.Context, t store.Transaction) (string, error) {
	raws, err := e.db.TransactionObjects(ctx, t.ID)
	if err != nil {
		return "", err
	}
	agent := ""
	for _, b := range raws {
		if o, err := e.parse(b); err == nil && o.Org() == t.Counterparty && o.Agent() != "" && !authorityPrincipal(o) {
			agent = o.Agent()
		}
	}
	if agent == "" {
		return "", refusef(reason.DisputeSubjectUnreferenced, "no object of %s's is held on %s to name its agent by", t.Counterparty, t.ID)
	}
	return agent, nil
}

// authorityPrincipal reports whether o is signed by a principal, whose
// created_by names the agent that asked rather than the one that acts.
func authorityPrincipal(o *Obj) bool {
	return o.Type() == protocol.Approval || o.Type() == protocol.KeyRecord || o.Type() == protocol.RevocationRecord
}

// disputeSubject resolves what a dispute raised by in would be about:
// the subject object and, for an obligation_state, the obligation.
func (e *Engine) disputeSubject(ctx context.Context, txn string, kind protocol.DisputeSubject, id string) (*Obj, error) {
	o, err := e.get(ctx, txn, id)
	if err != nil {
		return nil, refusef(reason.DisputeSubjectUnreferenced, "%s is not an object of transaction %s held here", orNoneStr(id), txn)
	}
	if kind != protocol.SubjectObligationState || o.Type() != protocol.Obligation {
		return o, nil
	}
	// The obligation's state is placed by its latest assertion (asserted)
	// or the response to it (accepted, rejected).
	os, err := e.obligationState(ctx, o.Txn(), o.ID())
	if err != nil {
		return nil, err
	}
	switch os.State {
	case protocol.OblAsserted:
		return e.get(ctx, txn, os.Assertions[len(os.Assertions)-1])
	case protocol.OblAccepted, protocol.OblRejected:
		if placed := e.placedBy(ctx, object.AsObligation(o), os); placed != nil {
			return placed, nil
		}
	}
	return nil, refusef(reason.StateTransitionDenied, "obligation %s is %q: a dispute over an obligation's state is raised when it is asserted, accepted or rejected (obligation §6.1)", o.ID(), os.State)
}

// placedBy returns the response that placed an accepted or rejected
// obligation in its state: the one answering its latest assertion.
func (e *Engine) placedBy(ctx context.Context, obl *object.Obligation, os obligationState) *Obj {
	if len(os.Assertions) == 0 {
		return nil
	}
	last := os.Assertions[len(os.Assertions)-1]
	list, err := e.ofType(ctx, obl.Txn(), protocol.ObligationResponse)
	if err != nil {
		return nil
	}
	for _, r := range list {
		if r.P("obligation_id") == obl.ID() && r.P("assertion_id") == last {
			return r
		}
	}
	return nil
}

func orNoneStr(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// disputeRoute says how a dispute about subject travels from st: with an
// exception.opened event (true), or on its own (false).
func disputeRoute(st *state, kind string) (bool, error) {
	if kind != string(protocol.SubjectObligationState) {
		return false, nil
	}
	if _, ok := rules.Next(RulesVersion, rules.Aggregate, st.t.State, protocol.EvExceptionOpened); ok {
		return true, nil
	}
	if st.State() == protocol.ExceptionOpen {
		return false, nil
	}
	return false, refusef(reason.StateTransitionDenied, "transaction %s is %s: a dispute over an obligation's state opens an exception from committed, in_performance, acceptance_pending or settlement_pending, "+
		"or joins the one open (obligation §6.2)", st.t.ID, st.t.State)
}

// checkDispute is the rule both the raising instance and the respondent's
// apply to a dispute dsp raised by org from on transaction st (see the top
// of this file): its parties, its one subject by hash, its rules and
// window, its evidence (held, or among travelling, the message's new
// evidence), and no earlier dispute of the same party over the same
// subject. It returns the subject.
func (e *Engine) checkDispute(ctx context.Context, st *state, dsp *Obj, from string, travelling map[string]*Obj) (*Obj, error) {
	p := dsp.Payload()
	me := e.org.Config().OrganizationID
	respondent := me
	if from == me {
		respondent = st.t.Counterparty
	}
	if rp := dsp.PSub("raising_party"); str(rp["organization_id"]) != from || str(rp["agent_id"]) != dsp.Agent() || dsp.Org() != from {
		return nil, refusef(reason.DisputeSubjectUnreferenced, "dispute %s names raising party %v; it is %s's own act", dsp.ID(), rp["organization_id"], from)
	}
	if dsp.PartyOrg("respondent_party") != respondent {
		return nil, refusef(reason.DisputeSubjectUnreferenced, "dispute %s is against %s; bilaterally it is against the counterparty %s", dsp.ID(), dsp.PartyOrg("respondent_party"), respondent)
	}
	kind := protocol.DisputeSubject(dsp.P("subject_type"))
	subject, err := e.get(ctx, st.t.ID, dsp.P("subject_id"))
	if err != nil || subject.Hash() != dsp.P("subject_hash") {
		return nil, refusef(reason.DisputeSubjectUnreferenced, "dispute %s names subject %s by a hash that resolves to nothing of transaction %s held here", dsp.ID(), dsp.P("subject_id"), st.t.ID)
	}
	if h, err := contentHash(subject); err != nil || h != subject.Hash() {
		return nil, refusef(reason.DisputeSubjectUnreferenced, "the subject %s does not hash to its content hash", subject.ID())
	}
	switch kind {
	case protocol.SubjectAct:
		switch subject.Type() {
		case protocol.PolicyDecision, protocol.Dispute, protocol.Determination, protocol.Approval:
			return nil, refusef(reason.DisputeSubjectUnreferenced, "a %s is not an act subject: a decision is a refusal's, a determination an appeal's subject", subject.Type())
		}
	case protocol.SubjectObligationState:
		obl := held(ctx, e, st.t.ID, subject.P("obligation_id"), object.AsObligation)
		if obl == nil || (subject.Type() != protocol.PerformanceEvent && subject.Type() != protocol.ObligationResponse) {
			return nil, refusef(reason.DisputeSubjectUnreferenced, "an obligation_state subject is the assertion or response that placed an obligation in its state, not a %s", subject.Type())
		}
		os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
		if err != nil {
			return nil, err
		}
		var placed *Obj
		switch os.State {
		case protocol.OblAsserted:
			placed, _ = e.get(ctx, st.t.ID, os.outstanding())
		case protocol.OblAccepted, protocol.OblRejected:
			placed = e.placedBy(ctx, obl, os)
		default:
			return nil, refusef(reason.StateTransitionDenied, "obligation %s is %q: dispute.raised moves an asserted, accepted or rejected obligation (obligation §6.1)", obl.ID(), os.State)
		}
		if placed == nil || placed.ID() != subject.ID() {
			return nil, refusef(reason.DisputeSubjectUnreferenced, "%s did not place obligation %s in the state it stands in (%s)", subject.ID(), obl.ID(), os.State)
		}
	case protocol.SubjectDetermination:
		if subject.Type() != protocol.Determination || subject.PartyOrg("determiner") != respondent {
			return nil, refusef(reason.DisputeSubjectUnreferenced, "an appeal is raised against a determination of the respondent's")
		}
	case protocol.SubjectRefusal:
		if subject.Type() != protocol.PolicyDecision || subject.P("decision") != "deny" || subject.Org() != respondent {
			return nil, refusef(reason.DisputeSubjectUnreferenced, "a refusal subject is a deny decision of the respondent's; bilaterally a deny never leaves its actor")
		}
	default:
		return nil, refusef(reason.DisputeSubjectUnreferenced, "subject_type %q is not act, obligation_state, determination or refusal", kind)
	}
	// The window is read from the rules in force at the subject act: the
	// version every act of this record appends under.
	rs, want := pilotRules()
	ref := dsp.PSub("rules_ref")
	if got, _ := canonical.Marshal(ref); string(got) != string(mustCanonical(want)) {
		return nil, refusef(reason.DisputeOutOfWindow, "rules_ref %s %s is not the rules in force at the subject act (%s %s): the window is read from those", str(ref["rule_set_id"]), str(ref["version"]), rs.ID, rs.Version)
	}
	actAt, err := envelope.ParseTimestamp(str(subject.Value()["created_at"]))
	raisedAt, err2 := envelope.ParseTimestamp(str(dsp.Value()["created_at"]))
	if err != nil || err2 != nil {
		return nil, refusef(reason.DisputeOutOfWindow, "the subject act's or the dispute's time is not a timestamp")
	}
	window := rs.DisputeWindow
	if kind == protocol.SubjectDetermination {
		window = rs.AppealWindow
	}
	if raisedAt.After(actAt.Add(window)) || raisedAt.After(st.now.Add(time.Minute)) {
		return nil, refusef(reason.DisputeOutOfWindow, "dispute %s is raised %s after its subject act, outside the %s window of %s %s", dsp.ID(), raisedAt.Sub(actAt), window, rs.ID, rs.Version)
	}
	if err := e.checkEvidenceRefs(ctx, st.t.ID, p["evidence_refs"], travelling); err != nil {
		return nil, err
	}
	held, err := e.ofType(ctx, st.t.ID, protocol.Dispute)
	if err != nil {
		return nil, err
	}
	for _, h := range held {
		if h.ID() != dsp.ID() && h.Org() == from && h.P("subject_hash") == dsp.P("subject_hash") && h.P("subject_type") == dsp.P("subject_type") {
			return nil, refusef(reason.StateTransitionDenied, "%s raised dispute %s over this question (this %s subject) already", from, h.ID(), dsp.P("subject_type"))
		}
	}
	return subject, nil
}

func mustCanonical(v any) []byte { b, _ := canonical.Marshal(v); return b }

// checkEvidenceRefs requires every reference to be the full form of
// evidence of the transaction, held here or travelling with the act, by
// its content hash, type and signer; and every travelling evidence object
// to be referenced.
func (e *Engine) checkEvidenceRefs(ctx context.Context, txn string, v any, travelling map[string]*Obj) error {
	refs, _ := v.([]any)
	if len(refs) == 0 {
		return refusef(reason.EvidenceUnverified, "a dispute rests on at least one full evidence reference")
	}
	used := map[string]bool{}
	for _, x := range refs {
		ref, ok := x.(map[string]any)
		if !ok {
			return refusef(reason.EvidenceUnverified, "evidence is referenced in the full form")
		}
		id := str(ref["evidence_id"])
		evd := travelling[id]
		if evd == nil {
			held, ok := e.getTyped(ctx, txn, id, protocol.Evidence)
			if !ok {
				return refusef(reason.EvidenceUnverified, "evidence %s is neither held on %s nor presented with the act", orNoneStr(id), txn)
			}
			evd = held
		}
		used[id] = true
		signer := object.Sub(ref, "signed_by")
		if evd.Hash() != str(ref["content_hash"]) || evd.P("evidence_type") != str(ref["evidence_type"]) ||
			str(signer["organization_id"]) != evd.Org() || str(signer["agent_id"]) != evd.Agent() {
			return refusef(reason.EvidenceUnverified, "the reference to %s does not carry its content hash, type and signer", id)
		}
	}
	for id := range travelling {
		if !used[id] {
			return reason.Refuse(fmt.Sprintf("evidence %s travels with the act, but nothing references it", id))
		}
	}
	return nil
}

// RaiseDispute raises a dispute against the counterparty (see the top of
// this file).
func (e *Engine) RaiseDispute(ctx context.Context, a Actor, in DisputeInput) (Outcome, error) {
	// The route is decided by the state, read under the lock, which is held
	// through the act.
	unlock := e.lock(in.TransactionID)
	defer unlock()
	return disputeRaise.perform(ctx, e, a, in)
}

// disputeRaise is dispute.raise: the dispute and its decision, travelling
// without an event; a dispute of an obligation in performance is raised as
// an exception (exception.open: disputeRoute).
var disputeRaise = &act[DisputeInput]{
	name: protocol.ActDisputeRaise,
	lines: []actLine{
		{recognise: with(protocol.Dispute), objects: disputeAct},
	},
	spec: disputeSpec,
}

// disputeSpec runs under the transaction's lock (RaiseDispute).
func disputeSpec(ctx context.Context, e *Engine, a Actor, in DisputeInput) (actSpec, error) {
	var subject *Obj
	var viaException bool
	var terms, refs map[string]any
	spec := actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			var err error
			if subject, err = e.disputeSubject(ctx, st.t.ID, in.SubjectType, in.SubjectID); err != nil {
				return err
			}
			viaException, err = disputeRoute(st, string(in.SubjectType))
			return err
		},
		act: func(ctx context.Context, st *state) (map[string]any, map[string]any, error) {
			var err error
			terms, refs, err = e.transactionAct(ctx, st.t.ID, "subject_id", subject.ID())
			if err != nil {
				return nil, nil, err
			}
			if viaException {
				// The lead act is the exception's; the dispute rides it.
				return e.inForceAct(ctx, st)
			}
			return terms, refs, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			dsp, err := e.buildDispute(ctx, st, b, subject, in.SubjectType, in.Grounds, in.Description, in.EvidenceIDs, in.Evidence)
			if err != nil {
				return err
			}
			if !viaException {
				return nil
			}
			return e.buildDisputeException(ctx, st, b, dsp, subject, terms, refs)
		},
	}
	// The event is set before perform reads it.
	st, err := e.load(ctx, in.TransactionID, e.clock())
	if err != nil {
		return actSpec{}, err
	}
	if st.known {
		if route, err := disputeRoute(st, string(in.SubjectType)); err == nil && route {
			spec.name, spec.event = protocol.ActExceptionOpen, protocol.EvExceptionOpened
		}
	}
	spec.locked = true
	return spec, nil
}

// buildDispute makes a dispute's objects (its new evidence, then the
// dispute) and checks it as the respondent will (checkDispute).
func (e *Engine) buildDispute(ctx context.Context, st *state, b *builder, subject *Obj, kind protocol.DisputeSubject, grounds []string, description string, evidenceIDs []string, presented Evidence) (*Obj, error) {
	cfg := e.org.Config()
	agent, err := e.counterpartyAgent(ctx, st.t)
	if err != nil {
		return nil, err
	}
	refs := []any{}
	travelling := map[string]*Obj{}
	for _, id := range evidenceIDs {
		evd, ok := e.getTyped(ctx, st.t.ID, id, protocol.Evidence)
		if !ok {
			return nil, refusef(reason.EvidenceUnverified, "evidence %s is not held on %s", id, st.t.ID)
		}
		refs = append(refs, evidenceRef(evd, ""))
	}
	for _, ev := range presented {
		ref, err := b.evidence(ev)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
		travelling[str(ref["evidence_id"])] = b.created[len(b.created)-1]
	}
	_, rulesRef := pilotRules()
	gs := make([]any, 0, len(grounds))
	for _, g := range grounds {
		gs = append(gs, g)
	}
	payload := map[string]any{
		"raising_party":    party(cfg.OrganizationID, cfg.AgentID),
		"respondent_party": party(st.t.Counterparty, agent),
		"subject_type":     string(kind),
		"subject_hash":     subject.Hash(),
		"subject_id":       subject.ID(),
		"grounds":          gs,
		"evidence_refs":    refs,
		"rules_ref":        rulesRef,
	}
	if description != "" {
		payload["description"] = description
	}
	// The gate refuses an unregistered or missing ground
	// (A202-DISPUTE-GROUNDS-UNKNOWN), no evidence (A202-EVIDENCE-UNVERIFIED)
	// and free text naming a third party or a price
	// (A202-DISCLOSURE-POLICY-VIOLATION), as the respondent's will.
	dsp, err := b.add(protocol.Dispute, payload, protocol.PurposeObjectIssuance)
	if err != nil {
		return nil, asRefusal(err, reason.DisputeGroundsUnknown)
	}
	if _, err := e.checkDispute(ctx, st, dsp, cfg.OrganizationID, travelling); err != nil {
		return nil, err
	}
	b.name("dispute", dsp.ID())
	return dsp, nil
}

// disputeAct (receiveObjects) is the respondent's side of a dispute travelling on its
// own: checked as the raiser checked it, the raiser's decision re-evaluated
// live, the verifier's rules over the record with it, then stored. An
// obligation_state dispute (in exception_open) moves the obligation to
// disputed; any other moves nothing.
func disputeAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	dsp, pol := r.one(protocol.Dispute), r.one(protocol.PolicyDecision)
	if pol == nil || len(r.objs) != 2+len(r.byType(protocol.Evidence))+len(r.byType(protocol.Approval)) || len(r.byType(protocol.Approval)) > 1 {
		return objectAct{}, reason.Refuse("a dispute travels with its evidence and the raiser's decision, and nothing else")
	}
	viaException, err := disputeRoute(r.st, dsp.P("subject_type"))
	if err != nil {
		return objectAct{}, err
	}
	if viaException {
		return objectAct{}, refusef(reason.StateTransitionDenied, "a dispute over an obligation's state in %s opens an exception: it travels with exception.opened", r.st.t.State)
	}
	travelling := map[string]*Obj{}
	for _, o := range r.byType(protocol.Evidence) {
		travelling[o.ID()] = o
	}
	subject, err := e.checkDispute(ctx, r.st, dsp, r.from, travelling)
	if err != nil {
		return objectAct{}, err
	}
	terms, refs, err := e.transactionAct(ctx, r.txn, "subject_id", subject.ID())
	if err != nil {
		return objectAct{}, err
	}
	return objectAct{over: dsp, doc: actDoc{name: protocol.ActDisputeRaise, terms: terms, refs: refs},
		what: "dispute raised by the counterparty", key: "dispute_id", id: dsp.ID()}, nil
}

// chainHash is the hash of a chain of events: the SHA-256 of the RFC 8785
// bytes of {"transaction_id", "event_hashes"} (as audit_bundle_hash).
func chainHash(txn string, hashes []string) (string, error) {
	list := make([]any, len(hashes))
	for i, h := range hashes {
		list[i] = h
	}
	return canonical.Hash(map[string]any{"transaction_id": txn, "event_hashes": list})
}

// Claims of the evidence a fork dispute presents (free text).
const (
	forkHeldClaim  = "The chain of events this party holds and countersigned, from the first event to the forked position; artifact_hash is its chain hash"
	forkOtherClaim = "The chain the counterparty signed, which puts another event at the forked position; artifact_hash is its chain hash"
)

// RaiseForkDispute raises a fork this instance refused and kept as a
// dispute (see the top of this file).
func (e *Engine) RaiseForkDispute(ctx context.Context, a Actor, in ForkDisputeInput) (Outcome, error) {
	forks, err := e.db.Forks(ctx, in.TransactionID)
	if err != nil {
		return Outcome{}, err
	}
	var fork *store.Fork
	for i := range forks {
		if in.Sequence == 0 || forks[i].Sequence == in.Sequence {
			fork = &forks[i]
			break
		}
	}
	if fork == nil {
		return Outcome{}, refusef(reason.DisputeSubjectUnreferenced, "transaction %s holds no fork at position %d", in.TransactionID, in.Sequence)
	}
	if fork.Sequence < 2 {
		return Outcome{}, refusef(reason.DisputeSubjectUnreferenced, "the fork is at the first position: the chains share no event to raise it against")
	}
	evs, err := e.db.Events(ctx, in.TransactionID)
	if err != nil {
		return Outcome{}, err
	}
	var held, theirs []string
	ancestor := ""
	for _, x := range evs {
		if x.Status != store.EventRecorded || x.Sequence > fork.Sequence {
			break
		}
		held = append(held, x.ContentHash)
		if x.Sequence < fork.Sequence {
			theirs = append(theirs, x.ContentHash)
			ancestor = x.EventID
		}
	}
	theirs = append(theirs, fork.ContentHash)
	hHeld, err := chainHash(in.TransactionID, held)
	if err != nil {
		return Outcome{}, err
	}
	hTheirs, err := chainHash(in.TransactionID, theirs)
	if err != nil {
		return Outcome{}, err
	}
	description := in.Description
	if description == "" {
		description = fmt.Sprintf("Two successors of event %d: the one both records hold and another the counterparty signed. This party does not resolve the fork by preferring either chain.", fork.Sequence-1)
	}
	return e.RaiseDispute(ctx, a, DisputeInput{
		MandateID: in.MandateID, TransactionID: in.TransactionID, SubjectType: protocol.SubjectAct, SubjectID: ancestor,
		Grounds: []string{"state_transition_invalid"}, Description: description, ApprovalID: in.ApprovalID,
		Evidence: Evidence{
			{EvidenceType: "signed_document", Claim: forkHeldClaim, ArtifactHash: hHeld},
			{EvidenceType: "signed_document", Claim: forkOtherClaim, ArtifactHash: hTheirs},
		},
	})
}

// IssueDetermination issues the respondent's determination of a dispute
// raised against it (see the top of this file).
func (e *Engine) IssueDetermination(ctx context.Context, a Actor, in DeterminationInput) (Outcome, error) {
	return determinationIssue.perform(ctx, e, a, in)
}

// determinationIssue is determination.issue: the determination and its
// decision, travelling without an event.
var determinationIssue = &act[DeterminationInput]{
	name: protocol.ActDeterminationIssue,
	lines: []actLine{
		{recognise: withOut(protocol.Determination, protocol.Dispute), objects: determinationAct},
	},
	spec: determinationSpec,
}

func determinationSpec(ctx context.Context, e *Engine, a Actor, in DeterminationInput) (actSpec, error) {
	dsp, ok := e.namedTyped(ctx, in.DisputeID, protocol.Dispute)
	if !ok {
		return actSpec{}, refusef(reason.DisputeSubjectUnreferenced, "dispute %s is not held here", in.DisputeID)
	}
	txn := dsp.Txn()
	var terms, refs map[string]any
	return actSpec{
		txn: txn, mandateID: in.MandateID, approvalID: in.ApprovalID,
		act: func(ctx context.Context, st *state) (map[string]any, map[string]any, error) {
			var err error
			terms, refs, err = e.transactionAct(ctx, txn, "dispute_id", dsp.ID())
			return terms, refs, err
		},
		check: func(ctx context.Context, st *state) error {
			if dsp.PartyOrg("respondent_party") != e.org.Config().OrganizationID {
				return refusef(reason.DeterminationNotFollowing, "dispute %s is against %s: the rules in force name its respondent as the determiner", dsp.ID(), dsp.PartyOrg("respondent_party"))
			}
			return nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			det, err := e.buildDetermination(ctx, st, b, dsp, in)
			if err != nil {
				return err
			}
			b.name("determination", det.ID())
			return nil
		},
	}, nil
}

// buildDetermination makes the determination in asks for and checks it as
// the raiser will (checkDetermination).
func (e *Engine) buildDetermination(ctx context.Context, st *state, b *builder, dsp *Obj, in DeterminationInput) (*Obj, error) {
	cfg := e.org.Config()
	rs, rulesRef := pilotRules()
	dp := dsp.Payload()
	class := dsp.P("subject_type")
	effect := in.Effect
	if effect == "" {
		effect = string(rs.Grant(class))
	}
	applied := in.RulesApplied
	if len(applied) == 0 {
		applied = []string{rules.PilotID + "#determiner.authority", rules.PilotID + "#determination.effect"}
	}
	ids := in.EvidenceIDs
	if len(ids) == 0 {
		for _, x := range anyList(dp["evidence_refs"]) {
			ref, _ := x.(map[string]any)
			ids = append(ids, str(ref["evidence_id"]))
		}
	}
	var relied []any
	var inputs []verify.InputRef
	for _, id := range ids {
		evd, ok := e.getTyped(ctx, st.t.ID, id, protocol.Evidence)
		if !ok {
			return nil, refusef(reason.EvidenceUnverified, "evidence %s relied on is not held on %s", id, st.t.ID)
		}
		relied = append(relied, evidenceRef(evd, ""))
		inputs = append(inputs, verify.InputRef{ID: evd.ID(), Hash: evd.Hash()})
	}
	subject, err := e.get(ctx, st.t.ID, dsp.P("subject_id"))
	if err != nil {
		return nil, refusef(reason.DisputeSubjectUnreferenced, "the subject %s of %s is not held here", dsp.P("subject_id"), dsp.ID())
	}
	var supersedes any
	var superseded *verify.InputRef
	if in.Supersedes != "" {
		target, ok := e.getTyped(ctx, st.t.ID, in.Supersedes, protocol.Determination)
		if !ok {
			return nil, refusef(reason.DisputeSubjectUnreferenced, "determination %s is not held here", in.Supersedes)
		}
		s := map[string]any{"determination_id": target.ID(), "determination_hash": target.Hash()}
		if in.SupersessionReason != "" {
			s["reason"] = in.SupersessionReason
		}
		supersedes = s
		superseded = &verify.InputRef{ID: target.ID(), Hash: target.Hash()}
	}
	h, err := verify.DeterminationInputsHash(rulesRef, verify.InputRef{ID: dsp.ID(), Hash: dsp.Hash()}, verify.InputRef{ID: subject.ID(), Hash: subject.Hash()}, inputs, superseded)
	if err != nil {
		return nil, err
	}
	var stateResult any
	if in.StateResult != nil {
		stateResult = map[string]any{"subject_id": in.StateResult.SubjectID, "state": in.StateResult.State}
	}
	appliedAny := make([]any, len(applied))
	for i, a := range applied {
		appliedAny[i] = a
	}
	if relied == nil {
		relied = []any{}
	}
	now := envelope.Timestamp(b.now)
	payload := map[string]any{
		"dispute_id": dsp.ID(),
		"question": map[string]any{"subject_type": class, "subject_hash": dsp.P("subject_hash"), "subject_id": dsp.P("subject_id"),
			"rules_ref": rulesRef},
		"outcome": map[string]any{"finding": in.Finding, "rules_applied": appliedAny, "evidence_relied_on": relied,
			"inputs_hash": h, "state_result": stateResult},
		"determiner":          party(cfg.OrganizationID, cfg.AgentID),
		"authority_basis_ref": rules.PilotID + "#determiner.authority",
		"effect":              effect,
		"supersedes":          supersedes,
		"appeal_route_ref":    rules.PilotID + "#appeal.route",
		"determined_at":       now,
		"effective_from":      now,
	}
	// The gate refuses an effect above the grant
	// (A202-DETERMINATION-EFFECT-OVERCLAIM), a state_result under another
	// effect, a supersession with no reason
	// (A202-DETERMINATION-SUPERSESSION-UNREASONED) and rules that do not
	// resolve (A202-DETERMINATION-NOT-FOLLOWING), as the raiser's will.
	det, err := b.add(protocol.Determination, payload, protocol.PurposeObjectIssuance)
	if err != nil {
		return nil, asRefusal(err, reason.DeterminationNotFollowing)
	}
	if err := e.checkDetermination(ctx, st, det, cfg.OrganizationID); err != nil {
		return nil, err
	}
	return det, nil
}

func anyList(v any) []any { l, _ := v.([]any); return l }

// checkDetermination is the rule both the determiner's instance and the
// raiser's apply to a determination det made by org from (see the top of
// this file): the determiner the rules name, the dispute's question, the
// evidence relied on held, the inputs hash, the effect and a state_result
// against the target machine, and the supersession.
func (e *Engine) checkDetermination(ctx context.Context, st *state, det *Obj, from string) error {
	p := det.Payload()
	dsp, ok := e.getTyped(ctx, st.t.ID, det.P("dispute_id"), protocol.Dispute)
	if !ok {
		return refusef(reason.DisputeSubjectUnreferenced, "determination %s answers dispute %s, which is not held on %s", det.ID(), det.P("dispute_id"), st.t.ID)
	}
	resp := dsp.PSub("respondent_party")
	if str(resp["organization_id"]) != from || !sameParty(det.PSub("determiner"), resp) || det.Org() != from || det.Agent() != str(resp["agent_id"]) {
		return refusef(reason.DeterminationNotFollowing, "determination %s is not the respondent's: the rules in force name the respondent %v of %s as its determiner", det.ID(), resp["organization_id"], dsp.ID())
	}
	q := det.PSub("question")
	for _, k := range []string{"subject_type", "subject_hash", "subject_id"} {
		if str(q[k]) != dsp.P(k) {
			return refusef(reason.DisputeSubjectUnreferenced, "the question's %s is not the dispute's", k)
		}
	}
	if string(mustCanonical(q["rules_ref"])) != string(mustCanonical(dsp.Payload()["rules_ref"])) {
		return refusef(reason.DeterminationNotFollowing, "the question cites other rules than those in force at the subject act, which the dispute cites")
	}
	subject, err := e.get(ctx, st.t.ID, dsp.P("subject_id"))
	if err != nil {
		return refusef(reason.DisputeSubjectUnreferenced, "the subject of %s is not held here", dsp.ID())
	}
	out := det.PSub("outcome")
	var inputs []verify.InputRef
	for _, x := range anyList(out["evidence_relied_on"]) {
		ref, _ := x.(map[string]any)
		evd, ok := e.getTyped(ctx, st.t.ID, str(ref["evidence_id"]), protocol.Evidence)
		if !ok || evd.Hash() != str(ref["content_hash"]) {
			return refusef(reason.EvidenceUnverified, "evidence %v relied on is not evidence of %s held here, by its hash", ref["evidence_id"], st.t.ID)
		}
		inputs = append(inputs, verify.InputRef{ID: evd.ID(), Hash: evd.Hash()})
	}
	var superseded *verify.InputRef
	held, err := e.ofType(ctx, st.t.ID, protocol.Determination)
	if err != nil {
		return err
	}
	sup := object.Sub(p, "supersedes")
	if len(sup) > 0 {
		target, ok := e.getTyped(ctx, st.t.ID, str(sup["determination_id"]), protocol.Determination)
		if !ok || target.Hash() != str(sup["determination_hash"]) {
			return refusef(reason.DisputeSubjectUnreferenced, "determination %s supersedes %v, which is not a determination of %s held here by that hash", det.ID(), sup["determination_id"], st.t.ID)
		}
		if str(sup["reason"]) == "" {
			return refusef(reason.DeterminationSupersessionUnreasoned, "a superseding determination states its reason")
		}
		if target.PartyOrg("determiner") != from {
			return refusef(reason.DeterminationNotFollowing, "only the determiner of %s supersedes it", target.ID())
		}
		for _, h := range held {
			if h.ID() != det.ID() && str(h.PSub("supersedes")["determination_id"]) == target.ID() {
				return refusef(reason.DeterminationSupersessionForked, "%s already supersedes %s: a second would fork the chain", h.ID(), target.ID())
			}
		}
		superseded = &verify.InputRef{ID: target.ID(), Hash: target.Hash()}
	} else {
		for _, h := range held {
			if h.ID() != det.ID() && h.P("dispute_id") == dsp.ID() {
				return refusef(reason.DeterminationSupersessionUnreasoned, "%s determined %s already: a later determination supersedes it, with a reason", h.ID(), dsp.ID())
			}
		}
	}
	want, err := verify.DeterminationInputsHash(q["rules_ref"], verify.InputRef{ID: dsp.ID(), Hash: dsp.Hash()}, verify.InputRef{ID: subject.ID(), Hash: subject.Hash()}, inputs, superseded)
	if err != nil {
		return err
	}
	if str(out["inputs_hash"]) != want {
		return refusef(reason.DeterminationNotFollowing, "inputs_hash is not the hash of the inputs the determination was taken against")
	}
	rs, _ := pilotRules()
	if rules.Effect(det.P("effect")).Rank() > rs.Grant(dsp.P("subject_type")).Rank() {
		return refusef(reason.DeterminationEffectOverclaim, "effect %s exceeds the %s the rules grant a %s question", det.P("effect"), rs.Grant(dsp.P("subject_type")), dsp.P("subject_type"))
	}
	if sr := object.Sub(out, "state_result"); len(sr) > 0 {
		return e.checkStateResult(ctx, st, det, subject, sr)
	}
	return nil
}

// checkStateResult is the target machine's guard over a binding
// state_result (determination §6): the determined subject is an
// obligation of the transaction standing disputed, and
// determination.recorded takes it to the state named.
func (e *Engine) checkStateResult(ctx context.Context, st *state, det, subject *Obj, sr map[string]any) error {
	if det.P("effect") != string(rules.Binding) {
		return refusef(reason.DeterminationEffectOverclaim, "a state_result moves state only under a binding effect")
	}
	if str(sr["subject_id"]) != subject.ID() {
		return refusef(reason.DisputeSubjectUnreferenced, "state_result names %v, not the determined subject %s", sr["subject_id"], subject.ID())
	}
	if subject.Type() != protocol.Obligation {
		return refusef(reason.StateTransitionDenied, "a state_result moves an obligation; %s is a %s, which no machine of this record moves by determination", subject.ID(), subject.Type())
	}
	os, err := e.obligationState(ctx, subject.Txn(), subject.ID())
	if err != nil {
		return err
	}
	if !rules.Legal(RulesVersion, rules.Obligation, string(os.State), rules.DeterminationRecorded, str(sr["state"])) {
		return refusef(reason.StateTransitionDenied, "obligation %s is %q: determination.recorded moves a disputed obligation to a registered state, not to %v", subject.ID(), os.State, sr["state"])
	}
	return nil
}

// determinationAct (receiveObjects) is the raiser's side of a determination: checked
// as the determiner checked it, its decision re-evaluated live, the
// verifier's rules over the record with it, then stored; a binding
// state_result moves the obligation it names.
func determinationAct(ctx context.Context, e *Engine, r *receipt) (objectAct, error) {
	det, pol := r.one(protocol.Determination), r.one(protocol.PolicyDecision)
	if pol == nil || len(r.objs) != 2+len(r.byType(protocol.Approval)) || len(r.byType(protocol.Approval)) > 1 {
		return objectAct{}, reason.Refuse("a determination travels with the determiner's decision, and nothing else")
	}
	if err := e.checkDetermination(ctx, r.st, det, r.from); err != nil {
		return objectAct{}, err
	}
	terms, refs, err := e.transactionAct(ctx, r.txn, "dispute_id", det.P("dispute_id"))
	if err != nil {
		return objectAct{}, err
	}
	return objectAct{over: det, doc: actDoc{name: protocol.ActDeterminationIssue, terms: terms, refs: refs},
		what: "determination issued by the counterparty", key: "determination_id", id: det.ID()}, nil
}

// applyDisputeObjects moves what a dispute or a determination recorded by
// its objects moves: an obligation_state dispute its obligation to
// disputed, a binding state_result its obligation to the state named.
func (e *Engine) applyDisputeObjects(tx *store.Txn, o *Obj) error {
	var oblID, to string
	switch o.Type() {
	case protocol.Dispute:
		if o.P("subject_type") != string(protocol.SubjectObligationState) {
			return nil
		}
		// The subject (an assertion or response) names the obligation;
		// the dispute travels alone only in exception_open, where the
		// obligation moves without an aggregate event.
		subject, err := tx.GetObject(o.Txn(), o.P("subject_id"))
		if err != nil {
			return err
		}
		s, err := e.parse(subject)
		if err != nil {
			return err
		}
		oblID, to = s.P("obligation_id"), string(protocol.OblDisputed)
	case protocol.Determination:
		sr := o.PSub("outcome")["state_result"]
		m, _ := sr.(map[string]any)
		if len(m) == 0 || o.P("effect") != string(rules.Binding) {
			return nil
		}
		oblID, to = str(m["subject_id"]), str(m["state"])
	default:
		return nil
	}
	cur, err := tx.ObligationState(o.Txn(), oblID)
	if err != nil {
		return err
	}
	if cur.State == to {
		return nil
	}
	cur.State = to
	return tx.PutObligationState(cur)
}
