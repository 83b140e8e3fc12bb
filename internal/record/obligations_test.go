package record_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// The obligation exchange between the two instances (obligation §5–§7),
// past the walkthrough of record_test.go: partial acceptance with its
// remainder, rejection and a second assertion, every refusal code both at
// the acting instance and at the countersigner (with a message forged but
// correctly signed), and the obligation state table, each refusal leaving
// both records exactly as they were.

// evidence is one evidence item for an assertion.
func evidence(claim string) []record.EvidenceInput {
	return []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: claim, ArtifactHash: canonical.SHA256Hex([]byte(claim))}}
}

// committed forms the walkthrough's transaction and issues the supplier's
// obligation: 3 events, in_performance.
func committed(t *testing.T) (b, s *recordtest.Side, c *recordtest.Clock, txn, obl string) {
	t.Helper()
	b, s, c = recordtest.Pair(t)
	txn = recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(context.Background(), b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.State != "in_performance" || out.Status != "recorded" {
		t.Fatalf("issue: %+v %v", out, err)
	}
	return b, s, c, txn, out.Objects["obligation"]
}

func assertPerformance(t *testing.T, s *recordtest.Side, obl, qty string) record.Outcome {
	t.Helper()
	out, err := s.Engine.AssertPerformance(context.Background(), s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, AssertedQuantity: qty,
		Evidence: evidence("calibration certificates, " + qty + " transmitters")})
	if err != nil || out.State != "acceptance_pending" || out.Status != "recorded" {
		t.Fatalf("assert %s: %+v %v", qty, out, err)
	}
	return out
}

// held is everything one side holds of a transaction: where it stands,
// every event row (pending ones included), every object of it, and where
// each of its obligations stands.
type held struct {
	State       string
	Head        int
	Hash        string
	Events      []store.Event
	Objects     map[string]string
	Obligations map[string]string
}

