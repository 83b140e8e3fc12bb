package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/partyd/party/internal/spectest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// agree checks quick against the library on one document: quick may only
// accept what the library accepts, and (so that it is the fast path it is
// meant to be) it must accept everything the library accepts under the
// schemas it interprets.
func agree(t testing.TB, where string, sch *jsonschema.Schema, doc any) (valid bool) {
	t.Helper()
	lib := sch.Validate(doc) == nil
	q := accepts(sch, doc)
	switch {
	case q && !lib:
		t.Errorf("%s: quick accepts what the library refuses: %s", where, show(doc))
	case lib && !q && interprets(sch):
		t.Errorf("%s: quick declines what the library accepts: %s", where, show(doc))
	}
	return lib
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 400 {
		b = append(b[:400], "…"...)
	}
	return string(b)
}

// fixtureEnvelopes are the envelopes of the published fixtures and of the
// reference record, and the package's own offer.
func fixtureEnvelopes(t testing.TB) []map[string]any {
	t.Helper()
	var envs []map[string]any
	envelopesIn(decode(t, offerJSON), &envs)
	for _, dir := range []string{
		filepath.Join(spectest.SpecDir(t), "conformance", "fixtures"),
		spectest.ReferenceVectors(t),
	} {
		for _, v := range jsonFilesUnder(t, dir) {
			envelopesIn(v, &envs)
		}
	}
	return envs
}

// leafMutations returns copies of doc each with one leaf changed (a
// string lengthened, shortened to empty, its last character changed, made
// a number; a number raised, made negative, fractional, a string; a
// boolean flipped; a null made a string), one member removed, or one
// member added, to every object inside it.
func leafMutations(doc map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(path []string, v any)
	apply := func(path []string, f func(parent any, key string)) {
		cp := deepCopy(doc).(map[string]any)
		var cur any = cp
		for _, k := range path[:len(path)-1] {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[k]
			case []any:
				i, _ := strconv.Atoi(k)
				cur = c[i]
			}
		}
		f(cur, path[len(path)-1])
		out = append(out, cp)
	}
	set := func(v any) func(parent any, key string) {
		return func(parent any, key string) {
			switch c := parent.(type) {
			case map[string]any:
				c[key] = v
			case []any:
				i, _ := strconv.Atoi(key)
				c[i] = v
			}
		}
	}
	walk = func(path []string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				p := append(append([]string(nil), path...), k)
				walk(p, x[k])
				apply(p, func(parent any, key string) { delete(parent.(map[string]any), key) })
			}
			if len(path) > 0 {
				apply(append(append([]string(nil), path...), "zz_extra"), set("x"))
			}
		case []any:
			for i := range x {
				walk(append(append([]string(nil), path...), strconv.Itoa(i)), x[i])
			}
			if len(path) > 0 {
				apply(path, set([]any{}))
			}
		case string:
			apply(path, set(x+"x"))
			apply(path, set(""))
			if x != "" {
				apply(path, set(x[:len(x)-1]+"!"))
			}
			apply(path, set(json.Number("1")))
		case json.Number:
			apply(path, set(json.Number(string(x)+"1")))
			apply(path, set(json.Number("-1")))
			apply(path, set(json.Number("1.5")))
			apply(path, set(string(x)))
		case bool:
			apply(path, set(!x))
		case nil:
			apply(path, set("x"))
		}
	}
	walk(nil, doc)
	return out
}

