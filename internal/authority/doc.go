// Package authority issues commercial mandates, evaluates acts against
// them, and turns the answer into the objects that travel: policy
// decisions and approvals (commercial mandate §3–§9).
//
// An act takes effect only under a valid, unexpired, unrevoked chain of
// mandates and only inside the scope that chain grants. The counterparty
// relies on this without trusting the party asserting it, so the evaluator
// is exact, deterministic and fails closed: every doubt is a deny.
//
// # Issuing
//
// Issue builds a mandate from an IssueRequest (the argument object of the
// published reference's issue_mandate tool) and signs its proof with the
// issuing principal's key. A spending_limit {currency, amount} becomes the
// constraints c_total_amount (commercial.decimal maximum on
// $.proposed_terms.core.total.amount) and c_total_currency
// (commercial.string equals on $.proposed_terms.core.total.currency), as in
// the reference. Nothing is signed until the gate, the mandate schema and
// this package's reading of every constraint accept the document, so a
// refused mandate never carries a signature. IssueDelegated issues a child
// and proves narrowing against its parent first.
//
// # Act documents
//
// An act is evaluated and hashed as one document (decisions.md 6):
//
//	{"action_type", "transaction_id", "counterparty_organization_id",
//	 "proposed_terms", <references>}
//
// with members that have no value omitted, never null ([ActDocument]). Its
// action_hash is the SHA-256 of its RFC 8785 bytes ([ActionHash]). The
// references are members such as agreement_id, obligation_id and
// assertion_id; a mandate whose scope names categories or geographies is
// satisfied only by an act carrying the top-level members category and
// geography, which is where the reference reads them.
//
// # Evaluating
//
// Evaluator.Evaluate follows commercial mandate §6 for one act and returns a
// Result: allow, deny or require_approval, the sorted registered reason
// codes, each constraint's result, the approval rules matched, and the
// action_hash. Inputs are the request and the caller's resolvers (keys,
// parent mandates, live status, evidence); the clock is injected; no model
// is called and the network is reached only through the status resolver.
// The same inputs give the same Result. The steps, with their codes:
//
//	1  act document readable                     A202-TERMS-INVALID
//	   mandate schema, gate, constraint forms     the gate's codes
//	2  subject is the actor (agent id, org, key)  A202-POLICY-DENIED
//	   subject key resolves                       A202-EVIDENCE-SIGNATURE-INVALID
//	   subject key (or its agent) live            A202-MANDATE-INACTIVE
//	3  proof verifies under the issuer            A202-EVIDENCE-SIGNATURE-INVALID
//	   principal's own key (stops here if not: a forged mandate's status
//	   endpoint is never contacted)
//	   issuer key live                            A202-MANDATE-INACTIVE
//	4  status resolved, fresh, about this mandate A202-MANDATE-STATUS-UNRESOLVED
//	   status active                              A202-MANDATE-INACTIVE
//	5  valid_from <= now < valid_until            A202-MANDATE-INACTIVE
//	6-7 every parent resolves, verifies, is live,
//	   and each child narrows it (gate.Narrowing,
//	   same organisation, issued by the parent's
//	   issuer or delegated principal)             A202-MANDATE-DELEGATION-WIDENING
//	8  action listed (deny by default)            A202-POLICY-DENIED
//	9  transaction, category, counterparty,
//	   geography inside every stated axis         A202-POLICY-DENIED
//	10 profile registered, profile_terms valid    A202-PROFILE-UNKNOWN / -TERMS-INVALID
//	11 each constraint, document order:
//	   unsatisfied, on_failure deny               A202-POLICY-DENIED (names the id)
//	   unsatisfied, on_failure require_approval   A202-APPROVAL-REQUIRED (hold)
//	   the constraint itself unevaluable
//	   (unregistered type or operator, outside
//	   the matrix, malformed value or path)       A202-MANDATE-CONSTRAINT-UNKNOWN
//	   the act's value not of the type            A202-POLICY-DENIED
//	12 each approval rule whose when matches      A202-APPROVAL-REQUIRED (hold)
//	   the acting mandate's local policy
//	   (Evaluator.Policy: deny only, never a hold) A202-POLICY-DENIED
//
// Steps 8–12 apply every mandate of the chain, not only the acting one. Any
// deny finding makes the decision deny; otherwise any hold makes it
// require_approval. Step 13, the transaction-state guard, is the caller's
// state machine; steps 14–15 are NewPolicyDecision and the caller's store.
// Status is never taken from the counterparty's message: only the Status
// resolver answers it.
//
// # Constraint paths and values
//
// A path is "$" followed by ".member" steps over the act document (spec-map
// D1): objects only, no array indexing, no quoting. A path that does not
// resolve satisfies only absent and none_of (nothing is not in a denied
// set); every other operator is unsatisfied. present and absent ignore the constraint's value, as does
// evidence_verified. Decimals are strings in the strict grammar
// ^(0|[1-9][0-9]*)(\.[0-9]{1,18})?$ and compare exactly ("20" equals
// "20.00"); NaN, Infinity, exponents, signs, separators and JSON numbers are
// refused, which makes the constraint unevaluable, which denies. Integers
// are JSON integers (a string of digits is not one). Timestamps are RFC 3339
// date-times with a zone; before and after are strict. matches is an
// unanchored RE2 search (anchor with ^ and $); an expression RE2 cannot
// compile is unevaluable. String comparison is exact, code point by code
// point. Counterparty references are org_ identifiers, geography
// references ISO 3166-1 alpha-2 codes. An evidence reference is an evd_
// identifier, a full reference object with evidence_id, or a non-empty
// array of them; evidence_verified holds only when the caller's
// EvidenceVerifier reports every one verified.
//
// # The type×operator matrix (spec-map D2)
//
//	                        eq  ne  one none min max match pres abs bef aft ev
//	commercial.decimal       x   x   x   x    x   x        x    x
//	commercial.integer       x   x   x   x    x   x        x    x
//	commercial.string        x   x   x   x            x    x    x
//	commercial.boolean       x   x                         x    x
//	commercial.timestamp     x   x                         x    x   x   x
//	commercial.set           x   x   x   x                 x    x
//	disclosure.path                                        x    x
//	evidence.reference                                     x    x           x
//	counterparty.reference   x   x   x   x                 x    x
//	geography.reference      x   x   x   x                 x    x
//
// one_of and none_of take a non-empty array of values of the type. Over a
// commercial.set the act's value is an array of strings (or one string) and
// one_of means every member is in the declared set, none_of that none is,
// equals set equality. A combination outside the matrix is unevaluable and
// denies with A202-MANDATE-CONSTRAINT-UNKNOWN, as does any unregistered
// type or operator, even one a schema let through.
//
// Approval rules' when predicates carry no type. Their comparison follows
// the operator: minimum and maximum are decimal over a string value and
// integer over an integer value, before and after timestamp, matches
// string, evidence_verified evidence, present and absent existence, and
// equals, not_equals, one_of and none_of compare two decimal strings as
// numbers and anything else by canonical JSON. A when the act's value
// cannot be compared under holds the act, as the reference does; a when
// whose own form is broken denies.
//
// # Approvals
//
// A hold is released only by an approval object ([NewApproval]) bound to the
// exact action_hash (else A202-APPROVAL-HASH-MISMATCH) and the act's
// transaction (else A202-STREAM-MISMATCH, as the reference), signed with
// object_issuance by the approving principal's own live key (else
// A202-EVIDENCE-SIGNATURE-INVALID), approved, unexpired, not dated in the
// future, living no longer than the shortest expires_after_seconds of the
// rules that held the act (DefaultApprovalLife when a require_approval
// constraint held it), from the acting organisation, and from the
// organisation and role each holding rule names (else
// A202-APPROVAL-REQUIRED). An approval never releases a deny.
//
// # Policy decisions
//
// NewPolicyDecision signs a Result with the acting agent's key (purpose
// policy_decision). An allow goes on the transaction stream with visibility
// transaction_parties and travels with the act (decisions.md 7). A deny or
// a hold goes on the actor's private stream with visibility
// private_to_actor and stream_sequence 0; Shareable and NewSharedDecision
// refuse to let it leave with A202-DISCLOSURE-DENIED. FreshEnough refuses a
// decision older than 60 s when the act is recorded, since the mandate may
// have been revoked since.
package authority
