package authority

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
)

// Decision is the evaluator's answer about one act.
type Decision string

// The three decisions (commercial mandate §6 step 14).
const (
	Allow           Decision = "allow"
	Deny            Decision = "deny"
	RequireApproval Decision = "require_approval"
)

// Key is what a KeyResolver knows of one key.
type Key struct {
	// Public is the public key (P-256 *ecdsa.PublicKey or ed25519.PublicKey).
	Public crypto.PublicKey
	// OrganizationID is the organisation that controls the key.
	OrganizationID string
	// HolderID is the principal (prn_) or agent (agt_) the key belongs to.
	// A key whose holder is unknown cannot authenticate anyone.
	HolderID string
	// Status is "active", "suspended" or "revoked": the key's own status
	// combined with its holder's, so a suspended agent's key is suspended.
	Status string
}

// KeyResolver resolves key identifiers to keys and their bindings. The
// caller provides it from its pinned principal keys and the key_records they
// signed (decisions.md 14).
type KeyResolver interface {
	ResolveKey(ctx context.Context, keyID string) (Key, error)
}

// MandateResolver resolves a parent mandate by identifier. It is consulted
// only for delegated mandates.
type MandateResolver interface {
	ResolveMandate(ctx context.Context, mandateID string) (map[string]any, error)
}

// Actor is the party about to act: its organisation, the agent (or, for a
// mandate whose subject is a delegated principal, the principal), and the
// key its act is signed with.
type Actor struct {
	OrganizationID string `json:"organization_id"`
	AgentID        string `json:"agent_id,omitempty"`
	PrincipalID    string `json:"principal_id,omitempty"`
	KeyID          string `json:"key_id"`
}

// Request is one act to evaluate under one mandate.
type Request struct {
	// Mandate is the mandate the actor acts under (the leaf of its chain).
	Mandate map[string]any
	// MandateBytes, when the caller holds them, are the canonical bytes
	// Mandate was decoded from (a stored mandate): the evaluator's caches
	// are keyed by their hash, and Mandate is not encoded again to find
	// it. Decoding them must give Mandate; nil means Mandate is encoded.
	MandateBytes []byte
	// Act is the act document (decisions.md 6; see ActDocument).
	Act map[string]any
	// Actor is who acts.
	Actor Actor
	// Approval is a signed approval object that may release a
	// require_approval hold; nil when none is presented.
	Approval map[string]any
}

// Evaluator evaluates acts against mandates (commercial mandate §6). Its
// only inputs are the request and what its resolvers answer; it calls no
// model and reaches the network only through Status. The zero value denies
// everything: without Keys no signature verifies and without Status no
// mandate is active.
type Evaluator struct {
	// Keys resolves issuer, subject and approver keys.
	Keys KeyResolver
	// Mandates resolves parent mandates; nil means no chain can be proved.
	Mandates MandateResolver
	// Status resolves each mandate's live status (a *status.Client, or
	// package org's resolver, which reads its own mandates' from its
	// record).
	Status status.Resolver
	// Evidence answers evidence_verified; nil means no evidence verifies.
	Evidence EvidenceVerifier
	// Clock is the evaluation time (nil means time.Now). The result's
	// EvaluatedAt is this instant truncated to the second.
	Clock func() time.Time
	// Policy is the acting organisation's local, deny-only policy beside
	// its mandates (nil: none). It is asked about the acting mandate after
	// every constraint, and can only deny.
	Policy Policy
}

// Policy is a local policy a principal sets beside one of its own
// mandates, outside the signed document: a minimum conformance grade of
// the counterparty, say (docs/authority.md, "Local policy"). It can only
// add reasons to deny, never allow or hold an act, so whatever it allows
// the mandate alone allows too, and a counterparty re-evaluating an act
// under the mandate (which it cannot see the policy of) never denies what
// the actor allowed.
type Policy interface {
	// Deny returns why the local policy of mandateID denies the act
	// document act; none when it does not (or sets no policy).
	Deny(ctx context.Context, mandateID string, act map[string]any) []string
}

// Uncached returns a copy of e whose status resolver, when it offers one
// (a *status.Client does), fetches every status at the moment of asking
// instead of answering from its cache.
func (e *Evaluator) Uncached() *Evaluator {
	c := *e
	if u, ok := e.Status.(interface{ Uncached() status.Resolver }); ok {
		c.Status = u.Uncached()
	}
	return &c
}

