// Package grade is what one organisation can establish about the other's
// implementation with no third party present, and what it does with it
// (conformance grades §2–§6; role scopes §6–§8): present the refused
// cases of the published bilateral fixture families to the counterparty's
// instance over its carriers, issue a signed, peer-assessed grade of band
// 1 at most on what it answered, check a grade received, and hold a
// counterparty to a minimum grade in a mandate's local policy.
//
// # How the families are exercised against a live instance
//
// Role scopes §7.1 item 3: each party "presents the refused cases in the
// bilateral families and observes whether the other refuses with the
// stated code or guesses". The assessor ([Assess]) reads the published
// manifest and fixtures from the specification directory, keeps the
// cases of the sixteen bilateral families (role scopes §4.3: a fixture
// belongs to the family whose filename pattern it matches, a * not
// crossing "/"), and presents each refused case to the counterparty the
// way any A202 message travels: over A2A and over plain HTTPS, each in
// turn, with this instance's own clients of the two bindings (Carriers:
// the capability check first, pinned TLS, each object exactly its
// canonical bytes, decisions.md item 13). What the counterparty answers is
// observed; nothing it says about itself is read. (Earlier versions asked
// a probe route the counterparty served for its own verdict: a peer could
// simply claim to pass, and only party instances could be graded. The
// route is gone.)
//
// What a case becomes on a carrier, by the manifest's fixture kind:
//
//   - kernel: its one object. kernel_annotations are left out, because
//     nothing annotates an object between two parties (role scopes §4.4)
//     and annotations lie outside the content hash and every signature
//     (canonical model §4): the receiver meets the case's defect rather
//     than a forged annotation. The case whose defect is the annotation
//     (A202-ANNOTATION-FORGED) keeps it.
//   - bundle with no context: its objects, in order, as one message.
//   - not presented: a bundle with a context (rules in force, a
//     verification report, stated gaps, the subject act's time), which
//     travels in no message; a mandate or a delegation chain, since a
//     mandate is fetched by the relying party from its issuer (decisions.md
//     item 8), never carried; a grade, handed over out of band; a
//     capability declaration, which is the sender's own card or preflight,
//     read before any message; and every positive case, which is
//     established from the objects the counterparty emits (§7.1 items 1–2),
//     since presenting one asks it to take a published object into its
//     record.
//
// The correlation transaction_id is the objects' own, since the envelope
// is authoritative (binding §6.3: under another id the message is refused
// A202-STREAM-MISMATCH before any rule of the case is read); objects of no
// transaction travel under an id minted for the case. A case whose
// transaction this instance's record holds is not presented: a
// transaction between the two is in both records, and a grading run never
// sends into one. Only refused cases are sent, so a correct receiver
// stores nothing, and no real transaction can move.
//
// Each binding's answer is judged as the published runner judges a
// negative case: a pass when refused with the manifest's code among those
// returned (any refusal when it declares none). The published objects
// carry synthetic signatures by keys of organisations the receiver has
// not vouched for, act under mandates no status endpoint serves, and
// travel under their own transaction id; a receiver that authenticates
// before it reads an object's rules correctly refuses first with
// A202-EVIDENCE-SIGNATURE-INVALID (or -MANDATE-STATUS-UNRESOLVED,
// -STREAM-MISMATCH). Such a refusal alone, where the case declares another
// code, is inconclusive: neither a pass nor a failure. Anything else
// fails: the case taken, or refused with a code it does not call for. A
// case fails when either binding's verdict does, passes when both pass,
// and is inconclusive otherwise; the report keeps every binding's
// observation. party's own receiver gates each object before it resolves
// a signature key, so every kernel case meets its own rule over both
// bindings; a bundle's rules hold between objects, which it reads only
// once their signatures verify, so against party those cases are
// inconclusive. A case that cannot be observed (the counterparty
// unreachable, still asking to be sent again after three attempts, or not
// taking A202 messages over one of the bindings: A202-EXTENSION-UNSUPPORTED
// from its capability check) ends the run with an error: a grade is
// issued on a complete assessment or not at all.
//
// # The grade
//
// Build turns an assessment into a grade document (conformance grades §4,
// §4.1):
//
//   - scope: exactly the one role scope a202-scope/bilateral/0.1, read
//     first; profiles: the registered profiles the presented cases
//     exercised; transports: the A202 extension URI both bindings activate,
//     the carriers the assessment covered.
//   - dimensions: all five, each established from those of the families
//     the published bilateral grade fixture reads it from ([Dimensions],
//     with conformance-grade added to E) that were observed: a family with
//     a failed case, or every refused case of which passed. A family with a
//     case not presented or inconclusive, or with no refused case
//     (approval), is left out: what was not observed is not claimed. Band 0
//     when a case of an established family failed, band 1 when none did,
//     null (unassessed) when no family establishes the dimension. A peer
//     run of the published set never reaches band 2 (role scopes §7.2
//     item 1), and held_out_coverage is null.
//   - level peer_assessed, status active, issued now, expiring after the
//     validity asked for (at most 12 months, conformance grades §4).
//   - determination_ref: a grade is a determination (§6), but the kernel's
//     determination object needs a transaction and a dispute, which a grade
//     has neither of, and its appeal route is unresolved for a peer
//     (role scopes §7.1, §10 item 4). So the reference names a det_
//     identifier minted for the assessment and, as determination_hash, the
//     SHA-256 of the RFC 8785 bytes of the assessment report (every case,
//     its expectation, what it travelled as, and each binding's
//     observation and verdict), which the issuer keeps with the grade and
//     can disclose.
//
// The principal signs it (principal.Surface.IssueGrade: signature purpose
// grade_issuance with the organisation's principal key, after the gate
// accepts the unsigned document), so that a relying party verifies it
// under the principal keys it pinned.
//
// # Checking a grade
//
// Check is the gate (gate.Grade) with the signature verified under a key
// the caller trusts, read at a given time: the role scope first, then the
// expiry, then the dimensions (A202-GRADE-SCOPE-UNKNOWN, -INVALID,
// -OVERCLAIM), the signature (A202-EVIDENCE-SIGNATURE-INVALID for a
// tampered grade or an untrusted key), a grade signed by its own subject
// refused (a self-run result is not a grade). An expired grade is refused
// with no code: none is registered, and an expired grade fails "exactly
// as a band 0 does" (§4.2 item 3), which is not a code either.
//
// # Minimum grade in a mandate's policy
//
// A principal may require of the counterparties one of its mandates acts
// towards a minimum band per dimension (party mandate policy). The policy
// is local (kept beside the mandate, not in its signed document) and
// deny-only (Policy implements authority.Policy): the latest grade held
// about the counterparty, by issued_at, whatever its bands, is read at the
// moment of the act; an act is denied (A202-POLICY-DENIED) when none is
// held, when it no longer checks (expired, withdrawn, suspended), or when a
// required dimension is null (unassessed is not a pass) or below the
// minimum. The policy never allows or holds what the mandate would not, so
// the counterparty's re-evaluation of an allowed act under the mandate
// alone agrees.
package grade

