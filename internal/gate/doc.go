// Package gate judges A202 documents: one envelope object, a mandate, a
// mandate chain, a carrier capability declaration, a conformance grade, or
// a bundle of objects. It answers accepted, or refused with every
// registered reason code that applies and a Problem for each thing found.
// It needs no daemon, database, network or keys.
//
// # Entry points
//
//	File(data, opt)              bytes of one file: a bare document, or a
//	                             published fixture recognised by fixture_kind
//	Document(doc, opt)           the same for a decoded JSON object
//	Envelope(obj, opt)           one envelope object on its own
//	Mandate(doc)                 one a202-mandate/0.1 document
//	MandateChain(parent, child)  both mandates, then Narrowing
//	Narrowing(parent, child)     monotonic narrowing on every axis (mandate §7)
//	Declaration(local, card)     carrier capability compatibility (binding §3.2, §4)
//	Grade(doc, opt)              role scope, expiry, then coverage (role scopes §3.2, §6)
//
// # Sets
//
// A set of objects judged as one record (a bundle fixture) is judged by
// the seven-step verifier, not here: every set-level rule (content
// hashes, version chains, stream continuity, replay, disputes and
// determinations, disclosure) has one implementation, package verify's.
// Package gate does not import verify (verify imports gate), so the set
// judge is injected: File and Document hand a bundle fixture's objects
// and its context ([ContextFromFixture]) to Options.JudgeSet, a SetJudge,
// and a caller that judges bundles passes verify.JudgeSet, as `party
// gate` does. With no JudgeSet a bundle is refused, without a code, with
// a problem saying so; everything else is judged as before.
//
// What gate keeps are the parts a set judge is made of: Envelope (each
// object's own judgment), SetContext, and the cross-object rules the
// verifier asks the gate for, rule by rule, over the objects each relates
// ([CheckBindings], CheckConditionCycles, [CheckReport]).
//
// # Two layers
//
// Each document passes through the schema layer (package schema, party's
// own JSON Schemas) and through the normative checks written here. The
// schema layer refuses without a code (Problem.Code ""). Every code the
// gate names comes from a normative check, never from reading schema
// error text, so each declared code of the published fixtures is produced
// with or without the schema layer; the tests run the fixtures both ways.
// Rules with no defined code that the gate enforces itself (the closed
// envelope, the full evidence reference form, a grade's lifetime) are
// also code-less problems.
//
// # Decisions the specification leaves open
//
// Where the specification is silent or contradicts itself (spec-map.md
// §14), the gate decides as follows.
//
//   - Annotations (C1, D21). kernel_annotations on a received object are
//     accepted and ignored: they are outside the hashed and signed bytes
//     (canonical model §4 rule 2), so they can change nothing. Only an
//     action_envelope carrying them is refused (A202-ANNOTATION-FORGED).
//     Party itself never emits them.
//   - Single objects are not hash-recomputed. The published single-object
//     fixtures carry synthetic content hashes (manifest fixture_kinds), so
//     Envelope checks only the hash's form; the set judge (the verifier's
//     step 1) recomputes. An agreement's terms_hash is recomputed
//     everywhere, because it depends on nothing outside the object.
//   - Signature counts are by distinct key: two entries by one key are one
//     party's signature, so an agreement needs two keys. A bare
//     transaction_event needs one signature (C5); the countersignature of
//     decisions.md item 10 is the record's rule, checked by the verifier.
//   - Dispute grounds (C20). Only the nine grounds of determination §3.5
//     are accepted, for every subject type; the kernel enum's four appeal
//     grounds belong to the operated appeal route.
//   - A determination's authority_basis_ref and appeal_route_ref must name
//     rules of the rule set its question cites, like rules_applied
//     (determination §4); otherwise A202-DETERMINATION-NOT-FOLLOWING.
//     With no resolvable rules the effect granted is advisory (§6), so
//     anything stronger is also an overclaim. A state_result for an
//     obligation_state question names an obligation state.
//   - Payer equal to payee is A202-SETTLEMENT-CUSTODY-REFUSED (C14), and
//     in a set the payer and payee are the obligation's two parties. The
//     rail registry holds only rail_test_sandbox (D17). A settlement
//     trigger resolves to an accepting obligation_response for the same
//     obligation, or to an acceptance.granted event, on the same
//     transaction.
//   - Private data. The members an offer, its terms, a principal and a
//     published JWK may carry are closed; any other member is
//     A202-DISCLOSURE-DENIED (canonical model §13). Other payloads' closed
//     shapes are the schema layer's. A locator hint with URL user
//     information, a credential query parameter, credential words or an
//     e-mail address is A202-DISCLOSURE-DENIED (evidence verification
//     §3.2); a dispute description naming an org_/agt_/prn_/off_/acc_/agr_
//     identifier that is not one of the two parties, stating a price, or
//     speaking of rivals is A202-DISCLOSURE-POLICY-VIOLATION (§3.6).
//   - Event data. A transaction-stream event carries the references of
//     the kernel's transactionEventData and nothing else; a value must
//     carry its member's prefix. Violations are
//     A202-DISCLOSURE-POLICY-VIOLATION, and a member name speaking of
//     rivals is refused at any depth as a second layer. An event on a
//     transaction stream other than its own transaction's is
//     A202-STREAM-MISMATCH. Any *.deleted event is
//     A202-STATE-TRANSITION-DENIED: nothing in the protocol is deleted.
//   - Replay (EVV §4 step 5). The set judge replays each event against
//     the rules version the context states for it, else the set's, else
//     Options.RulesVersion (default 1.3, decisions.md item 11); what the
//     replay asks besides the table is the verifier's (package verify,
//     step 5). A rules version that is not registered makes nothing legal
//     under it: an event read under one is refused
//     (A202-EVIDENCE-TRANSITION-ILLEGAL), not left unchecked. Package
//     rules documents the prose rows kept beyond the runner's tables (C4).
//   - Disclosure. A reference to an object the set lacks is a boundary,
//     except a response's assertion and a determination's dispute, which
//     must be disclosed or named in the context's stated gaps
//     (A202-EVIDENCE-DISCLOSURE-INCOMPLETE). A dispute whose subject is a
//     stated gap is not refused for it. A dispute's window runs from the
//     context's subject_act_at, else from the subject's created_at. A
//     determination's question cites the rules version the context states
//     in force (rules_version_in_force); a context that states none leaves
//     that unchecked, whatever version replay assumes. These two are the
//     context's, so the set judge takes them from CheckBindings.
//   - Delegation (C7, D25). Beyond the list of mandate §7, a child must
//     act for its parent's organisation, keep every parent constraint at
//     least as strict (deny stays deny; one_of may shrink; none_of may
//     grow; before/after may tighten; other operators keep their value)
//     and keep every parent approval rule. The child's issuer is not
//     checked against the parent's subject.
//   - Grades. A grade expires after it is issued and within 12 months of
//     it (conformance grades §4); it is read against Options.Now only when
//     Now is set. Role scope and expiry are read first; a grade failing
//     either is not read for coverage (role scopes §6.1). The family
//     registry of both scopes is data here (role scopes §4.3, §5.3).
//   - Decoding. Input is decoded strictly (package canonical). A document
//     refused only for a fractional or exponent number is refused for it
//     and then judged as read, so a float amount also names
//     A202-TERMS-INVALID.
package gate
