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
// obligation §6.1:
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
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
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
}

// AssertInput is the obligor's assertion of performance (obligation §5.1).
type AssertInput struct {
	MandateID        string          `json:"mandate_id"`
	ObligationID     string          `json:"obligation_id"`
	AssertedQuantity string          `json:"asserted_quantity,omitempty"`
	Evidence         []EvidenceInput `json:"evidence"`
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
}

func (e *Engine) committedAgreement(ctx context.Context, txn string) (object, error) {
	agr, err := e.agreementOf(ctx, txn)
	if err != nil {
		return nil, err
	}
	if agr == nil {
		return nil, refusef(reason.ObligationSubjectUnreferenced, "transaction %s has no agreement", txn)
	}
	return agr, nil
}

// resolvePath reports whether a $.terms... path names a member of the
// agreement's terms.
func resolvePath(agr object, path string) bool {
	if !strings.HasPrefix(path, "$.terms.core") && !strings.HasPrefix(path, "$.terms.profile_terms") {
		return false
	}
	var cur any = map[string]any{"terms": pl(agr)["terms"]}
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
	now := e.o.Clock().UTC().Truncate(time.Second)
	unlock := e.lock(in.TransactionID)
	defer unlock()
	t, err := e.o.Store.GetTransaction(ctx, in.TransactionID)
	if err != nil {
		return Outcome{}, refusef(reason.StateTransitionDenied, "transaction %s is unknown", in.TransactionID)
	}
	if t.State != "committed" {
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation.activated moves committed → in_performance; transaction %s is %s", t.ID, t.State)
	}
	m, err := e.ownMandate(ctx, in.MandateID)
	if err != nil {
		return Outcome{}, err
	}
	agr, err := e.committedAgreement(ctx, t.ID)
	if err != nil {
		return Outcome{}, err
	}
	ap := pl(agr)
	terms := sub(ap, "terms")
	core := sub(terms, "core")
	path := in.TermPath
	if path == "" {
		path = "$.terms.core.quantity"
	}
	if !resolvePath(agr, path) {
		return Outcome{}, refusef(reason.ObligationSubjectUnreferenced, "term_path %s does not resolve in the agreement's terms", path)
	}
	due := in.DueCondition
	if due == nil {
		due = map[string]any{"type": "due_at_time", "at": envelope.Timestamp(now.Add(21 * 24 * time.Hour))}
	}
	cfg := e.o.Config()
	me := party(cfg.OrganizationID, cfg.AgentID)
	obligor := sub(ap, "supplier")
	if sameParty(obligor, me) {
		obligor = sub(ap, "buyer")
	}
	ids, _ := ap["commitment_ids"].([]any)
	if len(ids) == 0 {
		return Outcome{}, refusef(reason.ObligationSubjectUnreferenced, "agreement %s names no commitment for the obligation to decompose", idOf(agr))
	}
	payload := map[string]any{
		"agreement_id":  idOf(agr),
		"commitment_id": str(ids[0]),
		"obligor":       obligor,
		"obligee":       me,
		"subject": map[string]any{
			"agreement_id": idOf(agr), "terms_hash": str(ap["terms_hash"]), "profile": str(terms["profile"]), "term_path": path,
		},
		"due_condition": due,
		"quantity":      str(core["quantity"]),
		"unit_code":     str(core["unit_code"]),
		"consideration": core["total"],
		"state":         "pending",
	}
	if un := str(core["unit_name"]); un != "" {
		payload["unit_name"] = un
	}
	pol, polRaw, _, err := e.ownDecision(ctx, m, authority.ActObligationActivated, t.ID, t.Counterparty,
		coreTerms(str(core["quantity"]), str(core["unit_code"]), core["total"]), map[string]any{"agreement_id": idOf(agr)}, nil, t.HeadSequence+1)
	if err != nil {
		return Outcome{}, err
	}
	// The gate on the obligation decides its due condition (obligation §4):
	// an unknown type or another type's fields are
	// A202-OBLIGATION-CONDITION-UNKNOWN, business days without a calendar
	// A202-TERMS-INVALID, as the counterparty's gate will say.
	obl, oblRaw, err := e.newObject("obligation", t.ID, in.MandateID, payload, "object_issuance", now, "")
	if err != nil {
		return Outcome{}, asRefusal(err, reason.ObligationConditionUnknown)
	}
	ev, evRaw, row, err := e.prepareEvent(t, "obligation.activated", map[string]any{"obligation_id": idOf(obl)}, pol, in.MandateID, now)
	if err != nil {
		return Outcome{}, err
	}
	a := &act{txn: t.ID, peer: t.Counterparty, created: [][]byte{oblRaw, polRaw}, event: ev, eventRaw: evRaw, ev: row}
	if err := e.commitPending(ctx, a); err != nil {
		return Outcome{}, err
	}
	out, err := e.deliver(ctx, a)
	if err == nil {
		out.Objects = map[string]string{"obligation": idOf(obl), "policy_decision": idOf(pol), "event": idOf(ev)}
	}
	return out, err
}

