package specdigest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/specdigest"
	"github.com/partyd/party/internal/spectest"
)

// The published data, where it is present, is the release its digests
// record (spectest.SpecDir checks it for every test too; this says so
// without the helper).
func TestPublishedDataIsTheRelease(t *testing.T) {
	t.Parallel()
	if err := specdigest.Check(spectest.SpecDir(t)); err != nil {
		t.Fatal(err)
	}
}

// releaseCopy copies the part of the published data Check reads (the
// schemas directory and the manifest) into a temporary directory, and
// returns it with the files the digests name.
func releaseCopy(t *testing.T) (string, []string) {
	t.Helper()
	spec := spectest.SpecDir(t)
	dst := t.TempDir()
	err := filepath.WalkDir(filepath.Join(spec, "schemas"), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(spec, p)
		return copyFile(p, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join("conformance", "manifest-v0.1.json")
	if err := copyFile(filepath.Join(spec, manifest), filepath.Join(dst, manifest)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dst, specdigest.DigestsFile))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Schemas  []struct{ Path string }
		Manifest struct{ Path string } `json:"conformance_manifest"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	named := []string{d.Manifest.Path}
	for _, s := range d.Schemas {
		named = append(named, s.Path)
	}
	if len(named) < 6 {
		t.Fatalf("the digests name %v", named)
	}
	return dst, named
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// A copy of the release passes; a copy with any named file changed by one
// byte, or removed, or with a schema file the digests do not name, or
// without its digests, is refused, naming the file (and, for a changed
// file, both digests).
func TestAlteredDataRefused(t *testing.T) {
	t.Parallel()
	dir, named := releaseCopy(t)
	if err := specdigest.Check(dir); err != nil {
		t.Fatalf("an exact copy: %v", err)
	}
	for _, p := range named {
		path := filepath.Join(dir, filepath.FromSlash(p))
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(append([]byte(nil), orig...), ' '), 0o644); err != nil {
			t.Fatal(err)
		}
		err = specdigest.Check(dir)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "has sha-256") || !strings.Contains(err.Error(), "the release records") {
			t.Errorf("%s changed: %v", p, err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := specdigest.Check(dir); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s removed: %v", p, err)
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	extra := filepath.Join(dir, "schemas", "v0.1", "profiles", "extra-0.1.schema.json")
	if err := os.WriteFile(extra, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := specdigest.Check(dir); err == nil || !strings.Contains(err.Error(), "schemas/v0.1/profiles/extra-0.1.schema.json") {
		t.Errorf("an unnamed schema file: %v", err)
	}
	os.Remove(extra)
	if err := specdigest.Check(dir); err != nil {
		t.Fatalf("restored: %v", err)
	}
	os.Remove(filepath.Join(dir, specdigest.DigestsFile))
	if err := specdigest.Check(dir); err == nil || !strings.Contains(err.Error(), "digests") {
		t.Errorf("no digests file: %v", err)
	}
}
