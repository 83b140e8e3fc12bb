package gate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
)

// The closed constraint vocabulary of mandate §4. Both layers fail closed
// on their own: the schema refuses these too, and the gate (like the
// evaluator) refuses them again, so widening one enum alone lets nothing
// through (mandate §4 last paragraph, §6.1).
var (
	constraintTypes = setOf("commercial.decimal", "commercial.integer",
		"commercial.string", "commercial.boolean", "commercial.timestamp",
		"commercial.set", "disclosure.path", "evidence.reference",
		"counterparty.reference", "geography.reference")
	constraintOperators = setOf("equals", "not_equals", "one_of", "none_of",
		"minimum", "maximum", "matches", "present", "absent", "before",
		"after", "evidence_verified")

	mandateMembers = setOf("spec_version", "id", "issuer", "subject",
		"represented_organization_id", "parent_mandate_id", "valid_from",
		"valid_until", "status_endpoint", "actions", "scope", "constraints",
		"approval_rules", "delegation", "evidence_refs", "proof")
	scopeAxes = []string{"transaction_ids", "categories", "counterparty_organization_ids", "geographies"}
)

// Mandate judges one standalone mandate document (mandate §3, §12 tests
// 1–8): the schema layer and the static invariants with their codes.
func Mandate(doc map[string]any) Judgment {
	ps := mandateChecks(doc, "")
	ps = append(ps, schemaLayer(schema.ValidateMandate, doc)...)
	return judge(KindMandate, ps)
}

func mandateChecks(doc map[string]any, base string) problems {
	var ps problems
	if doc == nil {
		ps.add("", base, "no mandate document")
		return ps
	}
	at := func(segs ...any) string { return pointer(base, segs...) }
	if sv, _ := strAt(doc, "spec_version"); sv != mandateSpecVersion {
		ps.add("", at("spec_version"), "spec_version is not %q", mandateSpecVersion)
	}
	if _, wrapped := doc["object_type"]; wrapped {
		ps.add("", at("object_type"), "a mandate is never presented in envelope form (canonical model §3.1)")
	}
	for _, k := range sortedKeys(doc) {
		if !mandateMembers[k] {
			ps.add("", at(k), "a mandate carries no member %q", k)
		}
	}
	if id, _ := strAt(doc, "id"); !hasPrefixID(id, "mnd") {
		ps.add("", at("id"), "id is an mnd_ identifier")
	}

	from, okf := timeAt(doc, "valid_from")
	until, oku := timeAt(doc, "valid_until")
	if !okf || !oku || !from.Before(until) {
		ps.add(reason.MandateIntervalInvalid, at("valid_until"), "valid_from must be strictly earlier than valid_until")
	}

	// An empty constraint list confers unbounded authority; "no limit" is
	// an explicit permissive constraint so that it is on the record (§3.2).
	constraints, _ := arrAt(doc, "constraints")
	if len(constraints) == 0 {
		ps.add(reason.MandateUnbounded, at("constraints"), "a mandate carries at least one constraint")
	}
	for i, c := range constraints {
		checkConstraint(&ps, at("constraints", i), c)
	}
	rulesList, _ := arrAt(doc, "approval_rules")
	for i, r := range rulesList {
		rule, _ := obj(r)
		when, _ := objAt(rule, "when")
		if op, _ := strAt(when, "operator"); !constraintOperators[op] {
			ps.add(reason.MandateConstraintUnknown, at("approval_rules", i, "when", "operator"), "operator %q is not registered", op)
		}
	}

	// Scope is bounded by transaction or category; counterparty and
	// geography only narrow a bound that exists (§3.1).
	scope, _ := objAt(doc, "scope")
	txns, _ := arrAt(scope, "transaction_ids")
	cats, _ := arrAt(scope, "categories")
	if len(txns) == 0 && len(cats) == 0 {
		ps.add(reason.MandateScopeTooBroad, at("scope"), "scope names transactions or categories")
	}

	// Status served over anything but HTTPS is forgeable in transit, and
	// status is the only channel revocation travels by (§3.3).
	if ep, ok := strAt(doc, "status_endpoint"); !ok {
		ps.add("", at("status_endpoint"), "a mandate names its status endpoint")
	} else if !strings.HasPrefix(ep, "https://") {
		ps.add(reason.MandateStatusInsecure, at("status_endpoint"), "the status endpoint must use HTTPS")
	}

	subject, _ := objAt(doc, "subject")
	_, agent := subject["agent_id"]
	_, principal := subject["principal_id"]
	if agent == principal {
		ps.add(reason.MandateSubjectAmbiguous, at("subject"), "the subject names exactly one of agent_id or principal_id")
	}

	delegation, _ := objAt(doc, "delegation")
	allowed, okAllowed := delegation["allowed"].(bool)
	depth, okDepth := intAt(delegation, "maximum_depth")
	switch {
	case !okAllowed || !okDepth:
		ps.add("", at("delegation"), "delegation is {allowed: boolean, maximum_depth: integer}")
	case !allowed && depth != 0:
		ps.add(reason.MandateDelegationIncoherent, at("delegation", "maximum_depth"), "delegation not allowed requires depth 0")
	case allowed && depth < 1:
		ps.add(reason.MandateDelegationIncoherent, at("delegation", "maximum_depth"), "delegation allowed requires depth of at least 1")
	case depth > 8:
		ps.add("", at("delegation", "maximum_depth"), "maximum_depth is at most 8")
	}

	proof, ok := objAt(doc, "proof")
	if !ok {
		ps.add("", at("proof"), "a mandate carries its issuer's proof")
	} else if p, _ := strAt(proof, "purpose"); p != "mandate_issuance" {
		ps.add(reason.EvidenceSignatureInvalid, at("proof", "purpose"), "a mandate proof is issued for mandate_issuance, not %q", p)
	}
	if v, ok := member(doc, "evidence_refs"); ok {
		checkEvidenceRefs(&ps, at("evidence_refs"), v, false)
		checkHashForms(&ps, at("evidence_refs"), v)
	}
	return ps
}

