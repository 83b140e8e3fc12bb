package authority

import (
	"context"
	"crypto"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/status"
)

// walkthroughJSON is the buyer's issue_mandate call of the published
// walkthrough, as an agent would send it; the identifier and the status
// endpoint are filled in by the test world.
const walkthroughJSON = `{
  "issuer": {"organization_id": "org_northstar", "principal_id": "prn_northstar_procurement_director", "key_id": "key_northstar_principal_01"},
  "subject": {"agent_id": "agt_northstar_buyer_01", "key_id": "key_northstar_agent_01"},
  "represented_organization_id": "org_northstar",
  "valid_from": "2026-08-20T00:00:00Z",
  "valid_until": "2026-09-20T00:00:00Z",
  "status_endpoint": "",
  "actions": ["offer.accept", "agreement.sign", "settlement.instruct"],
  "scope": {"transaction_ids": ["txn_calibration_demo_01"], "counterparty_organization_ids": ["org_delta"], "geographies": ["NL"]},
  "spending_limit": {"currency": "EUR", "amount": "4000.00"}
}`

func TestWalkthroughSpendingLimit(t *testing.T) {
	w := newWorld(t)
	req, err := ParseIssueRequest([]byte(walkthroughJSON))
	if err != nil {
		t.Fatal(err)
	}
	m := w.issue(req, w.buyer.principalSigner)
	want := []any{
		map[string]any{"id": "c_total_amount", "type": "commercial.decimal", "path": "$.proposed_terms.core.total.amount", "operator": "maximum", "value": "4000.00", "on_failure": "deny"},
		map[string]any{"id": "c_total_currency", "type": "commercial.string", "path": "$.proposed_terms.core.total.currency", "operator": "equals", "value": "EUR", "on_failure": "deny"},
	}
	if !reflect.DeepEqual(m["constraints"], want) {
		t.Fatalf("constraints %v", m["constraints"])
	}

	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Allow)

	r := w.evaluate(m, acceptAct("4800.00"), w.buyer.actor(), nil)
	wantDecision(t, r, Deny, reason.PolicyDenied)
	if len(r.ReasonCodes) != 1 {
		t.Fatalf("codes %v", r.ReasonCodes)
	}
	got := []ConstraintResult{{ID: r.Constraints[0].ID, Result: r.Constraints[0].Result, Code: r.Constraints[0].Code},
		{ID: r.Constraints[1].ID, Result: r.Constraints[1].Result, Code: r.Constraints[1].Code}}
	if !reflect.DeepEqual(got, []ConstraintResult{{ID: "c_total_amount", Result: Unsatisfied, Code: reason.PolicyDenied}, {ID: "c_total_currency", Result: Satisfied}}) {
		t.Fatalf("constraints %+v", r.Constraints)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "c_total_amount") {
		t.Fatalf("the refusal does not name the constraint: %v", err)
	}
}

