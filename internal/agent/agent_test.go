package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// walkthroughMandate is the buyer mandate of the published walkthrough: a
// 4000.00 EUR limit, with acceptances above 3000.00 EUR held for the
// procurement lead's approval.
func walkthroughMandate(now time.Time) authority.IssueRequest {
	return authority.IssueRequest{
		ValidFrom:     envelope.Timestamp(now.Add(-time.Minute)),
		ValidUntil:    envelope.Timestamp(now.Add(30 * 24 * time.Hour)),
		Actions:       []string{"offer.accept", "obligation.activated", "acceptance.granted", "acceptance.rejected"},
		Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{"org_delta"}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		ApprovalRules: []map[string]any{{
			"id":                    "r_large_acceptance",
			"when":                  map[string]any{"path": "$.proposed_terms.core.total.amount", "operator": "minimum", "value": "3000.00"},
			"approver":              map[string]any{"organization_id": "org_northstar", "role": "procurement_lead"},
			"expires_after_seconds": 3600,
		}},
	}
}

func act(amount string) map[string]any {
	return authority.ActDocument("offer.accept", "txn_0123456789abcdef01234567", "org_delta", map[string]any{
		"profile": "a202-profile/calibration-service/0.1",
		"core": map[string]any{
			"description": "Calibration of 20 pressure transmitters", "quantity": "20", "unit_code": "H87",
			"total": map[string]any{"currency": "EUR", "amount": amount},
		},
		"profile_terms": map[string]any{
			"completion": map[string]any{"business_days_after_collection": 8, "business_calendar": "DE"},
			"payment":    map[string]any{"prepayment_percent": "25", "balance_trigger": "buyer_acceptance"},
			"acceptance": map[string]any{"certificate_required": true, "machine_readable_result_required": true, "qualification_standard": "ISO/IEC 17025:2017"},
			"rework":     map[string]any{"included_attempts": 1},
		},
	}, map[string]any{"category": "services.calibration"})
}

// walkthroughAgent is org_northstar's instance with the walkthrough
// mandate issued to its agent (edit, when not nil, changes the mandate
// first): the instance, its principal, its agent, the test's clock and the
// mandate's id.
func walkthroughAgent(t *testing.T, edit func(*authority.IssueRequest)) (*orgtest.Node, *principal.Surface, *agent.Surface, *clock, string) {
	t.Helper()
	c := &clock{t: time.Now().UTC().Truncate(time.Second)}
	n := orgtest.New(t, "org_northstar", c.now, true)
	// The instance's keys are dated by the wall clock as it was set up,
	// not by the test's: started before that, a second boundary earlier
	// on a slow machine, the clock would find them not yet valid.
	c.t = time.Now().UTC().Truncate(time.Second)
	p := n.Principal(t)
	req := walkthroughMandate(c.t)
	if edit != nil {
		edit(&req)
	}
	m, err := p.IssueMandate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return n, p, agent.New(n.Org), c, m["id"].(string)
}

