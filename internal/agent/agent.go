// Package agent is the agent's surface of a party instance: what an
// organisation's AI agent may do through its own instance. Package
// bindings/mcp exposes it as MCP tools; nothing here knows about MCP.
//
// The surface can ask, verify and act under a mandate the organisation's
// principal issued to this agent. It can never sign as the principal: it
// cannot issue or revoke a mandate, and it can ask for an approval but not
// give one (decisions.md 9).
//
// The usual order of calls:
//
//  1. Whoami — which organisation, agent and mandates this is.
//  2. VerifyMandate for the exact act about to be taken. It answers allow,
//     deny or require_approval, the act's action_hash, and each
//     constraint's result. The instance resolves the mandate's live status
//     itself; a caller never supplies it.
//  3. On require_approval: RequestApproval, then ApprovalStatus until the
//     principal decides, then VerifyMandate again with the approval_id.
//  4. The acts themselves (offers, acceptances, obligations), which
//     re-evaluate the mandate at the moment they record anything. An act
//     the mandate holds files its approval request itself (the refusal
//     names it); once the principal approves, the same act is released.
//
// Every refusal is a *reason.Refusal with registered codes, and means
// nothing was recorded.
package agent

import (
	"context"
	"errors"
	"fmt"
	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/decimal"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Surface is one agent's surface over its organisation: it sees and acts
// only under the mandates issued to that agent.
type Surface struct {
	o     *org.Org
	agent string
}

// OnApprovalRequest registers fn to be called with each approval request
// once it is stored, whoever filed it (the agent, or the instance for an
// act it holds: org.FileApproval), for the principal's webhook (package
// notify). fn must not block. Register before the surface serves.
func (a *Surface) OnApprovalRequest(fn func(store.ApprovalRequest)) {
	a.o.OnApprovalRequest(fn)
}

// New returns the surface of o's primary agent.
func New(o *org.Org) *Surface { return &Surface{o: o, agent: o.Config().AgentID} }

// NewFor returns the surface of agentID, one of o's agents.
func NewFor(o *org.Org, agentID string) *Surface { return &Surface{o: o, agent: agentID} }

// AgentID is the agent the surface acts for.
func (a *Surface) AgentID() string { return a.agent }

// Org returns the organisation runtime behind the surface.
func (a *Surface) Org() *org.Org { return a.o }

// MandateInfo is a mandate held by this agent.
type MandateInfo struct {
	MandateID  string         `json:"mandate_id"`
	Status     string         `json:"status"`
	Actions    []string       `json:"actions"`
	Scope      map[string]any `json:"scope"`
	ValidFrom  string         `json:"valid_from"`
	ValidUntil string         `json:"valid_until"`
	// ParentID is the mandate this one was delegated from; omitted for a
	// root mandate.
	ParentID string `json:"parent_mandate_id,omitempty"`
}

// WhoamiResult says who the agent is and what it holds.
type WhoamiResult struct {
	OrganizationID string        `json:"organization_id"`
	AgentID        string        `json:"agent_id"`
	AgentKeyID     string        `json:"agent_key_id"`
	Mandates       []MandateInfo `json:"mandates"`
	Peers          []string      `json:"counterparties"`
	// Budgets are your organisation's budgets that apply to your acts,
	// as they stand now: what is used and left in the period.
	Budgets []budget.Standing `json:"budgets"`
}

// Whoami lists the organisation, the agent, the trading mandates issued to
// it with their status as the issuing instance records it (the evaluator
// still resolves live status at every act), and the pinned counterparties.
func (a *Surface) Whoami(ctx context.Context) (WhoamiResult, error) {
	cfg := a.o.Config()
	kid, _ := cfg.KeyOf(a.agent)
	res := WhoamiResult{OrganizationID: cfg.OrganizationID, AgentID: a.agent, AgentKeyID: kid, Mandates: []MandateInfo{}, Peers: []string{}}
	ms, err := a.o.Store.Mandates(ctx, "local")
	if err != nil {
		return res, err
	}
	now := a.o.Clock()
	for _, m := range ms {
		doc, err := canonical.DecodeObject(m.Body)
		if err != nil {
			return res, err
		}
		if instance.IsInstanceMandate(doc) || m.SubjectAgentID != a.agent {
			continue
		}
		st := m.Status
		if until, err := envelope.ParseTimestamp(fmt.Sprint(doc["valid_until"])); err == nil && !now.Before(until) && st == store.StatusActive {
			st = "expired"
		}
		acts := []string{}
		for _, x := range doc["actions"].([]any) {
			acts = append(acts, fmt.Sprint(x))
		}
		scope, _ := doc["scope"].(map[string]any)
		if scope == nil {
			scope = map[string]any{}
		}
		parent, _ := doc["parent_mandate_id"].(string)
		res.Mandates = append(res.Mandates, MandateInfo{
			MandateID: m.ID, Status: st, Actions: acts, Scope: scope,
			ValidFrom: fmt.Sprint(doc["valid_from"]), ValidUntil: fmt.Sprint(doc["valid_until"]), ParentID: parent,
		})
	}
	for _, p := range a.o.Peers.Peers() {
		res.Peers = append(res.Peers, p.OrganizationID)
	}
	if res.Budgets, err = a.o.BudgetStandings(ctx, a.agent); err != nil {
		return res, err
	}
	return res, nil
}

// VerifyInput names a mandate, the act to evaluate under it, and optionally
// an approval to present. Its jsonschema tags are what verify_mandate and
// request_approval tell a model (bindings/mcp derives their input schemas
// from this type).
type VerifyInput struct {
	MandateID      string         `json:"mandate_id" jsonschema:"Your mandate (mnd_...), from whoami."`
	ProposedAction map[string]any `json:"proposed_action" jsonschema:"{action_type, transaction_id, counterparty_organization_id, proposed_terms, references} as the act tool's Act: says."`
	ApprovalID     string         `json:"approval_id,omitempty" jsonschema:"verify_mandate only: approval (apr_...) of this act."`
}

// ConstraintOutcome is one constraint's result as the agent sees it.
type ConstraintOutcome struct {
	ID     string      `json:"id"`
	Result string      `json:"result"`
	Code   reason.Code `json:"code,omitempty"`
	Detail string      `json:"detail,omitempty"`
}

// VerifyResult is the evaluator's answer.
type VerifyResult struct {
	Decision             authority.Decision      `json:"decision"`
	ReasonCodes          []reason.Code           `json:"reason_codes"`
	Constraints          []ConstraintOutcome     `json:"constraints"`
	ApprovalRulesMatched []authority.MatchedRule `json:"approval_rules_matched"`
	ActionHash           string                  `json:"action_hash"`
	MandateIDs           []string                `json:"mandate_ids"`
	Approval             string                  `json:"approval"`
	EvaluatedAt          string                  `json:"evaluated_at"`
	Findings             []string                `json:"findings"`
	Next                 string                  `json:"next"`
	// Budget is what your organisation's budgets would say of the act if
	// it commits your organisation to pay its proposed_terms.core.total
	// (an offer, acceptance or amendment as buyer): allow, hold (for your
	// principal's approval) or deny; "" when no budget applies. The act is
	// counted again when it is taken. Budgets are the standing of every
	// budget that applies.
	Budget      string            `json:"budget,omitempty"`
	BudgetNotes []string          `json:"budget_notes,omitempty"`
	Budgets     []budget.Standing `json:"budgets"`
}

// Mandate returns a mandate held by this agent (org.AgentMandate).
func (a *Surface) Mandate(ctx context.Context, id string) (map[string]any, error) {
	return a.o.AgentMandate(ctx, a.agent, id)
}

// Evaluate runs the evaluator over one act under one of this agent's
// mandates, presenting the approval approvalID when given. It is the one
// place the agent's own acts are evaluated.
func (a *Surface) Evaluate(ctx context.Context, mandateID string, act map[string]any, approvalID string) (authority.Result, error) {
	m, err := a.Mandate(ctx, mandateID)
	if err != nil {
		return authority.Result{}, err
	}
	var approval map[string]any
	if approvalID != "" {
		txn, _ := act["transaction_id"].(string) // an approval is its act's transaction's
		b, err := a.o.Store.GetObject(ctx, txn, approvalID)
		if err != nil {
			return authority.Result{}, reason.Refusef(reason.ApprovalRequired, "approval %s is not held for transaction %s", approvalID, txn)
		}
		if approval, err = canonical.DecodeObject(b); err != nil {
			return authority.Result{}, err
		}
		if approval["object_type"] != "approval" {
			return authority.Result{}, reason.Refusef(reason.ApprovalRequired, "%s is not an approval", approvalID)
		}
	}
	cfg := a.o.Config()
	kid, _ := cfg.KeyOf(a.agent)
	return a.o.Evaluator().Evaluate(ctx, authority.Request{
		Mandate:  m,
		Act:      act,
		Actor:    authority.Actor{OrganizationID: cfg.OrganizationID, AgentID: a.agent, KeyID: kid},
		Approval: approval,
	}), nil
}

// VerifyMandate evaluates the proposed act and reports the decision. It
// records nothing.
func (a *Surface) VerifyMandate(ctx context.Context, in VerifyInput) (VerifyResult, error) {
	if in.ProposedAction == nil {
		return VerifyResult{}, reason.Refuse("proposed_action is required: the act document {action_type, transaction_id, counterparty_organization_id, proposed_terms, ...}", reason.PolicyDenied)
	}
	r, err := a.Evaluate(ctx, in.MandateID, in.ProposedAction, in.ApprovalID)
	if err != nil {
		return VerifyResult{}, err
	}
	v := resultView(r)
	if v.Budgets, err = a.o.BudgetStandings(ctx, a.agent); err != nil {
		return v, err
	}
	if c, ok := chargeOf(in.ProposedAction, a.agent); ok {
		vs, err := a.o.BudgetVerdicts(ctx, c)
		if err != nil {
			return v, err
		}
		if w, ok := budget.Worst(vs); ok {
			v.Budget = string(w.Outcome)
			for _, x := range vs {
				v.BudgetNotes = append(v.BudgetNotes, x.Explain())
			}
		}
	}
	return v, nil
}

// chargeOf reads the commitment an act document names: its
// proposed_terms.core.total, towards its counterparty, in its transaction.
func chargeOf(act map[string]any, agent string) (budget.Charge, bool) {
	terms, _ := act["proposed_terms"].(map[string]any)
	core, _ := terms["core"].(map[string]any)
	total, _ := core["total"].(map[string]any)
	amount, _ := total["amount"].(string)
	currency, _ := total["currency"].(string)
	txn, _ := act["transaction_id"].(string)
	cp, _ := act["counterparty_organization_id"].(string)
	d, err := decimal.Parse(amount)
	if err != nil || currency == "" {
		return budget.Charge{}, false
	}
	return budget.Charge{TransactionID: txn, Currency: currency, Counterparty: cp, Agent: agent, Amount: d}, true
}

func resultView(r authority.Result) VerifyResult {
	v := VerifyResult{
		Decision: r.Decision, ReasonCodes: r.ReasonCodes, ActionHash: r.ActionHash, MandateIDs: r.MandateIDs,
		ApprovalRulesMatched: r.ApprovalRulesMatched, Approval: string(r.Approval),
		EvaluatedAt: envelope.Timestamp(r.EvaluatedAt), Constraints: []ConstraintOutcome{}, Findings: []string{},
	}
	if v.ReasonCodes == nil {
		v.ReasonCodes = []reason.Code{}
	}
	if v.ApprovalRulesMatched == nil {
		v.ApprovalRulesMatched = []authority.MatchedRule{}
	}
	if v.MandateIDs == nil {
		v.MandateIDs = []string{}
	}
	for _, c := range r.Constraints {
		v.Constraints = append(v.Constraints, ConstraintOutcome{ID: c.ID, Result: string(c.Result), Code: c.Code, Detail: c.Detail})
	}
	for _, f := range r.Findings {
		v.Findings = append(v.Findings, f.Detail)
	}
	switch r.Decision {
	case authority.Allow:
		v.Next = "take the act now; a decision is good for 60 seconds"
	case authority.RequireApproval:
		v.Next = "call request_approval with the same mandate_id and proposed_action, poll approval_status, then verify again with the approval_id"
	default:
		v.Next = "the act is outside the mandate; change the act (see the failing constraints) or ask your principal for a different mandate"
	}
	return v
}

// ApprovalRequestResult is what RequestApproval returns.
type ApprovalRequestResult struct {
	ApprovalRequestID string `json:"approval_request_id"`
	ActionHash        string `json:"action_hash"`
	Status            string `json:"status"`
}

// RequestApproval asks the principal to approve one exact act that the
// evaluator holds for approval. An act that is allowed needs no approval
// and one that is denied cannot be approved: both are refused.
func (a *Surface) RequestApproval(ctx context.Context, in VerifyInput) (ApprovalRequestResult, error) {
	if in.ProposedAction == nil {
		return ApprovalRequestResult{}, reason.Refuse("proposed_action is required", reason.PolicyDenied)
	}
	if in.ApprovalID != "" {
		// Asking for an approval while presenting one is a confusion the
		// agent should hear about, not an argument to drop silently.
		return ApprovalRequestResult{}, reason.Refuse("request_approval asks for an approval and takes none; present approval_id " + in.ApprovalID + " to verify_mandate and to the act")
	}
	r, err := a.Evaluate(ctx, in.MandateID, in.ProposedAction, "")
	if err != nil {
		return ApprovalRequestResult{}, err
	}
	switch r.Decision {
	case authority.Allow:
		return ApprovalRequestResult{}, reason.Refuse("the act is allowed without approval; take it directly")
	case authority.Deny:
		// An approval never releases a deny (mandate §8).
		return ApprovalRequestResult{}, r.Err()
	}
	req, err := a.o.FileApproval(ctx, in.MandateID, in.ProposedAction, r)
	if err != nil {
		return ApprovalRequestResult{}, err
	}
	return ApprovalRequestResult{ApprovalRequestID: req.ID, ActionHash: r.ActionHash, Status: store.ApprovalPending}, nil
}

// ApprovalStatusResult is what ApprovalStatus returns, and one request of
// the agent's approval resources.
type ApprovalStatusResult struct {
	ApprovalRequestID string `json:"approval_request_id"`
	Status            string `json:"status"`
	ApprovalID        string `json:"approval_id,omitempty"`
	ExpiresAt         string `json:"expires_at,omitempty"`
	ActionHash        string `json:"action_hash"`
	MandateID         string `json:"mandate_id"`
	// TransactionID is the transaction the act belongs to; omitted for
	// an act outside one.
	TransactionID string `json:"transaction_id,omitempty"`
	RequestedAt   string `json:"requested_at"`
	DecidedAt     string `json:"decided_at,omitempty"`
	// Conditions are what your principal wrote with the decision: the
	// conditions of an approval (honour them), or why an act was
	// rejected.
	Conditions []string `json:"conditions,omitempty"`
}

// ApprovalStatus reports a request: pending, approved, rejected, or expired
// (approved, but the approval's life has run out).
func (a *Surface) ApprovalStatus(ctx context.Context, requestID string) (ApprovalStatusResult, error) {
	r, err := a.o.Store.GetApprovalRequest(ctx, requestID)
	if err == nil {
		if _, merr := a.Mandate(ctx, r.MandateID); merr != nil {
			err = store.ErrNotFound // another agent's request: not this agent's to see
		}
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return ApprovalStatusResult{}, reason.Refuse(fmt.Sprintf("no approval request %s of yours; call request_approval first", requestID))
		}
		return ApprovalStatusResult{}, err
	}
	return a.statusOf(ctx, r)
}