func holding(t *testing.T, sd *recordtest.Side, txn string) held {
	t.Helper()
	ctx := context.Background()
	st := sd.Node.Org.Store
	tx, err := st.GetTransaction(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	h := held{State: tx.State, Head: tx.HeadSequence, Hash: tx.HeadHash, Events: evs, Objects: map[string]string{}}
	all, err := st.TransactionObjects(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"policy_decision", "evidence", "obligation", "performance_event", "obligation_response", "transaction_event", "dispute", "determination", "exception"} {
		more, err := st.ObjectsOfType(ctx, typ)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, more...)
	}
	for _, b := range all {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		h.Objects[o["id"].(string)] = string(b)
	}
	obls, err := st.ObligationStates(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	h.Obligations = map[string]string{}
	for _, o := range obls {
		h.Obligations[o.ObligationID] = o.State
	}
	return h
}

// refused runs act, which must be refused with exactly the code want, and
// checks that neither record moved: the same state and head, the same
// event rows, none pending (the appender removed its pending act), and the
// same objects, byte for byte, on both sides.
func refused(t *testing.T, what string, b, s *recordtest.Side, txn string, want reason.Code, act func() error) {
	t.Helper()
	refusedIf(t, what, b, s, txn, string(want), func(err error) bool {
		return slices.Equal(reason.CodesOf(err), []reason.Code{want})
	}, act)
}

// refusedSaying is refused for a refusal that carries no registered code
// (a message that is not one the countersigner understands) and whose
// detail contains detail.
func refusedSaying(t *testing.T, what string, b, s *recordtest.Side, txn string, detail string, act func() error) {
	t.Helper()
	refusedIf(t, what, b, s, txn, "a refusal saying "+detail, func(err error) bool {
		return errors.Is(err, reason.ErrRefused) && len(reason.CodesOf(err)) == 0 && strings.Contains(err.Error(), detail)
	}, act)
}

func refusedIf(t *testing.T, what string, b, s *recordtest.Side, txn, want string, ok func(error) bool, act func() error) {
	t.Helper()
	unchanged(t, what+" (want "+want+")", b, s, txn, ok, act)
	for _, sd := range []*recordtest.Side{b, s} {
		for _, e := range holding(t, sd, txn).Events {
			if e.Status != store.EventRecorded {
				t.Fatalf("%s: %s holds event %d %s", what, sd.Node.Org.Config().OrganizationID, e.Sequence, e.Status)
			}
		}
	}
}

func payloadOf(o map[string]any) map[string]any { return o["payload"].(map[string]any) }

// ofType returns the one object of type typ in objs.
func ofType(t *testing.T, objs []map[string]any, typ string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, o := range objs {
		if o["object_type"] == typ {
			if found != nil {
				t.Fatalf("two %s objects", typ)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s object", typ)
	}
	return found
}

func without(objs []map[string]any, typ string) []map[string]any {
	return slices.DeleteFunc(objs, func(o map[string]any) bool { return o["object_type"] == typ })
}

// reseal decodes a message, lets edit change its objects, and seals and
// signs again, with signer and each object's first signature's purpose
// and time, every object edit changed: a forged message whose every
// signature verifies.
func reseal(t *testing.T, signer signature.Signer, raw [][]byte, edit func([]map[string]any) []map[string]any) [][]byte {
	t.Helper()
	orig := map[string][]byte{}
	var objs []map[string]any
	for _, b := range raw {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		orig[o["id"].(string)] = b
		objs = append(objs, o)
	}
	var out [][]byte
	for _, o := range edit(objs) {
		b, err := canonical.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, orig[o["id"].(string)]) {
			purpose, at := "object_issuance", time.Now()
			if sigs, _ := o["signatures"].([]any); len(sigs) > 0 {
				first := sigs[0].(map[string]any)
				purpose = first["purpose"].(string)
				if at, err = envelope.ParseTimestamp(first["signed_at"].(string)); err != nil {
					t.Fatal(err)
				}
			}
			o["signatures"] = []any{}
			if err := envelope.Seal(o); err != nil {
				t.Fatal(err)
			}
			if err := signature.Sign(o, signer, purpose, at); err != nil {
				t.Fatal(err)
			}
			if b, err = canonical.Marshal(o); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, b)
	}
	return out
}

func agentSigner(t *testing.T, sd *recordtest.Side) signature.Signer {
	t.Helper()
	s, err := sd.Node.Org.AgentSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inFlight makes sd's next messages arrive edited and re-signed with sd's
// own agent key, until the returned function removes the hook.
func inFlight(t *testing.T, sd *recordtest.Side, edit func([]map[string]any) []map[string]any) func() {
	signer := agentSigner(t, sd)
	sd.Out.Tamper(func(raw [][]byte) [][]byte { return reseal(t, signer, raw, edit) })
	return func() { sd.Out.Tamper(nil) }
}

// tampered runs act with sd's outgoing messages edited in flight.
func tampered(t *testing.T, sd *recordtest.Side, edit func([]map[string]any) []map[string]any, act func() error) func() error {
	return func() error {
		defer inFlight(t, sd, edit)()
		return act()
	}
}

func TestPartialAcceptanceIssuesRemainder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	prf := assertPerformance(t, s, obl, "20")
	accept := func() (record.Outcome, error) {
		return b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15",
			AssertionID: prf.Objects["performance_event"], AssertionHash: prf.Objects["assertion_hash"]})
	}
	// The supplier checks the remainder that travels with the response: one
	// owing other than the difference is refused, and nothing is kept.
	refused(t, "a remainder owing 4 of the 5 short", b, s, txn, reason.ObligationRemainderMissing, tampered(t, b, func(objs []map[string]any) []map[string]any {
		payloadOf(ofType(t, objs, "obligation"))["quantity"] = "4"
		return objs
	}, func() error { _, err := accept(); return err }))

	out, err := accept()
	if err != nil || out.State != "settlement_pending" || out.Status != "recorded" {
		t.Fatalf("accept 15 of 20: %+v %v", out, err)
	}
	rem := out.Objects["remainder_obligation"]
	if rem == "" {
		t.Fatal("a partial acceptance issued no remainder")
	}
	types := recordtest.SameRecord(t, b, s, txn, 5)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted"}) {
		t.Fatalf("events %v", types)
	}
	// Both records hold the same response, the same remainder and the
	// untouched original, byte for byte.
	load := func(sd *recordtest.Side, id string) map[string]any {
		raw, err := sd.Node.Org.Store.GetObject(ctx, txn, id)
		if err != nil {
			t.Fatalf("%s does not hold %s: %v", sd.Node.Org.Config().OrganizationID, id, err)
		}
		o, _ := canonical.DecodeObject(raw)
		return o
	}
	for _, id := range []string{out.Objects["obligation_response"], rem, obl} {
		bb, _ := b.Node.Org.Store.GetObject(ctx, txn, id)
		sb, _ := s.Node.Org.Store.GetObject(ctx, txn, id)
		if bb == nil || !bytes.Equal(bb, sb) {
			t.Fatalf("%s differs between the records", id)
		}
	}
	obr := payloadOf(load(s, out.Objects["obligation_response"]))
	if obr["response_type"] != "accept" || obr["accepted_quantity"] != "15" || obr["remainder_obligation_id"] != rem ||
		obr["assertion_hash"] != prf.Objects["assertion_hash"] {
		t.Fatalf("response %v", obr)
	}
	remObj, orig := load(s, rem), load(s, obl)
	rp, op := payloadOf(remObj), payloadOf(orig)
	// The remainder keeps the share of the consideration not accepted: 5
	// of 20 units of 3200.00 EUR, 800.00 (the accepted 15 are 2400.00).
	if remObj["transaction_id"] != txn || rp["quantity"] != "5" || rp["state"] != "pending" || op["quantity"] != "20" ||
		fmt.Sprint(rp["consideration"]) != "map[amount:800.00 currency:EUR]" {
		t.Fatalf("remainder %v of %v", rp, op)
	}
	for _, k := range []string{"agreement_id", "commitment_id", "subject", "unit_code", "obligor", "obligee"} {
		if !reflect.DeepEqual(rp[k], op[k]) {
			t.Fatalf("the remainder's %s is %v, the obligation's %v", k, rp[k], op[k])
		}
	}

	// What the rules allow next: the remainder is pending, but the
	// transaction is settlement_pending, from which rules 1.3 give no
	// performance.declared; nothing answers it either.
	refused(t, "asserting the remainder from settlement_pending", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: rem, Evidence: evidence("the other 5")})
		return err
	})
	refused(t, "answering the remainder, never asserted", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: rem, ResponseType: "accept"})
		return err
	})
	refused(t, "asserting the accepted obligation again", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence("again")})
		return err
	})
	recordtest.SameRecord(t, b, s, txn, 5)
}

func TestRejectionThenSecondAssertionAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	first := assertPerformance(t, s, obl, "15")
	out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "quantity_short"})
	if err != nil || out.State != "in_performance" || out.Status != "recorded" {
		t.Fatalf("reject: %+v %v", out, err)
	}
	rejection := out.Objects["obligation_response"]
	second := assertPerformance(t, s, obl, "20")
	if second.Objects["assertion_hash"] == first.Objects["assertion_hash"] || second.Objects["performance_event"] == first.Objects["performance_event"] {
		t.Fatal("the second assertion is not a new object with its own hash")
	}
	out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept",
		AssertionID: second.Objects["performance_event"], AssertionHash: second.Objects["assertion_hash"]})
	if err != nil || out.State != "settlement_pending" || out.Status != "recorded" || out.Objects["remainder_obligation"] != "" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	types := recordtest.SameRecord(t, b, s, txn, 7)
	if !slices.Equal(types, []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared",
		"acceptance.rejected", "performance.declared", "acceptance.granted"}) {
		t.Fatalf("events %v", types)
	}
	// Each response binds its own assertion, in both records.
	for _, sd := range []*recordtest.Side{b, s} {
		for id, want := range map[string]map[string]any{
			rejection:                          {"response_type": "reject", "reason_code": "quantity_short", "assertion_hash": first.Objects["assertion_hash"]},
			out.Objects["obligation_response"]: {"response_type": "accept", "accepted_quantity": "20", "assertion_hash": second.Objects["assertion_hash"]},
		} {
			raw, err := sd.Node.Org.Store.GetObject(ctx, txn, id)
			if err != nil {
				t.Fatal(err)
			}
			o, _ := canonical.DecodeObject(raw)
			for k, v := range want {
				if payloadOf(o)[k] != v {
					t.Fatalf("%s of %s: %s is %v, want %v", sd.Node.Org.Config().OrganizationID, id, k, payloadOf(o)[k], v)
				}
			}
		}
	}
}

func TestObligationRefusalsLeaveNoTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	issue := func(due map[string]any) func() error {
		return func() error {
			_, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, DueCondition: due})
			return err
		}
	}

	// Issuing (committed). A due condition the registry does not hold, or
	// a registered type wearing another's fields, fails closed; business
	// days without a calendar are not a term (the gate's codes, obligation
	// §4).
	refused(t, "a due condition of an unknown type", b, s, txn, reason.ObligationConditionUnknown,
		issue(map[string]any{"type": "due_when_ready"}))
	refused(t, "due_on_discharge carrying at", b, s, txn, reason.ObligationConditionUnknown,
		issue(map[string]any{"type": "due_on_discharge", "at": "2030-01-01T00:00:00Z"}))
	refused(t, "business days without a calendar", b, s, txn, reason.TermsInvalid,
		issue(map[string]any{"type": "due_at_time", "business_days": map[string]any{"days": 8}}))
	obligation := func(edit func(p map[string]any)) func([]map[string]any) []map[string]any {
		return func(objs []map[string]any) []map[string]any {
			edit(payloadOf(ofType(t, objs, "obligation")))
			return objs
		}
	}
	refused(t, "an unknown due condition at the receiver", b, s, txn, reason.ObligationConditionUnknown, tampered(t, b,
		obligation(func(p map[string]any) { p["due_condition"] = map[string]any{"type": "due_when_ready"} }), issue(nil)))
	refused(t, "an obligation owing 19 of the agreed 20", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["quantity"] = "19" }), issue(nil)))
	refused(t, "an obligation in another unit", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["unit_code"] = "KGM" }), issue(nil)))
	refused(t, "a subject bound to other terms", b, s, txn, reason.ObligationSubjectUnreferenced, tampered(t, b,
		obligation(func(p map[string]any) {
			p["subject"].(map[string]any)["terms_hash"] = canonical.SHA256Hex([]byte("other terms"))
		}), issue(nil)))
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil || out.State != "in_performance" {
		t.Fatalf("issue: %+v %v", out, err)
	}
	obl := out.Objects["obligation"]

	// Asserting (in_performance).
	assert := func(ev []record.EvidenceInput) func() error {
		return func() error {
			_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: ev})
			return err
		}
	}
	refused(t, "an assertion without evidence", b, s, txn, reason.ObligationAssertionUnevidenced, assert(nil))
	refused(t, "an assertion whose evidence was stripped in flight", b, s, txn, reason.ObligationAssertionUnevidenced, tampered(t, s,
		func(objs []map[string]any) []map[string]any {
			payloadOf(ofType(t, objs, "performance_event"))["evidence_refs"] = []any{}
			return without(objs, "evidence")
		}, assert(evidence("certificates"))))
	refused(t, "an assertion in another unit", b, s, txn, reason.ObligationTermsMutated, tampered(t, s,
		func(objs []map[string]any) []map[string]any {
			payloadOf(ofType(t, objs, "performance_event"))["unit_code"] = "KGM"
			return objs
		}, assert(evidence("certificates"))))
	refusedSaying(t, "an assertion carrying evidence it does not reference", b, s, txn, "carries evidence that assertion", tampered(t, s,
		func(objs []map[string]any) []map[string]any {
			extra := maps.Clone(ofType(t, objs, "evidence"))
			extra["id"] = "evd_0123456789abcdef01234567"
			return append([]map[string]any{extra}, objs...)
		}, assert(evidence("certificates"))))
	refused(t, "an assertion by the obligee", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.AssertPerformance(ctx, b.Actor(), record.AssertInput{MandateID: b.Mandate, ObligationID: obl, Evidence: evidence("mine")})
		return err
	})
	prf := assertPerformance(t, s, obl, "20")

	// Responding (acceptance_pending).
	respond := func(sd *recordtest.Side, in record.RespondInput) func() error {
		return func() error {
			in.MandateID, in.ObligationID = sd.Mandate, obl
			_, err := sd.Engine.Respond(ctx, sd.Actor(), in)
			return err
		}
	}
	refused(t, "an acceptance by the obligor", b, s, txn, reason.ObligationResponseUnauthorized, respond(s, record.RespondInput{ResponseType: "accept"}))
	refused(t, "a waiver by the obligor", b, s, txn, reason.ObligationResponseUnauthorized, respond(s, record.RespondInput{ResponseType: "waive"}))
	// The obligor's acceptance forged at the obligee: the obligee's own
	// message, rewritten as the supplier's act and signed with the
	// supplier's real agent key, delivered from the supplier.
	q := recordtest.Capture(t, b, func() (record.Outcome, error) {
		return b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept"})
	})
	cfg := s.Node.Org.Config()
	forged := reseal(t, agentSigner(t, s), q, func(objs []map[string]any) []map[string]any {
		for _, o := range objs {
			o["created_by"] = map[string]any{"organization_id": cfg.OrganizationID, "agent_id": cfg.AgentID, "mandate_id": s.Mandate}
		}
		return without(objs, "policy_decision") // its mandate lists no acceptance to decide on
	})
	refused(t, "a response signed by the obligor, at the obligee", b, s, txn, reason.ObligationResponseUnauthorized, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(forged))
		return err
	})
	refused(t, "a response bound to a wrong assertion hash", b, s, txn, reason.ObligationResponseHashMismatch,
		respond(b, record.RespondInput{ResponseType: "accept", AssertionHash: canonical.SHA256Hex([]byte("other bytes"))}))
	refused(t, "a response naming no assertion of the obligation", b, s, txn, reason.ObligationResponseHashMismatch,
		respond(b, record.RespondInput{ResponseType: "accept", AssertionID: "prf_0123456789abcdef01234567"}))
	refused(t, "a response rebound to other assertion bytes in flight", b, s, txn, reason.ObligationResponseHashMismatch, tampered(t, b,
		response(t, func(p map[string]any) { p["assertion_hash"] = canonical.SHA256Hex([]byte("other bytes")) }),
		respond(b, record.RespondInput{ResponseType: "accept"})))
	refused(t, "a rejection with an unregistered reason", b, s, txn, reason.ObligationRejectionReasonUnknown,
		respond(b, record.RespondInput{ResponseType: "reject", ReasonCode: "price_too_high"}))
	refused(t, "a rejection with no reason", b, s, txn, reason.ObligationRejectionReasonUnknown,
		respond(b, record.RespondInput{ResponseType: "reject"}))
	refused(t, "a rejection reason rewritten in flight", b, s, txn, reason.ObligationRejectionReasonUnknown, tampered(t, b,
		response(t, func(p map[string]any) { p["reason_code"] = "price_too_high" }),
		respond(b, record.RespondInput{ResponseType: "reject", ReasonCode: "quantity_short"})))
	partial := respond(b, record.RespondInput{ResponseType: "accept", AcceptedQuantity: "15"})
	refused(t, "a remainder due on an unknown condition", b, s, txn, reason.ObligationConditionUnknown,
		respond(b, record.RespondInput{ResponseType: "accept", AcceptedQuantity: "15", RemainderDue: map[string]any{"type": "due_when_ready"}}))
	refused(t, "a partial acceptance whose remainder was dropped", b, s, txn, reason.ObligationRemainderMissing, tampered(t, b,
		func(objs []map[string]any) []map[string]any {
			delete(payloadOf(ofType(t, objs, "obligation_response")), "remainder_obligation_id")
			return without(objs, "obligation")
		}, partial))
	refused(t, "a partial acceptance naming a remainder that does not travel", b, s, txn, reason.ObligationRemainderMissing, tampered(t, b,
		func(objs []map[string]any) []map[string]any { return without(objs, "obligation") }, partial))
	refused(t, "a remainder in another unit", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["unit_code"] = "KGM" }), partial))
	// The remainder carries the share not accepted, no less (the payee
	// would lose it) and no more (the payer would owe it twice).
	refused(t, "a remainder carrying no consideration", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["consideration"] = nil }), partial))
	refused(t, "a remainder carrying the whole consideration again", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["consideration"] = map[string]any{"currency": "EUR", "amount": "3200.00"} }), partial))
	refused(t, "a remainder carrying less than its share", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["consideration"] = map[string]any{"currency": "EUR", "amount": "799.99"} }), partial))
	refused(t, "a remainder decomposing another commitment", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		obligation(func(p map[string]any) { p["commitment_id"] = "cmt_0123456789abcdef01234567" }), partial))
	refused(t, "a response restating the quantity", b, s, txn, reason.ObligationTermsMutated, tampered(t, b,
		response(t, func(p map[string]any) { p["quantity"] = "15" }), partial))
	// An obligation nobody named rides along with an acceptance: refused,
	// so the supplier stores nothing the buyer's record lacks.
	smuggle := func(objs []map[string]any) []map[string]any {
		raw, _ := b.Node.Org.Store.GetObject(ctx, txn, obl)
		o, _ := canonical.DecodeObject(raw)
		o["id"] = "obl_0123456789abcdef01234567"
		payloadOf(o)["quantity"] = "1"
		return append([]map[string]any{o}, objs...)
	}
	refused(t, "an obligation smuggled with a full acceptance", b, s, txn, reason.ObligationRemainderMissing, tampered(t, b,
		smuggle, respond(b, record.RespondInput{ResponseType: "accept"})))
	refusedSaying(t, "an obligation smuggled beside a remainder", b, s, txn, "message does not carry obligation", tampered(t, b,
		smuggle, partial))

	// Nothing refused moved either record: the genuine acts still go
	// through, and both records hold the walkthrough's five events.
	out, err = b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept",
		AssertionHash: prf.Objects["assertion_hash"]})
	if err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	recordtest.SameRecord(t, b, s, txn, 5)
}

