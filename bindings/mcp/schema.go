package mcp

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/store"
)

// writeArgs is the member every write tool accepts beside its own input
// type; call strips it before the input is decoded.
type writeArgs struct {
	RequestID string `json:"request_id,omitempty" jsonschema:"Optional retry key: same id and arguments, first result."`
}

// typeSchemas are the schemas of the named types whose Go type alone does
// not say what a member takes: a closed set of values, a bound, required
// members of an open object. Each set of values is the list the code checks
// against, so the schema cannot offer what the engine refuses. A field of
// one of these types takes this schema, with the field's jsonschema tag as
// its description.
func typeSchemas() map[reflect.Type]*jsonschema.Schema {
	evidence, err := jsonschema.For[[]record.EvidenceInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of record.Evidence: %v", err))
	}
	evidence.Types, evidence.Type = nil, "array"
	evidence.MinItems = jsonschema.Ptr(1)
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[protocol.ResponseType]():    {Type: "string", Enum: values(record.ResponseTypes)},
		reflect.TypeFor[protocol.Role]():            {Type: "string", Enum: values(protocol.Roles)},
		reflect.TypeFor[protocol.RejectionReason](): {Type: "string", Enum: values(protocol.RejectionReasons)},
		reflect.TypeFor[readmodel.PageLimit]():      {Type: "integer", Minimum: jsonschema.Ptr(1.0), Maximum: jsonschema.Ptr(float64(store.MaxPage))},
		reflect.TypeFor[record.Terms]():             termsSchema(),
		reflect.TypeFor[record.Evidence]():          evidence,
	}
}

// termsSchema is the shape of record.Terms: the kernel's terms with
// profile_terms held to the registered profiles' own schemas
// (schema.TermsSchema), so a model writes terms it can validate before
// the gate does.
func termsSchema() *jsonschema.Schema {
	var s jsonschema.Schema
	if err := remarshal(schema.TermsSchema(), &s); err != nil {
		panic(fmt.Sprintf("mcp: schema of record.Terms: %v", err))
	}
	return &s
}

func values[T ~string](list []T) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = string(v)
	}
	return out
}

// schemaFor infers the JSON Schema of t and makes every type in it
// single: a Go slice or pointer infers as ["null", X], but party never
// sends null (an empty list is [], a member with no value is omitted) and
// never needs a client to send one, so each such type is X alone. A
// client that maps tool schemas onto a single-type dialect reads every
// schema here as it is.
func schemaFor(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: typeSchemas()})
	if err != nil {
		return nil, err
	}
	walkSchema(s, func(s *jsonschema.Schema) {
		if isTrue(s.AdditionalProperties) {
			s.AdditionalProperties = nil // the default, said of every map
		}
		if len(s.Types) == 0 {
			return
		}
		rest := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		if len(rest) == 1 {
			s.Type, s.Types = rest[0], nil
		} else {
			s.Types = rest
		}
	})
	return s, nil
}

// isTrue says s is the schema true, which accepts anything.
func isTrue(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "true"
}

// inputSchema is the input schema of a tool whose arguments decode into
// t, with request_id for a write tool.
func inputSchema(t reflect.Type, write bool) (*jsonschema.Schema, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("input type %s is not a struct", t)
	}
	s, err := schemaFor(t)
	if err != nil {
		return nil, err
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{} // "properties": {}, which some clients insist on
	}
	if write {
		w, err := schemaFor(reflect.TypeFor[writeArgs]())
		if err != nil {
			return nil, err
		}
		if _, clash := s.Properties["request_id"]; clash {
			return nil, fmt.Errorf("input type %s has its own request_id", t)
		}
		s.Properties["request_id"] = w.Properties["request_id"]
		s.PropertyOrder = append(s.PropertyOrder, "request_id")
	}
	return s, nil
}

// walkSchema calls f on s and on every schema inside it.
func walkSchema(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(s)
	for _, named := range []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties, s.Defs, s.Definitions, s.DependentSchemas, s.DependencySchemas} {
		for _, sub := range named {
			walkSchema(sub, f)
		}
	}
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems, s.ItemsArray} {
		for _, sub := range list {
			walkSchema(sub, f)
		}
	}
	for _, sub := range []*jsonschema.Schema{s.Items, s.AdditionalProperties, s.AdditionalItems, s.Not, s.If, s.Then, s.Else, s.Contains, s.PropertyNames, s.UnevaluatedItems, s.UnevaluatedProperties, s.ContentSchema} {
		walkSchema(sub, f)
	}
}

// Results are the result schemas a server gives at ResultsURI, resolved
// once. A strict client (the walkthrough's agent, the tests) checks every
// result that is not an error against its tool's (Check).
type Results map[string]*Output

// ResolveResults resolves the text of the ResultsURI resource.
func ResolveResults(text string) (Results, error) {
	var byTool map[string]*jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &byTool); err != nil {
		return nil, fmt.Errorf("result schemas: %w", err)
	}
	out := Results{}
	for name, s := range byTool {
		rs, err := s.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("result schema of %s: %w", name, err)
		}
		out[name] = &Output{rs: rs}
	}
	return out, nil
}

// Check checks tool's structured content as a client received it against
// the tool's result schema, and that it carries no null anywhere: an
// empty list is [], a member with no value is omitted.
func (r Results) Check(tool string, structured any) error {
	o, ok := r[tool]
	if !ok {
		return fmt.Errorf("no result schema for tool %s", tool)
	}
	return o.Check(structured)
}

// Output is one tool's result schema, resolved.
type Output struct{ rs *jsonschema.Resolved }

// Check checks structured against the schema o holds. structured is the content as
// received (json.RawMessage or []byte for its JSON text, or a value that
// marshals to it).
func (o *Output) Check(structured any) error {
	var v any
	var err error
	switch b := structured.(type) {
	case json.RawMessage:
		err = json.Unmarshal(b, &v)
	case []byte:
		err = json.Unmarshal(b, &v)
	default:
		err = remarshal(structured, &v)
	}
	if err != nil {
		return fmt.Errorf("structured content: %w", err)
	}
	if at, ok := nullIn(v, ""); ok {
		return fmt.Errorf("structured content has null at %q", at)
	}
	return o.rs.Validate(v)
}

func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// nullIn finds a null in a decoded JSON value and returns its JSON
// pointer.
func nullIn(v any, at string) (string, bool) {
	switch x := v.(type) {
	case nil:
		return at, true
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p, ok := nullIn(x[k], at+"/"+k); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := nullIn(e, fmt.Sprintf("%s/%d", at, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}
