package principal

import (
	"context"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
)

// What the principal's console (package admin) reads beside the requests:
// the counterparties' names, each mandate's limit against what was
// committed under it, and who decided a request. Reads only; nothing here
// signs.

// Peers returns the pinned counterparties' peer files, sorted by
// organisation: their display names, where they state one.
func (s *Surface) Peers() []instance.PeerInfo { return s.o.Peers.Peers() }

// MandateStanding is a mandate's spending limit against what its agent has
// committed this organisation to pay since the mandate took effect.
type MandateStanding struct {
	MandateID string `json:"mandate_id"`
	AgentID   string `json:"agent_id"`
	ValidFrom string `json:"valid_from"`
	// Currency and Limit are the mandate's ceiling on an act's total
	// (spending_limit: the least maximum its constraints put on
	// $.proposed_terms.core.total.amount); both "" when it sets none.
	Currency string `json:"currency,omitempty"`
	Limit    string `json:"limit,omitempty"`
	// Committed is what the agent committed in Currency since ValidFrom,
	// counted as a spend budget counts it (budget.Commitment.Counted), in
	// Transactions transactions.
	Committed    string `json:"committed,omitempty"`
	Transactions int    `json:"transactions"`
}

// Paths of an act's total, as a spending limit's constraints name them.
const (
	totalAmountPath   = "$.proposed_terms.core.total.amount"
	totalCurrencyPath = "$.proposed_terms.core.total.currency"
)

// MandateStanding reads a mandate's limit and what was committed under it.
// A202's spending limit caps each act's total, not a sum, so what is left
// of it is per act (the limit less the act's total); the sum is read from
// the same commitments the budgets count, by the mandate's agent, which
// is the mandate's as long as the agent holds one mandate at a time.
func (s *Surface) MandateStanding(ctx context.Context, mandateID string) (MandateStanding, error) {
	m, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return MandateStanding{}, err
	}
	doc, err := canonical.DecodeObject(m.Body)
	if err != nil {
		return MandateStanding{}, err
	}
	subj, _ := doc["subject"].(map[string]any)
	ms := MandateStanding{MandateID: mandateID}
	ms.AgentID, _ = subj["agent_id"].(string)
	ms.ValidFrom, _ = doc["valid_from"].(string)
	var limit decimal.Decimal
	found := false
	cs, _ := doc["constraints"].([]any)
	for _, x := range cs {
		c, _ := x.(map[string]any)
		v, _ := c["value"].(string)
		switch {
		case c["path"] == totalAmountPath && c["operator"] == authority.OpMaximum:
			if d, err := decimal.Parse(v); err == nil && (!found || d.Cmp(limit) < 0) {
				limit, found = d, true
			}
		case c["path"] == totalCurrencyPath && c["operator"] == authority.OpEquals:
			ms.Currency = v
		}
	}
	if !found || ms.Currency == "" {
		return MandateStanding{MandateID: mandateID, AgentID: ms.AgentID, ValidFrom: ms.ValidFrom}, nil
	}
	ms.Limit = limit.String()
	from, err := envelope.ParseTimestamp(ms.ValidFrom)
	if err != nil {
		return ms, err
	}
	st, done := s.o.Store.Snapshot(ctx)
	defer done()
	sum, n, err := st.BudgetReader(ctx).Spent(ms.Currency, ms.AgentID, "", from, s.o.Clock().Add(time.Second))
	if err != nil {
		return ms, err
	}
	ms.Committed, ms.Transactions = sum.String(), n
	return ms, nil
}

// Decision is a decided request's approval object as a person reads it:
// who decided, how, when, and what they wrote (conditions of an approval,
// the reason for a rejection: both are the object's signed conditions).
type Decision struct {
	ApprovalID     string   `json:"approval_id"`
	Decision       string   `json:"decision"`
	OrganizationID string   `json:"organization_id"`
	PrincipalID    string   `json:"principal_id"`
	Role           string   `json:"role"`
	DecidedAt      string   `json:"decided_at"`
	ExpiresAt      string   `json:"expires_at"`
	Conditions     []string `json:"conditions"`
	TransactionID  string   `json:"transaction_id,omitempty"`
	ActionHash     string   `json:"action_hash"`
}

// Decision reads the approval object a request about transaction
// transactionID was decided with.
func (s *Surface) Decision(ctx context.Context, transactionID, approvalID string) (Decision, error) {
	b, err := s.o.Store.GetObject(ctx, transactionID, approvalID)
	if err != nil {
		return Decision{}, err
	}
	return DecisionOf(b)
}

// DecisionOf reads a stored approval object.
func DecisionOf(b []byte) (Decision, error) {
	obj, err := canonical.DecodeObject(b)
	if err != nil {
		return Decision{}, err
	}
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	p, _ := obj["payload"].(map[string]any)
	ap, _ := p["approver"].(map[string]any)
	d := Decision{ApprovalID: str(obj, "id"), Decision: str(p, "decision"), OrganizationID: str(ap, "organization_id"), PrincipalID: str(ap, "principal_id"), Role: str(ap, "role"),
		DecidedAt: str(obj, "created_at"), ExpiresAt: str(p, "expires_at"), TransactionID: str(obj, "transaction_id"),
		ActionHash: str(p, "action_hash"), Conditions: []string{}}
	cs, _ := p["conditions"].([]any)
	for _, c := range cs {
		if c, ok := c.(string); ok {
			d.Conditions = append(d.Conditions, c)
		}
	}
	return d, nil
}

// ApprovalsVersion is a number that changes whenever a request is filed or
// decided, by this process or another (store.ApprovalRequestsVersion): the
// console's cheap test of whether its list changed.
func (s *Surface) ApprovalsVersion(ctx context.Context) (int64, error) {
	return s.o.Store.ApprovalRequestsVersion(ctx)
}