func TestParseIssueRequestIsStrict(t *testing.T) {
	for name, body := range map[string]string{
		"unknown member":   strings.Replace(walkthroughJSON, `"actions"`, `"budget": "9", "actions"`, 1),
		"duplicate member": strings.Replace(walkthroughJSON, `"actions"`, `"valid_from": "2026-08-19T00:00:00Z", "actions"`, 1),
		"float":            strings.Replace(walkthroughJSON, `"spending_limit"`, `"delegation": {"allowed": true, "maximum_depth": 1.5}, "spending_limit"`, 1),
	} {
		if _, err := ParseIssueRequest([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestIssueSignsWithTheIssuerKeyOnly(t *testing.T) {
	w := newWorld(t)
	req := w.prepare(w.walkthroughRequest())
	if _, err := Issue(req, w.buyer.agentSigner, w.clock.Now()); err == nil {
		t.Fatal("signed by the agent's key")
	}
	m, err := Issue(req, w.buyer.principalSigner, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.ValidateMandate(m); err != nil {
		t.Fatal(err)
	}
	k, _ := w.keys.ResolveKey(context.Background(), w.buyer.principalKey)
	if err := signature.VerifyMandateProof(m, k.Public); err != nil {
		t.Fatal(err)
	}
	if id := m["id"].(string); id != req.MandateID {
		t.Fatalf("id %s", id)
	}
	req.MandateID = ""
	minted, _ := Issue(req, w.buyer.principalSigner, w.clock.Now())
	if id, _ := minted["id"].(string); !strings.HasPrefix(id, "mnd_") || len(id) != 28 {
		t.Fatalf("minted id %q", id)
	}
	// A root issued with a parent id would escape the narrowing proof.
	pid := "mnd_0123456789abcdef01234567"
	req.ParentMandateID = &pid
	if _, err := Issue(req, w.buyer.principalSigner, w.clock.Now()); err == nil {
		t.Fatal("a child was issued without proving narrowing")
	}
}

// staticStatus answers active for every mandate, as of now: the reference
// mandates name status endpoints in the reserved .invalid domain.
type staticStatus struct {
	clock  func() time.Time
	status string
}

func (s staticStatus) Resolve(_ context.Context, id, _ string) (status.Document, error) {
	now := s.clock().UTC().Truncate(time.Second)
	return status.Document{MandateID: id, Status: s.status, AsOf: now, ExpiresAt: now.Add(30 * time.Second)}, nil
}

// TestReferenceMandatesEvaluate: the two mandates the published reference
// issued verify, and the acts it evaluated under them (offer.accept by the
// buyer, offer.submit by the supplier, over the offer's terms) are allowed
// here with the same action_hash its policy decisions bind.
func TestReferenceMandatesEvaluate(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	read := func(p string) map[string]any {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := canonical.DecodeObject(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return m
	}
	bindings := read(filepath.Join(dir, "keys", "key-bindings.json"))
	ring := &keyring{keys: map[string]Key{}}
	recs, _ := filepath.Glob(filepath.Join(dir, "key_records", "*.json"))
	for _, p := range recs {
		rec := read(p)
		payload := rec["payload"].(map[string]any)
		pub, err := keys.ParseJWK(payload["public_key_jwk"])
		if err != nil {
			t.Fatal(err)
		}
		id := rec["id"].(string)
		holder, _ := bindings["agents"].(map[string]any)[id].(string)
		if holder == "" {
			holder, _ = bindings["principals"].(map[string]any)[id].(string)
		}
		ring.keys[id] = Key{Public: pub, OrganizationID: payload["controller_organization_id"].(string), HolderID: holder, Status: payload["status"].(string)}
	}
	var offer map[string]any
	decisions := map[string]string{} // mandate id + action hash -> policy decision id
	objs, _ := filepath.Glob(filepath.Join(dir, "objects", "*.json"))
	for _, p := range objs {
		o := read(p)
		switch o["object_type"] {
		case "offer":
			offer = o
		case "policy_decision":
			cb := o["created_by"].(map[string]any)
			decisions[cb["mandate_id"].(string)+" "+o["payload"].(map[string]any)["action_hash"].(string)] = o["id"].(string)
		}
	}
	if offer == nil || len(ring.keys) != 4 {
		t.Fatalf("reference vectors incomplete: offer %v, %d keys", offer != nil, len(ring.keys))
	}
	terms := offer["payload"].(map[string]any)["terms"].(map[string]any)
	txnID := offer["transaction_id"].(string)
	clock := func() time.Time { return time.Date(2026, 12, 2, 13, 23, 39, 0, time.UTC) }
	ev := &Evaluator{Keys: ring, Status: staticStatus{clock, status.Active}, Clock: clock}

	mandates, _ := filepath.Glob(filepath.Join(dir, "mandates", "*.json"))
	if len(mandates) != 2 {
		t.Fatalf("%d reference mandates", len(mandates))
	}
	for _, p := range mandates {
		m := read(p)
		iss := m["issuer"].(map[string]any)
		if err := signature.VerifyMandateProof(m, ring.keys[iss["key_id"].(string)].Public); err != nil {
			t.Fatalf("%s: proof: %v", m["id"], err)
		}
		subj := m["subject"].(map[string]any)
		org := m["represented_organization_id"].(string)
		actor := Actor{OrganizationID: org, AgentID: subj["agent_id"].(string), KeyID: subj["key_id"].(string)}
		counterparty := m["scope"].(map[string]any)["counterparty_organization_ids"].([]any)[0].(string)
		action := ActOfferSubmit
		if org == orgBuyer {
			action = ActOfferAccept
		}
		act := ActDocument(action, txnID, counterparty, terms, nil)
		r := ev.Evaluate(context.Background(), Request{Mandate: m, Act: act, Actor: actor})
		wantDecision(t, r, Allow)
		if _, ok := decisions[m["id"].(string)+" "+r.ActionHash]; !ok {
			t.Errorf("%s: action hash %s matches no reference policy decision", m["id"], r.ActionHash)
		}
		// The same act over the limit, and under a suspended status.
		over := canonicalCopy(t, terms)
		over["core"].(map[string]any)["total"].(map[string]any)["amount"] = "4800.00"
		wantDecision(t, ev.Evaluate(context.Background(), Request{Mandate: m, Act: ActDocument(action, txnID, counterparty, over, nil), Actor: actor}), Deny, reason.PolicyDenied)
		suspended := &Evaluator{Keys: ring, Status: staticStatus{clock, status.Suspended}, Clock: clock}
		wantDecision(t, suspended.Evaluate(context.Background(), Request{Mandate: m, Act: act, Actor: actor}), Deny, reason.MandateInactive)
	}
}

func canonicalCopy(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	c, err := normalize(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRevokedMandateDeniedWithinSixtySeconds(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	act := acceptAct("3200.00")
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Allow)
	w.setStatus(m["id"].(string), status.Revoked, w.buyer.principalSigner)
	var deniedAfter time.Duration
	for step := time.Duration(0); step <= status.MaxAge; step += 10 * time.Second {
		r := w.evaluate(m, act, w.buyer.actor(), nil)
		if r.Decision == Deny {
			wantDecision(t, r, Deny, reason.MandateInactive)
			deniedAfter = step
			break
		}
		w.clock.Advance(10 * time.Second)
		deniedAfter = step + 10*time.Second
	}
	if deniedAfter > status.MaxAge {
		t.Fatalf("still allowed %s after revocation", deniedAfter)
	}
}

// TestProofCacheKeysOnTheBytes: a mandate whose proof verified once is
// not verified again, but other bytes under the same id and proof are:
// the proof cache is keyed by the document's canonical digest and the
// key, never by its id.
func TestProofCacheKeysOnTheBytes(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	act := acceptAct("3200.00")
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Allow)
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Allow) // from the cache
	forged, err := normalize(m)
	if err != nil {
		t.Fatal(err)
	}
	forged["scope"].(map[string]any)["geographies"] = []any{"NL", "DE"}
	wantDecision(t, w.evaluate(forged, act, w.buyer.actor(), nil), Deny, reason.EvidenceSignatureInvalid)
}

// TestMandateBytes: a mandate evaluated with the canonical bytes it was
// decoded from gives the evaluation it gives without them, allow and
// deny alike, and its proof is remembered under the same key (the bytes
// are hashed instead of the document being encoded again).
func TestMandateBytes(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	b, err := canonical.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := canonical.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	var decisions []Decision
	for _, amount := range []string{"3200.00", "9999.00"} {
		act := acceptAct(amount)
		without := w.evaluate(decoded, act, w.buyer.actor(), nil)
		with := w.ev.Evaluate(context.Background(), Request{Mandate: decoded, MandateBytes: b, Act: act, Actor: w.buyer.actor()})
		if !reflect.DeepEqual(without, with) {
			t.Fatalf("%s: with the bytes\n%+v\nwithout\n%+v", amount, with, without)
		}
		decisions = append(decisions, with.Decision)
	}
	if decisions[0] != Allow || decisions[1] == Allow {
		t.Fatalf("decisions %v: want an allow and a refusal", decisions)
	}
	_, d1, err := readMandateCachedFrom(decoded, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, d2, _ := readMandateCached(decoded); d1 != d2 {
		t.Fatal("the bytes and the encoded document are cached under different digests")
	}
}

func TestDeterministic(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.ApprovalRules = []map[string]any{largeCommitmentRule(600)}
	req.Constraints = []map[string]any{{"id": "c_units", "type": TypeString, "path": "$.proposed_terms.core.unit_code", "operator": OpOneOf, "value": []any{"H87", "EA"}, "on_failure": OnFailureDeny}}
	m := w.issue(req, w.buyer.principalSigner)
	for _, amount := range []string{"100.00", "3200.00", "4800.00"} {
		a := w.evaluate(m, acceptAct(amount), w.buyer.actor(), nil)
		b := w.evaluate(m, acceptAct(amount), w.buyer.actor(), nil)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two evaluations differ:\n%+v\n%+v", amount, a, b)
		}
	}
}

func TestActAndProfileChecks(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	bad := acceptAct("3200.00")
	delete(bad, "transaction_id")
	wantDecision(t, w.evaluate(m, bad, w.buyer.actor(), nil), Deny, reason.TermsInvalid)
	withNull := acceptAct("3200.00")
	withNull["message"] = nil
	wantDecision(t, w.evaluate(m, withNull, w.buyer.actor(), nil), Deny, reason.TermsInvalid)
	float := acceptAct("3200.00")
	float["amount"] = 3200.5
	wantDecision(t, w.evaluate(m, float, w.buyer.actor(), nil), Deny, reason.TermsInvalid)

	unknown := terms("3200.00")
	unknown["profile"] = "a202-profile/calibration-service/0.2"
	wantDecision(t, w.evaluate(m, ActDocument(ActOfferAccept, txn, orgSupplier, unknown, map[string]any{"geography": "NL"}), w.buyer.actor(), nil), Deny, reason.ProfileUnknown)
	invalid := terms("3200.00")
	invalid["profile_terms"].(map[string]any)["payment"].(map[string]any)["prepayment_percent"] = "150"
	wantDecision(t, w.evaluate(m, ActDocument(ActOfferAccept, txn, orgSupplier, invalid, map[string]any{"geography": "NL"}), w.buyer.actor(), nil), Deny, reason.ProfileTermsInvalid)
	// An act with core-only terms (an obligation act) names no profile.
	core := map[string]any{"core": map[string]any{"quantity": "20", "unit_code": "H87", "total": map[string]any{"currency": "EUR", "amount": "3200.00"}}}
	req := w.walkthroughRequest()
	req.Actions = append(req.Actions, ActObligationActivated)
	m2 := w.issue(req, w.buyer.principalSigner)
	act := ActDocument(ActObligationActivated, txn, orgSupplier, core, map[string]any{"agreement_id": "agr_0123456789abcdef01234567", "geography": "NL"})
	wantDecision(t, w.evaluate(m2, act, w.buyer.actor(), nil), Allow)
}

func TestSubjectBinding(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	act := acceptAct("3200.00")
	other := w.buyer.actor()
	other.AgentID = w.junior.agent
	wantDecision(t, w.evaluate(m, act, other, nil), Deny, reason.PolicyDenied)
	otherOrg := w.buyer.actor()
	otherOrg.OrganizationID = orgSupplier
	wantDecision(t, w.evaluate(m, act, otherOrg, nil), Deny, reason.PolicyDenied)
	// A subject key the resolver binds to someone else.
	w.keys.mu.Lock()
	k := w.keys.keys[w.buyer.agentKey]
	k.HolderID = w.junior.agent
	w.keys.keys[w.buyer.agentKey] = k
	w.keys.mu.Unlock()
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Deny, reason.PolicyDenied)
	// No resolvers at all: nothing is allowed.
	bare := &Evaluator{Clock: w.clock.Now}
	r := bare.Evaluate(context.Background(), Request{Mandate: m, Act: act, Actor: w.buyer.actor()})
	wantDecision(t, r, Deny, reason.EvidenceSignatureInvalid)
}

func TestSuspendedIssuerKeyDenies(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	w.keys.setStatus(w.buyer.principalKey, "suspended")
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Deny, reason.MandateInactive)
}

func TestDelegatedChain(t *testing.T) {
	w := newWorld(t)
	root, child := w.delegatedChain()
	r := w.evaluate(child, acceptAct("2500.00"), w.junior.actor(), nil)
	wantDecision(t, r, Allow)
	if !reflect.DeepEqual(r.MandateIDs, []string{child["id"].(string), root["id"].(string)}) {
		t.Fatalf("chain %v", r.MandateIDs)
	}
	over := w.evaluate(child, acceptAct("2600.00"), w.junior.actor(), nil)
	wantDecision(t, over, Deny, reason.PolicyDenied)
	if over.Constraints[0].MandateID != child["id"] || over.Constraints[0].Result != Unsatisfied {
		t.Fatalf("constraints %+v", over.Constraints)
	}
	// The parent's status reaches the child.
	w.setStatus(root["id"].(string), status.Suspended, w.buyer.principalSigner)
	w.clock.Advance(status.MaxAge)
	wantDecision(t, w.evaluate(child, acceptAct("2000.00"), w.junior.actor(), nil), Deny, reason.MandateInactive)
	w.setStatus(root["id"].(string), status.Active, w.buyer.principalSigner)
	w.clock.Advance(status.MaxAge)
	wantDecision(t, w.evaluate(child, acceptAct("2000.00"), w.junior.actor(), nil), Allow)
	// Without a way to resolve the parent, narrowing is unproved.
	noParents := *w.ev
	noParents.Mandates = nil
	wantDecision(t, noParents.Evaluate(context.Background(), Request{Mandate: child, Act: acceptAct("2000.00"), Actor: w.junior.actor()}), Deny, reason.MandateDelegationWidening)
	// A tampered parent breaks the chain.
	tampered := canonicalCopy(t, root)
	tampered["actions"] = append(tampered["actions"].([]any), ActOfferSubmit)
	w.mandates.put(tampered)
	wantDecision(t, w.evaluate(child, acceptAct("2000.00"), w.junior.actor(), nil), Deny, reason.EvidenceSignatureInvalid)
}

func TestChildIssuedOutsideTheParentsAuthority(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Delegation = &Delegation{Allowed: true, MaximumDepth: 1}
	root := w.issue(req, w.buyer.principalSigner)
	// Another principal of the same organisation, holding no authority
	// under the root, issues a child.
	rogue := w.newKey("key_northstar_principal_02", orgBuyer, "prn_northstar_office_manager")
	child := w.prepare(w.childRequest())
	child.Issuer = Issuer{OrganizationID: orgBuyer, PrincipalID: "prn_northstar_office_manager", KeyID: "key_northstar_principal_02"}
	pid := root["id"].(string)
	child.ParentMandateID = &pid
	_, err := IssueDelegated(child, root, rogue, w.clock.Now())
	wantRefusal(t, err, reason.MandateDelegationWidening)
	signed := w.signRaw(child, rogue)
	wantDecision(t, w.evaluate(signed, acceptAct("2000.00"), w.junior.actor(), nil), Deny, reason.MandateDelegationWidening)
}

func TestApprovalReleasesHold(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	if len(held.ApprovalRulesMatched) != 1 || held.ApprovalRulesMatched[0].RuleID != "a_large_commitment" || len(held.ActionHash) != 64 {
		t.Fatalf("held %+v", held)
	}
	appr := w.approve(held, w.buyer, 0)
	if err := schema.ValidateEnvelope(appr); err != nil {
		t.Fatal(err)
	}
	p := appr["payload"].(map[string]any)
	if p["expires_at"] != envelope.Timestamp(w.clock.Now().Add(600*time.Second)) || appr["signatures"].([]any)[0].(map[string]any)["key_id"] != w.buyer.principalKey {
		t.Fatalf("approval %v", appr)
	}
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), appr)
	wantDecision(t, r, Allow)
	if r.Approval != ApprovalVerified {
		t.Fatalf("approval %s", r.Approval)
	}
	// Below the rule's threshold nothing is held at all.
	wantDecision(t, w.evaluate(m, acceptAct("2999.99"), w.buyer.actor(), nil), Allow)
}

func TestApprovalRejectedKeepsHold(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	appr, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: txn, RequestedBy: w.buyer.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, Role: w.buyer.role},
		Decision: Rejected, Rules: held.ApprovalRulesMatched,
	}, w.buyer.principalSigner, w.keys, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), appr)
	wantDecision(t, r, RequireApproval, reason.ApprovalRequired)
	if r.Approval != ApprovalFailed {
		t.Fatalf("approval %s", r.Approval)
	}
}

