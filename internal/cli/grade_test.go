package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/spectest"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGradeIssueAboutLiveCounterparty: party grade issue --about runs the
// published bilateral families against the counterparty's live peer
// listener and signs a grade, which the counterparty verifies under the
// pinned principal key and refuses once a byte of it changed; a mandate's
// minimum-grade policy is set and read back.
func TestGradeIssueAboutLiveCounterparty(t *testing.T) {
	spec := spectest.SpecDir(t)
	northstar := orgtest.New(t, "org_northstar", time.Now, true)
	delta := orgtest.New(t, "org_delta", time.Now, true)
	orgtest.Peer(t, northstar, delta)
	delta.Mux.Handle(grade.ProbePath, grade.ProbeHandler(delta.Org.Peers, nil))

	file := filepath.Join(t.TempDir(), "grade.json")
	code, out, errs := run(t, "grade", "issue", "--dir", northstar.Dir, "--about", "org_delta", "--spec", spec, "--implementation", "party", "--out", file)
	if code != 0 {
		t.Fatalf("grade issue: %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "graded org_delta on 118 cases (0 failed): A=1 B=1 C=1 D=1 E=1") {
		t.Errorf("grade issue printed %q", out)
	}
	code, out, errs = run(t, "grade", "verify", "--dir", delta.Dir, "--json", file)
	if code != 0 || !strings.Contains(out, `"outcome":"accepted"`) {
		t.Fatalf("grade verify at the subject: %d %s %s", code, out, errs)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	doc["subject"].(map[string]any)["implementation"] = "something else"
	tampered, _ := json.Marshal(doc)
	bad := filepath.Join(t.TempDir(), "tampered.json")
	if err := os.WriteFile(bad, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "grade", "verify", "--dir", delta.Dir, "--json", bad)
	if code != 1 || !strings.Contains(out, "A202-EVIDENCE-SIGNATURE-INVALID") {
		t.Errorf("a tampered grade: %d %s", code, out)
	}
	if code, out, _ = run(t, "grade", "import", "--dir", delta.Dir, file); code != 0 || !strings.Contains(out, "imported the grade org_northstar issued about org_delta") {
		t.Errorf("grade import: %d %s", code, out)
	}
	if code, out, _ = run(t, "grade", "list", "--dir", northstar.Dir, "--about", "org_delta"); code != 0 || !strings.Contains(out, "about org_delta by org_northstar") || !strings.Contains(out, "A=1 B=1 C=1 D=1 E=1") {
		t.Errorf("grade list: %d %s", code, out)
	}
}
