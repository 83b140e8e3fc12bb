package record

// Obligations between the two instances (obligation §3–§7).
//
// The obligee issues the counterparty's duty under the committed agreement
// and appends obligation.activated (committed → in_performance); the
// obligor presents its evidence and its assertion and appends
// performance.declared (in_performance → acceptance_pending); the obligee
// answers that exact assertion, bound by its content hash, and appends
// acceptance.granted (→ settlement_pending) or acceptance.rejected with a
// reason from the closed list (→ in_performance), after which the obligor
// may assert again, a new assertion with its own hash, and the obligee
// answers that one.
//
// Every act is checked twice by the same rules: by the acting instance
// before anything leaves it (IssueObligation, AssertPerformance and
// Respond refuse), and by the countersigner before it signs
// (checkObligationActivated, checkPerformanceDeclared, checkResponse), so
// a message built by hand and signed with the sender's real key is refused
// as the local API refuses it. A message carries the act's objects and
// nothing else (carries). Nothing refused is recorded on either side.
//
// An obligation's state is derived from the recorded events, never read
// from the obligation object's own state member (which says "pending" at
// issue and is never re-versioned; spec-map C13), under the table of
// obligation §6.1, and kept in the obligation_states table as each event
// is recorded (applyEvent), so that no act re-reads the chain:
//
//	obligation.activated                           → pending
//	performance.declared   pending | rejected      → asserted
//	acceptance.granted     asserted                → accepted (a remainder it names → pending)
//	acceptance.rejected    asserted                → rejected
//
// Anything else is A202-STATE-TRANSITION-DENIED: a second assertion while
// one is outstanding, a second response to an assertion already answered,
// a response after acceptance. The record carries no obligation.due event
// (it is not an aggregate event, and nothing here evaluates due
// conditions), so "pending" stands for "pending or due": the obligor's
// assertion is its claim that the duty is due, and an obligee that
// disagrees rejects it with due_condition_not_met.
//
// Partial acceptance (§5.2 rule 3, §5.3): accepting less than is owed
// issues, with the response and in the same message, a remainder
// obligation for the difference, named by the response's
// remainder_obligation_id: same agreement, commitment, subject, unit and
// parties, quantity owed − accepted, due by its own condition, and the
// share of the consideration not accepted (ledger.RemainderConsideration:
// the accepted share, rounded to the currency's minor unit, is payable at
// once, and the two add up to the consideration exactly; the countersigner
// refuses none, or the whole again: ledger.RemainderShare). It is pending
// from the moment the acceptance is recorded. What the rules allow next
// for it: the transaction is then settlement_pending, and under rules 1.3
// the aggregate machine has no performance.declared from
// settlement_pending, so the remainder cannot be asserted there, and
// AssertPerformance refuses it with A202-STATE-TRANSITION-DENIED. The
// aggregate returns to in_performance through exception.opened and
// remediation.accepted: an obligation_outstanding exception over the
// remainder (exceptions.go), whose remediation performs the remainder
// itself; or the remainder ends by a waiver of its obligee (waiver.go),
// releasing its share, or by termination.agreed (released;
// termination.go). No transition is invented for it.
//
// Roles and quantities (ledger.Roles, ledger.AssertionWithin): an
// obligation's obligor is the party of its agreement that owes its term,
// the supplier the goods or service to the buyer, whoever issues it;
// obligation.activated is the obligee's act; an assertion claims no more
// than the obligation owes.
//
// An agreement may be performed as several obligations (deliverables.go):
// they are issued together, asserted together by one declaration (each by
// its own assertion) and answered together by one response event (each by
// its own response), since the aggregate machine has one performance
// cycle.
//
// Waiver (§5.2, §6.1: pending, due, asserted or rejected → waived) is an
// obligation transition with no aggregate event in the pilot state machine
// (§6.2 lists none): it is an act of its own, recorded by its objects
// (waiver.go), never an answer to an assertion. Respond refuses
// response_type waive with A202-STATE-TRANSITION-DENIED and points to
// waive_obligation, and a countersigner refuses a waive response on a
// response event. Rule 1 (only the obligee responds, a waiver included) is
// checked first, so an obligor's waiver is
// A202-OBLIGATION-RESPONSE-UNAUTHORIZED.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ObligationInput is what the obligee issues (obligation §3).
type ObligationInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The committed transaction (txn_...)."`
	// TermPath is the term the duty discharges, under $.terms.core or
	// $.terms.profile_terms; default $.terms.core.quantity.
	TermPath string `json:"term_path,omitempty" jsonschema:"The term discharged, e.g. $.terms.core.quantity (default)."`
	// DueCondition is a registered due condition (obligation §4); default
	// due_at_time 21 days from now.
	DueCondition map[string]any `json:"due_condition,omitempty" jsonschema:"A registered due condition, e.g. {type: due_at_time, at}."`
	// Deliverables performs the agreement as several obligations, each its
	// own; together they owe exactly the terms (deliverables.go). Empty:
	// one obligation for the whole terms, at TermPath and DueCondition.
	Deliverables []DeliverableInput `json:"deliverables,omitempty" jsonschema:"One obligation per deliverable, together the terms' quantity and total (default: one)."`
	// ApprovalID is an approval of exactly this act, when the mandate
	// holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// AssertInput is the obligor's assertion of performance (obligation §5.1).