import (
	"path"
	"slices"
)

// Scope is the role scope every grade party issues names.
const Scope = "a202-scope/bilateral/0.1"

// Family is one fixture family of the bilateral scope and the filename
// patterns (relative to the fixture directory) that place a fixture in it
// (role scopes §4.3).
type Family struct {
	ID       string
	Patterns []string
}

// Families are the sixteen bilateral families, in the order role scopes
// §4.3 lists them.
var Families = []Family{
	{"mandate", []string{"valid-commercial-mandate.json", "negative/mandate-*.json"}},
	{"delegation-chain", []string{"valid-mandate-delegation-chain.json", "negative/delegation-chain-*.json"}},
	{"offer", []string{"valid-offer*.json", "negative/offer-*.json"}},
	{"agreement", []string{"valid-agreement-*.json", "negative/agreement-*.json"}},
	{"obligation", []string{"valid-obligation*.json", "negative/obligation-*.json"}},
	{"evidence-and-verification", []string{"valid-evidence-*.json", "valid-verification-report-*.json", "negative/evidence-*.json"}},
	{"dispute-and-determination", []string{"valid-dispute.json", "valid-determination.json", "negative/dispute-*.json", "negative/determination-*.json"}},
	{"settlement", []string{"valid-settlement-instruction.json", "negative/settlement-*.json"}},
	{"termination", []string{"valid-consensual-termination.json", "negative/termination-*.json"}},
	{"carrier-declaration", []string{"valid-extension-declaration.json", "negative/declaration-*.json"}},
	{"key-record", []string{"valid-key-record.json", "negative/key-record-*.json"}},
	{"approval", []string{"valid-approval.json"}},
	{"party-family", []string{"valid-organization.json", "valid-agent.json", "valid-principal.json", "negative/organization-*.json", "negative/agent-*.json", "negative/principal-*.json"}},
	{"envelope-annotation", []string{"negative/action-envelope-with-kernel-annotations.json", "negative/envelope-*.json"}},
	{"policy-decision", []string{"negative/policy-deny-visible-to-counterparty.json"}},
	{"conformance-grade", []string{"valid-conformance-grade-bilateral-scope.json", "negative/grade-scope-*.json", "negative/grade-bilateral-*.json"}},
}

// Dimensions are the families each dimension's band is established from:
// the published bilateral grade fixture's reading (conformance grades §2),
// with the conformance-grade family, which that fixture leaves out, under
// E (hostile input: grades that must be refused).
var Dimensions = map[string][]string{
	"A": {"mandate", "delegation-chain", "approval", "party-family"},
	"B": {"policy-decision", "envelope-annotation", "offer"},
	"C": {"agreement", "offer", "obligation", "termination"},
	"D": {"evidence-and-verification"},
	"E": {"mandate", "obligation", "settlement", "dispute-and-determination", "carrier-declaration", "key-record", "conformance-grade"},
}

// DimensionNames are the five dimensions in order.
var DimensionNames = []string{"A", "B", "C", "D", "E"}

// FamilyOf returns the bilateral family a fixture path (relative to the
// fixture directory, with forward slashes) belongs to.
func FamilyOf(fixture string) (string, bool) {
	for _, f := range Families {
		for _, p := range f.Patterns {
			if ok, _ := path.Match(p, fixture); ok {
				return f.ID, true
			}
		}
	}
	return "", false
}

// isFamily reports whether id names a bilateral family.
func isFamily(id string) bool {
	return slices.ContainsFunc(Families, func(f Family) bool { return f.ID == id })
}
