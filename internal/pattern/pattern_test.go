package pattern

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/partyd/party/schemas"
)

// codePatterns are expressions the code itself compiles, and a few shapes
// chosen to sit at the edges of the fast form.
var codePatterns = []string{
	`^[a-z]{3}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`,
	`^[a-f0-9]{64}$`,
	`^[A-Z]{3}$`,
	`^[A-Z0-9]{2,3}$`,
	`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`,
	`^txn_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`,
	`^rail_[a-z0-9][a-z0-9_]{2,63}$`,
	`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`,
	`^a202-profile/[a-z0-9-]+/[0-9]+\.[0-9]+$`,
	// Edges: a variable run the next item could start (regexp only), a
	// run followed by an optional item (regexp only), unbounded runs,
	// single optional bytes, a literal after a run, case folding, no
	// anchors, non-ASCII.
	`^a*a$`,
	`^[a-z]{1,3}[a-z0-9]$`,
	`^[a-z]+[0-9]?$`,
	`^[a-z]+_[0-9]*$`,
	`^x?y$`,
	`^[0-9]{2,}$`,
	`^(?i)abc$`,
	`^[a-z]{2}`,
	`[a-z]{2}$`,
	`^é[a-z]$`,
	`^[a-zé]{2}$`,
	`^$`,
	`^a{0}b$`,
}

// schemaPatterns returns every "pattern" of the schemas.
func schemaPatterns(t testing.TB) []string {
	t.Helper()
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["pattern"].(string); ok {
				out = append(out, p)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	err := fs.WalkDir(schemas.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(schemas.FS, path)
		if err != nil {
			return err
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			return err
		}
		walk(doc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 40 {
		t.Fatalf("only %d patterns in the schemas", len(out))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func allPatterns(t testing.TB) []string {
	return append(schemaPatterns(t), codePatterns...)
}

// inputs are strings built from the bytes a pattern names, at lengths
// around its bounds, and their near misses.
func inputs(expr string) []string {
	alphabet := "aZ09_-./:+T\x00é\xff "
	for _, r := range expr {
		if r < 128 && !strings.ContainsRune(alphabet, r) {
			alphabet += string(r)
		}
	}
	out := []string{"", "off_abc", "off_ab", "txn_a8d3a9a6cd26ed3b4e2034d5", strings.Repeat("a", 64), strings.Repeat("f", 63), "2026-12-05T15:29:56Z", "a202-profile/freight-spot/0.1", "EUR", "EU", "0.1", "rail_sepa"}
	for _, a := range alphabet {
		for _, n := range []int{1, 2, 3, 4, 5, 63, 64, 65, 127, 128, 129, 131, 132} {
			out = append(out, strings.Repeat(string(a), n))
		}
	}
	var more []string
	for _, s := range out {
		more = append(more, "off_"+s, "off_A"+s, "txn_"+s, s+"\n", "x"+s, s+"a1")
	}
	return append(out, more...)
}

// TestSameAsRegexp: for every pattern of the schemas and of the code, the
// answer is regexp's, on strings around each pattern's bounds.
func TestSameAsRegexp(t *testing.T) {
	t.Parallel()
	for _, expr := range allPatterns(t) {
		p := MustCompile(expr)
		re := regexp.MustCompile(expr)
		for _, s := range inputs(expr) {
			if got, want := p.MatchString(s), re.MatchString(s); got != want {
				t.Errorf("%s (fast %v) on %q: %v, regexp %v", expr, p.Fast(), s, got, want)
			}
		}
	}
}

// TestFastForm: the identifier, hash and code patterns take the fast form;
// those that need backtracking, case folding, or more than ASCII do not.
func TestFastForm(t *testing.T) {
	t.Parallel()
	for expr, fast := range map[string]bool{
		`^off_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`:      true,
		`^[a-z]{3}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`: true,
		`^[0-9a-f]{64}$`:                     true,
		`^[A-Z]{3}$`:                         true,
		`^[a-z]+_[0-9]*$`:                    true,
		`^a*a$`:                              false,
		`^[a-z]{1,3}[a-z0-9]$`:               false,
		`^[a-z]+[0-9]?$`:                     false,
		`^(?i)abc$`:                          false,
		`^[a-zé]{2}$`:                        false,
		`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`: false,
		`^[a-z]{2}`:                          false,
	} {
		if got := MustCompile(expr).Fast(); got != fast {
			t.Errorf("%s: fast %v, want %v", expr, got, fast)
		}
	}
	n := 0
	for _, expr := range schemaPatterns(t) {
		if MustCompile(expr).Fast() {
			n++
		}
	}
	if n < 30 {
		t.Errorf("only %d schema patterns take the fast form", n)
	}
}

// FuzzSame: any string, any pattern of the schemas or the code: the same
// answer as regexp.
func FuzzSame(f *testing.F) {
	exprs := allPatterns(f)
	for i := range exprs {
		f.Add(uint16(i), "off_abc")
		f.Add(uint16(i), strings.Repeat("a", 64))
	}
	ps := make([]*Pattern, len(exprs))
	res := make([]*regexp.Regexp, len(exprs))
	for i, e := range exprs {
		ps[i], res[i] = MustCompile(e), regexp.MustCompile(e)
	}
	f.Fuzz(func(t *testing.T, i uint16, s string) {
		k := int(i) % len(exprs)
		if got, want := ps[k].MatchString(s), res[k].MatchString(s); got != want {
			t.Fatalf("%s on %q: %v, regexp %v", exprs[k], s, got, want)
		}
	})
}

func BenchmarkIdentifier(b *testing.B) {
	const expr = `^off_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`
	const id = "off_98818d9b8ab1cdc211eb5ee3"
	b.Run("fast", func(b *testing.B) {
		p := MustCompile(expr)
		for b.Loop() {
			p.MatchString(id)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		re := regexp.MustCompile(expr)
		for b.Loop() {
			re.MatchString(id)
		}
	})
}