// Step names used in Finding.Step, in evaluation order.
const (
	StepAct          = "act"
	StepSchema       = "schema"
	StepSubject      = "subject"
	StepSignature    = "signature"
	StepStatus       = "status"
	StepInterval     = "interval"
	StepChain        = "chain"
	StepAction       = "action"
	StepScope        = "scope"
	StepProfile      = "profile"
	StepConstraint   = "constraint"
	StepApprovalRule = "approval_rule"
	StepApproval     = "approval"
	StepPolicy       = "policy"
	// StepBudget is not one of the evaluator's steps: the acting instance
	// adds it to a result when one of its budgets holds the act (package
	// budget), so that the hold is filed for approval like any other.
	StepBudget = "budget"
)

// Finding is one reason behind a decision other than allow.
type Finding struct {
	Step      string      `json:"step"`
	MandateID string      `json:"mandate_id,omitempty"`
	Code      reason.Code `json:"code"`
	// Hold marks a finding that holds the act for approval rather than
	// denying it.
	Hold   bool   `json:"hold,omitempty"`
	Detail string `json:"detail"`
}

// ConstraintResult is the evaluation of one constraint.
type ConstraintResult struct {
	MandateID string      `json:"mandate_id"`
	ID        string      `json:"id"`
	Type      string      `json:"type"`
	Path      string      `json:"path"`
	Operator  string      `json:"operator"`
	OnFailure string      `json:"on_failure"`
	Result    Outcome     `json:"result"`
	Code      reason.Code `json:"code,omitempty"`
	Detail    string      `json:"detail,omitempty"`
}

// MatchedRule is one approval rule whose `when` matched the act.
type MatchedRule struct {
	MandateID              string `json:"mandate_id"`
	RuleID                 string `json:"rule_id"`
	ApproverOrganizationID string `json:"approver_organization_id"`
	ApproverRole           string `json:"approver_role"`
	ExpiresAfterSeconds    int64  `json:"expires_after_seconds"`
}

// ApprovalOutcome says what became of a presented approval.
type ApprovalOutcome string

// Approval outcomes.
const (
	ApprovalNotPresented  ApprovalOutcome = "not_presented"
	ApprovalVerified      ApprovalOutcome = "verified"
	ApprovalFailed        ApprovalOutcome = "failed"
	ApprovalNotApplicable ApprovalOutcome = "not_applicable"
)

// Result is the evaluator's answer about one act.
type Result struct {
	Decision Decision `json:"decision"`
	// ReasonCodes are the registered codes behind the decision, sorted,
	// without duplicates; empty for allow.
	ReasonCodes []reason.Code `json:"reason_codes"`
	// ActionHash is the act document's action_hash ("" when the act could
	// not be read).
	ActionHash    string `json:"action_hash"`
	TransactionID string `json:"transaction_id,omitempty"`
	// MandateIDs is the chain: the acting mandate first, then each parent
	// up to the root, as far as it was resolved.
	MandateIDs  []string  `json:"mandate_ids"`
	Actor       Actor     `json:"actor"`
	EvaluatedAt time.Time `json:"evaluated_at"`
	// Constraints holds every constraint of every mandate in the chain, in
	// chain order and, within a mandate, document order.
	Constraints          []ConstraintResult `json:"constraints"`
	ApprovalRulesMatched []MatchedRule      `json:"approval_rules_matched"`
	Approval             ApprovalOutcome    `json:"approval"`
	Findings             []Finding          `json:"findings"`
}

