package authority

// The required negative tests of commercial mandate §12, items 1–26, one
// test each. 1–8 are refused before signing (issuance and the gate) and,
// where a signed document can carry the defect, again by the evaluator;
// 9–26 run against the evaluator with real signed mandates and a live HTTPS
// status endpoint whose certificate is pinned.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/status"
)

// refusedAtIssue asserts Issue refuses req with code and signs nothing, and
// that the same document signed anyway is denied with code at evaluation.
func refusedAtIssue(t *testing.T, w *world, req IssueRequest, code reason.Code) {
	t.Helper()
	req = w.prepare(req)
	m, err := Issue(req, w.buyer.principalSigner, w.clock.Now())
	if m != nil {
		t.Fatal("a refused mandate was returned")
	}
	wantRefusal(t, err, code)
	signed := w.signRaw(req, w.buyer.principalSigner)
	r := w.evaluate(signed, acceptAct("3200.00"), w.buyer.actor(), nil)
	wantDecision(t, r, Deny, code)
}

func TestMandateNegative01_EmptyConstraints(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.SpendingLimit = nil
	refusedAtIssue(t, w, req, reason.MandateUnbounded)
}

func TestMandateNegative02_GeographyOnlyScope(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Scope = map[string]any{"geographies": []any{"NL"}}
	refusedAtIssue(t, w, req, reason.MandateScopeTooBroad)
}

func TestMandateNegative03_IncoherentDelegation(t *testing.T) {
	for _, d := range []Delegation{{Allowed: true, MaximumDepth: 0}, {Allowed: false, MaximumDepth: 2}} {
		w := newWorld(t)
		req := w.walkthroughRequest()
		req.Delegation = &d
		refusedAtIssue(t, w, req, reason.MandateDelegationIncoherent)
	}
}

func TestMandateNegative04_InvertedInterval(t *testing.T) {
	for _, until := range []string{validFrom, "2026-08-19T00:00:00Z"} {
		w := newWorld(t)
		req := w.walkthroughRequest()
		req.ValidUntil = until
		refusedAtIssue(t, w, req, reason.MandateIntervalInvalid)
	}
}

func TestMandateNegative05_PlainHTTPStatusEndpoint(t *testing.T) {
	w := newWorld(t)
	var contacted bool
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { contacted = true }))
	defer plain.Close()
	req := w.walkthroughRequest()
	req.MandateID = "mnd_0123456789abcdef01234567"
	req.StatusEndpoint = status.EndpointFor(plain.URL, req.MandateID)
	refusedAtIssue(t, w, req, reason.MandateStatusInsecure)
	if contacted {
		t.Fatal("the plain-HTTP status endpoint was contacted")
	}
}

func TestMandateNegative06_UnknownConstraintType(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Constraints = []map[string]any{{
		"id": "c_discount", "type": "commercial.percent", "path": "$.proposed_terms.core.total.amount",
		"operator": "maximum", "value": "10", "on_failure": "deny",
	}}
	refusedAtIssue(t, w, req, reason.MandateConstraintUnknown)
	// The runtime layer on its own, with the schema and gate bypassed.
	r := runConstraintsOnly(t, req.Constraints[0], acceptAct("3200.00"))
	wantDecision(t, r, Deny, reason.MandateConstraintUnknown)
}

func TestMandateNegative07_UnknownConstraintOperator(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Constraints = []map[string]any{{
		"id": "c_amount_near", "type": "commercial.decimal", "path": "$.proposed_terms.core.total.amount",
		"operator": "approximately", "value": "3200.00", "on_failure": "deny",
	}}
	refusedAtIssue(t, w, req, reason.MandateConstraintUnknown)
	r := runConstraintsOnly(t, req.Constraints[0], acceptAct("3200.00"))
	wantDecision(t, r, Deny, reason.MandateConstraintUnknown)
}

func TestMandateNegative08_AmbiguousSubject(t *testing.T) {
	for _, subj := range []Subject{
		{AgentID: "agt_northstar_buyer_01", PrincipalID: "prn_northstar_procurement_director", KeyID: "key_northstar_agent_01"},
		{KeyID: "key_northstar_agent_01"},
	} {
		w := newWorld(t)
		req := w.walkthroughRequest()
		req.Subject = subj
		refusedAtIssue(t, w, req, reason.MandateSubjectAmbiguous)
	}
}