func checkConstraint(ps *problems, path string, v any) {
	c, ok := obj(v)
	if !ok {
		ps.add(reason.MandateConstraintUnknown, path, "a constraint is an object with a registered type and operator")
		return
	}
	if t, _ := strAt(c, "type"); !constraintTypes[t] {
		ps.add(reason.MandateConstraintUnknown, pointer(path, "type"), "constraint type %q is not registered", t)
	}
	if op, _ := strAt(c, "operator"); !constraintOperators[op] {
		ps.add(reason.MandateConstraintUnknown, pointer(path, "operator"), "constraint operator %q is not registered", op)
	}
}

// MandateChain judges a parent and a child mandate: each on its own, then
// the child's narrowing of the parent on every axis (mandate §7).
func MandateChain(parent, child map[string]any) Judgment {
	var ps []Problem
	ps = append(ps, mandateChecks(parent, "/parent")...)
	ps = append(ps, prefixed("/parent", schemaLayer(schema.ValidateMandate, parent))...)
	ps = append(ps, mandateChecks(child, "/child")...)
	ps = append(ps, prefixed("/child", schemaLayer(schema.ValidateMandate, child))...)
	ps = append(ps, prefixed("/child", Narrowing(parent, child))...)
	return judge(KindMandateChain, ps)
}

func prefixed(base string, ps []Problem) []Problem {
	for i := range ps {
		ps[i].Path = base + ps[i].Path
	}
	return ps
}