// DeniedBy returns the ids of the constraints that denied the act
// (unsatisfied with on_failure deny, or unevaluable).
func (r Result) DeniedBy() []string {
	var ids []string
	for _, c := range r.Constraints {
		if c.Result == Unevaluable || (c.Result == Unsatisfied && c.OnFailure == OnFailureDeny) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Err returns nil for allow and otherwise a *reason.Refusal carrying the
// reason codes, whose detail names every finding (so a deny by a
// constraint names the constraint's id).
func (r Result) Err() error {
	if r.Decision == Allow {
		return nil
	}
	parts := make([]string, 0, len(r.Findings))
	for _, f := range r.Findings {
		parts = append(parts, f.Detail)
	}
	return reason.Refuse(string(r.Decision)+": "+strings.Join(parts, "; "), r.ReasonCodes...)
}

// maxChainLength bounds a delegation chain: depth is at most 8 (mandate
// schema delegation.maximum_depth), so at most 9 mandates.
const maxChainLength = 9

// run is one evaluation in progress.
type run struct {
	e   *Evaluator
	ctx context.Context
	now time.Time
	res *Result
	// act and leaf are the normalized act and acting mandate, once read.
	act, leaf map[string]any
}

func (r *run) deny(step, mandateID string, code reason.Code, format string, args ...any) {
	r.res.Findings = append(r.res.Findings, Finding{Step: step, MandateID: mandateID, Code: code, Detail: fmt.Sprintf(format, args...)})
}

func (r *run) hold(step, mandateID string, format string, args ...any) {
	r.res.Findings = append(r.res.Findings, Finding{Step: step, MandateID: mandateID, Code: reason.ApprovalRequired, Hold: true, Detail: fmt.Sprintf(format, args...)})
}

// Evaluate decides one act (commercial mandate §6 steps 1–12 and 14; step
// 13, the transaction-state guard, belongs to the caller's state machine,
// and step 15 to NewPolicyDecision and the caller's store). The package
// documentation lists what each step checks and which code it gives.
//
// Every failure is a deny in the result, never an error: there is no way to
// call Evaluate and get an allow by ignoring something.
func (e *Evaluator) Evaluate(ctx context.Context, req Request) Result {
	clock := e.Clock
	if clock == nil {
		clock = time.Now
	}
	now := clock().UTC().Truncate(time.Second)
	res := Result{
		Actor:       req.Actor,
		EvaluatedAt: now,
		Approval:    ApprovalNotPresented,
	}
	if req.Approval != nil {
		res.Approval = ApprovalNotApplicable
	}
	r := &run{e: e, ctx: ctx, now: now, res: &res}
	r.evaluate(req)
	return r.finish(req)
}

func (r *run) evaluate(req Request) {
	// Step 1: the act, then the mandate.
	act, hash, err := readAct(req.Act)
	if err != nil {
		r.deny(StepAct, "", reason.TermsInvalid, "%v", err)
		return
	}
	r.act = act
	r.res.ActionHash = hash
	r.res.TransactionID, _ = act["transaction_id"].(string)

	leaf, leafDigest, err := readMandateCachedFrom(req.Mandate, req.MandateBytes)
	leafID, _ := leaf["id"].(string)
	if err != nil {
		r.deny(StepSchema, leafID, refusalCode(err, reason.PolicyDenied), "mandate %s: %v", leafID, err)
		return
	}
	r.leaf = leaf
	r.res.MandateIDs = []string{leafID}

	// Step 2: the subject is the actor, by id, organisation and key, and
	// the key is live.
	r.checkSubject(leaf, req.Actor)

	// Step 3: the issuer's signature. Nothing in a mandate whose proof
	// fails is trusted, its status endpoint least of all, so evaluation
	// stops here without touching the network.
	if !r.checkProof(leaf, leafDigest) {
		return
	}
	// Steps 4 and 5: live status and validity interval.
	r.checkLive(leaf)

	// Steps 6 and 7: every parent, and narrowing at every link.
	chain := r.resolveChain(leaf)

	// Steps 8 to 12 apply every mandate of the chain to the act: a child is
	// proved narrower than its parent, but the act must also sit inside
	// each link itself, and a parent's approval rules and require_approval
	// constraints, which narrowing does not carry down, still hold it.
	r.checkProfile(act)
	for _, m := range chain {
		id, _ := m["id"].(string)
		r.checkAction(m, id, act)
		r.checkScope(m, id, act)
	}
	for _, m := range chain {
		r.checkConstraints(m, act)
	}
	for _, m := range chain {
		r.checkRules(m, act)
	}
	// The acting mandate's local policy: deny only.
	if r.e.Policy != nil {
		for _, why := range r.e.Policy.Deny(r.ctx, leafID, act) {
			r.deny(StepPolicy, leafID, reason.PolicyDenied, "the local policy of mandate %s: %s", leafID, why)
		}
	}
}

// finish derives the decision from the findings and applies a presented
// approval to a hold.
func (r *run) finish(req Request) Result {
	res := r.res
	res.Decision = decide(res.Findings)
	if res.Decision == RequireApproval && req.Approval != nil {
		// A hold is only reached with the act and mandate read.
		problems := r.checkApproval(req.Approval)
		if len(problems) == 0 {
			res.Approval = ApprovalVerified
			kept := res.Findings[:0]
			for _, f := range res.Findings {
				if !f.Hold {
					kept = append(kept, f)
				}
			}
			res.Findings = kept
			res.Decision = decide(res.Findings)
		} else {
			res.Approval = ApprovalFailed
			for _, p := range problems {
				res.Findings = append(res.Findings, Finding{Step: StepApproval, Code: p.code, Hold: true, Detail: p.detail})
			}
		}
	}
	codes := make([]reason.Code, 0, len(res.Findings))
	for _, f := range res.Findings {
		codes = append(codes, f.Code)
	}
	res.ReasonCodes = reason.Normalize(codes)
	if res.ReasonCodes == nil {
		res.ReasonCodes = []reason.Code{}
	}
	if res.Constraints == nil {
		res.Constraints = []ConstraintResult{}
	}
	if res.ApprovalRulesMatched == nil {
		res.ApprovalRulesMatched = []MatchedRule{}
	}
	if res.MandateIDs == nil {
		res.MandateIDs = []string{}
	}
	return *res
}

func decide(findings []Finding) Decision {
	d := Allow
	for _, f := range findings {
		if !f.Hold {
			return Deny
		}
		d = RequireApproval
	}
	return d
}

// readAct normalizes an act document and returns it with its action_hash.
func readAct(act map[string]any) (map[string]any, string, error) {
	if act == nil {
		return nil, "", errors.New("no act document")
	}
	b, err := canonical.Marshal(act)
	if err != nil {
		return nil, "", fmt.Errorf("act document has no canonical form: %v", err)
	}
	// A document built of decoded values (every act this instance builds
	// or rebuilds from the record) is its own normal form; one that is not
	// (an agent's, decoded by a JSON library) is decoded from its
	// canonical bytes.
	doc := act
	if !canonical.Decoded(act) {
		if doc, err = canonical.DecodeObject(b); err != nil {
			return nil, "", fmt.Errorf("act document: %v", err)
		}
	}
	if err := checkAct(doc); err != nil {
		return nil, "", err
	}
	return doc, canonical.SHA256Hex(b), nil
}

// readMandate normalizes a mandate and applies the static checks (schema,
// gate, constraint forms). The returned map is usable for its id even on
// error.
func readMandate(m map[string]any) (map[string]any, error) {
	if m == nil {
		return map[string]any{}, errors.New("no mandate")
	}
	doc, err := normalize(m)
	if err != nil {
		return map[string]any{}, err
	}
	if err := checkMandateDocument(doc); err != nil {
		return doc, err
	}
	return doc, nil
}

// refusalCode returns the first code err carries, or def.
func refusalCode(err error, def reason.Code) reason.Code {
	if cs := reason.CodesOf(err); len(cs) > 0 {
		return cs[0]
	}
	return def
}

func (r *run) checkSubject(m map[string]any, a Actor) {
	id, _ := m["id"].(string)
	subj, _ := m["subject"].(map[string]any)
	agent, _ := subj["agent_id"].(string)
	principal, _ := subj["principal_id"].(string)
	key, _ := subj["key_id"].(string)
	org, _ := m["represented_organization_id"].(string)
	holder := agent
	if agent != "" {
		if a.AgentID != agent || a.PrincipalID != "" {
			r.deny(StepSubject, id, reason.PolicyDenied, "mandate %s names agent %s, not the actor %s", id, agent, actorName(a))
		}
	} else {
		holder = principal
		if a.PrincipalID != principal || a.AgentID != "" {
			r.deny(StepSubject, id, reason.PolicyDenied, "mandate %s names principal %s, not the actor %s", id, principal, actorName(a))
		}
	}
	if a.OrganizationID != org {
		r.deny(StepSubject, id, reason.PolicyDenied, "mandate %s represents %s, not the actor's organisation %s", id, org, a.OrganizationID)
	}
	if a.KeyID != key {
		r.deny(StepSubject, id, reason.PolicyDenied, "the act is signed with %s but mandate %s binds subject key %s", a.KeyID, id, key)
		return
	}
	if r.e.Keys == nil {
		r.deny(StepSubject, id, reason.EvidenceSignatureInvalid, "no key resolver: subject key %s cannot be authenticated", key)
		return
	}
	k, err := r.e.Keys.ResolveKey(r.ctx, key)
	if err != nil {
		r.deny(StepSubject, id, reason.EvidenceSignatureInvalid, "subject key %s does not resolve: %v", key, err)
		return
	}
	if k.HolderID != holder || k.OrganizationID != org {
		r.deny(StepSubject, id, reason.PolicyDenied, "subject key %s belongs to %s of %s, not %s of %s", key, k.HolderID, k.OrganizationID, holder, org)
	}
	if k.Status != envelope.KeyActive {
		r.deny(StepSubject, id, reason.MandateInactive, "subject key %s is %s", key, keyStatus(k.Status))
	}
}

func actorName(a Actor) string {
	if a.AgentID != "" {
		return a.AgentID
	}
	if a.PrincipalID != "" {
		return a.PrincipalID
	}
	return "(unnamed)"
}

func keyStatus(s string) string {
	if s == "" {
		return "of unknown status"
	}
	return s
}

// checkProof verifies m's proof under its issuer principal's key and
// reports whether it verified.
func (r *run) checkProof(m map[string]any, digest [32]byte) bool {
	id, _ := m["id"].(string)
	iss, _ := m["issuer"].(map[string]any)
	key, _ := iss["key_id"].(string)
	org, _ := iss["organization_id"].(string)
	principal, _ := iss["principal_id"].(string)
	if r.e.Keys == nil {
		r.deny(StepSignature, id, reason.EvidenceSignatureInvalid, "no key resolver: the proof of %s cannot be verified", id)
		return false
	}
	k, err := r.e.Keys.ResolveKey(r.ctx, key)
	if err != nil {
		r.deny(StepSignature, id, reason.EvidenceSignatureInvalid, "issuer key %s of %s does not resolve: %v", key, id, err)
		return false
	}
	if k.HolderID != principal || k.OrganizationID != org || !strings.HasPrefix(principal, "prn_") {
		r.deny(StepSignature, id, reason.EvidenceSignatureInvalid, "issuer key %s belongs to %s of %s, not the issuing principal %s of %s", key, k.HolderID, k.OrganizationID, principal, org)
		return false
	}
	pk, cacheable := proofKey(digest, k.Public)
	cacheable = cacheable && digest != [32]byte{} // a document read without its bytes is verified every time
	if !cacheable || !proofVerified(pk) {
		if err := signature.VerifyMandateProof(m, k.Public); err != nil {
			r.deny(StepSignature, id, reason.EvidenceSignatureInvalid, "proof of %s does not verify: %v", id, err)
			return false
		}
		if cacheable {
			rememberProof(pk)
		}
	}
	if k.Status != envelope.KeyActive {
		// Revoking a principal's key withdraws the authority it issued;
		// the principal re-issues under a live key.
		r.deny(StepSignature, id, reason.MandateInactive, "issuer key %s of %s is %s", key, id, keyStatus(k.Status))
	}
	if rep, _ := m["represented_organization_id"].(string); rep != org {
		r.deny(StepSignature, id, reason.PolicyDenied, "mandate %s is issued by a principal of %s for %s", id, org, rep)
	}
	return true
}

// checkLive resolves m's status (step 4) and checks its interval (step 5).
func (r *run) checkLive(m map[string]any) {
	id, _ := m["id"].(string)
	endpoint, _ := m["status_endpoint"].(string)
	if r.e.Status == nil {
		r.deny(StepStatus, id, reason.MandateStatusUnresolved, "no status resolver: the status of %s is unresolved", id)
	} else if doc, err := r.e.Status.Resolve(r.ctx, id, endpoint); err != nil {
		r.deny(StepStatus, id, reason.MandateStatusUnresolved, "status of %s unresolved: %v", id, err)
	} else if doc.MandateID != id {
		r.deny(StepStatus, id, reason.MandateStatusUnresolved, "status resolver answered about %s, not %s", doc.MandateID, id)
	} else if err := doc.Usable(r.now); err != nil {
		r.deny(StepStatus, id, reason.MandateStatusUnresolved, "%v", err)
	} else if !doc.Active() {
		r.deny(StepStatus, id, reason.MandateInactive, "mandate %s is %s", id, doc.Status)
	}
	from, ok1 := instantOf(m["valid_from"])
	until, ok2 := instantOf(m["valid_until"])
	switch {
	case !ok1 || !ok2:
		r.deny(StepInterval, id, reason.MandateInactive, "mandate %s has an unreadable validity interval", id)
	case r.now.Before(from):
		r.deny(StepInterval, id, reason.MandateInactive, "mandate %s is not valid until %s", id, m["valid_from"])
	case !r.now.Before(until):
		r.deny(StepInterval, id, reason.MandateInactive, "mandate %s expired at %s", id, m["valid_until"])
	}
}

// checkProfile resolves the act's transaction profile and validates its
// profile_terms (step 10). An act whose proposed_terms names no profile and
// carries no profile_terms (the core-only terms of an obligation act) has
// nothing to resolve.
func (r *run) checkProfile(act map[string]any) {
	terms, _ := act["proposed_terms"].(map[string]any)
	if terms == nil {
		return
	}
	rawProfile, hasProfile := terms["profile"]
	profileTerms, hasTerms := terms["profile_terms"]
	if !hasProfile && !hasTerms {
		return
	}
	profile, _ := rawProfile.(string)
	if !schema.ProfileKnown(profile) {
		r.deny(StepProfile, "", reason.ProfileUnknown, "transaction profile %s is not registered", show(rawProfile))
		return
	}
	if err := schema.ValidateProfileTerms(profile, profileTerms); err != nil {
		code := reason.ProfileTermsInvalid
		if errors.Is(err, schema.ErrUnknownProfile) {
			code = reason.ProfileUnknown
		}
		r.deny(StepProfile, "", code, "profile_terms under %s: %v", profile, err)
	}
}

func (r *run) checkAction(m map[string]any, id string, act map[string]any) {
	at, _ := act["action_type"].(string)
	actions, _ := m["actions"].([]any)
	for _, a := range actions {
		if a == at {
			return
		}
	}
	r.deny(StepAction, id, reason.PolicyDenied, "action %s is not among the actions of mandate %s", at, id)
}

// scopeAxes pairs each scope axis with the act member it bounds. category
// and geography are read from the act's top-level members of those names,
// as the published reference reads them.
var scopeAxes = [...]struct{ axis, member string }{
	{"transaction_ids", "transaction_id"},
	{"categories", "category"},
	{"counterparty_organization_ids", "counterparty_organization_id"},
	{"geographies", "geography"},
}

// checkScope applies each scope axis the mandate states. An act that names
// no value on a stated axis is outside it: absence is not agreement.
func (r *run) checkScope(m map[string]any, id string, act map[string]any) {
	scope, _ := m["scope"].(map[string]any)
	for _, ax := range scopeAxes {
		raw, stated := scope[ax.axis]
		if !stated {
			continue
		}
		allowed, _ := raw.([]any)
		v, present := act[ax.member]
		s, isString := v.(string)
		in := false
		for _, a := range allowed {
			if isString && a == s {
				in = true
				break
			}
		}
		if !in {
			if !present {
				r.deny(StepScope, id, reason.PolicyDenied, "mandate %s bounds %s and the act names no %s", id, ax.axis, ax.member)
			} else {
				r.deny(StepScope, id, reason.PolicyDenied, "%s %s is outside the %s of mandate %s", ax.member, show(v), ax.axis, id)
			}
		}
	}
}

// checkConstraints evaluates every constraint of m in document order
// (step 11).
func (r *run) checkConstraints(m map[string]any, act map[string]any) {
	id, _ := m["id"].(string)
	list, _ := m["constraints"].([]any)
	for i, raw := range list {
		c, _ := raw.(map[string]any)
		cr := ConstraintResult{MandateID: id, Result: Satisfied}
		cr.ID, _ = c["id"].(string)
		if cr.ID == "" {
			cr.ID = fmt.Sprintf("#%d", i)
		}
		cr.Type, _ = c["type"].(string)
		cr.Path, _ = c["path"].(string)
		cr.Operator, _ = c["operator"].(string)
		cr.OnFailure, _ = c["on_failure"].(string)
		ok, f := false, (*fault)(nil)
		if cr.OnFailure != OnFailureDeny && cr.OnFailure != OnFailureRequireApproval {
			f = constraintFault("on_failure %s is neither deny nor require_approval", show(c["on_failure"]))
		} else {
			ok, f = evalPredicate(r.ctx, predicate{typ: cr.Type, op: cr.Operator, path: cr.Path, value: c["value"]}, act, r.e.Evidence)
		}
		switch {
		case f != nil:
			cr.Result = Unevaluable
			cr.Code = reason.PolicyDenied
			if f.constraint {
				cr.Code = reason.MandateConstraintUnknown
			}
			cr.Detail = f.detail
			r.deny(StepConstraint, id, cr.Code, "constraint %s of %s is unevaluable: %s", cr.ID, id, f.detail)
		case !ok && cr.OnFailure == OnFailureDeny:
			cr.Result = Unsatisfied
			cr.Code = reason.PolicyDenied
			cr.Detail = unmet(cr, act)
			r.deny(StepConstraint, id, reason.PolicyDenied, "constraint %s of %s denies: %s", cr.ID, id, cr.Detail)
		case !ok:
			cr.Result = Unsatisfied
			cr.Code = reason.ApprovalRequired
			cr.Detail = unmet(cr, act)
			r.hold(StepConstraint, id, "constraint %s of %s requires approval: %s", cr.ID, id, cr.Detail)
		}
		r.res.Constraints = append(r.res.Constraints, cr)
	}
}

// unmet describes an unmet constraint without repeating its whole value.
func unmet(c ConstraintResult, act map[string]any) string {
	segs, _ := parsePath(c.Path)
	v, found := resolve(act, segs)
	if !found {
		return fmt.Sprintf("%s is absent, %s not met", c.Path, c.Operator)
	}
	return fmt.Sprintf("%s = %s does not meet %s", c.Path, show(v), c.Operator)
}

// checkRules evaluates m's approval rules (step 12). A `when` whose own form
// is broken denies with A202-MANDATE-CONSTRAINT-UNKNOWN; one the act's
// value cannot be compared under holds the act, as in the reference: a rule
// nobody could evaluate is not a rule that did not match.
func (r *run) checkRules(m map[string]any, act map[string]any) {
	id, _ := m["id"].(string)
	rules, _ := m["approval_rules"].([]any)
	for i, raw := range rules {
		rule, _ := raw.(map[string]any)
		ruleID, _ := rule["id"].(string)
		if ruleID == "" {
			ruleID = fmt.Sprintf("#%d", i)
		}
		when, _ := rule["when"].(map[string]any)
		applies, _, err := MatchRule(r.ctx, when, act, r.e.Evidence)
		if err != nil {
			r.deny(StepApprovalRule, id, reason.MandateConstraintUnknown, "approval rule %s of %s is unevaluable: %v", ruleID, id, err)
			continue
		}
		if applies {
			approver, _ := rule["approver"].(map[string]any)
			mr := MatchedRule{MandateID: id, RuleID: ruleID}
			mr.ApproverOrganizationID, _ = approver["organization_id"].(string)
			mr.ApproverRole, _ = approver["role"].(string)
			mr.ExpiresAfterSeconds, _ = integerOf(rule["expires_after_seconds"])
			r.res.ApprovalRulesMatched = append(r.res.ApprovalRulesMatched, mr)
			r.hold(StepApprovalRule, id, "approval rule %s of %s holds the act for %s of %s", ruleID, id, mr.ApproverRole, mr.ApproverOrganizationID)
		}
	}
}

// MatchRule reads one approval rule's `when` over an act document exactly
// as Evaluate does at step 12, so that a verifier replaying a record asks
// the same question the evaluator asked. applies is true when the rule
// holds the act: its predicate matched, or the act's value could not be
// compared under it (a rule nobody could evaluate is not a rule that did
// not match). A `when` broken in its own form (unregistered operator, bad
// path, value of the wrong shape) returns an error: the evaluator denies
// every act under such a mandate with A202-MANDATE-CONSTRAINT-UNKNOWN.
// detail says which, in words. ev may be nil: then no evidence verifies.
func MatchRule(ctx context.Context, when map[string]any, act map[string]any, ev EvidenceVerifier) (applies bool, detail string, err error) {
	op, _ := when["operator"].(string)
	path, _ := when["path"].(string)
	matched, f := evalPredicate(ctx, predicate{untyped: true, op: op, path: path, value: when["value"]}, act, ev)
	switch {
	case f != nil && f.constraint:
		return false, "", errors.New(f.detail)
	case f != nil:
		return true, fmt.Sprintf("%s: %s, so the evaluator holds the act", path, f.detail), nil
	case matched:
		return true, fmt.Sprintf("%s %s holds", path, op), nil
	}
	return false, fmt.Sprintf("%s %s does not hold", path, op), nil
}
