package gate

import (
	"time"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
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

// Grade judges a conformance grade. It reads the role scope and the
// expiry before any dimension (role scopes §6.1; conformance grades §4.2
// item 3): a grade whose scope does not resolve, or that has expired, is
// not read further, and its dimensions are never reported as band 0.
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
