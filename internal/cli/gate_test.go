package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/spectest"
)

// manifestExpectations reads conformance/manifest-v0.1.json: fixture path
// → "" for a positive fixture, the declared code (or "-" for none) for a
// negative one.
func manifestExpectations(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.SpecDir(t), "conformance", "manifest-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Positive []struct{ Fixture string } `json:"positive"`
		Negative []struct {
			Fixture    string  `json:"fixture"`
			ReasonCode *string `json:"reason_code"`
		} `json:"negative"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range m.Positive {
		out[e.Fixture] = ""
	}
	for _, e := range m.Negative {
		out[e.Fixture] = "-"
		if e.ReasonCode != nil {
			out[e.Fixture] = *e.ReasonCode
		}
	}
	return out
}

// bilateralFixtures lists the fixture paths of fixtures-bilateral.txt.
func bilateralFixtures(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(spectest.SharedFile(t, "fixtures-bilateral.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Count(line, "|") != 5 {
			continue
		}
		out = append(out, strings.TrimSpace(strings.SplitN(line, "|", 2)[0]))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGateCLIOverBilateralFixtures runs "party gate --json" once over
// every bilateral fixture and checks each output line against the
// manifest.
func TestGateCLIOverBilateralFixtures(t *testing.T) {
	t.Parallel()
	want := manifestExpectations(t)
	fixtures := bilateralFixtures(t)
	if len(fixtures) != 118 {
		t.Fatalf("fixtures-bilateral.txt lists %d fixtures, expected 118", len(fixtures))
	}
	dir := spectest.FixturesDir(t)
	args := []string{"gate", "--json"}
	byPath := map[string]string{}
	for _, rel := range fixtures {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		args = append(args, p)
		byPath[p] = rel
	}
	var stdout, stderr bytes.Buffer
	status := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
	if status != 1 {
		t.Errorf("exit status %d, want 1 (negative fixtures are refused); stderr: %s", status, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}

	var bad []string
	seen := 0
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var line struct {
			Path        string   `json:"path"`
			Outcome     string   `json:"outcome"`
			ReasonCodes []string `json:"reason_codes"`
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatalf("output line %d: %v", seen+1, err)
		}
		seen++
		rel, ok := byPath[line.Path]
		if !ok {
			bad = append(bad, "unexpected path "+line.Path)
			continue
		}
		expected, ok := want[rel]
		switch {
		case !ok:
			bad = append(bad, rel+": not in the manifest")
		case expected == "" && line.Outcome != "accepted":
			bad = append(bad, rel+": refused "+strings.Join(line.ReasonCodes, ",")+", want accepted")
		case expected != "" && line.Outcome != "refused":
			bad = append(bad, rel+": accepted, want refused")
		case expected != "" && expected != "-" && !contains(line.ReasonCodes, expected):
			bad = append(bad, rel+": codes "+strings.Join(line.ReasonCodes, ",")+" lack "+expected)
		}
	}
	if seen != len(fixtures) {
		t.Errorf("%d output lines for %d fixtures", seen, len(fixtures))
	}
	if len(bad) > 0 {
		t.Errorf("%d fixtures disagree with the manifest:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
