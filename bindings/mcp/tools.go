package mcp

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/partyd/party/internal/agent"
)

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func obj(required []string, props map[string]any) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

const actDescription = `The act document: {"action_type", "transaction_id", "counterparty_organization_id", "proposed_terms", and references such as "agreement_id", "obligation_id", "assertion_id", "category"}. A member with no value is omitted, never null. Constraint paths address it from $, so a spending limit reads $.proposed_terms.core.total.amount. For offer.submit and offer.accept, proposed_terms is the whole terms object {profile, core, profile_terms}.`

func agentTools(a *agent.Surface) []Tool {
	return []Tool{
		{
			Name:  "whoami",
			Title: "Who am I",
			Description: "Call first. Returns your organisation, your agent id and key id, the trading mandates your principal issued to you " +
				"(with actions, scope, validity and status), and the counterparties this instance is peered with.",
			Input:      obj(nil, map[string]any{}),
			OutputType: typeOf[agent.WhoamiResult](),
			ReadOnly:   true, Idempotent: true,
			Run: func(ctx context.Context, _ json.RawMessage) (any, error) { return a.Whoami(ctx) },
		},
		{
			Name:  "verify_mandate",
			Title: "Verify an act against a mandate",
			Description: "Call before every act. Evaluates one exact act document under one of your mandates and answers allow, deny or " +
				"require_approval, with the act's action_hash, each constraint's result and the approval rules matched. The instance " +
				"resolves the mandate's live status itself. Records nothing. On require_approval call request_approval; after your " +
				"principal approves, call verify_mandate again with approval_id to get allow.",
			Input: obj([]string{"mandate_id", "proposed_action"}, map[string]any{
				"mandate_id":      str("The mandate you act under (mnd_...), from whoami."),
				"proposed_action": map[string]any{"type": "object", "description": actDescription},
				"approval_id":     str("An approval (apr_...) your principal gave for exactly this act, from approval_status."),
			}),
			OutputType: typeOf[agent.VerifyResult](),
			ReadOnly:   true, Idempotent: false,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				var in agent.VerifyInput
				if err := decode(raw, &in); err != nil {
					return nil, err
				}
				return a.VerifyMandate(ctx, in)
			},
		},
		{
			Name:  "request_approval",
			Title: "Ask your principal to approve an act",
			Description: "Call only after verify_mandate answered require_approval for this exact act. Records a pending approval request " +
				"that your principal sees with the exact act document; returns its approval_request_id and the action_hash. You cannot " +
				"approve it yourself. Poll approval_status.",
			Input: obj([]string{"mandate_id", "proposed_action"}, map[string]any{
				"mandate_id":      str("The mandate you act under (mnd_...)."),
				"proposed_action": map[string]any{"type": "object", "description": actDescription},
			}),
			OutputType: typeOf[agent.ApprovalRequestResult](),
			Write:      true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				var in agent.VerifyInput
				if err := decode(raw, &in); err != nil {
					return nil, err
				}
				return a.RequestApproval(ctx, in)
			},
		},
		{
			Name:  "approval_status",
			Title: "Status of an approval request",
			Description: "Poll after request_approval. Returns pending, approved (with approval_id and expires_at), rejected, or expired. " +
				"With an approval_id, call verify_mandate again to get allow, then take the act before the approval expires.",
			Input: obj([]string{"approval_request_id"}, map[string]any{
				"approval_request_id": str("The id request_approval returned."),
			}),
			OutputType: typeOf[agent.ApprovalStatusResult](),
			ReadOnly:   true, Idempotent: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				var in struct {
					ID string `json:"approval_request_id"`
				}
				if err := decode(raw, &in); err != nil {
					return nil, err
				}
				return a.ApprovalStatus(ctx, in.ID)
			},
		},
	}
}