func TestMandateNegative09_InvalidIssuerSignature(t *testing.T) {
	w := newWorld(t)
	// A signed mandate whose limit was raised afterwards.
	tampered := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	tampered["constraints"].([]any)[0].(map[string]any)["value"] = "40000.00"
	// A mandate naming the principal's key but signed by another key.
	forger := w.newKey("key_forger_01", orgBuyer, "prn_forger")
	forged := w.signRaw(w.walkthroughRequest(), renamed{forger, w.buyer.principalKey})
	// A mandate signed by the acting agent's own key under its own name.
	req := w.walkthroughRequest()
	req.Issuer.KeyID = w.buyer.agentKey
	selfIssued := w.signRaw(req, w.buyer.agentSigner)

	before := w.hits.Load()
	for name, m := range map[string]map[string]any{"tampered": tampered, "forged": forged, "self-issued": selfIssued} {
		r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil)
		if r.Decision != Deny || !hasCode(r, reason.EvidenceSignatureInvalid) {
			t.Errorf("%s: %s %v", name, r.Decision, r.ReasonCodes)
		}
	}
	if w.hits.Load() != before {
		t.Fatal("the status endpoint of a mandate whose proof fails was contacted")
	}
}

// renamed signs with one key under another key's id, as a forger would.
type renamed struct {
	signature.Signer
	id string
}

func (r renamed) KeyID() string { return r.id }

func TestMandateNegative10_SubjectKeyMismatch(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	// The act is signed with another live key of the same organisation.
	actor := w.buyer.actor()
	actor.KeyID = w.junior.agentKey
	r := w.evaluate(m, acceptAct("3200.00"), actor, nil)
	wantDecision(t, r, Deny, reason.PolicyDenied)
	// Under the right key the same act is allowed.
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Allow)
}

func TestMandateNegative11_ExpiredRootMandate(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.ValidUntil = "2026-08-20T10:05:00Z"
	m := w.issue(req, w.buyer.principalSigner)
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Allow)
	w.clock.Advance(5 * time.Minute) // now == valid_until: the interval is half-open
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Deny, reason.MandateInactive)
}

func TestMandateNegative12_SuspendedChildMandate(t *testing.T) {
	w := newWorld(t)
	root, child := w.delegatedChain()
	act := acceptAct("2000.00")
	wantDecision(t, w.evaluate(child, act, w.junior.actor(), nil), Allow)
	w.setStatus(child["id"].(string), status.Suspended, w.buyer.principalSigner)
	w.clock.Advance(status.MaxAge)
	r := w.evaluate(child, act, w.junior.actor(), nil)
	wantDecision(t, r, Deny, reason.MandateInactive)
	// The root itself is untouched.
	wantDecision(t, w.evaluate(root, acceptAct("2000.00"), w.buyer.actor(), nil), Allow)
}

func TestMandateNegative13_RevokedAgentKey(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	w.keys.setStatus(w.buyer.agentKey, "revoked")
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Deny, reason.MandateInactive)
}

func TestMandateNegative14_MissingAction(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	act := ActDocument(ActOfferSubmit, txn, orgSupplier, terms("3200.00"), map[string]any{"geography": "NL"})
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Deny, reason.PolicyDenied)
}

func TestMandateNegative15_CounterpartyOutsideScope(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	act := ActDocument(ActOfferAccept, txn, "org_meridian", terms("3200.00"), map[string]any{"geography": "NL"})
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Deny, reason.PolicyDenied)
	noCounterparty := ActDocument(ActOfferAccept, txn, "", terms("3200.00"), map[string]any{"geography": "NL"})
	wantDecision(t, w.evaluate(m, noCounterparty, w.buyer.actor(), nil), Deny, reason.PolicyDenied)
}

func TestMandateNegative16_CategoryOutsideScope(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Scope["categories"] = []any{"services.calibration"}
	m := w.issue(req, w.buyer.principalSigner)
	in := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), map[string]any{"geography": "NL", "category": "services.calibration"})
	wantDecision(t, w.evaluate(m, in, w.buyer.actor(), nil), Allow)
	out := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), map[string]any{"geography": "NL", "category": "services.freight"})
	wantDecision(t, w.evaluate(m, out, w.buyer.actor(), nil), Deny, reason.PolicyDenied)
	// An act naming no category is outside a stated category bound.
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Deny, reason.PolicyDenied)
}

