package authority

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
)

// MandateSpecVersion is the spec_version of a commercial mandate.
const MandateSpecVersion = "a202-mandate/0.1"

// Issuer names the principal issuing a mandate and the key it signs with.
type Issuer struct {
	OrganizationID string `json:"organization_id"`
	PrincipalID    string `json:"principal_id"`
	KeyID          string `json:"key_id"`
}

// Subject names who acts under a mandate: exactly one of an agent or a
// delegated principal, and the key it signs with.
type Subject struct {
	AgentID     string `json:"agent_id,omitempty"`
	PrincipalID string `json:"principal_id,omitempty"`
	KeyID       string `json:"key_id"`
}

// SpendingLimit is a ceiling on an act's total consideration.
type SpendingLimit struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

// Delegation is a mandate's delegation rule.
type Delegation struct {
	Allowed      bool `json:"allowed"`
	MaximumDepth int  `json:"maximum_depth"`
}

// IssueRequest is what a principal asks to issue. Its JSON form is the
// argument object of the published reference's issue_mandate tool, so a
// request written for that tool decodes here unchanged (ParseIssueRequest).
type IssueRequest struct {
	Issuer                    Issuer           `json:"issuer"`
	Subject                   Subject          `json:"subject"`
	RepresentedOrganizationID string           `json:"represented_organization_id"`
	ValidFrom                 string           `json:"valid_from"`
	ValidUntil                string           `json:"valid_until"`
	StatusEndpoint            string           `json:"status_endpoint"`
	Actions                   []string         `json:"actions"`
	Scope                     map[string]any   `json:"scope"`
	SpendingLimit             *SpendingLimit   `json:"spending_limit,omitempty"`
	Constraints               []map[string]any `json:"constraints,omitempty"`
	ApprovalRules             []map[string]any `json:"approval_rules,omitempty"`
	// Delegation defaults to {allowed: false, maximum_depth: 0}.
	Delegation   *Delegation `json:"delegation,omitempty"`
	EvidenceRefs []any       `json:"evidence_refs,omitempty"`
	// ParentMandateID is nil for a root mandate.
	ParentMandateID *string `json:"parent_mandate_id,omitempty"`
	// MandateID is the identifier to issue under; empty mints mnd_ + 24 hex.
	MandateID string `json:"mandate_id,omitempty"`
}

