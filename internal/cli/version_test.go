package cli

import (
	"runtime/debug"
	"testing"

	"github.com/partyd/party/internal/schema"
)

// TestDescribeBuild reads a binary's stamped build information as the Go
// toolchain writes it for a build from a git checkout.
func TestDescribeBuild(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/partyd/party", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-30T09:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	v := describe(bi, true)
	if v.Version != "v0.3.1" || v.Commit != "0123456789abcdef0123456789abcdef01234567" || v.CommitTime != "2026-11-30T09:00:00Z" || !v.Modified || v.Go != "go1.26.8" {
		t.Fatalf("stamped build: %+v", v)
	}
	if v.SpecRelease != "0.1" || len(v.SpecReads) != 1 || v.SpecReads[0] != "0.1" || v.RoleScope != "a202-scope/bilateral/0.1" {
		t.Fatalf("A202 versions: %+v", v)
	}
	// The schema set is the embedded one, whatever the build.
	if set := schema.Identity(); v.SchemaSet != set.SHA256 || len(v.SchemaFiles) != len(set.Files) || len(v.SchemaFiles) == 0 {
		t.Fatalf("schema set %s with %d files, want %s with %d", v.SchemaSet, len(v.SchemaFiles), set.SHA256, len(set.Files))
	}
	// No build information at all (a stripped or unusual binary).
	if v := describe(nil, false); v.Version != "(devel)" || v.Commit != "unknown" || v.Modified || v.SpecRelease != "0.1" {
		t.Fatalf("no build information: %+v", v)
	}
	// A build without VCS information: the module's version, commit unknown.
	if v := describe(&debug.BuildInfo{Main: debug.Module{Path: "github.com/partyd/party", Version: "(devel)"}}, true); v.Commit != "unknown" || v.CommitTime != "" {
		t.Fatalf("no VCS: %+v", v)
	}
}
