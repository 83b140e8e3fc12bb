package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/verify"
)

// The countersigner's rules over disputes, determinations and the
// exception path, each broken by a message built by hand: the sender's
// own act edited in flight and signed again with its valid agent key, so
// that every signature verifies and only the rule is broken. Each is
// refused with its registered code and leaves both records as they were
// (refused). Where the acting side makes the same check (one function), it
// is shown refusing its own act too.

// objectOf returns the id and content hash of an object of type typ made
// by org that sd holds on txn.
func objectOf(t *testing.T, sd *recordtest.Side, txn, typ, org string) (id, hash string) {
	t.Helper()
	for _, raw := range holding(t, sd, txn).Objects {
		o := mustDecode(t, []byte(raw))
		if o["object_type"] == typ && o["created_by"].(map[string]any)["organization_id"] == org {
			return o["id"].(string), o["content_hash"].(string)
		}
	}
	t.Fatalf("%s holds no %s of %s", sd.Node.Org.Config().OrganizationID, typ, org)
	return "", ""
}

// edit returns an in-flight edit of the one object of type typ.
func edit(t *testing.T, typ string, change func(o map[string]any)) func([]map[string]any) []map[string]any {
	return func(objs []map[string]any) []map[string]any {
		change(ofType(t, objs, typ))
		return objs
	}
}

func TestDisputeCountersignerRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := disputing(t)
	rej := responseOf(t, s, txn, obl, "reject")
	evd := evidenceOf(t, s, txn)
	raise := func(in record.DisputeInput) func() error {
		return func() error {
			in.MandateID, in.TransactionID = s.Mandate, txn
			if in.SubjectType == "" {
				in.SubjectType, in.SubjectID = "act", rej
			}
			if in.Grounds == nil {
				in.Grounds = []string{"obligation_wrongly_rejected"}
			}
			if in.EvidenceIDs == nil && in.Evidence == nil {
				in.EvidenceIDs = evd
			}
			_, err := s.Engine.RaiseDispute(ctx, s.Actor(), in)
			return err
		}
	}
	dispute := func(change func(p map[string]any)) func([]map[string]any) []map[string]any {
		return edit(t, "dispute", func(o map[string]any) { change(payloadOf(o)) })
	}
	refused(t, "a subject named by a hash of nothing held", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, s, dispute(func(p map[string]any) {
		p["subject_hash"] = "0000000000000000000000000000000000000000000000000000000000000000"
	}), raise(record.DisputeInput{})))
	refused(t, "a subject of another transaction", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, s, dispute(func(p map[string]any) {
		p["subject_id"] = "rsp_00000000000000000000000000"
	}), raise(record.DisputeInput{})))
	refused(t, "a dispute against a third organisation", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, s, dispute(func(p map[string]any) {
		p["respondent_party"].(map[string]any)["organization_id"] = "org_elsewhere"
	}), raise(record.DisputeInput{})))
	refused(t, "a dispute citing rules not in force at the subject", b, s, txn, reason.DisputeOutOfWindow, tampered(t, s, dispute(func(p map[string]any) {
		p["rules_ref"].(map[string]any)["version"] = "0.0.9"
	}), raise(record.DisputeInput{})))
	refused(t, "a ground off the closed list", b, s, txn, reason.DisputeGroundsUnknown, tampered(t, s, dispute(func(p map[string]any) {
		p["grounds"] = []any{"bad_vibes"}
	}), raise(record.DisputeInput{})))
	refused(t, "a dispute resting on no evidence", b, s, txn, reason.EvidenceUnverified, tampered(t, s, dispute(func(p map[string]any) {
		p["evidence_refs"] = []any{}
	}), raise(record.DisputeInput{})))
	refused(t, "evidence referenced by a wrong hash", b, s, txn, reason.EvidenceUnverified, tampered(t, s, dispute(func(p map[string]any) {
		p["evidence_refs"].([]any)[0].(map[string]any)["content_hash"] = "1111111111111111111111111111111111111111111111111111111111111111"
	}), raise(record.DisputeInput{})))

	refused(t, "a dispute naming another raising party", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, s, dispute(func(p map[string]any) {
		p["raising_party"].(map[string]any)["organization_id"] = "org_northstar"
	}), raise(record.DisputeInput{})))
	prfID, prfHash := objectOf(t, s, txn, "performance_event", "org_delta")
	refused(t, "an obligation_state subject that did not place the obligation's state, in flight", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, s, dispute(func(p map[string]any) {
		p["subject_id"], p["subject_hash"] = prfID, prfHash
	}), raise(record.DisputeInput{SubjectType: "obligation_state", SubjectID: obl})))
	polID, polHash := objectOf(t, s, txn, "policy_decision", "org_northstar")
	refused(t, "a policy decision as an act subject, in flight", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, s, dispute(func(p map[string]any) {
		p["subject_id"], p["subject_hash"] = polID, polHash
	}), raise(record.DisputeInput{})))

	refused(t, "a description naming a third organisation, in flight", b, s, txn, reason.DisclosurePolicyViolation, tampered(t, s, dispute(func(p map[string]any) {
		p["description"] = "org_rival quoted less for the same calibration."
	}), raise(record.DisputeInput{Description: "The certificate covers all twenty."})))

	// The raiser's own checks, the same functions.
	refused(t, "the raiser's own description naming a third organisation", b, s, txn, reason.DisclosurePolicyViolation,
		raise(record.DisputeInput{Description: "org_rival quoted less for the same calibration."}))
	refused(t, "the raiser's own refusal subject (an allow, never a deny, is held)", b, s, txn, reason.DisputeSubjectUnreferenced,
		raise(record.DisputeInput{SubjectType: "refusal", SubjectID: polID, Grounds: []string{"refusal_incorrect"}}))
	refused(t, "the raiser's own appeal of a determination it did not receive", b, s, txn, reason.DisputeSubjectUnreferenced,
		raise(record.DisputeInput{SubjectType: "determination", SubjectID: rej, Grounds: []string{"rule_misapplied"}}))
	refused(t, "the raiser's own unknown ground", b, s, txn, reason.DisputeGroundsUnknown, raise(record.DisputeInput{Grounds: []string{"bad_vibes"}}))
	refused(t, "the raiser's own dispute with no evidence", b, s, txn, reason.EvidenceUnverified, raise(record.DisputeInput{EvidenceIDs: []string{}}))
	refused(t, "the raiser's own unknown subject", b, s, txn, reason.DisputeSubjectUnreferenced, raise(record.DisputeInput{SubjectType: "act", SubjectID: "rsp_00000000000000000000000000"}))

	// Once raised, a second dispute of the same party over the same subject
	// is refused; the respondent may still raise its own.
	if err := raise(record.DisputeInput{})(); err != nil {
		t.Fatal(err)
	}
	refused(t, "a second dispute over the same subject", b, s, txn, reason.StateTransitionDenied, raise(record.DisputeInput{}))

	// Outside the window the rules in force set (168 hours from the
	// subject act), the raiser refuses its own dispute.
	c.Add(169 * time.Hour)
	prf := ""
	for _, o := range holding(t, s, txn).Objects {
		m := mustDecode(t, []byte(o))
		if m["object_type"] == "performance_event" {
			prf = m["id"].(string)
		}
	}
	refused(t, "a dispute out of its window", b, s, txn, reason.DisputeOutOfWindow, raise(record.DisputeInput{SubjectType: "act", SubjectID: prf, Grounds: []string{"evidence_unverified"}}))
	bothVerifyClean(t, b, s, txn)
}