func TestApprovalWrongRoleOrOrganisationKeepsHold(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	// NewApproval refuses an approver the rule does not name...
	_, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: txn, RequestedBy: w.buyer.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, Role: "office_manager"},
		Rules:    held.ApprovalRulesMatched,
	}, w.buyer.principalSigner, w.keys, w.clock.Now())
	wantRefusal(t, err, reason.ApprovalRequired)
	// ...and the evaluator refuses one made without naming the rules.
	wrongRole, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: txn, RequestedBy: w.buyer.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, Role: "office_manager"},
	}, w.buyer.principalSigner, w.keys, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), wrongRole), RequireApproval, reason.ApprovalRequired)
	// The counterparty's principal approving the buyer's act.
	otherOrg, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: txn, RequestedBy: w.supplier.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgSupplier, PrincipalID: w.supplier.principal, Role: "procurement_director"},
	}, w.supplier.principalSigner, w.keys, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), otherOrg)
	wantDecision(t, r, RequireApproval, reason.ApprovalRequired)
}

func TestApprovalFromAnotherTransactionKeepsHold(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	appr, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: "txn_calibration_demo_02", RequestedBy: w.buyer.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, Role: w.buyer.role},
		Rules:    held.ApprovalRulesMatched,
	}, w.buyer.principalSigner, w.keys, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), appr), RequireApproval, reason.StreamMismatch)
}

