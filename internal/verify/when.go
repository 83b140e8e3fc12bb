package verify

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
)

// The `when` of a mandate's approval rule, evaluated over a rebuilt act.
//
// Package authority evaluates approval rules inside its evaluator and
// exports no matcher for them (evalPredicate is unexported), so the
// verifier carries this small one. It reads a `when` exactly as the
// evaluator does (package authority's documentation states the reading):
// a `when` has no type, so the comparison is chosen by the operator and
// the value; decimals compare exactly, as A202 decimal strings
// (internal/decimal), never as floats; a path is "$." and member names,
// objects only; an absent value satisfies none_of and nothing else except
// absent. Where the evaluator would hold an act because the act's value
// cannot be compared (a rule nobody could evaluate is not a rule that did
// not match), this matcher says the rule applies; where the `when` itself
// is malformed or names an unregistered operator, which the evaluator
// denies on, it says so. evidence_verified needs the verification of the
// evidence the act names, which the offline verifier does not decide
// here: such a rule is left open.

// whenOutcome is what a `when` says about an act.
type whenOutcome int

const (
	whenNoMatch whenOutcome = iota
	whenMatches
	// whenBroken: the `when` cannot be evaluated for its own form; the
	// evaluator denies every act under such a mandate.
	whenBroken
	// whenOpen: whether the rule applies is not decided offline.
	whenOpen
)

// Comparison kinds of an untyped `when`, chosen by operator and value.
const (
	kindPresence = "presence"
	kindDecimal  = "decimal"
	kindInteger  = "integer"
	kindInstant  = "timestamp"
	kindPattern  = "pattern"
	kindEvidence = "evidence"
	kindGeneric  = "generic"
)

// maxWhenPattern bounds a matches expression, as the evaluator does.
const maxWhenPattern = 1024

// maxWhenSegments bounds a path, as the evaluator does.
const maxWhenSegments = 64

// evalWhen evaluates one `when` over act and says why in words.
func evalWhen(when map[string]any, act map[string]any) (whenOutcome, string) {
	op, _ := when["operator"].(string)
	path, _ := when["path"].(string)
	value := when["value"]
	if !authority.OperatorRegistered(op) {
		return whenBroken, fmt.Sprintf("operator %q is not registered", op)
	}
	kind := whenKind(op, value)
	if kind == "" {
		return whenBroken, fmt.Sprintf("operator %s cannot be evaluated over the value %s", op, show(value))
	}
	segs, err := whenPath(path)
	if err != nil {
		return whenBroken, err.Error()
	}
	if why := whenValueProblem(kind, op, value); why != "" {
		return whenBroken, why
	}
	actual, found := resolvePath(act, segs)
	holds := func(b bool) (whenOutcome, string) {
		if b {
			return whenMatches, fmt.Sprintf("%s %s holds", path, op)
		}
		return whenNoMatch, fmt.Sprintf("%s %s does not hold", path, op)
	}
	switch op {
	case authority.OpPresent:
		return holds(found)
	case authority.OpAbsent:
		return holds(!found)
	}
	if !found {
		return holds(op == authority.OpNoneOf)
	}
	uncomparable := func(what string) (whenOutcome, string) {
		return whenMatches, fmt.Sprintf("%s is %s, not %s: the evaluator holds an act whose value it cannot compare", path, show(actual), what)
	}
	switch kind {
	case kindDecimal:
		a, ok := decimalValue(actual)
		if !ok {
			return uncomparable("an A202 decimal string")
		}
		e, _ := decimalValue(value)
		return holds(cmpHolds(op, a.Cmp(e)))
	case kindInteger:
		a, ok := integerValue(actual)
		if !ok {
			return uncomparable("an integer")
		}
		e, _ := integerValue(value)
		c := 0
		if a < e {
			c = -1
		} else if a > e {
			c = 1
		}
		return holds(cmpHolds(op, c))
	case kindInstant:
		a, ok := instantValue(actual)
		if !ok {
			return uncomparable("an RFC 3339 instant")
		}
		e, _ := instantValue(value)
		if op == authority.OpBefore {
			return holds(a.Before(e))
		}
		return holds(a.After(e))
	case kindPattern:
		s, ok := actual.(string)
		if !ok {
			return uncomparable("a string")
		}
		return holds(regexp.MustCompile(value.(string)).MatchString(s))
	case kindEvidence:
		return whenOpen, fmt.Sprintf("%s evidence_verified needs the evidence's verification, which is not decided here", path)
	}
	// kindGeneric: equals, not_equals, one_of, none_of.
	switch op {
	case authority.OpEquals:
		return holds(looseEqual(actual, value))
	case authority.OpNotEquals:
		return holds(!looseEqual(actual, value))
	}
	in := false
	for _, x := range value.([]any) {
		if looseEqual(actual, x) {
			in = true
			break
		}
	}
	return holds(in == (op == authority.OpOneOf))
}

