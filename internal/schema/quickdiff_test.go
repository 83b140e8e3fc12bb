package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The shortcut (quick.go) against the full validator, through the
// package's own entries.
//
// TestQuickAgreesWithLibrary holds quick to the library schema by schema
// on the fixtures' envelopes and their leaf mutations. Here the question
// is the one a caller asks: does Validate (or ValidateProfileTerms), which
// takes the shortcut first and the envelope decided for the object's
// type, answer as santhosh-tekuri/jsonschema answers with party's schema
// as written, on every document of every published fixture as the
// manifest splits them, on party's own documents (this package's test
// documents, the two-party walkthrough's record), on every profile_terms
// among them, and on structural mutations of our own documents?

// kindedDoc is one document and the kind it is validated as; for
// KindProfileTerms, profile names the profile.
type kindedDoc struct {
	where   string
	kind    Kind
	profile string
	value   any
}

// fullVerdict is the library's answer with party's schema as written, no
// shortcut and no dispatch, and the schema that gives it.
func fullVerdict(t testing.TB, d kindedDoc) (*jsonschema.Schema, bool) {
	t.Helper()
	s := compiled()
	var sch *jsonschema.Schema
	switch d.kind {
	case KindEnvelope:
		sch = s.envelope
	case KindMandate:
		sch = s.mandate
	case KindGrade:
		sch = s.grade
	case KindProfileTerms:
		sch = s.profiles[d.profile]
	}
	if sch == nil {
		t.Fatalf("%s: no schema for %s %q", d.where, d.kind, d.profile)
	}
	return sch, sch.Validate(d.value) == nil
}

// shortcutAgrees checks one document: the package's answer equals the
// library's, and quick, where it decides (it only ever accepts), decides
// as the library does, under the schema as written and under the
// envelope decided for the object's type.
func shortcutAgrees(t testing.TB, d kindedDoc) (valid bool) {
	t.Helper()
	sch, lib := fullVerdict(t, d)
	var got error
	if d.kind == KindProfileTerms {
		got = ValidateProfileTerms(d.profile, d.value)
	} else {
		got = Validate(d.kind, d.value)
	}
	if (got == nil) != lib {
		t.Errorf("%s: the package says %v, the library %v: %s", d.where, verdict(got), verdictOf(lib), show(d.value))
	}
	if accepts(sch, d.value) && !lib {
		t.Errorf("%s: quick accepts what the library refuses: %s", d.where, show(d.value))
	}
	if m, ok := d.value.(map[string]any); ok && d.kind == KindEnvelope {
		typ, _ := m["object_type"].(string)
		if ds := compiled().dispatched.schema(typ); ds != nil && accepts(ds, d.value) && !lib {
			t.Errorf("%s: quick accepts under the %s envelope what the library refuses: %s", d.where, typ, show(d.value))
		}
	}
	return lib
}

func verdictOf(ok bool) string {
	if ok {
		return "valid"
	}
	return "invalid"
}

// withTerms adds doc, and its payload.terms.profile_terms when its
// profile is registered, to out.
func withTerms(out []kindedDoc, d kindedDoc) []kindedDoc {
	out = append(out, d)
	if d.kind != KindEnvelope {
		return out
	}
	if terms, ok := termsOf(d.value); ok && ProfileKnown(terms["profile"].(string)) {
		out = append(out, kindedDoc{d.where + "/payload/terms/profile_terms", KindProfileTerms, terms["profile"].(string), terms["profile_terms"]})
	}
	return out
}

