package gate_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
)

// FuzzGate runs gate.File over arbitrary bytes, bundles judged by
// verify.JudgeSet as `party gate` judges them, seeded with every
// published fixture (read at test time) and the committed corpus in
// testdata/fuzz/FuzzGate. It never panics, and its answer is coherent:
// refused exactly when there is a problem, codes registered, sorted and
// unique, Err nil exactly when accepted.
func FuzzGate(f *testing.F) {
	root := spectest.FixturesDir(f)
	var seeds []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			seeds = append(seeds, p)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	sort.Strings(seeds)
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j := gate.File(data, gate.Options{JudgeSet: verify.JudgeSet})
		if j.Accepted() != (len(j.Problems) == 0) {
			t.Fatalf("outcome %s with %d problems", j.Outcome, len(j.Problems))
		}
		if (j.Err() == nil) != j.Accepted() {
			t.Fatalf("Err() = %v for outcome %s", j.Err(), j.Outcome)
		}
		for i, c := range j.Codes {
			if !reason.Registered(c) {
				t.Fatalf("unregistered code %q", c)
			}
			if i > 0 && j.Codes[i-1] >= c {
				t.Fatalf("codes not sorted and unique: %v", j.Codes)
			}
		}
		for _, p := range j.Problems {
			if p.Detail == "" {
				t.Fatalf("a problem without a detail: %+v", p)
			}
		}
	})
}