// obligationState is where one obligation stands in the record.
type obligationState struct {
	// State is "" when no recorded event issued the obligation.
	State string
	// Assertions are its assertions (prf_...) in record order; while State
	// is asserted the last one is outstanding and every other one was
	// answered.
	Assertions []string
}

// outstanding is the assertion a response may answer, or "".
func (s obligationState) outstanding() string {
	if s.State != "asserted" || len(s.Assertions) == 0 {
		return ""
	}
	return s.Assertions[len(s.Assertions)-1]
}

// obligationState derives an obligation's state from the recorded events
// (obligation §6.1; the table in this file's comment): the record, not the
// obligation object's own state member, says where a duty stands
// (spec-map C13). A remainder is issued by the recorded acceptance whose
// response names it.
func (e *Engine) obligationState(ctx context.Context, txn, oblID string) (obligationState, error) {
	var st obligationState
	evs, err := e.o.Store.Events(ctx, txn)
	if err != nil {
		return st, err
	}
	for _, x := range evs {
		if x.Status != store.EventRecorded {
			continue
		}
		switch x.EventType {
		case "obligation.activated", "performance.declared", "acceptance.granted", "acceptance.rejected":
		default:
			continue
		}
		ev, _, err := e.load(ctx, x.EventID)
		if err != nil {
			return st, err
		}
		d := sub(pl(ev), "data")
		if str(d["obligation_id"]) != oblID {
			if x.EventType == "acceptance.granted" {
				obr, _, err := e.load(ctx, str(d["obligation_response_id"]))
				if err != nil {
					return st, err
				}
				if str(pl(obr)["remainder_obligation_id"]) == oblID {
					st.State = "pending"
				}
			}
			continue
		}
		switch x.EventType {
		case "obligation.activated":
			st.State = "pending"
		case "performance.declared":
			st.State = "asserted"
			st.Assertions = append(st.Assertions, str(d["performance_event_id"]))
		case "acceptance.granted":
			st.State = "accepted"
		case "acceptance.rejected":
			st.State = "rejected"
		}
	}
	return st, nil
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

// carries refuses a message whose objects beside the event are not the
// act's own: at most limit[type] objects of each listed type (-1: any
// number) and nothing else. What a countersigner stores with an event is
// what both records hold, so nothing rides along unchecked.
func carries(eventType string, support []object, limit map[string]int) error {
	n := map[string]int{}
	for _, o := range support {
		t := typeOf(o)
		n[t]++
		if max, ok := limit[t]; !ok || max >= 0 && n[t] > max {
			return reason.Refuse(fmt.Sprintf("a %s message does not carry %s %s", eventType, t, idOf(o)))
		}
	}
	return nil
}

// only returns the one object of type t in objs, or nil.
func only(objs []object, t string) object {
	var found object
	for _, o := range objs {
		if typeOf(o) == t {
			if found != nil {
				return nil
			}
			found = o
		}
	}
	return found
}

// checkObligationActivated is the obligor's guard of obligation.activated
// (obligation §3, §3.1, §6.1): the obligation travels with the event,
// derives from this transaction's agreement and commitment, binds the
// agreement's terms_hash and profile by reference, names the agreement's
// parties with the sender as obligee and this organisation as obligor,
// and owes exactly the terms' quantity, unit and total.
func (e *Engine) checkObligationActivated(ctx context.Context, from, txn string, ev object, support []object, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		if err := carries("obligation.activated", support, map[string]int{"obligation": 1, "policy_decision": 1}); err != nil {
			return err
		}
		obl := only(support, "obligation")
		if obl == nil || idOf(obl) != str(sub(pl(ev), "data")["obligation_id"]) || str(obl["transaction_id"]) != txn {
			return refusef(reason.ObligationSubjectUnreferenced, "obligation.activated names an obligation that does not travel with it")
		}
		agr, err := e.committedAgreement(ctx, txn)
		if err != nil {
			return err
		}
		ap, op := pl(agr), pl(obl)
		cfg := e.o.Config()
		me := party(cfg.OrganizationID, cfg.AgentID)
		parties := []map[string]any{sub(ap, "buyer"), sub(ap, "supplier")}
		isParty := func(x map[string]any) bool { return sameParty(x, parties[0]) || sameParty(x, parties[1]) }
		subj := sub(op, "subject")
		ids, _ := ap["commitment_ids"].([]any)
		core := sub(sub(ap, "terms"), "core")
		total, _ := canonical.Marshal(core["total"])
		consid, _ := canonical.Marshal(op["consideration"])
		switch {
		case !isParty(sub(op, "obligor")) || !isParty(sub(op, "obligee")) || sameParty(sub(op, "obligor"), sub(op, "obligee")):
			return refusef(reason.ObligationSubjectUnreferenced, "the obligor and obligee of %s are not the agreement's two parties", idOf(obl))
		case str(sub(op, "obligee")["organization_id"]) != from || str(sub(op, "obligee")["agent_id"]) != str(sub(obl, "created_by")["agent_id"]) || !sameParty(sub(op, "obligor"), me):
			return refusef(reason.ObligationSubjectUnreferenced, "%s issues duties of this organisation only as their obligee", from)
		case str(op["agreement_id"]) != idOf(agr) || len(ids) == 0 || str(op["commitment_id"]) != str(ids[0]):
			return refusef(reason.ObligationSubjectUnreferenced, "obligation %s does not derive from agreement %s and its commitment", idOf(obl), idOf(agr))
		case str(subj["agreement_id"]) != idOf(agr) || str(subj["terms_hash"]) != str(ap["terms_hash"]) || str(subj["profile"]) != str(sub(ap, "terms")["profile"]):
			return refusef(reason.ObligationSubjectUnreferenced, "the subject of %s is not bound to the agreement's terms_hash and profile", idOf(obl))
		case !resolvePath(agr, str(subj["term_path"])):
			return refusef(reason.ObligationSubjectUnreferenced, "term_path %v does not resolve in the agreement's terms", subj["term_path"])
		case str(op["quantity"]) != str(core["quantity"]) || str(op["unit_code"]) != str(core["unit_code"]) || string(total) != string(consid):
			return refusef(reason.ObligationTermsMutated, "obligation %s states a quantity, unit or consideration other than the agreement's", idOf(obl))
		case str(op["state"]) != "pending":
			return refusef(reason.StateTransitionDenied, "an obligation is issued pending")
		}
		return e.checkDecision(ctx, from, ev, pol, authority.ActObligationActivated, txn,
			coreTerms(str(op["quantity"]), str(op["unit_code"]), op["consideration"]), map[string]any{"agreement_id": idOf(agr)}, nil)
	}
}