// determinable raises the supplier's dispute over the buyer's rejection
// (an act subject: the rules grant a binding determination) and an
// obligation_state one over the obligation (presumptive at most), which
// opens the exception.
func determinable(t *testing.T) (b, s *recordtest.Side, txn, obl, actDispute, stateDispute string) {
	t.Helper()
	ctx := context.Background()
	b, s, _, txn, obl = disputing(t)
	rej := responseOf(t, s, txn, obl, "reject")
	out, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "act", SubjectID: rej,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil {
		t.Fatal(err)
	}
	actDispute = out.Objects["dispute"]
	out, err = s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
		Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
	if err != nil || out.State != "exception_open" {
		t.Fatalf("%+v %v", out, err)
	}
	return b, s, txn, obl, actDispute, out.Objects["dispute"]
}

const finding = "The rejection is not supported by the certificate presented, which covers all twenty."

// TestOverclaimingDeterminationRefused: the rules grant a determination of
// an obligation's state presumptive effect at most; one claiming binding
// effect is refused by the peer (A202-DETERMINATION-EFFECT-OVERCLAIM),
// as the determiner refuses its own, and so is a state_result under an
// effect that does not bind.
func TestOverclaimingDeterminationRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, txn, obl, _, dsp := determinable(t)
	determine := func(in record.DeterminationInput) func() error {
		return func() error {
			in.MandateID, in.DisputeID = b.Mandate, dsp
			if in.Finding == "" {
				in.Finding = finding
			}
			_, err := b.Engine.IssueDetermination(ctx, b.Actor(), in)
			return err
		}
	}
	determination := func(change func(p map[string]any)) func([]map[string]any) []map[string]any {
		return edit(t, "determination", func(o map[string]any) { change(payloadOf(o)) })
	}
	refused(t, "a binding determination of an obligation's state, in flight", b, s, txn, reason.DeterminationEffectOverclaim, tampered(t, b, determination(func(p map[string]any) {
		p["effect"] = "binding"
	}), determine(record.DeterminationInput{Effect: "presumptive"})))
	refused(t, "the determiner's own overclaim", b, s, txn, reason.DeterminationEffectOverclaim, determine(record.DeterminationInput{Effect: "binding"}))
	refused(t, "a state_result under a presumptive effect, in flight", b, s, txn, reason.DeterminationEffectOverclaim, tampered(t, b, determination(func(p map[string]any) {
		p["outcome"].(map[string]any)["state_result"] = map[string]any{"subject_id": p["question"].(map[string]any)["subject_id"], "state": "accepted"}
	}), determine(record.DeterminationInput{Effect: "presumptive"})))
	refused(t, "inputs_hash not over the inputs, in flight", b, s, txn, reason.DeterminationNotFollowing, tampered(t, b, determination(func(p map[string]any) {
		p["outcome"].(map[string]any)["inputs_hash"] = "2222222222222222222222222222222222222222222222222222222222222222"
	}), determine(record.DeterminationInput{})))
	refused(t, "evidence relied on by a wrong hash, in flight", b, s, txn, reason.EvidenceUnverified, tampered(t, b, determination(func(p map[string]any) {
		p["outcome"].(map[string]any)["evidence_relied_on"].([]any)[0].(map[string]any)["content_hash"] = "4444444444444444444444444444444444444444444444444444444444444444"
	}), determine(record.DeterminationInput{})))
	refused(t, "a question that is not the dispute's, in flight", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, b, determination(func(p map[string]any) {
		p["question"].(map[string]any)["subject_type"] = "act"
	}), determine(record.DeterminationInput{})))
	refused(t, "a determination by the raiser", b, s, txn, reason.DeterminationNotFollowing, func() error {
		_, err := s.Engine.IssueDetermination(ctx, s.Actor(), record.DeterminationInput{MandateID: s.Mandate, DisputeID: dsp, Finding: finding})
		return err
	})
	// The grant itself is delivered, and moves nothing.
	before := []held{holding(t, b, txn), holding(t, s, txn)}
	if out, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: dsp, Finding: finding}); err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("%+v %v", out, err)
	}
	for i, sd := range []*recordtest.Side{b, s} {
		if after := holding(t, sd, txn); after.State != before[i].State || after.Obligations[obl] != "disputed" {
			t.Fatalf("a presumptive determination moved %s: %+v", sd.Node.Org.Config().OrganizationID, after)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestSupersedingDetermination: a later determination of the same
// question supersedes the earlier one with a reason; without one it is
// refused by the peer (A202-DETERMINATION-SUPERSESSION-UNREASONED), as is
// a second determination that supersedes nothing; superseding an already
// superseded determination forks the chain
// (A202-DETERMINATION-SUPERSESSION-FORKED); both remain held.
func TestSupersedingDetermination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, txn, _, dsp, _ := determinable(t)
	determine := func(in record.DeterminationInput) func() (record.Outcome, error) {
		return func() (record.Outcome, error) {
			in.MandateID, in.DisputeID = b.Mandate, dsp
			if in.Finding == "" {
				in.Finding = finding
			}
			return b.Engine.IssueDetermination(ctx, b.Actor(), in)
		}
	}
	errOf := func(f func() (record.Outcome, error)) func() error {
		return func() error { _, err := f(); return err }
	}
	first, err := determine(record.DeterminationInput{Effect: "advisory"})()
	if err != nil {
		t.Fatal(err)
	}
	det1 := first.Objects["determination"]
	supersession := func(change func(sup map[string]any)) func([]map[string]any) []map[string]any {
		return edit(t, "determination", func(o map[string]any) { change(payloadOf(o)["supersedes"].(map[string]any)) })
	}
	refused(t, "a supersession whose reason was dropped in flight", b, s, txn, reason.DeterminationSupersessionUnreasoned, tampered(t, b, supersession(func(sup map[string]any) {
		delete(sup, "reason")
	}), errOf(determine(record.DeterminationInput{Supersedes: det1, SupersessionReason: "corrected_input"}))))
	refused(t, "the determiner's own supersession without a reason", b, s, txn, reason.DeterminationSupersessionUnreasoned,
		errOf(determine(record.DeterminationInput{Supersedes: det1})))
	refused(t, "a supersession of a determination not held, in flight", b, s, txn, reason.DisputeSubjectUnreferenced, tampered(t, b, supersession(func(sup map[string]any) {
		sup["determination_id"] = "det_00000000000000000000000000"
	}), errOf(determine(record.DeterminationInput{Supersedes: det1, SupersessionReason: "corrected_input"}))))
	refused(t, "a second determination superseding nothing", b, s, txn, reason.DeterminationSupersessionUnreasoned,
		errOf(determine(record.DeterminationInput{})))
	second, err := determine(record.DeterminationInput{Supersedes: det1, SupersessionReason: "corrected_input"})()
	if err != nil || second.Status != record.StatusDelivered {
		t.Fatalf("%+v %v", second, err)
	}
	det2 := second.Objects["determination"]
	refused(t, "the determiner's own second supersession of the first", b, s, txn, reason.DeterminationSupersessionForked,
		errOf(determine(record.DeterminationInput{Supersedes: det1, SupersessionReason: "appeal_outcome"})))
	h1 := ""
	for id, o := range holding(t, b, txn).Objects {
		if id == det1 {
			h1 = mustDecode(t, []byte(o))["content_hash"].(string)
		}
	}
	refused(t, "a supersession redirected in flight to the superseded determination", b, s, txn, reason.DeterminationSupersessionForked, tampered(t, b, supersession(func(sup map[string]any) {
		sup["determination_id"], sup["determination_hash"] = det1, h1
	}), errOf(determine(record.DeterminationInput{Supersedes: det2, SupersessionReason: "appeal_outcome"}))))
	for _, sd := range []*recordtest.Side{b, s} {
		objs := holding(t, sd, txn).Objects
		if _, ok := objs[det1]; !ok {
			t.Fatalf("%s no longer holds the superseded determination", sd.Node.Org.Config().OrganizationID)
		}
		if _, ok := objs[det2]; !ok {
			t.Fatalf("%s does not hold the superseding determination", sd.Node.Org.Config().OrganizationID)
		}
		v := stateOf(t, sd, txn)
		shown := map[string]readmodel.DeterminationView{}
		for _, d := range v.Determinations {
			shown[d.DeterminationID] = d
		}
		if shown[det1].SupersededBy != det2 || shown[det2].Supersedes != det1 || shown[det2].SupersessionReason != "corrected_input" || shown[det2].SupersededBy != "" {
			t.Fatalf("%s shows determinations %+v", sd.Node.Org.Config().OrganizationID, v.Determinations)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestDisputedExceptionCountersignerRules: the exception a dispute over
// an obligation's state opens, edited in flight: evidence other than the
// dispute's, or another obligation than the dispute's, is refused.
func TestDisputedExceptionCountersignerRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := disputing(t)
	raise := func() error {
		_, err := s.Engine.RaiseDispute(ctx, s.Actor(), record.DisputeInput{MandateID: s.Mandate, TransactionID: txn, SubjectType: "obligation_state", SubjectID: obl,
			Grounds: []string{"obligation_wrongly_rejected"}, EvidenceIDs: evidenceOf(t, s, txn)})
		return err
	}
	refused(t, "an exception resting on other evidence than its dispute's", b, s, txn, reason.EvidenceUnverified, tampered(t, s, edit(t, "exception", func(o map[string]any) {
		payloadOf(o)["evidence_refs"] = []any{payloadOf(o)["evidence_refs"].([]any)[0].(map[string]any), map[string]any{"evidence_id": "evd_00000000000000000000000000",
			"content_hash": "5555555555555555555555555555555555555555555555555555555555555555", "evidence_type": "third_party_certificate",
			"signed_by": map[string]any{"organization_id": "org_delta"}}}
	}), raise))
	refused(t, "an exception about another obligation, in flight", b, s, txn, reason.ObligationSubjectUnreferenced, tampered(t, s, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "exception"))["obligation_id"] = "obl_00000000000000000000000000"
		payloadOf(ofType(t, objs, "transaction_event"))["data"].(map[string]any)["obligation_id"] = "obl_00000000000000000000000000"
		return objs
	}, raise))
	if err := raise(); err != nil {
		t.Fatal(err)
	}
	bothVerifyClean(t, b, s, txn)
}

