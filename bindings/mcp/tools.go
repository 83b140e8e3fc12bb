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
			Description: "Call first: your organisation, agent and key, your mandates (actions, scope, validity, status), your budgets and your " +
				"counterparties.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, _ NoArgs) (agent.WhoamiResult, error) { return a.Whoami(ctx) }),
		Typed(Tool{
			Name:  "verify_mandate",
			Title: "Verify an act against a mandate",
			Description: "Call before every act: evaluates one exact act document (each act tool's Act: says it) under your mandate. Answers " +
				"allow, deny or require_approval, with the action_hash and each constraint's result. Records nothing.",
			ReadOnly: true, Idempotent: true,
		}, a.VerifyMandate),
		// Idempotent: a pending request for the same act under the same
		// mandate is returned, not filed again (org.FileApproval).
		Typed(Tool{
			Name:  "request_approval",
			Title: "Ask for approval",
			Description: "Only after verify_mandate answered require_approval: files a request your principal sees with the act document (a " +
				"pending one for the same act is returned). Subscribe to party://approvals/{approval_request_id} or poll " +
				"approval_status.",
			Write: true, Idempotent: true,
		}, a.RequestApproval),
		Typed(Tool{
			Name:  "approval_status",
			Title: "Status of an approval request",
			Description: "pending, approved (approval_id, expires_at), rejected or expired. With an approval_id: verify_mandate again, then act " +
				"before it expires.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in ApprovalStatusArgs) (agent.ApprovalStatusResult, error) {
			return a.ApprovalStatus(ctx, in.ApprovalRequestID)
		}),
	}
}
