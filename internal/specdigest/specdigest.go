// Package specdigest checks published A202 specification data against the
// digests its release records, before anything of party reads it.
//
// The release carries schemas/digests-v0.1.json: the SHA-256 (hex, lower
// case) of the bytes of every schema file, whole, and of the conformance
// manifest (RELEASES.md §3.2 and §3.3). "A schema whose digest differs
// from the digest recorded here is not this release" (threat model T23:
// a substituted schema changes what validates). Check is that sentence
// applied: every file the digests name must be there with that digest,
// and no schema file may be there that they do not name. Whoever reads a
// specification directory (party grade issue --spec, the tests through
// internal/spectest) calls Check first and refuses the directory when it
// fails.
//
// This is about the published files only. party validates with its own
// schemas (package schemas, embedded); their identity is
// schema.Identity, which party version prints.
package specdigest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// DigestsFile is where a release's digests live, relative to the
// specification directory (the one holding schemas/ and conformance/).
const DigestsFile = "schemas/digests-v0.1.json"

// digests is the part of DigestsFile that Check reads.
type digests struct {
	Algorithm string `json:"algorithm"`
	Encoding  string `json:"encoding"`
	Schemas   []struct {
		Path   string `json:"path"`
		Digest string `json:"digest"`
	} `json:"schemas"`
	Manifest *struct {
		Path   string `json:"path"`
		Digest string `json:"digest"`
	} `json:"conformance_manifest"`
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Check verifies the specification data under dir against its
// DigestsFile. It returns nil when every schema file and the manifest the
// digests name has the recorded digest and every *.json file under
// schemas/ is either DigestsFile or named there; otherwise an error naming
// the file, and for a differing file both digests.
func Check(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(DigestsFile)))
	if err != nil {
		return fmt.Errorf("specdigest: the release's schema digests: %w", err)
	}
	var d digests
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("specdigest: %s: %w", DigestsFile, err)
	}
	if d.Algorithm != "sha-256" || d.Encoding != "hex-lower" {
		return fmt.Errorf("specdigest: %s records %s in %s, not sha-256 in hex-lower", DigestsFile, d.Algorithm, d.Encoding)
	}
	if len(d.Schemas) == 0 || d.Manifest == nil {
		return fmt.Errorf("specdigest: %s names no schema file or no conformance manifest", DigestsFile)
	}
	named := map[string]bool{}
	files := append([]struct{ Path, Digest string }{}, struct{ Path, Digest string }(*d.Manifest))
	for _, s := range d.Schemas {
		files = append(files, struct{ Path, Digest string }(s))
	}
	for _, f := range files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) || !hexDigest.MatchString(f.Digest) {
			return fmt.Errorf("specdigest: %s: entry %q with digest %q is not a file of the release and a sha-256", DigestsFile, f.Path, f.Digest)
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return fmt.Errorf("specdigest: %s, whose digest the release records, cannot be read: %w", f.Path, err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != f.Digest {
			return fmt.Errorf("specdigest: %s has sha-256 %x, the release records %s: this is not the A202 v0.1 release (threat model T23)", f.Path, got, f.Digest)
		}
		named[path.Clean(f.Path)] = true
	}
	// A schema file the digests do not name is not of this release either:
	// a reader that picks files up by name would take it in.
	return fs.WalkDir(os.DirFS(dir), "schemas", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("specdigest: %w", err)
		}
		if !e.IsDir() && strings.HasSuffix(p, ".json") && p != DigestsFile && !named[p] {
			return fmt.Errorf("specdigest: %s is not among the schema files whose digests the release records (%s)", p, DigestsFile)
		}
		return nil
	})
}
