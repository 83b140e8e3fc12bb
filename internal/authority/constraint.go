package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/pattern"
)

// The registered v0.1 constraint types (commercial mandate §4). The registry
// is closed: any other type denies at evaluation with
// A202-MANDATE-CONSTRAINT-UNKNOWN, whatever a schema let through.
const (
	TypeDecimal      = "commercial.decimal"
	TypeInteger      = "commercial.integer"
	TypeString       = "commercial.string"
	TypeBoolean      = "commercial.boolean"
	TypeTimestamp    = "commercial.timestamp"
	TypeSet          = "commercial.set"
	TypeDisclosure   = "disclosure.path"
	TypeEvidence     = "evidence.reference"
	TypeCounterparty = "counterparty.reference"
	TypeGeography    = "geography.reference"
)

// The registered v0.1 constraint operators (commercial mandate §4), closed
// in the same way as the types.
const (
	OpEquals           = "equals"
	OpNotEquals        = "not_equals"
	OpOneOf            = "one_of"
	OpNoneOf           = "none_of"
	OpMinimum          = "minimum"
	OpMaximum          = "maximum"
	OpMatches          = "matches"
	OpPresent          = "present"
	OpAbsent           = "absent"
	OpBefore           = "before"
	OpAfter            = "after"
	OpEvidenceVerified = "evidence_verified"
)

// Failure modes a constraint may name.
const (
	OnFailureDeny            = "deny"
	OnFailureRequireApproval = "require_approval"
)

// matrix is the type×operator matrix (spec-map D2). A registered type with a
// registered operator outside its row is a constraint nobody can evaluate,
// and it denies. The package documentation prints the same table.
var matrix = map[string]map[string]bool{
	TypeDecimal:      set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpMinimum, OpMaximum, OpPresent, OpAbsent),
	TypeInteger:      set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpMinimum, OpMaximum, OpPresent, OpAbsent),
	TypeString:       set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpMatches, OpPresent, OpAbsent),
	TypeBoolean:      set(OpEquals, OpNotEquals, OpPresent, OpAbsent),
	TypeTimestamp:    set(OpEquals, OpNotEquals, OpBefore, OpAfter, OpPresent, OpAbsent),
	TypeSet:          set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpPresent, OpAbsent),
	TypeDisclosure:   set(OpPresent, OpAbsent),
	TypeEvidence:     set(OpEvidenceVerified, OpPresent, OpAbsent),
	TypeCounterparty: set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpPresent, OpAbsent),
	TypeGeography:    set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpPresent, OpAbsent),
}

var registeredOperators = set(OpEquals, OpNotEquals, OpOneOf, OpNoneOf, OpMinimum,
	OpMaximum, OpMatches, OpPresent, OpAbsent, OpBefore, OpAfter, OpEvidenceVerified)

