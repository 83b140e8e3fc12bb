package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/partyd/party/schemas"
)

// Which schema set this binary enforces (threat model T23).
//
// party validates with its own schemas (package schemas), embedded at
// build time, not with the published files: those are checked against
// their release's digests whenever party reads them (internal/specdigest).
// What an operator confirms of a running binary is therefore its own set,
// and Identity names it: the SHA-256 of every embedded file, whole, and
// one SHA-256 over the list of them. The list is written as sha256sum
// writes it ("<hex>  <path>\n"), sorted by path in byte order, so that
//
//	cd schemas && sha256sum *.schema.json profiles/*.schema.json | LC_ALL=C sort -k2 | sha256sum
//
// in a checkout gives the same digest `party version` prints, and a
// changed, added or removed schema file changes it.

// FileDigest is one embedded schema file and the SHA-256 of its bytes
// (hex, lower case).
type FileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// SchemaSet is the identity of the embedded schema set.
type SchemaSet struct {
	// SHA256 is the SHA-256 of List.
	SHA256 string `json:"sha256"`
	// Files are the embedded files, sorted by path.
	Files []FileDigest `json:"files"`
}

// List returns the files as sha256sum prints them: one "<hex>  <path>"
// line each, in Files' order.
func (s SchemaSet) List() string {
	var b strings.Builder
	for _, f := range s.Files {
		fmt.Fprintf(&b, "%s  %s\n", f.SHA256, f.Path)
	}
	return b.String()
}

// Identity returns the identity of the schema set compiled into this
// binary.
func Identity() SchemaSet { return identity() }

var identity = sync.OnceValue(func() SchemaSet {
	s, err := setIdentity(schemas.FS)
	if err != nil {
		panic(fmt.Sprintf("internal/schema: embedded schemas unreadable: %v", err))
	}
	return s
})

// setIdentity digests every *.schema.json file of fsys and of its
// profiles/ directory, the files compileSet loads.
func setIdentity(fsys fs.FS) (SchemaSet, error) {
	files, err := fs.Glob(fsys, "*.schema.json")
	if err != nil {
		return SchemaSet{}, err
	}
	profiles, err := fs.Glob(fsys, "profiles/*.schema.json")
	if err != nil {
		return SchemaSet{}, err
	}
	files = append(files, profiles...)
	sort.Strings(files)
	var s SchemaSet
	for _, name := range files {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return SchemaSet{}, err
		}
		sum := sha256.Sum256(b)
		s.Files = append(s.Files, FileDigest{Path: name, SHA256: hex.EncodeToString(sum[:])})
	}
	sum := sha256.Sum256([]byte(s.List()))
	s.SHA256 = hex.EncodeToString(sum[:])
	return s, nil
}