type AssertInput struct {
	MandateID        string   `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	ObligationID     string   `json:"obligation_id" jsonschema:"The obligation (obl_...)."`
	AssertedQuantity string   `json:"asserted_quantity,omitempty" jsonschema:"Quantity performed (default: the obligation's)."`
	Evidence         Evidence `json:"evidence" jsonschema:"At least one item."`
	// Assertions are the assertions of the transaction's other obligations
	// still owed, declared together with this one (deliverables.go).
	Assertions []AssertionInput `json:"assertions,omitempty" jsonschema:"Other obligations still owed, each with evidence."`
	// ApprovalID is an approval of exactly this act, when the mandate
	// holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// AssertionInput is one further assertion of a declaration.
type AssertionInput struct {
	ObligationID     string   `json:"obligation_id" jsonschema:"Another obligation still owed (obl_...)."`
	AssertedQuantity string   `json:"asserted_quantity,omitempty" jsonschema:"As above."`
	Evidence         Evidence `json:"evidence" jsonschema:"As above."`
}

// Evidence is the evidence an assertion presents: at least one item
// (obligation §5.1; A202-OBLIGATION-ASSERTION-UNEVIDENCED otherwise).
type Evidence []EvidenceInput

// EvidenceInput describes one evidence object the obligor presents.
type EvidenceInput struct {
	EvidenceType string `json:"evidence_type" jsonschema:"A registered type, e.g. inspection_result."`
	Claim        string `json:"claim" jsonschema:"What it shows (inert text)."`
	ArtifactHash string `json:"artifact_hash" jsonschema:"The artifact's SHA-256, hex."`
	LocatorHint  string `json:"locator_hint,omitempty" jsonschema:"Where to fetch it; no secret."`
}

// evidence issues one evidence object the acting party presents and
// returns its full reference (evidence verification §3, §3.3).
func (b *builder) evidence(ev EvidenceInput) (map[string]any, error) {
	eo, err := b.add(protocol.Evidence, issuedEvidence(b.e.org.Config().OrganizationID, ev.EvidenceType, ev.Claim, ev.ArtifactHash), protocol.PurposeObjectIssuance)
	if err != nil {
		return nil, asRefusal(err, reason.EvidenceTypeUnknown)
	}
	return evidenceRef(eo, ev.LocatorHint), nil
}

// evidenceRef is the full reference to an evidence object.
func evidenceRef(eo *Obj, locator string) map[string]any {
	ref := map[string]any{"evidence_id": eo.ID(), "content_hash": eo.Hash(), "evidence_type": eo.P("evidence_type"),
		"signed_by": party(eo.Org(), eo.Agent())}
	if locator != "" {
		ref["locator_hint"] = locator
	}
	return ref
}

// ResponseTypes are the responses Respond records: a waiver has no event
// in the transaction's state machine (see RespondInput).
var ResponseTypes = []protocol.ResponseType{protocol.ResponseAccept, protocol.ResponseReject}

// RespondInput is the obligee's answer to an assertion (obligation §5.2).
type RespondInput struct {
	MandateID    string `json:"mandate_id" jsonschema:"Your mandate (mnd_...) listing acceptance.granted / acceptance.rejected."`
	ObligationID string `json:"obligation_id" jsonschema:"The obligation (obl_...)."`
	// ResponseType is accept or reject. A waiver (waive) is refused with
	// A202-STATE-TRANSITION-DENIED: it is an act of its own
	// (WaiveObligation).
	ResponseType protocol.ResponseType `json:"response_type" jsonschema:"accept or reject."`
	// AssertionID and AssertionHash bind the exact assertion answered;
	// when empty, the latest assertion is answered and its hash taken.
	AssertionID   string `json:"assertion_id,omitempty" jsonschema:"The assertion answered (prf_...); default the latest."`
	AssertionHash string `json:"assertion_hash,omitempty" jsonschema:"Its content hash; when given it must match."`
	// AcceptedQuantity (accept) defaults to the asserted quantity; less
	// than owed issues a remainder obligation for the difference.
	AcceptedQuantity string `json:"accepted_quantity,omitempty" jsonschema:"For accept: quantity accepted (default: all)."`
	// RemainderDue is the remainder's due condition (default 21 days).
	RemainderDue map[string]any `json:"remainder_due_condition,omitempty" jsonschema:"For a partial accept: the remainder's due condition."`
	// ReasonCode (reject) is one of obligation §5.5.
	ReasonCode protocol.RejectionReason `json:"reason_code,omitempty" jsonschema:"For reject: the reason."`
	// ApprovalID is an approval of exactly this response, when the
	// mandate holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
	// Responses answer the transaction's other outstanding assertions in
	// the same event (deliverables.go).
	Responses []ResponseInput `json:"responses,omitempty" jsonschema:"Answers to other outstanding assertions."`
}

// ResponseInput is one further answer of a response event.
type ResponseInput struct {
	ObligationID     string                   `json:"obligation_id" jsonschema:"Another obligation with an outstanding assertion (obl_...)."`
	ResponseType     protocol.ResponseType    `json:"response_type" jsonschema:"As above."`
	AssertionID      string                   `json:"assertion_id,omitempty" jsonschema:"As above (default: the outstanding one)."`
	AssertionHash    string                   `json:"assertion_hash,omitempty" jsonschema:"As above."`
	AcceptedQuantity string                   `json:"accepted_quantity,omitempty" jsonschema:"As above."`
	RemainderDue     map[string]any           `json:"remainder_due_condition,omitempty" jsonschema:"As above."`
	ReasonCode       protocol.RejectionReason `json:"reason_code,omitempty" jsonschema:"As above."`
}

// resolvePath reports whether a $.terms... path names a member of the
// agreement's terms.
func resolvePath(agr *Obj, path string) bool {
	if !strings.HasPrefix(path, "$.terms.core") && !strings.HasPrefix(path, "$.terms.profile_terms") {
		return false
	}
	var cur any = map[string]any{"terms": agr.Payload()["terms"]}
	for _, part := range strings.Split(strings.TrimPrefix(path, "$."), ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// IssueObligation issues the counterparty's duty under the committed
// agreement and appends obligation.activated (committed → in_performance).
// This instance is the obligee, the counterparty the obligor. With
// Deliverables, the agreement is performed as several obligations,
// issued together (deliverables.go).
func (e *Engine) IssueObligation(ctx context.Context, a Actor, in ObligationInput) (Outcome, error) {
	return obligationActivate.perform(ctx, e, a, in)
}

// obligationActivate is obligation.activated: the event with the
// obligations it issues.
var obligationActivate = &act[ObligationInput]{
	name: protocol.ActObligationActivated,
	lines: []actLine{
		{event: protocol.EvObligationActivated,
			carries: counts{protocol.Obligation: -1, protocol.PolicyDecision: -1},
			check:   checkObligationActivated, apply: moves(carriedPending, responded)},
	},
	spec: issueSpec,
}

func issueSpec(ctx context.Context, e *Engine, a Actor, in ObligationInput) (actSpec, error) {
	var agr *object.Agreement
	deliverables := in.Deliverables
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, event: protocol.EvObligationActivated,
		approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			if st.State() != protocol.Committed {
				return refusef(reason.StateTransitionDenied, "obligation.activated moves committed → in_performance; transaction %s is %s", st.t.ID, st.t.State)
			}
			var err error
			if agr, err = e.agreementOf(ctx, st.t.ID); err != nil {
				return err
			}
			if agr == nil {
				return refusef(reason.ObligationSubjectUnreferenced, "transaction %s has no agreement", st.t.ID)
			}
			if len(deliverables) == 0 {
				core := object.Sub(agr.Terms(), "core")
				var total *Money
				if t := object.Sub(core, "total"); len(t) > 0 {
					total = &Money{Currency: str(t["currency"]), Amount: str(t["amount"])}
				}
				deliverables = []DeliverableInput{{TermPath: in.TermPath, Quantity: str(core["quantity"]), Consideration: total, DueCondition: in.DueCondition}}
			}
			return nil
		},
		act: func(ctx context.Context, st *state) (map[string]any, map[string]any, error) {
			d := deliverables[0]
			var total any
			if d.Consideration != nil {
				total = map[string]any{"currency": d.Consideration.Currency, "amount": d.Consideration.Amount}
			}
			return authority.CoreTerms(d.Quantity, str(object.Sub(agr.Terms(), "core")["unit_code"]), total), map[string]any{"agreement_id": agr.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			obls, err := e.issueObligations(b, agr.View, deliverables)
			if err != nil {
				return err
			}
			for _, o := range obls {
				// obligation.activated is the obligee's act (decisions.md
				// 6): the party owed issues the duty, never the party that
				// owes it.
				if o.PartyOrg("obligee") != e.org.Config().OrganizationID {
					return refusef(reason.ObligationSubjectUnreferenced, "under agreement %s the %s owes %s to the %s, who issues it: this organisation is the %s",
						agr.ID(), ledger.OwedBy(str(o.PSub("subject")["term_path"])), str(o.PSub("subject")["term_path"]), st.Role().Other(), st.Role())
				}
			}
			if err := owesTerms(agr.View, obls); err != nil {
				return err
			}
			for i, o := range obls {
				if i > 0 {
					if err := b.ride(ctx, o); err != nil {
						return err
					}
				}
				b.name(obligationRole(i), o.ID())
			}
			b.data = map[string]any{"obligation_id": obls[0].ID()}
			return nil
		},
	}, nil
}

// obligationRole names the i-th obligation of an act in its outcome:
// "obligation", then "obligation_2", "obligation_3", …
func obligationRole(i int) string {
	if i == 0 {
		return "obligation"
	}
	return fmt.Sprintf("obligation_%d", i+1)
}

// obligationState is where one obligation stands in the record.
type obligationState struct {
	// State is "" when no recorded event issued the obligation.
	State protocol.ObligationState
	// Assertions are its assertions (prf_...) in record order; while State
	// is asserted the last one is outstanding and every other one was
	// answered.
	Assertions []string
}

// outstanding is the assertion a response may answer, or "".
func (s obligationState) outstanding() string {
	if s.State != protocol.OblAsserted || len(s.Assertions) == 0 {
		return ""
	}
	return s.Assertions[len(s.Assertions)-1]
}

// obligationState reads where obligation oblID of transaction txn stands, as recorded events
// left it (applyEvent keeps it), by its key: the cost does not grow with
// the chain.
func (e *Engine) obligationState(ctx context.Context, txn, oblID string) (obligationState, error) {
	row, err := e.db.ObligationState(ctx, txn, oblID)
	if errors.Is(err, store.ErrNotFound) {
		return obligationState{}, nil
	}
	if err != nil {
		return obligationState{}, err
	}
	return obligationState{State: protocol.ObligationState(row.State), Assertions: row.Assertions}, nil
}

// asRefusal returns err unchanged when it carries registered codes (the
// gate's own, for an object it refused), and otherwise as a refusal with
// the fallback code: the agent is told the code the gate, and so the
// counterparty, would give.
func asRefusal(err error, fallback reason.Code) error {
	if len(reason.CodesOf(err)) > 0 {
		return err
	}
	return refusef(fallback, "%v", err)
}

// heldObligation loads an obligation this instance holds.
func (e *Engine) heldObligation(ctx context.Context, id string) (*object.Obligation, error) {
	obl := named(ctx, e, id, object.AsObligation)
	if obl == nil {
		return nil, refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not held here", id)
	}
	return obl, nil
}

// checkObligationActivated is the obligor's live guard of
// obligation.activated (obligation §3, §3.1, §6.1): the obligations travel
// with the event, the one it names first; each derives from this
// transaction's agreement and commitment, names the sender as obligee and
// this organisation as obligor (checkIssued); together they owe exactly
// the terms' quantity and total (owesTerms); each further one is an act
// of its own with its own decision (checkRiders). That their subjects bind
// the agreement's terms_hash and profile, that their term paths resolve
// and that their parties are the agreement's are the verifier's rules as
// well (verify.Extend).
func checkObligationActivated(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	obls := r.byType(protocol.Obligation)
	lead := r.find(ev.Data("obligation_id"))
	if lead == nil || lead.Type() != protocol.Obligation {
		return refusef(reason.ObligationSubjectUnreferenced, "obligation.activated names an obligation that does not travel with it")
	}
	agr, err := e.agreementOf(ctx, r.txn)
	if err != nil {
		return err
	}
	if agr == nil {
		return refusef(reason.ObligationSubjectUnreferenced, "transaction %s has no agreement", r.txn)
	}
	for _, o := range obls {
		if err := e.checkIssued(r.from, agr.View, o, false); err != nil {
			return err
		}
	}
	if err := owesTerms(agr.View, obls); err != nil {
		return err
	}
	return e.checkRiders(ctx, r, ev, others(obls, lead.ID()))
}

// AssertPerformance presents the obligor's evidence and assertion and
// appends performance.declared (in_performance → acceptance_pending). The
// obligation must be pending or rejected, the transaction in_performance,
// and at least one evidence item presented (obligation §5.1, §6.1). An
// agreement performed as several obligations is declared for all those
// still owed at once (Assertions: one assertion each, with its own
// evidence; deliverables.go).
func (e *Engine) AssertPerformance(ctx context.Context, a Actor, in AssertInput) (Outcome, error) {
	return performanceDeclare.perform(ctx, e, a, in)
}

// performanceDeclare is performance.declared: the event with the
// assertions it makes.
var performanceDeclare = &act[AssertInput]{
	name: protocol.ActPerformanceDeclared,
	lines: []actLine{
		{event: protocol.EvPerformanceDeclared,
			carries: counts{protocol.PerformanceEvent: -1, protocol.Evidence: -1, protocol.PolicyDecision: -1},
			check:   checkPerformanceDeclared, apply: moves(asserted, responded)},
	},
	spec: assertSpec,
}

func assertSpec(ctx context.Context, e *Engine, a Actor, in AssertInput) (actSpec, error) {
	items := append([]AssertionInput{{ObligationID: in.ObligationID, AssertedQuantity: in.AssertedQuantity, Evidence: in.Evidence}}, in.Assertions...)
	obls := make([]*object.Obligation, len(items))
	qtys := make([]string, len(items))
	for i, it := range items {
		obl, err := e.heldObligation(ctx, it.ObligationID)
		if err != nil {
			return actSpec{}, err
		}
		if i > 0 && obl.Txn() != obls[0].Txn() {
			return actSpec{}, refusef(reason.StreamMismatch, "obligations %s and %s belong to different transactions", obls[0].ID(), obl.ID())
		}
		obls[i], qtys[i] = obl, it.AssertedQuantity
		if qtys[i] == "" {
			qtys[i] = obl.Quantity()
		}
	}
	lead := obls[0]
	return actSpec{
		txn: lead.Txn(), mandateID: in.MandateID, event: protocol.EvPerformanceDeclared,
		approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			cfg := e.org.Config()
			acted := map[string]bool{}
			for i, obl := range obls {
				if acted[obl.ID()] {
					return refusef(reason.StateTransitionDenied, "obligation %s is asserted twice in one declaration", obl.ID())
				}
				acted[obl.ID()] = true
				if obl.Obligor() != cfg.OrganizationID {
					// The guard of performance.declared is an obligor-signed
					// assertion (obligation §6.1); a guard that fails is an
					// illegal transition.
					return refusef(reason.StateTransitionDenied, "only the obligor asserts performance of %s, and this organisation is not its obligor", obl.ID())
				}
				os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
				if err != nil {
					return err
				}
				switch os.State {
				case protocol.OblPending, protocol.OblRejected:
				case "":
					return refusef(reason.StateTransitionDenied, "obligation %s was never issued in the record of %s", obl.ID(), st.t.ID)
				case protocol.OblAsserted:
					return refusef(reason.StateTransitionDenied, "obligation %s is asserted: assertion %s awaits the obligee's response, and a new assertion is made only after a rejection", obl.ID(), os.outstanding())
				default:
					return refusef(reason.StateTransitionDenied, "obligation %s is %s; performance is declared when it is pending or after a rejection (obligation §6.1)", obl.ID(), os.State)
				}
				if st.State() != protocol.InPerformance {
					if st.State() == protocol.SettlementPending {
						return refusef(reason.StateTransitionDenied, "obligation %s is pending, but transaction %s is settlement_pending, and under rules %s no event declares performance from there: "+
							"a remainder is performed only after the transaction returns to in_performance (exception.opened, then remediation.accepted), or ends by termination or waiver (waive_obligation)", obl.ID(), st.t.ID, RulesVersion)
					}
					return refusef(reason.StateTransitionDenied, "performance.declared moves in_performance → acceptance_pending; transaction %s is %s", st.t.ID, st.t.State)
				}
				if len(items[i].Evidence) == 0 {
					return refusef(reason.ObligationAssertionUnevidenced, "an assertion carries at least one evidence reference (obligation %s)", obl.ID())
				}
				if _, err := decimal.ParseQuantity(qtys[i]); err != nil {
					return refusef(reason.TermsInvalid, "asserted_quantity of %s: %v", obl.ID(), err)
				}
			}
			owed, err := e.obligationsIn(ctx, st.t.ID, protocol.OblPending, protocol.OblRejected)
			if err != nil {
				return err
			}
			return coverAll(acted, owed, "a declaration asserts every obligation still owed: assert")
		},
		act: func(ctx context.Context, _ *state) (map[string]any, map[string]any, error) {
			total, err := e.obligationTotal(ctx, lead)
			if err != nil {
				return nil, nil, err
			}
			return authority.CoreTerms(qtys[0], lead.UnitCode(), total), map[string]any{"obligation_id": lead.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			for i, obl := range obls {
				refs := []any{}
				for _, ev := range items[i].Evidence {
					ref, err := b.evidence(ev)
					if err != nil {
						return err
					}
					refs = append(refs, ref)
				}
				prf, err := b.add(protocol.PerformanceEvent, map[string]any{
					"obligation_id": obl.ID(), "asserted_quantity": qtys[i], "unit_code": obl.UnitCode(), "evidence_refs": refs,
				}, protocol.PurposeObjectIssuance)
				if err != nil {
					return asRefusal(err, reason.ObligationAssertionUnevidenced)
				}
				if err := ledger.AssertionWithin(obl.Value(), prf.Value()).Err(); err != nil {
					return err
				}
				if i == 0 {
					b.data = map[string]any{"obligation_id": obl.ID(), "performance_event_id": prf.ID()}
					b.name("performance_event", prf.ID())
					b.name("assertion_hash", prf.Hash())
					continue
				}
				if err := b.ride(ctx, prf); err != nil {
					return err
				}
				b.name(fmt.Sprintf("performance_event_%d", i+1), prf.ID())
			}
			return nil
		},
	}, nil
}

// checkPerformanceDeclared is the obligee's live guard of
// performance.declared (obligation §5.1, §6.1): the assertion the event
// names, and every further one that travels with it, is by the obligor of
// an obligation of this transaction that is pending or rejected, in its
// unit, with at least one full-form evidence reference, each resolving to
// an evidence object that travels with it (and no evidence that is not
// referenced); together they assert every obligation still owed, and each
// further one is an act of its own with its own decision.
func checkPerformanceDeclared(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	lead := r.find(ev.Data("performance_event_id"))
	if lead == nil || lead.Type() != protocol.PerformanceEvent {
		return refusef(reason.ObligationAssertionUnevidenced, "performance.declared names an assertion that does not travel with it")
	}
	if lead.P("obligation_id") != ev.Data("obligation_id") {
		return refusef(reason.ObligationSubjectUnreferenced, "assertion %s names obligation %s, the event %s", lead.ID(), lead.P("obligation_id"), ev.Data("obligation_id"))
	}
	byID := map[string]*Obj{}
	for _, x := range r.byType(protocol.Evidence) {
		byID[x.ID()] = x
	}
	used := map[string]bool{}
	acted := map[string]bool{}
	assertions := r.byType(protocol.PerformanceEvent)
	for _, prf := range assertions {
		if acted[prf.P("obligation_id")] {
			return refusef(reason.StateTransitionDenied, "obligation %s is asserted twice in one declaration", prf.P("obligation_id"))
		}
		acted[prf.P("obligation_id")] = true
		if err := e.checkAssertion(ctx, r, prf, byID, used); err != nil {
			return err
		}
	}
	if len(used) != len(byID) {
		return reason.Refuse("the performance.declared message carries evidence that assertion " + lead.ID() + " and the other assertions do not reference")
	}
	owed, err := e.obligationsIn(ctx, r.txn, protocol.OblPending, protocol.OblRejected)
	if err != nil {
		return err
	}
	if err := coverAll(acted, owed, "a declaration asserts every obligation still owed: it leaves out"); err != nil {
		return err
	}
	return e.checkRiders(ctx, r, ev, others(assertions, lead.ID()))
}

// checkAssertion checks one assertion of a declaration: by the obligor of
// an obligation of this transaction that is pending or rejected, in its
// unit, its evidence references resolving to evidence that travels (marked
// in used).
func (e *Engine) checkAssertion(ctx context.Context, r *receipt, prf *Obj, evidence map[string]*Obj, used map[string]bool) error {
	obl := held(ctx, e, r.txn, prf.P("obligation_id"), object.AsObligation)
	if obl == nil {
		return refusef(reason.ObligationSubjectUnreferenced, "assertion %s names obligation %s, which is not held here", prf.ID(), prf.P("obligation_id"))
	}
	if obl.Obligor() != r.from || obl.ObligorAgent() != prf.Agent() {
		return refusef(reason.StateTransitionDenied, "only the obligor of %s asserts its performance (obligation §6.1)", obl.ID())
	}
	if prf.P("unit_code") != obl.UnitCode() {
		return refusef(reason.ObligationTermsMutated, "the assertion's unit %s is not the obligation's %s", prf.P("unit_code"), obl.UnitCode())
	}
	os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
	if err != nil {
		return err
	}
	if os.State != protocol.OblPending && os.State != protocol.OblRejected {
		return refusef(reason.StateTransitionDenied, "obligation %s is %q; performance is declared when it is pending or after a rejection (obligation §6.1)", obl.ID(), os.State)
	}
	refs, _ := prf.Payload()["evidence_refs"].([]any)
	if len(refs) == 0 {
		return refusef(reason.ObligationAssertionUnevidenced, "assertion %s carries no evidence reference", prf.ID())
	}
	for _, ref := range refs {
		rm, ok := ref.(map[string]any)
		if !ok {
			return refusef(reason.ObligationAssertionUnevidenced, "assertion %s uses a short-form reference where the full form is required", prf.ID())
		}
		x := evidence[str(rm["evidence_id"])]
		if x == nil {
			return refusef(reason.EvidenceUnverified, "evidence %v does not travel with the assertion", rm["evidence_id"])
		}
		if x.Hash() != str(rm["content_hash"]) || x.P("evidence_type") != str(rm["evidence_type"]) {
			return refusef(reason.EvidenceHashMismatch, "the reference to %s does not match the evidence object", x.ID())
		}
		used[x.ID()] = true
	}
	return nil
}

// response is one answer of a response event, as Respond prepares it.
type response struct {
	in   ResponseInput
	obl  *object.Obligation
	prf  *Obj
	last string // the assertion answered
	qty  string // the accepted (or, rejecting, the asserted) quantity
}

// Respond answers the outstanding assertion of an obligation, once: accept
// (acceptance.granted → settlement_pending) or reject with a registered
// reason (acceptance.rejected → in_performance, after which the obligor may
// assert again). Accepting less than owed issues the remainder obligation.
// A waiver is refused: it is an act of its own (WaiveObligation). An
// agreement performed as several obligations is answered for every
// outstanding assertion at once (Responses, one response each); one
// rejection makes the event acceptance.rejected, naming the first
// rejection (deliverables.go).
func (e *Engine) Respond(ctx context.Context, a Actor, in RespondInput) (Outcome, error) {
	return obligationRespond.perform(ctx, e, a, in)
}

// obligationRespond is acceptance.granted or acceptance.rejected, as the
// responses say (respondSpec names which).
var obligationRespond = &act[RespondInput]{
	lines: []actLine{
		{act: protocol.ActAcceptanceGranted, event: protocol.EvAcceptanceGranted,
			carries: responseCarries, check: checkResponse, apply: moves(responded)},
		{act: protocol.ActAcceptanceRejected, event: protocol.EvAcceptanceRejected,
			carries: responseCarries, check: checkResponse, apply: moves(responded)},
	},
	spec: respondSpec,
}

func respondSpec(ctx context.Context, e *Engine, a Actor, in RespondInput) (actSpec, error) {
	items := []*response{{in: ResponseInput{ObligationID: in.ObligationID, ResponseType: in.ResponseType, AssertionID: in.AssertionID, AssertionHash: in.AssertionHash,
		AcceptedQuantity: in.AcceptedQuantity, RemainderDue: in.RemainderDue, ReasonCode: in.ReasonCode}}}
	for _, x := range in.Responses {
		items = append(items, &response{in: x})
	}
	for i, it := range items {
		obl, err := e.heldObligation(ctx, it.in.ObligationID)
		if err != nil {
			return actSpec{}, err
		}
		if i > 0 && obl.Txn() != items[0].obl.Txn() {
			return actSpec{}, refusef(reason.StreamMismatch, "obligations %s and %s belong to different transactions", items[0].obl.ID(), obl.ID())
		}
		it.obl = obl
	}
	// One rejection makes the event acceptance.rejected, which names a
	// rejection: it leads.
	eventType, actName := protocol.EvAcceptanceGranted, protocol.ActAcceptanceGranted
	for i, it := range items {
		if it.in.ResponseType == protocol.ResponseReject {
			eventType, actName = protocol.EvAcceptanceRejected, protocol.ActAcceptanceRejected
			items[0], items[i] = items[i], items[0]
			break
		}
	}
	lead := items[0]
	return actSpec{
		name: actName, txn: lead.obl.Txn(), mandateID: in.MandateID, event: eventType, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			acted := map[string]bool{}
			for _, it := range items {
				if acted[it.obl.ID()] {
					return refusef(reason.StateTransitionDenied, "obligation %s is answered twice in one response event", it.obl.ID())
				}
				acted[it.obl.ID()] = true
				if err := e.prepareResponse(ctx, it); err != nil {
					return err
				}
			}
			outstanding, err := e.obligationsIn(ctx, st.t.ID, protocol.OblAsserted)
			if err != nil {
				return err
			}
			return coverAll(acted, outstanding, "a response event answers every outstanding assertion: answer")
		},
		act: func(ctx context.Context, _ *state) (map[string]any, map[string]any, error) {
			total, err := e.obligationTotal(ctx, lead.obl)
			if err != nil {
				return nil, nil, err
			}
			return authority.CoreTerms(lead.qty, lead.obl.UnitCode(), total), map[string]any{"assertion_id": lead.last}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			for i, it := range items {
				payload := map[string]any{"obligation_id": it.obl.ID(), "response_type": string(it.in.ResponseType), "assertion_id": it.last, "assertion_hash": it.prf.Hash()}
				suffix := ""
				if i > 0 {
					suffix = fmt.Sprintf("_%d", i+1)
				}
				if it.in.ResponseType == protocol.ResponseAccept {
					payload["accepted_quantity"] = it.qty
					acc, _ := decimal.ParseQuantity(it.qty)
					owed, err := decimal.ParseQuantity(it.obl.Quantity())
					if err != nil {
						return refusef(reason.TermsInvalid, "obligation %s owes %q, not a quantity", it.obl.ID(), it.obl.Quantity())
					}
					if acc.Cmp(owed) < 0 {
						rem, err := e.remainder(b, it.obl, it.qty, owed.Sub(acc).String(), it.in.RemainderDue)
						if err != nil {
							return asRefusal(err, reason.ObligationConditionUnknown)
						}
						payload["remainder_obligation_id"] = rem.ID()
						b.name("remainder_obligation"+suffix, rem.ID())
					}
				} else {
					payload["reason_code"] = string(it.in.ReasonCode)
				}
				// The gate on the response refuses an unregistered
				// reason_code (A202-OBLIGATION-REJECTION-REASON-UNKNOWN), as
				// the counterparty's will.
				obr, err := b.add(protocol.ObligationResponse, payload, protocol.PurposeObjectIssuance)
				if err != nil {
					return asRefusal(err, reason.TermsInvalid)
				}
				b.name("obligation_response"+suffix, obr.ID())
				if i == 0 {
					b.data = map[string]any{"obligation_id": it.obl.ID(), "obligation_response_id": obr.ID()}
					continue
				}
				if err := b.ride(ctx, obr); err != nil {
					return err
				}
			}
			return nil
		},
	}, nil
}

// prepareResponse checks one answer of a response event at the obligee's
// instance and fills in the assertion it answers and its quantity.
func (e *Engine) prepareResponse(ctx context.Context, it *response) error {
	cfg := e.org.Config()
	in := it.in
	if it.obl.Obligee() != cfg.OrganizationID {
		return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s responds to it, a waiver included (obligation §5.2 rule 1)", in.ObligationID)
	}
	switch in.ResponseType {
	case protocol.ResponseAccept, protocol.ResponseReject:
	case protocol.ResponseWaive:
		return refusef(reason.StateTransitionDenied, "a waiver is not an answer to an assertion: the transaction's state machine (rules %s) has no response event for it; "+
			"release the obligation with waive_obligation, or answer the assertion with accept or reject", RulesVersion)
	default:
		return refusef(reason.StateTransitionDenied, "response_type %q: answer an assertion with accept or reject", in.ResponseType)
	}
	os, err := e.obligationState(ctx, it.obl.Txn(), in.ObligationID)
	if err != nil {
		return err
	}
	it.last = os.outstanding()
	if it.last == "" {
		return refusef(reason.StateTransitionDenied, "obligation %s is %q; only an outstanding assertion is answered, once (obligation §6.1)", in.ObligationID, os.State)
	}
	if in.AssertionID != "" && in.AssertionID != it.last {
		if slices.Contains(os.Assertions, in.AssertionID) {
			return refusef(reason.StateTransitionDenied, "assertion %s was answered already; the outstanding assertion of %s is %s", in.AssertionID, in.ObligationID, it.last)
		}
		return refusef(reason.ObligationResponseHashMismatch, "%s is not an assertion of %s; the outstanding one is %s", in.AssertionID, in.ObligationID, it.last)
	}
	var ok bool
	if it.prf, ok = e.getTyped(ctx, it.obl.Txn(), it.last, protocol.PerformanceEvent); !ok {
		return errf("assertion %s is not held", it.last)
	}
	if in.AssertionHash != "" && in.AssertionHash != it.prf.Hash() {
		return refusef(reason.ObligationResponseHashMismatch, "assertion_hash %s is not the content hash of %s (%s)", in.AssertionHash, it.last, it.prf.Hash())
	}
	switch in.ResponseType {
	case protocol.ResponseAccept:
		it.qty = in.AcceptedQuantity
		if it.qty == "" {
			it.qty = it.prf.P("asserted_quantity")
		}
		acc, err1 := decimal.ParseQuantity(it.qty)
		asserted, err2 := decimal.ParseQuantity(it.prf.P("asserted_quantity"))
		if err1 != nil || err2 != nil {
			return refusef(reason.TermsInvalid, "accepted_quantity %q is not a quantity", it.qty)
		}
		if acc.Cmp(asserted) > 0 {
			return refusef(reason.ObligationTermsMutated, "accepted quantity %s exceeds the asserted %s", it.qty, it.prf.P("asserted_quantity"))
		}
	case protocol.ResponseReject:
		it.qty = it.prf.P("asserted_quantity")
		if in.ReasonCode == "" {
			return refusef(reason.ObligationRejectionReasonUnknown, "a rejection states a reason_code from the closed list of obligation §5.5")
		}
	}
	return nil
}

// remainder issues the obligation for the shortfall of a partial
// acceptance (obligation §5.2 rule 3): the same agreement, commitment,
// subject, unit and parties, the difference as quantity, no consideration
// of its own (the agreement's total stays on the original duty), its own
// due condition, pending. It travels in the response's message and is
// pending once that acceptance is recorded.
func (e *Engine) remainder(b *builder, obl *object.Obligation, accepted, qty string, due map[string]any) (*Obj, error) {
	if due == nil {
		due = map[string]any{"type": "due_at_time", "at": envelope.Timestamp(b.now.Add(21 * 24 * time.Hour))}
	}
	payload := map[string]any{}
	for k, v := range obl.Payload() {
		payload[k] = v
	}
	cons, err := ledger.RemainderConsideration(obl.Value(), accepted)
	if err != nil {
		return nil, refusef(reason.TermsInvalid, "the share of %s accepted: %v", obl.ID(), err)
	}
	payload["quantity"] = qty
	payload["consideration"] = nil
	if cons != nil {
		payload["consideration"] = cons
	}
	payload["due_condition"] = due
	payload["state"] = string(protocol.OblPending)
	return b.add(protocol.Obligation, payload, protocol.PurposeObjectIssuance)
}

// checkResponse is the obligor's live guard of acceptance.granted and
// acceptance.rejected (obligation §5.2, §5.4, §5.5, §6.1): the response
// the event names travels with it, of the event's kind; it and every
// further response that travels are the obligee's (rule 1), each answers
// the outstanding assertion of an obligation of this transaction by its
// exact content hash (rule 2), and an accept below what is owed carries
// and names its remainder (rule 3), which alters none of the obligation's
// terms (rule 4); together they answer every outstanding assertion, a
// rejection among them making the event acceptance.rejected; each further
// response is an act of its own with its own decision. The reason code of
// a rejection, and a response that carries terms of its own, are refused
// by the gate before this runs.
func checkResponse(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	et := ev.EventType()
	lead := r.find(ev.Data("obligation_response_id"))
	if lead == nil || lead.Type() != protocol.ObligationResponse {
		return refusef(reason.ObligationResponseHashMismatch, "the event names a response that does not travel with it")
	}
	if ev.Data("obligation_id") != lead.P("obligation_id") {
		return refusef(reason.ObligationSubjectUnreferenced, "response %s names obligation %s, the event %s", lead.ID(), lead.P("obligation_id"), ev.Data("obligation_id"))
	}
	remainders := map[string]*Obj{}
	for _, o := range r.byType(protocol.Obligation) {
		remainders[o.ID()] = o
	}
	named := map[string]bool{}
	acted := map[string]bool{}
	full, rejected := false, false
	responses := r.byType(protocol.ObligationResponse)
	for _, obr := range responses {
		switch rt := obr.P("response_type"); {
		case rt == "reject":
			rejected = true
		case rt == "accept":
		default:
			return refusef(reason.StateTransitionDenied, "response type %q has no transition in the transaction's state machine under rules %s", rt, RulesVersion)
		}
		if acted[obr.P("obligation_id")] {
			return refusef(reason.StateTransitionDenied, "obligation %s is answered twice in one response event", obr.P("obligation_id"))
		}
		acted[obr.P("obligation_id")] = true
		isFull, err := e.checkOneResponse(ctx, r, obr, remainders, named)
		if err != nil {
			return err
		}
		full = full || isFull
	}
	switch rt := lead.P("response_type"); {
	case rt == "accept" && et == protocol.EvAcceptanceGranted && !rejected, rt == "reject" && et == protocol.EvAcceptanceRejected:
	default:
		return refusef(reason.StateTransitionDenied, "a %s response is not recorded as %s (a rejection among the responses makes the event acceptance.rejected)", rt, et)
	}
	for id := range remainders {
		if named[id] {
			continue
		}
		if full && len(named) == 0 {
			return refusef(reason.ObligationRemainderMissing, "accepting all that is owed leaves no remainder, and names none")
		}
		return reason.Refuse(fmt.Sprintf("an %s message does not carry obligation %s: no partial acceptance of it names it as its remainder", et, id))
	}
	outstanding, err := e.obligationsIn(ctx, r.txn, protocol.OblAsserted)
	if err != nil {
		return err
	}
	if err := coverAll(acted, outstanding, "a response event answers every outstanding assertion: it leaves out"); err != nil {
		return err
	}
	return e.checkRiders(ctx, r, ev, others(responses, lead.ID()))
}

// checkOneResponse checks one response of a response event: the
// obligee's, over the outstanding assertion of an obligation of this
// transaction by its exact content hash, an accept within the asserted
// quantity and, when short, naming its remainder (marked in named). full
// reports an accept of all that is owed.
func (e *Engine) checkOneResponse(ctx context.Context, r *receipt, obr *Obj, remainders map[string]*Obj, named map[string]bool) (full bool, err error) {
	obl := held(ctx, e, r.txn, obr.P("obligation_id"), object.AsObligation)
	if obl == nil {
		return false, refusef(reason.ObligationSubjectUnreferenced, "response %s names an obligation not held here", obr.ID())
	}
	if obl.Obligee() != r.from || obl.ObligeeAgent() != obr.Agent() {
		return false, refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s responds to it (obligation §5.2 rule 1)", obl.ID())
	}
	os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
	if err != nil {
		return false, err
	}
	last := os.outstanding()
	switch {
	case last == "":
		return false, refusef(reason.StateTransitionDenied, "obligation %s is %q; only an outstanding assertion is answered, once (obligation §6.1)", obl.ID(), os.State)
	case obr.P("assertion_id") == last:
	case slices.Contains(os.Assertions, obr.P("assertion_id")):
		return false, refusef(reason.StateTransitionDenied, "assertion %s was answered already; the outstanding assertion of %s is %s", obr.P("assertion_id"), obl.ID(), last)
	default:
		return false, refusef(reason.ObligationResponseHashMismatch, "response %s answers %s, which is not an assertion of %s", obr.ID(), obr.P("assertion_id"), obl.ID())
	}
	prf, ok := e.getTyped(ctx, r.txn, last, protocol.PerformanceEvent)
	if !ok {
		return false, errf("assertion %s is not held", last)
	}
	if obr.P("assertion_hash") != prf.Hash() {
		return false, refusef(reason.ObligationResponseHashMismatch, "response %s is not bound to assertion %s by its content hash", obr.ID(), last)
	}
	if obr.P("response_type") != "accept" {
		return false, nil
	}
	qty := obr.P("accepted_quantity")
	acc, err1 := decimal.ParseQuantity(qty)
	asserted, err2 := decimal.ParseQuantity(prf.P("asserted_quantity"))
	owed, err3 := decimal.ParseQuantity(obl.Quantity())
	if err1 != nil || err2 != nil || err3 != nil || acc.Cmp(asserted) > 0 {
		return false, refusef(reason.ObligationTermsMutated, "accepted quantity %q is not within the asserted %s", qty, prf.P("asserted_quantity"))
	}
	if acc.Cmp(owed) < 0 {
		rem := remainders[obr.P("remainder_obligation_id")]
		if rem != nil {
			named[rem.ID()] = true
		}
		return false, e.checkRemainder(ctx, r.txn, obl, rem, obr, owed.Sub(acc))
	}
	if obr.Payload()["remainder_obligation_id"] != nil {
		return false, refusef(reason.ObligationRemainderMissing, "accepting all that is owed leaves no remainder, and names none")
	}
	return true, nil
}

// checkRemainder checks the remainder of a partial acceptance (obligation
// §5.2 rules 3 and 4): a new obligation of this transaction, travelling
// with the response that names it, owing the difference want under the
// same agreement and subject, with the obligation's commitment, unit and
// parties, pending, and a consideration that is null or the original's
// unchanged.
func (e *Engine) checkRemainder(ctx context.Context, txn string, obl *object.Obligation, rem, obr *Obj, want decimal.Decimal) error {
	op := obl.Payload()
	if rem == nil || rem.ID() != obr.P("remainder_obligation_id") {
		return refusef(reason.ObligationRemainderMissing, "accepting %s of %s needs a remainder obligation for the difference %s, named by the response and travelling with it", obr.P("accepted_quantity"), obl.Quantity(), want)
	}
	mp := rem.Payload()
	if _, err := e.db.NamedObjectTransaction(ctx, rem.ID()); err == nil || rem.Txn() != txn {
		return refusef(reason.ObligationRemainderMissing, "remainder %s is not a new obligation of transaction %s", rem.ID(), txn)
	}
	rq, err := decimal.ParseQuantity(str(mp["quantity"]))
	if err != nil || rq.Cmp(want) != 0 || str(mp["agreement_id"]) != str(op["agreement_id"]) {
		return refusef(reason.ObligationRemainderMissing, "remainder %s does not owe the difference %s under agreement %v", rem.ID(), want, op["agreement_id"])
	}
	subjA, _ := canonical.Marshal(mp["subject"])
	subjB, _ := canonical.Marshal(op["subject"])
	if string(subjA) != string(subjB) {
		return reason.Refuse(fmt.Sprintf("remainder %s owes another subject than %s", rem.ID(), obl.ID()), reason.ObligationRemainderMissing, reason.ObligationTermsMutated)
	}
	switch {
	case str(mp["unit_code"]) != str(op["unit_code"]):
		return refusef(reason.ObligationTermsMutated, "remainder %s is owed in %v, the obligation in %v", rem.ID(), mp["unit_code"], op["unit_code"])
	case str(mp["commitment_id"]) != str(op["commitment_id"]):
		return refusef(reason.ObligationTermsMutated, "remainder %s decomposes another commitment than %s", rem.ID(), obl.ID())
	case !sameParty(object.Sub(mp, "obligor"), object.Sub(op, "obligor")) || !sameParty(object.Sub(mp, "obligee"), object.Sub(op, "obligee")):
		return refusef(reason.ObligationTermsMutated, "remainder %s names other parties than %s", rem.ID(), obl.ID())
	case ledger.RemainderShare(obl.Value(), obr.Value(), rem.Value()) != nil:
		return ledger.RemainderShare(obl.Value(), obr.Value(), rem.Value()).Err()
	case str(mp["state"]) != string(protocol.OblPending):
		return refusef(reason.StateTransitionDenied, "a remainder is issued pending")
	}
	return nil
}
