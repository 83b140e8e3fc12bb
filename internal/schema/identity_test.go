package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/partyd/party/schemas"
)

var update = flag.Bool("update", false, "rewrite testdata/schema-set.sha256 from the embedded schemas")

// identityGolden pins the embedded schema set: the sha256sum list of its
// files. A schema change fails TestSchemaSetIdentity until the golden is
// rewritten (go test ./internal/schema -run TestSchemaSetIdentity
// -update), so that a changed set is a visible change of what party
// enforces, never a silent one.
const identityGolden = "testdata/schema-set.sha256"

// TestSchemaSetIdentity: the identity party version prints is the digest
// of the pinned list, and the list is the embedded files'.
func TestSchemaSetIdentity(t *testing.T) {
	t.Parallel()
	set := Identity()
	if *update {
		if err := os.WriteFile(identityGolden, []byte(set.List()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(identityGolden)
	if err != nil {
		t.Fatal(err)
	}
	if set.List() != string(golden) {
		t.Fatalf("the embedded schema set is not the pinned one (rerun with -update if the change is meant):\nembedded:\n%s\npinned:\n%s", set.List(), golden)
	}
	sum := sha256.Sum256(golden)
	if set.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("identity %s is not the sha-256 of the list (%x)", set.SHA256, sum)
	}
	// Every file compileSet loads is in the set, and nothing else.
	files, _ := filepath.Glob(filepath.Join("..", "..", "schemas", "*.schema.json"))
	profiles, _ := filepath.Glob(filepath.Join("..", "..", "schemas", "profiles", "*.schema.json"))
	if len(set.Files) != len(files)+len(profiles) || len(set.Files) < 10 {
		t.Fatalf("%d files in the set, %d schema files in schemas/", len(set.Files), len(files)+len(profiles))
	}
}

// Any change to a file, a file added or a file removed changes the
// identity.
func TestSchemaSetIdentityChanges(t *testing.T) {
	t.Parallel()
	base := fstest.MapFS{}
	for _, f := range Identity().Files {
		b, err := schemas.FS.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		base[f.Path] = &fstest.MapFile{Data: b}
	}
	same, err := setIdentity(base)
	if err != nil || same.SHA256 != Identity().SHA256 {
		t.Fatalf("the same files give %s (%v), want %s", same.SHA256, err, Identity().SHA256)
	}
	variants := map[string]func(fstest.MapFS){
		"a byte more": func(m fstest.MapFS) {
			f := m["common.schema.json"]
			f.Data = append(append([]byte(nil), f.Data...), '\n')
		},
		"a file added":  func(m fstest.MapFS) { m["profiles/extra-0.1.schema.json"] = &fstest.MapFile{Data: []byte("{}")} },
		"a file gone":   func(m fstest.MapFS) { delete(m, "grade.schema.json") },
		"a file listed": func(m fstest.MapFS) { m["zz.schema.json"] = &fstest.MapFile{Data: []byte("{}")} },
	}
	for name, change := range variants {
		m := fstest.MapFS{}
		for k, v := range base {
			c := *v
			m[k] = &c
		}
		change(m)
		got, err := setIdentity(m)
		if err != nil || got.SHA256 == same.SHA256 {
			t.Errorf("%s: identity %s (%v), unchanged", name, got.SHA256, err)
		}
	}
}
