package schema

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/partyd/party/schemas"
)

// envelopesIn collects every envelope object (a map with spec_version and
// object_type) anywhere inside v.
func envelopesIn(v any, out *[]map[string]any) {
	mapsIn(v, out, func(x map[string]any) bool {
		_, typed := x["object_type"]
		_, versioned := x["spec_version"]
		return typed && versioned
	})
}

// mapsIn collects every object anywhere inside v that keep accepts.
func mapsIn(v any, out *[]map[string]any, keep func(map[string]any) bool) {
	switch x := v.(type) {
	case map[string]any:
		if keep(x) {
			*out = append(*out, x)
		}
		for _, e := range x {
			mapsIn(e, out, keep)
		}
	case []any:
		for _, e := range x {
			mapsIn(e, out, keep)
		}
	}
}

// jsonFilesUnder decodes every *.json file below dir.
func jsonFilesUnder(t testing.TB, dir string) []any {
	t.Helper()
	var docs []any
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		v, err := readJSON(p)
		if err != nil {
			return err
		}
		docs = append(docs, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// checkDispatch validates doc against the envelope as written and against
// the envelope decided for doc's object_type, and fails when they
// disagree: the reduction must accept exactly what the whole schema
// accepts for that type.
func checkDispatch(t *testing.T, s *set, where string, doc map[string]any) (valid bool) {
	t.Helper()
	full := s.envelope.Validate(doc) == nil
	typ, _ := doc["object_type"].(string)
	d := s.dispatched.schema(typ)
	if d == nil {
		if full {
			t.Errorf("%s: object_type %q has no reduced envelope, yet the envelope accepts it", where, typ)
		}
		return full
	}
	if fast := d.Validate(doc) == nil; fast != full {
		t.Errorf("%s (object_type %q): reduced envelope says valid=%v, the envelope valid=%v", where, typ, fast, full)
	}
	return full
}

// TestDispatchMatchesEnvelope: on every envelope of the published fixtures
// and of the reference record, as written and re-typed as every object
// type (and as an unknown one, and without a type), the envelope decided
// for the type and the envelope as written agree. The re-typed copies are
// mostly invalid, so both directions of the equivalence are exercised.
func TestDispatchMatchesEnvelope(t *testing.T) {
	t.Parallel() // the package's two longest tests, each single-threaded: side by side
	s := compiled()
	envs := fixtureEnvelopes(t)
	types := s.dispatched.types()
	valid, retypedValid := 0, 0
	for i, env := range envs {
		if checkDispatch(t, s, "envelope "+strconv.Itoa(i), env) {
			valid++
		}
		for _, typ := range append(types, "not_a_type") {
			cp := deepCopy(env).(map[string]any)
			cp["object_type"] = typ
			if checkDispatch(t, s, "envelope "+strconv.Itoa(i)+" re-typed", cp) && typ != env["object_type"] {
				retypedValid++
			}
		}
		cp := deepCopy(env).(map[string]any)
		delete(cp, "object_type")
		if s.envelope.Validate(cp) == nil {
			t.Errorf("envelope %d without object_type validates", i)
		}
	}
	if len(envs) < 100 || valid < 50 {
		t.Fatalf("only %d envelopes (%d valid): the fixtures were not read", len(envs), valid)
	}
	t.Logf("%d envelopes (%d valid), each re-typed %d ways (%d re-typed copies valid)", len(envs), valid, len(types)+1, retypedValid)
}

// Every type the object_type enum registers has a reduced envelope, and
// nothing else does: a type added to the enum without its dispatch entry
// would fall back to the whole schema, silently slow.
func TestDispatchCoversObjectTypes(t *testing.T) {
	raw, err := fs.ReadFile(schemas.FS, "envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := decode(t, string(raw)).(map[string]any)
	enum, _ := doc["$defs"].(map[string]any)["object_type"].(map[string]any)["enum"].([]any)
	var want []string
	for _, e := range enum {
		want = append(want, e.(string))
	}
	sort.Strings(want)
	if got := compiled().dispatched.types(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reduced envelopes for %v,\nobject types registered %v", got, want)
	}
}

// Every reduced envelope compiles, on a set of its own and concurrently
// with validation on the shared set (the race detector watches the
// compiler's later use).
func TestDispatchCompiles(t *testing.T) {
	s, err := compileSet(schemas.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range s.dispatched.types() {
		s.dispatched.schema(typ)
		if e := s.dispatched.by[typ]; e.err != nil || e.sch == nil {
			t.Errorf("%s: %v", typ, e.err)
		}
	}
	shared := compiled()
	doc := decode(t, offerJSON)
	var wg sync.WaitGroup
	for _, typ := range shared.dispatched.types() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shared.dispatched.schema(typ)
			if err := ValidateEnvelope(doc); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// A dispatch predicate of another shape cannot be decided in advance: the
// embedded set refuses to compile rather than reduce it wrongly.
func TestDispatchRefusesOtherPredicates(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "schemas", "envelope.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ old, new string }{
		"enum instead of const": {`"properties": { "object_type": { "const": "offer" } }`, `"properties": { "object_type": { "enum": ["offer", "acceptance"] } }`},
		"another member":        {`"properties": { "object_type": { "const": "offer" } }`, `"properties": { "object_type": { "const": "offer" }, "version": { "const": 2 } }`},
	} {
		t.Run(name, func(t *testing.T) {
			text := string(raw)
			if !strings.Contains(text, c.old) {
				t.Fatalf("envelope.schema.json no longer holds %s", c.old)
			}
			fsys := brokenFS(t, "envelope.schema.json", strings.Replace(text, c.old, c.new, 1))
			if _, err := compileSet(fsys); err == nil || !strings.Contains(err.Error(), "dispatch predicate offer") {
				t.Fatalf("compileSet = %v, want the offer predicate refused", err)
			}
		})
	}
}
