package schema

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/partyd/party/internal/spectest"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The published A202 v0.1 data (schemas and conformance fixtures) is a test
// input only. It is read from A202_SPEC_DIR, or from the shared checkout
// three levels above this package. Nothing from it is compiled into party.

// specDir returns the published spec directory, or skips the test when it
// is absent. Under CI=true absence is a failure: a CI run that silently
// skipped the comparison would prove nothing.
func specDir(t testing.TB) string {
	t.Helper()
	// spectest resolves A202_SPEC_DIR from the repository root (as .ci/run
	// and the README write it), skips when the data is absent, and fails
	// under CI=true.
	return spectest.SpecDir(t)
}

// fixtureListDir returns where fixtures-bilateral.txt and
// fixtures-operated.txt live: A202_FIXTURE_LISTS, else next to the spec
// directory.
func fixtureListDir(spec string) string {
	if d := os.Getenv("A202_FIXTURE_LISTS"); d != "" {
		return d
	}
	return filepath.Dir(filepath.Clean(spec))
}

// published holds the published schemas compiled with the same library,
// mirroring how the reference runner loads them: every file registered
// under its own $id, format assertions on, and profiles keyed by file name.
type published struct {
	kernel, mandate, grade *jsonschema.Schema
	profiles               map[string]*jsonschema.Schema
}

var (
	publishedOnce sync.Once
	publishedSet  *published
	publishedErr  error
)

func loadPublished(t testing.TB, spec string) *published {
	t.Helper()
	publishedOnce.Do(func() { publishedSet, publishedErr = compilePublished(spec) })
	if publishedErr != nil {
		t.Fatalf("compiling the published schemas: %v", publishedErr)
	}
	return publishedSet
}

func compilePublished(spec string) (*published, error) {
	root := filepath.Join(spec, "schemas", "v0.1")
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, _ := filepath.Glob(filepath.Join(root, "*.json"))
	prof, _ := filepath.Glob(filepath.Join(root, "profiles", "*.schema.json"))
	ids := map[string]string{}
	for _, f := range append(files, prof...) {
		doc, err := readJSON(f)
		if err != nil {
			return nil, err
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			return nil, fmt.Errorf("%s has no $id", f)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, err
		}
		ids[f] = id
	}
	p := &published{profiles: map[string]*jsonschema.Schema{}}
	var err error
	if p.kernel, err = c.Compile(ids[filepath.Join(root, "commercial-kernel.schema.json")]); err != nil {
		return nil, err
	}
	if p.mandate, err = c.Compile(ids[filepath.Join(root, "commercial-mandate.schema.json")]); err != nil {
		return nil, err
	}
	if p.grade, err = c.Compile(ids[filepath.Join(root, "conformance-grade.schema.json")]); err != nil {
		return nil, err
	}
	for _, f := range prof {
		stem := strings.TrimSuffix(filepath.Base(f), ".schema.json") // calibration-service-0.1
		i := strings.LastIndex(stem, "-")
		sch, err := c.Compile(ids[f])
		if err != nil {
			return nil, err
		}
		p.profiles["a202-profile/"+stem[:i]+"/"+stem[i+1:]] = sch
	}
	return p, nil
}

func readJSON(path string) (any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// listedFixture is one row of fixtures-bilateral.txt / fixtures-operated.txt.
type listedFixture struct {
	path, kind, outcome, code, family, layer, scope string
}

func readFixtureList(t *testing.T, path, scope string) []listedFixture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		msg := fmt.Sprintf("fixture list %s not readable (set A202_FIXTURE_LISTS): %v", path, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	defer f.Close()
	var out []listedFixture
	declared := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "COUNT:") {
			fmt.Sscanf(line, "COUNT: %d", &declared)
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") || !strings.Contains(line, "|") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) != 6 {
			t.Fatalf("%s: malformed row %q", path, line)
		}
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		out = append(out, listedFixture{cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], scope})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if declared != len(out) {
		t.Fatalf("%s: %d rows, but its COUNT line says %d", path, len(out), declared)
	}
	return out
}

