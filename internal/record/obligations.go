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
// parties, quantity owed − accepted, due by its own condition, and no
// consideration of its own (the agreement's total stays on the original
// duty; a countersigner also accepts a remainder that repeats the
// original's consideration unchanged, as the published fixture does). It
// is pending from the moment the acceptance is recorded. What the rules
// allow next for it: the transaction is then settlement_pending, and under
// rules 1.3 the aggregate machine has no performance.declared from
// settlement_pending, so the remainder cannot be asserted there, and
// AssertPerformance refuses it with A202-STATE-TRANSITION-DENIED. The
// aggregate returns to in_performance only through exception.opened and
// remediation.accepted; otherwise the remainder ends by termination.agreed
// (released) or a waiver. This package implements none of those, so here
// the remainder stays pending, and visible, in both records. No transition
// is invented for it.
//
// Waiver (§5.2, §6.1: pending, due, asserted or rejected → waived) is an
// obligation transition with no aggregate event in the pilot state machine
// (§6.2 lists none), so there is no event to record it by: Respond refuses
// response_type waive with A202-STATE-TRANSITION-DENIED, and a
// countersigner refuses a waive response whatever event carries it. Rule 1
// (only the obligee responds, a waiver included) is checked first, so an
// obligor's waiver is A202-OBLIGATION-RESPONSE-UNAUTHORIZED.

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
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ObligationInput is what the obligee issues (obligation §3).
type ObligationInput struct {
	MandateID     string `json:"mandate_id"`
	TransactionID string `json:"transaction_id"`
	// TermPath is the term the duty discharges, under $.terms.core or
	// $.terms.profile_terms; default $.terms.core.quantity.
	TermPath string `json:"term_path,omitempty"`
	// DueCondition is a registered due condition (obligation §4); default
	// due_at_time 21 days from now.
	DueCondition map[string]any `json:"due_condition,omitempty"`
	// ApprovalID is an approval of exactly this act, when the mandate
	// holds it for approval.
	ApprovalID string `json:"approval_id,omitempty"`
}

// AssertInput is the obligor's assertion of performance (obligation §5.1).
type AssertInput struct {
	MandateID        string          `json:"mandate_id"`
	ObligationID     string          `json:"obligation_id"`
	AssertedQuantity string          `json:"asserted_quantity,omitempty"`
	Evidence         []EvidenceInput `json:"evidence"`
	// ApprovalID is an approval of exactly this act, when the mandate
	// holds it for approval.
	ApprovalID string `json:"approval_id,omitempty"`
}

// EvidenceInput describes one evidence object the obligor presents.
type EvidenceInput struct {
	EvidenceType string `json:"evidence_type"`
	Claim        string `json:"claim"`
	ArtifactHash string `json:"artifact_hash"`
	LocatorHint  string `json:"locator_hint,omitempty"`
}

// RespondInput is the obligee's answer to an assertion (obligation §5.2).
type RespondInput struct {
	MandateID    string `json:"mandate_id"`
	ObligationID string `json:"obligation_id"`
	// ResponseType is accept or reject. A waiver (waive) is refused with
	// A202-STATE-TRANSITION-DENIED: the transaction's state machine has no
	// event to record it by.
	ResponseType string `json:"response_type"`
	// AssertionID and AssertionHash bind the exact assertion answered;
	// when empty, the latest assertion is answered and its hash taken.
	AssertionID   string `json:"assertion_id,omitempty"`
	AssertionHash string `json:"assertion_hash,omitempty"`
	// AcceptedQuantity (accept) defaults to the asserted quantity; less
	// than owed issues a remainder obligation for the difference.
	AcceptedQuantity string `json:"accepted_quantity,omitempty"`
	// RemainderDue is the remainder's due condition (default 21 days).
	RemainderDue map[string]any `json:"remainder_due_condition,omitempty"`
	// ReasonCode (reject) is one of obligation §5.5.
	ReasonCode string `json:"reason_code,omitempty"`
	// ApprovalID is an approval of exactly this response, when the
	// mandate holds it for approval.
	ApprovalID string `json:"approval_id,omitempty"`
}