// Narrowing returns a problem for every axis on which child is not equal
// to or narrower than parent (mandate §7); each is
// A202-MANDATE-DELEGATION-WIDENING, the one code §7 names. Paths are
// relative to the child. The runtime evaluator reuses it when it resolves
// a chain.
func Narrowing(parent, child map[string]any) []Problem {
	var ps problems
	w := func(path, format string, args ...any) {
		ps.add(reason.MandateDelegationWidening, path, format, args...)
	}
	if parent == nil || child == nil {
		w("", "a delegation needs both a parent and a child mandate")
		return ps
	}

	pid, _ := strAt(parent, "id")
	if ref, _ := strAt(child, "parent_mandate_id"); ref == "" || ref != pid {
		w("/parent_mandate_id", "the child names its parent by id")
	}
	if po, co := parent["represented_organization_id"], child["represented_organization_id"]; po != co {
		w("/represented_organization_id", "a child acts for the organisation its parent acts for")
	}

	pf, ok1 := timeAt(parent, "valid_from")
	pu, ok2 := timeAt(parent, "valid_until")
	cf, ok3 := timeAt(child, "valid_from")
	cu, ok4 := timeAt(child, "valid_until")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		w("/valid_from", "validity intervals must parse to be compared")
	} else {
		if cf.Before(pf) {
			w("/valid_from", "the child becomes valid before its parent")
		}
		if cu.After(pu) {
			w("/valid_until", "the child outlives its parent")
		}
	}

	parentActions, _ := stringsAt(parent, "actions")
	childActions, _ := stringsAt(child, "actions")
	for i, a := range childActions {
		if !contains(parentActions, a) {
			w(pointer("/actions", i), "action %q is not granted by the parent", a)
		}
	}

	// On every axis the parent declares, the child declares a non-empty
	// subset; an axis only the child declares narrows and is allowed.
	ps2, _ := objAt(parent, "scope")
	cs, _ := objAt(child, "scope")
	for _, axis := range scopeAxes {
		pv, declared := arrAt(ps2, axis)
		if !declared {
			continue
		}
		cv, _ := arrAt(cs, axis)
		if len(cv) == 0 {
			w(pointer("/scope", axis), "the parent bounds %s and the child drops the bound", axis)
			continue
		}
		for i, v := range cv {
			if !containsValue(pv, v) {
				w(pointer("/scope", axis, i), "%s widens beyond the parent's", axis)
			}
		}
	}

	checkConstraintsRetained(&ps, parent, child)
	checkApprovalRulesRetained(&ps, parent, child)

	// A child sits one hop below its parent: the parent must allow
	// delegation and the child's remaining depth must be smaller.
	pd, _ := objAt(parent, "delegation")
	cd, _ := objAt(child, "delegation")
	if allowed, _ := pd["allowed"].(bool); !allowed {
		w("/delegation", "the parent does not allow delegation")
	} else {
		pdepth, _ := intAt(pd, "maximum_depth")
		cdepth, _ := intAt(cd, "maximum_depth")
		if cdepth > pdepth-1 {
			w("/delegation/maximum_depth", "the child's delegation depth %d is not below the parent's %d", cdepth, pdepth)
		}
	}
	return ps
}

// constraintKey identifies a constraint across a chain: what it limits and
// how (mandate §7 "retain every parent deny constraint").
func constraintKey(c map[string]any) [3]string {
	t, _ := strAt(c, "type")
	p, _ := strAt(c, "path")
	o, _ := strAt(c, "operator")
	return [3]string{t, p, o}
}

// checkConstraintsRetained requires every parent constraint in the child,
// no weaker: deny stays deny, an approval gate stays a gate or becomes a
// deny, and the limit tightens or stays.
func checkConstraintsRetained(ps *problems, parent, child map[string]any) {
	childByKey := map[[3]string][]map[string]any{}
	cl, _ := arrAt(child, "constraints")
	for _, v := range cl {
		if c, ok := obj(v); ok {
			childByKey[constraintKey(c)] = append(childByKey[constraintKey(c)], c)
		}
	}
	pl, _ := arrAt(parent, "constraints")
	for _, v := range pl {
		pc, ok := obj(v)
		if !ok {
			continue
		}
		key := constraintKey(pc)
		const path = "/constraints"
		pid, _ := strAt(pc, "id")
		candidates := childByKey[key]
		if len(candidates) == 0 {
			ps.add(reason.MandateDelegationWidening, path, "the child drops the parent's constraint %q (%s %s %s)", pid, key[0], key[2], key[1])
			continue
		}
		// One retained counterpart that is at least as strict suffices.
		var why string
		for _, cc := range candidates {
			if why = looser(pc, cc); why == "" {
				break
			}
		}
		if why != "" {
			ps.add(reason.MandateDelegationWidening, path, "the child loosens the parent's constraint %q: %s", pid, why)
		}
	}
}

