package record

// What the engine continues by itself, outside any call: the acts a
// principal approved since they were held (ReleaseHeld, which package
// releases runs), and the transactions a restart interrupted (Resume).

import (
	"context"
	"encoding/json"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ReleaseHeld continues the acts this instance takes by itself that its
// principal has since approved: formation's commit, which a mandate's rule
// on agreement.sign holds until the principal approves it (the acts an
// agent takes are taken again by the agent; the offeror's signature is
// asked for again by the counterparty). A hold the principal rejected, or
// approved with an approval that ran out before the act was taken, ends
// instead: the transaction's notice says so, with a registered code
// (A202-POLICY-DENIED; A202-APPROVAL-REQUIRED), and the act is not taken
// (the agent may cancel, or propose anew). package releases runs it every two
// seconds; a test may call it directly.
func (e *Engine) ReleaseHeld(ctx context.Context) {
	// The requests decided since the last pass: at or after the latest
	// decision time seen, less the ones taken at that very instant.
	e.releasedMu.Lock()
	since := e.releasedSince
	e.releasedMu.Unlock()
	reqs, err := e.db.ApprovalRequestsDecidedSince(ctx, since)
	if err != nil {
		e.log.Warn("releasing held acts: listing approvals failed", "error", err)
		return
	}
	e.releasedMu.Lock()
	if e.released == nil {
		e.released = map[string]bool{}
	}
	var todo []store.ApprovalRequest
	for _, r := range reqs {
		if !e.released[r.ID] && (r.Status == store.ApprovalApproved || r.Status == store.ApprovalRejected) {
			todo = append(todo, r)
		}
	}
	if n := len(reqs); n > 0 && reqs[n-1].DecidedAt != e.releasedSince {
		e.releasedSince = reqs[n-1].DecidedAt
		clear(e.released)
	}
	for _, r := range reqs {
		if r.DecidedAt == e.releasedSince {
			e.released[r.ID] = true
		}
	}
	e.releasedMu.Unlock()
	for _, r := range todo {
		t, err := e.db.GetTransaction(ctx, r.TransactionID)
		if err != nil || protocol.State(t.State) != protocol.AgreementPending {
			continue
		}
		if msgs, err := e.db.TransactionOutbox(ctx, r.TransactionID); err == nil && len(msgs) > 0 {
			continue // a reply continues it
		}
		var end error
		switch {
		case heldAct(r) != protocol.ActAgreementSign:
			continue // an agent's act: the agent takes it again
		case r.Status == store.ApprovalRejected:
			end = refusef(reason.PolicyDenied, "your principal rejected approval request %s for this organisation's signature of the agreement: it is not signed, "+
				"and transaction %s stays agreement_pending until it is cancelled (cancel_transaction)", r.ID, r.TransactionID)
		case e.approvalExpired(ctx, r):
			end = refusef(reason.ApprovalRequired, "the approval of request %s for this organisation's signature of the agreement expired before it was taken: "+
				"ask your principal again (the act is taken again by request_approval's approval) or cancel transaction %s", r.ID, r.TransactionID)
		}
		if end != nil {
			now := e.clock()
			if err := e.update(ctx, r.TransactionID, func(tx *store.Txn) error { return tx.SetNotice(r.TransactionID, notice(end, now)) }); err != nil {
				e.log.Warn("noting an ended hold failed", "transaction_id", r.TransactionID, "error", err)
			}
			e.log.Info("a held act ends", "transaction_id", r.TransactionID, "approval_request_id", r.ID, "codes", reason.CodesOf(end))
			continue
		}
		unlock := e.lock(r.TransactionID)
		if err := e.advance(ctx, r.TransactionID); err != nil {
			e.log.Warn("continuing an approved act failed", "transaction_id", r.TransactionID, "codes", reason.CodesOf(err), "error", err)
		}
		unlock()
	}
}

// heldAct is the act an approval request holds.
func heldAct(r store.ApprovalRequest) protocol.Act {
	var doc struct {
		ActionType protocol.Act `json:"action_type"`
	}
	_ = json.Unmarshal(r.Act, &doc)
	return doc.ActionType
}

// approvalExpired reports whether an approved request's approval has run
// out of its life.
func (e *Engine) approvalExpired(ctx context.Context, r store.ApprovalRequest) bool {
	if r.Status != store.ApprovalApproved || r.ApprovalID == "" {
		return false
	}
	apr, ok := e.getTyped(ctx, r.TransactionID, r.ApprovalID, protocol.Approval)
	if !ok {
		return false
	}
	exp, err := envelope.ParseTimestamp(apr.P("expires_at"))
	return err == nil && !e.clock().Before(exp)
}

// Resume continues every transaction with unfinished work, found by
// indexes rather than by walking every transaction: messages waiting in
// the outbox are due at once (Start voided the dead process's leases) and
// the worker delivers them; a transaction left in agreement_pending by
// this instance's own formation continues where it stands. It is
// idempotent.
func (e *Engine) Resume(ctx context.Context) {
	ts, err := e.db.TransactionsInState(ctx, string(protocol.AgreementPending))
	if err != nil {
		e.log.Warn("resuming: listing transactions failed", "error", err)
		return
	}
	for _, t := range ts {
		if ctx.Err() != nil {
			return
		}
		if msgs, err := e.db.TransactionOutbox(ctx, t.ID); err == nil && len(msgs) > 0 {
			continue // the worker delivers it, and its reply continues
		}
		unlock := e.lock(t.ID)
		if err := e.advance(ctx, t.ID); err != nil {
			e.log.Warn("resuming formation failed", "transaction_id", t.ID, "codes", reason.CodesOf(err), "error", err)
		}
		unlock()
	}
	e.out.Poke()
}
