package cli_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/verify/verifytest"
)

// The record the end-to-end verify benchmark checks (verifytest.Large, 5 000
// events, each countersigned) verifies with nothing failed and nothing
// left unchecked under party verify's default options: countersignatures
// required, current key status read now. -short checks a 200-event one.
//
// In parallel with the scripts: it is the package's longest test (a fifth
// of its time under -race), and nothing it does is another test's. The
// memory limit verify sets for its run is process-wide, but only the
// serial TestCollectorSettings asserts it, before any parallel test runs.
func TestVerifyLargeRecord(t *testing.T) {
	t.Parallel()
	events := 5000
	if testing.Short() {
		events = 200
	}
	rec, err := verifytest.Large(events)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rec.EventIDs); got != events {
		t.Fatalf("%d events, want %d", got, events)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := bundle.Write(dir, rec.Contents(), bundle.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"verify", dir}, nil, &out, &errOut)
	if code != 0 || errOut.Len() > 0 {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut.String(), out.String())
	}
	for _, want := range []string{", 0 failed, 0 not checkable", "No check failed, and every check could be run."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
