package mcp

import (
	"context"
	"encoding/json"

	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// InboxResult wraps list_inbox's offers (structured content is an object).
type InboxResult struct {
	Offers []record.InboxItem `json:"offers"`
}

// SettlementsResult wraps settlement_status.
type SettlementsResult struct {
	Settlements []record.SettlementView `json:"settlements"`
}

// act runs one of the engine's acts, idempotent by the caller's
// request_id: the engine records the request in the act's own commit.
func act[T any](e *record.Engine, raw json.RawMessage, ctx context.Context, f func(context.Context, T) (record.Outcome, error)) (any, error) {
	var in T
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	r := RequestOf(ctx)
	return e.Idempotent(ctx, r.Scope, r.ID, r.ArgsHash, func(ctx context.Context) (record.Outcome, error) { return f(ctx, in) })
}

var termsSchema = map[string]any{
	"type": "object",
	"description": "The complete terms {profile, core, profile_terms}. profile is a registered transaction profile such as a202-profile/calibration-service/0.1; " +
		"core is {description, quantity, unit_code, unit_name?, total: {currency, amount}}; amounts and quantities are base-10 strings, never numbers.",
	"required": []string{"profile", "core", "profile_terms"},
}

var evidenceSchema = map[string]any{"type": "array", "minItems": 1, "items": obj([]string{"evidence_type", "claim", "artifact_hash"}, map[string]any{
	"evidence_type": str("A registered evidence type, e.g. third_party_certificate, delivery_confirmation, inspection_result."),
	"claim":         str("What the evidence shows, as inert text."),
	"artifact_hash": str("SHA-256 (64 lowercase hex) of the artifact."),
	"locator_hint":  str("Where the artifact can be fetched; never a secret."),
})}

var reasonSchema = map[string]any{"enum": []string{"evidence_insufficient", "evidence_unverified", "quantity_short", "subject_not_as_agreed", "due_condition_not_met", "assertion_unauthorized"}}

var moneySchema = obj([]string{"currency", "amount"}, map[string]any{
	"currency": str("ISO 4217 code, the terms' total's."),
	"amount":   str("Base-10 string."),
})

var deliverableSchema = obj([]string{"quantity"}, map[string]any{
	"term_path":     str("The term it discharges, under $.terms.core or $.terms.profile_terms (default $.terms.core.quantity)."),
	"quantity":      str("What it owes, in the terms' unit, a base-10 string."),
	"consideration": moneySchema,
	"due_condition": map[string]any{"type": "object", "description": "A registered due condition (default due_at_time 21 days from now)."},
})

func runWith[T any](raw json.RawMessage, f func(T) (any, error)) (any, error) {
	var in T
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	return f(in)
}

// RecordTools returns the tools that act on and read the transaction
// record through the engine e.
func RecordTools(e *record.Engine) []Tool {
	return []Tool{
		{
			Name:  "propose_offer",
			Title: "Propose an offer to a counterparty",
			Description: "Supplier side, first act of a transaction. Signs an offer with the complete terms and delivers it to the counterparty's instance; " +
				"opens a new transaction unless transaction_id continues one with a counter-offer (then supersedes_offer_id must name the session's latest offer, " +
				"else A202-OFFER-STALE). The instance evaluates the act document {action_type: offer.submit, transaction_id, counterparty_organization_id, " +
				"proposed_terms: <terms>, category?} under your mandate before signing; a deny records nothing. Returns the transaction id, the offer id and " +
				"status delivered or pending.",
			Input: obj([]string{"mandate_id", "counterparty_organization_id", "terms", "valid_until"}, map[string]any{
				"mandate_id":                   str("Your mandate (mnd_...) that lists offer.submit."),
				"counterparty_organization_id": str("The offeree organisation (org_...), a peered counterparty."),
				"terms":                        termsSchema,
				"valid_until":                  str("When the offer lapses, YYYY-MM-DDTHH:MM:SSZ, in the future."),
				"transaction_id":               str("For a counter-offer: the transaction it continues."),
				"supersedes_offer_id":          str("For a counter-offer: the session's latest offer."),
				"evidence_refs":                map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Short-form evidence references (evd_...)."},
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.ProposeOffer)
			},
		},
		{
			Name:  "withdraw_offer",
			Title: "Withdraw your offer",
			Description: "Offeror side, before acceptance. Withdraws your latest offer of a session: from then on your instance countersigns no " +
				"acceptance of it, and the counterparty's instance, once it receives your signed decision, refuses one too. The decision covers " +
				"{action_type: offer.withdraw, transaction_id, counterparty_organization_id, proposed_terms: <the offer's terms>, offer_id}; your " +
				"mandate must list offer.withdraw.",
			Input: obj([]string{"mandate_id", "offer_id"}, map[string]any{
				"mandate_id": str("Your mandate (mnd_...) that lists offer.withdraw."),
				"offer_id":   str("Your offer (off_...)."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.WithdrawOffer)
			},
		},
		{
			Name:  "list_inbox",
			Title: "Offers waiting for you",
			Description: "Lists the counterparties' offers you can still accept (latest of each draft transaction, not lapsed), and amendment offers " +
				"on committed deals (amendment: true, accepted with accept_amendment). With mandate_id, each offer carries acceptance_act: the exact act " +
				"document accept_offer (or accept_amendment) will be evaluated as. Pass it to verify_mandate, and to request_approval if held, before accepting.",
			Input: obj(nil, map[string]any{
				"mandate_id": str("Your mandate (mnd_...) that lists offer.accept, to compute acceptance_act."),
				"limit":      map[string]any{"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many offers (default 50)."},
			}),
			OutputType: typeOf[InboxResult](), ReadOnly: true, Idempotent: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return runWith(raw, func(in struct {
					MandateID string `json:"mandate_id"`
					Limit     int    `json:"limit"`
				}) (any, error) {
					items, err := e.Inbox(ctx, in.MandateID, in.Limit)
					return InboxResult{Offers: items}, err
				})
			},
		},
		{
			Name:  "accept_offer",
			Title: "Accept an offer and form the agreement",
			Description: "Buyer side. Accepts the offer over its exact hash and forms the agreement with the counterparty's instance: acceptance and " +
				"agreement.direct (draft → agreement_pending), then the agreement signed by both and agreement.committed (→ committed), each countersigned. " +
				"The decision must cover the act document acceptance_act from list_inbox (offer.accept); if verify_mandate answered require_approval, pass the " +
				"approval_id your principal gave. Returns the state reached, or pending with what it waits for.",
			Input: obj([]string{"mandate_id", "offer_id"}, map[string]any{
				"mandate_id":  str("Your mandate (mnd_...) that lists offer.accept and agreement.sign."),
				"offer_id":    str("The offer (off_...) from list_inbox."),
				"approval_id": str("The approval (apr_...) for exactly this acceptance, when the mandate holds acceptances for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.AcceptOffer)
			},
		},
		{
			Name:  "issue_obligation",
			Title: "Issue the counterparty's obligation",
			Description: "Obligee side, after committed. Issues the counterparty's duty under the committed agreement (subject bound to its terms_hash, " +
				"profile and a term path; quantity, unit and consideration from the terms, or one obligation per deliverable) and records obligation.activated " +
				"(committed → in_performance). The decision covers {action_type: obligation.activated, proposed_terms: {core: {quantity, unit_code, total}}, agreement_id}, " +
				"one per obligation.",
			Input: obj([]string{"mandate_id", "transaction_id"}, map[string]any{
				"mandate_id":     str("Your mandate (mnd_...) that lists obligation.activated."),
				"transaction_id": str("The committed transaction (txn_...)."),
				"term_path":      str("The term discharged, e.g. $.terms.core.quantity (default)."),
				"due_condition":  map[string]any{"type": "object", "description": "A registered due condition, e.g. {type: due_at_time, at: ...} (default 21 days)."},
				"deliverables": map[string]any{"type": "array", "minItems": 1, "items": deliverableSchema,
					"description": "Perform the agreement as several obligations, one per deliverable, issued together; their quantities sum to the terms' quantity " +
						"and their considerations to its total (else A202-OBLIGATION-TERMS-MUTATED). Each further obligation is an obligation.activated act of its own. " +
						"Omitted: one obligation for the whole terms."},
				"approval_id": str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.IssueObligation)
			},
		},
		{
			Name:  "assert_performance",
			Title: "Assert performance with evidence",
			Description: "Obligor side. Presents evidence objects and a performance assertion for the obligation and records performance.declared " +
				"(in_performance → acceptance_pending). At least one evidence item is required (else A202-OBLIGATION-ASSERTION-UNEVIDENCED). The decision " +
				"covers {action_type: performance.declared, proposed_terms: {core: {quantity: asserted, unit_code, total}}, obligation_id}.",
			Input: obj([]string{"mandate_id", "obligation_id", "evidence"}, map[string]any{
				"mandate_id":        str("Your mandate (mnd_...) that lists performance.declared."),
				"obligation_id":     str("The obligation (obl_...)."),
				"asserted_quantity": str("Quantity performed, a base-10 string (default: the obligation's)."),
				"evidence":          evidenceSchema,
				"assertions": map[string]any{"type": "array", "items": obj([]string{"obligation_id", "evidence"}, map[string]any{
					"obligation_id":     str("Another obligation still owed (obl_...)."),
					"asserted_quantity": str("Quantity performed (default: the obligation's)."),
					"evidence":          evidenceSchema,
				}), "description": "With several obligations: one declaration asserts every obligation still owed (pending or rejected), each with its own " +
					"evidence; one left out is refused with A202-STATE-TRANSITION-DENIED naming it."},
				"approval_id": str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.AssertPerformance)
			},
		},
		{
			Name:  "respond_to_assertion",
			Title: "Accept or reject an assertion",
			Description: "Obligee side. Answers the latest assertion, bound to its exact hash: accept (acceptance.granted → settlement_pending; accepting " +
				"less than owed issues a remainder obligation) or reject with a registered reason_code (acceptance.rejected → in_performance; the obligor " +
				"may assert again). A waiver is not an answer: use waive_obligation. The decision covers {action_type: acceptance.granted|acceptance.rejected, " +
				"proposed_terms: {core: {quantity, unit_code, total}}, assertion_id}.",
			Input: obj([]string{"mandate_id", "obligation_id", "response_type"}, map[string]any{
				"mandate_id":              str("Your mandate (mnd_...) that lists acceptance.granted / acceptance.rejected."),
				"obligation_id":           str("The obligation (obl_...)."),
				"response_type":           map[string]any{"enum": []string{"accept", "reject"}},
				"assertion_id":            str("The assertion answered (prf_...); default the latest."),
				"assertion_hash":          str("Its content hash; when given it must match."),
				"accepted_quantity":       str("For accept: quantity accepted (default: asserted)."),
				"remainder_due_condition": map[string]any{"type": "object", "description": "For a partial accept: the remainder's due condition."},
				"reason_code":             reasonSchema,
				"approval_id":             str("The approval (apr_...) for exactly this response, when your mandate holds it for approval."),
				"responses": map[string]any{"type": "array", "items": obj([]string{"obligation_id", "response_type"}, map[string]any{
					"obligation_id":           str("Another obligation with an outstanding assertion (obl_...)."),
					"response_type":           map[string]any{"enum": []string{"accept", "reject"}},
					"assertion_id":            str("The assertion answered (prf_...); default the outstanding one."),
					"assertion_hash":          str("Its content hash; when given it must match."),
					"accepted_quantity":       str("For accept: quantity accepted (default: asserted)."),
					"remainder_due_condition": map[string]any{"type": "object", "description": "For a partial accept: the remainder's due condition."},
					"reason_code":             reasonSchema,
				}), "description": "With several obligations: one response event answers every outstanding assertion, each by its own response; one " +
					"rejection makes it acceptance.rejected (→ in_performance, the accepted ones stay accepted)."},
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.Respond)
			},
		},
		{
			Name:  "instruct_settlement",
			Title: "Pay an accepted obligation",
			Description: "Payer side (the obligee, after acceptance.granted, in settlement_pending). Instructs payment of an accepted obligation's " +
				"consideration to its obligor on a rail your instance offers, records settlement.instructed once the counterparty countersigns, " +
				"then hands the instruction to the rail; the rail's answer becomes a receipt in both records. The decision covers {action_type: " +
				"settlement.instruct, proposed_terms: {core: {total: amount}}, agreement_id, obligation_id}. The same idempotency_key again " +
				"returns the first instruction and pays nothing twice; with other content it is A202-SETTLEMENT-IDEMPOTENCY-CONFLICT.",
			Input: obj([]string{"mandate_id", "obligation_id", "rail"}, map[string]any{
				"mandate_id":      str("Your mandate (mnd_...) that lists settlement.instruct."),
				"obligation_id":   str("The accepted obligation (obl_...)."),
				"rail":            str("A rail your instance offers (config.json rails; rail_test_sandbox by default). An unknown rail is refused with the list of those offered."),
				"idempotency_key": str("8 to 255 characters naming this payment to the rail; default a fresh one."),
				"amount": obj([]string{"currency", "amount"}, map[string]any{
					"currency": str("ISO 4217 code, the consideration's."),
					"amount":   str("Base-10 string, positive, at most the consideration (default: the consideration)."),
				}),
				"approval_id": str("The approval (apr_...) for exactly this instruction, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.InstructSettlement)
			},
		},
		{
			Name:  "settlement_status",
			Title: "Payments of a transaction",
			Description: "Lists a transaction's settlement instructions with their rail, idempotency key, amount, state (instructed, pending, " +
				"succeeded, failed) and every adapter receipt the rail's answers became. A receipt is evidence of what the rail said, never authority.",
			Input:      obj([]string{"transaction_id"}, map[string]any{"transaction_id": str("The transaction (txn_...).")}),
			OutputType: typeOf[SettlementsResult](), ReadOnly: true, Idempotent: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return runWith(raw, func(in struct {
					ID string `json:"transaction_id"`
				}) (any, error) {
					st, err := e.SettlementStatus(ctx, in.ID)
					return SettlementsResult{Settlements: st}, err
				})
			},
		},
		{
			Name:  "complete_transaction",
			Title: "Close a settled transaction",
			Description: "Either party, in settlement_pending. Records transaction.completed (→ completed) once every obligation is accepted " +
				"(or waived) and every consideration has a succeeded receipt; otherwise refused with A202-STATE-TRANSITION-DENIED saying what is " +
				"missing. The event seals the record with audit_bundle_hash. The decision covers {action_type: transaction.complete, " +
				"proposed_terms: <the agreement's terms>, agreement_id}.",
			Input: obj([]string{"mandate_id", "transaction_id"}, map[string]any{
				"mandate_id":     str("Your mandate (mnd_...) that lists transaction.complete."),
				"transaction_id": str("The transaction (txn_...)."),
				"approval_id":    str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.CompleteTransaction)
			},
		},
		{
			Name:  "cancel_transaction",
			Title: "Cancel a transaction before commitment",
			Description: "Either party, in draft or agreement_pending (for instance when the offeror's own policy declined to sign the agreement: both " +
				"instances then show a notice). Records transaction.cancelled (→ cancelled), countersigned; nothing follows a cancelled transaction. " +
				"A committed one is ended with propose_termination instead. The decision covers {action_type: transaction.cancel, proposed_terms: " +
				"<the latest offer's terms>}.",
			Input: obj([]string{"mandate_id", "transaction_id"}, map[string]any{
				"mandate_id":     str("Your mandate (mnd_...) that lists transaction.cancel."),
				"transaction_id": str("The transaction (txn_...)."),
				"approval_id":    str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.CancelTransaction)
			},
		},
		{
			Name:  "waive_obligation",
			Title: "Release a duty you are owed",
			Description: "Obligee side. Releases the obligor from an obligation you no longer want (pending, or rejected; a partial acceptance's " +
				"remainder included, which settlement_pending gives no way to perform) by your signed waive response: the obligation is waived in " +
				"both records and completion no longer waits for it. An assertion still outstanding is answered first. The decision covers " +
				"{action_type: obligation.waive, proposed_terms: {core: {quantity, unit_code, total: its consideration, or 0}}, obligation_id}.",
			Input: obj([]string{"mandate_id", "obligation_id"}, map[string]any{
				"mandate_id":    str("Your mandate (mnd_...) that lists obligation.waive."),
				"obligation_id": str("The obligation (obl_...) you are the obligee of."),
				"approval_id":   str("The approval (apr_...) for exactly this waiver, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.WaiveObligation)
			},
		},
		{
			Name:  "propose_termination",
			Title: "Propose to end a committed deal by agreement",
			Description: "Either party, in committed, in_performance, acceptance_pending or settlement_pending. Signs the termination record of the " +
				"transaction as it stands (every obligation not yet terminal named, disposition released; its hash is returned as termination_record_hash) " +
				"and sends your signature to the counterparty, whose agent agrees with agree_termination. The counterparty's get_transaction_record lists " +
				"it under termination_proposals. If the record moves on before it is agreed, propose again. The decision covers {action_type: " +
				"termination.agree, proposed_terms: <the agreement's terms>, agreement_id}.",
			Input: obj([]string{"mandate_id", "transaction_id"}, map[string]any{
				"mandate_id":     str("Your mandate (mnd_...) that lists termination.agree."),
				"transaction_id": str("The transaction (txn_...)."),
				"approval_id":    str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.ProposeTermination)
			},
		},
		{
			Name:  "agree_termination",
			Title: "Agree to the counterparty's termination",
			Description: "The party that did not propose. Agrees to the counterparty's proposal for the record as it stands: your signature over the " +
				"same termination record hash and termination.agreed (→ terminated), countersigned; every open obligation is released in both records. " +
				"Refused with A202-STATE-TRANSITION-DENIED when no current proposal of the counterparty's is held. The decision covers {action_type: " +
				"termination.agree, proposed_terms: <the agreement's terms>, agreement_id}.",
			Input: obj([]string{"mandate_id", "transaction_id"}, map[string]any{
				"mandate_id":     str("Your mandate (mnd_...) that lists termination.agree."),
				"transaction_id": str("The transaction (txn_...)."),
				"approval_id":    str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.AgreeTermination)
			},
		},
		{
			Name:  "propose_amendment",
			Title: "Offer new terms for a committed deal",
			Description: "Either party, in committed or in_performance. Signs a fresh offer with the complete new terms on the transaction and delivers " +
				"it; the counterparty accepts it with accept_amendment. The first amendment offer supersedes nothing; a counter-offer within the " +
				"amendment names the preceding one (else A202-OFFER-STALE). The decision covers {action_type: offer.submit, proposed_terms: <terms>}.",
			Input: obj([]string{"mandate_id", "transaction_id", "counterparty_organization_id", "terms", "valid_until"}, map[string]any{
				"mandate_id":                   str("Your mandate (mnd_...) that lists offer.submit."),
				"transaction_id":               str("The committed transaction (txn_...)."),
				"counterparty_organization_id": str("The counterparty (org_...)."),
				"terms":                        termsSchema,
				"valid_until":                  str("When the offer lapses, YYYY-MM-DDTHH:MM:SSZ, in the future."),
				"supersedes_offer_id":          str("For a counter-offer within the amendment: the preceding amendment offer."),
				"evidence_refs":                map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Short-form evidence references (evd_...)."},
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.ProposeOffer)
			},
		},
		{
			Name:  "accept_amendment",
			Title: "Accept new terms and amend the agreement",
			Description: "The offeree of an amendment offer (list_inbox shows it with amendment: true). Accepts it over its exact hash and records a new " +
				"agreement version (previous_version_id: the agreement in force, kept unchanged), signed by both, with agreement.amended, countersigned, " +
				"the state unchanged. Duties you are owed that the new terms add are issued as new obligations under it (add_obligations); duties it " +
				"drops are waived (waive_obligation_ids); the obligations in force must then owe the new terms (else A202-OBLIGATION-TERMS-MUTATED). " +
				"Existing obligations keep their version's terms_hash. The decision covers acceptance_act from list_inbox ({action_type: agreement.amend, " +
				"proposed_terms: <the new terms>, agreement_id: the version amended}).",
			Input: obj([]string{"mandate_id", "offer_id"}, map[string]any{
				"mandate_id":           str("Your mandate (mnd_...) that lists agreement.amend (and obligation.activated / obligation.waive for what it adds or drops)."),
				"offer_id":             str("The amendment offer (off_...) from list_inbox."),
				"add_obligations":      map[string]any{"type": "array", "items": deliverableSchema, "description": "Duties the new terms add, owed to you."},
				"waive_obligation_ids": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Obligations (obl_...) owed to you that the new terms drop."},
				"approval_id":          str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.AcceptAmendment)
			},
		},
		{
			Name:  "get_transaction_record",
			Title: "A transaction's record",
			Description: "Shows a transaction as this instance holds it: every event with from → to states, who signed it and whether it is recorded or " +
				"pending, the chain status (intact, forked or broken), forks kept, the objects, every obligation's state (pending, asserted, accepted, " +
				"rejected, waived, released), termination records proposed and not yet agreed (termination_proposals; current ones can be agreed), a " +
				"notice when an act did not go through, and the current state. An unknown transaction is refused.",
			Input:      obj([]string{"transaction_id"}, map[string]any{"transaction_id": str("The transaction (txn_...).")}),
			OutputType: typeOf[record.TransactionView](), ReadOnly: true, Idempotent: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return runWith(raw, func(in struct {
					ID string `json:"transaction_id"`
				}) (any, error) {
					return e.Transaction(ctx, in.ID)
				})
			},
		},
		{
			Name:  "list_transactions",
			Title: "Your transactions",
			Description: "Lists the transactions this instance holds, most recently updated first, a page at a time, with the counterparty, your role, " +
				"the state and the number of recorded events. Filter by state or counterparty; pass next_cursor back as cursor for the next page.",
			Input: obj(nil, map[string]any{
				"state":                        str("Only transactions in this state, e.g. committed."),
				"counterparty_organization_id": str("Only transactions with this organisation (org_...)."),
				"limit":                        map[string]any{"type": "integer", "minimum": 1, "maximum": 500, "description": "Page size (default 50)."},
				"cursor":                       str("next_cursor from the previous page."),
			}),
			OutputType: typeOf[record.TransactionPage](), ReadOnly: true, Idempotent: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return runWith(raw, func(in record.ListFilter) (any, error) { return e.ListTransactions(ctx, in) })
			},
		},
	}
}

// VerifyTools returns verify_evidence over the instance's own record, or a
// bundle directory on this machine (a counterparty's export, say).
func VerifyTools(st *store.Store) []Tool {
	return []Tool{{
		Name:  "verify_evidence",
		Title: "Verify a record",
		Description: "Runs the published seven-step verification (evidence verification §4) over this instance's own record of a transaction " +
			"(transaction_id), exactly as a third party would verify its export, or over a bundle directory on this machine, such as one the " +
			"counterparty exported (bundle_dir). Every check is reported as verified, failed (with its registered code) or not_checkable, with " +
			"counts, scope and gaps; there is no single pass/fail. Give exactly one of transaction_id or bundle_dir.",
		Input: obj(nil, map[string]any{
			"transaction_id": str("Verify this instance's record of the transaction (txn_...)."),
			"bundle_dir":     str("Verify the bundle directory at this path on the instance's machine."),
			"rules_version":  str("With bundle_dir: the rules version to replay under, instead of bundle.json's."),
		}),
		OutputType: typeOf[verify.Report](), ReadOnly: true, Idempotent: true,
		Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
			return runWith(raw, func(in struct {
				TransactionID string `json:"transaction_id"`
				BundleDir     string `json:"bundle_dir"`
				RulesVersion  string `json:"rules_version"`
			}) (any, error) {
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
			})
		},
	}}
}