// TestDeterminationNeverDeleted: nothing deletes a determination; an event
// that would, signed by the determiner's valid key and placed at the head,
// is refused by the other party (A202-STATE-TRANSITION-DENIED), and both
// records keep it.
func TestDeterminationNeverDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, txn, _, dsp, _ := determinable(t)
	out, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: dsp, Finding: finding})
	if err != nil {
		t.Fatal(err)
	}
	det := out.Objects["determination"]
	evs, err := b.Node.Org.Store.Events(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	head := evs[len(evs)-1]
	raw, err := b.Node.Org.Store.GetObject(ctx, txn, head.EventID)
	if err != nil {
		t.Fatal(err)
	}
	deletion := reseal(t, agentSigner(t, b), [][]byte{raw}, func(objs []map[string]any) []map[string]any {
		id, err := envelope.NewID("evt")
		if err != nil {
			t.Fatal(err)
		}
		p := payloadOf(objs[0])
		objs[0]["id"] = id
		p["sequence"], p["previous_event_hash"] = head.Sequence+1, head.ContentHash
		p["event_type"], p["from_state"], p["to_state"] = "determination.deleted", head.ToState, head.ToState
		p["data"] = map[string]any{"determination_id": det}
		return objs
	})
	refused(t, "a determination.deleted event", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(deletion))
		return err
	})
	for _, sd := range []*recordtest.Side{b, s} {
		if _, ok := holding(t, sd, txn).Objects[det]; !ok {
			t.Fatalf("%s no longer holds the determination", sd.Node.Org.Config().OrganizationID)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestExceptionCountersignerRules: the exception path's messages, each
// edited in flight and signed again with the sender's agent key, are
// refused by the countersigner with their codes, leaving both records as
// they were; then the path runs on clean.
func TestExceptionCountersignerRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := failedPayment(t)
	open := func() error {
		_, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn})
		return err
	}
	refused(t, "an exception naming another receipt than the failed one", b, s, txn, reason.SettlementReceiptUnmatched, tampered(t, s, edit(t, "exception", func(o map[string]any) {
		payloadOf(o)["adapter_receipt_id"] = "adp_00000000000000000000000000"
	}), open))
	refused(t, "exception.opened naming another agreement, in flight", b, s, txn, reason.StateTransitionDenied, tampered(t, s, edit(t, "transaction_event", func(o map[string]any) {
		payloadOf(o)["data"].(map[string]any)["agreement_id"] = "agr_00000000000000000000000000"
	}), open))
	refused(t, "an exception over a failed settlement carrying a dispute, in flight", b, s, txn, reason.StateTransitionDenied, tampered(t, s, edit(t, "exception", func(o map[string]any) {
		payloadOf(o)["dispute_id"] = "dsp_00000000000000000000000000"
	}), open))
	if err := open(); err != nil {
		t.Fatal(err)
	}
	act := func(f func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error), sd *recordtest.Side) func() error {
		return func() error {
			_, err := f(ctx, sd.Actor(), record.ExceptionActInput{MandateID: sd.Mandate, TransactionID: txn})
			return err
		}
	}
	refused(t, "the exception resolved by the party that did not open it", b, s, txn, reason.StateTransitionDenied, act(b.Engine.ResolveException, b))
	refused(t, "exception.resolved naming another exception, in flight", b, s, txn, reason.StateTransitionDenied, tampered(t, s, edit(t, "transaction_event", func(o map[string]any) {
		payloadOf(o)["data"].(map[string]any)["exception_id"] = "exc_00000000000000000000000000"
	}), act(s.Engine.ResolveException, s)))
	refused(t, "transaction.terminated naming another exception, in flight", b, s, txn, reason.StateTransitionDenied, tampered(t, b, edit(t, "transaction_event", func(o map[string]any) {
		payloadOf(o)["data"].(map[string]any)["exception_id"] = "exc_00000000000000000000000000"
	}), act(b.Engine.TerminateTransaction, b)))
	refused(t, "a termination signed over another record, in flight", b, s, txn, reason.EvidenceSignatureInvalid, tampered(t, b, edit(t, "evidence", func(o map[string]any) {
		payloadOf(o)["artifact_hash"] = "3333333333333333333333333333333333333333333333333333333333333333"
	}), act(b.Engine.TerminateTransaction, b)))
	if err := act(s.Engine.ProposeRemediation, s)(); err != nil {
		t.Fatal(err)
	}
	refused(t, "an acceptance signed over another remediation record, in flight", b, s, txn, reason.EvidenceSignatureInvalid, tampered(t, b, edit(t, "evidence", func(o map[string]any) {
		payloadOf(o)["artifact_hash"] = "6666666666666666666666666666666666666666666666666666666666666666"
	}), act(b.Engine.AcceptRemediation, b)))
	refused(t, "remediation.accepted naming another exception, in flight", b, s, txn, reason.StateTransitionDenied, tampered(t, b, edit(t, "transaction_event", func(o map[string]any) {
		payloadOf(o)["data"].(map[string]any)["exception_id"] = "exc_00000000000000000000000000"
	}), act(b.Engine.AcceptRemediation, b)))
	refused(t, "a remediation obligation owing less than the duty, in flight", b, s, txn, reason.ObligationTermsMutated, tampered(t, b, edit(t, "obligation", func(o map[string]any) {
		payloadOf(o)["quantity"] = "19"
	}), act(b.Engine.AcceptRemediation, b)))
	refused(t, "a remediation obligation with a consideration of its own, in flight", b, s, txn, reason.ObligationTermsMutated, tampered(t, b, edit(t, "obligation", func(o map[string]any) {
		payloadOf(o)["consideration"] = map[string]any{"currency": "EUR", "amount": "3200.00"}
	}), act(b.Engine.AcceptRemediation, b)))
	if err := act(b.Engine.AcceptRemediation, b)(); err != nil {
		t.Fatal(err)
	}
	if st := obligationStates(t, s, txn); st[obl] != "accepted" {
		t.Fatalf("the remediated obligation moved: %v", st)
	}
	bothVerifyClean(t, b, s, txn)
}

