package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// quick answers one question fast: does a document the library would
// accept meet a compiled schema? It walks the library's own compiled
// schema (jsonschema.Schema, its exported fields: $ref resolved, patterns
// and formats compiled by the library), with the library's semantics for
// every keyword it interprets, and collects nothing: no error tree, no
// scopes, no locations. A valid object costs a tenth of what the library
// spends building the annotations a valid document never needs (an offer:
// BenchmarkValidateEnvelopeOffer).
//
// It only ever says yes. A schema that uses a keyword quick does not
// interpret (the dynamic and recursive references, unevaluated*,
// dependencies, contains, content*, extensions, the array forms of drafts
// before 2020) makes it decline, and so does any document it finds
// invalid, or a value that is not plain JSON: Validate then asks the
// library, which decides and writes the report. A disagreement can only
// make quick accept what the library refuses; TestQuickAgreesWithLibrary
// compares the two on every fixture, every object re-typed as every
// type, and FuzzQuickAgreesWithLibrary on mutations of them;
// TestShortcutAgreesWithFullValidator and FuzzShortcutVsFullValidator
// compare what Validate answers with the library's verdict on the schema
// as written (quickdiff_test.go).

// quickOK caches, per compiled schema, whether quick interprets it and
// every schema it reaches.
var quickOK sync.Map // *jsonschema.Schema → bool

// accepts reports whether quick interprets sch and finds v valid. False
// means only "ask the library".
func accepts(sch *jsonschema.Schema, v any) bool {
	if !interprets(sch) {
		return false
	}
	q := quickRun{}
	return q.valid(sch, v) && !q.unknown
}

// interprets reports whether quick interprets sch and everything it
// reaches.
func interprets(sch *jsonschema.Schema) bool {
	if ok, found := quickOK.Load(sch); found {
		return ok.(bool)
	}
	ok := supported(sch, map[*jsonschema.Schema]bool{})
	quickOK.Store(sch, ok)
	return ok
}

// supported walks the schema graph once; seen breaks $ref cycles (a cycle
// is judged at validation time, by the depth bound).
func supported(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) bool {
	if s == nil || seen[s] {
		return true
	}
	seen[s] = true
	if s.DraftVersion < 2020 || s.RecursiveRef != nil || s.DynamicRef != nil || s.PropertyNames != nil ||
		len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 || len(s.DependentSchemas) > 0 ||
		s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil || s.Contains != nil ||
		s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil || len(s.Extensions) > 0 ||
		s.Items != nil || s.AdditionalItems != nil {
		return false
	}
	if s.Format != nil && (s.Format.Validate == nil || s.Format.Name == "regex") {
		return false
	}
	kids := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else, s.Items2020}
	kids = append(kids, s.AllOf...)
	kids = append(kids, s.AnyOf...)
	kids = append(kids, s.OneOf...)
	kids = append(kids, s.PrefixItems...)
	for _, k := range s.Properties {
		kids = append(kids, k)
	}
	for _, k := range s.PatternProperties {
		kids = append(kids, k)
	}
	switch a := s.AdditionalProperties.(type) {
	case nil, bool:
	case *jsonschema.Schema:
		kids = append(kids, a)
	default:
		return false
	}
	for _, k := range kids {
		if !supported(k, seen) {
			return false
		}
	}
	return true
}

// maxSameValue bounds how many schemas quick applies to one value before
// it gives up: a $ref cycle that consumes no input, which the library
// reports as an error, makes quick decline instead of looping.
const maxSameValue = 64

type quickRun struct {
	depth int // schemas applied to the current value
	// unknown is set when quick met something it cannot judge (a value
	// that is not plain JSON, a number it cannot read, the depth bound).
	// It sticks: a "false" inside not, if or oneOf would otherwise turn
	// "cannot judge" into an acceptance.
	unknown bool
}

// decline marks the run as unable to judge and returns false.
func (q *quickRun) decline() bool {
	q.unknown = true
	return false
}

// valid applies s to v with the library's semantics (validator.go of
// santhosh-tekuri/jsonschema/v6), keyword by keyword.
func (q *quickRun) valid(s *jsonschema.Schema, v any) bool {
	if q.depth++; q.depth > maxSameValue {
		q.depth--
		return q.decline()
	}
	ok := q.apply(s, v)
	q.depth--
	return ok
}

