package gate_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
)

// expectation is one fixture's expected outcome, as the manifest
// declares it.
type expectation struct {
	Fixture string
	Kind    string
	Valid   bool
	Code    reason.Code // "" when the manifest declares no code
}

type manifestEntry struct {
	Fixture    string  `json:"fixture"`
	Kind       string  `json:"kind"`
	Expect     string  `json:"expect"`
	ReasonCode *string `json:"reason_code"`
}

// loadManifest reads conformance/manifest-v0.1.json.
func loadManifest(t *testing.T) map[string]expectation {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.SpecDir(t), "conformance", "manifest-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Positive []manifestEntry `json:"positive"`
		Negative []manifestEntry `json:"negative"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	out := map[string]expectation{}
	for _, e := range m.Positive {
		out[e.Fixture] = expectation{Fixture: e.Fixture, Kind: e.Kind, Valid: true}
	}
	for _, e := range m.Negative {
		x := expectation{Fixture: e.Fixture, Kind: e.Kind}
		if e.Expect != "invalid" {
			t.Fatalf("manifest negative %s expects %q", e.Fixture, e.Expect)
		}
		if e.ReasonCode != nil {
			x.Code = reason.Code(*e.ReasonCode)
		}
		out[e.Fixture] = x
	}
	return out
}

var countLine = regexp.MustCompile(`^COUNT: (\d+) fixtures`)

// loadScope reads a fixtures-<scope>.txt partition and checks every row
// against the manifest, so that the expectations used are the manifest's.
func loadScope(t *testing.T, name string) []expectation {
	t.Helper()
	manifest := loadManifest(t)
	f, err := os.Open(spectest.SharedFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []expectation
	declared := -1
	var bad []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := countLine.FindStringSubmatch(line); m != nil {
			declared, _ = strconv.Atoi(m[1])
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) != 6 {
			continue
		}
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		row := expectation{Fixture: cols[0], Kind: cols[1], Valid: cols[2] == "valid"}
		if strings.HasPrefix(cols[3], "A202-") {
			row.Code = reason.Code(cols[3])
		}
		m, ok := manifest[row.Fixture]
		switch {
		case !ok:
			bad = append(bad, row.Fixture+": not in the manifest")
		case m != row:
			bad = append(bad, fmt.Sprintf("%s: list says %+v, manifest says %+v", row.Fixture, row, m))
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%s disagrees with the manifest:\n  %s", name, strings.Join(bad, "\n  "))
	}
	if declared != len(rows) {
		t.Fatalf("%s declares %d fixtures and lists %d", name, declared, len(rows))
	}
	return rows
}

// disagreement says how a judgment differs from its expectation, or "".
func disagreement(x expectation, j gate.Judgment) string {
	switch {
	case x.Valid && !j.Accepted():
		return fmt.Sprintf("expected accepted, refused %v: %s", j.Codes, firstProblems(j, 3))
	case !x.Valid && j.Accepted():
		return "expected refused, accepted"
	case !x.Valid && x.Code != "" && !j.Has(x.Code):
		return fmt.Sprintf("expected %s among %v: %s", x.Code, j.Codes, firstProblems(j, 3))
	}
	return ""
}

func firstProblems(j gate.Judgment, n int) string {
	var out []string
	for i, p := range j.Problems {
		if i == n {
			out = append(out, "…")
			break
		}
		out = append(out, p.String())
	}
	return strings.Join(out, "; ")
}

// judgeFixture judges a fixture as `party gate` does: gate.File, with the
// verifier as the judge of bundle fixtures.
func judgeFixture(t *testing.T, rel string) gate.Judgment {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.FixturesDir(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return gate.File(data, gate.Options{JudgeSet: verify.JudgeSet})
}

// TestBilateralFixtures runs every fixture of the bilateral scope through
// gate.File, bundles judged by verify.JudgeSet: every valid one accepted,
// every invalid one refused, with the manifest's declared code among the
// codes when it declares one.
func TestBilateralFixtures(t *testing.T) {
	rows := loadScope(t, "fixtures-bilateral.txt")
	var bad []string
	for _, x := range rows {
		if d := disagreement(x, judgeFixture(t, x.Fixture)); d != "" {
			bad = append(bad, x.Fixture+": "+d)
		}
	}
	t.Logf("bilateral fixtures: %d/%d agree with the manifest", len(rows)-len(bad), len(rows))
	if len(bad) > 0 {
		t.Errorf("%d of %d bilateral fixtures disagree with the manifest:\n  %s", len(bad), len(rows), strings.Join(bad, "\n  "))
	}
}

// TestBilateralFixturesWithoutSchemaLayer repeats the run with the schema
// layer off, for the objects of a bundle too (verify.JudgeSet judges each
// through gate.Envelope): every declared code, and every refusal the
// manifest declares without a code, must come from a normative check.
func TestBilateralFixturesWithoutSchemaLayer(t *testing.T) {
	rows := loadScope(t, "fixtures-bilateral.txt")
	gate.WithoutSchemaLayer(t)
	var bad []string
	for _, x := range rows {
		if d := disagreement(x, judgeFixture(t, x.Fixture)); d != "" {
			bad = append(bad, x.Fixture+": "+d)
		}
	}
	if len(bad) > 0 {
		t.Errorf("without the schema layer, %d of %d bilateral fixtures disagree with the manifest:\n  %s", len(bad), len(rows), strings.Join(bad, "\n  "))
	}
}

// TestOperatedFixtures runs the operated scope's fixtures, which party
// does not claim, and reports how many agree; it fails only if a file
// cannot be judged at all.
func TestOperatedFixtures(t *testing.T) {
	rows := loadScope(t, "fixtures-operated.txt")
	agree := 0
	for _, x := range rows {
		d := disagreement(x, judgeFixture(t, x.Fixture))
		if d == "" {
			agree++
		} else {
			t.Logf("operated (out of scope) %s: %s", x.Fixture, d)
		}
	}
	t.Logf("operated fixtures: %d/%d agree with the manifest (out of scope, reported only)", agree, len(rows))
}

// TestBundleNeedsASetJudge: package gate judges no set itself. Without
// Options.JudgeSet a bundle fixture is refused, with no code and a problem
// that names the judge to pass; with it, the verifier's judgment is the
// bundle's.
func TestBundleNeedsASetJudge(t *testing.T) {
	const rel = "valid-agreement-direct-formation.json"
	data, err := os.ReadFile(filepath.Join(spectest.FixturesDir(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	j := gate.File(data, gate.Options{})
	if j.Accepted() || j.Kind != gate.KindBundle || len(j.Codes) != 0 || len(j.Problems) != 1 ||
		!strings.Contains(j.Problems[0].Detail, "verify.JudgeSet") {
		t.Errorf("a bundle without a set judge: %s %s %v %s", j.Kind, j.Outcome, j.Codes, firstProblems(j, 3))
	}
	if j := gate.File(data, gate.Options{JudgeSet: verify.JudgeSet}); !j.Accepted() || j.Kind != gate.KindBundle {
		t.Errorf("with verify.JudgeSet: %s %s %v %s", j.Kind, j.Outcome, j.Codes, firstProblems(j, 3))
	}
	called := false
	judge := func(objects []map[string]any, ctx gate.SetContext) gate.Judgment {
		called = true
		if len(objects) == 0 || ctx.RulesVersion != "1.3" {
			t.Errorf("the judge got %d objects under rules %q", len(objects), ctx.RulesVersion)
		}
		return gate.Judgment{Kind: gate.KindBundle, Outcome: gate.Refused, Problems: []gate.Problem{{Code: reason.EvidenceChainGap, Detail: "x"}}}
	}
	if j := gate.File(data, gate.Options{JudgeSet: judge}); !called || !j.Has(reason.EvidenceChainGap) {
		t.Errorf("the injected judge was not the bundle's: called %v, %v", called, j.Codes)
	}
}