// Approvals lists the agent's latest approval requests, newest first (at
// most store.DefaultPage), each as ApprovalStatus reports it.
func (a *Surface) Approvals(ctx context.Context) ([]ApprovalStatusResult, error) {
	rs, err := a.o.Store.AgentApprovalRequests(ctx, a.agent, 0)
	if err != nil {
		return nil, err
	}
	out := make([]ApprovalStatusResult, 0, len(rs))
	for _, r := range rs {
		res, err := a.statusOf(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// ApprovalsVersion is a number that changes whenever any approval request
// of the instance is filed or decided, by this process or another (the
// CLI): a cheap test of whether Approvals may answer differently, short of
// an approval's expiry, which depends on the clock alone.
func (a *Surface) ApprovalsVersion(ctx context.Context) (int64, error) {
	return a.o.Store.ApprovalRequestsVersion(ctx)
}

// Now is the time the surface judges an approval's expiry by.
func (a *Surface) Now() time.Time { return a.o.Clock() }

// statusOf reports r, reading its approval's expiry.
func (a *Surface) statusOf(ctx context.Context, r store.ApprovalRequest) (ApprovalStatusResult, error) {
	res := ApprovalStatusResult{ApprovalRequestID: r.ID, Status: r.Status, ApprovalID: r.ApprovalID, ActionHash: r.ActionHash,
		MandateID: r.MandateID, TransactionID: r.TransactionID, RequestedAt: r.RequestedAt, DecidedAt: r.DecidedAt}
	if r.ApprovalID != "" {
		b, err := a.o.Store.GetObject(ctx, r.TransactionID, r.ApprovalID)
		if err != nil {
			return res, err
		}
		obj, err := canonical.DecodeObject(b)
		if err != nil {
			return res, err
		}
		p, _ := obj["payload"].(map[string]any)
		exp, _ := p["expires_at"].(string)
		res.ExpiresAt = exp
		cs, _ := p["conditions"].([]any)
		for _, c := range cs {
			if s, ok := c.(string); ok {
				res.Conditions = append(res.Conditions, s)
			}
		}
		if t, err := envelope.ParseTimestamp(exp); err == nil && !a.o.Clock().Before(t) && r.Status == store.ApprovalApproved {
			res.Status = "expired"
		}
	}
	return res, nil
}
