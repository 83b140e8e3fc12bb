// Package grade is what one organisation can establish about the other's
// implementation with no third party present, and what it does with it
// (conformance grades §2–§6; role scopes §6–§8): run the published
// bilateral fixture families against the counterparty's instance, issue a
// signed, peer-assessed grade of band 1 at most on the result, check a
// grade received, and hold a counterparty to a minimum grade in a
// mandate's local policy.
//
// # How a family is exercised against a live instance
//
// Role scopes §7.1 item 3: each party "presents the refused cases in the
// bilateral families and observes whether the other refuses with the
// stated code or guesses". The specification names no route for it, so
// party decides one (docs/record-protocol.md, issue 17 decisions): every
// instance serves ProbePath on its peer listener, to pinned peers only
// (mutually pinned TLS, like the mandate and key-record routes). A POST of
// one published fixture, its exact bytes, is judged by the instance's own
// gate, the gate every received message passes before anything else (and,
// for a bundle fixture, its own seven-step verifier, as `party gate` does),
// and the answer is the judgment alone: {"kind", "outcome",
// "reason_codes"}. Nothing is stored, nothing is signed and nothing about
// the instance's records is disclosed. The probe is clock-free, as the
// published runner is: the fixtures are dated, and a grade fixture read at
// today's clock would expire under the suite.
//
// The assessor (Assess) reads the published manifest and fixtures from the
// specification directory, keeps the cases of the sixteen bilateral
// families (role scopes §4.3: a fixture belongs to the family whose
// filename pattern it matches, a * not crossing "/"), presents each one,
// and judges the answer as the published runner does: a positive case
// passes when it is accepted; a negative one when it is refused and, if
// the manifest declares a code, that code is among those raised.
//
// # The grade
//
// Build turns an assessment into a grade document (conformance grades §4,
// §4.1):
//
//   - scope: exactly the one role scope a202-scope/bilateral/0.1, read
//     first; profiles: the registered profiles the cases exercised;
//     transports: none (the probe route is the peer listener, not a carrier
//     the assessment covered).
//   - dimensions: all five, each from the families the published bilateral
//     grade fixture establishes it from (Dimensions), with conformance-grade
//     added to E; band 1 when every case of those families passed, band 0
//     when any failed. A peer run of the published set never reaches band 2
//     (role scopes §7.2 item 1), and held_out_coverage is null.
//   - level peer_assessed, status active, issued now, expiring after the
//     validity asked for (at most 12 months, conformance grades §4).
//   - determination_ref: a grade is a determination (§6), but the kernel's
//     determination object needs a transaction and a dispute, which a grade
//     has neither of, and its appeal route is unresolved for a peer
//     (role scopes §7.1, §10 item 4). So the reference names a det_
//     identifier minted for the assessment and, as determination_hash, the
//     SHA-256 of the RFC 8785 bytes of the assessment report (every case,
//     its expectation and the answer), which the issuer keeps with the
//     grade and can disclose.
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
