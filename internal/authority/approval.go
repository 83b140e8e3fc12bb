package authority

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
)

// Approval decisions (kernel schema approvalPayload.decision).
const (
	Approved = "approved"
	Rejected = "rejected"
)

// Bounds on an approval's life: the mandate schema's bounds on an approval
// rule's expires_after_seconds, and the default the reference uses when no
// rule names one (a hold raised by a require_approval constraint).
const (
	MinApprovalLife     = 60 * time.Second
	MaxApprovalLife     = 86400 * time.Second
	DefaultApprovalLife = 3600 * time.Second
)

// ClockSkew is the tolerance for a timestamp a little in the future: an
// approval's created_at, a decision's evaluated_at. It matches the status
// package's MaxSkew.
const ClockSkew = 5 * time.Second

// Approver names the principal giving an approval and the role it acts in.
type Approver struct {
	OrganizationID string `json:"organization_id"`
	PrincipalID    string `json:"principal_id"`
	Role           string `json:"role"`
}

// ApprovalRequest describes one approval (commercial mandate §8).
type ApprovalRequest struct {
	// ActionHash is the exact act approved (Result.ActionHash).
	ActionHash string
	// TransactionID is the act's transaction; the approval's envelope
	// carries it and is good for no other.
	TransactionID string
	// RequestedBy is the acting agent whose act was held, its organisation
	// and mandate: the approval's created_by.
	RequestedBy envelope.Actor
	// Approver is the principal deciding.
	Approver Approver
	// Decision is Approved or Rejected; empty means Approved.
	Decision string
	// Rules are the approval rules that held the act
	// (Result.ApprovalRulesMatched). The approver must be the organisation
	// and role every one of them names.
	Rules []MatchedRule
	// ExpiresAfter is the approval's life from now. Zero takes the
	// shortest expires_after_seconds among Rules, or DefaultApprovalLife
	// when no rule held the act. It may not exceed that bound.
	ExpiresAfter time.Duration
	// Conditions the approver attaches (bounded text, signed with it).
	Conditions []string
}

