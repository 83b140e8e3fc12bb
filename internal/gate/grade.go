package gate

import (
	"crypto"
	"errors"
	"time"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
)

// Role scopes and the fixture families each contains: the registry of
// role scopes §3.1 and the Family columns of §4.3 and §5.3. A family's
// identifier is its name lowercased with spaces replaced by hyphens
// (§4.3, last paragraph; conformance grades §4.1). conformance-grade
// appears in both, because each scope holds grade fixtures of its own
// (spec-map §14 C18).
var roleScopes = map[string][]string{
	"a202-scope/bilateral/0.1": {
		"mandate", "delegation-chain", "offer", "agreement", "obligation",
		"evidence-and-verification", "dispute-and-determination", "settlement",
		"termination", "carrier-declaration", "key-record", "approval",
		"party-family", "envelope-annotation", "policy-decision",
		"conformance-grade",
	},
	"a202-scope/operated/0.1": {
		"invitation", "session-event", "auction", "stream-disclosure",
		"annotated-offer", "direct-formation-contention", "appeal",
		"conformance-grade",
	},
}

// gradeLifetime is the longest a grade may run (conformance grades §4:
// 12 months or the next minor version, whichever is first).
const gradeLifetime = 12

// GradeKey is what a grade's signature key resolves to: its public key and
// the organisation that holds it.
type GradeKey struct {
	Public         crypto.PublicKey
	OrganizationID string
}

// GradeKeyResolver resolves the key a grade's signature names to a key the
// caller trusts (a pinned principal key, say); false when it trusts none
// under that id.
type GradeKeyResolver func(keyID string) (GradeKey, bool)

// Grade judges a conformance grade. It reads the role scope and the
// expiry before any dimension (role scopes §6.1; conformance grades §4.2
// item 3): a grade whose scope does not resolve, or that has expired, is
// not read further, and its dimensions are never reported as band 0.
//
// With opt.GradeKeys set it also verifies the grade's signature
// (signature.VerifyGradeSignature) under the key the resolver trusts for
// its key_id: an untrusted key, a placeholder value or a signature that
// does not verify (a tampered grade) is A202-EVIDENCE-SIGNATURE-INVALID,
// and a grade signed by the organisation it grades is refused (a self-run
// result is not a grade, conformance grades §5 rule 1; no code is
// registered for it). Without a resolver the signature is not read, as
// `party gate` reads the published fixtures, whose values are
// placeholders.
func Grade(doc map[string]any, opt Options) Judgment {
	var ps problems
	if doc == nil {
		ps.add("", "", "no grade document")
		return judge(KindGrade, ps)
	}
	if sv, _ := strAt(doc, "spec_version"); sv != commercialSpecVersion {
		ps.add("", "/spec_version", "a grade names the specification version it assessed, %q", commercialSpecVersion)
	}

	scope, _ := objAt(doc, "scope")
	named, _ := arrAt(scope, "role_scopes")
	readable := true
	for i, n := range named {
		s, _ := n.(string)
		if _, ok := roleScopes[s]; !ok {
			// No fallback to the other scope, a nearest match, or an
			// unscoped reading (role scopes §3.2 item 2).
			ps.add(reason.GradeScopeUnknown, pointer("/scope/role_scopes", i), "role scope %q is not registered", s)
			readable = false
		}
	}
	if len(named) != 1 {
		// None is the unscoped form; two is one assessment claimed twice
		// (role scopes §3.2 items 1 and 3).
		ps.add(reason.GradeScopeInvalid, "/scope/role_scopes", "a grade names exactly one role scope, not %d", len(named))
		readable = false
	}

	issued, ok1 := timeAt(doc, "issued_at")
	expires, ok2 := timeAt(doc, "expires_at")
	switch {
	case !ok1 || !ok2:
		ps.add("", "/expires_at", "issued_at and expires_at are RFC 3339 timestamps")
		readable = false
	case !expires.After(issued) || expires.After(issued.AddDate(0, gradeLifetime, 0)):
		ps.add("", "/expires_at", "a grade expires after it is issued and within 12 months (conformance grades §4)")
		readable = false
	case !opt.Now.IsZero() && !opt.Now.Before(expires):
		ps.add("", "/expires_at", "the grade expired at %s; an expired grade is not relied on", expires.Format(time.RFC3339))
		readable = false
	}

	if readable {
		s, _ := named[0].(string)
		checkGradeCoverage(&ps, doc, roleScopes[s], s)
		checkGradeBands(&ps, doc)
	}
	if opt.GradeKeys != nil {
		checkGradeSignature(&ps, doc, opt.GradeKeys)
	}
	ps = append(ps, schemaLayer(schema.ValidateGrade, doc)...)
	return judge(KindGrade, ps)
}