func TestMandateNegative17_AmountOverLimit(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	r := w.evaluate(m, acceptAct("4000.01"), w.buyer.actor(), nil)
	wantDecision(t, r, Deny, reason.PolicyDenied)
	if ids := r.DeniedBy(); len(ids) != 1 || ids[0] != "c_total_amount" {
		t.Fatalf("denied by %v", ids)
	}
	wantDecision(t, w.evaluate(m, acceptAct("4000.00"), w.buyer.actor(), nil), Allow) // maximum is inclusive
	// The same limit with on_failure require_approval holds instead.
	req := w.walkthroughRequest()
	req.SpendingLimit = nil
	req.Constraints = []map[string]any{{
		"id": "c_total_amount", "type": TypeDecimal, "path": "$.proposed_terms.core.total.amount",
		"operator": OpMaximum, "value": "4000.00", "on_failure": OnFailureRequireApproval,
	}}
	held := w.evaluate(w.issue(req, w.buyer.principalSigner), acceptAct("4800.00"), w.buyer.actor(), nil)
	wantDecision(t, held, RequireApproval, reason.ApprovalRequired)
}

func TestMandateNegative18_PrepaymentOverLimit(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Constraints = []map[string]any{{
		"id": "c_prepayment", "type": TypeDecimal, "path": "$.proposed_terms.profile_terms.payment.prepayment_percent",
		"operator": OpMaximum, "value": "20", "on_failure": OnFailureDeny,
	}}
	m := w.issue(req, w.buyer.principalSigner)
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil), Allow) // "20" meets "20"
	tm := terms("3200.00")
	tm["profile_terms"].(map[string]any)["payment"].(map[string]any)["prepayment_percent"] = "30.5"
	r := w.evaluate(m, ActDocument(ActOfferAccept, txn, orgSupplier, tm, map[string]any{"geography": "NL"}), w.buyer.actor(), nil)
	wantDecision(t, r, Deny, reason.PolicyDenied)
	if ids := r.DeniedBy(); len(ids) != 1 || ids[0] != "c_prepayment" {
		t.Fatalf("denied by %v", ids)
	}
}

func TestMandateNegative19_ProhibitedDisclosurePath(t *testing.T) {
	w := newWorld(t)
	req := w.walkthroughRequest()
	req.Constraints = []map[string]any{{
		"id": "c_budget_disclosure", "type": TypeDisclosure, "path": "$.message.private_budget_ceiling",
		"operator": OpAbsent, "value": true, "on_failure": OnFailureDeny,
	}}
	m := w.issue(req, w.buyer.principalSigner)
	quiet := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), map[string]any{"geography": "NL", "message": map[string]any{"note": "ready"}})
	wantDecision(t, w.evaluate(m, quiet, w.buyer.actor(), nil), Allow)
	leaky := ActDocument(ActOfferAccept, txn, orgSupplier, terms("3200.00"), map[string]any{"geography": "NL", "message": map[string]any{"private_budget_ceiling": "5000.00"}})
	r := w.evaluate(m, leaky, w.buyer.actor(), nil)
	wantDecision(t, r, Deny, reason.PolicyDenied)
	if ids := r.DeniedBy(); len(ids) != 1 || ids[0] != "c_budget_disclosure" {
		t.Fatalf("denied by %v", ids)
	}
}

// widenedChild asserts IssueDelegated refuses the child with
// A202-MANDATE-DELEGATION-WIDENING, then that the same child signed anyway
// is denied at evaluation with the same code.
func widenedChild(t *testing.T, edit func(*IssueRequest)) {
	t.Helper()
	w := newWorld(t)
	root, _ := w.delegatedChain()
	req := w.prepare(w.childRequest())
	edit(&req)
	pid := root["id"].(string)
	req.ParentMandateID = &pid
	m, err := IssueDelegated(req, root, w.buyer.principalSigner, w.clock.Now())
	if m != nil {
		t.Fatal("a widening child was returned")
	}
	wantRefusal(t, err, reason.MandateDelegationWidening)
	signed := w.signRaw(req, w.buyer.principalSigner)
	wantDecision(t, w.evaluate(signed, acceptAct("2000.00"), w.junior.actor(), nil), Deny, reason.MandateDelegationWidening)
}

