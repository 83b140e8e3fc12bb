// Package principal is the principal's surface of a party instance: the
// acts only a person with the organisation's principal key may take.
//
//   - IssueMandate: sign a mandate for an agent (commercial mandate §3),
//     refused before signing whenever the gate would refuse it.
//   - Suspend, Reinstate, Revoke: change a mandate's status, each change
//     announced by a signed revocation_record and visible at the mandate's
//     status endpoint at once (§9). Revocation is final.
//   - Approvals and Decide: list the acts agents asked to have approved,
//     showing the exact act document, and approve or reject one; the
//     approval is signed with the principal's own key and bound to the one
//     action hash (§8).
//
// The agent's MCP surface never reaches this package: the CLI (with the
// state directory's files) and the admin listener (with the admin token)
// do. That separation is decisions.md 9: an agent can ask for approval but
// can never approve.
package principal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/store"
)

// Surface is the principal's surface over one organisation.
type Surface struct{ o *org.Org }

// New returns the principal's surface of o.
func New(o *org.Org) *Surface { return &Surface{o: o} }

// IssueMandate completes req with this instance's defaults and issues it:
// the issuer is this organisation's principal and key; the represented
// organisation is this organisation; the status endpoint, when not given,
// is this instance's own; the subject, when it names no one, is this
// instance's agent and agent key. A request naming another organisation's
// principal as issuer is refused: this instance holds only its own key.
// The signed mandate is stored and returned.
func (s *Surface) IssueMandate(ctx context.Context, req authority.IssueRequest) (map[string]any, error) {
	cfg := s.o.Config()
	if req.Issuer == (authority.Issuer{}) {
		req.Issuer = authority.Issuer{OrganizationID: cfg.OrganizationID, PrincipalID: cfg.PrincipalID, KeyID: cfg.PrincipalKeyID}
	}
	if req.Issuer.OrganizationID != cfg.OrganizationID || req.Issuer.KeyID != cfg.PrincipalKeyID {
		return nil, fmt.Errorf("principal: this instance signs only as %s with key %s, not as %s with %s",
			cfg.OrganizationID, cfg.PrincipalKeyID, req.Issuer.OrganizationID, req.Issuer.KeyID)
	}
	if req.RepresentedOrganizationID == "" {
		req.RepresentedOrganizationID = cfg.OrganizationID
	}
	if req.Subject == (authority.Subject{}) {
		req.Subject = authority.Subject{AgentID: cfg.AgentID, KeyID: cfg.AgentKeyID}
	}
	if req.MandateID == "" {
		id, err := envelope.NewID("mnd")
		if err != nil {
			return nil, err
		}
		req.MandateID = id
	}
	if req.StatusEndpoint == "" {
		req.StatusEndpoint = status.EndpointFor(cfg.PublicURL, req.MandateID)
	}
	signer, err := s.o.PrincipalSigner()
	if err != nil {
		return nil, err
	}
	now := s.o.Clock()
	var m map[string]any
	if req.ParentMandateID != nil {
		parent, err := s.o.ResolveMandate(ctx, *req.ParentMandateID)
		if err != nil {
			return nil, reason.Refusef(reason.MandateDelegationWidening, "parent mandate %s: %v", *req.ParentMandateID, err)
		}
		m, err = authority.IssueDelegated(req, parent, signer, now)
		if err != nil {
			return nil, err
		}
	} else {
		m, err = authority.Issue(req, signer, now)
		if err != nil {
			return nil, err
		}
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := s.o.Store.PutMandate(ctx, b, "local"); err != nil {
		return nil, err
	}
	s.o.Log.Info("mandate issued", "mandate_id", req.MandateID, "subject", req.Subject.AgentID+req.Subject.PrincipalID)
	return m, nil
}

// Suspend suspends an active mandate; Reinstate reverses a suspension.
func (s *Surface) Suspend(ctx context.Context, mandateID, why string) error {
	return s.change(ctx, mandateID, store.StatusActive, store.StatusSuspended, why)
}

// Reinstate makes a suspended mandate active again.
func (s *Surface) Reinstate(ctx context.Context, mandateID, why string) error {
	return s.change(ctx, mandateID, store.StatusSuspended, store.StatusActive, why)
}

// Revoke revokes a mandate for good, whether active or suspended.
func (s *Surface) Revoke(ctx context.Context, mandateID, why string) error {
	rec, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return err
	}
	return s.change(ctx, mandateID, rec.Status, store.StatusRevoked, why)
}