func init() {
	eventSpecs[protocol.EvObligationActivated] = receiveSpec{
		carries: map[protocol.ObjectType]int{protocol.Obligation: 1},
		check:   checkObligationActivated,
	}
	eventSpecs[protocol.EvPerformanceDeclared] = receiveSpec{
		carries: map[protocol.ObjectType]int{protocol.PerformanceEvent: 1, protocol.Evidence: -1},
		check:   checkPerformanceDeclared,
	}
	response := receiveSpec{
		carries: map[protocol.ObjectType]int{protocol.ObligationResponse: 1, protocol.Obligation: 1},
		check:   checkResponse,
	}
	eventSpecs[protocol.EvAcceptanceGranted] = response
	eventSpecs[protocol.EvAcceptanceRejected] = response
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
// This instance is the obligee, the counterparty the obligor.
func (e *Engine) IssueObligation(ctx context.Context, in ObligationInput) (Outcome, error) {
	var agr *Obj
	return e.perform(ctx, actSpec{
		name: protocol.ActObligationActivated, txn: in.TransactionID, mandateID: in.MandateID, event: protocol.EvObligationActivated, approvalID: in.ApprovalID,
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
			return nil
		},
		act: func(ctx context.Context, st *state) (map[string]any, map[string]any, error) {
			core := sub(agr.Terms(), "core")
			return authority.CoreTerms(str(core["quantity"]), str(core["unit_code"]), core["total"]), map[string]any{"agreement_id": agr.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			terms := agr.Terms()
			core := sub(terms, "core")
			path := in.TermPath
			if path == "" {
				path = "$.terms.core.quantity"
			}
			if !resolvePath(agr, path) {
				return refusef(reason.ObligationSubjectUnreferenced, "term_path %s does not resolve in the agreement's terms", path)
			}
			due := in.DueCondition
			if due == nil {
				due = map[string]any{"type": "due_at_time", "at": envelope.Timestamp(b.now.Add(21 * 24 * time.Hour))}
			}
			cfg := e.o.Config()
			me := party(cfg.OrganizationID, b.agent)
			obligor := agr.PSub(string(st.Role().Other()))
			ids, _ := agr.Payload()["commitment_ids"].([]any)
			if len(ids) == 0 {
				return refusef(reason.ObligationSubjectUnreferenced, "agreement %s names no commitment for the obligation to decompose", agr.ID())
			}
			payload := map[string]any{
				"agreement_id":  agr.ID(),
				"commitment_id": str(ids[0]),
				"obligor":       obligor,
				"obligee":       me,
				"subject": map[string]any{
					"agreement_id": agr.ID(), "terms_hash": agr.P("terms_hash"), "profile": str(terms["profile"]), "term_path": path,
				},
				"due_condition": due,
				"quantity":      str(core["quantity"]),
				"unit_code":     str(core["unit_code"]),
				"consideration": core["total"],
				"state":         string(protocol.OblPending),
			}
			if un := str(core["unit_name"]); un != "" {
				payload["unit_name"] = un
			}
			// The gate on the obligation decides its due condition
			// (obligation §4): an unknown type or another type's fields are
			// A202-OBLIGATION-CONDITION-UNKNOWN, business days without a
			// calendar A202-TERMS-INVALID, as the counterparty's gate will say.
			obl, err := b.add(protocol.Obligation, payload, protocol.PurposeObjectIssuance)
			if err != nil {
				return asRefusal(err, reason.ObligationConditionUnknown)
			}
			b.data = map[string]any{"obligation_id": obl.ID()}
			b.name("obligation", obl.ID())
			return nil
		},
	})
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

// obligationState reads where an obligation stands, as recorded events
// left it (applyEvent keeps it), by its key: the cost does not grow with
// the chain.
func (e *Engine) obligationState(ctx context.Context, oblID string) (obligationState, error) {
	row, err := e.o.Store.ObligationState(ctx, oblID)
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
func (e *Engine) heldObligation(ctx context.Context, id string) (*Obj, error) {
	obl, ok := e.getTyped(ctx, id, protocol.Obligation)
	if !ok {
		return nil, refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not held here", id)
	}
	return obl, nil
}

// checkObligationActivated is the obligor's live guard of
// obligation.activated (obligation §3, §3.1, §6.1): the obligation travels
// with the event, derives from this transaction's agreement and
// commitment, names the sender as obligee and this organisation as
// obligor, and owes exactly the terms' quantity, unit and total. That its
// subject binds the agreement's terms_hash and profile, that its term path
// resolves and that its parties are the agreement's are the verifier's
// rules as well (verify.Extend).
func checkObligationActivated(ctx context.Context, e *Engine, r *receipt, ev *Obj) error {
	obl := r.one(protocol.Obligation)
	if obl == nil || obl.ID() != ev.Data("obligation_id") {
		return refusef(reason.ObligationSubjectUnreferenced, "obligation.activated names an obligation that does not travel with it")
	}
	agr, err := e.agreementOf(ctx, r.txn)
	if err != nil {
		return err
	}
	if agr == nil {
		return refusef(reason.ObligationSubjectUnreferenced, "transaction %s has no agreement", r.txn)
	}
	me := agr.PSub(r.st.t.Role) // this organisation's party to the agreement
	op := obl.Payload()
	subj := obl.PSub("subject")
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	core := sub(agr.Terms(), "core")
	total, _ := canonical.Marshal(core["total"])
	consid, _ := canonical.Marshal(op["consideration"])
	switch {
	case obl.PartyOrg("obligee") != r.from || str(obl.PSub("obligee")["agent_id"]) != obl.Agent() || !sameParty(obl.PSub("obligor"), me):
		return refusef(reason.ObligationSubjectUnreferenced, "%s issues duties of this organisation only as their obligee", r.from)
	case obl.P("agreement_id") != agr.ID() || len(ids) == 0 || obl.P("commitment_id") != str(ids[0]):
		return refusef(reason.ObligationSubjectUnreferenced, "obligation %s does not derive from agreement %s and its commitment", obl.ID(), agr.ID())
	case str(subj["agreement_id"]) != agr.ID() || str(subj["terms_hash"]) != agr.P("terms_hash") || str(subj["profile"]) != str(agr.Terms()["profile"]):
		return refusef(reason.ObligationSubjectUnreferenced, "the subject of %s is not bound to the agreement's terms_hash and profile", obl.ID())
	case !resolvePath(agr, str(subj["term_path"])):
		return refusef(reason.ObligationSubjectUnreferenced, "term_path %v does not resolve in the agreement's terms", subj["term_path"])
	case obl.P("quantity") != str(core["quantity"]) || obl.P("unit_code") != str(core["unit_code"]) || string(total) != string(consid):
		return refusef(reason.ObligationTermsMutated, "obligation %s states a quantity, unit or consideration other than the agreement's", obl.ID())
	case obl.P("state") != string(protocol.OblPending):
		return refusef(reason.StateTransitionDenied, "an obligation is issued pending")
	}
	return nil
}

// AssertPerformance presents the obligor's evidence and assertion and
// appends performance.declared (in_performance → acceptance_pending). The
// obligation must be pending or rejected, the transaction in_performance,
// and at least one evidence item presented (obligation §5.1, §6.1).
func (e *Engine) AssertPerformance(ctx context.Context, in AssertInput) (Outcome, error) {
	obl, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	qty := in.AssertedQuantity
	if qty == "" {
		qty = obl.P("quantity")
	}
	return e.perform(ctx, actSpec{
		name: protocol.ActPerformanceDeclared, txn: obl.Txn(), mandateID: in.MandateID, event: protocol.EvPerformanceDeclared, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			cfg := e.o.Config()
			if obl.PartyOrg("obligor") != cfg.OrganizationID {
				// The guard of performance.declared is an obligor-signed
				// assertion (obligation §6.1); a guard that fails is an
				// illegal transition.
				return refusef(reason.StateTransitionDenied, "only the obligor asserts performance of %s, and this organisation is not its obligor", in.ObligationID)
			}
			os, err := e.obligationState(ctx, in.ObligationID)
			if err != nil {
				return err
			}
			switch os.State {
			case protocol.OblPending, protocol.OblRejected:
			case "":
				return refusef(reason.StateTransitionDenied, "obligation %s was never issued in the record of %s", in.ObligationID, st.t.ID)
			case protocol.OblAsserted:
				return refusef(reason.StateTransitionDenied, "obligation %s is asserted: assertion %s awaits the obligee's response, and a new assertion is made only after a rejection", in.ObligationID, os.outstanding())
			default:
				return refusef(reason.StateTransitionDenied, "obligation %s is %s; performance is declared when it is pending or after a rejection (obligation §6.1)", in.ObligationID, os.State)
			}
			if st.State() != protocol.InPerformance {
				if st.State() == protocol.SettlementPending {
					return refusef(reason.StateTransitionDenied, "obligation %s is pending, but transaction %s is settlement_pending, and under rules %s no event declares performance from there: "+
						"a remainder is performed only after the transaction returns to in_performance (exception.opened, then remediation.accepted), or ends by termination or waiver", in.ObligationID, st.t.ID, RulesVersion)
				}
				return refusef(reason.StateTransitionDenied, "performance.declared moves in_performance → acceptance_pending; transaction %s is %s", st.t.ID, st.t.State)
			}
			if len(in.Evidence) == 0 {
				return refusef(reason.ObligationAssertionUnevidenced, "an assertion carries at least one evidence reference")
			}
			if _, err := decimal.ParseQuantity(qty); err != nil {
				return refusef(reason.TermsInvalid, "asserted_quantity: %v", err)
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return authority.CoreTerms(qty, obl.P("unit_code"), obl.Payload()["consideration"]), map[string]any{"obligation_id": in.ObligationID}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			cfg := e.o.Config()
			refs := []any{}
			for _, ev := range in.Evidence {
				eo, err := b.add(protocol.Evidence, map[string]any{
					"evidence_type": ev.EvidenceType, "claim": ev.Claim, "artifact_hash": ev.ArtifactHash,
					"issuer":       map[string]any{"organization_id": cfg.OrganizationID},
					"verification": map[string]any{"status": "unverified", "verified_at": nil, "verifier_organization_id": nil},
				}, protocol.PurposeObjectIssuance)
				if err != nil {
					return asRefusal(err, reason.EvidenceTypeUnknown)
				}
				ref := map[string]any{"evidence_id": eo.ID(), "content_hash": eo.Hash(), "evidence_type": ev.EvidenceType,
					"signed_by": party(cfg.OrganizationID, b.agent)}
				if ev.LocatorHint != "" {
					ref["locator_hint"] = ev.LocatorHint
				}
				refs = append(refs, ref)
			}
			prf, err := b.add(protocol.PerformanceEvent, map[string]any{
				"obligation_id": in.ObligationID, "asserted_quantity": qty, "unit_code": obl.P("unit_code"), "evidence_refs": refs,
			}, protocol.PurposeObjectIssuance)
			if err != nil {
				return asRefusal(err, reason.ObligationAssertionUnevidenced)
			}
			b.data = map[string]any{"obligation_id": in.ObligationID, "performance_event_id": prf.ID()}
			b.name("performance_event", prf.ID())
			b.name("assertion_hash", prf.Hash())
			return nil
		},
	})
}

// checkPerformanceDeclared is the obligee's live guard of
// performance.declared (obligation §5.1, §6.1): an assertion by the obligor
// of an obligation of this transaction that is pending or rejected, in its
// unit, with at least one full-form evidence reference, each resolving to
// an evidence object that travels with it (and no evidence that is not
// referenced).
func checkPerformanceDeclared(ctx context.Context, e *Engine, r *receipt, ev *Obj) error {
	prf, evidence := r.one(protocol.PerformanceEvent), r.byType(protocol.Evidence)
	if prf == nil || prf.ID() != ev.Data("performance_event_id") {
		return refusef(reason.ObligationAssertionUnevidenced, "performance.declared names an assertion that does not travel with it")
	}
	obl, ok := e.getTyped(ctx, prf.P("obligation_id"), protocol.Obligation)
	if !ok || ev.Data("obligation_id") != obl.ID() || obl.Txn() != r.txn {
		return refusef(reason.ObligationSubjectUnreferenced, "assertion %s names obligation %s, which is not held here", prf.ID(), prf.P("obligation_id"))
	}
	if obl.PartyOrg("obligor") != r.from || str(obl.PSub("obligor")["agent_id"]) != prf.Agent() {
		return refusef(reason.StateTransitionDenied, "only the obligor of %s asserts its performance (obligation §6.1)", obl.ID())
	}
	if prf.P("unit_code") != obl.P("unit_code") {
		return refusef(reason.ObligationTermsMutated, "the assertion's unit %s is not the obligation's %s", prf.P("unit_code"), obl.P("unit_code"))
	}
	os, err := e.obligationState(ctx, obl.ID())
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
	byID := map[string]*Obj{}
	for _, x := range evidence {
		byID[x.ID()] = x
	}
	used := map[string]bool{}
	for _, ref := range refs {
		rm, ok := ref.(map[string]any)
		if !ok {
			return refusef(reason.ObligationAssertionUnevidenced, "assertion %s uses a short-form reference where the full form is required", prf.ID())
		}
		x := byID[str(rm["evidence_id"])]
		if x == nil {
			return refusef(reason.EvidenceUnverified, "evidence %v does not travel with the assertion", rm["evidence_id"])
		}
		if x.Hash() != str(rm["content_hash"]) || x.P("evidence_type") != str(rm["evidence_type"]) {
			return refusef(reason.EvidenceHashMismatch, "the reference to %s does not match the evidence object", x.ID())
		}
		used[x.ID()] = true
	}
	if len(used) != len(evidence) {
		return reason.Refuse(fmt.Sprintf("the performance.declared message carries evidence that assertion %s does not reference", prf.ID()))
	}
	return nil
}

// Respond answers the outstanding assertion of an obligation, once: accept
// (acceptance.granted → settlement_pending) or reject with a registered
// reason (acceptance.rejected → in_performance, after which the obligor may
// assert again). Accepting less than owed issues the remainder obligation.
// A waiver is refused: the record has no event for it (see the comment at
// the top of this file).
func (e *Engine) Respond(ctx context.Context, in RespondInput) (Outcome, error) {
	obl, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	op := obl.Payload()
	var prf *Obj
	var last, qty string
	var eventType protocol.EventType
	var actName protocol.Act
	switch in.ResponseType {
	case "accept":
		eventType, actName = protocol.EvAcceptanceGranted, protocol.ActAcceptanceGranted
	case "reject":
		eventType, actName = protocol.EvAcceptanceRejected, protocol.ActAcceptanceRejected
	}
	return e.perform(ctx, actSpec{
		name: actName, txn: obl.Txn(), mandateID: in.MandateID, event: eventType, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			cfg := e.o.Config()
			if obl.PartyOrg("obligee") != cfg.OrganizationID {
				return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s responds to it, a waiver included (obligation §5.2 rule 1)", in.ObligationID)
			}
			switch in.ResponseType {
			case "accept", "reject":
			case "waive":
				return refusef(reason.StateTransitionDenied, "a waiver moves the obligation to waived (obligation §6.1), but the transaction's state machine (rules %s) has no event for it, "+
					"so there is nothing to record it by; answer with accept or reject", RulesVersion)
			default:
				return refusef(reason.StateTransitionDenied, "response_type %q: answer an assertion with accept or reject", in.ResponseType)
			}
			os, err := e.obligationState(ctx, in.ObligationID)
			if err != nil {
				return err
			}
			last = os.outstanding()
			if last == "" {
				return refusef(reason.StateTransitionDenied, "obligation %s is %q; only an outstanding assertion is answered, once (obligation §6.1)", in.ObligationID, os.State)
			}
			if in.AssertionID != "" && in.AssertionID != last {
				if slices.Contains(os.Assertions, in.AssertionID) {
					return refusef(reason.StateTransitionDenied, "assertion %s was answered already; the outstanding assertion of %s is %s", in.AssertionID, in.ObligationID, last)
				}
				return refusef(reason.ObligationResponseHashMismatch, "%s is not an assertion of %s; the outstanding one is %s", in.AssertionID, in.ObligationID, last)
			}
			var ok bool
			if prf, ok = e.getTyped(ctx, last, protocol.PerformanceEvent); !ok {
				return errf("assertion %s is not held", last)
			}
			if in.AssertionHash != "" && in.AssertionHash != prf.Hash() {
				return refusef(reason.ObligationResponseHashMismatch, "assertion_hash %s is not the content hash of %s (%s)", in.AssertionHash, last, prf.Hash())
			}
			switch in.ResponseType {
			case "accept":
				qty = in.AcceptedQuantity
				if qty == "" {
					qty = prf.P("asserted_quantity")
				}
				acc, err1 := decimal.ParseQuantity(qty)
				asserted, err2 := decimal.ParseQuantity(prf.P("asserted_quantity"))
				if err1 != nil || err2 != nil {
					return refusef(reason.TermsInvalid, "accepted_quantity %q is not a quantity", qty)
				}
				if acc.Cmp(asserted) > 0 {
					return refusef(reason.ObligationTermsMutated, "accepted quantity %s exceeds the asserted %s", qty, prf.P("asserted_quantity"))
				}
			case "reject":
				qty = prf.P("asserted_quantity")
				if in.ReasonCode == "" {
					return refusef(reason.ObligationRejectionReasonUnknown, "a rejection states a reason_code from the closed list of obligation §5.5")
				}
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return authority.CoreTerms(qty, obl.P("unit_code"), op["consideration"]), map[string]any{"assertion_id": last}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			payload := map[string]any{"obligation_id": in.ObligationID, "response_type": in.ResponseType, "assertion_id": last, "assertion_hash": prf.Hash()}
			if in.ResponseType == "accept" {
				payload["accepted_quantity"] = qty
				acc, _ := decimal.ParseQuantity(qty)
				owed, err := decimal.ParseQuantity(obl.P("quantity"))
				if err != nil {
					return refusef(reason.TermsInvalid, "obligation %s owes %q, not a quantity", obl.ID(), obl.P("quantity"))
				}
				if acc.Cmp(owed) < 0 {
					rem, err := e.remainder(b, obl, owed.Sub(acc).String(), in.RemainderDue)
					if err != nil {
						return asRefusal(err, reason.ObligationConditionUnknown)
					}
					payload["remainder_obligation_id"] = rem.ID()
					b.name("remainder_obligation", rem.ID())
				}
			} else {
				payload["reason_code"] = in.ReasonCode
			}
			// The gate on the response refuses an unregistered reason_code
			// (A202-OBLIGATION-REJECTION-REASON-UNKNOWN), as the
			// counterparty's will.
			obr, err := b.add(protocol.ObligationResponse, payload, protocol.PurposeObjectIssuance)
			if err != nil {
				return asRefusal(err, reason.TermsInvalid)
			}
			b.data = map[string]any{"obligation_id": in.ObligationID, "obligation_response_id": obr.ID()}
			b.name("obligation_response", obr.ID())
			return nil
		},
	})
}

// remainder issues the obligation for the shortfall of a partial
// acceptance (obligation §5.2 rule 3): the same agreement, commitment,
// subject, unit and parties, the difference as quantity, no consideration
// of its own (the agreement's total stays on the original duty), its own
// due condition, pending. It travels in the response's message and is
// pending once that acceptance is recorded.
func (e *Engine) remainder(b *builder, obl *Obj, qty string, due map[string]any) (*Obj, error) {
	if due == nil {
		due = map[string]any{"type": "due_at_time", "at": envelope.Timestamp(b.now.Add(21 * 24 * time.Hour))}
	}
	payload := map[string]any{}
	for k, v := range obl.Payload() {
		payload[k] = v
	}
	payload["quantity"] = qty
	payload["consideration"] = nil
	payload["due_condition"] = due
	payload["state"] = string(protocol.OblPending)
	return b.add(protocol.Obligation, payload, protocol.PurposeObjectIssuance)
}

// checkResponse is the obligor's live guard of acceptance.granted and
// acceptance.rejected (obligation §5.2, §5.4, §5.5, §6.1): the response
// travels with the event, is the obligee's (rule 1), answers the
// outstanding assertion of an obligation of this transaction by its exact
// content hash (rule 2), and an accept below what is owed carries and names
// its remainder (rule 3), which alters none of the obligation's terms
// (rule 4). The reason code of a rejection, and a response that carries
// terms of its own, are refused by the gate before this runs.
func checkResponse(ctx context.Context, e *Engine, r *receipt, ev *Obj) error {
	et := ev.EventType()
	obr, remainder := r.one(protocol.ObligationResponse), r.one(protocol.Obligation)
	if et == protocol.EvAcceptanceRejected && remainder != nil {
		return reason.Refuse(fmt.Sprintf("an acceptance.rejected message does not carry obligation %s", remainder.ID()))
	}
	if obr == nil || obr.ID() != ev.Data("obligation_response_id") {
		return refusef(reason.ObligationResponseHashMismatch, "the event names a response that does not travel with it")
	}
	obl, ok := e.getTyped(ctx, obr.P("obligation_id"), protocol.Obligation)
	if !ok || ev.Data("obligation_id") != obl.ID() || obl.Txn() != r.txn {
		return refusef(reason.ObligationSubjectUnreferenced, "response %s names an obligation not held here", obr.ID())
	}
	if obl.PartyOrg("obligee") != r.from || str(obl.PSub("obligee")["agent_id"]) != obr.Agent() {
		return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s responds to it (obligation §5.2 rule 1)", obl.ID())
	}
	switch rt := obr.P("response_type"); {
	case rt == "accept" && et == protocol.EvAcceptanceGranted, rt == "reject" && et == protocol.EvAcceptanceRejected:
	case rt == "accept" || rt == "reject":
		return refusef(reason.StateTransitionDenied, "a %s response is not recorded as %s", rt, et)
	default:
		return refusef(reason.StateTransitionDenied, "response type %q has no transition in the transaction's state machine under rules %s", rt, RulesVersion)
	}
	os, err := e.obligationState(ctx, obl.ID())
	if err != nil {
		return err
	}
	last := os.outstanding()
	switch {
	case last == "":
		return refusef(reason.StateTransitionDenied, "obligation %s is %q; only an outstanding assertion is answered, once (obligation §6.1)", obl.ID(), os.State)
	case obr.P("assertion_id") == last:
	case slices.Contains(os.Assertions, obr.P("assertion_id")):
		return refusef(reason.StateTransitionDenied, "assertion %s was answered already; the outstanding assertion of %s is %s", obr.P("assertion_id"), obl.ID(), last)
	default:
		return refusef(reason.ObligationResponseHashMismatch, "response %s answers %s, which is not an assertion of %s", obr.ID(), obr.P("assertion_id"), obl.ID())
	}
	prf, ok := e.getTyped(ctx, last, protocol.PerformanceEvent)
	if !ok {
		return errf("assertion %s is not held", last)
	}
	if obr.P("assertion_hash") != prf.Hash() {
		return refusef(reason.ObligationResponseHashMismatch, "response %s is not bound to assertion %s by its content hash", obr.ID(), last)
	}
	if et == protocol.EvAcceptanceGranted {
		qty := obr.P("accepted_quantity")
		acc, err1 := decimal.ParseQuantity(qty)
		asserted, err2 := decimal.ParseQuantity(prf.P("asserted_quantity"))
		owed, err3 := decimal.ParseQuantity(obl.P("quantity"))
		if err1 != nil || err2 != nil || err3 != nil || acc.Cmp(asserted) > 0 {
			return refusef(reason.ObligationTermsMutated, "accepted quantity %q is not within the asserted %s", qty, prf.P("asserted_quantity"))
		}
		if acc.Cmp(owed) < 0 {
			return e.checkRemainder(ctx, r.txn, obl, remainder, obr, owed.Sub(acc))
		}
		if obr.Payload()["remainder_obligation_id"] != nil || remainder != nil {
			return refusef(reason.ObligationRemainderMissing, "accepting all that is owed leaves no remainder, and names none")
		}
	}
	return nil
}

// checkRemainder checks the remainder of a partial acceptance (obligation
// §5.2 rules 3 and 4): a new obligation of this transaction, travelling
// with the response that names it, owing the difference want under the
// same agreement and subject, with the obligation's commitment, unit and
// parties, pending, and a consideration that is null or the original's
// unchanged.
func (e *Engine) checkRemainder(ctx context.Context, txn string, obl, rem, obr *Obj, want decimal.Decimal) error {
	op := obl.Payload()
	if rem == nil || rem.ID() != obr.P("remainder_obligation_id") {
		return refusef(reason.ObligationRemainderMissing, "accepting %s of %s needs a remainder obligation for the difference %s, named by the response and travelling with it", obr.P("accepted_quantity"), obl.P("quantity"), want)
	}
	mp := rem.Payload()
	if _, err := e.get(ctx, rem.ID()); err == nil || rem.Txn() != txn {
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
	consA, _ := canonical.Marshal(mp["consideration"])
	consB, _ := canonical.Marshal(op["consideration"])
	switch {
	case str(mp["unit_code"]) != str(op["unit_code"]):
		return refusef(reason.ObligationTermsMutated, "remainder %s is owed in %v, the obligation in %v", rem.ID(), mp["unit_code"], op["unit_code"])
	case str(mp["commitment_id"]) != str(op["commitment_id"]):
		return refusef(reason.ObligationTermsMutated, "remainder %s decomposes another commitment than %s", rem.ID(), obl.ID())
	case !sameParty(sub(mp, "obligor"), sub(op, "obligor")) || !sameParty(sub(mp, "obligee"), sub(op, "obligee")):
		return refusef(reason.ObligationTermsMutated, "remainder %s names other parties than %s", rem.ID(), obl.ID())
	case mp["consideration"] != nil && string(consA) != string(consB):
		return refusef(reason.ObligationTermsMutated, "remainder %s carries a consideration of its own; it carries none, or the original's unchanged", rem.ID())
	case str(mp["state"]) != string(protocol.OblPending):
		return refusef(reason.StateTransitionDenied, "a remainder is issued pending")
	}
	return nil
}