// heldObligation loads an obligation this instance holds and its
// transaction, holding the transaction's lock until unlock is called.
func (e *Engine) heldObligation(ctx context.Context, id string) (object, store.Transaction, func(), error) {
	obl, _, err := e.load(ctx, id)
	if err != nil || typeOf(obl) != "obligation" {
		return nil, store.Transaction{}, nil, refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not held here", id)
	}
	unlock := e.lock(str(obl["transaction_id"]))
	t, err := e.o.Store.GetTransaction(ctx, str(obl["transaction_id"]))
	if err != nil {
		unlock()
		return nil, store.Transaction{}, nil, err
	}
	return obl, t, unlock, nil
}

// AssertPerformance presents the obligor's evidence and assertion and
// appends performance.declared (in_performance → acceptance_pending). The
// obligation must be pending or rejected, the transaction in_performance,
// and at least one evidence item presented (obligation §5.1, §6.1).
func (e *Engine) AssertPerformance(ctx context.Context, in AssertInput) (Outcome, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	obl, t, unlock, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	defer unlock()
	txn := t.ID
	cfg := e.o.Config()
	op := pl(obl)
	if !sameParty(sub(op, "obligor"), party(cfg.OrganizationID, cfg.AgentID)) {
		// The guard of performance.declared is an obligor-signed assertion
		// (obligation §6.1); a guard that fails is an illegal transition.
		return Outcome{}, refusef(reason.StateTransitionDenied, "only the obligor asserts performance of %s, and this organisation is not its obligor", in.ObligationID)
	}
	st, err := e.obligationState(ctx, txn, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	switch st.State {
	case "pending", "rejected":
	case "":
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s was never issued in the record of %s", in.ObligationID, txn)
	case "asserted":
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s is asserted: assertion %s awaits the obligee's response, and a new assertion is made only after a rejection", in.ObligationID, st.outstanding())
	default:
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s is %s; performance is declared when it is pending or after a rejection (obligation §6.1)", in.ObligationID, st.State)
	}
	if t.State != "in_performance" {
		if t.State == "settlement_pending" {
			return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s is pending, but transaction %s is settlement_pending, and under rules %s no event declares performance from there: "+
				"a remainder is performed only after the transaction returns to in_performance (exception.opened, then remediation.accepted), or ends by termination or waiver", in.ObligationID, txn, RulesVersion)
		}
		return Outcome{}, refusef(reason.StateTransitionDenied, "performance.declared moves in_performance → acceptance_pending; transaction %s is %s", txn, t.State)
	}
	if len(in.Evidence) == 0 {
		return Outcome{}, refusef(reason.ObligationAssertionUnevidenced, "an assertion carries at least one evidence reference")
	}
	qty := in.AssertedQuantity
	if qty == "" {
		qty = str(op["quantity"])
	}
	if _, err := decimal.ParseQuantity(qty); err != nil {
		return Outcome{}, refusef(reason.TermsInvalid, "asserted_quantity: %v", err)
	}
	m, err := e.ownMandate(ctx, in.MandateID)
	if err != nil {
		return Outcome{}, err
	}
	var created [][]byte
	refs := []any{}
	for _, ev := range in.Evidence {
		payload := map[string]any{
			"evidence_type": ev.EvidenceType, "claim": ev.Claim, "artifact_hash": ev.ArtifactHash,
			"issuer":       map[string]any{"organization_id": cfg.OrganizationID},
			"verification": map[string]any{"status": "unverified", "verified_at": nil, "verifier_organization_id": nil},
		}
		eo, eraw, err := e.newObject("evidence", txn, in.MandateID, payload, "object_issuance", now, "")
		if err != nil {
			return Outcome{}, asRefusal(err, reason.EvidenceTypeUnknown)
		}
		ref := map[string]any{"evidence_id": idOf(eo), "content_hash": hashOf(eo), "evidence_type": ev.EvidenceType,
			"signed_by": party(cfg.OrganizationID, cfg.AgentID)}
		if ev.LocatorHint != "" {
			ref["locator_hint"] = ev.LocatorHint
		}
		refs = append(refs, ref)
		created = append(created, eraw)
	}
	pol, polRaw, _, err := e.ownDecision(ctx, m, authority.ActPerformanceDeclared, txn, t.Counterparty,
		coreTerms(qty, str(op["unit_code"]), op["consideration"]), map[string]any{"obligation_id": in.ObligationID}, nil, t.HeadSequence+1)
	if err != nil {
		return Outcome{}, err
	}
	prf, prfRaw, err := e.newObject("performance_event", txn, in.MandateID, map[string]any{
		"obligation_id": in.ObligationID, "asserted_quantity": qty, "unit_code": str(op["unit_code"]), "evidence_refs": refs,
	}, "object_issuance", now, "")
	if err != nil {
		return Outcome{}, asRefusal(err, reason.ObligationAssertionUnevidenced)
	}
	ev, evRaw, row, err := e.prepareEvent(t, "performance.declared", map[string]any{
		"obligation_id": in.ObligationID, "performance_event_id": idOf(prf),
	}, pol, in.MandateID, now)
	if err != nil {
		return Outcome{}, err
	}
	created = append(created, prfRaw, polRaw)
	a := &act{txn: txn, peer: t.Counterparty, created: created, event: ev, eventRaw: evRaw, ev: row}
	if err := e.commitPending(ctx, a); err != nil {
		return Outcome{}, err
	}
	out, err := e.deliver(ctx, a)
	if err == nil {
		out.Objects = map[string]string{"performance_event": idOf(prf), "assertion_hash": hashOf(prf), "policy_decision": idOf(pol), "event": idOf(ev)}
	}
	return out, err
}

