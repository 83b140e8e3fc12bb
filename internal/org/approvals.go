package org

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Approval requests (commercial mandate §8). An act a mandate holds for a
// principal's approval becomes a pending request that names the exact act
// document and the rules that held it; the principal's surfaces (CLI and
// admin page) list every request and decide it; the signed approval then
// releases exactly that act. A request is filed by the agent
// (request_approval) or by the instance itself when an act it is asked to
// take, or takes in answer to the counterparty, is held (FileApproval):
// one place, so that every hold is visible to the principal the same way.

// FileApproval records a pending approval request for act under mandateID,
// which res (the evaluator's answer for that act) holds for approval, and
// returns it. A pending request for the same act is returned instead of a
// second one, also to a filing at the same moment
// (store.FileApprovalRequest).
func (o *Org) FileApproval(ctx context.Context, mandateID string, act map[string]any, res authority.Result) (store.ApprovalRequest, error) {
	if res.Decision != authority.RequireApproval {
		return store.ApprovalRequest{}, errors.New("org: only an act held for approval is filed for approval")
	}
	doc, err := canonical.Marshal(act)
	if err != nil {
		return store.ApprovalRequest{}, err
	}
	rules, err := json.Marshal(res.ApprovalRulesMatched)
	if err != nil {
		return store.ApprovalRequest{}, err
	}
	id, err := envelope.NewID("req")
	if err != nil {
		return store.ApprovalRequest{}, err
	}
	txn, _ := act["transaction_id"].(string)
	var notes []string
	for _, f := range res.Findings {
		if f.Step == authority.StepBudget {
			notes = append(notes, f.Detail)
		}
	}
	r := store.ApprovalRequest{ID: id, MandateID: mandateID, TransactionID: txn, ActionHash: res.ActionHash, Act: doc, Rules: string(rules), Status: store.ApprovalPending,
		Note: strings.Join(notes, "; ")}
	r, filed, err := o.Store.FileApprovalRequest(ctx, r)
	if err != nil || !filed {
		return r, err
	}
	o.Log.Info("approval requested", "approval_request_id", id, "mandate_id", mandateID, "action_hash", res.ActionHash)
	o.hooksMu.Lock()
	hooks := append([]func(store.ApprovalRequest){}, o.requested...)
	o.hooksMu.Unlock()
	for _, fn := range hooks {
		fn(r)
	}
	return r, nil
}

// OnApprovalRequest registers fn to be called with each approval request
// FileApproval stores (the principal's webhook, package notify). fn must
// not block.
func (o *Org) OnApprovalRequest(fn func(store.ApprovalRequest)) {
	o.hooksMu.Lock()
	o.requested = append(o.requested, fn)
	o.hooksMu.Unlock()
}

// LatestApproval returns the latest request for act, whose action hash is
// actionHash, under mandateID (found false when there is none) and, when
// it was approved, the signed approval object. The act's transaction
// (its transaction_id, as FileApproval files it) is where its requests
// are kept.
func (o *Org) LatestApproval(ctx context.Context, mandateID string, act map[string]any, actionHash string) (req store.ApprovalRequest, approval map[string]any, found bool, err error) {
	txn, _ := act["transaction_id"].(string)
	list, err := o.Store.ApprovalRequestsFor(ctx, txn, mandateID, actionHash)
	if err != nil || len(list) == 0 {
		return store.ApprovalRequest{}, nil, false, err
	}
	req = list[len(list)-1]
	if req.Status != store.ApprovalApproved || req.ApprovalID == "" {
		return req, nil, true, nil
	}
	b, err := o.Store.GetObject(ctx, req.TransactionID, req.ApprovalID)
	if err != nil {
		return req, nil, true, err
	}
	approval, err = canonical.DecodeObject(b)
	return req, approval, true, err
}

// Held is the refusal of an act held for approval under request req: its
// evaluation's codes (A202-APPROVAL-REQUIRED) and the request to poll.
func Held(res authority.Result, req store.ApprovalRequest) error {
	err := res.Err()
	var r *reason.Refusal
	if !errors.As(err, &r) {
		r = reason.Refuse("held for approval", reason.ApprovalRequired)
	}
	out := *r
	out.ApprovalRequestID = req.ID
	switch {
	case req.Status == store.ApprovalRejected:
		out.Detail = "your principal rejected this exact act (approval request " + req.ID + "); it is not taken. " + r.Detail
	case heldAction(req) == "agreement.sign":
		// The instance's own signature of the agreement, which it takes by
		// itself once approved (record.Engine.ReleaseHeld).
		out.Detail = "this organisation's signature of the agreement is held for your principal's approval: approval request " + req.ID +
			" is pending; once it is approved this instance signs and commits by itself (subscribe to party://approvals/" + req.ID +
			" or poll approval_status to follow it). " + r.Detail
	default:
		out.Detail = "held for your principal's approval: approval request " + req.ID + " (action hash " + req.ActionHash + ") is pending; " +
			"subscribe to party://approvals/" + req.ID + " or poll approval_status, and once it is approved take the act again " +
			"(the approval is found by the act's hash, or pass its approval_id). " + r.Detail
	}
	return &out
}

// heldAction is the action_type of the act a request holds.
func heldAction(req store.ApprovalRequest) string {
	var doc struct {
		ActionType string `json:"action_type"`
	}
	_ = json.Unmarshal(req.Act, &doc)
	return doc.ActionType
}
