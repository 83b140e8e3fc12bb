package cli_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/partyd/party/internal/spectest"
)

var update = flag.Bool("update", false, "rewrite the goldens under testdata from what the commands print")

// TestVerifyJSONGolden pins `party verify --json`, the report other tools
// read (decisions.md 16), on the published reference record: every check,
// its outcome, code and subject, in its fixed order, read at a fixed time.
// A change to the report's shape or to any verdict on the reference
// record shows here as a diff; if it is meant, rerun with -update and
// review it.
func TestVerifyJSONGolden(t *testing.T) {
	t.Parallel()
	dir := spectest.ReferenceVectors(t)
	out, errOut, code := runParty(t, "", "verify", "--json", "--at", "2026-06-01T00:00:00Z", dir)
	if code != 0 {
		t.Fatalf("party verify: exit %d\n%s", code, errOut)
	}
	// Indented, so that a change reads as a diff of lines.
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("the report is not JSON: %v", err)
	}
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "verify-reference.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w []byte
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if !bytes.Equal(g, w) {
				t.Fatalf("party verify --json changed at line %d:\n- %s\n+ %s\nif that is meant, rerun with -update and review the diff", i+1, w, g)
			}
		}
	}
}