// document is one thing a fixture asks a schema about.
type document struct {
	where string // fixture path + JSON pointer
	kind  Kind
	value any
}

// documentsOf splits a fixture into the documents the reference runner
// validates, by manifest kind (manifest fixture_kinds).
func documentsOf(t *testing.T, fx listedFixture, doc any) []document {
	t.Helper()
	m, _ := doc.(map[string]any)
	switch fx.kind {
	case "kernel":
		return []document{{fx.path, KindEnvelope, doc}}
	case "mandate":
		return []document{{fx.path, KindMandate, doc}}
	case "grade":
		return []document{{fx.path, KindGrade, doc}}
	case "mandate_chain":
		var out []document
		for _, part := range []string{"parent", "child"} {
			v, ok := m[part]
			if !ok {
				v = map[string]any{} // as the runner does
			}
			out = append(out, document{fx.path + "#/" + part, KindMandate, v})
		}
		return out
	case "bundle":
		objs, _ := m["objects"].([]any)
		var out []document
		for i, o := range objs {
			out = append(out, document{fmt.Sprintf("%s#/objects/%d", fx.path, i), KindEnvelope, o})
		}
		return out
	case "declaration":
		return nil // a carrier declaration has no schema
	}
	t.Fatalf("%s: unknown fixture kind %q", fx.path, fx.kind)
	return nil
}

// explainedDisagreements lists documents on which party's schemas are
// deliberately stricter or looser than the published ones. Each entry must
// say which spec section makes party's answer the right one. Keys are
// document locations as printed by the test.
var explainedDisagreements = map[string]string{}