// checkGradeCoverage refuses any band or held-out claim established from
// a family outside the named scope (role scopes §6.3 items 3 and 4).
func checkGradeCoverage(ps *problems, doc map[string]any, families []string, scope string) {
	dims, _ := objAt(doc, "dimensions")
	for _, d := range sortedKeys(dims) {
		result, ok := objAt(dims, d)
		if !ok {
			continue // null: unassessed
		}
		from, _ := arrAt(result, "established_from")
		for i, f := range from {
			if s, _ := f.(string); !contains(families, s) {
				ps.add(reason.GradeScopeOverclaim, pointer("/dimensions", d, "established_from", i), "family %q is outside %s", s, scope)
			}
		}
	}
	held, _ := objAt(doc, "held_out_coverage")
	fams, _ := arrAt(held, "families")
	for i, f := range fams {
		if s, _ := f.(string); !contains(families, s) {
			ps.add(reason.GradeScopeOverclaim, pointer("/held_out_coverage/families", i), "held-out family %q is outside %s", s, scope)
		}
	}
}

// checkGradeBands refuses a band above 1 in a dimension no held-out case
// set exercised: band 1 is the published set's, and bands 2 and 3 need
// inputs the subject was not given (conformance grades §3, §5 rule 4; role
// scopes §7.2 item 1). No code is registered for it.
func checkGradeBands(ps *problems, doc map[string]any) {
	held, _ := objAt(doc, "held_out_coverage")
	covered, _ := arrAt(held, "dimensions")
	dims, _ := objAt(doc, "dimensions")
	for _, d := range sortedKeys(dims) {
		result, ok := objAt(dims, d)
		if !ok {
			continue
		}
		band, ok := intAt(result, "band")
		if ok && band > 1 && !contains(anyStrings(covered), d) {
			ps.add("", pointer("/dimensions", d, "band"), "band %d in dimension %s rests on the published set alone, which establishes band 1 at most", band, d)
		}
	}
}

// checkGradeSignature verifies a grade's one signature under the key the
// resolver trusts for it, and refuses a grade its own subject signed.
func checkGradeSignature(ps *problems, doc map[string]any, keys GradeKeyResolver) {
	sig, _ := objAt(doc, "signature")
	kid, _ := strAt(sig, "key_id")
	k, ok := keys(kid)
	if !ok {
		ps.add(reason.EvidenceSignatureInvalid, "/signature/key_id", "key %q is not a key trusted to sign grades", kid)
		return
	}
	if err := signature.VerifyGradeSignature(doc, k.Public); err != nil {
		detail := err.Error()
		if errors.Is(err, signature.ErrNotCheckable) {
			detail = "the signature value is not a signature: " + detail
		}
		ps.add(reason.EvidenceSignatureInvalid, "/signature", "%s", detail)
		return
	}
	subject, _ := objAt(doc, "subject")
	if org, _ := strAt(subject, "organization_id"); org != "" && org == k.OrganizationID {
		ps.add("", "/signature/key_id", "the grade is signed by %s, the organisation it grades: a self-run result is not a grade (conformance grades §5 rule 1)", org)
	}
}

func anyStrings(v []any) []string {
	out := make([]string, 0, len(v))
	for _, x := range v {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