func TestMandateNegative20_ChildValidityExceedsParent(t *testing.T) {
	widenedChild(t, func(r *IssueRequest) { r.ValidUntil = "2026-09-21T00:00:00Z" })
}

func TestMandateNegative21_ChildActionAbsentFromParent(t *testing.T) {
	widenedChild(t, func(r *IssueRequest) { r.Actions = append(r.Actions, ActOfferSubmit) })
}

func TestMandateNegative22_ChildConstraintLoosensLimit(t *testing.T) {
	widenedChild(t, func(r *IssueRequest) { r.SpendingLimit = &SpendingLimit{Currency: "EUR", Amount: "4000.01"} })
}

func TestMandateNegative23_ApprovalExpired(t *testing.T) {
	w := newWorld(t)
	m, held := w.heldAct()
	appr := w.approve(held, w.buyer, 0)
	wantDecision(t, w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), appr), Allow)
	w.clock.Advance(10 * time.Minute) // the rule's expires_after_seconds is 600
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), appr)
	wantDecision(t, r, RequireApproval, reason.ApprovalRequired)
	if r.Approval != ApprovalFailed {
		t.Fatalf("approval %s", r.Approval)
	}
}

func TestMandateNegative24_ApprovalActionHashMismatch(t *testing.T) {
	w := newWorld(t)
	m, _ := w.heldAct()
	// An approval of a one-cent different act.
	other := w.evaluate(m, acceptAct("3200.01"), w.buyer.actor(), nil)
	appr := w.approve(other, w.buyer, 0)
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), appr)
	wantDecision(t, r, RequireApproval, reason.ApprovalHashMismatch)
}

func TestMandateNegative25_RevokedBetweenProposalAndAppend(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	act := acceptAct("3200.00")
	proposal := w.evaluate(m, act, w.buyer.actor(), nil)
	wantDecision(t, proposal, Allow)
	decision, err := NewSharedDecision(proposal, w.buyer.agentSigner, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Second)
	w.setStatus(m["id"].(string), status.Revoked, w.buyer.principalSigner)
	// At append time, within 60 s of the revocation, the act is refused...
	w.clock.Advance(status.MaxAge - time.Second)
	wantDecision(t, w.evaluate(m, act, w.buyer.actor(), nil), Deny, reason.MandateInactive)
	// ...and the proposal's decision is too old to record anything by.
	w.clock.Advance(time.Second)
	wantRefusal(t, FreshEnough(decision, w.clock.Now()), reason.MandateStatusUnresolved)
}

func TestMandateNegative26_StatusUnreachable(t *testing.T) {
	w := newWorld(t)
	m := w.issue(w.walkthroughRequest(), w.buyer.principalSigner)
	w.srv.Close()
	r := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil)
	wantDecision(t, r, Deny, reason.MandateStatusUnresolved)
	if len(r.ReasonCodes) != 1 {
		t.Fatalf("codes %v: nothing but the status failed", r.ReasonCodes)
	}
}

// delegatedChain issues a root for the buyer agent that allows one level of
// delegation, and a child for the junior agent narrowed to offer.accept up
// to 2500.00 EUR.
func (w *world) delegatedChain() (root, child map[string]any) {
	req := w.walkthroughRequest()
	req.Delegation = &Delegation{Allowed: true, MaximumDepth: 1}
	root = w.issue(req, w.buyer.principalSigner)
	child = w.issueChild(w.childRequest(), root, w.buyer.principalSigner)
	return root, child
}

func (w *world) childRequest() IssueRequest {
	req := w.walkthroughRequest()
	req.Subject = Subject{AgentID: w.junior.agent, KeyID: w.junior.agentKey}
	req.ValidFrom = "2026-08-20T06:00:00Z"
	req.ValidUntil = "2026-09-10T00:00:00Z"
	req.Actions = []string{ActOfferAccept}
	req.SpendingLimit = &SpendingLimit{Currency: "EUR", Amount: "2500.00"}
	return req
}

