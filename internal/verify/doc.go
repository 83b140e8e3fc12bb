// Package verify is the third-party verifier of A202 records: the seven
// steps of evidence verification §4, run over what a bundle holds and
// nothing else. It needs no daemon, no database and no network, so anyone
// holding a bundle can import it and check a record without asking either
// party.
//
// # Use
//
// [VerifyDir] is the entry point for a bundle directory (package bundle's
// layout, decisions.md item 15):
//
//	rep, err := verify.VerifyDir(dir, verify.Options{})
//
// It reads the bundle and runs [Verify] over its [BundleInput], under the
// rules version bundle.json states unless [Options.RulesVersion] names
// another; its error is about reading only. A caller that holds the
// objects some other way (its own store, a bundle fixture) builds an
// [Input] and calls [Verify] itself.
//
// A party asked to countersign checks the record extended by the message
// the same way, over the part of the record the rules read about it (pilot
// state machine §8.1): [Gather] reads that working set through a [Reader]
// (the party's store; a bundle directory, [DirReader]; objects in memory,
// [NewReader]), and [Extend] runs the seven steps over it. Before
// recording its own event as countersigned, the appender checks the
// countersignature with [Countersigned].
//
// Verify always returns a report. Each check in it is verified, failed or
// not_checkable, and a failed check carries the registered code of the
// rule it broke. There is no overall verdict: a relying party reads the
// failures and the gaps and decides. `party verify` exits non-zero when
// any check failed and treats not_checkable as what it is, a gap.
//
// # The steps
//
//  1. Content hashes: every object's content_hash over its canonical bytes
//     (content_hash, signatures and kernel_annotations left out), and every
//     hash one object carries about another: offer_hash, terms_hash,
//     accepted_offer_hash, subject terms_hash, assertion_hash, a
//     superseded determination's hash, a dispute's subject_hash, and the
//     content_hash of every full-form evidence reference. A carried hash
//     is compared with the hash of the target's bytes as held. An
//     agreement's terms are the canonical bytes of its accepted offer's
//     terms (agreement_offer_terms).
//  2. Signatures: each value over the signing input under the declared
//     key; the purpose against the object's type; the key's status at
//     signed_at and now, from the key's key_record chain; the minimum
//     count (counted only over signatures that verified, by distinct keys);
//     the party entitled to sign each act; the countersignature of every
//     event in the bilateral record; each mandate's proof.
//  3. Version chains and determination supersession: start at 1, rise by
//     one, no forks, no two objects under one id.
//  4. Per-stream continuity: sequence +1 and previous_event_hash equal to
//     the preceding event's hash, within each stream only; a first event
//     naming a predecessor the bundle lacks is a boundary, not a gap.
//  5. Replay: each event's transition is legal under the rules version in
//     force when it appended (the bundle states it; a caller may override
//     it, per event too), from the state the replay reached; its guard
//     held as far as the bundle's objects show; its actor's mandate
//     covered it; its policy decision is an allow over its action hash;
//     every approval its mandate's approval rules call for over its act
//     was given (approval; see Acts and approvals below).
//     The guards the objects carry themselves are judged on the objects,
//     with or without the event: an amendment's fresh offer and
//     acceptance (agreement_amendment), an obligation's parties and
//     subject term (obligation_parties, obligation_subject_term), due
//     conditions free of discharge cycles (due_condition_acyclic), and a
//     short acceptance's remainder (acceptance_remainder).
//  6. Disputes and determinations, as far as the bundle decides them: a
//     dispute's subject and window (dispute_subject, dispute_window); a
//     determination's question, the rules version it cites, the rules it
//     applies, its effect and its supersession (determination_question,
//     determination_rules_in_force, determination_rules_applied,
//     determination_effect, determination_supersession). Whether its
//     finding follows from the rules over its inputs needs the rules'
//     content and the inputs: determination_finding is not_checkable.
//  7. What the discloser stated, then the gaps. A response or
//     determination whose assertion or dispute is withheld without being
//     stated as withheld is an incomplete disclosure
//     (disclosure_complete); a verification report the record carries is
//     judged as a report (stated_report). Then undisclosed streams,
//     unresolved references, unreferenced evidence and unregistered
//     types, each a not_checkable check and a list in the report.
//
// # The ledger, apart from the steps
//
// After the seven steps, Verify reads each transaction's money with
// package ledger and reports it in the report's ledger section: each
// obligation's balance, and the findings of party's own money rules
// (roles, a remainder's share, quantities, what an instruction may pay,
// what completion needs, receipts, settlement adjustments). No check fails
// for a finding: a record another implementation made is judged by the
// specification alone. Extend, the countersigner's check, refuses a
// finding about any object of the message (ledger.go).
//
// # Choices the specification leaves open
//
// Codes. Every failure carries a registered code. Where the document that
// defines a rule names its own code for it, that code is used, as the
// published reference does for agreements: A202-AGREEMENT-HASH-MISMATCH
// for offer_hash, terms_hash and accepted_offer_hash;
// A202-OBLIGATION-RESPONSE-HASH-MISMATCH for assertion_hash;
// A202-OBLIGATION-SUBJECT-UNREFERENCED for an obligation's subject terms
// hash; A202-OBLIGATION-RESPONSE-UNAUTHORIZED for a response by anyone but
// the obligee; A202-DETERMINATION-SUPERSESSION-FORKED for a supersession
// fork. The rules reported from the gate carry the gate's codes, which
// are those of the documents defining them, such as
// A202-DISPUTE-OUT-OF-WINDOW. Everything else uses the codes of evidence
// verification §8.
//
// The gate's rules. The cross-object rules the gate computes over a set
// (package gate: CheckBindings, CheckConditionCycles, CheckReport, and
// the static parts of a dispute or determination in gate.Envelope) are
// not restated here: each is asked of the gate over exactly the objects
// it relates, and reported as a check with its own name, step and
// subject: verified when the gate found nothing and every object the rule
// needs is held, not_checkable when one is not, failed with the gate's
// code otherwise.
//
// Stated disclosure. A bundle directory says what it withheld only if
// its bundle.json states stated_gaps or resolvable_hashes (BundleInput
// reads them); otherwise an absent object is a gap there, never a
// failure. A caller that holds the discloser's statement (bundle.json's,
// or a bundle fixture's context) passes it as Input.Disclosure: then the
// disclosed subset must verify without anything withheld beyond the
// stated gaps (evidence verification §6 rule 1), and an absence that was
// not stated fails. A verification report carried with the record is
// passed as Input.StatedReport.
//
// Gaps are never passes. A signature the verifier cannot check (no
// keys.json, an undeclared key, the published fixtures' placeholder value)
// is not_checkable, and every check that leans on it (counts, party
// attribution, guards, authority, decisions) is not_checkable too rather
// than verified. A key_record is relied on for a key's status only when
// its own hash and a signature of it verify.
//
// Key status "now" is resolved and reported (check key_status_now). A key
// revoked or expired since signing is stated in that check's detail and
// does not fail the signatures it made while active (canonical model §4
// rule 7); a signature made outside the key's active validity fails.
//
// Mandate status at append time is a live fact of the issuer's status
// endpoint, which an offline verifier never consults. mandate_authority
// checks what a bundle can show (proof, subject, organisation, interval,
// action, scope, delegation narrowing, revocation_records in the bundle)
// and says in its detail that the live status was not consulted. Of a
// mandate's revocation_records, the latest effective at the event's
// occurred_at decides (a reinstatement ends a suspension; revoked is
// final): any other status than active fails the event, or leaves it
// not_checkable when the two fall in the same second. A revocation
// effective only after the event is named in the detail, so a reader of
// either party's bundle (each carries the issuer's record, since the
// counterparty keeps the revocations it is sent) sees that the mandate
// was revoked later.
//
// Countersignatures. The bilateral record needs each event signed by the
// appending party and countersigned by the other (pilot state machine
// §8.1; decisions.md item 10). The published fixtures' events carry one
// signature (spec-map §14 C5); Options.SingleSignedEvents reads a record
// under the kernel's own minimum of one. [Countersigned] is the rule as
// the appender applies it to its own event returned countersigned, before
// recording it so: party's record engine accepts a countersignature only
// through it.
//
// Session identifiers. An offer's session_id names no stream on the
// bilateral path (canonical model §9.2), so it is not reported as an
// undisclosed stream. A policy decision naming a stream the bundle does
// not disclose is.
//
// Act names. mandate_authority maps events to the act the appending party
// performed, in the vocabulary of decisions.md item 6: agreement.direct is
// the offeree's offer.accept (or the offeror's offer.submit),
// agreement.committed is agreement.sign, settlement.instructed is
// settlement.instruct, termination.agreed termination.agree,
// agreement.amended agreement.amend; the obligation events are their own
// names.
//
// Acts and approvals. The act document behind an event is not in the
// record, but its members are, so the verifier rebuilds it (acts.go) and
// takes it as the act only when it hashes to the event's action_hash and
// its policy decision's. Then a mandate's category and geography scope is
// checked on the act, and its approval rules are evaluated over it
// (when.go: package authority exports no matcher, so the verifier carries
// one that reads a `when` as the evaluator does, with exact decimals): a
// rule that applies needs an approval in the bundle bound to the act's
// hash, on its transaction, approved by the organisation and role the
// rule names, signed by a live key of the acting organisation that is not
// its agent's, made before the act and unexpired at it (approvals.go).
// agreement.committed's guard asks the same of every act that formed the
// agreement, the offer and the countersignature included; a dispute and a
// determination, acts no event of their own records, have the same check
// on their objects, the act found through the party's policy decision
// (standaloneApproval). An act that
// does not rebuild to the recorded hash (another implementation's act
// shape) leaves those questions not_checkable. The published reference's
// acts rebuild, except its agreement.sign, an act it does not name.
//
// # Performance
//
// Hashing and signature verification, which dominate, run across
// Options.Workers goroutines (GOMAXPROCS by default); everything after
// reads their results in input order, so the report is the same however
// the work was scheduled. Each object is canonicalised once, its hash
// input serving its content hash and every one of its signatures. The
// per-object and per-event checks run on one fork per worker, each item's
// checks reassembled in item order (items.go); costs.go keeps the rest of
// a large record's cost down (pooled buffers, repeated details held
// once). The method and numbers are in docs/performance.md ("Verifier";
// "party verify end to end").
package verify