// NewApproval builds an approval object and signs it with signer, which must
// be the approving principal's own key: keys must resolve signer's key id to
// a live key held by req.Approver.PrincipalID of req.Approver.OrganizationID.
// An agent's key is refused (A202-APPROVAL-REQUIRED): an agent signing under
// a director's name would be approving its own act. So is an approver whose
// organisation or role a holding rule does not name, and a life outside
// [MinApprovalLife, the rules' bound].
func NewApproval(ctx context.Context, req ApprovalRequest, signer signature.Signer, keys KeyResolver, now time.Time) (map[string]any, error) {
	if signer == nil || keys == nil {
		return nil, errors.New("authority: NewApproval needs a signer and a key resolver")
	}
	decision := req.Decision
	if decision == "" {
		decision = Approved
	}
	if decision != Approved && decision != Rejected {
		return nil, reason.Refusef(reason.ApprovalRequired, "approval decision %q is neither approved nor rejected", decision)
	}
	if !sha256Hex(req.ActionHash) {
		return nil, reason.Refusef(reason.ApprovalHashMismatch, "action hash %q is not 64 lowercase hexadecimal characters", req.ActionHash)
	}
	k, err := keys.ResolveKey(ctx, signer.KeyID())
	if err != nil {
		return nil, reason.Refusef(reason.ApprovalRequired, "approver key %s does not resolve: %v", signer.KeyID(), err)
	}
	if strings.HasPrefix(k.HolderID, "agt_") {
		return nil, reason.Refusef(reason.ApprovalRequired, "key %s is agent %s's key: an approval under it is the acting agent approving itself", signer.KeyID(), k.HolderID)
	}
	if k.HolderID != req.Approver.PrincipalID || k.OrganizationID != req.Approver.OrganizationID {
		return nil, reason.Refusef(reason.ApprovalRequired, "key %s belongs to %s of %s, not the approver %s of %s",
			signer.KeyID(), k.HolderID, k.OrganizationID, req.Approver.PrincipalID, req.Approver.OrganizationID)
	}
	if k.Status != envelope.KeyActive {
		return nil, reason.Refusef(reason.ApprovalRequired, "approver key %s is %s", signer.KeyID(), keyStatus(k.Status))
	}
	if req.Approver.OrganizationID != req.RequestedBy.OrganizationID {
		return nil, reason.Refusef(reason.ApprovalRequired, "approver is of %s, the held act of %s", req.Approver.OrganizationID, req.RequestedBy.OrganizationID)
	}
	for _, rule := range req.Rules {
		if rule.ApproverOrganizationID != req.Approver.OrganizationID || rule.ApproverRole != req.Approver.Role {
			return nil, reason.Refusef(reason.ApprovalRequired, "rule %s names %s of %s, not %s of %s",
				rule.RuleID, rule.ApproverRole, rule.ApproverOrganizationID, req.Approver.Role, req.Approver.OrganizationID)
		}
	}
	bound := lifeBound(req.Rules)
	life := req.ExpiresAfter
	if life == 0 {
		life = bound
	}
	if life < MinApprovalLife || life > bound {
		return nil, reason.Refusef(reason.ApprovalRequired, "approval life %s outside [%s, %s]", life, MinApprovalLife, bound)
	}
	conditions := []any{}
	for _, c := range req.Conditions {
		conditions = append(conditions, c)
	}
	created := now.UTC().Truncate(time.Second)
	obj, err := envelope.New(envelope.Spec{
		ObjectType:    "approval",
		CreatedBy:     req.RequestedBy,
		TransactionID: req.TransactionID,
		CreatedAt:     created,
		Payload: map[string]any{
			"action_hash": req.ActionHash,
			"approver": map[string]any{
				"organization_id": req.Approver.OrganizationID,
				"principal_id":    req.Approver.PrincipalID,
				"role":            req.Approver.Role,
			},
			"decision":   decision,
			"expires_at": envelope.Timestamp(created.Add(life)),
			"conditions": conditions,
		},
	})
	if err != nil {
		return nil, err
	}
	if err := signature.Issue(obj, signer, created); err != nil {
		return nil, err
	}
	// Checked complete, so a malformed approval is never handed out.
	if err := schema.ValidateEnvelope(obj); err != nil {
		return nil, reason.Refuse("approval: "+err.Error(), reason.ApprovalRequired)
	}
	return obj, nil
}

// lifeBound is the longest an approval releasing a hold by rules may live:
// the shortest expires_after_seconds among them, or DefaultApprovalLife
// when no rule held the act.
func lifeBound(rules []MatchedRule) time.Duration {
	if len(rules) == 0 {
		return DefaultApprovalLife
	}
	b := MaxApprovalLife
	for _, r := range rules {
		if d := time.Duration(r.ExpiresAfterSeconds) * time.Second; d < b {
			b = d
		}
	}
	return b
}

type approvalProblem struct {
	code   reason.Code
	detail string
}