// heldAct issues the walkthrough mandate with an approval rule holding any
// act of 3000.00 or more for the procurement director, for 600 seconds, and
// returns it with the held result for a 3200.00 acceptance.
func (w *world) heldAct() (map[string]any, Result) {
	req := w.walkthroughRequest()
	req.ApprovalRules = []map[string]any{largeCommitmentRule(600)}
	m := w.issue(req, w.buyer.principalSigner)
	held := w.evaluate(m, acceptAct("3200.00"), w.buyer.actor(), nil)
	wantDecision(w.t, held, RequireApproval, reason.ApprovalRequired)
	return m, held
}

func largeCommitmentRule(seconds int) map[string]any {
	return map[string]any{
		"id":                    "a_large_commitment",
		"when":                  map[string]any{"path": "$.proposed_terms.core.total.amount", "operator": OpMinimum, "value": "3000.00"},
		"approver":              map[string]any{"organization_id": orgBuyer, "role": "procurement_director"},
		"expires_after_seconds": seconds,
	}
}

// approve has p's principal approve the held result's act.
func (w *world) approve(held Result, p party, life time.Duration) map[string]any {
	w.t.Helper()
	appr, err := NewApproval(context.Background(), ApprovalRequest{
		ActionHash:    held.ActionHash,
		TransactionID: held.TransactionID,
		RequestedBy:   w.buyer.requestedBy(held.MandateIDs[0]),
		Approver:      Approver{OrganizationID: p.org, PrincipalID: p.principal, Role: p.role},
		Rules:         held.ApprovalRulesMatched,
		ExpiresAfter:  life,
	}, p.principalSigner, w.keys, w.clock.Now())
	if err != nil {
		w.t.Fatalf("approve: %v", err)
	}
	return appr
}

func hasCode(r Result, c reason.Code) bool {
	for _, x := range r.ReasonCodes {
		if x == c {
			return true
		}
	}
	return false
}

// runConstraintsOnly evaluates one constraint through the evaluator's
// constraint step alone, with no schema and no gate in front of it: the
// runtime layer mandate §4 requires to fail closed on its own.
func runConstraintsOnly(t *testing.T, c map[string]any, act map[string]any) Result {
	t.Helper()
	doc, _, err := readAct(act)
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{}
	r := &run{e: &Evaluator{}, ctx: context.Background(), now: t0, res: res, act: doc}
	r.checkConstraints(map[string]any{"id": "mnd_runtime_only_01", "constraints": []any{c}}, doc)
	res.Decision = decide(res.Findings)
	codes := []reason.Code{}
	for _, f := range res.Findings {
		codes = append(codes, f.Code)
	}
	res.ReasonCodes = reason.Normalize(codes)
	return *res
}

// TestPublishedMandateFixtures runs the static counterparts of tests 1–8
// and 20–22 (the published mandate and mandate_chain fixtures) through the
// evaluator's own static checks: each negative is refused with the code the
// manifest names, and the two positives pass.
func TestPublishedMandateFixtures(t *testing.T) {
	dir := spectest.FixturesDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "..", "..", "manifest-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := canonical.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string) map[string]any {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := canonical.DecodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	seen := 0
	for _, group := range []string{"positive", "negative"} {
		for _, e := range manifest[group].([]any) {
			c := e.(map[string]any)
			kind, name := c["kind"], c["fixture"].(string)
			code, _ := c["reason_code"].(string)
			switch kind {
			case "mandate":
				_, err := readMandate(load(name))
				if code == "" && err != nil {
					t.Errorf("%s: refused: %v", name, err)
				}
				if code != "" {
					wantRefusal(t, err, reason.Code(code))
				}
			case "mandate_chain":
				doc := load(name)
				problems := chainProblems(doc["parent"].(map[string]any), doc["child"].(map[string]any))
				if (len(problems) == 0) != (code == "") {
					t.Errorf("%s: problems %v, manifest code %q", name, problems, code)
				}
			default:
				continue
			}
			seen++
		}
	}
	if seen != 14 {
		t.Fatalf("%d mandate fixtures in the manifest, want 14", seen)
	}
}