func TestApprovalByAgentKeyRefused(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	req := ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: txn, RequestedBy: w.buyer.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, Role: w.buyer.role},
		Rules:    held.ApprovalRulesMatched,
	}
	_, err := NewApproval(context.Background(), req, w.buyer.agentSigner, w.keys, w.clock.Now())
	wantRefusal(t, err, reason.ApprovalRequired)
	// Built by hand and signed by the agent under the director's name, it
	// releases nothing.
	forged, err := NewApproval(context.Background(), req, w.buyer.principalSigner, w.keys, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	forged["signatures"] = []any{}
	if err := signature.Sign(forged, w.buyer.agentSigner, "object_issuance", w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), forged)
	wantDecision(t, r, RequireApproval, reason.EvidenceSignatureInvalid)
}

func TestApprovalEditedReleasesNothing(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	appr := w.approve(held, w.buyer, 0)
	edited := canonicalCopy(t, appr)
	edited["payload"].(map[string]any)["expires_at"] = envelope.Timestamp(w.clock.Now().Add(500 * time.Second))
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), edited)
	wantDecision(t, r, RequireApproval, reason.EvidenceSignatureInvalid)
	// An approval living longer than the rule allows is refused at
	// construction.
	_, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash: held.ActionHash, TransactionID: txn, RequestedBy: w.buyer.requestedBy(m["id"].(string)),
		Approver: Approver{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, Role: w.buyer.role},
		Rules:    held.ApprovalRulesMatched, ExpiresAfter: 601 * time.Second,
	}, w.buyer.principalSigner, w.keys, w.clock.Now())
	wantRefusal(t, err, reason.ApprovalRequired)
}