// publishedDocuments are the documents of every fixture of the published
// manifest (positive and negative), split as the reference runner splits
// them (documentsOf), with the verdict the manifest expects of the whole
// fixture.
func publishedDocuments(t *testing.T) (docs []kindedDoc, fixtures int) {
	t.Helper()
	spec := specDir(t)
	manifest, err := readJSON(filepath.Join(spec, "conformance", "manifest-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"positive", "negative"} {
		entries, _ := manifest.(map[string]any)[group].([]any)
		for _, e := range entries {
			m, _ := e.(map[string]any)
			path, _ := m["fixture"].(string)
			kind, _ := m["kind"].(string)
			raw, err := readJSON(filepath.Join(spec, "conformance", "fixtures", "v0.1", path))
			if err != nil {
				t.Fatal(err)
			}
			fixtures++
			for _, d := range documentsOf(t, listedFixture{path: path, kind: kind}, raw) {
				docs = withTerms(docs, kindedDoc{group + " " + d.where, d.kind, "", d.value})
			}
		}
	}
	return docs, fixtures
}

// ownDocuments are party's own documents: this package's offer, mandate,
// grade and freight terms, and every object of the two-party
// walkthrough's record as both parties hold it (internal/verify/testdata).
func ownDocuments(t testing.TB) []kindedDoc {
	t.Helper()
	var docs []kindedDoc
	for _, d := range []kindedDoc{
		{"offerJSON", KindEnvelope, "", decode(t, offerJSON)},
		{"mandateJSON", KindMandate, "", decode(t, mandateJSON)},
		{"gradeJSON", KindGrade, "", decode(t, gradeJSON)},
		{"freight terms", KindProfileTerms, "a202-profile/freight-spot/0.1", decode(t, `{
		  "lane": {"origin_country": "DE", "destination_country": "PL"},
		  "collection_window": {"earliest": "2026-09-01T08:00:00+02:00", "latest": "2026-09-01T16:00:00+02:00", "time_zone": "Europe/Berlin"},
		  "equipment": "curtainsider",
		  "liability": {"regime": "CMR", "cap": {"currency": "EUR", "amount": "25000.00"}}
		}`)},
	} {
		docs = withTerms(docs, d)
	}
	record := filepath.Join("..", "verify", "testdata", "two-party")
	files, err := filepath.Glob(filepath.Join(record, "*", "objects", "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("the walkthrough's record at %s: %d objects, %v", record, len(files), err)
	}
	slices.Sort(files)
	for _, f := range files {
		v, err := readJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(record, f)
		docs = withTerms(docs, kindedDoc{rel, KindEnvelope, "", v})
	}
	return docs
}

// Structural mutations of a document, each at one node: a member removed,
// a value made null, made each other JSON type, made a long string (past
// any maxLength, a pattern's whole line), or an extra member added to an
// object.
const (
	opRemove = iota
	opNull
	opString
	opNumber
	opBool
	opObject
	opArray
	opLong
	opExtra
	opCount
)

// longString is the long string opLong writes.
var longString = strings.Repeat("x", 5000)

// mutateAt applies op to the n-th node (in a walk with sorted member
// names) of a copy of doc, and reports whether there was such a node for
// op to change.
func mutateAt(doc any, n, op int) (any, bool) {
	cp := deepCopy(doc)
	i := 0
	done := false
	var walk func(v any, set func(any), remove func())
	walk = func(v any, set func(any), remove func()) {
		if done {
			return
		}
		if i == n {
			done = true
			switch op {
			case opRemove:
				if remove == nil {
					done = false
				} else {
					remove()
				}
			case opNull:
				set(nil)
			case opString:
				set("x")
			case opNumber:
				set(json.Number("7"))
			case opBool:
				set(true)
			case opObject:
				set(map[string]any{})
			case opArray:
				set([]any{})
			case opLong:
				set(longString)
			case opExtra:
				if m, ok := v.(map[string]any); ok {
					m["zz_extra"] = "x"
				} else {
					done = false
				}
			}
			i++
			return
		}
		i++
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k], func(nv any) { x[k] = nv }, func() { delete(x, k) })
			}
		case []any:
			for j := range x {
				walk(x[j], func(nv any) { x[j] = nv }, nil)
			}
		}
	}
	var root any = cp
	walk(cp, func(nv any) { root = nv }, nil)
	return root, done
}

// nodes counts the nodes mutateAt numbers.
func nodes(v any) int {
	n := 1
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += nodes(e)
		}
	case []any:
		for _, e := range x {
			n += nodes(e)
		}
	}
	return n
}

