package verify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
)

// testdata/two-party/northstar is the buyer's bundle from a run of
// examples/two-party: a record party's own engine built, between two
// instances, in which the buyer's mandate holds offer.accept for its
// procurement lead's approval and the principal gave it. Every act it
// records rebuilds from it, so every check runs.

const (
	twoPartyDir      = "testdata/two-party/northstar"
	twoPartyDirect   = "evt_f7d500079fcb2ae78b9ce1a5"
	twoPartyCommit   = "evt_1d99869dab544400126e8742"
	twoPartyApproval = "apr_b17b90fe82d55149871e1be0"
)

func verifyTwoParty(t *testing.T, dir string) *verify.Report {
	t.Helper()
	b, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return verify.Verify(verify.BundleInput(b), verify.Options{RulesVersion: b.Manifest.RulesVersion, Now: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)})
}

func TestTwoPartyRecord(t *testing.T) {
	rep := verifyTwoParty(t, twoPartyDir)
	if rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
		for _, c := range append(rep.Failures(), rep.Gaps()...) {
			t.Errorf("%s %s %s: %s", c.Name, c.Subject, c.Result, c.Detail)
		}
	}
	c := one(t, rep, "approval", twoPartyDirect)
	if c.Result != verify.Verified || !strings.Contains(c.Detail, twoPartyApproval+" approves it") {
		t.Errorf("approval: %s %s", c.Result, c.Detail)
	}
	wantResult(t, rep, "transition_guard", twoPartyCommit, verify.Verified)
	for _, c := range rep.Checks {
		if c.Name == "approval" && c.Result != verify.Verified {
			t.Errorf("%s %s: %s", c.Subject, c.Result, c.Detail)
		}
	}
}

// Without the principal's approval the same record shows the held act
// went ahead unapproved.
func TestTwoPartyRecordWithoutApproval(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(twoPartyDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "objects", twoPartyApproval+".json")); err != nil {
		t.Fatal(err)
	}
	rep := verifyTwoParty(t, dir)
	wantFailed(t, rep, "approval", twoPartyDirect, reason.ApprovalRequired)
	wantFailed(t, rep, "transition_guard", twoPartyCommit, reason.EvidenceTransitionIllegal)
	if len(rep.Failures()) != 2 {
		t.Errorf("failures %+v, want the two above", rep.Failures())
	}
}