// TestPublishedFixturesAgree validates every document of every listed
// fixture against party's schemas and the published ones and fails on any
// disagreement not explained above. It also checks profile_terms of every
// offer and agreement against both profile registries.
func TestPublishedFixturesAgree(t *testing.T) {
	spec := specDir(t)
	pub := loadPublished(t, spec)
	lists := fixtureListDir(spec)
	bilateral := readFixtureList(t, filepath.Join(lists, "fixtures-bilateral.txt"), "bilateral")
	operated := readFixtureList(t, filepath.Join(lists, "fixtures-operated.txt"), "operated")
	if len(bilateral) != 118 || len(operated) != 30 {
		t.Fatalf("expected 118 bilateral and 30 operated fixtures, got %d and %d", len(bilateral), len(operated))
	}

	// The lists are a partition of the manifest (RSC §4.3, §5.3); a row
	// whose kind differs from the manifest's would be validated wrongly.
	manifest, err := readJSON(filepath.Join(spec, "conformance", "manifest-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	manifestKinds := map[string]string{}
	for _, group := range []string{"positive", "negative"} {
		entries, _ := manifest.(map[string]any)[group].([]any)
		for _, e := range entries {
			m, _ := e.(map[string]any)
			path, _ := m["fixture"].(string)
			k, _ := m["kind"].(string)
			manifestKinds[path] = k
		}
	}
	for _, fx := range append(bilateral, operated...) {
		k, ok := manifestKinds[fx.path]
		if !ok || k != fx.kind {
			t.Errorf("%s: listed as kind %q, manifest says %q", fx.path, fx.kind, k)
		}
		delete(manifestKinds, fx.path)
	}
	if len(manifestKinds) != 0 {
		t.Errorf("manifest fixtures in neither list: %v", manifestKinds)
	}

	type tally struct{ agree, bothRefuse, disagree, explained, profileAgree, profileDisagree int }
	tallies := map[string]*tally{"bilateral": {}, "operated": {}}
	var problems []string

	for _, fx := range append(bilateral, operated...) {
		tl := tallies[fx.scope]
		raw, err := readJSON(filepath.Join(spec, "conformance", "fixtures", "v0.1", fx.path))
		if err != nil {
			t.Fatal(err)
		}
		docs := documentsOf(t, fx, raw)
		oursRefusedAny := false
		for _, d := range docs {
			oursErr := Validate(d.kind, d.value)
			var theirs *jsonschema.Schema
			switch d.kind {
			case KindEnvelope:
				theirs = pub.kernel
			case KindMandate:
				theirs = pub.mandate
			case KindGrade:
				theirs = pub.grade
			}
			theirsErr := theirs.Validate(d.value)
			if oursErr != nil {
				oursRefusedAny = true
			}
			if (oursErr == nil) == (theirsErr == nil) {
				tl.agree++
				if oursErr != nil {
					tl.bothRefuse++
				}
			} else if why, ok := explainedDisagreements[d.where]; ok {
				tl.explained++
				t.Logf("explained disagreement %s: %s", d.where, why)
			} else {
				tl.disagree++
				problems = append(problems, fmt.Sprintf("[%s] %s: ours=%s published=%s", fx.scope, d.where, verdict(oursErr), verdict(theirsErr)))
			}
			if fx.outcome == "valid" && oursErr != nil {
				problems = append(problems, fmt.Sprintf("[%s] %s: positive fixture refused by our schema: %v", fx.scope, d.where, oursErr))
			}

			// The profile layer: resolve terms.profile and validate
			// profile_terms on both sides, comparing the three outcomes
			// unknown / valid / invalid.
			if d.kind != KindEnvelope {
				continue
			}
			terms, ok := termsOf(d.value)
			if !ok {
				continue
			}
			ours := profileVerdict(ValidateTerms(terms))
			theirsV := "unknown"
			if sch, ok := pub.profiles[terms["profile"].(string)]; ok {
				theirsV = verdict(sch.Validate(terms["profile_terms"]))
			}
			if ours == theirsV {
				tl.profileAgree++
			} else {
				tl.profileDisagree++
				problems = append(problems, fmt.Sprintf("[%s] %s/payload/terms: profile layer ours=%s published=%s", fx.scope, d.where, ours, theirsV))
			}
		}
		// A fixture the reference runner refuses by schema must be refused
		// by our schema too, otherwise the gate would never see it.
		if strings.HasPrefix(fx.layer, "schema") && !oursRefusedAny {
			problems = append(problems, fmt.Sprintf("[%s] %s: runner layer %q but our schemas accept every document", fx.scope, fx.path, fx.layer))
		}
	}

	for _, scope := range []string{"bilateral", "operated"} {
		tl := tallies[scope]
		t.Logf("%s: %d documents agree (%d of them refused by both), %d disagree, %d explained; profile_terms: %d agree, %d disagree",
			scope, tl.agree, tl.bothRefuse, tl.disagree, tl.explained, tl.profileAgree, tl.profileDisagree)
	}
	if len(explainedDisagreements) > tallies["bilateral"].explained+tallies["operated"].explained {
		t.Errorf("explainedDisagreements has entries that no longer disagree; remove them")
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

func verdict(err error) string {
	if err == nil {
		return "valid"
	}
	return "invalid"
}

func profileVerdict(err error) string {
	if err == nil {
		return "valid"
	}
	if errors.Is(err, ErrUnknownProfile) {
		return "unknown"
	}
	return "invalid"
}

// termsOf returns payload.terms when it has the shape the profile layer
// reads: a string profile and a profile_terms member.
func termsOf(doc any) (map[string]any, bool) {
	m, _ := doc.(map[string]any)
	p, _ := m["payload"].(map[string]any)
	terms, _ := p["terms"].(map[string]any)
	if terms == nil {
		return nil, false
	}
	if _, ok := terms["profile"].(string); !ok {
		return nil, false
	}
	if _, ok := terms["profile_terms"]; !ok {
		return nil, false
	}
	return terms, true
}
