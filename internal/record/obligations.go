package record

import (
	"context"
	"fmt"
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
	// ResponseType is accept or reject.
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
	obl, oblRaw, err := e.newObject("obligation", t.ID, in.MandateID, payload, "object_issuance", now, "")
	if err != nil {
		return Outcome{}, refusef(reason.ObligationConditionUnknown, "%v", err)
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

// obligationState derives an obligation's state from the recorded events
// (obligation §6.1): the record, not the obligation object's own state
// member, says where a duty stands (spec-map C13).
func (e *Engine) obligationState(ctx context.Context, txn, oblID string) (string, string, error) {
	evs, err := e.o.Store.Events(ctx, txn)
	if err != nil {
		return "", "", err
	}
	state, lastAssertion := "", ""
	for _, x := range evs {
		if x.Status != store.EventRecorded {
			continue
		}
		ev, _, err := e.load(ctx, x.EventID)
		if err != nil {
			return "", "", err
		}
		d := sub(pl(ev), "data")
		if str(d["obligation_id"]) != oblID {
			continue
		}
		switch x.EventType {
		case "obligation.activated":
			state = "pending"
		case "performance.declared":
			state, lastAssertion = "asserted", str(d["performance_event_id"])
		case "acceptance.granted":
			state = "accepted"
		case "acceptance.rejected":
			state = "rejected"
		}
	}
	return state, lastAssertion, nil
}

func (e *Engine) checkObligationActivated(ctx context.Context, from, txn string, ev, obl, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		if obl == nil || idOf(obl) != str(sub(pl(ev), "data")["obligation_id"]) {
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
		case str(sub(op, "obligee")["organization_id"]) != from || !sameParty(sub(op, "obligor"), me):
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

// AssertPerformance presents the obligor's evidence and assertion and
// appends performance.declared (in_performance → acceptance_pending).
func (e *Engine) AssertPerformance(ctx context.Context, in AssertInput) (Outcome, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	obl, _, err := e.load(ctx, in.ObligationID)
	if err != nil || typeOf(obl) != "obligation" {
		return Outcome{}, refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not held here", in.ObligationID)
	}
	txn := str(obl["transaction_id"])
	unlock := e.lock(txn)
	defer unlock()
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	cfg := e.o.Config()
	op := pl(obl)
	if !sameParty(sub(op, "obligor"), party(cfg.OrganizationID, cfg.AgentID)) {
		return Outcome{}, refusef(reason.ObligationResponseUnauthorized, "only the obligor asserts performance of %s", in.ObligationID)
	}
	if st, _, err := e.obligationState(ctx, txn, in.ObligationID); err != nil {
		return Outcome{}, err
	} else if st != "pending" && st != "rejected" {
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s is %s; performance is declared when pending or after a rejection", in.ObligationID, st)
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
			return Outcome{}, refusef(reason.EvidenceTypeUnknown, "evidence: %v", err)
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
		return Outcome{}, refusef(reason.ObligationAssertionUnevidenced, "%v", err)
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

func (e *Engine) checkPerformanceDeclared(ctx context.Context, from, txn string, ev, prf object, evidence []object, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		data := sub(pl(ev), "data")
		if prf == nil || idOf(prf) != str(data["performance_event_id"]) {
			return refusef(reason.ObligationAssertionUnevidenced, "performance.declared names an assertion that does not travel with it")
		}
		pp := pl(prf)
		obl, _, err := e.load(ctx, str(pp["obligation_id"]))
		if err != nil || typeOf(obl) != "obligation" || str(data["obligation_id"]) != idOf(obl) {
			return refusef(reason.ObligationSubjectUnreferenced, "assertion %s names obligation %v, which is not held here", idOf(prf), pp["obligation_id"])
		}
		op := pl(obl)
		if str(sub(op, "obligor")["organization_id"]) != from || str(sub(op, "obligor")["agent_id"]) != str(sub(prf, "created_by")["agent_id"]) {
			return refusef(reason.ObligationResponseUnauthorized, "only the obligor of %s asserts its performance", idOf(obl))
		}
		if str(pp["unit_code"]) != str(op["unit_code"]) {
			return refusef(reason.ObligationTermsMutated, "the assertion's unit %v is not the obligation's %v", pp["unit_code"], op["unit_code"])
		}
		st, _, err := e.obligationState(ctx, txn, idOf(obl))
		if err != nil {
			return err
		}
		if st != "pending" && st != "rejected" {
			return refusef(reason.StateTransitionDenied, "obligation %s is %s; performance is declared when pending or after a rejection", idOf(obl), st)
		}
		refs, _ := pp["evidence_refs"].([]any)
		if len(refs) == 0 {
			return refusef(reason.ObligationAssertionUnevidenced, "assertion %s carries no evidence reference", idOf(prf))
		}
		byID := map[string]object{}
		for _, x := range evidence {
			byID[idOf(x)] = x
		}
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
		}
		return e.checkDecision(ctx, from, ev, pol, authority.ActPerformanceDeclared, txn,
			coreTerms(str(pp["asserted_quantity"]), str(pp["unit_code"]), op["consideration"]), map[string]any{"obligation_id": idOf(obl)}, nil)
	}
}

// Respond answers the latest assertion of an obligation: accept
// (acceptance.granted → settlement_pending) or reject with a registered
// reason (acceptance.rejected → in_performance, after which the obligor may
// assert again). Accepting less than owed issues the remainder obligation.
func (e *Engine) Respond(ctx context.Context, in RespondInput) (Outcome, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	obl, _, err := e.load(ctx, in.ObligationID)
	if err != nil || typeOf(obl) != "obligation" {
		return Outcome{}, refusef(reason.ObligationSubjectUnreferenced, "obligation %s is not held here", in.ObligationID)
	}
	txn := str(obl["transaction_id"])
	unlock := e.lock(txn)
	defer unlock()
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	cfg := e.o.Config()
	op := pl(obl)
	if !sameParty(sub(op, "obligee"), party(cfg.OrganizationID, cfg.AgentID)) {
		return Outcome{}, refusef(reason.ObligationResponseUnauthorized, "only the obligee answers an assertion of %s", in.ObligationID)
	}
	st, last, err := e.obligationState(ctx, txn, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	if st != "asserted" {
		return Outcome{}, refusef(reason.StateTransitionDenied, "obligation %s is %s; only an assertion is answered", in.ObligationID, st)
	}
	prf, _, err := e.load(ctx, last)
	if err != nil {
		return Outcome{}, err
	}
	if in.AssertionID != "" && in.AssertionID != last {
		return Outcome{}, refusef(reason.ObligationResponseHashMismatch, "assertion %s is not the latest assertion of %s (%s)", in.AssertionID, in.ObligationID, last)
	}
	if in.AssertionHash != "" && in.AssertionHash != hashOf(prf) {
		return Outcome{}, refusef(reason.ObligationResponseHashMismatch, "assertion_hash %s is not the hash of %s (%s)", in.AssertionHash, last, hashOf(prf))
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
				return Outcome{}, err
			}
			remainderID = idOf(rem)
			payload["remainder_obligation_id"] = remainderID
			created = append(created, remRaw)
		}
	case "reject":
		eventType, actType = "acceptance.rejected", authority.ActAcceptanceRejected
		qty = str(pl(prf)["asserted_quantity"])
		if in.ReasonCode == "" {
			return Outcome{}, refusef(reason.ObligationRejectionReasonUnknown, "a rejection states a registered reason_code")
		}
		payload["reason_code"] = in.ReasonCode
	default:
		return Outcome{}, reason.Refuse(fmt.Sprintf("response_type %q: use accept or reject (a waiver has no transaction transition to record; see docs)", in.ResponseType))
	}
	pol, polRaw, _, err := e.ownDecision(ctx, m, actType, txn, t.Counterparty, coreTerms(qty, str(op["unit_code"]), consideration),
		map[string]any{"assertion_id": last}, nil, t.HeadSequence+1)
	if err != nil {
		return Outcome{}, err
	}
	obr, obrRaw, err := e.newObject("obligation_response", txn, in.MandateID, payload, "object_issuance", now, "")
	if err != nil {
		if in.ResponseType == "reject" {
			return Outcome{}, refusef(reason.ObligationRejectionReasonUnknown, "%v", err)
		}
		return Outcome{}, err
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
// acceptance: the same agreement, commitment, subject, unit and parties,
// the difference as quantity, no consideration of its own (the agreement's
// total stays on the original duty).
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

func (e *Engine) checkResponse(ctx context.Context, from, txn string, ev, obr, remainder, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		data := sub(pl(ev), "data")
		if obr == nil || idOf(obr) != str(data["obligation_response_id"]) {
			return refusef(reason.ObligationResponseHashMismatch, "the event names a response that does not travel with it")
		}
		rp := pl(obr)
		obl, _, err := e.load(ctx, str(rp["obligation_id"]))
		if err != nil || typeOf(obl) != "obligation" || str(data["obligation_id"]) != idOf(obl) {
			return refusef(reason.ObligationSubjectUnreferenced, "response %s names an obligation not held here", idOf(obr))
		}
		op := pl(obl)
		if str(sub(op, "obligee")["organization_id"]) != from || str(sub(op, "obligee")["agent_id"]) != str(sub(obr, "created_by")["agent_id"]) {
			return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s answers its assertions", idOf(obl))
		}
		st, last, err := e.obligationState(ctx, txn, idOf(obl))
		if err != nil {
			return err
		}
		if st != "asserted" {
			return refusef(reason.StateTransitionDenied, "obligation %s is %s; only an assertion is answered", idOf(obl), st)
		}
		prf, _, err := e.load(ctx, last)
		if err != nil {
			return err
		}
		if str(rp["assertion_id"]) != last || str(rp["assertion_hash"]) != hashOf(prf) {
			return refusef(reason.ObligationResponseHashMismatch, "response %s is not bound to the latest assertion %s by its hash", idOf(obr), last)
		}
		et := str(pl(ev)["event_type"])
		var qty, act string
		switch str(rp["response_type"]) {
		case "accept":
			if et != "acceptance.granted" {
				return refusef(reason.StateTransitionDenied, "an accept is recorded as acceptance.granted")
			}
			act, qty = authority.ActAcceptanceGranted, str(rp["accepted_quantity"])
			acc, err1 := decimal.ParseQuantity(qty)
			asserted, err2 := decimal.ParseQuantity(str(pl(prf)["asserted_quantity"]))
			owed, err3 := decimal.ParseQuantity(str(op["quantity"]))
			if err1 != nil || err2 != nil || err3 != nil || acc.Cmp(asserted) > 0 {
				return refusef(reason.ObligationTermsMutated, "accepted quantity %q is not within the asserted %v", qty, pl(prf)["asserted_quantity"])
			}
			if acc.Cmp(owed) < 0 {
				want := owed.Sub(acc)
				if remainder == nil || idOf(remainder) != str(rp["remainder_obligation_id"]) {
					return refusef(reason.ObligationRemainderMissing, "accepting %s of %s needs a remainder obligation for the difference", qty, op["quantity"])
				}
				mp := pl(remainder)
				rq, err := decimal.ParseQuantity(str(mp["quantity"]))
				subjA, _ := canonical.Marshal(mp["subject"])
				subjB, _ := canonical.Marshal(op["subject"])
				if err != nil || rq.Cmp(want) != 0 || str(mp["agreement_id"]) != str(op["agreement_id"]) {
					return refusef(reason.ObligationRemainderMissing, "remainder %s does not owe the difference %s under the same agreement", idOf(remainder), want)
				}
				if string(subjA) != string(subjB) || str(mp["unit_code"]) != str(op["unit_code"]) || !sameParty(sub(mp, "obligor"), sub(op, "obligor")) || !sameParty(sub(mp, "obligee"), sub(op, "obligee")) {
					return refusef(reason.ObligationTermsMutated, "remainder %s changes the subject, unit or parties", idOf(remainder))
				}
			} else if rp["remainder_obligation_id"] != nil {
				return refusef(reason.ObligationRemainderMissing, "a full acceptance names no remainder")
			}
		case "reject":
			if et != "acceptance.rejected" {
				return refusef(reason.StateTransitionDenied, "a reject is recorded as acceptance.rejected")
			}
			act, qty = authority.ActAcceptanceRejected, str(pl(prf)["asserted_quantity"])
		default:
			return refusef(reason.StateTransitionDenied, "response type %v has no transaction transition", rp["response_type"])
		}
		return e.checkDecision(ctx, from, ev, pol, act, txn, coreTerms(qty, str(op["unit_code"]), op["consideration"]),
			map[string]any{"assertion_id": last}, nil)
	}
}