func TestApprovalNeverReleasesDeny(t *testing.T) {
	w := newWorld(t)
	m, _ := w.heldAct()
	over := w.evaluate(m, acceptAct("9000.00"), w.buyer.actor(), nil)
	wantDecision(t, over, Deny, reason.PolicyDenied)
	appr := w.approve(over, w.buyer, 0)
	r := w.evaluate(m, acceptAct("9000.00"), w.buyer.actor(), appr)
	wantDecision(t, r, Deny, reason.PolicyDenied)
	if r.Approval != ApprovalNotApplicable {
		t.Fatalf("approval %s", r.Approval)
	}
}

func TestPolicyDecisionAllowTravels(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil)
	if _, err := NewSharedDecision(r, w.buyer.principalSigner, 1); err == nil {
		t.Fatal("a decision signed by the principal's key")
	}
	obj, err := NewSharedDecision(r, w.buyer.agentSigner, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := Shareable(obj); err != nil {
		t.Fatal(err)
	}
	if err := schema.ValidateEnvelope(obj); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"action_hash":     r.ActionHash,
		"decision":        "allow",
		"reason_codes":    []any{},
		"evaluated_at":    envelope.Timestamp(w.clock.Now()),
		"mandate_ids":     []any{m["id"]},
		"stream":          map[string]any{"kind": "transaction", "id": txn},
		"stream_sequence": decodeJSON(t, "3"),
		"visibility":      "transaction_parties",
	}
	if !reflect.DeepEqual(obj["payload"], want) {
		t.Fatalf("payload %v", obj["payload"])
	}
	// Built in decoded form: decoding its bytes gives it again.
	if n, err := normalize(obj); err != nil || !reflect.DeepEqual(n, obj) {
		t.Fatalf("not what decoding its bytes gives (%v):\n%v\n%v", err, obj, n)
	}
	if h, _ := canonical.ContentHash(obj); h != obj["content_hash"] {
		t.Fatal("content hash")
	}
	pub := w.pub(w.buyer.agentKey)
	if err := signature.VerifyEntry(obj, 0, pub); err != nil {
		t.Fatal(err)
	}
	if e := obj["signatures"].([]any)[0].(map[string]any); e["purpose"] != "policy_decision" {
		t.Fatalf("purpose %v", e["purpose"])
	}
	if err := FreshEnough(obj, w.clock.Now().Add(DecisionFreshness)); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, FreshEnough(obj, w.clock.Now().Add(DecisionFreshness+time.Second)), reason.MandateStatusUnresolved)
	wantRefusal(t, FreshEnough(obj, w.clock.Now().Add(-ClockSkew-time.Second)), reason.MandateStatusUnresolved)
	// In an answer: made after the act it answers, however long ago.
	now := w.clock.Now()
	if err := DecidedSince(obj, now.Add(-time.Second), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, DecidedSince(obj, now.Add(ClockSkew+time.Second), now.Add(time.Hour)), reason.MandateStatusUnresolved)
	wantRefusal(t, DecidedSince(obj, now.Add(-time.Hour), now.Add(-ClockSkew-time.Second)), reason.MandateStatusUnresolved)
}

