package schema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/partyd/party/schemas"
)

// The shape of a terms object, for an agent that writes one.
//
// An agent proposing an offer writes the whole terms object {profile,
// core, profile_terms} (CCM §8). The gate validates it in two parts: the
// kernel's terms (common.schema.json#/$defs/terms), where profile_terms is
// opaque, and profile_terms against the registered profile named in
// profile (ValidateTerms). TermsSchema joins the two into one schema that
// stands alone, so that a tool's input schema can carry it (bindings/mcp):
// every $ref is inlined, profile is one of the registered identifiers,
// and one if/then per profile holds profile_terms to that profile's
// schema. Descriptions are the profiles' own, cut to their first sentence
// without spec citations; the shared building blocks' (money, country),
// a format beside its pattern, and the files' own head ($id, $comment,
// x-a202-profile, title, description) are dropped: the schema is read by
// a model in every tools/list, where bytes are context. It is derived
// from the embedded files once per process, so a newly registered profile
// is offered without another change.

// TermsSchema returns the standalone JSON Schema of a terms object an agent
// proposes (a fresh copy: the caller may change it).
func TermsSchema() map[string]any {
	b, err := termsSchema()
	if err != nil {
		panic(fmt.Sprintf("internal/schema: embedded schemas are broken: %v", err))
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("internal/schema: terms schema: %v", err))
	}
	return out
}

var termsSchema = sync.OnceValues(func() ([]byte, error) {
	s, err := buildTermsSchema(schemas.FS)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
})

// buildTermsSchema joins the kernel's terms and the profiles of fsys.
func buildTermsSchema(fsys fs.FS) (map[string]any, error) {
	var common map[string]any
	if err := readSchemaFile(fsys, "common.schema.json", &common); err != nil {
		return nil, err
	}
	defs, _ := common["$defs"].(map[string]any)
	terms, err := inline(defs["terms"], defs, 0)
	if err != nil {
		return nil, err
	}
	t, ok := terms.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("common.schema.json: $defs/terms is not a schema")
	}
	ids, err := profileIDs(fsys)
	if err != nil {
		return nil, err
	}
	files, err := fs.Glob(fsys, "profiles/*.schema.json")
	if err != nil {
		return nil, err
	}
	var conds []any
	for _, name := range files {
		var doc map[string]any
		if err := readSchemaFile(fsys, name, &doc); err != nil {
			return nil, err
		}
		id, _ := doc[profileAnnotation].(string)
		for _, k := range []string{"$schema", "$id", "$comment", profileAnnotation, "title", "description"} {
			delete(doc, k)
		}
		p, err := inline(doc, defs, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		conds = append(conds, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"profile": map[string]any{"const": id}}, "required": []any{"profile"}},
			"then": map[string]any{"properties": map[string]any{"profile_terms": p}},
		})
	}
	props, _ := t["properties"].(map[string]any)
	if props == nil || len(ids) == 0 {
		return nil, fmt.Errorf("no terms properties or no registered profile")
	}
	enum := []any{}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		enum = append(enum, id)
	}
	props["profile"] = map[string]any{"type": "string", "enum": enum, "description": "A registered profile; it decides the shape of profile_terms."}
	props["profile_terms"] = map[string]any{"type": "object", "description": "The profile's own terms, as its schema says."}
	if core, ok := props["core"].(map[string]any); ok {
		core["description"] = "The same for every profile: description, quantity, unit_code (UN/ECE Rec. 20, e.g. H87), unit_name, total."
	}
	t["allOf"] = conds
	return t, nil
}

func readSchemaFile(fsys fs.FS, name string, v any) error {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// inline returns v with every $ref into common.schema.json's $defs
// replaced by the definition (the referring schema's own members win),
// $comment dropped and descriptions cut to their first sentence.
func inline(v any, defs map[string]any, depth int) (any, error) {
	if depth > 16 {
		return nil, fmt.Errorf("$ref nesting too deep")
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		if ref, ok := x["$ref"].(string); ok {
			_, name, found := strings.Cut(ref, "#/$defs/")
			def, known := defs[name]
			if !found || !known || (!strings.HasPrefix(ref, "#") && !strings.HasPrefix(ref, "../common.schema.json#")) {
				return nil, fmt.Errorf("unresolvable $ref %q", ref)
			}
			d, err := inline(def, defs, depth+1)
			if err != nil {
				return nil, err
			}
			for k, e := range d.(map[string]any) {
				if k != "description" { // the building block's; the site says what it is for
					out[k] = e
				}
			}
		}
		for k, e := range x {
			switch k {
			case "$ref", "$comment", "format": // format: the pattern beside it says it
				continue
			case "description":
				if s, ok := e.(string); ok {
					out[k] = firstSentence(s)
					continue
				}
			}
			if k == "properties" || k == "$defs" {
				// A member named "description" is a property, not a
				// description: only schemas are under these keys.
				m, _ := e.(map[string]any)
				ps := map[string]any{}
				for name, sub := range m {
					s, err := inline(sub, defs, depth)
					if err != nil {
						return nil, err
					}
					ps[name] = s
				}
				out[k] = ps
				continue
			}
			s, err := inline(e, defs, depth)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, err := inline(e, defs, depth)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return v, nil
}

// firstSentence is s up to its first full stop followed by a space, or
// all of s, without its citations of the spec ("(CCM §7)"), which a
// model writing terms has no use for.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return citation.ReplaceAllString(s, "")
}

var citation = regexp.MustCompile(` \((CCM|PEM|STL|OBL) §[^)]*\)`)
