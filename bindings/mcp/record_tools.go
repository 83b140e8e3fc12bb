package mcp

import (
	"context"

	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// InboxResult wraps list_inbox's offers (structured content is an object).
type InboxResult struct {
	Offers []readmodel.InboxItem `json:"offers"`
}

// SettlementsResult wraps settlement_status: the instructions with their
// receipts, and each obligation's balance (what is owed, paid, in flight,
// forgone and outstanding), so that an agent reads what it may still
// instruct instead of computing it.
type SettlementsResult struct {
	Settlements []record.SettlementView `json:"settlements"`
	Obligations []ledger.Balance        `json:"obligations"`
}

// TransactionArgs names one transaction.
type TransactionArgs struct {
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
}

// InboxArgs are list_inbox's arguments.
type InboxArgs struct {
	MandateID string              `json:"mandate_id,omitempty" jsonschema:"Your mandate (mnd_...): adds acceptance_act."`
	Limit     readmodel.PageLimit `json:"limit,omitempty" jsonschema:"At most this many offers (default 50)."`
}

// VerifyEvidenceArgs are verify_evidence's arguments: exactly one of
// TransactionID and BundleDir.
type VerifyEvidenceArgs struct {
	TransactionID string `json:"transaction_id,omitempty" jsonschema:"Your record of this transaction (txn_...)."`
	BundleDir     string `json:"bundle_dir,omitempty" jsonschema:"A bundle directory on this machine."`
	RulesVersion  string `json:"rules_version,omitempty" jsonschema:"With bundle_dir: replay under this rules version."`
}

// actTool binds one of the engine's acts: a write tool that reaches the
// counterparty. A call with a request_id is made once: the engine records
// the request in the act's own commit. None is marked idempotent: without
// a request_id the same arguments act again where the record allows it (a
// second offer, a second assertion after a rejection, a new proposal once
// the record moved), which is why no key is derived from the arguments.
func actTool[In any](e *record.Engine, t Tool, f func(context.Context, record.Actor, In) (record.Outcome, error)) Tool {
	t.Write, t.OwnIdempotency, t.OpenWorld = true, true, true
	return Typed(t, func(ctx context.Context, in In) (record.Outcome, error) {
		a, err := e.Agent(AgentOf(ctx))
		if err != nil {
			return record.Outcome{}, err
		}
		r := RequestOf(ctx)
		return e.Idempotent(ctx, r.Scope, r.ID, r.ArgsHash, func(ctx context.Context) (record.Outcome, error) { return f(ctx, a, in) })
	})
}

// RecordTools returns the tools that act on and read the transaction
// record through the engine e.
//
// Each act's description says who takes it and when, what it records
// (the state it moves from → to), the refusals an agent can act on, and
// last the act document its decision is evaluated as ("Act: action_type
// {proposed_terms; references}"), which is what verify_mandate and
// request_approval take. Destructive marks the acts that pay, bind the
// organisation to terms or their performance, give up what is owed, or
// end an offer or a deal: an agent's client asks its user before those
// (docs/record-protocol.md, "The tool contract").
func RecordTools(e *record.Engine) []Tool {
	return []Tool{
		actTool(e, Tool{
			Name:  "propose_offer",
			Title: "Propose an offer",
			Description: "Signs an offer with the complete terms and delivers it. Without transaction_id it opens a transaction (role: your " +
				"side); with one, a counter-offer in draft (supersedes_offer_id: the latest offer) or, once committed, an amendment " +
				"offer. Act: offer.submit {terms; transaction_id, counterparty_organization_id, category?, offeror_role: buyer if you " +
				"are}.",
		}, e.ProposeOffer),
		actTool(e, Tool{
			Name:        "withdraw_offer",
			Title:       "Withdraw your offer",
			Destructive: true,
			Description: "Offeror, before acceptance: withdraws your latest offer; neither instance accepts it afterwards. Act: offer.withdraw " +
				"{the offer's terms; offer_id}.",
		}, e.WithdrawOffer),
		Typed(Tool{
			Name:  "list_inbox",
			Title: "Offers waiting for you",
			Description: "Offers you can accept: the latest of each draft transaction, and amendment offers (amendment: true). With mandate_id " +
				"each carries acceptance_act, the act document to verify.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in InboxArgs) (InboxResult, error) {
			a, err := e.Agent(AgentOf(ctx))
			if err != nil {
				return InboxResult{}, err
			}
			items, err := e.Inbox(ctx, a, in.MandateID, int(in.Limit))
			return InboxResult{Offers: items}, err
		}),
		actTool(e, Tool{
			Name:        "accept_offer",
			Title:       "Accept an offer",
			Destructive: true,
			Description: "Offeree. Accepts the offer over its hash and forms the agreement, signed by both: agreement.direct, then " +
				"agreement.committed (→ committed). Act: acceptance_act from list_inbox (offer.accept).",
		}, e.AcceptOffer),
		actTool(e, Tool{
			Name:  "issue_obligation",
			Title: "Issue an obligation",
			Description: "Obligee, once committed: issues the counterparty's duty under the agreement (or one per deliverable), " +
				"obligation.activated (→ in_performance). Act: obligation.activated {core: {quantity, unit_code, total}; agreement_id}.",
		}, e.IssueObligation),
		actTool(e, Tool{
			Name:  "assert_performance",
			Title: "Assert performance",
			Description: "Obligor: asserts performance with evidence, performance.declared (→ acceptance_pending). Act: performance.declared " +
				"{core: {quantity: asserted, unit_code, total}; obligation_id}.",
		}, e.AssertPerformance),
		actTool(e, Tool{
			Name:        "respond_to_assertion",
			Title:       "Accept or reject an assertion",
			Destructive: true,
			Description: "Obligee: accept the latest assertion (acceptance.granted → settlement_pending, payment falls due; less leaves a " +
				"remainder) or reject it with a reason_code (→ in_performance). Act: acceptance.granted or acceptance.rejected {core: " +
				"{quantity, unit_code, total}; assertion_id}.",
		}, e.Respond),
		actTool(e, Tool{
			Name:        "instruct_settlement",
			Title:       "Pay an accepted obligation",
			Destructive: true,
			Description: "Payer, in settlement_pending: pays what is outstanding on an accepted obligation, all or an instalment: " +
				"settlement.instructed, then the rail's receipt in both records. The same idempotency_key pays nothing twice. Act: " +
				"settlement.instruct {core: {total: amount}; agreement_id, obligation_id}.",
		}, e.InstructSettlement),
		Typed(Tool{
			Name:  "settlement_status",
			Title: "Payments of a transaction",
			Description: "A transaction's payments (instructions with rail, amount, state, receipts) and each obligation's balance: owed, paid, " +
				"in_flight, forgone, outstanding.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in TransactionArgs) (SettlementsResult, error) {
			st, err := e.SettlementStatus(ctx, in.TransactionID)
			if err != nil {
				return SettlementsResult{}, err
			}
			bal, err := e.Balances(ctx, in.TransactionID)
			return SettlementsResult{Settlements: st, Obligations: bal}, err
		}),
		actTool(e, Tool{
			Name:        "complete_transaction",
			Title:       "Close a settled transaction",
			Destructive: true,
			Description: "Either party, once every obligation is paid (or settled short), waived or released, nothing in flight: " +
				"transaction.completed (→ completed) seals the record. Act: transaction.complete {agreement's terms; agreement_id}.",
		}, e.CompleteTransaction),
		actTool(e, Tool{
			Name:        "cancel_transaction",
			Title:       "Cancel a transaction",
			Destructive: true,
			Description: "Either party, in draft or agreement_pending: transaction.cancelled (→ cancelled); nothing follows. Act: " +
				"transaction.cancel {the latest offer's terms}.",
		}, e.CancelTransaction),
		actTool(e, Tool{
			Name:        "waive_obligation",
			Title:       "Release a duty you are owed",
			Destructive: true,
			Description: "Obligee: releases the obligor from a pending or rejected obligation (a remainder, say); completion no longer waits for " +
				"it. Act: obligation.waive {core: {quantity, unit_code, total: its consideration or 0}; obligation_id}.",
		}, e.WaiveObligation),
		actTool(e, Tool{
			Name:        "propose_settlement_adjustment",
			Title:       "Propose a short settlement",
			Destructive: true,
			Description: "Either party, in settlement_pending, nothing in flight: signs the obligation's adjustment record as the ledger stands; " +
				"once the counterparty signs it (accept_settlement_adjustment) it is settled short. Act: settlement.adjust {core: " +
				"{total: amount forgone}; agreement_id, obligation_id}.",
		}, e.ProposeAdjustment),
		actTool(e, Tool{
			Name:        "accept_settlement_adjustment",
			Title:       "Accept a short settlement",
			Destructive: true,
			Description: "Signs the adjustment record the counterparty proposed, as the ledger still stands: the obligation is settled short. " +
				"Act: as propose_settlement_adjustment.",
		}, e.AcceptAdjustment),
		actTool(e, Tool{
			Name:        "propose_termination",
			Title:       "Propose to end a deal",
			Destructive: true,
			Description: "Either party, from committed to settlement_pending: signs the termination record as it stands (open obligations " +
				"released); the counterparty's agree_termination ends the deal. Act: termination.agree {agreement's terms; " +
				"agreement_id}.",
		}, e.ProposeTermination),
		actTool(e, Tool{
			Name:        "agree_termination",
			Title:       "Agree to end a deal",
			Destructive: true,
			Description: "Signs the counterparty's current termination record: termination.agreed (→ terminated), open obligations released. " +
				"Act: as propose_termination.",
		}, e.AgreeTermination),
		actTool(e, Tool{
			Name:        "accept_amendment",
			Title:       "Accept an amendment",
			Destructive: true,
			Description: "Offeree of an amendment offer: a new agreement version signed by both, agreement.amended. Duties added are issued " +
				"(add_obligations), dropped ones waived (waive_obligation_ids). Act: acceptance_act from list_inbox (agreement.amend).",
		}, e.AcceptAmendment),
		actTool(e, Tool{
			Name:  "raise_dispute",
			Title: "Raise a dispute",
			Description: "Either party, within 168 hours of the subject (an appeal 336). Suspends nothing, but disputing an obligation's state " +
				"in performance opens an exception. The respondent answers with issue_determination. Act: dispute.raise {terms in " +
				"force; agreement_id, subject_id}.",
		}, e.RaiseDispute),
		actTool(e, Tool{
			Name:  "raise_fork_dispute",
			Title: "Raise a fork as a dispute",
			Description: "When get_transaction_record shows a fork: disputes the last event both chains share (state_transition_invalid), both " +
				"chains as evidence. Act: dispute.raise {terms in force; agreement_id, subject_id}.",
		}, e.RaiseForkDispute),
		actTool(e, Tool{
			Name:        "issue_determination",
			Title:       "Determine a dispute",
			Destructive: true,
			Description: "The respondent, ordinarily conceding: a reasoned finding, rules applied, evidence, and an effect within the rules' " +
				"grant. A later one supersedes it with a reason. Act: determination.issue {terms in force; agreement_id, dispute_id}.",
		}, e.IssueDetermination),
		actTool(e, Tool{
			Name:  "open_exception",
			Title: "Open an exception",
			Description: "Either party, when a payment's latest receipt says failed or reversed: exception.opened (→ exception_open); it cancels " +
				"nothing. Then resolve_exception, propose_remediation or a termination. Act: exception.open {agreement's terms; " +
				"agreement_id}.",
		}, e.OpenException),
		actTool(e, Tool{
			Name:  "propose_remediation",
			Title: "Offer to perform a duty again",
			Description: "Obligor, in exception_open. Signs the remediation record (the duty performed again, no consideration of its own); the " +
				"obligee accepts with accept_remediation. Act: remediation.accept {agreement's terms; agreement_id}.",
		}, e.ProposeRemediation),
		actTool(e, Tool{
			Name:  "accept_remediation",
			Title: "Accept a remediation",
			Description: "Obligee. Signs the remediation record the obligor offered: remediation.accepted (→ in_performance), the remediation " +
				"obligation pending. Act: as propose_remediation.",
		}, e.AcceptRemediation),
		actTool(e, Tool{
			Name:  "resolve_exception",
			Title: "Resolve an exception you opened",
			Description: "The opener, in exception_open (after a dispute: once determined): exception.resolved (→ settlement_pending). Act: " +
				"exception.resolve {agreement's terms; agreement_id}.",
		}, e.ResolveException),
		actTool(e, Tool{
			Name:        "terminate_transaction",
			Title:       "Terminate through an exception",
			Destructive: true,
			Description: "Either party, in exception_open. Signs the termination record: transaction.terminated (→ terminated), open obligations " +
				"released. Act: transaction.terminate {agreement's terms; agreement_id}.",
		}, e.TerminateTransaction),
		Typed(Tool{
			Name:  "get_transaction_record",
			Title: "A transaction's record",
			Description: "A transaction as this instance holds it: events (from → to, signers), chain status, forks, obligations, termination " +
				"proposals, disputes, determinations, exceptions, ledger, deliveries waiting, notices, state.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in TransactionArgs) (readmodel.TransactionView, error) {
			return e.Transaction(ctx, in.TransactionID)
		}),
		Typed(Tool{
			Name:        "list_transactions",
			Title:       "Your transactions",
			Description: "Your transactions, latest first: counterparty, your role, state, event count. Pass next_cursor back as cursor.",
			ReadOnly:    true, Idempotent: true,
		}, e.ListTransactions),
	}
}

// VerifyTools returns verify_evidence over the instance's own record, or a
// bundle directory on this machine (a counterparty's export, say).
func VerifyTools(st *store.Store) []Tool {
	return []Tool{Typed(Tool{
		Name:  "verify_evidence",
		Title: "Verify a record",
		Description: "The seven-step verification (evidence verification §4) of your record of a transaction, as a third party would verify " +
			"its export, or of a bundle directory on this machine. Each check: verified, failed (with its code) or not_checkable.",
		ReadOnly: true, Idempotent: true,
	}, func(ctx context.Context, in VerifyEvidenceArgs) (*verify.Report, error) {
		switch {
		case (in.TransactionID == "") == (in.BundleDir == ""):
			return nil, reason.Refuse("give exactly one of transaction_id or bundle_dir")
		case in.TransactionID != "":
			if _, err := st.GetTransaction(ctx, in.TransactionID); err != nil {
				return nil, reason.Refuse("transaction " + in.TransactionID + " is unknown to this instance; call list_transactions")
			}
			return export.VerifyTransaction(ctx, st, in.TransactionID)
		default:
			return verify.VerifyDir(in.BundleDir, verify.Options{RulesVersion: in.RulesVersion})
		}
	})}
}