// checkPerformanceDeclared is the obligee's guard of performance.declared
// (obligation §5.1, §6.1): an assertion by the obligor of an obligation of
// this transaction that is pending or rejected, in its unit, with at least
// one full-form evidence reference, each resolving to an evidence object
// that travels with it (and no evidence that is not referenced).
func (e *Engine) checkPerformanceDeclared(ctx context.Context, from, txn string, ev object, support []object, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		if err := carries("performance.declared", support, map[string]int{"performance_event": 1, "evidence": -1, "policy_decision": 1}); err != nil {
			return err
		}
		prf, evidence := only(support, "performance_event"), objsOf(support, "evidence")
		data := sub(pl(ev), "data")
		if prf == nil || idOf(prf) != str(data["performance_event_id"]) || str(prf["transaction_id"]) != txn {
			return refusef(reason.ObligationAssertionUnevidenced, "performance.declared names an assertion that does not travel with it")
		}
		pp := pl(prf)
		obl, _, err := e.load(ctx, str(pp["obligation_id"]))
		if err != nil || typeOf(obl) != "obligation" || str(data["obligation_id"]) != idOf(obl) || str(obl["transaction_id"]) != txn {
			return refusef(reason.ObligationSubjectUnreferenced, "assertion %s names obligation %v, which is not held here", idOf(prf), pp["obligation_id"])
		}
		op := pl(obl)
		if str(sub(op, "obligor")["organization_id"]) != from || str(sub(op, "obligor")["agent_id"]) != str(sub(prf, "created_by")["agent_id"]) {
			return refusef(reason.StateTransitionDenied, "only the obligor of %s asserts its performance (obligation §6.1)", idOf(obl))
		}
		if str(pp["unit_code"]) != str(op["unit_code"]) {
			return refusef(reason.ObligationTermsMutated, "the assertion's unit %v is not the obligation's %v", pp["unit_code"], op["unit_code"])
		}
		st, err := e.obligationState(ctx, txn, idOf(obl))
		if err != nil {
			return err
		}
		if st.State != "pending" && st.State != "rejected" {
			return refusef(reason.StateTransitionDenied, "obligation %s is %q; performance is declared when it is pending or after a rejection (obligation §6.1)", idOf(obl), st.State)
		}
		refs, _ := pp["evidence_refs"].([]any)
		if len(refs) == 0 {
			return refusef(reason.ObligationAssertionUnevidenced, "assertion %s carries no evidence reference", idOf(prf))
		}
		byID := map[string]object{}
		for _, x := range evidence {
			byID[idOf(x)] = x
		}
		used := map[string]bool{}
		for _, r := range refs {
			rm, ok := r.(map[string]any)
			if !ok {
				return refusef(reason.ObligationAssertionUnevidenced, "assertion %s uses a short-form reference where the full form is required", idOf(prf))
			}
			x := byID[str(rm["evidence_id"])]
			if x == nil {
				return refusef(reason.EvidenceUnverified, "evidence %v does not travel with the assertion", rm["evidence_id"])
			}
			if hashOf(x) != str(rm["content_hash"]) || str(pl(x)["evidence_type"]) != str(rm["evidence_type"]) {
				return refusef(reason.EvidenceHashMismatch, "the reference to %s does not match the evidence object", idOf(x))
			}
			used[idOf(x)] = true
		}
		if len(used) != len(evidence) {
			return reason.Refuse(fmt.Sprintf("the performance.declared message carries evidence that assertion %s does not reference", idOf(prf)))
		}
		return e.checkDecision(ctx, from, ev, pol, authority.ActPerformanceDeclared, txn,
			coreTerms(str(pp["asserted_quantity"]), str(pp["unit_code"]), op["consideration"]), map[string]any{"obligation_id": idOf(obl)}, nil)
	}
}

