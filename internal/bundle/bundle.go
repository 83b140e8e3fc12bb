// Package bundle reads and writes the bundle directory: the form in which a
// transaction record leaves an instance to be verified by anyone
// (decisions.md item 15).
//
// # Layout
//
//	bundle.json      {"rules_version": "1.3", "transaction_id": "txn_…"},
//	                 and optionally "stated_gaps" and "resolvable_hashes"
//	objects/*.json   one envelope object per file (key_records may sit here)
//	key_records/*.json  optional: key_record objects kept apart, as the
//	                 published reference's record keeps them
//	mandates/*.json  one standalone a202-mandate/0.1 document per file
//	keys.json        {key_id: public JWK}
//
// bundle.json may also state what the exporter left out (evidence
// verification §6): stated_gaps, the ids (or content hashes) of what it
// knowingly withheld, and resolvable_hashes, content hashes it states
// resolve outside the bundle. A bundle.json with neither states nothing
// about its disclosure, as every bundle.json before these members did; one
// with either states it, and "stated_gaps": [] says nothing was withheld.
//
// Only objects/ is required. Without bundle.json no rules version is
// stated (a verifier then cannot judge transitions); without keys.json no
// key is declared (no signature can be checked); without mandates/ no
// actor's authority can be. Other files and directories are ignored, so a
// bundle can travel with notes beside it.
//
// # Reading
//
// There is one loader, ReadFS; Read is ReadFS over a directory of this
// machine, with system calls of its own for the many small files (read.go).
// Every file is decoded strictly (package canonical: no duplicate
// members, no invalid UTF-8, no floats, no trailing data) and the bundle
// is refused if any file is malformed: a partly read bundle would make
// some checks look unverifiable when in fact the bundle is broken. A
// Document keeps the decoded value, which is what a verifier hashes and
// verifies, so nothing is re-serialised from a typed copy that could drop
// or reorder a member; it does not keep the bytes, so a large bundle is
// not held in memory twice. The values share their identical leaves
// (canonical.Options.Shared): they are for reading only. The files of a
// directory are read and decoded concurrently, and the result and any
// error are those of reading them one by one in name order.
//
// # Writing
//
// Write lays a bundle out: each object as its RFC 8785 canonical bytes in
// objects/<id>.json, each mandate in mandates/<id>.json, keys.json and
// bundle.json. WriteOptions leaves chosen streams or objects out, for
// selective disclosure (evidence verification §6): what is left out is
// simply absent, and a verifier states it as a boundary or a gap. The
// exporter says what it withheld by setting Manifest.StatedGaps (and
// ResolvableHashes), which Write puts in bundle.json; then an absence it
// did not state is an incomplete disclosure rather than a gap.
package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
)

// File names of the layout.
const (
	ManifestFile  = "bundle.json"
	KeysFile      = "keys.json"
	ObjectsDir    = "objects"
	KeyRecordsDir = "key_records"
	MandatesDir   = "mandates"
)

// Manifest is bundle.json: what the bundle states about itself outside its
// objects. The rules version in force is stated here rather than in the
// record (decisions.md item 11).
type Manifest struct {
	// RulesVersion is the rules version in force when the record's events
	// appended; "" when the bundle does not state one.
	RulesVersion string
	// TransactionID is the transaction the record is about; "" when the
	// bundle does not state one.
	TransactionID string
	// StatedGaps are the ids, or content hashes, of what the exporter
	// knowingly withheld (bundle.json stated_gaps). Nil when bundle.json
	// does not state them; an empty, non-nil slice states that nothing was
	// withheld.
	StatedGaps []string
	// ResolvableHashes are content hashes the exporter states resolve
	// outside the bundle (bundle.json resolvable_hashes). Nil when not
	// stated.
	ResolvableHashes []string
}

// StatesDisclosure reports whether the manifest says anything about what
// the bundle left out: stated_gaps or resolvable_hashes is present. A
// bundle that says nothing leaves every absence a gap nobody explained.
func (m Manifest) StatesDisclosure() bool {
	return m.StatedGaps != nil || m.ResolvableHashes != nil
}

// Document is one file of a bundle.
type Document struct {
	// Path is the file's path inside the bundle, e.g. "objects/off_….json".
	Path string
	// Value is the file decoded strictly: the object a verifier works on.
	// It may share leaves with other documents' values (Reading): a
	// caller reads it and never modifies it.
	Value map[string]any
}

// Bundle is a bundle as read.
type Bundle struct {
	// Manifest is bundle.json; HasManifest says whether the file exists.
	Manifest    Manifest
	HasManifest bool
	// Objects are the envelope objects of objects/ and key_records/, in
	// that order, each directory's files in name order.
	Objects []Document
	// Mandates are the documents of mandates/, in name order.
	Mandates []Document
	// Keys are the keys of keys.json, or nil when the bundle has none.
	Keys *keys.KeySet
}

// ObjectValues returns the decoded objects, in bundle order.
func (b *Bundle) ObjectValues() []map[string]any { return values(b.Objects) }