// whenKind chooses the comparison of an untyped `when`.
func whenKind(op string, value any) string {
	switch op {
	case authority.OpPresent, authority.OpAbsent:
		return kindPresence
	case authority.OpMinimum, authority.OpMaximum:
		if _, ok := value.(string); ok {
			return kindDecimal
		}
		if _, ok := integerValue(value); ok {
			return kindInteger
		}
		return ""
	case authority.OpBefore, authority.OpAfter:
		return kindInstant
	case authority.OpMatches:
		return kindPattern
	case authority.OpEvidenceVerified:
		return kindEvidence
	case authority.OpEquals, authority.OpNotEquals, authority.OpOneOf, authority.OpNoneOf:
		return kindGeneric
	}
	return ""
}

// whenValueProblem checks the `when`'s own value for its comparison.
func whenValueProblem(kind, op string, value any) string {
	switch kind {
	case kindDecimal:
		if _, ok := decimalValue(value); !ok {
			return fmt.Sprintf("%s value %s is not an A202 decimal string", op, show(value))
		}
	case kindInstant:
		if _, ok := instantValue(value); !ok {
			return fmt.Sprintf("%s value %s is not an RFC 3339 instant with a zone", op, show(value))
		}
	case kindPattern:
		s, ok := value.(string)
		if !ok {
			return fmt.Sprintf("matches needs a regular expression string, got %s", show(value))
		}
		if len(s) > maxWhenPattern {
			return fmt.Sprintf("matches expression longer than %d bytes", maxWhenPattern)
		}
		if _, err := regexp.Compile(s); err != nil {
			return fmt.Sprintf("matches expression does not compile: %v", err)
		}
	case kindGeneric:
		if op == authority.OpOneOf || op == authority.OpNoneOf {
			if list, ok := value.([]any); !ok || len(list) == 0 {
				return fmt.Sprintf("%s needs a non-empty array, got %s", op, show(value))
			}
		}
	}
	return ""
}

// whenPath splits "$.a.b" into its member names.
func whenPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "$.") {
		return nil, fmt.Errorf("path %q does not start with \"$.\"", p)
	}
	segs := strings.Split(p[2:], ".")
	if len(segs) > maxWhenSegments {
		return nil, fmt.Errorf("path %q has more than %d steps", p, maxWhenSegments)
	}
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("path %q has an empty step", p)
		}
	}
	return segs, nil
}

// resolvePath walks segs through doc, objects only.
func resolvePath(doc map[string]any, segs []string) (any, bool) {
	var cur any = doc
	for _, s := range segs {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		v, found := m[s]
		if !found {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

func cmpHolds(op string, c int) bool {
	switch op {
	case authority.OpEquals:
		return c == 0
	case authority.OpNotEquals:
		return c != 0
	case authority.OpMinimum:
		return c >= 0
	case authority.OpMaximum:
		return c <= 0
	}
	return false
}

// looseEqual: two A202 decimal strings compare as numbers ("20" equals
// "20.00"); anything else by its canonical JSON.
func looseEqual(a, b any) bool {
	if x, ok := decimalValue(a); ok {
		if y, ok := decimalValue(b); ok {
			return x.Cmp(y) == 0
		}
	}
	ca, err1 := canonical.Marshal(a)
	cb, err2 := canonical.Marshal(b)
	return err1 == nil && err2 == nil && string(ca) == string(cb)
}

func decimalValue(v any) (decimal.Decimal, bool) {
	s, ok := v.(string)
	if !ok {
		return decimal.Decimal{}, false
	}
	d, err := decimal.Parse(s)
	return d, err == nil
}

// integerValue reads a JSON integer (a decoded json.Number, or a Go
// integer) within I-JSON's safe range. A string of digits is not one.
func integerValue(v any) (int64, bool) {
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

var instantPattern = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$`)

func instantValue(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok || !instantPattern.MatchString(s) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