// TestShortcutAgreesWithFullValidator: on every document of every
// published fixture and every profile_terms among them, on party's own
// documents, and on every structural mutation of this package's
// documents and of one walkthrough object of each type (those without the
// type changes), the package's
// verdict is the library's with the schema as written.
func TestShortcutAgreesWithFullValidator(t *testing.T) {
	t.Parallel()
	published, fixtures := publishedDocuments(t)
	if fixtures != 148 {
		t.Fatalf("%d fixtures in the manifest, want 148", fixtures)
	}
	own := ownDocuments(t)
	valid, invalid := 0, 0
	tally := func(ok bool) {
		if ok {
			valid++
		} else {
			invalid++
		}
	}
	for _, d := range published {
		tally(shortcutAgrees(t, d))
	}
	t.Logf("published: %d documents of %d fixtures, %d valid, %d invalid", len(published), fixtures, valid, invalid)
	if valid < 100 || invalid < 50 {
		t.Fatalf("published: %d valid, %d invalid: the fixtures were not split as the manifest says", valid, invalid)
	}
	seenType := map[string]bool{}
	mutated := 0
	for i, d := range own {
		if !shortcutAgrees(t, d) {
			t.Errorf("%s: one of our own valid documents is refused", d.where)
		}
		m, _ := d.value.(map[string]any)
		typ, _ := m["object_type"].(string)
		if i >= 5 && (d.kind != KindEnvelope || seenType[typ]) {
			continue // mutations of one object per type
		}
		seenType[typ] = true
		stride := 1
		if raceEnabled {
			// Under -race a sixth of the nodes: the comparison is
			// single-threaded, and the whole of it runs in the plain run.
			stride = 6
		}
		for n := 0; n < nodes(d.value); n += stride {
			for op := range opCount {
				if i >= 5 && op >= opNumber && op <= opArray {
					continue // the type changes on this package's documents only
				}
				if v, ok := mutateAt(d.value, n, op); ok {
					mutated++
					tally(shortcutAgrees(t, kindedDoc{fmt.Sprintf("%s node %d op %d", d.where, n, op), d.kind, d.profile, v}))
				}
			}
		}
	}
	t.Logf("own: %d documents and %d mutations; %d valid, %d invalid in all", len(own), mutated, valid, invalid)
	least := 2000
	if raceEnabled {
		least = 300
	}
	if mutated < least {
		t.Fatalf("only %d mutations checked", mutated)
	}
}

// FuzzShortcutVsFullValidator: a document (seeded with the published
// fixtures' documents and party's own) with a structural mutation at a
// fuzzed node (mutateAt), or none, and its bytes further fuzzed: the
// package's verdict is the library's.
func FuzzShortcutVsFullValidator(f *testing.F) {
	kinds := []Kind{KindEnvelope, KindMandate, KindGrade}
	for i, d := range ownDocuments(f) {
		if d.kind == KindProfileTerms {
			continue
		}
		b, err := json.Marshal(d.value)
		if err != nil {
			f.Fatal(err)
		}
		k := byte(slices.Index(kinds, d.kind))
		f.Add(k, b, uint16(0), byte(opCount)) // as written
		f.Add(k, b, uint16(i*7), byte(i%opCount))
	}
	s := compiled()
	f.Fuzz(func(t *testing.T, kind byte, data []byte, node uint16, op byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var doc any
		if dec.Decode(&doc) != nil || dec.More() {
			return
		}
		if int(op) < opCount {
			var ok bool
			if doc, ok = mutateAt(doc, int(node), int(op)); !ok {
				return
			}
		}
		d := kindedDoc{"fuzzed", kinds[int(kind)%len(kinds)], "", doc}
		shortcutAgrees(t, d)
		// And every profile's terms, as any document can be.
		for id, sch := range s.profiles {
			lib := sch.Validate(doc) == nil
			if got := ValidateProfileTerms(id, doc); (got == nil) != lib {
				t.Errorf("%s: the package says %v, the library %v: %s", id, verdict(got), verdictOf(lib), strconv.Quote(show(doc)))
			}
		}
	})
}