// checkApproval lists why a presented approval does not release the hold on
// r.act under r.leaf, or nothing when it does. Each problem keeps the hold:
// another act (A202-APPROVAL-HASH-MISMATCH), another transaction
// (A202-STREAM-MISMATCH, as the reference), a signature that is not the
// named principal's own live key (A202-EVIDENCE-SIGNATURE-INVALID), and
// rejected, expired, future-dated, over-long, or from an organisation or
// role the holding rules do not name (A202-APPROVAL-REQUIRED).
func (r *run) checkApproval(appr map[string]any) []approvalProblem {
	var out []approvalProblem
	add := func(code reason.Code, format string, args ...any) {
		out = append(out, approvalProblem{code, fmt.Sprintf(format, args...)})
	}
	obj, err := normalize(appr)
	if err != nil {
		add(reason.ApprovalRequired, "approval unreadable: %v", err)
		return out
	}
	if t, _ := obj["object_type"].(string); t != "approval" {
		add(reason.ApprovalRequired, "presented object is a %s, not an approval", show(obj["object_type"]))
		return out
	}
	if err := schema.ValidateEnvelope(obj); err != nil {
		add(reason.ApprovalRequired, "approval refused by schema: %v", err)
		return out
	}
	if h, err := canonical.ContentHash(obj); err != nil || h != obj["content_hash"] {
		add(reason.EvidenceHashMismatch, "approval content_hash does not match its content")
	}
	p, _ := obj["payload"].(map[string]any)
	who, _ := p["approver"].(map[string]any)
	org, _ := who["organization_id"].(string)
	principal, _ := who["principal_id"].(string)
	role, _ := who["role"].(string)

	if !r.approverSigned(obj, org, principal) {
		add(reason.EvidenceSignatureInvalid, "approval is not signed by approver %s's own live key", principal)
	}
	if h, _ := p["action_hash"].(string); h != r.res.ActionHash {
		add(reason.ApprovalHashMismatch, "approval binds action %s, the act is %s", h, r.res.ActionHash)
	}
	if t, _ := obj["transaction_id"].(string); t != r.res.TransactionID {
		add(reason.StreamMismatch, "approval is for transaction %s, the act is on %s", show(obj["transaction_id"]), r.res.TransactionID)
	}
	if d, _ := p["decision"].(string); d != Approved {
		add(reason.ApprovalRequired, "approval decision is %s", show(p["decision"]))
	}
	created, errC := envelope.ParseTimestamp(str(obj["created_at"]))
	expires, errE := envelope.ParseTimestamp(str(p["expires_at"]))
	switch {
	case errC != nil || errE != nil:
		add(reason.ApprovalRequired, "approval times unreadable")
	case !r.now.Before(expires):
		add(reason.ApprovalRequired, "approval expired at %s", envelope.Timestamp(expires))
	case created.After(r.now.Add(ClockSkew)):
		add(reason.ApprovalRequired, "approval is dated %s, in the future", envelope.Timestamp(created))
	case expires.Sub(created) > lifeBound(r.res.ApprovalRulesMatched):
		add(reason.ApprovalRequired, "approval lives %s, longer than the holding rules allow (%s)", expires.Sub(created), lifeBound(r.res.ApprovalRulesMatched))
	}
	if rep, _ := r.leaf["represented_organization_id"].(string); org != rep {
		add(reason.ApprovalRequired, "approver is of %s, the acting mandate represents %s", org, rep)
	}
	for _, rule := range r.res.ApprovalRulesMatched {
		if rule.ApproverOrganizationID != org || rule.ApproverRole != role {
			add(reason.ApprovalRequired, "rule %s of %s needs %s of %s, the approver is %s of %s",
				rule.RuleID, rule.MandateID, rule.ApproverRole, rule.ApproverOrganizationID, role, org)
		}
	}
	return out
}

// approverSigned reports whether some signature of obj, with purpose
// object_issuance, verifies under a live key held by principal of org. No
// other signature counts: an agent's key proves only that the agent signed.
func (r *run) approverSigned(obj map[string]any, org, principal string) bool {
	if r.e.Keys == nil || !strings.HasPrefix(principal, "prn_") {
		return false
	}
	entries, err := signature.Entries(obj)
	if err != nil {
		return false
	}
	for i, e := range entries {
		if e["purpose"] != "object_issuance" {
			continue
		}
		kid, _ := e["key_id"].(string)
		k, err := r.e.Keys.ResolveKey(r.ctx, kid)
		if err != nil || k.HolderID != principal || k.OrganizationID != org || k.Status != envelope.KeyActive {
			continue
		}
		if signature.VerifyEntry(obj, i, k.Public) == nil {
			return true
		}
	}
	return false
}

func str(v any) string { s, _ := v.(string); return s }

func sha256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