// MandateValues returns the decoded mandates, in bundle order.
func (b *Bundle) MandateValues() []map[string]any { return values(b.Mandates) }

func values(docs []Document) []map[string]any {
	out := make([]map[string]any, len(docs))
	for i, d := range docs {
		out[i] = d.Value
	}
	return out
}

// ErrNotBundle is wrapped by the error for a directory that is not a
// bundle at all (no objects/ directory).
var ErrNotBundle = errors.New("bundle: not a bundle directory")

// Read reads the bundle in directory dir: ReadFS over the directory,
// with the files read by system calls of its own (read.go).
func Read(dir string) (*Bundle, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotBundle, dir)
	}
	b, err := ReadFS(hostDir{FS: os.DirFS(dir), root: dir})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return b, nil
}

// ReadFS reads a bundle laid out at the root of fsys. It is the one
// loader: Read, party verify and verify.VerifyDir all read through it.
func ReadFS(fsys fs.FS) (*Bundle, error) {
	b := &Bundle{}
	if st, err := fs.Stat(fsys, ObjectsDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: no %s/ directory", ErrNotBundle, ObjectsDir)
	}
	data, err := fs.ReadFile(fsys, ManifestFile)
	switch {
	case err == nil:
		if b.Manifest, err = ParseManifest(data); err != nil {
			return nil, err
		}
		b.HasManifest = true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("bundle: %s: %w", ManifestFile, err)
	}
	for _, dir := range []string{ObjectsDir, KeyRecordsDir} {
		docs, err := readDir(fsys, dir)
		if err != nil {
			return nil, err
		}
		b.Objects = append(b.Objects, docs...)
	}
	if b.Mandates, err = readDir(fsys, MandatesDir); err != nil {
		return nil, err
	}
	data, err = fs.ReadFile(fsys, KeysFile)
	switch {
	case err == nil:
		if b.Keys, err = keys.ParseKeySet(data); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("bundle: %s: %w", KeysFile, err)
	}
	return b, nil
}

// readDir reads every *.json file of dir, in name order (read.go); a
// missing directory holds nothing.
func readDir(fsys fs.FS, dir string) ([]Document, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bundle: %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return nil, nil
	}
	return readFiles(fsys, dir, names)
}

// ParseManifest reads bundle.json: an object with an optional
// rules_version string, an optional transaction_id string or null, an
// optional stated_gaps array of distinct identifiers or content hashes,
// an optional resolvable_hashes array of distinct content hashes, and
// nothing else. An unknown member is refused rather than ignored: a
// statement about the record that the verifier would silently drop is a
// statement nobody checked.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	v, err := canonical.DecodeObject(data)
	if err != nil {
		return m, fmt.Errorf("bundle: %s: %w", ManifestFile, err)
	}
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch x := v[k]; k {
		case "rules_version":
			s, ok := x.(string)
			if !ok || s == "" {
				return m, fmt.Errorf("bundle: %s: rules_version is not a non-empty string", ManifestFile)
			}
			m.RulesVersion = s
		case "transaction_id":
			if x == nil {
				continue
			}
			s, ok := x.(string)
			if !ok || !strings.HasPrefix(s, "txn_") {
				return m, fmt.Errorf("bundle: %s: transaction_id is neither null nor a txn_ identifier", ManifestFile)
			}
			m.TransactionID = s
		case "stated_gaps":
			list, err := statedList(k, x, func(s string) bool { return gapID.MatchString(s) || contentHash.MatchString(s) },
				"an identifier or a content hash")
			if err != nil {
				return m, err
			}
			m.StatedGaps = list
		case "resolvable_hashes":
			list, err := statedList(k, x, contentHash.MatchString, "a content hash (64 lowercase hexadecimal characters)")
			if err != nil {
				return m, err
			}
			m.ResolvableHashes = list
		default:
			return m, fmt.Errorf("bundle: %s: unknown member %q", ManifestFile, k)
		}
	}
	return m, nil
}

var (
	// gapID is an A202 identifier: a lowercase prefix, an underscore, and
	// the kernel's identifier tail.
	gapID = regexp.MustCompile(`^[a-z]{2,8}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
	// contentHash is a SHA-256 in lowercase hexadecimal.
	contentHash = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// statedList reads a manifest member that is an array of distinct strings
// each of which ok accepts. The result is never nil: a stated empty list
// is a statement.
func statedList(member string, v any, ok func(string) bool, what string) ([]string, error) {
	arr, isArr := v.([]any)
	if !isArr {
		return nil, fmt.Errorf("bundle: %s: %s is not an array", ManifestFile, member)
	}
	out := make([]string, 0, len(arr))
	seen := map[string]bool{}
	for i, x := range arr {
		s, isStr := x.(string)
		switch {
		case !isStr || !ok(s):
			return nil, fmt.Errorf("bundle: %s: %s[%d] is not %s", ManifestFile, member, i, what)
		case seen[s]:
			return nil, fmt.Errorf("bundle: %s: %s names %s twice", ManifestFile, member, s)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}