// looser says how child constraint c is weaker than parent constraint p,
// or returns "".
func looser(p, c map[string]any) string {
	pf, _ := strAt(p, "on_failure")
	cf, _ := strAt(c, "on_failure")
	if pf == "deny" && cf != "deny" {
		return "a deny became " + cf
	}
	op, _ := strAt(p, "operator")
	pv, cv := p["value"], c["value"]
	switch op {
	case "maximum", "minimum":
		// Decimal comparison, never binary floating point.
		x, err1 := decimalValue(pv)
		y, err2 := decimalValue(cv)
		if err1 != nil || err2 != nil {
			return "the limits do not parse as decimals"
		}
		if op == "maximum" && y.Cmp(x) > 0 {
			return "the maximum rises from " + x.String() + " to " + y.String()
		}
		if op == "minimum" && y.Cmp(x) < 0 {
			return "the minimum falls from " + x.String() + " to " + y.String()
		}
	case "before":
		if later(cv, pv) {
			return "the deadline moves later"
		}
	case "after":
		if later(pv, cv) {
			return "the earliest time moves earlier"
		}
	case "one_of":
		pa, _ := pv.([]any)
		ca, ok := cv.([]any)
		if !ok {
			return "one_of takes a list"
		}
		for _, x := range ca {
			if !containsValue(pa, x) {
				return "one_of admits a value the parent does not"
			}
		}
	case "none_of":
		pa, _ := pv.([]any)
		ca, _ := cv.([]any)
		for _, x := range pa {
			if !containsValue(ca, x) {
				return "none_of no longer excludes a value the parent excludes"
			}
		}
	default:
		if !sameValue(pv, cv) {
			return "the value differs from the parent's"
		}
	}
	return ""
}

// checkApprovalRulesRetained requires every parent approval rule to reach
// the child with the same trigger and approver and no longer a lifetime:
// dropping an approval gate widens authority as surely as raising a limit.
func checkApprovalRulesRetained(ps *problems, parent, child map[string]any) {
	pl, _ := arrAt(parent, "approval_rules")
	cl, _ := arrAt(child, "approval_rules")
	for _, v := range pl {
		pr, ok := obj(v)
		if !ok {
			continue
		}
		found := false
		for _, u := range cl {
			cr, ok := obj(u)
			if !ok || !sameValue(pr["when"], cr["when"]) || !sameValue(pr["approver"], cr["approver"]) {
				continue
			}
			pe, _ := intAt(pr, "expires_after_seconds")
			ce, _ := intAt(cr, "expires_after_seconds")
			if ce <= pe {
				found = true
				break
			}
		}
		if !found {
			id, _ := strAt(pr, "id")
			ps.add(reason.MandateDelegationWidening, "/approval_rules", "the child drops or loosens the parent's approval rule %q", id)
		}
	}
}

// decimalValue reads a constraint limit: a decimal string, or a
// non-negative JSON integer read as its digits.
func decimalValue(v any) (decimal.Decimal, error) {
	if s, ok := v.(string); ok {
		return decimal.Parse(s)
	}
	if n, ok := asInt(v); ok && n >= 0 {
		return decimal.Parse(strconv.FormatInt(n, 10))
	}
	return decimal.Decimal{}, fmt.Errorf("limit %v is not a decimal", v)
}

// sameValue compares two decoded JSON values by their canonical bytes.
func sameValue(a, b any) bool {
	x, err1 := canonical.Marshal(a)
	y, err2 := canonical.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func containsValue(list []any, v any) bool {
	for _, x := range list {
		if sameValue(x, v) {
			return true
		}
	}
	return false
}

// later reports whether timestamp a is after timestamp b; values that do
// not parse compare as later, so a child cannot loosen by garbling one.
func later(a, b any) bool {
	as, _ := a.(string)
	bs, _ := b.(string)
	x, ok1 := parseTime(as)
	y, ok2 := parseTime(bs)
	if !ok1 || !ok2 {
		return true
	}
	return x.After(y)
}