// Respond answers the outstanding assertion of an obligation, once: accept
// (acceptance.granted → settlement_pending) or reject with a registered
// reason (acceptance.rejected → in_performance, after which the obligor may
// assert again). Accepting less than owed issues the remainder obligation.
// A waiver is refused: the record has no event for it (see the comment at
// the top of this file).
func (e *Engine) Respond(ctx context.Context, in RespondInput) (Outcome, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	obl, t, unlock, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	defer unlock()
	txn := t.ID
	cfg := e.o.Config()
	op := pl(obl)
	if !sameParty(sub(op, "obligee"), party(cfg.OrganizationID, cfg.AgentID)) {
		return Outcome{}, refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s responds to it, a waiver included (obligation §5.2 rule 1)", in.ObligationID)
	}
	switch in.ResponseType {
	case "accept", "reject":
	case "waive":
		return Outcome{}, refusef(reason.StateTransitionDenied, "a waiver moves the obligation to waived (obligation §6.1), but the transaction's state machine (rules %s) has no event for it, "+
			"so there is nothing to record it by; answer with accept or reject", RulesVersion)
	default:
		return Outcome{}, refusef(reason.StateTransitionDenied, "response_type %q: answer an assertion with accept or reject", in.ResponseType)
	}
	st, err := e.obligationState(ctx, txn, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	last := st.outstanding()
	if last == "" {
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s is %q; only an outstanding assertion is answered, once (obligation §6.1)", in.ObligationID, st.State)
	}
	if in.AssertionID != "" && in.AssertionID != last {
		if slices.Contains(st.Assertions, in.AssertionID) {
			return Outcome{}, refusef(reason.StateTransitionDenied, "assertion %s was answered already; the outstanding assertion of %s is %s", in.AssertionID, in.ObligationID, last)
		}
		return Outcome{}, refusef(reason.ObligationResponseHashMismatch, "%s is not an assertion of %s; the outstanding one is %s", in.AssertionID, in.ObligationID, last)
	}
	prf, _, err := e.load(ctx, last)
	if err != nil {
		return Outcome{}, err
	}
	if in.AssertionHash != "" && in.AssertionHash != hashOf(prf) {
		return Outcome{}, refusef(reason.ObligationResponseHashMismatch, "assertion_hash %s is not the content hash of %s (%s)", in.AssertionHash, last, hashOf(prf))
	}
	m, err := e.ownMandate(ctx, in.MandateID)
	if err != nil {
		return Outcome{}, err
	}
	payload := map[string]any{"obligation_id": in.ObligationID, "response_type": in.ResponseType, "assertion_id": last, "assertion_hash": hashOf(prf)}
	var created [][]byte
	var eventType, actType, qty string
	var consideration any = op["consideration"]
	remainderID := ""
	switch in.ResponseType {
	case "accept":
		eventType, actType = "acceptance.granted", authority.ActAcceptanceGranted
		qty = in.AcceptedQuantity
		if qty == "" {
			qty = str(pl(prf)["asserted_quantity"])
		}
		acc, err1 := decimal.ParseQuantity(qty)
		asserted, err2 := decimal.ParseQuantity(str(pl(prf)["asserted_quantity"]))
		owed, err3 := decimal.ParseQuantity(str(op["quantity"]))
		if err1 != nil || err2 != nil || err3 != nil {
			return Outcome{}, refusef(reason.TermsInvalid, "accepted_quantity %q is not a quantity", qty)
		}
		if acc.Cmp(asserted) > 0 {
			return Outcome{}, refusef(reason.ObligationTermsMutated, "accepted quantity %s exceeds the asserted %s", qty, pl(prf)["asserted_quantity"])
		}
		payload["accepted_quantity"] = qty
		if acc.Cmp(owed) < 0 {
			rem, remRaw, err := e.remainder(obl, owed.Sub(acc).String(), in.RemainderDue, in.MandateID, now)
			if err != nil {
				return Outcome{}, asRefusal(err, reason.ObligationConditionUnknown)
			}
			remainderID = idOf(rem)
			payload["remainder_obligation_id"] = remainderID
			created = append(created, remRaw)
		}
	case "reject":
		eventType, actType = "acceptance.rejected", authority.ActAcceptanceRejected
		qty = str(pl(prf)["asserted_quantity"])
		if in.ReasonCode == "" {
			return Outcome{}, refusef(reason.ObligationRejectionReasonUnknown, "a rejection states a reason_code from the closed list of obligation §5.5")
		}
		payload["reason_code"] = in.ReasonCode
	}
	pol, polRaw, _, err := e.ownDecision(ctx, m, actType, txn, t.Counterparty, coreTerms(qty, str(op["unit_code"]), consideration),
		map[string]any{"assertion_id": last}, nil, t.HeadSequence+1)
	if err != nil {
		return Outcome{}, err
	}
	// The gate on the response refuses an unregistered reason_code
	// (A202-OBLIGATION-REJECTION-REASON-UNKNOWN), as the counterparty's will.
	obr, obrRaw, err := e.newObject("obligation_response", txn, in.MandateID, payload, "object_issuance", now, "")
	if err != nil {
		return Outcome{}, asRefusal(err, reason.TermsInvalid)
	}
	ev, evRaw, row, err := e.prepareEvent(t, eventType, map[string]any{"obligation_id": in.ObligationID, "obligation_response_id": idOf(obr)}, pol, in.MandateID, now)
	if err != nil {
		return Outcome{}, err
	}
	created = append(created, obrRaw, polRaw)
	a := &act{txn: txn, peer: t.Counterparty, created: created, event: ev, eventRaw: evRaw, ev: row}
	if err := e.commitPending(ctx, a); err != nil {
		return Outcome{}, err
	}
	out, err := e.deliver(ctx, a)
	if err == nil {
		out.Objects = map[string]string{"obligation_response": idOf(obr), "policy_decision": idOf(pol), "event": idOf(ev)}
		if remainderID != "" {
			out.Objects["remainder_obligation"] = remainderID
		}
	}
	return out, err
}

// remainder issues the obligation for the shortfall of a partial
// acceptance (obligation §5.2 rule 3): the same agreement, commitment,
// subject, unit and parties, the difference as quantity, no consideration
// of its own (the agreement's total stays on the original duty), its own
// due condition, pending. It travels in the response's message and is
// pending once that acceptance is recorded; from settlement_pending the
// rules give no event to assert it (see the comment at the top of this
// file).
func (e *Engine) remainder(obl object, qty string, due map[string]any, mandateID string, now time.Time) (object, []byte, error) {
	op := pl(obl)
	if due == nil {
		due = map[string]any{"type": "due_at_time", "at": envelope.Timestamp(now.Add(21 * 24 * time.Hour))}
	}
	payload := map[string]any{}
	for k, v := range op {
		payload[k] = v
	}
	payload["quantity"] = qty
	payload["consideration"] = nil
	payload["due_condition"] = due
	payload["state"] = "pending"
	return e.newObject("obligation", str(obl["transaction_id"]), mandateID, payload, "object_issuance", now, "")
}

// checkResponse is the obligor's guard of acceptance.granted and
// acceptance.rejected (obligation §5.2, §5.4, §5.5, §6.1): the response
// travels with the event, is the obligee's (rule 1), answers the
// outstanding assertion of an obligation of this transaction by its exact
// content hash (rule 2), and an accept below what is owed carries and names
// its remainder (rule 3), which alters none of the obligation's terms
// (rule 4). The reason code of a rejection, and a response that carries
// terms of its own, are refused by the gate before this runs.
func (e *Engine) checkResponse(ctx context.Context, from, txn string, ev object, support []object, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		et := str(pl(ev)["event_type"])
		limit := map[string]int{"obligation_response": 1, "policy_decision": 1}
		if et == "acceptance.granted" {
			limit["obligation"] = 1 // the remainder of a partial acceptance
		}
		if err := carries(et, support, limit); err != nil {
			return err
		}
		obr, remainder := only(support, "obligation_response"), only(support, "obligation")
		data := sub(pl(ev), "data")
		if obr == nil || idOf(obr) != str(data["obligation_response_id"]) || str(obr["transaction_id"]) != txn {
			return refusef(reason.ObligationResponseHashMismatch, "the event names a response that does not travel with it")
		}
		rp := pl(obr)
		obl, _, err := e.load(ctx, str(rp["obligation_id"]))
		if err != nil || typeOf(obl) != "obligation" || str(data["obligation_id"]) != idOf(obl) || str(obl["transaction_id"]) != txn {
			return refusef(reason.ObligationSubjectUnreferenced, "response %s names an obligation not held here", idOf(obr))
		}
		op := pl(obl)
		if str(sub(op, "obligee")["organization_id"]) != from || str(sub(op, "obligee")["agent_id"]) != str(sub(obr, "created_by")["agent_id"]) {
			return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s responds to it (obligation §5.2 rule 1)", idOf(obl))
		}
		switch rt := str(rp["response_type"]); {
		case rt == "accept" && et == "acceptance.granted", rt == "reject" && et == "acceptance.rejected":
		case rt == "accept" || rt == "reject":
			return refusef(reason.StateTransitionDenied, "a %s response is not recorded as %s", rt, et)
		default:
			return refusef(reason.StateTransitionDenied, "response type %q has no transition in the transaction's state machine under rules %s", rt, RulesVersion)
		}
		st, err := e.obligationState(ctx, txn, idOf(obl))
		if err != nil {
			return err
		}
		last := st.outstanding()
		switch {
		case last == "":
			return refusef(reason.StateTransitionDenied, "obligation %s is %q; only an outstanding assertion is answered, once (obligation §6.1)", idOf(obl), st.State)
		case str(rp["assertion_id"]) == last:
		case slices.Contains(st.Assertions, str(rp["assertion_id"])):
			return refusef(reason.StateTransitionDenied, "assertion %v was answered already; the outstanding assertion of %s is %s", rp["assertion_id"], idOf(obl), last)
		default:
			return refusef(reason.ObligationResponseHashMismatch, "response %s answers %v, which is not an assertion of %s", idOf(obr), rp["assertion_id"], idOf(obl))
		}
		prf, _, err := e.load(ctx, last)
		if err != nil {
			return err
		}
		if str(rp["assertion_hash"]) != hashOf(prf) {
			return refusef(reason.ObligationResponseHashMismatch, "response %s is not bound to assertion %s by its content hash", idOf(obr), last)
		}
		var qty, act string
		if et == "acceptance.granted" {
			act, qty = authority.ActAcceptanceGranted, str(rp["accepted_quantity"])
			acc, err1 := decimal.ParseQuantity(qty)
			asserted, err2 := decimal.ParseQuantity(str(pl(prf)["asserted_quantity"]))
			owed, err3 := decimal.ParseQuantity(str(op["quantity"]))
			if err1 != nil || err2 != nil || err3 != nil || acc.Cmp(asserted) > 0 {
				return refusef(reason.ObligationTermsMutated, "accepted quantity %q is not within the asserted %v", qty, pl(prf)["asserted_quantity"])
			}
			if acc.Cmp(owed) < 0 {
				if err := e.checkRemainder(ctx, txn, obl, remainder, rp, owed.Sub(acc)); err != nil {
					return err
				}
			} else if rp["remainder_obligation_id"] != nil || remainder != nil {
				return refusef(reason.ObligationRemainderMissing, "accepting all that is owed leaves no remainder, and names none")
			}
		} else {
			act, qty = authority.ActAcceptanceRejected, str(pl(prf)["asserted_quantity"])
		}
		return e.checkDecision(ctx, from, ev, pol, act, txn, coreTerms(qty, str(op["unit_code"]), op["consideration"]),
			map[string]any{"assertion_id": last}, nil)
	}
}