// forge builds and signs an object as sd's agent, by hand.
func forge(t *testing.T, sd *recordtest.Side, c *recordtest.Clock, typ, txn, purpose string, payload map[string]any) (map[string]any, []byte) {
	t.Helper()
	cfg := sd.Node.Org.Config()
	o, err := envelope.New(envelope.Spec{ObjectType: typ, TransactionID: txn, CreatedAt: c.Now(), Payload: payload,
		CreatedBy: envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, MandateID: sd.Mandate}})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Seal(o); err != nil {
		t.Fatal(err)
	}
	if err := signature.Sign(o, agentSigner(t, sd), purpose, c.Now()); err != nil {
		t.Fatal(err)
	}
	raw, err := canonical.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return o, raw
}

func TestPerformanceBeforeCommitmentRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	// The agreement proposed on its own, after agreement.direct (it does
	// not travel with the acceptance)...
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) { o.TestingOnlySeparateAgreement = true })
	s.Out.Reconnect(b.Engine)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	// ...so that agreement.direct reaches both records while the agreement
	// waits in the buyer's outbox: both stand at agreement_pending.
	b.Out.Intercept(func(_ string, objs [][]byte) error {
		if len(objs) == 1 && strings.Contains(string(objs[0]), `"object_type":"agreement"`) {
			return delivery.ErrUnavailable
		}
		return nil
	})
	if out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil || out.Status != "pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	b.Out.Intercept(nil)
	txn := o.TransactionID
	recordtest.SameRecord(t, b, s, txn, 1)
	for _, sd := range []*recordtest.Side{b, s} {
		if tx, _ := sd.Node.Org.Store.GetTransaction(ctx, txn); tx.State != "agreement_pending" {
			t.Fatalf("%s is %s", sd.Node.Org.Config().OrganizationID, tx.State)
		}
	}
	refused(t, "an obligation before commitment", b, s, txn, reason.StateTransitionDenied, func() error {
		_, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
		return err
	})
	// A complete, correctly signed assertion of performance from the
	// supplier, before anything was committed.
	evs, _ := s.Node.Org.Store.Events(ctx, txn)
	cfg := s.Node.Org.Config()
	evd, evdRaw := forge(t, s, c, "evidence", txn, "object_issuance", map[string]any{
		"evidence_type": "third_party_certificate", "claim": "certificates", "artifact_hash": canonical.SHA256Hex([]byte("certificates")),
		"issuer":       map[string]any{"organization_id": cfg.OrganizationID},
		"verification": map[string]any{"status": "unverified", "verified_at": nil, "verifier_organization_id": nil},
	})
	prf, prfRaw := forge(t, s, c, "performance_event", txn, "object_issuance", map[string]any{
		"obligation_id": "obl_0123456789abcdef01234567", "asserted_quantity": "20", "unit_code": "H87",
		"evidence_refs": []any{map[string]any{"evidence_id": evd["id"], "content_hash": evd["content_hash"], "evidence_type": "third_party_certificate",
			"signed_by": map[string]any{"organization_id": cfg.OrganizationID, "agent_id": cfg.AgentID}}},
	})
	for _, from := range []string{"agreement_pending", "in_performance"} {
		_, evRaw := forge(t, s, c, "transaction_event", txn, "event_append", map[string]any{
			"stream": map[string]any{"kind": "transaction", "id": txn}, "sequence": 2, "event_type": "performance.declared",
			"occurred_at": envelope.Timestamp(c.Now()), "previous_event_hash": evs[0].ContentHash,
			"action_hash": canonical.SHA256Hex([]byte("act")), "policy_decision_id": "pol_0123456789abcdef01234567",
			"from_state": from, "to_state": "acceptance_pending",
			"data": map[string]any{"obligation_id": "obl_0123456789abcdef01234567", "performance_event_id": prf["id"]},
		})
		refused(t, "performance.declared from "+from+" before commitment", b, s, txn, reason.StateTransitionDenied, func() error {
			_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw([][]byte{evdRaw, prfRaw, evRaw}))
			return err
		})
	}
}

func TestObligationStateTableLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	respond := func(in record.RespondInput) func() error {
		return func() error {
			in.MandateID, in.ObligationID = b.Mandate, obl
			_, err := b.Engine.Respond(ctx, b.Actor(), in)
			return err
		}
	}
	assert := func() error {
		_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence("more")})
		return err
	}
	refused(t, "a response before any assertion", b, s, txn, reason.StateTransitionDenied, respond(record.RespondInput{ResponseType: "accept"}))
	first := assertPerformance(t, s, obl, "18")
	refused(t, "an assertion while one is outstanding", b, s, txn, reason.StateTransitionDenied, assert)
	// A waiver is an obligation transition with no event in the
	// transaction's state machine: refused, locally and at the receiver.
	refused(t, "a waiver", b, s, txn, reason.StateTransitionDenied, respond(record.RespondInput{ResponseType: "waive"}))
	refused(t, "an acceptance turned into a waiver in flight", b, s, txn, reason.StateTransitionDenied, tampered(t, b,
		func(objs []map[string]any) []map[string]any {
			p := payloadOf(ofType(t, objs, "obligation_response"))
			p["response_type"] = "waive"
			delete(p, "assertion_id")
			delete(p, "assertion_hash")
			delete(p, "accepted_quantity")
			delete(p, "remainder_obligation_id")
			return without(objs, "obligation")
		}, respond(record.RespondInput{ResponseType: "accept"})))
	refused(t, "an unknown response type", b, s, txn, reason.StateTransitionDenied, respond(record.RespondInput{ResponseType: "maybe"}))
	refused(t, "a rejection recorded as acceptance.granted", b, s, txn, reason.StateTransitionDenied, tampered(t, b,
		func(objs []map[string]any) []map[string]any {
			p := payloadOf(ofType(t, objs, "obligation_response"))
			p["response_type"] = "reject"
			p["reason_code"] = "quantity_short"
			delete(p, "accepted_quantity")
			delete(p, "remainder_obligation_id")
			return without(objs, "obligation")
		}, respond(record.RespondInput{ResponseType: "accept"})))

	if out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "quantity_short"}); err != nil || out.State != "in_performance" {
		t.Fatalf("reject: %+v %v", out, err)
	}
	refused(t, "a second response to the rejected assertion", b, s, txn, reason.StateTransitionDenied,
		respond(record.RespondInput{ResponseType: "accept", AssertionID: first.Objects["performance_event"]}))
	second := assertPerformance(t, s, obl, "20")
	refused(t, "answering the answered assertion", b, s, txn, reason.StateTransitionDenied,
		respond(record.RespondInput{ResponseType: "accept", AssertionID: first.Objects["performance_event"], AssertionHash: first.Objects["assertion_hash"]}))
	// The same at the supplier: the buyer's own acceptance, rebound to the
	// rejected assertion by its exact hash and signed with the buyer's key.
	refused(t, "answering the answered assertion, at the receiver", b, s, txn, reason.StateTransitionDenied, tampered(t, b,
		response(t, func(p map[string]any) {
			p["assertion_id"] = first.Objects["performance_event"]
			p["assertion_hash"] = first.Objects["assertion_hash"]
		}), respond(record.RespondInput{ResponseType: "accept"})))

	if out, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept",
		AssertionID: second.Objects["performance_event"]}); err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	refused(t, "a second response to the accepted assertion", b, s, txn, reason.StateTransitionDenied, respond(record.RespondInput{ResponseType: "accept"}))
	refused(t, "a rejection after acceptance", b, s, txn, reason.StateTransitionDenied,
		respond(record.RespondInput{ResponseType: "reject", ReasonCode: "quantity_short", AssertionID: second.Objects["performance_event"]}))
	refused(t, "an assertion after acceptance", b, s, txn, reason.StateTransitionDenied, assert)
	refused(t, "a waiver after acceptance", b, s, txn, reason.StateTransitionDenied, respond(record.RespondInput{ResponseType: "waive"}))
	recordtest.SameRecord(t, b, s, txn, 7)
}

// response edits the obligation_response of a message.
func response(t *testing.T, edit func(p map[string]any)) func([]map[string]any) []map[string]any {
	return func(objs []map[string]any) []map[string]any {
		edit(payloadOf(ofType(t, objs, "obligation_response")))
		return objs
	}
}
