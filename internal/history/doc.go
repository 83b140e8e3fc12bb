// Package history writes a history for benchmarks: two state directories
// (a buyer's and a supplier's) holding many transactions of realistic
// shapes, every one a valid record that `party verify` accepts, written
// through the store in large database transactions instead of being
// traded act by act.
//
// # What it generates
//
// Transactions of six shapes (Kind), in a deterministic mix (Mix,
// DefaultMix: 68 % completed, 5 % committed, 12 % in performance, 8 % open
// offers, 5 % disputed, 2 % terminated, spread evenly through the
// history):
//
//   - Completed: offer, approval, acceptance, agreement countersigned;
//     the obligation issued, performance asserted with a certificate,
//     accepted, paid on the sandbox rail, the transaction completed (7
//     events).
//   - Committed: formed, nothing more (2 events).
//   - InPerformance: formed, the obligation issued, nothing more (3
//     events): a transaction open in performance.
//   - OpenOffer: an offer the supplier made and the buyer has not
//     answered (a draft, no events).
//   - Disputed: formed, the assertion rejected, the supplier's dispute
//     over the rejection, the buyer's presumptive determination, the
//     supplier's dispute over the obligation's state, which opened an
//     exception (6 events, exception_open).
//   - Terminated: formed, the obligation issued, then ended by consent:
//     the buyer proposed the termination and the supplier agreed, the
//     obligation released (4 events, terminated).
//
// # How
//
// Trade takes a recordtest pair and trades one genuine transaction of each
// shape on it, with the pair's own engines: these are the templates. While
// it trades, every act document either organisation's evaluator reads is
// kept by its action_hash (the evaluator asks its local policy about each
// act: the recorder wraps that policy and changes nothing it says). An act
// document is not in the record, only its hash, and the hash covers the
// transaction's id and the ids of the objects the act names, so a copy
// under fresh ids needs the document to hash again.
//
// Generate then writes n copies of the templates. For each copy, every
// identifier the template's transaction made (the transaction's, its
// session's, each of its objects', each approval request's) is replaced by
// a fresh one of the same prefix; what is not the transaction's (the
// organisations, agents, keys and mandates) stays. The template's objects
// are rewritten in an order where whatever an object names by hash comes
// first, and every hash in them is made again:
//
//   - a content hash of another object of the transaction (previous_event_hash,
//     offer_hash, accepted_offer_hash, trigger.accepting_act_hash, evidence
//     refs, ...) becomes that object's new content hash;
//   - an action hash becomes the hash of its recorded act document with the
//     identifiers replaced (and any content hash in it);
//   - audit_bundle_hash is computed again as the engine does: the hash of
//     {transaction_id, event_hashes} over the new chain before the event;
//   - mapping_report_hash is computed again as the engine does, from the
//     receipt's instruction, idempotency key and attempt;
//   - a determination's inputs_hash is the hash of its input set
//     (verify.DeterminationInputs), rebuilt from the template and made
//     again as an act document is;
//   - termination_record_hash (and the signed document's artifact_hash,
//     the same value) is computed again from its members
//     (verify.TerminationRecordHash) under the copy's identifiers;
//   - any other hash (terms_hash, a certificate's artifact_hash, a
//     dispute's rules_hash) covers no identifier and stays (Source.Stable
//     lists them per template).
//
// A template whose rows hold a hash that is none of these is refused when
// it is read, as is one whose derived hashes (audit bundle, mapping
// report, determination inputs, termination record, settlement
// fingerprint) this package does not compute as the engine did. A hash in
// an object that is none of these is kept as it is: the tests' verification
// of every copy is what shows it covered no identifier.
//
// Each object's new content_hash is the hash of its new hash input, and
// every signature entry of the template is made again over it with the
// same key (by key_id), purpose and signed_at: the keys are the two state
// directories' own agent and principal keys. The rewriting is done on the
// template's canonical bytes in place (tobj.compile finds, once per
// template, where each identifier, hash and signature value lies): every
// replacement has the length of what it replaces and none is a member
// name, so the bytes stay the canonical form, and a copy costs no
// decoding or encoding. An object both sides hold is made once and written to
// both with the same bytes.
//
// Every row the template's transaction has in either database
// (store.TransactionRows: the transaction, its objects, events,
// obligation states, settlements, spend, approval requests, inbox) is
// written again for the copy with identifiers and hashes replaced, so
// each side holds exactly what its engine would have written for that
// record. Two columns are computed, not mapped: a settlement's
// fingerprint (as the engine computes it, from the instruction) and an
// inbox row's message key (the hash of the template's key and the copy's
// transaction id: unique, and never matched by a message retransmitted,
// as none will be). Timestamps are the template's, but for the
// transaction row's created_at and updated_at, which list_transactions
// orders by: the i-th copy of n is shifted (n-i) µs earlier, so each has
// its own and the history is older than the templates.
//
// # Why the copies are valid
//
// A copy differs from its template only in identifiers and in hashes
// recomputed over them, by the same rules that made the template's, and
// is signed again by the same keys: whatever the verifier checks of the
// template (content hashes, signatures, the event chain, the acts rebuilt
// from the record and their policy decisions, the ledger, the completion's
// audit bundle) holds of the copy. TestGeneratedVerify exports and
// verifies every generated transaction on both sides and compares each
// report with its template's.
//
// # What it is not
//
// The sandbox rail's own ledger (a file of the rail) records only the
// templates' payments; a copy's settlement is succeeded in the record and
// never asked about again. The copies share the templates' timestamps.
package history