func (q *quickRun) apply(s *jsonschema.Schema, v any) bool {
	if s.Bool != nil {
		return *s.Bool
	}
	t := jsonType(v)
	if t == 0 {
		return q.decline()
	}
	if s.Types != nil && !s.Types.IsEmpty() && !q.typeMatches(*s.Types, t, v) {
		return false
	}
	if s.Const != nil && !q.equal(v, *s.Const) {
		return false
	}
	if s.Enum != nil {
		matched := false
		for _, e := range s.Enum.Values {
			if q.equal(v, e) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	if s.Format != nil && s.Format.Validate(v) != nil {
		return false
	}
	if s.Ref != nil && !q.valid(s.Ref, v) {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		if !q.object(s, x) {
			return false
		}
	case []any:
		if !q.array(s, x) {
			return false
		}
	case string:
		if !quickString(s, x) {
			return false
		}
	case json.Number, float64:
		if !q.number(s, v) {
			return false
		}
	}
	if s.Not != nil && q.valid(s.Not, v) {
		return false
	}
	for _, a := range s.AllOf {
		if !q.valid(a, v) {
			return false
		}
	}
	if len(s.AnyOf) > 0 {
		matched := false
		for _, a := range s.AnyOf {
			if q.valid(a, v) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	if len(s.OneOf) > 0 {
		n := 0
		for _, a := range s.OneOf {
			if q.valid(a, v) {
				if n++; n > 1 {
					return false
				}
			}
		}
		if n != 1 {
			return false
		}
	}
	if s.If != nil {
		if q.valid(s.If, v) {
			if s.Then != nil && !q.valid(s.Then, v) {
				return false
			}
		} else if s.Else != nil && !q.valid(s.Else, v) {
			return false
		}
	}
	return true
}

// value applies s to a member or item of the current value: a new value,
// so the same-value bound starts again.
func (q *quickRun) value(s *jsonschema.Schema, v any) bool {
	saved := q.depth
	q.depth = 0
	ok := q.valid(s, v)
	q.depth = saved
	return ok
}

func (q *quickRun) object(s *jsonschema.Schema, obj map[string]any) bool {
	if s.MinProperties != nil && len(obj) < *s.MinProperties {
		return false
	}
	if s.MaxProperties != nil && len(obj) > *s.MaxProperties {
		return false
	}
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok {
			return false
		}
	}
	if len(s.Properties) == 0 && len(s.PatternProperties) == 0 && s.AdditionalProperties == nil {
		return true // required alone, as an if's predicate often is
	}
	for name, pv := range obj {
		evaluated := false
		if ps, ok := s.Properties[name]; ok {
			evaluated = true
			if !q.value(ps, pv) {
				return false
			}
		}
		for re, ps := range s.PatternProperties { // empty but for a few
			if re.MatchString(name) {
				evaluated = true
				if !q.value(ps, pv) {
					return false
				}
			}
		}
		if !evaluated {
			switch a := s.AdditionalProperties.(type) {
			case bool:
				if !a {
					return false
				}
			case *jsonschema.Schema:
				if !q.value(a, pv) {
					return false
				}
			}
		}
	}
	return true
}

func (q *quickRun) array(s *jsonschema.Schema, arr []any) bool {
	if s.MinItems != nil && len(arr) < *s.MinItems {
		return false
	}
	if s.MaxItems != nil && len(arr) > *s.MaxItems {
		return false
	}
	if s.UniqueItems {
		for i := 1; i < len(arr); i++ {
			for j := 0; j < i; j++ {
				if q.equal(arr[i], arr[j]) {
					return false
				}
			}
		}
	}
	prefix := min(len(s.PrefixItems), len(arr))
	for i := range prefix {
		if !q.value(s.PrefixItems[i], arr[i]) {
			return false
		}
	}
	if s.Items2020 != nil {
		for _, item := range arr[prefix:] {
			if !q.value(s.Items2020, item) {
				return false
			}
		}
	}
	return true
}

func quickString(s *jsonschema.Schema, str string) bool {
	if s.MinLength != nil || s.MaxLength != nil {
		n := utf8.RuneCountInString(str)
		if s.MinLength != nil && n < *s.MinLength || s.MaxLength != nil && n > *s.MaxLength {
			return false
		}
	}
	return s.Pattern == nil || s.Pattern.MatchString(str)
}

func (q *quickRun) number(s *jsonschema.Schema, v any) bool {
	if s.Minimum == nil && s.Maximum == nil && s.ExclusiveMinimum == nil && s.ExclusiveMaximum == nil && s.MultipleOf == nil {
		return true
	}
	if i, ok := smallInt(v); ok {
		if pass, ok := intBounds(s, i); ok {
			return pass
		}
	}
	n, ok := rat(v)
	if !ok {
		return q.decline()
	}
	switch {
	case s.Minimum != nil && n.Cmp(s.Minimum) < 0,
		s.Maximum != nil && n.Cmp(s.Maximum) > 0,
		s.ExclusiveMinimum != nil && n.Cmp(s.ExclusiveMinimum) <= 0,
		s.ExclusiveMaximum != nil && n.Cmp(s.ExclusiveMaximum) >= 0:
		return false
	case s.MultipleOf != nil:
		return new(big.Rat).Quo(n, s.MultipleOf).IsInt()
	}
	return true
}

// The JSON types as the library's type keyword names them, each a
// jsonschema.Types of its own (a bit of the library's type set).
var typeNames = []string{"null", "boolean", "number", "integer", "string", "array", "object"}

var typeBits = func() map[string]jsonschema.Types {
	m := map[string]jsonschema.Types{}
	for _, n := range typeNames {
		var t jsonschema.Types
		t.Add(n)
		m[n] = t
	}
	return m
}()

// jsonType is the type bit of a decoded value, 0 for anything that is
// not plain JSON (the library refuses it, or takes a Go type quick does
// not: it declines).
func jsonType(v any) jsonschema.Types {
	switch x := v.(type) {
	case nil:
		return typeBits["null"]
	case bool:
		return typeBits["boolean"]
	case json.Number:
		return typeBits["number"]
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0
		}
		return typeBits["number"]
	case string:
		return typeBits["string"]
	case []any:
		return typeBits["array"]
	case map[string]any:
		return typeBits["object"]
	}
	return 0
}

// typeMatches is the type keyword: one of the listed types, or an integer
// value where "integer" is listed.
func (q *quickRun) typeMatches(tt, t jsonschema.Types, v any) bool {
	if tt&t != 0 {
		return true
	}
	if tt&typeBits["integer"] == 0 || t != typeBits["number"] {
		return false
	}
	if n, ok := v.(json.Number); ok {
		if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return true
		}
	}
	r, ok := rat(v)
	if !ok {
		return q.decline()
	}
	return r.IsInt()
}

// rat is a number as the library reads it (big.Rat of its printed form).
// smallInt returns v as an int64 when it is a JSON integer literal
// (json.Number, as the decoders give numbers) within int64.
func smallInt(v any) (int64, bool) {
	lit, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return n, err == nil
}

// intBounds judges n against s's bounds when every bound s has is an
// integer within int64 (ok false otherwise): integers compare exactly,
// as their rationals do, without building one per value.
func intBounds(s *jsonschema.Schema, n int64) (pass, ok bool) {
	bound := func(r *big.Rat) (int64, bool) {
		if r == nil {
			return 0, true
		}
		if !r.IsInt() || !r.Num().IsInt64() {
			return 0, false
		}
		return r.Num().Int64(), true
	}
	lo, ok1 := bound(s.Minimum)
	hi, ok2 := bound(s.Maximum)
	xlo, ok3 := bound(s.ExclusiveMinimum)
	xhi, ok4 := bound(s.ExclusiveMaximum)
	m, ok5 := bound(s.MultipleOf)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || s.MultipleOf != nil && m <= 0 {
		return false, false
	}
	switch {
	case s.Minimum != nil && n < lo,
		s.Maximum != nil && n > hi,
		s.ExclusiveMinimum != nil && n <= xlo,
		s.ExclusiveMaximum != nil && n >= xhi,
		s.MultipleOf != nil && n%m != 0:
		return false, true
	}
	return true, true
}

func rat(v any) (*big.Rat, bool) {
	return new(big.Rat).SetString(fmt.Sprint(v))
}

// equal is the library's equality of JSON values: numbers by value.
func (q *quickRun) equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !q.equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !q.equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number, float64:
		tb := jsonType(b)
		if tb == 0 {
			return q.decline()
		}
		if tb != typeBits["number"] {
			return false
		}
		ra, ok1 := rat(a)
		rb, ok2 := rat(b)
		if !ok1 || !ok2 {
			return q.decline()
		}
		return ra.Cmp(rb) == 0
	}
	return q.decline()
}