func set(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// TypeRegistered reports whether t is a registered v0.1 constraint type.
func TypeRegistered(t string) bool { _, ok := matrix[t]; return ok }

// OperatorRegistered reports whether op is a registered v0.1 operator.
func OperatorRegistered(op string) bool { return registeredOperators[op] }

// OperatorApplies reports whether this evaluator evaluates operator op over
// constraint type t: the cell of the type×operator matrix in the package
// documentation. It is false for any unregistered type or operator.
func OperatorApplies(t, op string) bool { return matrix[t][op] }

// Outcome is the result of one constraint.
type Outcome string

// The three outcomes of a constraint. Unevaluable is not Unsatisfied: it
// says the comparison could not be made at all, and it always denies,
// whatever on_failure says, because an approver cannot approve a comparison
// that was never made.
const (
	Satisfied   Outcome = "satisfied"
	Unsatisfied Outcome = "unsatisfied"
	Unevaluable Outcome = "unevaluable"
)

// EvidenceVerifier answers the evidence_verified operator. ref is what the
// act holds at the constraint path: an evd_ identifier or a full evidence
// reference object. The answer must be a verification result the caller
// holds (evidence verification §4), never an inference: evidence the caller
// does not hold is not verified.
type EvidenceVerifier interface {
	EvidenceVerified(ctx context.Context, ref any) bool
}

// fault says why a predicate could not be evaluated and whose fault it is:
// the constraint's (unregistered, outside the matrix, malformed value or
// path) or the act's (a value that is not of the constraint's type).
type fault struct {
	constraint bool
	detail     string
}

func constraintFault(format string, args ...any) *fault {
	return &fault{constraint: true, detail: fmt.Sprintf(format, args...)}
}

func actFault(format string, args ...any) *fault {
	return &fault{detail: fmt.Sprintf(format, args...)}
}

// maxPatternLength bounds a matches expression. RE2 runs in linear time, so
// the bound is about compile cost, not catastrophic backtracking.
const maxPatternLength = 1024

// predicate is one operator at one path with one value. A constraint's
// predicate is typed; an approval rule's `when` carries no type (untyped),
// so its comparison is chosen from the operator and the value (package
// doc). The flag is separate from typ so that no string a mandate carries
// as a type, the empty one included, can select the untyped reading.
type predicate struct {
	typ      string
	untyped  bool
	op, path string
	value    any
}

// evalPredicate evaluates one predicate over act. It returns whether the
// predicate holds, or a fault when it cannot be evaluated.
func evalPredicate(ctx context.Context, p predicate, act map[string]any, ev EvidenceVerifier) (bool, *fault) {
	typ, op, path, expected := p.typ, p.op, p.path, p.value
	if !p.untyped && !TypeRegistered(typ) {
		return false, constraintFault("constraint type %q is not registered", typ)
	}
	if !OperatorRegistered(op) {
		return false, constraintFault("operator %q is not registered", op)
	}
	if p.untyped {
		typ = inferType(op, expected)
		if typ == "" {
			return false, constraintFault("operator %q cannot be evaluated over the value %s", op, show(expected))
		}
	} else if !OperatorApplies(typ, op) {
		return false, constraintFault("operator %q is not defined for type %q", op, typ)
	}
	segs, err := parsePath(path)
	if err != nil {
		return false, constraintFault("%v", err)
	}
	if f := checkExpected(typ, op, expected); f != nil {
		return false, f
	}
	actual, found := resolve(act, segs)
	switch op {
	case OpPresent:
		return found, nil
	case OpAbsent:
		return !found, nil
	}
	if !found {
		// Absence satisfies only none_of (nothing is not in a denied set).
		// Every other operator fails closed rather than reading absence as
		// agreement.
		return op == OpNoneOf, nil
	}
	switch typ {
	case TypeDecimal:
		return compareDecimal(op, actual, expected)
	case TypeInteger:
		return compareInteger(op, actual, expected)
	case TypeString:
		return compareString(op, actual, expected)
	case TypeBoolean:
		b, ok := actual.(bool)
		if !ok {
			return false, actFault("value %s is not a boolean", show(actual))
		}
		return (b == expected.(bool)) == (op == OpEquals), nil
	case TypeTimestamp:
		return compareInstant(op, actual, expected)
	case TypeSet:
		return compareSet(op, actual, expected)
	case TypeEvidence:
		return evidenceVerified(ctx, actual, ev)
	case TypeCounterparty:
		return compareReference(op, actual, expected, validOrganizationID, "an organization identifier")
	case TypeGeography:
		return compareReference(op, actual, expected, validGeography, "an ISO 3166-1 alpha-2 code")
	case typeGeneric:
		return compareGeneric(op, actual, expected), nil
	}
	// Unreachable while the matrix and this switch agree; fail closed if a
	// type is ever added to one and not the other.
	return false, constraintFault("type %q has no evaluator", typ)
}

// typeGeneric is the comparison an untyped equals/not_equals/one_of/none_of
// uses: decimal strings numerically, everything else by canonical JSON.
const typeGeneric = "generic"

func inferType(op string, expected any) string {
	switch op {
	case OpPresent, OpAbsent:
		return TypeDisclosure
	case OpMinimum, OpMaximum:
		if _, ok := expected.(string); ok {
			return TypeDecimal
		}
		if _, ok := integerOf(expected); ok {
			return TypeInteger
		}
		return ""
	case OpBefore, OpAfter:
		return TypeTimestamp
	case OpMatches:
		return TypeString
	case OpEvidenceVerified:
		return TypeEvidence
	case OpEquals, OpNotEquals, OpOneOf, OpNoneOf:
		return typeGeneric
	}
	return ""
}

// checkExpected validates the constraint's own value for its type and
// operator. present, absent and evidence_verified read no value: it is
// ignored, as in the published reference, so {"value": true} and
// {"value": null} mean the same.
func checkExpected(typ, op string, v any) *fault {
	switch op {
	case OpPresent, OpAbsent, OpEvidenceVerified:
		return nil
	}
	one := func(ok func(any) bool, what string) *fault {
		switch op {
		case OpOneOf, OpNoneOf:
			list, isList := v.([]any)
			if !isList || len(list) == 0 {
				return constraintFault("%s needs a non-empty array of %s, got %s", op, what, show(v))
			}
			for _, x := range list {
				if !ok(x) {
					return constraintFault("%s value %s is not %s", op, show(x), what)
				}
			}
			return nil
		}
		if !ok(v) {
			return constraintFault("%s value %s is not %s", op, show(v), what)
		}
		return nil
	}
	switch typ {
	case TypeDecimal:
		return one(func(x any) bool { _, ok := decimalOf(x); return ok }, "an A202 decimal string")
	case TypeInteger:
		return one(func(x any) bool { _, ok := integerOf(x); return ok }, "an integer")
	case TypeString:
		if op == OpMatches {
			s, ok := v.(string)
			if !ok {
				return constraintFault("matches needs a regular expression string, got %s", show(v))
			}
			if len(s) > maxPatternLength {
				return constraintFault("matches expression longer than %d bytes", maxPatternLength)
			}
			if _, err := regexp.Compile(s); err != nil {
				return constraintFault("matches expression does not compile: %v", err)
			}
			return nil
		}
		return one(func(x any) bool { _, ok := x.(string); return ok }, "a string")
	case TypeBoolean:
		return one(func(x any) bool { _, ok := x.(bool); return ok }, "a boolean")
	case TypeTimestamp:
		return one(func(x any) bool { _, ok := instantOf(x); return ok }, "an RFC 3339 instant with a zone")
	case TypeSet:
		if _, ok := canonical.Strings(v); !ok {
			return constraintFault("%s needs an array of strings, got %s", op, show(v))
		}
		if (op == OpOneOf || op == OpNoneOf) && len(v.([]any)) == 0 {
			return constraintFault("%s needs a non-empty array", op)
		}
		return nil
	case TypeCounterparty:
		return one(validOrganizationID, "an organization identifier")
	case TypeGeography:
		return one(validGeography, "an ISO 3166-1 alpha-2 code")
	case typeGeneric:
		if op == OpOneOf || op == OpNoneOf {
			if list, ok := v.([]any); !ok || len(list) == 0 {
				return constraintFault("%s needs a non-empty array, got %s", op, show(v))
			}
		}
		return nil
	}
	return constraintFault("type %q has no value rule", typ)
}

func compareDecimal(op string, actual, expected any) (bool, *fault) {
	a, ok := decimalOf(actual)
	if !ok {
		return false, actFault("value %s is not an A202 decimal string", show(actual))
	}
	switch op {
	case OpOneOf, OpNoneOf:
		in := false
		for _, x := range expected.([]any) {
			d, _ := decimalOf(x)
			if a.Cmp(d) == 0 {
				in = true
				break
			}
		}
		return in == (op == OpOneOf), nil
	}
	e, _ := decimalOf(expected)
	return cmpHolds(op, a.Cmp(e)), nil
}

func compareInteger(op string, actual, expected any) (bool, *fault) {
	a, ok := integerOf(actual)
	if !ok {
		return false, actFault("value %s is not an integer", show(actual))
	}
	switch op {
	case OpOneOf, OpNoneOf:
		in := false
		for _, x := range expected.([]any) {
			if e, _ := integerOf(x); e == a {
				in = true
				break
			}
		}
		return in == (op == OpOneOf), nil
	}
	e, _ := integerOf(expected)
	c := 0
	if a < e {
		c = -1
	} else if a > e {
		c = 1
	}
	return cmpHolds(op, c), nil
}

// cmpHolds applies equals, not_equals, minimum (≥) or maximum (≤) to the
// result of a three-way comparison.
func cmpHolds(op string, c int) bool {
	switch op {
	case OpEquals:
		return c == 0
	case OpNotEquals:
		return c != 0
	case OpMinimum:
		return c >= 0
	case OpMaximum:
		return c <= 0
	}
	return false
}

func compareString(op string, actual, expected any) (bool, *fault) {
	a, ok := actual.(string)
	if !ok {
		return false, actFault("value %s is not a string", show(actual))
	}
	if op == OpMatches {
		// Compiled twice (here and in checkExpected) rather than cached:
		// an evaluation is self-contained and RE2 compiles in microseconds.
		re, err := regexp.Compile(expected.(string))
		if err != nil {
			return false, constraintFault("matches expression does not compile: %v", err)
		}
		return re.MatchString(a), nil
	}
	return compareStrings(op, a, expected), nil
}

func compareInstant(op string, actual, expected any) (bool, *fault) {
	a, ok := instantOf(actual)
	if !ok {
		return false, actFault("value %s is not an RFC 3339 instant with a zone", show(actual))
	}
	e, _ := instantOf(expected)
	switch op {
	case OpEquals:
		return a.Equal(e), nil
	case OpNotEquals:
		return !a.Equal(e), nil
	case OpBefore:
		return a.Before(e), nil
	case OpAfter:
		return a.After(e), nil
	}
	return false, constraintFault("operator %q is not defined for timestamps", op)
}

// compareSet reads the act's value as a set of strings (an array, or one
// string as a set of one). one_of: every member is in the declared set;
// none_of: no member is; equals / not_equals: set equality.
func compareSet(op string, actual, expected any) (bool, *fault) {
	var members []string
	if s, ok := actual.(string); ok {
		members = []string{s}
	} else if m, ok := canonical.Strings(actual); ok {
		members = m
	} else {
		return false, actFault("value %s is not a string or an array of strings", show(actual))
	}
	declared, _ := canonical.Strings(expected)
	in := make(map[string]bool, len(declared))
	for _, d := range declared {
		in[d] = true
	}
	switch op {
	case OpOneOf:
		for _, m := range members {
			if !in[m] {
				return false, nil
			}
		}
		return true, nil
	case OpNoneOf:
		for _, m := range members {
			if in[m] {
				return false, nil
			}
		}
		return true, nil
	}
	got := make(map[string]bool, len(members))
	for _, m := range members {
		got[m] = true
	}
	same := len(got) == len(in)
	if same {
		for m := range got {
			if !in[m] {
				same = false
				break
			}
		}
	}
	return same == (op == OpEquals), nil
}

func compareReference(op string, actual, expected any, valid func(any) bool, what string) (bool, *fault) {
	if !valid(actual) {
		return false, actFault("value %s is not %s", show(actual), what)
	}
	return compareStrings(op, actual.(string), expected), nil
}

// compareStrings compares the string a with expected by op, one of equals,
// not_equals, one_of and not_one_of (the last two on a list of strings):
// the rule of string and reference values alike.
func compareStrings(op, a string, expected any) bool {
	switch op {
	case OpEquals:
		return a == expected.(string)
	case OpNotEquals:
		return a != expected.(string)
	}
	in := false
	for _, x := range expected.([]any) {
		if x.(string) == a {
			in = true
			break
		}
	}
	return in == (op == OpOneOf)
}

// compareGeneric is the untyped equality of an approval rule's `when`:
// two A202 decimal strings compare as numbers ("20" equals "20.00"), as in
// the published reference; anything else compares by canonical JSON.
func compareGeneric(op string, actual, expected any) bool {
	switch op {
	case OpEquals:
		return looseEqual(actual, expected)
	case OpNotEquals:
		return !looseEqual(actual, expected)
	}
	in := false
	for _, x := range expected.([]any) {
		if looseEqual(actual, x) {
			in = true
			break
		}
	}
	return in == (op == OpOneOf)
}

func looseEqual(a, b any) bool {
	if x, ok := decimalOf(a); ok {
		if y, ok := decimalOf(b); ok {
			return x.Cmp(y) == 0
		}
	}
	ca, err1 := canonical.Marshal(a)
	cb, err2 := canonical.Marshal(b)
	return err1 == nil && err2 == nil && string(ca) == string(cb)
}

// evidenceVerified reads one evidence reference or a non-empty array of
// them. Every one must be reported verified by ev; without a verifier
// nothing is verified.
func evidenceVerified(ctx context.Context, actual any, ev EvidenceVerifier) (bool, *fault) {
	refs := []any{actual}
	if list, ok := actual.([]any); ok {
		refs = list
	}
	if len(refs) == 0 {
		return false, nil
	}
	for _, r := range refs {
		if !validEvidenceRef(r) {
			return false, actFault("value %s is not an evidence reference", show(r))
		}
	}
	if ev == nil {
		return false, nil
	}
	for _, r := range refs {
		if !ev.EvidenceVerified(ctx, r) {
			return false, nil
		}
	}
	return true, nil
}

func validEvidenceRef(v any) bool {
	switch x := v.(type) {
	case string:
		return prefixedID(x, "evd_")
	case map[string]any:
		id, _ := x["evidence_id"].(string)
		return prefixedID(id, "evd_")
	}
	return false
}

// decimalOf reads v as an A202 decimal: a string in the strict base-10
// grammar of canonical model §7. A JSON number, "4e3", "+4000", "1_000",
// "NaN" and "Infinity" are all refused.
func decimalOf(v any) (decimal.Decimal, bool) {
	s, ok := v.(string)
	if !ok {
		return decimal.Decimal{}, false
	}
	d, err := decimal.Parse(s)
	return d, err == nil
}

// integerOf reads v as a JSON integer (a decoded json.Number without
// fraction or exponent, or a Go integer). A string of digits is not an
// integer: commercial.integer reads JSON numbers, commercial.decimal strings.
func integerOf(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil || n > canonical.MaxSafeInteger || n < -canonical.MaxSafeInteger {
			return 0, false
		}
		return n, true
	case int:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// instantPattern is RFC 3339 date-time with a mandatory zone, upper-case T
// and Z only, and optional fractional seconds.
var instantPattern = pattern.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$`)

func instantOf(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok || !instantPattern.MatchString(s) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

var (
	organizationPattern = pattern.MustCompile(`^org_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
	geographyPattern    = pattern.MustCompile(`^[A-Z]{2}$`)
	idTailPattern       = pattern.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
)

func validOrganizationID(v any) bool {
	s, ok := v.(string)
	return ok && organizationPattern.MatchString(s)
}

func validGeography(v any) bool {
	s, ok := v.(string)
	return ok && geographyPattern.MatchString(s)
}

// prefixedID reports whether s is prefix followed by an A202 identifier
// tail (canonical model §3).
func prefixedID(s, prefix string) bool {
	return len(s) > len(prefix) && s[:len(prefix)] == prefix && idTailPattern.MatchString(s[len(prefix):])
}

// show renders a value for a finding's detail, bounded so a hostile value
// cannot inflate a log line.
func show(v any) string {
	b, err := canonical.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) <= 80 {
		return string(b)
	}
	cut := 77
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "..."
}
