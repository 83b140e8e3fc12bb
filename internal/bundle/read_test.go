package bundle_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/verify/verifytest"
)

// Read, with its own system calls, reads what ReadFS reads through the
// portable fs.FS, and refuses a malformed file with the error ReadFS
// gives, naming the first malformed file in name order however the files
// were spread over workers.
func TestReadHost(t *testing.T) {
	rec, err := verifytest.New(40)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := bundle.Write(dir, rec.Contents(), bundle.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	full, err := portable(dir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals.Objects) != len(full.Objects) || len(vals.Mandates) != len(full.Mandates) {
		t.Fatalf("%d objects and %d mandates, ReadFS gives %d and %d", len(vals.Objects), len(vals.Mandates), len(full.Objects), len(full.Mandates))
	}
	for i, d := range vals.Objects {
		if d.Path != full.Objects[i].Path || !reflect.DeepEqual(d.Value, full.Objects[i].Value) {
			t.Errorf("%s: Read reads another document than ReadFS", full.Objects[i].Path)
		}
	}
	if !reflect.DeepEqual(vals.MandateValues(), full.MandateValues()) || !reflect.DeepEqual(vals.Manifest, full.Manifest) || vals.Keys.Len() != full.Keys.Len() {
		t.Error("Read reads other mandates, manifest or keys than ReadFS")
	}

	for _, name := range []string{rec.EventIDs[30], rec.EventIDs[3], rec.EventIDs[17]} {
		if err := os.WriteFile(filepath.Join(dir, "objects", name+".json"), []byte(`{"id":1,"id":2}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err1 := portable(dir)
	_, err2 := bundle.Read(dir)
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() || !strings.Contains(err2.Error(), rec.EventIDs[3]) {
		t.Errorf("ReadFS: %v; Read: %v; want both about %s", err1, err2, rec.EventIDs[3])
	}

	// A file that cannot be opened (here a link to nothing, first in name
	// order) fails both readers with the same error: Read's own system
	// calls leave failures to the portable reader.
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "objects", "0-dangling.json")); err != nil {
		t.Fatal(err)
	}
	_, err1 = portable(dir)
	_, err2 = bundle.Read(dir)
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() || !strings.Contains(err2.Error(), "0-dangling.json") {
		t.Errorf("ReadFS: %v; Read: %v; want both about 0-dangling.json", err1, err2)
	}
}

// portable reads dir through os.DirFS, as Read reads it but for its own
// system calls, its errors prefixed with dir as Read's are.
func portable(dir string) (*bundle.Bundle, error) {
	b, err := bundle.ReadFS(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return b, nil
}