func TestPolicyDecisionDenyStaysPrivate(t *testing.T) {
	w := newWorld(t)
	m, _ := w.heldAct()
	for _, amount := range []string{"4800.00", "3200.00"} { // a deny and a hold
		r := w.evaluate(m, acceptAct(amount), w.buyer.actor(), nil)
		if r.Decision == Allow {
			t.Fatalf("%s allowed", amount)
		}
		_, err := NewSharedDecision(r, w.buyer.agentSigner, 4)
		wantRefusal(t, err, reason.DisclosureDenied)
		obj, err := NewPolicyDecision(r, w.buyer.agentSigner, 4)
		if err != nil {
			t.Fatal(err)
		}
		p := obj["payload"].(map[string]any)
		if p["visibility"] != "private_to_actor" || p["stream"].(map[string]any)["kind"] != "private" || p["stream_sequence"] != decodeJSON(t, "0") || len(p["reason_codes"].([]any)) == 0 {
			t.Fatalf("payload %v", p)
		}
		if err := schema.ValidateEnvelope(obj); err != nil {
			t.Fatal(err)
		}
		wantRefusal(t, Shareable(obj), reason.DisclosureDenied)
		// Relabelled as shared, a deny is still a deny.
		p["visibility"] = "transaction_parties"
		p["stream"] = map[string]any{"kind": "transaction", "id": txn}
		wantRefusal(t, Shareable(obj), reason.DisclosureDenied)
	}
}

func (w *world) pub(keyID string) crypto.PublicKey {
	k, err := w.keys.ResolveKey(context.Background(), keyID)
	if err != nil {
		w.t.Fatal(err)
	}
	return k.Public
}