// Why a status change does not apply. Each is wrapped with the mandate's
// id; test with errors.Is.
var (
	// ErrNotLocal: the mandate was issued by another organisation, so
	// this principal cannot change its status.
	ErrNotLocal = errors.New("principal: the mandate was issued by another organisation")
	// ErrWrongStatus: the mandate is not in the status the change
	// applies to (suspending a suspended mandate, reinstating an active
	// one).
	ErrWrongStatus = errors.New("principal: the mandate is not in the status the change applies to")
	// ErrFinal: the mandate is revoked, and revocation is final.
	ErrFinal = errors.New("principal: the mandate is revoked; revocation is final")
)

func (s *Surface) change(ctx context.Context, mandateID, from, to, why string) error {
	rec, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return err
	}
	if rec.Origin != "local" {
		return fmt.Errorf("%w: %s", ErrNotLocal, mandateID)
	}
	// Revoked is checked before the expected status, so any change to a
	// revoked mandate says revocation is final, not merely that the
	// mandate is not active or suspended.
	if from == store.StatusRevoked {
		return fmt.Errorf("%w: %s", ErrFinal, mandateID)
	}
	if rec.Status == store.StatusRevoked {
		return fmt.Errorf("%w: %s is revoked, not %s", ErrFinal, mandateID, from)
	}
	if rec.Status != from {
		return fmt.Errorf("%w: %s is %s, not %s", ErrWrongStatus, mandateID, rec.Status, from)
	}
	doc, err := canonical.DecodeObject(rec.Body)
	if err != nil {
		return err
	}
	subj, _ := doc["subject"].(map[string]any)
	agent, _ := subj["agent_id"].(string)
	if agent == "" {
		agent = s.o.Config().AgentID
	}
	if why == "" {
		why = "status changed by the issuing principal"
	}
	signer, err := s.o.PrincipalSigner()
	if err != nil {
		return err
	}
	now := s.o.Clock()
	record, err := status.NewRevocationRecord(status.RevocationSpec{
		SubjectType: "mandate", SubjectID: mandateID, Status: to, EffectiveAt: now, Reason: why,
		CreatedBy: envelope.Actor{OrganizationID: s.o.Config().OrganizationID, AgentID: agent, MandateID: mandateID},
		CreatedAt: now,
	}, signer)
	if err != nil {
		return err
	}
	b, err := canonical.Marshal(record)
	if err != nil {
		return err
	}
	if err := s.o.Store.ChangeMandateStatus(ctx, mandateID, from, to, b); err != nil {
		return err
	}
	s.o.Log.Info("mandate status changed", "mandate_id", mandateID, "from", from, "to", to)
	return nil
}

// Approval is an approval request as the principal sees it: the exact act
// document the agent wants to take, and what became of the request.
type Approval struct {
	RequestID     string                  `json:"approval_request_id"`
	MandateID     string                  `json:"mandate_id"`
	TransactionID string                  `json:"transaction_id,omitempty"`
	ActionHash    string                  `json:"action_hash"`
	Act           map[string]any          `json:"act"`
	Rules         []authority.MatchedRule `json:"approval_rules_matched"`
	Status        string                  `json:"status"`
	ApprovalID    string                  `json:"approval_id,omitempty"`
	RequestedAt   string                  `json:"requested_at"`
	DecidedAt     string                  `json:"decided_at,omitempty"`
}

func view(r store.ApprovalRequest) (Approval, error) {
	act, err := canonical.DecodeObject(r.Act)
	if err != nil {
		return Approval{}, err
	}
	var rules []authority.MatchedRule
	if err := json.Unmarshal([]byte(r.Rules), &rules); err != nil {
		return Approval{}, err
	}
	return Approval{
		RequestID: r.ID, MandateID: r.MandateID, TransactionID: r.TransactionID, ActionHash: r.ActionHash,
		Act: act, Rules: rules, Status: r.Status, ApprovalID: r.ApprovalID, RequestedAt: r.RequestedAt, DecidedAt: r.DecidedAt,
	}, nil
}

