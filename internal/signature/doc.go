// Package signature signs and verifies A202 envelope objects, mandates and
// conformance grade documents.
//
// # What a signature covers
//
// An envelope object's signature entry is {key_id, algorithm, signature,
// signed_at, purpose} in the object's signatures array. The bytes it signs
// (canonical model §4 rule 5, decisions.md item 2) are
//
//	HashInput(obj) ‖ "." ‖ RFC 8785 of {algorithm, key_id, purpose, signed_at}
//
// where HashInput is the object's canonical bytes without content_hash,
// signatures and kernel_annotations. Because the entry's own members are
// covered, relabelling a signature's purpose, key, algorithm or time breaks
// it; because the signatures array is not, appending a signature never
// breaks an earlier one. SigningInput returns these bytes.
//
// A mandate is not an envelope object: it carries one proof {key_id,
// algorithm, created_at, purpose: "mandate_issuance", signature} over the
// mandate without proof, with created_at playing signed_at (spec-map D5).
// A conformance grade carries one signature {key_id, algorithm, signature,
// signed_at, purpose: "grade_issuance"} over the grade without signature.
//
// # Suites
//
// party signs ES256 (ECDSA P-256 over SHA-256) and verifies ES256 and EdDSA
// (Ed25519), decisions.md item 1. Values are base64url without padding; an
// ES256 value is the raw 64-byte r‖s, never DER. ECDSA is randomised, so
// two signatures of the same bytes differ: compare by verifying.
//
// # Purposes and counts
//
// PurposeAllowed, AllowedPurposes and MinSignatures carry the signature
// purpose table and the kernel schema's minimum counts. Sign refuses a
// purpose the table forbids; VerifyEntry refuses one too.
//
// # What is not here
//
// Which key a key_id names, and whether that key was active at signed_at
// and is now, is resolved from key_record chains by the caller; this
// package verifies bytes against the key it is given. It never checks
// content_hash either (that is its own verification step, with its own
// code). Failures are *reason.Refusal values carrying
// A202-EVIDENCE-SIGNATURE-INVALID; a signature that cannot be checked at
// all (the fixtures' placeholder value, an unknown key) is reported with
// ErrNotCheckable instead, never as verified.
package signature
