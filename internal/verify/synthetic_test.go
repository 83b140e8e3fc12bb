package verify_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// at is a verification time after every synthetic record's objects.
var at = verifytest.Base.Add(48 * time.Hour)

func newRecord(t testing.TB, events int) *verifytest.Record {
	t.Helper()
	rec, err := verifytest.New(events)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func inputOf(rec *verifytest.Record) verify.Input {
	return verify.Input{Objects: rec.Objects, Mandates: rec.Mandates, Keys: rec.Keys, TransactionID: rec.TransactionID}
}

func opts() verify.Options {
	return verify.Options{RulesVersion: verifytest.RulesVersion, Now: at}
}

func run(rec *verifytest.Record) *verify.Report { return verify.Verify(inputOf(rec), opts()) }

// find returns the checks named name about subject.
func find(rep *verify.Report, name, subject string) []verify.Check {
	var out []verify.Check
	for _, c := range rep.Checks {
		if c.Name == name && c.Subject == subject {
			out = append(out, c)
		}
	}
	return out
}

// one returns the single check named name about subject.
func one(t *testing.T, rep *verify.Report, name, subject string) verify.Check {
	t.Helper()
	cs := find(rep, name, subject)
	if len(cs) != 1 {
		t.Fatalf("%d checks %s on %s, want 1", len(cs), name, subject)
	}
	return cs[0]
}

func wantFailed(t *testing.T, rep *verify.Report, name, subject string, code reason.Code) {
	t.Helper()
	c := one(t, rep, name, subject)
	if c.Result != verify.Failed || c.Code != code {
		t.Errorf("%s on %s: %s %q (%s), want failed %s", name, subject, c.Result, c.Code, c.Detail, code)
	}
}

func wantResult(t *testing.T, rep *verify.Report, name, subject string, res verify.Result) {
	t.Helper()
	c := one(t, rep, name, subject)
	if c.Result != res {
		t.Errorf("%s on %s: %s (%s), want %s", name, subject, c.Result, c.Detail, res)
	}
}

func noFailures(t *testing.T, rep *verify.Report) {
	t.Helper()
	for _, c := range rep.Failures() {
		t.Errorf("unexpected failure: %d %s %s %s: %s", c.Step, c.Name, c.Subject, c.Code, c.Detail)
	}
}

// resign reseals obj and signs it afresh, once per signer, at its own
// created_at.
func resign(t *testing.T, obj map[string]any, purpose string, signers ...signature.Signer) {
	t.Helper()
	delete(obj, "content_hash")
	obj["signatures"] = []any{}
	if err := envelope.Seal(obj); err != nil {
		t.Fatal(err)
	}
	when, err := envelope.ParseTimestamp(obj["created_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range signers {
		if err := signature.Sign(obj, s, purpose, when); err != nil {
			t.Fatal(err)
		}
	}
}

func payload(obj map[string]any) map[string]any { return obj["payload"].(map[string]any) }

func lastEvent(rec *verifytest.Record) map[string]any {
	return rec.Object(rec.EventIDs[len(rec.EventIDs)-1])
}

func remove(rec *verifytest.Record, id string) {
	for i, o := range rec.Objects {
		if o["id"] == id {
			rec.Objects = append(rec.Objects[:i:i], rec.Objects[i+1:]...)
			return
		}
	}
}

func TestSyntheticRecordVerifies(t *testing.T) {
	rec := newRecord(t, 8)
	rep := run(rec)
	noFailures(t, rep)
	// The only gaps are the guards of settlement.instructed, which concern
	// a payment mandate no bundle carries.
	for _, c := range rep.Gaps() {
		e := rec.Object(c.Subject)
		if c.Name != "transition_guard" || e == nil || payload(e)["event_type"] != "settlement.instructed" {
			t.Errorf("unexpected gap: %s %s: %s", c.Name, c.Subject, c.Detail)
		}
	}
	if rep.Results.NotCheckable != 3 {
		t.Errorf("%d gaps, want 3", rep.Results.NotCheckable)
	}
	if n := rep.Results.Verified + rep.Results.Failed + rep.Results.NotCheckable; n != len(rep.Checks) {
		t.Errorf("counts %+v do not add up to %d checks", rep.Results, len(rep.Checks))
	}
	if len(rep.Raised) != 0 || len(rep.UnresolvedReferences) != 0 || len(rep.UndisclosedStreams) != 0 {
		t.Errorf("raised %v, unresolved %v, undisclosed %v", rep.Raised, rep.UnresolvedReferences, rep.UndisclosedStreams)
	}
}

// The report does not depend on how the parallel phase was scheduled, nor
// its outcomes on the order the objects came in.
func TestDeterministic(t *testing.T) {
	rec := newRecord(t, 12)
	one := opts()
	one.Workers = 1
	many := opts()
	many.Workers = 5
	a, b := verify.Verify(inputOf(rec), one), verify.Verify(inputOf(rec), many)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one worker and five give different reports")
	}
	rev := inputOf(rec)
	rev.Objects = append([]map[string]any(nil), rev.Objects...)
	for i, j := 0, len(rev.Objects)-1; i < j; i, j = i+1, j-1 {
		rev.Objects[i], rev.Objects[j] = rev.Objects[j], rev.Objects[i]
	}
	c := verify.Verify(rev, many)
	if !reflect.DeepEqual(outcomes(a), outcomes(c)) {
		t.Fatal("reversing the objects changes the outcomes")
	}
}

func outcomes(rep *verify.Report) []string {
	var out []string
	for _, c := range rep.Checks {
		out = append(out, fmt.Sprintf("%d %s %s %s %s", c.Step, c.Name, c.Subject, c.Result, c.Code))
	}
	sort.Strings(out)
	return out
}

func TestChangedBytes(t *testing.T) {
	rec := newRecord(t, 6)
	e := lastEvent(rec)
	id := e["id"].(string)
	payload(e)["occurred_at"] = envelope.Timestamp(verifytest.Base.Add(time.Hour))
	rep := run(rec)
	wantFailed(t, rep, "content_hash", id, reason.EvidenceHashMismatch)
	wantFailed(t, rep, "signature[0]", id, reason.EvidenceSignatureInvalid)
	wantFailed(t, rep, "signature[1]", id, reason.EvidenceSignatureInvalid)
	wantFailed(t, rep, "countersignature", id, reason.EvidenceSignatureInvalid)

	// Recomputing the hash over the changed bytes mends the hash check,
	// never the signatures.
	if err := envelope.Seal(e); err != nil {
		t.Fatal(err)
	}
	rep = run(rec)
	wantResult(t, rep, "content_hash", id, verify.Verified)
	wantFailed(t, rep, "signature[0]", id, reason.EvidenceSignatureInvalid)
	wantFailed(t, rep, "signature_count", id, reason.EvidenceSignatureInvalid)
}

// A report that counts the passed checks instead of listing them
// (Options.CountVerified, party verify's summary) has the full report's
// counts, and lists exactly its failed and not-checkable checks, in its
// order.
func TestCountVerified(t *testing.T) {
	rec := newRecord(t, 8)
	payload(lastEvent(rec))["occurred_at"] = envelope.Timestamp(verifytest.Base.Add(time.Hour))
	for _, workers := range []int{1, 3} {
		o := opts()
		o.Workers = workers
		full := verify.Verify(inputOf(rec), o)
		o.CountVerified = true
		counted := verify.Verify(inputOf(rec), o)
		if full.Results.Failed == 0 || full.Results.NotCheckable == 0 {
			t.Fatalf("the record should fail some checks and leave some unchecked: %+v", full.Results)
		}
		if counted.Results != full.Results {
			t.Errorf("%d workers: counts %+v, want %+v", workers, counted.Results, full.Results)
		}
		var unpassed []verify.Check
		for _, c := range full.Checks {
			if c.Result != verify.Verified {
				unpassed = append(unpassed, c)
			}
		}
		if !reflect.DeepEqual(counted.Checks, unpassed) {
			t.Errorf("%d workers: listed %d checks, want the %d that did not pass", workers, len(counted.Checks), len(unpassed))
		}
		full.Checks, counted.Checks = nil, nil
		if !reflect.DeepEqual(full, counted) {
			t.Errorf("%d workers: the rest of the report differs", workers)
		}
	}
}

func TestRelabelledPurpose(t *testing.T) {
	rec := newRecord(t, 1)
	offer := rec.ObjectOfType("offer")
	// object_issuance is an allowed purpose for an offer, but the value was
	// made for offer_submission: the protected members no longer match.
	offer["signatures"].([]any)[0].(map[string]any)["purpose"] = "object_issuance"
	rep := run(rec)
	wantFailed(t, rep, "signature[0]", offer["id"].(string), reason.EvidenceSignatureInvalid)

	offer["signatures"].([]any)[0].(map[string]any)["purpose"] = "event_append"
	rep = run(rec)
	c := one(t, rep, "signature[0]", offer["id"].(string))
	if c.Result != verify.Failed || !strings.Contains(c.Detail, "may not sign") {
		t.Errorf("a purpose the table forbids: %s %s", c.Result, c.Detail)
	}
}

func TestSwappedKeys(t *testing.T) {
	rec := newRecord(t, 2)
	swapped := keys.NewKeySet()
	for _, id := range rec.Keys.IDs() {
		other := id
		switch id {
		case rec.Buyer.AgentKeyID:
			other = rec.Supplier.AgentKeyID
		case rec.Supplier.AgentKeyID:
			other = rec.Buyer.AgentKeyID
		}
		pub, err := rec.Keys.Lookup(other)
		if err != nil {
			t.Fatal(err)
		}
		if err := swapped.Add(id, pub); err != nil {
			t.Fatal(err)
		}
	}
	rec.Keys = swapped
	rep := run(rec)
	offer := rec.ObjectOfType("offer")["id"].(string)
	wantFailed(t, rep, "signature[0]", offer, reason.EvidenceSignatureInvalid)
	wantFailed(t, rep, "key_record_matches", rec.Buyer.AgentKeyID, reason.EvidenceSignatureInvalid)
	for _, c := range rep.Checks {
		if strings.HasPrefix(c.Name, "signature[") && c.Result == verify.Verified {
			o := rec.Object(c.Subject)
			if o["object_type"] != "key_record" {
				t.Errorf("%s of %s verified under a swapped key", c.Name, c.Subject)
			}
		}
	}
}

func TestCountersignature(t *testing.T) {
	rec := newRecord(t, 3)
	e := lastEvent(rec)
	id := e["id"].(string)
	b := rec.Buyer
	resign(t, e, "event_append", b.AgentSigner)
	rep := run(rec)
	wantFailed(t, rep, "countersignature", id, reason.EvidenceSignatureInvalid)

	single := opts()
	single.SingleSignedEvents = true
	rep = verify.Verify(inputOf(rec), single)
	if len(find(rep, "countersignature", id)) != 0 {
		t.Error("a countersignature check under SingleSignedEvents")
	}

	// Countersigned by the appender's own principal: two keys, one party.
	resign(t, e, "event_append", b.AgentSigner, b.PrincipalSigner)
	rep = run(rec)
	c := one(t, rep, "countersignature", id)
	if c.Result != verify.Failed || !strings.Contains(c.Detail, "both signatures are by "+b.Org) {
		t.Errorf("countersigned by the appender's own party: %s %s", c.Result, c.Detail)
	}
	// In the wrong order: the appender must sign first.
	resign(t, e, "event_append", rec.Supplier.AgentSigner, b.AgentSigner)
	rep = run(rec)
	wantFailed(t, rep, "countersignature", id, reason.EvidenceSignatureInvalid)
}

func TestStreamContinuity(t *testing.T) {
	rec := newRecord(t, 8)
	stream := "transaction:" + rec.TransactionID
	remove(rec, rec.EventIDs[3])
	rep := run(rec)
	found := false
	for _, c := range find(rep, "event_chain", stream) {
		found = found || (c.Result == verify.Failed && c.Code == reason.EvidenceChainGap)
	}
	if !found {
		t.Error("a missing event inside the stream is not a chain gap")
	}

	// A stream disclosed from mid-stream is a boundary, not a gap.
	rec = newRecord(t, 8)
	remove(rec, rec.EventIDs[0])
	remove(rec, rec.EventIDs[1])
	rep = run(rec)
	wantResult(t, rep, "stream_boundary", stream, verify.NotCheckable)
	for _, c := range rep.Failures() {
		if c.Code == reason.EvidenceChainGap {
			t.Errorf("a boundary reported as a gap: %+v", c)
		}
	}
}

func TestFork(t *testing.T) {
	rec := newRecord(t, 6)
	e := lastEvent(rec)
	twin := map[string]any{}
	for k, v := range e {
		twin[k] = v
	}
	p := map[string]any{}
	for k, v := range payload(e) {
		p[k] = v
	}
	p["data"] = map[string]any{"note_ref": "stl_other_0001"}
	twin["payload"] = p
	twin["id"] = "evt_synthetic_twin"
	resign(t, twin, "event_append", rec.Buyer.AgentSigner, rec.Supplier.AgentSigner)
	rec.Objects = append(rec.Objects, twin)
	rep := run(rec)
	found := false
	for _, c := range find(rep, "event_chain", "transaction:"+rec.TransactionID) {
		found = found || (c.Result == verify.Failed && strings.Contains(c.Detail, "forks"))
	}
	if !found {
		t.Error("two events at one sequence are not reported as a fork")
	}
}

func TestRulesVersions(t *testing.T) {
	rec := newRecord(t, 5)
	direct := rec.EventIDs[0]

	o := opts()
	o.RulesVersion = ""
	rep := verify.Verify(inputOf(rec), o)
	for _, id := range rec.EventIDs {
		wantResult(t, rep, "transition_legality", id, verify.NotCheckable)
	}
	noFailures(t, rep)

	o.RulesVersion = "9.9"
	rep = verify.Verify(inputOf(rec), o)
	wantResult(t, rep, "transition_legality", direct, verify.NotCheckable)
	if !contains(rep.UnresolvedReferences, "a202-rules/pilot@9.9") {
		t.Errorf("unresolved %v", rep.UnresolvedReferences)
	}

	// The version in force per event: the direct entry replayed under 1.2.
	o = opts()
	o.EventRules = map[string]string{direct: "1.2"}
	rep = verify.Verify(inputOf(rec), o)
	wantFailed(t, rep, "transition_legality", direct, reason.EvidenceTransitionIllegal)
	if rep.Results.Failed != 1 {
		t.Errorf("%d failures, want only the direct entry", rep.Results.Failed)
	}
}

func TestRecordedStateMustBeReplayedState(t *testing.T) {
	rec := newRecord(t, 6)
	e := lastEvent(rec)
	// settlement.instructed from in_performance is no row at all; from
	// acceptance_pending it is a row, but not the state the replay reached.
	payload(e)["from_state"] = "acceptance_pending"
	payload(e)["to_state"] = "settlement_pending"
	payload(e)["event_type"] = "acceptance.granted"
	resign(t, e, "event_append", rec.Buyer.AgentSigner, rec.Supplier.AgentSigner)
	rep := run(rec)
	c := one(t, rep, "transition_legality", e["id"].(string))
	if c.Result != verify.Failed || !strings.Contains(c.Detail, "replay had reached settlement_pending") {
		t.Errorf("%s %s", c.Result, c.Detail)
	}
}

// keyRecordV2 publishes a new version of keyID's key_record with status,
// created at created, signed by the controller's principal.
func keyRecordV2(t *testing.T, rec *verifytest.Record, p *verifytest.Party, keyID string, status string, created time.Time) {
	t.Helper()
	v1 := rec.Object(keyID)
	pub, err := rec.Keys.Lookup(keyID)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := envelope.NewKeyRecord(envelope.KeyRecordSpec{
		KeyID: keyID + "_v2", Controller: p.Org, PublicKey: pub, Status: status,
		ValidFrom: verifytest.Base.Add(-time.Hour), CreatedBy: p.Actor(), CreatedAt: created,
	})
	if err != nil {
		t.Fatal(err)
	}
	kr["version"] = json.Number("2")
	kr["previous_version_id"] = v1["id"]
	resign(t, kr, "object_issuance", p.PrincipalSigner)
	rec.Objects = append(rec.Objects, kr)
}

func TestKeyRevokedAfterSigning(t *testing.T) {
	rec := newRecord(t, 5)
	k := rec.Supplier.AgentKeyID
	keyRecordV2(t, rec, rec.Supplier, k, envelope.KeyRevoked, verifytest.Base.Add(24*time.Hour))
	rep := run(rec)
	noFailures(t, rep)
	now := one(t, rep, "key_status_now", k)
	if now.Result != verify.Verified || !strings.HasPrefix(now.Detail, "revoked") {
		t.Errorf("current status: %s %s", now.Result, now.Detail)
	}
	offer := rec.ObjectOfType("offer")["id"].(string)
	wantResult(t, rep, "key_status_at_signing[0]", offer, verify.Verified)
	wantResult(t, rep, "signature[0]", offer, verify.Verified)
}

func TestKeyRevokedBeforeSigning(t *testing.T) {
	rec := newRecord(t, 5)
	k := rec.Supplier.AgentKeyID
	offer := rec.ObjectOfType("offer")
	offerAt, _ := envelope.ParseTimestamp(offer["created_at"].(string))
	keyRecordV2(t, rec, rec.Supplier, k, envelope.KeyRevoked, offerAt.Add(time.Second))
	rep := run(rec)
	wantResult(t, rep, "key_status_at_signing[0]", offer["id"].(string), verify.Verified)
	// The supplier's countersignature on agreement.direct came later.
	wantFailed(t, rep, "key_status_at_signing[1]", rec.EventIDs[0], reason.EvidenceSignatureInvalid)
}

func TestKeyRecordNotRelied(t *testing.T) {
	rec := newRecord(t, 1)
	k := rec.Supplier.AgentKeyID
	kr := rec.Object(k)
	payload(kr)["status"] = envelope.KeyRevoked // the record no longer hashes
	rep := run(rec)
	offer := rec.ObjectOfType("offer")["id"].(string)
	wantResult(t, rep, "key_status_at_signing[0]", offer, verify.NotCheckable)
	wantFailed(t, rep, "content_hash", k, reason.EvidenceHashMismatch)
}

func TestMandateAuthority(t *testing.T) {
	rec := newRecord(t, 2)
	commit := rec.EventIDs[1]
	m := rec.Mandates[0] // the buyer's
	m["actions"] = []any{"offer.accept"}
	rep := run(rec)
	wantFailed(t, rep, "mandate_proof", m["id"].(string), reason.EvidenceSignatureInvalid)
	wantFailed(t, rep, "mandate_authority", commit, reason.EvidenceTransitionIllegal)

	delete(m, "proof")
	if err := signature.SignMandate(m, rec.Buyer.PrincipalSigner, verifytest.Base); err != nil {
		t.Fatal(err)
	}
	rep = run(rec)
	wantResult(t, rep, "mandate_proof", m["id"].(string), verify.Verified)
	c := one(t, rep, "mandate_authority", commit)
	if c.Result != verify.Failed || !strings.Contains(c.Detail, "does not list agreement.sign") {
		t.Errorf("%s %s", c.Result, c.Detail)
	}
	wantResult(t, rep, "mandate_authority", rec.EventIDs[0], verify.Verified)

	rec.Mandates = rec.Mandates[1:]
	rep = run(rec)
	wantResult(t, rep, "mandate_authority", commit, verify.NotCheckable)
	if !contains(rep.UnresolvedReferences, rec.Buyer.MandateID) {
		t.Errorf("unresolved %v", rep.UnresolvedReferences)
	}
}

func TestMandateExpiredAtAppend(t *testing.T) {
	rec := newRecord(t, 2)
	m := rec.Mandates[0]
	m["valid_until"] = envelope.Timestamp(verifytest.Base.Add(time.Second))
	delete(m, "proof")
	if err := signature.SignMandate(m, rec.Buyer.PrincipalSigner, verifytest.Base); err != nil {
		t.Fatal(err)
	}
	rep := run(rec)
	wantFailed(t, rep, "mandate_authority", rec.EventIDs[0], reason.EvidenceTransitionIllegal)
}

func TestPolicyDecision(t *testing.T) {
	rec := newRecord(t, 5)
	e := lastEvent(rec)
	id := e["id"].(string)
	pid := payload(e)["policy_decision_id"].(string)
	d := rec.Object(pid)

	payload(d)["decision"] = "deny"
	resign(t, d, "policy_decision", rec.Buyer.AgentSigner)
	rep := run(rec)
	wantFailed(t, rep, "policy_decision", id, reason.EvidenceTransitionIllegal)

	payload(d)["decision"] = "allow"
	payload(d)["action_hash"] = strings.Repeat("0", 64)
	resign(t, d, "policy_decision", rec.Buyer.AgentSigner)
	rep = run(rec)
	wantFailed(t, rep, "policy_decision", id, reason.EvidenceTransitionIllegal)

	remove(rec, pid)
	rep = run(rec)
	wantResult(t, rep, "policy_decision", id, verify.NotCheckable)
	if !contains(rep.UnresolvedReferences, pid) {
		t.Errorf("unresolved %v", rep.UnresolvedReferences)
	}
}

func TestDirectPathOverSessionStream(t *testing.T) {
	rec := newRecord(t, 2)
	s, err := envelope.New(envelope.Spec{
		ObjectType: "transaction_event", ID: "evt_session_0001", CreatedBy: rec.Supplier.Actor(),
		TransactionID: rec.TransactionID, CreatedAt: verifytest.Base,
		Payload: map[string]any{
			"stream": map[string]any{"kind": "session", "id": "ses_synthetic_0001"}, "sequence": json.Number("1"),
			"event_type": "offer.submitted", "occurred_at": envelope.Timestamp(verifytest.Base), "previous_event_hash": nil,
			"action_hash": strings.Repeat("1", 64), "policy_decision_id": "pol_synthetic_offer",
			"from_state": "opened", "to_state": "active", "data": map[string]any{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	resign(t, s, "event_append", rec.Supplier.AgentSigner, rec.Buyer.AgentSigner)
	rec.Objects = append(rec.Objects, s)
	rep := run(rec)
	wantFailed(t, rep, "transition_guard", rec.EventIDs[0], reason.EvidenceTransitionIllegal)
}

func TestVersionChains(t *testing.T) {
	rec := newRecord(t, 3)
	obl := rec.ObjectOfType("obligation")
	v2 := func(id, state string, version int, prev any) map[string]any {
		o := map[string]any{}
		for k, v := range obl {
			o[k] = v
		}
		p := map[string]any{}
		for k, v := range payload(obl) {
			p[k] = v
		}
		p["state"] = state
		o["payload"], o["id"], o["version"], o["previous_version_id"] = p, id, json.Number(fmt.Sprint(version)), prev
		resign(t, o, "object_issuance", rec.Buyer.AgentSigner)
		return o
	}
	base := append([]map[string]any(nil), rec.Objects...)

	rec.Objects = append(base, v2("obl_synthetic_0001_v2", "released", 2, obl["id"]))
	rep := run(rec)
	noFailures(t, rep)
	wantResult(t, rep, "version_chain", "obl_synthetic_0001_v2", verify.Verified)
	wantResult(t, rep, "obligation_state", "obl_synthetic_0001_v2", verify.Verified)

	rec.Objects = append(base, v2("obl_synthetic_0001_v2", "accepted", 2, obl["id"]))
	rep = run(rec)
	wantFailed(t, rep, "obligation_state", "obl_synthetic_0001_v2", reason.EvidenceTransitionIllegal)

	rec.Objects = append(base, v2("obl_synthetic_0001_v3", "due", 3, obl["id"]))
	rep = run(rec)
	wantFailed(t, rep, "version_chain", "obl_synthetic_0001_v3", reason.EvidenceChainGap)

	rec.Objects = append(base, v2("obl_synthetic_0001_a", "due", 2, obl["id"]), v2("obl_synthetic_0001_b", "due", 2, obl["id"]))
	rep = run(rec)
	wantFailed(t, rep, "version_chain_fork", "obl_synthetic_0001_a", reason.EvidenceChainGap)
	wantFailed(t, rep, "version_chain_fork", "obl_synthetic_0001_b", reason.EvidenceChainGap)

	rec.Objects = append(base, v2("obl_synthetic_0001_v2", "due", 2, "obl_withheld_0001"))
	rep = run(rec)
	wantResult(t, rep, "version_chain", "obl_synthetic_0001_v2", verify.NotCheckable)

	// One object held twice is one object; two objects under one id are
	// a claim to one identity by two.
	rec.Objects = append(base, obl)
	if got, want := len(run(rec).Checks), len(verify.Verify(verify.Input{Objects: base, Mandates: rec.Mandates, Keys: rec.Keys}, opts()).Checks); got != want {
		t.Errorf("a duplicate changes the checks: %d, want %d", got, want)
	}
	rec.Objects = append(base, v2(obl["id"].(string), "due", 1, nil))
	rep = run(rec)
	wantFailed(t, rep, "id_unique", obl["id"].(string), reason.EvidenceChainGap)
}

func TestEvidenceReferences(t *testing.T) {
	rec := newRecord(t, 4)
	evd := rec.ObjectOfType("evidence")
	prf := rec.ObjectOfType("performance_event")
	offer := rec.ObjectOfType("offer")
	payload(offer)["evidence_refs"] = []any{evd["id"], "evd_withheld_0001"}
	resign(t, offer, "offer_submission", rec.Supplier.AgentSigner)
	rep := run(rec)
	var verified, gaps int
	for _, c := range find(rep, "evidence_ref", offer["id"].(string)) {
		switch c.Result {
		case verify.Verified:
			verified++
		case verify.NotCheckable:
			gaps++
		}
	}
	if verified != 1 || gaps != 1 {
		t.Errorf("short forms: %d verified, %d not checkable; want 1 and 1", verified, gaps)
	}
	wantResult(t, rep, "reference_resolves", "evd_withheld_0001", verify.NotCheckable)

	ref := payload(prf)["evidence_refs"].([]any)[0].(map[string]any)
	ref["content_hash"] = strings.Repeat("a", 64)
	ref["evidence_type"] = "rumour"
	resign(t, prf, "object_issuance", rec.Supplier.AgentSigner)
	rep = run(rec)
	wantFailed(t, rep, "evidence_ref", prf["id"].(string), reason.EvidenceHashMismatch)
	wantResult(t, rep, "type_registered", `evidence_type "rumour"`, verify.NotCheckable)
	if !contains(rep.UnregisteredTypes, `evidence_type "rumour"`) {
		t.Errorf("unregistered %v", rep.UnregisteredTypes)
	}

	remove(rec, prf["id"].(string))
	payload(offer)["evidence_refs"] = []any{}
	resign(t, offer, "offer_submission", rec.Supplier.AgentSigner)
	rep = run(rec)
	wantResult(t, rep, "evidence_referenced", evd["id"].(string), verify.NotCheckable)
	if !contains(rep.UnreferencedEvidence, evd["id"].(string)) {
		t.Errorf("unreferenced %v", rep.UnreferencedEvidence)
	}
}

func TestUndisclosedStream(t *testing.T) {
	rec := newRecord(t, 1)
	d := rec.Object("pol_synthetic_offer")
	payload(d)["stream"] = map[string]any{"kind": "private", "id": "private_supplier_0001"}
	resign(t, d, "policy_decision", rec.Supplier.AgentSigner)
	rep := run(rec)
	if !contains(rep.UndisclosedStreams, "private:private_supplier_0001") {
		t.Errorf("undisclosed %v", rep.UndisclosedStreams)
	}
	wantResult(t, rep, "stream_disclosed", "private:private_supplier_0001", verify.NotCheckable)
}

func TestSignerParty(t *testing.T) {
	rec := newRecord(t, 5)
	obr := rec.ObjectOfType("obligation_response")
	// The obligor answering its own assertion.
	obr["created_by"] = map[string]any{"organization_id": rec.Supplier.Org, "agent_id": rec.Supplier.Agent, "mandate_id": rec.Supplier.MandateID}
	resign(t, obr, "object_issuance", rec.Supplier.AgentSigner)
	rep := run(rec)
	wantFailed(t, rep, "signer_party", obr["id"].(string), reason.ObligationResponseUnauthorized)

	// An offer signed by the offeree's key.
	rec = newRecord(t, 1)
	offer := rec.ObjectOfType("offer")
	resign(t, offer, "offer_submission", rec.Buyer.AgentSigner)
	rep = run(rec)
	wantFailed(t, rep, "signer_party", offer["id"].(string), reason.EvidenceSignatureInvalid)
}

func TestWithoutKeys(t *testing.T) {
	rec := newRecord(t, 5)
	in := inputOf(rec)
	in.Keys = nil
	rep := verify.Verify(in, opts())
	noFailures(t, rep)
	for _, c := range rep.Checks {
		if c.Result == verify.Verified && (strings.HasPrefix(c.Name, "signature") || strings.HasPrefix(c.Name, "key_status") ||
			c.Name == "countersignature" || c.Name == "signer_party" || c.Name == "mandate_proof" ||
			c.Name == "mandate_authority" || c.Name == "policy_decision") {
			t.Errorf("%s %s verified without keys: %s", c.Name, c.Subject, c.Detail)
		}
	}
}

// The report never reduces to a boolean: no JSON true or false anywhere,
// no member that reads as a verdict, and a code only on failures.
func TestReportShape(t *testing.T) {
	rec := newRecord(t, 3)
	remove(rec, rec.EventIDs[1])
	rep := run(rec)
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case bool:
			t.Errorf("a boolean at %s", path)
		case map[string]any:
			for k, e := range x {
				switch k {
				case "ok", "valid", "passed", "pass", "success", "overall", "verdict":
					t.Errorf("member %q at %s", k, path)
				}
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	walk("", v)
	m := v.(map[string]any)
	for _, c := range m["checks"].([]any) {
		c := c.(map[string]any)
		if (c["result"] == "failed") != (c["code"] != nil) {
			t.Errorf("check %v: a code goes with failed and only with failed", c)
		}
	}
	var back verify.Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Checks, rep.Checks) {
		t.Error("checks do not survive a JSON round trip")
	}
	if rep.Results.Failed == 0 || rep.Results.Failed != len(rep.Failures()) {
		t.Errorf("results %+v", rep.Results)
	}
}
