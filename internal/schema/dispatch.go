package schema

import (
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/partyd/party/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The envelope schema chooses an object's payload rules through one allOf
// entry per object type, each of the form
//
//	{"if": {"$ref": "#/$defs/is/$defs/T"}, "then": <the rules of T>}
//
// where the predicate is/T holds exactly when object_type is present and
// equal to T. A validator evaluates every one of those predicates for every
// object: thirty conditionals to find the one that applies, a third of the
// time a valid offer takes to validate and nearly half its allocations.
//
// For an object whose object_type is the string T, each such entry is
// decided before validation starts: is/T' holds if and only if T' = T, so
// the entry for T is its then-schema and every other entry is the empty
// schema. specialise writes that reduced envelope for every T the schema
// registers (a type no entry names keeps none); Validate runs it first for an object of that type and accepts what
// it accepts. Whatever it refuses is validated again against the envelope
// as written, so a refusal reports exactly the failures and schema
// locations the whole schema gives (TestDispatchMatchesEnvelope compares
// the two on every fixture and on every object re-typed as every type).
//
// Only entries of exactly that shape are reduced; any other allOf entry
// (the version chain, the transaction-free types) is kept as written. A
// predicate of any other shape is an error: the reduction would no longer
// follow from the schema, and the broken embedded set panics at start-up
// rather than validating with rules it cannot justify.

// Each reduced envelope is compiled the first time an object of its type is
// validated: compiling all of them costs as much again as the rest of the
// set (the library checks each against the draft's meta-schema), and a
// command that validates one offer needs one.

// dispatchSet holds the reduced envelopes, compiled on first use.
type dispatchSet struct {
	mu sync.Mutex // serialises c, which is not safe for concurrent use
	c  *jsonschema.Compiler
	by map[string]*dispatched // fixed once built
}

// dispatched is one type's reduced envelope.
type dispatched struct {
	once sync.Once
	sch  *jsonschema.Schema
	err  error
}

// newDispatchSet keeps c, which already holds every reduced envelope as a
// resource, for the compilations to come.
func newDispatchSet(c *jsonschema.Compiler, reduced map[string]map[string]any) *dispatchSet {
	d := &dispatchSet{c: c, by: make(map[string]*dispatched, len(reduced))}
	for t := range reduced {
		d.by[t] = &dispatched{}
	}
	return d
}

// schema returns the reduced envelope for object type t, or nil for a type
// the envelope does not register (the whole envelope then refuses it).
// A reduction that does not compile is nil too, and validation falls back
// to the whole envelope; TestDispatchCompiles compiles every one.
func (d *dispatchSet) schema(t string) *jsonschema.Schema {
	e := d.by[t]
	if e == nil {
		return nil
	}
	e.once.Do(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		e.sch, e.err = d.c.Compile(dispatchedID(t))
	})
	return e.sch
}

// types returns the types that have a reduced envelope, sorted.
func (d *dispatchSet) types() []string {
	out := make([]string, 0, len(d.by))
	for t := range d.by {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// dispatchedID is the $id of the envelope reduced for object type t. It
// sits beside envelope.schema.json so that the relative references to the
// family files resolve to the same resources.
func dispatchedID(t string) string {
	return schemas.BaseURI + "envelope.dispatched." + t + ".json"
}

// specialise returns, for every object type the envelope registers
// ($defs/object_type) or dispatches on, a copy of the envelope document env with its dispatch
// entries decided for that type, keyed by type.
func specialise(env map[string]any) (map[string]map[string]any, error) {
	preds, err := dispatchPredicates(env)
	if err != nil {
		return nil, err
	}
	all, ok := env["allOf"].([]any)
	if !ok {
		return nil, fmt.Errorf("envelope.schema.json: allOf is not an array")
	}
	// entryType[i] is the type allOf entry i dispatches on, "" for an entry
	// kept as written.
	entryType := make([]string, len(all))
	for i, e := range all {
		entryType[i] = dispatchedType(e, preds)
	}
	// Every registered type gets its reduction, also those no entry
	// dispatches on: for them every dispatch entry is the empty schema.
	types := make(map[string]bool, len(preds))
	for t := range preds {
		types[t] = true
	}
	defs, _ := env["$defs"].(map[string]any)
	ot, _ := defs["object_type"].(map[string]any)
	enum, _ := ot["enum"].([]any)
	for _, e := range enum {
		if t, ok := e.(string); ok {
			types[t] = true
		}
	}
	out := make(map[string]map[string]any, len(types))
	for t := range types {
		cp := deepCopy(env).(map[string]any)
		cp["$id"] = dispatchedID(t)
		entries := cp["allOf"].([]any)
		for i, et := range entryType {
			switch {
			case et == "":
			case et == t:
				entries[i] = entries[i].(map[string]any)["then"]
			default:
				entries[i] = true
			}
		}
		out[t] = cp
	}
	return out, nil
}

// dispatchPredicates reads $defs/is/$defs and checks that each predicate is
// exactly "object_type is present and equals the type named".
func dispatchPredicates(env map[string]any) (map[string]bool, error) {
	defs, _ := env["$defs"].(map[string]any)
	is, _ := defs["is"].(map[string]any)
	preds, _ := is["$defs"].(map[string]any)
	if len(preds) == 0 {
		return nil, fmt.Errorf("envelope.schema.json: no dispatch predicates under $defs/is/$defs")
	}
	out := make(map[string]bool, len(preds))
	names := make([]string, 0, len(preds))
	for t := range preds {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		p, _ := preds[t].(map[string]any)
		want := map[string]any{
			"required":   []any{"object_type"},
			"properties": map[string]any{"object_type": map[string]any{"const": t}},
		}
		got := make(map[string]any, len(p))
		for k, v := range p {
			if k != "$comment" {
				got[k] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			return nil, fmt.Errorf("envelope.schema.json: dispatch predicate %s is not {required: [object_type], properties: {object_type: {const: %q}}}", t, t)
		}
		out[t] = true
	}
	return out, nil
}

// dispatchedType returns the type an allOf entry dispatches on: an entry
// holding only if (a $ref to a known predicate), then and $comment.
func dispatchedType(e any, preds map[string]bool) string {
	m, ok := e.(map[string]any)
	if !ok {
		return ""
	}
	if _, ok := m["then"]; !ok {
		return ""
	}
	for k := range m {
		if k != "if" && k != "then" && k != "$comment" {
			return ""
		}
	}
	cond, _ := m["if"].(map[string]any)
	if len(cond) != 1 {
		return ""
	}
	ref, _ := cond["$ref"].(string)
	const prefix = "#/$defs/is/$defs/"
	if len(ref) <= len(prefix) || ref[:len(prefix)] != prefix || !preds[ref[len(prefix):]] {
		return ""
	}
	return ref[len(prefix):]
}

// deepCopy copies a decoded JSON document, so that each reduced envelope
// owns its maps and slices.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	default:
		return v
	}
}