func TestVerifyApproveAllow(t *testing.T) {
	ctx := context.Background()
	_, p, a, c, id := walkthroughAgent(t, nil)
	who, err := a.Whoami(ctx)
	if err != nil || len(who.Mandates) != 1 || who.Mandates[0].MandateID != id {
		t.Fatalf("whoami %+v %v", who, err)
	}

	// Above the limit: deny, naming the constraint.
	v, err := a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("4800.00")})
	if err != nil {
		t.Fatal(err)
	}
	if v.Decision != authority.Deny || !slices.Contains(v.ReasonCodes, reason.PolicyDenied) {
		t.Fatalf("4800.00: %+v", v)
	}
	denied := false
	for _, c := range v.Constraints {
		if c.ID == "c_total_amount" && c.Result != "satisfied" {
			denied = true
		}
	}
	if !denied {
		t.Fatalf("deny does not name c_total_amount: %+v", v.Constraints)
	}
	// A deny cannot be approved.
	if _, err := a.RequestApproval(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("4800.00")}); !errors.Is(err, reason.ErrRefused) {
		t.Fatalf("approval of a deny requested: %v", err)
	}

	// Under the limit but above the approval threshold: held.
	v, err = a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00")})
	if err != nil || v.Decision != authority.RequireApproval || !slices.Contains(v.ReasonCodes, reason.ApprovalRequired) {
		t.Fatalf("3200.00: %+v %v", v, err)
	}
	// Asking for an approval while presenting one is refused, recording
	// nothing (the pending list below has exactly one request).
	if _, err := a.RequestApproval(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00"), ApprovalID: "apr_000000000000000000000000"}); !errors.Is(err, reason.ErrRefused) {
		t.Fatalf("request presenting an approval: %v", err)
	}
	req, err := a.RequestApproval(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00")})
	if err != nil || req.Status != "pending" || req.ActionHash != v.ActionHash {
		t.Fatalf("request: %+v %v", req, err)
	}
	st, _ := a.ApprovalStatus(ctx, req.ApprovalRequestID)
	if st.Status != "pending" {
		t.Fatalf("status %+v", st)
	}
	pending, _ := p.Approvals(ctx, true)
	if len(pending) != 1 || pending[0].Act["action_type"] != "offer.accept" {
		t.Fatalf("pending %+v", pending)
	}
	if _, err := p.Decide(ctx, req.ApprovalRequestID, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Decide(ctx, req.ApprovalRequestID, false, nil); !errors.Is(err, principal.ErrDecided) {
		t.Fatalf("decided twice: %v", err)
	}
	st, _ = a.ApprovalStatus(ctx, req.ApprovalRequestID)
	if st.Status != "approved" || st.ApprovalID == "" {
		t.Fatalf("status %+v", st)
	}
	v, err = a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00"), ApprovalID: st.ApprovalID})
	if err != nil || v.Decision != authority.Allow {
		t.Fatalf("with approval: %+v %v", v, err)
	}
	// The approval binds the exact act: another amount is still held.
	v, _ = a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3100.00"), ApprovalID: st.ApprovalID})
	if v.Decision == authority.Allow || !slices.Contains(v.ReasonCodes, reason.ApprovalHashMismatch) {
		t.Fatalf("foreign approval released a hold: %+v", v)
	}
	// After its life, the approval keeps nothing open.
	c.t = c.t.Add(2 * time.Hour)
	st, _ = a.ApprovalStatus(ctx, req.ApprovalRequestID)
	if st.Status != "expired" {
		t.Fatalf("status after expiry %+v", st)
	}
	v, _ = a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00"), ApprovalID: st.ApprovalID})
	if v.Decision == authority.Allow {
		t.Fatal("an expired approval released the hold")
	}
}

func TestRevocationDeniesThroughLiveStatus(t *testing.T) {
	ctx := context.Background()
	_, p, a, _, id := walkthroughAgent(t, func(req *authority.IssueRequest) { req.ApprovalRules = nil })
	if v, _ := a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00")}); v.Decision != authority.Allow {
		t.Fatalf("before revocation: %+v", v)
	}
	if err := p.Revoke(ctx, id, "test"); err != nil {
		t.Fatal(err)
	}
	// Its own mandate's status is read from its record: denied at once,
	// no status cache in between (issue 39).
	v, _ := a.VerifyMandate(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00")})
	if v.Decision != authority.Deny || !slices.Contains(v.ReasonCodes, reason.MandateInactive) {
		t.Fatalf("after revocation: %+v", v)
	}
	if err := p.Reinstate(ctx, id, ""); err == nil {
		t.Fatal("a revoked mandate was reinstated")
	}
}

func TestUnheldMandateRefused(t *testing.T) {
	ctx := context.Background()
	n := orgtest.New(t, "org_northstar", nil, false)
	a := agent.New(n.Org)
	_, err := a.VerifyMandate(ctx, agent.VerifyInput{MandateID: "mnd_0123456789abcdef01234567", ProposedAction: act("1.00")})
	if !errors.Is(err, reason.ErrRefused) {
		t.Fatalf("unheld mandate: %v", err)
	}
}