// ParseIssueRequest decodes an IssueRequest strictly: the canonical
// package's rules (no duplicate members, no floats, valid UTF-8) and no
// member the request does not define.
func ParseIssueRequest(data []byte) (IssueRequest, error) {
	if _, err := canonical.Decode(data); err != nil {
		return IssueRequest{}, fmt.Errorf("issue request: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var req IssueRequest
	if err := dec.Decode(&req); err != nil {
		return IssueRequest{}, fmt.Errorf("issue request: %w", err)
	}
	return req, nil
}

// SpendingLimitConstraints returns the two constraints a spending limit
// means, as the published reference writes them: c_total_amount, a
// commercial.decimal maximum on $.proposed_terms.core.total.amount, and
// c_total_currency, a commercial.string equals on
// $.proposed_terms.core.total.currency, both on_failure deny. A ceiling
// without its currency would be met by that number in any currency.
func SpendingLimitConstraints(limit SpendingLimit) []any {
	return []any{
		map[string]any{
			"id":         "c_total_amount",
			"type":       TypeDecimal,
			"path":       "$.proposed_terms.core.total.amount",
			"operator":   OpMaximum,
			"value":      limit.Amount,
			"on_failure": OnFailureDeny,
		},
		map[string]any{
			"id":         "c_total_currency",
			"type":       TypeString,
			"path":       "$.proposed_terms.core.total.currency",
			"operator":   OpEquals,
			"value":      limit.Currency,
			"on_failure": OnFailureDeny,
		},
	}
}

// Draft returns the unsigned mandate document req describes (no proof),
// in decoded JSON form. It checks nothing; Issue does.
func (req IssueRequest) Draft() (map[string]any, error) {
	id := req.MandateID
	if id == "" {
		var err error
		if id, err = envelope.NewID("mnd"); err != nil {
			return nil, err
		}
	}
	constraints := []any{}
	if req.SpendingLimit != nil {
		constraints = append(constraints, SpendingLimitConstraints(*req.SpendingLimit)...)
	}
	for _, c := range req.Constraints {
		constraints = append(constraints, c)
	}
	rules := []any{}
	for _, r := range req.ApprovalRules {
		rules = append(rules, r)
	}
	deleg := Delegation{}
	if req.Delegation != nil {
		deleg = *req.Delegation
	}
	actions := []any{}
	for _, a := range req.Actions {
		actions = append(actions, a)
	}
	evidence := []any{}
	evidence = append(evidence, req.EvidenceRefs...)
	subject := map[string]any{"key_id": req.Subject.KeyID}
	if req.Subject.AgentID != "" {
		subject["agent_id"] = req.Subject.AgentID
	}
	if req.Subject.PrincipalID != "" {
		subject["principal_id"] = req.Subject.PrincipalID
	}
	var parent any
	if req.ParentMandateID != nil {
		parent = *req.ParentMandateID
	}
	scope := req.Scope
	if scope == nil {
		scope = map[string]any{}
	}
	m := map[string]any{
		"spec_version": MandateSpecVersion,
		"id":           id,
		"issuer": map[string]any{
			"organization_id": req.Issuer.OrganizationID,
			"principal_id":    req.Issuer.PrincipalID,
			"key_id":          req.Issuer.KeyID,
		},
		"subject":                     subject,
		"represented_organization_id": req.RepresentedOrganizationID,
		"parent_mandate_id":           parent,
		"valid_from":                  req.ValidFrom,
		"valid_until":                 req.ValidUntil,
		"status_endpoint":             req.StatusEndpoint,
		"actions":                     actions,
		"scope":                       scope,
		"constraints":                 constraints,
		"approval_rules":              rules,
		"delegation":                  map[string]any{"allowed": deleg.Allowed, "maximum_depth": deleg.MaximumDepth},
		"evidence_refs":               evidence,
	}
	// One decoded form for everything downstream: json.Number integers,
	// []any arrays, map[string]any objects, exactly what a peer decodes.
	return normalize(m)
}

// Issue builds the mandate req describes and signs it with signer, the
// issuing principal's key (req.Issuer.KeyID), at now (proof.created_at).
//
// Nothing is signed unless the whole document passes first: the mandate
// schema, the gate's static checks (A202-MANDATE-UNBOUNDED,
// -SCOPE-TOO-BROAD, -DELEGATION-INCOHERENT, -INTERVAL-INVALID,
// -STATUS-INSECURE, -CONSTRAINT-UNKNOWN, -SUBJECT-AMBIGUOUS), and this
// package's own reading of every constraint and approval rule (a
// constraint the evaluator could never evaluate, such as a maximum of
// "4e3", is refused here with A202-MANDATE-CONSTRAINT-UNKNOWN rather than
// issued to deny every act later). A refusal is a *reason.Refusal.
//
// A delegated mandate (ParentMandateID set) is issued with IssueDelegated,
// which also proves narrowing against the parent.
func Issue(req IssueRequest, signer signature.Signer, now time.Time) (map[string]any, error) {
	if req.ParentMandateID != nil {
		return nil, reason.Refusef(reason.MandateDelegationWidening,
			"mandate names parent %s; issue it with IssueDelegated so narrowing is proved before signing", *req.ParentMandateID)
	}
	return issue(req, nil, signer, now)
}

// IssueDelegated is Issue for a child mandate: parent is the mandate named
// by req.ParentMandateID, and the child is refused with
// A202-MANDATE-DELEGATION-WIDENING unless it is equal to or narrower than
// parent on every axis (commercial mandate §7) and issued by the parent's
// issuing principal or by the principal the parent delegates to.
func IssueDelegated(req IssueRequest, parent map[string]any, signer signature.Signer, now time.Time) (map[string]any, error) {
	if req.ParentMandateID == nil {
		return nil, reason.Refusef(reason.MandateDelegationWidening, "a delegated mandate must name its parent")
	}
	p, err := normalize(parent)
	if err != nil {
		return nil, reason.Refusef(reason.MandateDelegationWidening, "parent mandate: %v", err)
	}
	return issue(req, p, signer, now)
}

func issue(req IssueRequest, parent map[string]any, signer signature.Signer, now time.Time) (map[string]any, error) {
	if signer == nil {
		return nil, errors.New("authority: Issue needs a signer")
	}
	if signer.KeyID() != req.Issuer.KeyID {
		return nil, reason.Refusef(reason.EvidenceSignatureInvalid,
			"the signer is %s but the issuer names %s: a proof by any other key is not the issuer's", signer.KeyID(), req.Issuer.KeyID)
	}
	m, err := req.Draft()
	if err != nil {
		return nil, reason.Refuse("mandate: " + err.Error())
	}
	// The schema requires a proof; check a copy carrying a proof-shaped
	// member that is never signed, stored or returned.
	probe := make(map[string]any, len(m)+1)
	for k, v := range m {
		probe[k] = v
	}
	probe["proof"] = map[string]any{
		"key_id":     req.Issuer.KeyID,
		"algorithm":  signer.Algorithm(),
		"created_at": envelope.Timestamp(now),
		"purpose":    signature.PurposeMandateIssuance,
		"signature":  signature.Placeholder,
	}
	if err := checkMandateDocument(probe); err != nil {
		return nil, err
	}
	if parent != nil {
		if problems := chainProblems(parent, probe); len(problems) > 0 {
			return nil, reason.Refuse("delegated mandate: "+strings.Join(problems, "; "), reason.MandateDelegationWidening)
		}
	}
	if err := signature.SignMandate(m, signer, now); err != nil {
		return nil, err
	}
	return m, nil
}

// checkMandateDocument runs the static checks on a mandate: the gate (the
// mandate schema and the invariants with their codes) and this evaluator's
// reading of each constraint and approval rule. It returns a
// *reason.Refusal or nil.
func checkMandateDocument(m map[string]any) error {
	var codes []reason.Code
	var details []string
	j := gate.Mandate(m)
	if !j.Accepted() {
		codes = append(codes, j.Codes...)
		for _, p := range j.Problems {
			details = append(details, p.String())
		}
	}
	for _, d := range constraintFormProblems(m) {
		codes = append(codes, reason.MandateConstraintUnknown)
		details = append(details, d)
	}
	if len(details) == 0 {
		return nil
	}
	return reason.Refuse("mandate refused: "+strings.Join(details, "; "), codes...)
}

// constraintFormProblems reads every constraint and approval rule of m the
// way the evaluator will, against an empty act, and reports each one whose
// own form (type, operator, path, value, on_failure) cannot be evaluated.
func constraintFormProblems(m map[string]any) []string {
	var out []string
	list, _ := m["constraints"].([]any)
	for i, raw := range list {
		c, ok := raw.(map[string]any)
		if !ok {
			out = append(out, fmt.Sprintf("constraint %d is not an object", i))
			continue
		}
		if f := constraintForm(c); f != "" {
			out = append(out, fmt.Sprintf("constraint %s: %s", show(c["id"]), f))
		}
	}
	rules, _ := m["approval_rules"].([]any)
	for i, raw := range rules {
		r, _ := raw.(map[string]any)
		when, _ := r["when"].(map[string]any)
		if when == nil {
			out = append(out, fmt.Sprintf("approval rule %d has no when predicate", i))
			continue
		}
		op, _ := when["operator"].(string)
		path, _ := when["path"].(string)
		if _, f := evalPredicate(context.Background(), predicate{untyped: true, op: op, path: path, value: when["value"]}, map[string]any{}, nil); f != nil && f.constraint {
			out = append(out, fmt.Sprintf("approval rule %s: %s", show(r["id"]), f.detail))
		}
	}
	return out
}

// constraintForm returns why constraint c cannot be evaluated whatever the
// act, or "".
func constraintForm(c map[string]any) string {
	typ, _ := c["type"].(string)
	op, _ := c["operator"].(string)
	path, _ := c["path"].(string)
	if of, _ := c["on_failure"].(string); of != OnFailureDeny && of != OnFailureRequireApproval {
		return fmt.Sprintf("on_failure %s is neither deny nor require_approval", show(c["on_failure"]))
	}
	if _, f := evalPredicate(context.Background(), predicate{typ: typ, op: op, path: path, value: c["value"]}, map[string]any{}, nil); f != nil && f.constraint {
		return f.detail
	}
	return ""
}

// normalize returns v's decoded JSON form: the strict decoder's reading of
// its canonical bytes. Go-built values (ints, []string, nested structs)
// become the shapes a peer decodes, and a value with a float or invalid
// UTF-8 is refused.
func normalize(v map[string]any) (map[string]any, error) {
	b, err := canonical.Marshal(v)
	if err != nil {
		return nil, err
	}
	return canonical.DecodeObject(b)
}