// TestForkRaisedAsDispute (pilot state machine §8.1): the buyer signs a
// second successor of the committed record's second event; the supplier
// refuses and keeps it, then raises the fork as a dispute over the last
// event both chains share, with both chains as evidence. The buyer holds
// the dispute and its evidence; nothing moves; both records verify.
func TestForkRaisedAsDispute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, _ := committed(t)
	s.Mandate = mandateFor(t, s, c, disputeActs, nil)
	evs, err := b.Node.Org.Store.Events(ctx, txn)
	if err != nil || len(evs) != 3 {
		t.Fatalf("%d events: %v", len(evs), err)
	}
	raw, err := b.Node.Org.Store.GetObject(ctx, txn, evs[2].EventID)
	if err != nil {
		t.Fatal(err)
	}
	// A conflicting third event: the buyer's obligation.activated again,
	// under another id, signed with the buyer's own agent key.
	forged := reseal(t, agentSigner(t, b), [][]byte{raw}, func(objs []map[string]any) []map[string]any {
		id, err := envelope.NewID("evt")
		if err != nil {
			t.Fatal(err)
		}
		objs[0]["id"] = id
		return objs
	})
	if _, err := s.Engine.Receive(ctx, "org_northstar", txn, delivery.Raw(forged)); err == nil {
		t.Fatal("the fork was accepted")
	}
	forks, err := s.Node.Org.Store.Forks(ctx, txn)
	if err != nil || len(forks) != 1 || forks[0].Sequence != 3 {
		t.Fatalf("forks kept: %+v %v", forks, err)
	}
	// Nothing to raise where no fork is kept.
	refused(t, "a fork dispute where no fork is held", b, s, txn, reason.DisputeSubjectUnreferenced, func() error {
		_, err := b.Engine.RaiseForkDispute(ctx, b.Actor(), record.ForkDisputeInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	})
	before := []held{holding(t, b, txn), holding(t, s, txn)}
	out, err := s.Engine.RaiseForkDispute(ctx, s.Actor(), record.ForkDisputeInput{MandateID: s.Mandate, TransactionID: txn})
	if err != nil || out.Status != record.StatusDelivered || out.State != "in_performance" {
		t.Fatalf("raise the fork: %+v %v", out, err)
	}
	for i, sd := range []*recordtest.Side{b, s} {
		after := holding(t, sd, txn)
		if after.State != before[i].State || after.Head != before[i].Head {
			t.Fatalf("raising the fork moved %s's record", sd.Node.Org.Config().OrganizationID)
		}
		o, ok := after.Objects[out.Objects["dispute"]]
		if !ok {
			t.Fatalf("%s does not hold the fork's dispute", sd.Node.Org.Config().OrganizationID)
		}
		p := payloadOf(mustDecode(t, []byte(o)))
		if p["subject_id"] != evs[1].EventID || len(p["evidence_refs"].([]any)) != 2 {
			t.Fatalf("%s: the fork's dispute is %v", sd.Node.Org.Config().OrganizationID, p)
		}
		if g := p["grounds"].([]any); len(g) != 1 || g[0] != "state_transition_invalid" {
			t.Fatalf("grounds %v", g)
		}
	}
	bothVerifyClean(t, b, s, txn)
}

