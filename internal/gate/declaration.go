package gate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/partyd/party/internal/reason"
)

// ExtensionURI is the A2A extension URI of the A202 commercial binding
// (binding §2.1).
const ExtensionURI = "https://schemas.a202.org/a2a-ext/commercial/0.1"

// versionPattern is the MAJOR.MINOR form of binding §4.1 and RELEASES.md
// §4: two decimal numbers without leading zeros, so "0.1.0" (spec-map §14
// C11), "00.1" and "0.01" do not parse.
var versionPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// VersionDeclaration is a parsed {read_versions, write_version} pair.
type VersionDeclaration struct {
	Read  []string
	Write string
}

// ParseVersions reads a version declaration, the params object of binding
// §4.1, and false if it does not parse: it must carry exactly
// read_versions (a non-empty array of distinct MAJOR.MINOR strings) and
// write_version (a MAJOR.MINOR string), and the write version must be one
// of the read versions, since a party never writes a version it cannot
// read (RELEASES.md §4).
func ParseVersions(v any) (VersionDeclaration, bool) {
	d, why := parseVersions(v)
	return d, why == ""
}

// parseVersions is ParseVersions, saying why a declaration does not
// parse ("" when it does), for the local log.
func parseVersions(v any) (VersionDeclaration, string) {
	m, ok := obj(v)
	if !ok {
		return VersionDeclaration{}, "the version declaration is not an object"
	}
	var extra []string
	for k := range m {
		if k != "read_versions" && k != "write_version" {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return VersionDeclaration{}, fmt.Sprintf("the version declaration carries %q besides read_versions and write_version", extra)
	}
	read, ok := arrAt(m, "read_versions")
	if !ok || len(read) == 0 {
		return VersionDeclaration{}, "read_versions is not a non-empty array"
	}
	var d VersionDeclaration
	for _, r := range read {
		s, ok := r.(string)
		if !ok || !versionPattern.MatchString(s) {
			return VersionDeclaration{}, fmt.Sprintf("read_versions holds %s, not a MAJOR.MINOR string", showDeclared(r))
		}
		if contains(d.Read, s) {
			return VersionDeclaration{}, "read_versions names " + s + " twice"
		}
		d.Read = append(d.Read, s)
	}
	w, present := m["write_version"]
	d.Write, ok = w.(string)
	switch {
	case !present:
		return VersionDeclaration{}, "write_version is absent"
	case !ok || !versionPattern.MatchString(d.Write):
		return VersionDeclaration{}, fmt.Sprintf("write_version is %s, not a MAJOR.MINOR string", showDeclared(w))
	case !contains(d.Read, d.Write):
		return VersionDeclaration{}, "write_version " + d.Write + " is not among read_versions: a party never writes a version it cannot read"
	}
	return d, ""
}

// showDeclared renders a declared value for a detail, briefly.
func showDeclared(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if r := []rune(string(b)); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return string(b)
}

// Declaration judges the counterparty's declared carrier capabilities
// against the local party's own version declaration (binding §3.2, §4).
// local is {read_versions, write_version}; counterparty is the AgentCard
// capabilities object holding extensions[], or nil when the card could not
// be retrieved. Every failure is the one code A202-EXTENSION-UNSUPPORTED
// (binding §4.3); the problem's detail says which condition failed, for
// the local log only.
func Declaration(local, counterparty any) Judgment {
	fail := func(path, detail string) Judgment {
		return judge(KindDeclaration, []Problem{{Code: reason.ExtensionUnsupported, Path: path, Detail: detail}})
	}
	card, ok := obj(counterparty)
	if !ok {
		// Unavailability is not permission.
		return fail("/counterparty_declaration", "the counterparty's capability declaration could not be read")
	}
	exts, _ := arrAt(card, "extensions")
	var entry map[string]any
	count := 0
	for _, e := range exts {
		m, ok := obj(e)
		if u, _ := strAt(m, "uri"); ok && u == ExtensionURI {
			entry = m
			count++
		}
	}
	switch {
	case count == 0:
		return fail("/counterparty_declaration/extensions", "no entry declares "+ExtensionURI)
	case count > 1:
		return fail("/counterparty_declaration/extensions", "more than one entry declares "+ExtensionURI)
	}
	// An absent required flag is false: a2a-go v0.3.3 writes the field
	// with omitempty, so a card declaring the extension as optional
	// carries no flag at all. A flag that is present must be a boolean.
	if r, present := entry["required"]; present {
		if _, ok := r.(bool); !ok {
			return fail("/counterparty_declaration/extensions", "the entry's required flag is "+showDeclared(r)+", not a boolean")
		}
	}
	remote, why := parseVersions(entry["params"])
	if why != "" {
		return fail("/counterparty_declaration/extensions", "the entry's params do not parse: "+why)
	}
	mine, why := parseVersions(local)
	if why != "" {
		return fail("/local_party", "the local version declaration does not parse: "+why)
	}
	// Both directions, no nearest match, no downgrade (binding §4.2).
	if !contains(mine.Read, remote.Write) {
		return fail("/counterparty_declaration/extensions", "the counterparty writes "+remote.Write+", which this party does not read")
	}
	if !contains(remote.Read, mine.Write) {
		return fail("/local_party/write_version", "this party writes "+mine.Write+", which the counterparty does not read")
	}
	return judge(KindDeclaration, nil)
}
