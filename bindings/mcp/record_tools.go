package mcp

import (
	"context"

	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// InboxResult wraps list_inbox's offers (structured content is an object).
type InboxResult struct {
	Offers []record.InboxItem `json:"offers"`
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
	MandateID string           `json:"mandate_id,omitempty" jsonschema:"Your mandate (mnd_...) that lists offer.accept, to compute acceptance_act."`
	Limit     record.PageLimit `json:"limit,omitempty" jsonschema:"At most this many offers (default 50)."`
}

// VerifyEvidenceArgs are verify_evidence's arguments: exactly one of
// TransactionID and BundleDir.
type VerifyEvidenceArgs struct {
	TransactionID string `json:"transaction_id,omitempty" jsonschema:"Verify this instance's record of the transaction (txn_...)."`
	BundleDir     string `json:"bundle_dir,omitempty" jsonschema:"Verify the bundle directory at this path on the instance's machine."`
	RulesVersion  string `json:"rules_version,omitempty" jsonschema:"With bundle_dir: the rules version to replay under, instead of bundle.json's."`
}

// actTool binds one of the engine's acts: a write tool that reaches the
// counterparty, idempotent by the caller's request_id, which the engine
// records in the act's own commit.
func actTool[In any](e *record.Engine, t Tool, f func(context.Context, In) (record.Outcome, error)) Tool {
	t.Write, t.OwnIdempotency, t.OpenWorld = true, true, true
	return Typed(t, func(ctx context.Context, in In) (record.Outcome, error) {
		r := RequestOf(ctx)
		return e.Idempotent(ctx, r.Scope, r.ID, r.ArgsHash, func(ctx context.Context) (record.Outcome, error) { return f(ctx, in) })
	})
}

// RecordTools returns the tools that act on and read the transaction
// record through the engine e.
func RecordTools(e *record.Engine) []Tool {
	return []Tool{
		actTool(e, Tool{
			Name:  "propose_offer",
			Title: "Propose an offer to a counterparty",
			Description: "Either side, first act of a transaction, or a counter-offer or revision in it. Signs an offer with the complete terms and delivers it to the counterparty's instance; " +
				"opens a new transaction unless transaction_id continues one with a counter-offer (then supersedes_offer_id must name the session's latest offer, " +
				"else A202-OFFER-STALE). role says which side you take when you open (buyer for a purchase order or request for quote, supplier by default); " +
				"later offers keep the session's sides. The instance evaluates the act document {action_type: offer.submit, transaction_id, counterparty_organization_id, " +
				"proposed_terms: <terms>, category?, offeror_role: buyer (only when you are the buyer)} under your mandate before signing; a deny records nothing, " +
				"and a hold for approval names the approval request to poll (take the act again with the same transaction_id once approved). Returns the transaction id, the offer id and " +
				"status delivered or pending.",
		}, e.ProposeOffer),
		actTool(e, Tool{
			Name:  "withdraw_offer",
			Title: "Withdraw your offer",
			Description: "Offeror side, before acceptance. Withdraws your latest offer of a session: from then on your instance countersigns no " +
				"acceptance of it, and the counterparty's instance, once it receives your signed decision, refuses one too. The decision covers " +
				"{action_type: offer.withdraw, transaction_id, counterparty_organization_id, proposed_terms: <the offer's terms>, offer_id}; your " +
				"mandate must list offer.withdraw.",
		}, e.WithdrawOffer),
		Typed(Tool{
			Name:  "list_inbox",
			Title: "Offers waiting for you",
			Description: "Lists the counterparties' offers you can still accept (latest of each draft transaction, not lapsed), and amendment offers " +
				"on committed deals (amendment: true, accepted with accept_amendment). With mandate_id, each offer carries acceptance_act: the exact act " +
				"document accept_offer (or accept_amendment) will be evaluated as. Pass it to verify_mandate, and to request_approval if held, before accepting.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in InboxArgs) (InboxResult, error) {
			items, err := e.Inbox(ctx, in.MandateID, int(in.Limit))
			return InboxResult{Offers: items}, err
		}),
		actTool(e, Tool{
			Name:  "accept_offer",
			Title: "Accept an offer and form the agreement",
			Description: "Buyer side. Accepts the offer over its exact hash and forms the agreement with the counterparty's instance: acceptance and " +
				"agreement.direct (draft → agreement_pending), then the agreement signed by both and agreement.committed (→ committed), each countersigned. " +
				"The decision must cover the act document acceptance_act from list_inbox (offer.accept); if verify_mandate answered require_approval, pass the " +
				"approval_id your principal gave. Returns the state reached, or pending with what it waits for.",
		}, e.AcceptOffer),
		actTool(e, Tool{
			Name:  "issue_obligation",
			Title: "Issue the counterparty's obligation",
			Description: "Obligee side, after committed. Issues the counterparty's duty under the committed agreement (subject bound to its terms_hash, " +
				"profile and a term path; quantity, unit and consideration from the terms, or one obligation per deliverable) and records obligation.activated " +
				"(committed → in_performance). The decision covers {action_type: obligation.activated, proposed_terms: {core: {quantity, unit_code, total}}, agreement_id}, " +
				"one per obligation.",
		}, e.IssueObligation),
		actTool(e, Tool{
			Name:  "assert_performance",
			Title: "Assert performance with evidence",
			Description: "Obligor side. Presents evidence objects and a performance assertion for the obligation and records performance.declared " +
				"(in_performance → acceptance_pending). At least one evidence item is required (else A202-OBLIGATION-ASSERTION-UNEVIDENCED). The decision " +
				"covers {action_type: performance.declared, proposed_terms: {core: {quantity: asserted, unit_code, total}}, obligation_id}.",
		}, e.AssertPerformance),
		actTool(e, Tool{
			Name:  "respond_to_assertion",
			Title: "Accept or reject an assertion",
			Description: "Obligee side. Answers the latest assertion, bound to its exact hash: accept (acceptance.granted → settlement_pending; accepting " +
				"less than owed issues a remainder obligation) or reject with a registered reason_code (acceptance.rejected → in_performance; the obligor " +
				"may assert again). A waiver is not an answer: use waive_obligation. The decision covers {action_type: acceptance.granted|acceptance.rejected, " +
				"proposed_terms: {core: {quantity, unit_code, total}}, assertion_id}.",
		}, e.Respond),
		actTool(e, Tool{
			Name:  "instruct_settlement",
			Title: "Pay an accepted obligation",
			Description: "Payer side (the obligee, after acceptance.granted, in settlement_pending). Instructs payment of what is outstanding on an " +
				"accepted obligation (its accepted share of the consideration, less what was paid, is in flight or was forgone: settlement_status " +
				"shows it) to its obligor on a rail your instance offers, records settlement.instructed once the counterparty countersigns, then " +
				"hands the instruction to the rail; the rail's answer becomes a receipt in both records. amount defaults to all that is outstanding; " +
				"several instructions (instalments) may add up to it, never more, with any idempotency key (A202-SETTLEMENT-TRIGGER-ABSENT). " +
				"The decision covers {action_type: settlement.instruct, proposed_terms: {core: {total: amount}}, agreement_id, obligation_id}. " +
				"The same idempotency_key again returns the first instruction and pays nothing twice; with other content it is " +
				"A202-SETTLEMENT-IDEMPOTENCY-CONFLICT.",
		}, e.InstructSettlement),
		Typed(Tool{
			Name:  "settlement_status",
			Title: "Payments of a transaction",
			Description: "Lists a transaction's settlement instructions with their rail, idempotency key, amount, state (instructed, pending, " +
				"succeeded, failed, reversed) and every adapter receipt the rail's answers became, and each obligation's balance: owed (the " +
				"accepted share of its consideration), paid, in_flight, forgone and outstanding (what may still be instructed), and its " +
				"settlement (not_due, unpaid, in_flight, settled). A receipt is evidence of what the rail said, never authority; one that " +
				"contradicts an earlier answer is listed and changes nothing.",
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
			Name:  "complete_transaction",
			Title: "Close a settled transaction",
			Description: "Either party, in settlement_pending. Records transaction.completed (→ completed) once every obligation is accepted " +
				"and paid what is owed for it (or settled short by an adjustment both parties signed), with nothing in flight, or is waived or " +
				"released; otherwise refused with A202-STATE-TRANSITION-DENIED saying what is missing. The payee's countersignature means it " +
				"was paid what it is owed. The event seals the record with audit_bundle_hash. The decision covers {action_type: transaction.complete, " +
				"proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.CompleteTransaction),
		actTool(e, Tool{
			Name:  "cancel_transaction",
			Title: "Cancel a transaction before commitment",
			Description: "Either party, in draft or agreement_pending (for instance when the offeror's own policy declined to sign the agreement: both " +
				"instances then show a notice). Records transaction.cancelled (→ cancelled), countersigned; nothing follows a cancelled transaction. " +
				"A committed one is ended with propose_termination instead. The decision covers {action_type: transaction.cancel, proposed_terms: " +
				"<the latest offer's terms>}.",
		}, e.CancelTransaction),
		actTool(e, Tool{
			Name:  "waive_obligation",
			Title: "Release a duty you are owed",
			Description: "Obligee side. Releases the obligor from an obligation you no longer want (pending, or rejected; a partial acceptance's " +
				"remainder included, which settlement_pending gives no way to perform) by your signed waive response: the obligation is waived in " +
				"both records and completion no longer waits for it. An assertion still outstanding is answered first. The decision covers " +
				"{action_type: obligation.waive, proposed_terms: {core: {quantity, unit_code, total: its consideration, or 0}}, obligation_id}.",
		}, e.WaiveObligation),
		actTool(e, Tool{
			Name:  "propose_settlement_adjustment",
			Title: "Propose to settle an obligation short",
			Description: "Either party of an accepted obligation, in settlement_pending, with nothing in flight and something unpaid (settlement_status). " +
				"Signs the settlement adjustment record of the obligation as the ledger stands: what is owed, what was paid and by which instructions, " +
				"and the rest, forgone; the payments so far are accepted as settlement in full once the counterparty's agent signs the same record " +
				"with accept_settlement_adjustment. Then completion no longer waits for the rest. If the ledger moves first (a payment, a receipt), " +
				"propose again. The decision covers {action_type: settlement.adjust, proposed_terms: {core: {total: the amount forgone}}, " +
				"agreement_id, obligation_id}.",
		}, e.ProposeAdjustment),
		actTool(e, Tool{
			Name:  "accept_settlement_adjustment",
			Title: "Accept the counterparty's short settlement",
			Description: "The other party. Signs the settlement adjustment record the counterparty proposed for the obligation, as the ledger still " +
				"stands: both signatures settle it short (forgone in settlement_status). Refused with A202-STATE-TRANSITION-DENIED when no current " +
				"proposal of the counterparty's is held. The decision covers {action_type: settlement.adjust, proposed_terms: {core: {total: the " +
				"amount forgone}}, agreement_id, obligation_id}.",
		}, e.AcceptAdjustment),
		actTool(e, Tool{
			Name:  "propose_termination",
			Title: "Propose to end a committed deal by agreement",
			Description: "Either party, in committed, in_performance, acceptance_pending or settlement_pending. Signs the termination record of the " +
				"transaction as it stands (every obligation not yet terminal named, disposition released; its hash is returned as termination_record_hash) " +
				"and sends your signature to the counterparty, whose agent agrees with agree_termination. The counterparty's get_transaction_record lists " +
				"it under termination_proposals. If the record moves on before it is agreed, propose again. The decision covers {action_type: " +
				"termination.agree, proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.ProposeTermination),
		actTool(e, Tool{
			Name:  "agree_termination",
			Title: "Agree to the counterparty's termination",
			Description: "The party that did not propose. Agrees to the counterparty's proposal for the record as it stands: your signature over the " +
				"same termination record hash and termination.agreed (→ terminated), countersigned; every open obligation is released in both records. " +
				"Refused with A202-STATE-TRANSITION-DENIED when no current proposal of the counterparty's is held. The decision covers {action_type: " +
				"termination.agree, proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.AgreeTermination),
		actTool(e, Tool{
			Name:  "propose_amendment",
			Title: "Offer new terms for a committed deal",
			Description: "Either party, in committed or in_performance. Signs a fresh offer with the complete new terms on the transaction and delivers " +
				"it; the counterparty accepts it with accept_amendment. The first amendment offer supersedes nothing; a counter-offer within the " +
				"amendment names the preceding one (else A202-OFFER-STALE). The decision covers {action_type: offer.submit, proposed_terms: <terms>}.",
		}, e.ProposeAmendment),
		actTool(e, Tool{
			Name:  "accept_amendment",
			Title: "Accept new terms and amend the agreement",
			Description: "The offeree of an amendment offer (list_inbox shows it with amendment: true). Accepts it over its exact hash and records a new " +
				"agreement version (previous_version_id: the agreement in force, kept unchanged), signed by both, with agreement.amended, countersigned, " +
				"the state unchanged. Duties you are owed that the new terms add are issued as new obligations under it (add_obligations); duties it " +
				"drops are waived (waive_obligation_ids); the obligations in force must then owe the new terms (else A202-OBLIGATION-TERMS-MUTATED). " +
				"Existing obligations keep their version's terms_hash. The decision covers acceptance_act from list_inbox ({action_type: agreement.amend, " +
				"proposed_terms: <the new terms>, agreement_id: the version amended}).",
		}, e.AcceptAmendment),
		actTool(e, Tool{
			Name:  "raise_dispute",
			Title: "Dispute something the counterparty did",
			Description: "Either party, against the other (determination §3). One subject, named by id: an act (any object of the record: " +
				"an event, a response, an instruction, ...), obligation_state (an obligation's current state, by the obligation's id), a " +
				"determination of the counterparty's (an appeal) or a refusal; grounds from the closed list (authority_absent, authority_exceeded, " +
				"state_transition_invalid, obligation_not_performed, obligation_wrongly_rejected, evidence_unverified, disclosure_breach, " +
				"refusal_incorrect, rule_misapplied; else A202-DISPUTE-GROUNDS-UNKNOWN); at least one evidence item, held (evidence_ids) or new " +
				"(evidence) (else A202-EVIDENCE-UNVERIFIED); within the window of the rules in force at the subject act, 168 hours, an appeal 336 " +
				"(else A202-DISPUTE-OUT-OF-WINDOW). Raising suspends nothing: the state does not move, except that a dispute over an obligation's " +
				"state while the deal is performed opens an exception (→ exception_open, the obligation disputed). The counterparty, the " +
				"respondent, answers with issue_determination. The decision covers {action_type: dispute.raise, proposed_terms: <the terms in " +
				"force>, agreement_id, subject_id}.",
		}, e.RaiseDispute),
		actTool(e, Tool{
			Name:  "raise_fork_dispute",
			Title: "Raise a fork as a dispute",
			Description: "When get_transaction_record shows a fork (the counterparty signed a second successor of an event, which this instance " +
				"refused and kept): raises it as a dispute over the last event both chains share, ground state_transition_invalid, with both chains " +
				"as evidence (their chain hashes). Nothing moves; the record you hold stays the one you countersigned. The decision covers " +
				"{action_type: dispute.raise, proposed_terms: <the terms in force>, agreement_id, subject_id}.",
		}, e.RaiseForkDispute),
		actTool(e, Tool{
			Name:  "issue_determination",
			Title: "Determine a dispute raised against you",
			Description: "The respondent of a dispute (the rules name it the determiner; else A202-DETERMINATION-NOT-FOLLOWING), ordinarily " +
				"conceding. A reasoned finding, the rules applied, the evidence relied on, and an effect no more than the rules grant the question " +
				"(act and determination: binding; obligation_state: presumptive; refusal: advisory; else A202-DETERMINATION-EFFECT-OVERCLAIM). " +
				"state_result only under a binding effect, for an obligation standing disputed. A later determination of the same dispute names the " +
				"one it supersedes with a reason (appeal_outcome, corrected_input, rule_misapplication; else " +
				"A202-DETERMINATION-SUPERSESSION-UNREASONED); a determination already superseded cannot be superseded again " +
				"(A202-DETERMINATION-SUPERSESSION-FORKED). Nothing deletes a determination. The decision covers {action_type: " +
				"determination.issue, proposed_terms: <the terms in force>, agreement_id, dispute_id}.",
		}, e.IssueDetermination),
		actTool(e, Tool{
			Name:  "open_exception",
			Title: "Open an exception over a failed payment",
			Description: "Either party, in settlement_pending, when the latest receipt of a settlement instruction reports failed (settlement_status): " +
				"a failed or reversed payment does not cancel the obligation, it opens an exception (→ exception_open) over the obligation paid, " +
				"with the failed receipt as evidence. From exception_open: resolve_exception (the opener; → settlement_pending, then instruct " +
				"again), propose_remediation / accept_remediation (the duty performed again), terminate_transaction, or propose_termination. " +
				"The decision covers {action_type: exception.open, proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.OpenException),
		actTool(e, Tool{
			Name:  "propose_remediation",
			Title: "Offer to perform a duty again",
			Description: "The obligor of the exception's obligation, in exception_open. Signs the remediation record (the obligation performed " +
				"again: same quantity and unit, no consideration of its own, due a fixed delay after the offer) and sends the signature; the " +
				"obligee accepts with accept_remediation (get_transaction_record exceptions[].remediation_offers). The decision covers " +
				"{action_type: remediation.accept, proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.ProposeRemediation),
		actTool(e, Tool{
			Name:  "accept_remediation",
			Title: "Accept the counterparty's offer to remedy",
			Description: "The obligee, in exception_open, once the obligor offered (propose_remediation). Signs the same remediation record and " +
				"records remediation.accepted (→ in_performance) with the remediation obligation, pending: the obligor asserts it, you accept it, " +
				"and settlement goes on. The decision covers {action_type: remediation.accept, proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.AcceptRemediation),
		actTool(e, Tool{
			Name:  "resolve_exception",
			Title: "Resolve an exception you opened",
			Description: "The party that opened the exception, in exception_open; for one a dispute opened, once the dispute is determined. " +
				"Records exception.resolved (→ settlement_pending). The decision covers {action_type: exception.resolve, proposed_terms: " +
				"<the agreement's terms>, agreement_id}.",
		}, e.ResolveException),
		actTool(e, Tool{
			Name:  "terminate_transaction",
			Title: "End a transaction through its exception",
			Description: "Either party, in exception_open. Signs the termination record (every obligation not yet terminal released) and records " +
				"transaction.terminated (→ terminated), countersigned; nothing follows. To end it by agreement instead, propose_termination. " +
				"The decision covers {action_type: transaction.terminate, proposed_terms: <the agreement's terms>, agreement_id}.",
		}, e.TerminateTransaction),
		Typed(Tool{
			Name:  "get_transaction_record",
			Title: "A transaction's record",
			Description: "Shows a transaction as this instance holds it: every event with from → to states, who signed it and whether it is recorded or " +
				"pending, the chain status (intact, forked or broken), forks kept, the objects, every obligation's state (pending, asserted, accepted, " +
				"rejected, waived, released, disputed), termination records proposed and not yet agreed (termination_proposals; current ones can be " +
				"agreed), disputes (determined or not), determinations (effect, what supersedes them), exceptions (open, remediated, resolved, " +
				"terminated, with remediation offered), a notice when an act did not go through, and the current state. An unknown transaction is refused.",
			ReadOnly: true, Idempotent: true,
		}, func(ctx context.Context, in TransactionArgs) (record.TransactionView, error) {
			return e.Transaction(ctx, in.TransactionID)
		}),
		Typed(Tool{
			Name:  "list_transactions",
			Title: "Your transactions",
			Description: "Lists the transactions this instance holds, most recently updated first, a page at a time, with the counterparty, your role, " +
				"the state and the number of recorded events. Filter by state or counterparty; pass next_cursor back as cursor for the next page.",
			ReadOnly: true, Idempotent: true,
		}, e.ListTransactions),
	}
}

// VerifyTools returns verify_evidence over the instance's own record, or a
// bundle directory on this machine (a counterparty's export, say).
func VerifyTools(st *store.Store) []Tool {
	return []Tool{Typed(Tool{
		Name:  "verify_evidence",
		Title: "Verify a record",
		Description: "Runs the published seven-step verification (evidence verification §4) over this instance's own record of a transaction " +
			"(transaction_id), exactly as a third party would verify its export, or over a bundle directory on this machine, such as one the " +
			"counterparty exported (bundle_dir). Every check is reported as verified, failed (with its registered code) or not_checkable, with " +
			"counts, scope and gaps; there is no single pass/fail. Give exactly one of transaction_id or bundle_dir.",
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
			return export.VerifyBundle(in.BundleDir, in.RulesVersion)
		}
	})}
}