// TestVerifierJudgesDisputesAndExceptions: a third party's verifier
// decides "outcome follows" wherever a determination's inputs are in the
// bundle, and the remediation's two signatures, from the bundle alone.
func TestVerifierJudgesDisputesAndExceptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("determination", func(t *testing.T) {
		t.Parallel()
		b, s, txn, _, dsp, _ := determinable(t)
		out, err := b.Engine.IssueDetermination(ctx, b.Actor(), record.DeterminationInput{MandateID: b.Mandate, DisputeID: dsp, Finding: finding})
		if err != nil {
			t.Fatal(err)
		}
		det := out.Objects["determination"]
		in := bundleOf(t, s, txn)
		var subject string
		var edited []map[string]any
		for _, o := range in.Objects {
			if o["id"] == dsp {
				subject = payloadOf(o)["subject_id"].(string)
			}
			if o["id"] != det {
				edited = append(edited, o)
				continue
			}
			raw, err := canonical.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			forged := reseal(t, agentSigner(t, b), [][]byte{raw}, func(objs []map[string]any) []map[string]any {
				payloadOf(objs[0])["outcome"].(map[string]any)["inputs_hash"] = "7777777777777777777777777777777777777777777777777777777777777777"
				return objs
			})
			edited = append(edited, mustDecode(t, forged[0]))
		}
		rep := verify.Verify(verify.Input{Objects: edited, Mandates: in.Mandates, Keys: in.Keys}, verify.Options{RulesVersion: record.RulesVersion})
		if !failedWith(rep, "determination_finding", reason.DeterminationNotFollowing) {
			t.Fatalf("an inputs_hash over other inputs: %+v", checksNamed(rep, "determination_finding"))
		}
		// With the subject withheld, whether the outcome follows is not
		// checkable, never verified.
		var withheld []map[string]any
		for _, o := range in.Objects {
			if o["id"] != subject {
				withheld = append(withheld, o)
			}
		}
		rep = verify.Verify(verify.Input{Objects: withheld, Mandates: in.Mandates, Keys: in.Keys, Disclosure: &verify.Disclosure{StatedGaps: []string{subject}}},
			verify.Options{RulesVersion: record.RulesVersion})
		found := false
		for _, c := range checksNamed(rep, "determination_finding") {
			if c.Subject == det {
				found = true
				if c.Result != verify.NotCheckable {
					t.Fatalf("the finding with its subject withheld: %+v", c)
				}
			}
		}
		if !found {
			t.Fatal("no determination_finding check of the determination")
		}
	})
	t.Run("remediation", func(t *testing.T) {
		t.Parallel()
		b, s, _, txn, _ := failedPayment(t)
		act := func(f func(context.Context, record.Actor, record.ExceptionActInput) (record.Outcome, error), sd *recordtest.Side) {
			t.Helper()
			if _, err := f(ctx, sd.Actor(), record.ExceptionActInput{MandateID: sd.Mandate, TransactionID: txn}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Engine.OpenException(ctx, s.Actor(), record.ExceptionInput{MandateID: s.Mandate, TransactionID: txn}); err != nil {
			t.Fatal(err)
		}
		act(s.Engine.ProposeRemediation, s)
		act(b.Engine.AcceptRemediation, b)
		in := bundleOf(t, b, txn)
		if rep := verify.Verify(in, verify.Options{RulesVersion: record.RulesVersion}); len(checksNamed(rep, "remediation_signatures")) == 0 || rep.Results.Failed != 0 {
			t.Fatalf("the remediated record: %+v", rep.Results)
		}
		var fewer []map[string]any
		for _, o := range in.Objects {
			p, _ := o["payload"].(map[string]any)
			by, _ := o["created_by"].(map[string]any)
			if o["object_type"] == "evidence" && p["evidence_type"] == "signed_document" && by["organization_id"] == "org_delta" {
				continue
			}
			fewer = append(fewer, o)
		}
		rep := verify.Verify(verify.Input{Objects: fewer, Mandates: in.Mandates, Keys: in.Keys}, verify.Options{RulesVersion: record.RulesVersion})
		if !failedWith(rep, "remediation_signatures", reason.EvidenceSignatureInvalid) {
			t.Fatalf("the obligee's signature alone: %+v", checksNamed(rep, "remediation_signatures"))
		}
	})
}
