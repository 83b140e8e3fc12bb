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
			Description: "Either side, first act of a transaction, or a counter-offer or revision in it. Signs an offer with the complete terms and delivers it to the counterparty's instance; " +
				"opens a new transaction unless transaction_id continues one with a counter-offer (then supersedes_offer_id must name the session's latest offer, " +
				"else A202-OFFER-STALE). role says which side you take when you open (buyer for a purchase order or request for quote, supplier by default); " +
				"later offers keep the session's sides. The instance evaluates the act document {action_type: offer.submit, transaction_id, counterparty_organization_id, " +
				"proposed_terms: <terms>, category?, offeror_role: buyer (only when you are the buyer)} under your mandate before signing; a deny records nothing, " +
				"and a hold for approval names the approval request to poll (take the act again with the same transaction_id once approved). Returns the transaction id, the offer id and " +
				"status delivered or pending.",
			Input: obj([]string{"mandate_id", "counterparty_organization_id", "terms", "valid_until"}, map[string]any{
				"mandate_id":                   str("Your mandate (mnd_...) that lists offer.submit."),
				"counterparty_organization_id": str("The offeree organisation (org_...), a peered counterparty."),
				"terms":                        termsSchema,
				"valid_until":                  str("When the offer lapses, YYYY-MM-DDTHH:MM:SSZ, in the future."),
				"transaction_id":               str("For a counter-offer: the transaction it continues."),
				"supersedes_offer_id":          str("For a counter-offer: the session's latest offer."),
				"evidence_refs":                map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Short-form evidence references (evd_...)."},
				"role":                         map[string]any{"enum": []string{"buyer", "supplier"}, "description": "The side you take in a transaction you open (default supplier); a later offer may only repeat it."},
				"approval_id":                  str("The approval (apr_...) for exactly this offer, when your mandate holds it for approval."),
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
				"mandate_id":  str("Your mandate (mnd_...) that lists offer.withdraw."),
				"offer_id":    str("Your offer (off_...)."),
				"approval_id": str("The approval (apr_...) for exactly this withdrawal, when your mandate holds it for approval."),
			}),
			OutputType: typeOf[record.Outcome](), Write: true, OwnIdempotency: true, OpenWorld: true,
			Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
				return act(e, raw, ctx, e.WithdrawOffer)
			},
		},
		{
			Name:  "list_inbox",
			Title: "Offers waiting for you",
			Description: "Buyer side. Lists the counterparties' offers you can still accept (latest of each draft transaction, not lapsed). With mandate_id, " +
				"each offer carries acceptance_act: the exact act document accept_offer will be evaluated as. Pass it to verify_mandate, and to request_approval " +
				"if held, before calling accept_offer.",
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
				"profile and a term path; quantity, unit and consideration from the terms) and records obligation.activated (committed → in_performance). " +
				"The decision covers {action_type: obligation.activated, proposed_terms: {core: {quantity, unit_code, total}}, agreement_id}.",
			Input: obj([]string{"mandate_id", "transaction_id"}, map[string]any{
				"mandate_id":     str("Your mandate (mnd_...) that lists obligation.activated."),
				"transaction_id": str("The committed transaction (txn_...)."),
				"term_path":      str("The term discharged, e.g. $.terms.core.quantity (default)."),
				"due_condition":  map[string]any{"type": "object", "description": "A registered due condition, e.g. {type: due_at_time, at: ...} (default 21 days)."},
				"approval_id":    str("The approval (apr_...) for exactly this act, when your mandate holds it for approval."),
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
				"evidence": map[string]any{"type": "array", "minItems": 1, "items": obj([]string{"evidence_type", "claim", "artifact_hash"}, map[string]any{
					"evidence_type": str("A registered evidence type, e.g. third_party_certificate, delivery_confirmation, inspection_result."),
					"claim":         str("What the evidence shows, as inert text."),
					"artifact_hash": str("SHA-256 (64 lowercase hex) of the artifact."),
					"locator_hint":  str("Where the artifact can be fetched; never a secret."),
				})},
				"approval_id": str("The approval (apr_...) for exactly this assertion, when your mandate holds it for approval."),
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
				"may assert again). The decision covers {action_type: acceptance.granted|acceptance.rejected, proposed_terms: {core: {quantity, unit_code, total}}, assertion_id}.",
			Input: obj([]string{"mandate_id", "obligation_id", "response_type"}, map[string]any{
				"mandate_id":              str("Your mandate (mnd_...) that lists acceptance.granted / acceptance.rejected."),
				"obligation_id":           str("The obligation (obl_...)."),
				"response_type":           map[string]any{"enum": []string{"accept", "reject"}},
				"assertion_id":            str("The assertion answered (prf_...); default the latest."),
				"assertion_hash":          str("Its content hash; when given it must match."),
				"accepted_quantity":       str("For accept: quantity accepted (default: asserted)."),
				"remainder_due_condition": map[string]any{"type": "object", "description": "For a partial accept: the remainder's due condition."},
				"reason_code":             map[string]any{"enum": []string{"evidence_insufficient", "evidence_unverified", "quantity_short", "subject_not_as_agreed", "due_condition_not_met", "assertion_unauthorized"}},
				"approval_id":             str("The approval (apr_...) for exactly this response, when your mandate holds it for approval."),
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
			Name:  "get_transaction_record",
			Title: "A transaction's record",
			Description: "Shows a transaction as this instance holds it: every event with from → to states, who signed it and whether it is recorded or " +
				"pending, the chain status (intact, forked or broken), forks kept, the objects, and the current state. An unknown transaction is refused.",
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
