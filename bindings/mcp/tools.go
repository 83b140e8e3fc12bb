package mcp

import (
	"context"

	"github.com/partyd/party/internal/agent"
)

// ApprovalStatusArgs names the approval request approval_status reports.
type ApprovalStatusArgs struct {
	ApprovalRequestID string `json:"approval_request_id" jsonschema:"The id request_approval returned."`
}

func agentTools(a *agent.Surface) []Tool {
	return []Tool{
		Typed(Tool{
			Name:  "whoami",
			Title: "Who am I",
			Description: "Call first. Returns your organisation, your agent id and key id, the trading mandates your principal issued to you " +
				"(with actions, scope, validity and status), and the counterparties this instance is peered with.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, _ NoArgs) (agent.WhoamiResult, error) { return a.Whoami(ctx) }),
		Typed(Tool{
			Name:  "verify_mandate",
			Title: "Verify an act against a mandate",
			Description: "Call before every act. Evaluates one exact act document under one of your mandates and answers allow, deny or " +
				"require_approval, with the act's action_hash, each constraint's result and the approval rules matched. The instance " +
				"resolves the mandate's live status itself. Records nothing. On require_approval call request_approval; after your " +
				"principal approves, call verify_mandate again with approval_id to get allow.",
			ReadOnly: true,
		}, a.VerifyMandate),
		Typed(Tool{
			Name:  "request_approval",
			Title: "Ask your principal to approve an act",
			Description: "Call only after verify_mandate answered require_approval for this exact act. Records a pending approval request " +
				"that your principal sees with the exact act document; returns its approval_request_id and the action_hash. You cannot " +
				"approve it yourself. Subscribe to its resource, party://approvals/{approval_request_id}, to be notified when your principal decides, or poll approval_status.",
			Write: true,
		}, a.RequestApproval),
		Typed(Tool{
			Name:  "approval_status",
			Title: "Status of an approval request",
			Description: "Call after request_approval, or when the request's resource party://approvals/{approval_request_id} was updated. " +
				"Returns pending, approved (with approval_id and expires_at), rejected, or expired, with the request's mandate, transaction and times. " +
				"With an approval_id, call verify_mandate again to get allow, then take the act before the approval expires.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in ApprovalStatusArgs) (agent.ApprovalStatusResult, error) {
			return a.ApprovalStatus(ctx, in.ApprovalRequestID)
		}),
	}
}