// checkRemainder checks the remainder of a partial acceptance (obligation
// §5.2 rules 3 and 4): a new obligation of this transaction, travelling
// with the response that names it, owing the difference want under the
// same agreement and subject, with the obligation's commitment, unit and
// parties, pending, and a consideration that is null or the original's
// unchanged.
func (e *Engine) checkRemainder(ctx context.Context, txn string, obl, rem object, rp map[string]any, want decimal.Decimal) error {
	op := pl(obl)
	if rem == nil || idOf(rem) != str(rp["remainder_obligation_id"]) {
		return refusef(reason.ObligationRemainderMissing, "accepting %v of %v needs a remainder obligation for the difference %s, named by the response and travelling with it", rp["accepted_quantity"], op["quantity"], want)
	}
	mp := pl(rem)
	if _, _, err := e.load(ctx, idOf(rem)); err == nil || str(rem["transaction_id"]) != txn {
		return refusef(reason.ObligationRemainderMissing, "remainder %s is not a new obligation of transaction %s", idOf(rem), txn)
	}
	rq, err := decimal.ParseQuantity(str(mp["quantity"]))
	if err != nil || rq.Cmp(want) != 0 || str(mp["agreement_id"]) != str(op["agreement_id"]) {
		return refusef(reason.ObligationRemainderMissing, "remainder %s does not owe the difference %s under agreement %v", idOf(rem), want, op["agreement_id"])
	}
	subjA, _ := canonical.Marshal(mp["subject"])
	subjB, _ := canonical.Marshal(op["subject"])
	if string(subjA) != string(subjB) {
		return reason.Refuse(fmt.Sprintf("remainder %s owes another subject than %s", idOf(rem), idOf(obl)), reason.ObligationRemainderMissing, reason.ObligationTermsMutated)
	}
	consA, _ := canonical.Marshal(mp["consideration"])
	consB, _ := canonical.Marshal(op["consideration"])
	switch {
	case str(mp["unit_code"]) != str(op["unit_code"]):
		return refusef(reason.ObligationTermsMutated, "remainder %s is owed in %v, the obligation in %v", idOf(rem), mp["unit_code"], op["unit_code"])
	case str(mp["commitment_id"]) != str(op["commitment_id"]):
		return refusef(reason.ObligationTermsMutated, "remainder %s decomposes another commitment than %s", idOf(rem), idOf(obl))
	case !sameParty(sub(mp, "obligor"), sub(op, "obligor")) || !sameParty(sub(mp, "obligee"), sub(op, "obligee")):
		return refusef(reason.ObligationTermsMutated, "remainder %s names other parties than %s", idOf(rem), idOf(obl))
	case mp["consideration"] != nil && string(consA) != string(consB):
		return refusef(reason.ObligationTermsMutated, "remainder %s carries a consideration of its own; it carries none, or the original's unchanged", idOf(rem))
	case str(mp["state"]) != "pending":
		return refusef(reason.StateTransitionDenied, "a remainder is issued pending")
	}
	return nil
}
