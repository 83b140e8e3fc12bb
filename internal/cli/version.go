package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/verify"
)

func init() {
	register("version", "print the build (module version, commit) and the A202 release it implements", runVersion)
}

const versionUsage = `Usage: party version [--json]

Prints what this binary is: the module version and the VCS commit it was
built from (with "modified" when the working tree had uncommitted changes;
"unknown" when the build recorded none, as under go test or
-buildvcs=false), the Go toolchain, and what it implements of A202: the
specification release it writes and the releases it reads (the version
declaration it gives counterparties, binding §4.1), the role scope, the
rules version its records are written under, and the spec_version of the
documents it signs; and the schema set it enforces: party's own schemas,
embedded at build time (not the published files), named by one SHA-256
over the list of "<sha256>  <path>" lines of its files, sorted by path
(with --json, the list too). In a checkout of the same commit,

  cd schemas && sha256sum *.schema.json profiles/*.schema.json | LC_ALL=C sort -k2 | sha256sum

prints the same digest. It reads no state directory.

Exit status: 0, or 2 on a usage error.
`

// versionInfo is what party version prints.
type versionInfo struct {
	Module       string   `json:"module"`
	Version      string   `json:"version"`
	Commit       string   `json:"commit"`
	CommitTime   string   `json:"commit_time,omitempty"`
	Modified     bool     `json:"modified"`
	Go           string   `json:"go"`
	SpecRelease  string   `json:"spec_release"`
	SpecReads    []string `json:"spec_read_versions"`
	RoleScope    string   `json:"role_scope"`
	RulesVersion string   `json:"rules_version"`
	Documents    []string `json:"document_spec_versions"`
	// SchemaSet and SchemaFiles name the embedded schema set
	// (schema.Identity): what this binary validates with.
	SchemaSet   string              `json:"schema_set_sha256"`
	SchemaFiles []schema.FileDigest `json:"schema_files"`
}

// describe reads the build information the Go toolchain stamped into the
// binary (runtime/debug.ReadBuildInfo) beside the A202 versions this code
// implements, each taken from where the code declares it.
func describe(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{
		Module: "github.com/partyd/party", Version: "(devel)", Commit: "unknown",
		SpecRelease: delivery.LocalVersions.Write, SpecReads: append([]string{}, delivery.LocalVersions.Read...),
		RoleScope: verify.RoleScope, RulesVersion: record.RulesVersion,
		Documents: []string{envelope.SpecVersion, authority.MandateSpecVersion},
	}
	set := schema.Identity()
	v.SchemaSet, v.SchemaFiles = set.SHA256, set.Files
	if !ok || bi == nil {
		return v
	}
	v.Go = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party version", versionUsage)
	asJSON := c.Bool("json", false, "print one JSON object")
	pos, code, done := c.parse(args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		return c.usageError(stderr, "unexpected argument %q", pos[0])
	}
	v := describe(debug.ReadBuildInfo())
	if *asJSON {
		writeJSONLine(stdout, v)
		return 0
	}
	commit := v.Commit
	if v.CommitTime != "" {
		commit += " (" + v.CommitTime + ")"
	}
	if v.Modified {
		commit += ", modified"
	}
	fmt.Fprintf(stdout, "party %s (%s)\n", v.Version, v.Module)
	fmt.Fprintf(stdout, "commit: %s\n", commit)
	if v.Go != "" {
		fmt.Fprintf(stdout, "go: %s\n", v.Go)
	}
	fmt.Fprintf(stdout, "A202: release %s (reads %s), scope %s, rules %s, documents %s\n",
		v.SpecRelease, strings.Join(v.SpecReads, ", "), v.RoleScope, v.RulesVersion, strings.Join(v.Documents, ", "))
	fmt.Fprintf(stdout, "schemas: party's own set, sha256 %s (%d files)\n", v.SchemaSet, len(v.SchemaFiles))
	return 0
}