// Approvals lists approval requests; pendingOnly leaves out decided ones.
func (s *Surface) Approvals(ctx context.Context, pendingOnly bool) ([]Approval, error) {
	st := ""
	if pendingOnly {
		st = store.ApprovalPending
	}
	rs, err := s.o.Store.ApprovalRequests(ctx, st)
	if err != nil {
		return nil, err
	}
	out := []Approval{}
	for _, r := range rs {
		v, err := view(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ErrDecided is returned when a request was already approved or rejected.
var ErrDecided = errors.New("principal: approval request already decided")

// Decide approves (approve=true) or rejects one pending request. The
// approval object is signed with the principal's key, bound to the
// request's action hash and transaction, and good for the shortest life
// the matched rules allow. It returns the stored approval object.
func (s *Surface) Decide(ctx context.Context, requestID string, approve bool, conditions []string) (map[string]any, error) {
	r, err := s.o.Store.GetApprovalRequest(ctx, requestID)
	if err != nil {
		return nil, err
	}
	if r.Status != store.ApprovalPending {
		return nil, fmt.Errorf("%w: %s is %s", ErrDecided, requestID, r.Status)
	}
	v, err := view(r)
	if err != nil {
		return nil, err
	}
	m, err := s.o.Store.GetMandate(ctx, r.MandateID)
	if err != nil {
		return nil, err
	}
	doc, err := canonical.DecodeObject(m.Body)
	if err != nil {
		return nil, err
	}
	subj, _ := doc["subject"].(map[string]any)
	agent, _ := subj["agent_id"].(string)
	cfg := s.o.Config()
	decision := authority.Approved
	if !approve {
		decision = authority.Rejected
	}
	signer, err := s.o.PrincipalSigner()
	if err != nil {
		return nil, err
	}
	obj, err := authority.NewApproval(ctx, authority.ApprovalRequest{
		ActionHash:    r.ActionHash,
		TransactionID: r.TransactionID,
		RequestedBy:   envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: agent, MandateID: r.MandateID},
		Approver:      authority.Approver{OrganizationID: cfg.OrganizationID, PrincipalID: cfg.PrincipalID, Role: cfg.PrincipalRole},
		Decision:      decision,
		Rules:         v.Rules,
		Conditions:    conditions,
	}, signer, s.o, s.o.Clock())
	if err != nil {
		return nil, err
	}
	b, err := canonical.Marshal(obj)
	if err != nil {
		return nil, err
	}
	st := store.ApprovalApproved
	if !approve {
		st = store.ApprovalRejected
	}
	if err := s.o.Store.DecideApprovalRequest(ctx, requestID, st, b); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: %v", ErrDecided, err)
		}
		return nil, err
	}
	s.o.Log.Info("approval decided", "approval_request_id", requestID, "decision", decision, "action_hash", r.ActionHash)
	return obj, nil
}

// MandateSummary is one mandate as the principal lists it.
type MandateSummary struct {
	ID        string   `json:"mandate_id"`
	Subject   string   `json:"subject"`
	Status    string   `json:"status"`
	Actions   []string `json:"actions"`
	ValidFrom string   `json:"valid_from"`
	ValidTo   string   `json:"valid_until"`
	Instance  bool     `json:"instance_mandate,omitempty"`
}

// Mandates lists the mandates this organisation issued.
func (s *Surface) Mandates(ctx context.Context) ([]MandateSummary, error) {
	ms, err := s.o.Store.Mandates(ctx, "local")
	if err != nil {
		return nil, err
	}
	out := []MandateSummary{}
	for _, m := range ms {
		doc, err := canonical.DecodeObject(m.Body)
		if err != nil {
			return nil, err
		}
		var acts []string
		for _, a := range doc["actions"].([]any) {
			acts = append(acts, fmt.Sprint(a))
		}
		subj, _ := doc["subject"].(map[string]any)
		who := fmt.Sprint(subj["agent_id"])
		if p, ok := subj["principal_id"].(string); ok {
			who = p
		}
		out = append(out, MandateSummary{
			ID: m.ID, Subject: who, Status: m.Status, Actions: acts,
			ValidFrom: fmt.Sprint(doc["valid_from"]), ValidTo: fmt.Sprint(doc["valid_until"]),
			Instance: instance.IsInstanceMandate(doc),
		})
	}
	return out, nil
}
