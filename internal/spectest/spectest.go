// Package spectest finds the published A202 test data for tests.
//
// The data (the published schemas, fixtures and manifest, and the reference
// vectors) lives outside the repository: at $A202_SPEC_DIR, else at
// ../shared/a202-v0.1 beside the repository root. When it is absent, tests
// that need it skip with a message saying where they looked, except under
// CI=true, where its absence fails the run: CI must never pass by skipping.
// Data that is there but is not the release its schema digests record
// (specdigest.Check) fails every test that asks for it.
package spectest

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/partyd/party/internal/specdigest"
)

// RepoRoot returns the repository root, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func need(t testing.TB, dir, what string) string {
	t.Helper()
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return dir
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found at %s (set A202_SPEC_DIR); CI=true requires it", what, dir)
	}
	t.Skipf("%s not found at %s; set A202_SPEC_DIR to run this test", what, dir)
	return ""
}

func sharedDir() string {
	return filepath.Join(RepoRoot(), "..", "shared")
}

// SpecDir returns the published specification data directory (the one that
// holds schemas/ and conformance/), or skips or fails the test.
func SpecDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("A202_SPEC_DIR")
	if dir == "" {
		dir = filepath.Join(sharedDir(), "a202-v0.1")
	} else if !filepath.IsAbs(dir) {
		// Relative paths are taken from the repository root, as .ci/run
		// and the README write them.
		dir = filepath.Join(RepoRoot(), dir)
	}
	dir = need(t, filepath.Clean(dir), "A202 specification data")
	checkDigests(t, dir)
	return dir
}

// digestChecks holds, per specification directory, what
// specdigest.Check said of it (a digestCheck), checked once per test
// binary.
var digestChecks sync.Map

type digestCheck struct{ err error }

// checkDigests fails the test when the data under dir is not the release
// its digests record (threat model T23), present or not CI: tests that
// compare party with a substituted schema or fixture prove nothing.
func checkDigests(t testing.TB, dir string) {
	t.Helper()
	v, ok := digestChecks.Load(dir)
	if !ok {
		v, _ = digestChecks.LoadOrStore(dir, digestCheck{specdigest.Check(dir)})
	}
	if err := v.(digestCheck).err; err != nil {
		t.Fatalf("A202 specification data at %s: %v", dir, err)
	}
}

// FixturesDir returns SpecDir/conformance/fixtures/v0.1.
func FixturesDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(SpecDir(t), "conformance", "fixtures", "v0.1")
}

// SharedFile returns a file that sits beside the specification data
// (../shared/NAME, or $A202_SPEC_DIR/../NAME), or skips or fails the test.
func SharedFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(SpecDir(t)), name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true requires it)", p)
		}
		t.Skipf("%s not found", p)
	}
	return p
}

// ReferenceVectors returns the directory of the record produced by the
// published reference, or skips or fails the test.
func ReferenceVectors(t testing.TB) string {
	t.Helper()
	return need(t, filepath.Join(filepath.Dir(SpecDir(t)), "reference-vectors"), "reference vectors")
}