// TestQuickAgreesWithLibrary: on every envelope of the fixtures and the
// reference record, as written, re-typed as every object type, and with
// every single-leaf mutation (leafMutations), quick accepts exactly what
// the library accepts, against the envelope decided for the object's type
// and against the envelope as written; and on the mandates and grades of
// the fixtures likewise.
func TestQuickAgreesWithLibrary(t *testing.T) {
	t.Parallel() // the package's two longest tests, each single-threaded: side by side
	s := compiled()
	envs := fixtureEnvelopes(t)
	types := s.dispatched.types()
	checked, valid := 0, 0
	check := func(where string, doc map[string]any) {
		typ, _ := doc["object_type"].(string)
		if d := s.dispatched.schema(typ); d != nil {
			if agree(t, where+" (dispatched)", d, doc) {
				valid++
			}
		}
		agree(t, where, s.envelope, doc)
		checked++
	}
	for i, env := range envs {
		where := "envelope " + strconv.Itoa(i)
		check(where, env)
		for _, typ := range types {
			cp := deepCopy(env).(map[string]any)
			cp["object_type"] = typ
			check(where+" as "+typ, cp)
		}
		if testing.Short() && i > 20 || raceEnabled && i%8 != 0 {
			// Under -race (or -short) an eighth of the mutation sweep:
			// the comparison is single-threaded, and the whole of it runs
			// in the plain test run.
			continue
		}
		for j, m := range leafMutations(env) {
			check(fmt.Sprintf("%s mutation %d", where, j), m)
		}
	}
	if checked < 1000 || valid < 50 {
		t.Fatalf("only %d documents checked (%d valid): the fixtures were not read", checked, valid)
	}
	t.Logf("%d envelopes checked, %d valid", checked, valid)

	// Mandates and grades: the other document roots.
	mandates, grades := 0, 0
	for _, dir := range []string{filepath.Join(spectest.SpecDir(t), "conformance", "fixtures"), spectest.ReferenceVectors(t)} {
		for _, v := range jsonFilesUnder(t, dir) {
			var docs []map[string]any
			documentsIn(v, &docs)
			for _, d := range docs {
				sch, kind := s.mandate, "mandate"
				if _, ok := d["grade"]; ok {
					sch, kind = s.grade, "grade"
				}
				for j, m := range append([]map[string]any{d}, leafMutations(d)...) {
					agree(t, fmt.Sprintf("%s %d", kind, j), sch, m)
				}
				if kind == "mandate" {
					mandates++
				} else {
					grades++
				}
			}
		}
	}
	t.Logf("%d mandates and %d grades, each with its mutations", mandates, grades)
	if mandates == 0 {
		t.Fatal("no mandate among the fixtures")
	}
}

// documentsIn collects the standalone documents inside v: mandates
// (spec_version a202-mandate/…) and grades.
func documentsIn(v any, out *[]map[string]any) {
	mapsIn(v, out, func(x map[string]any) bool {
		if sv, _ := x["spec_version"].(string); len(sv) > 12 && sv[:12] == "a202-mandate" {
			return true
		}
		_, graded := x["grade"]
		_, issued := x["issuer"]
		return graded && issued
	})
}

// FuzzQuickAgreesWithLibrary: any JSON object, checked against the
// envelope decided for its object_type and the envelope as written, and
// the mandate schema: quick never accepts what the library refuses.
func FuzzQuickAgreesWithLibrary(f *testing.F) {
	for _, env := range fixtureEnvelopes(f) {
		b, err := json.Marshal(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s := compiled()
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var doc map[string]any
		if dec.Decode(&doc) != nil {
			return
		}
		typ, _ := doc["object_type"].(string)
		for _, sch := range []*jsonschema.Schema{s.dispatched.schema(typ), s.envelope, s.mandate} {
			if sch == nil {
				continue
			}
			if accepts(sch, doc) && sch.Validate(doc) != nil {
				t.Fatalf("quick accepts what the library refuses: %s", data)
			}
		}
	})
}

// TestQuickIntegers: integer literals are judged against integer bounds
// without rationals, as the rationals judge them; other literals and
// bounds go the rational way.
func TestQuickIntegers(t *testing.T) {
	t.Parallel()
	r := func(s string) *big.Rat { v, _ := new(big.Rat).SetString(s); return v }
	schemas := []*jsonschema.Schema{
		{Minimum: r("1"), Maximum: r("300")},
		{ExclusiveMinimum: r("0"), ExclusiveMaximum: r("10")},
		{MultipleOf: r("5")},
		{Minimum: r("0.5")},
		{Maximum: r("99999999999999999999")},
	}
	for _, s := range schemas {
		for _, lit := range []string{"0", "-0", "1", "5", "9", "10", "300", "301", "-7", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1.0", "1e2", "05"} {
			q := &quickRun{}
			got := q.number(s, json.Number(lit))
			n, ok := rat(json.Number(lit))
			if !ok {
				t.Fatalf("%s: no rational", lit)
			}
			want := (s.Minimum == nil || n.Cmp(s.Minimum) >= 0) &&
				(s.Maximum == nil || n.Cmp(s.Maximum) <= 0) &&
				(s.ExclusiveMinimum == nil || n.Cmp(s.ExclusiveMinimum) > 0) &&
				(s.ExclusiveMaximum == nil || n.Cmp(s.ExclusiveMaximum) < 0) &&
				(s.MultipleOf == nil || new(big.Rat).Quo(n, s.MultipleOf).IsInt())
			if got != want {
				t.Errorf("%v on %s: %v, want %v", s, lit, got, want)
			}
		}
	}
}
