package gate

import (
	"regexp"

	"github.com/partyd/party/internal/reason"
)

// ExtensionURI is the A2A extension URI of the A202 commercial binding
// (binding §2.1).
const ExtensionURI = "https://schemas.a202.org/a2a-ext/commercial/0.1"

// versionPattern is the MAJOR.MINOR form of binding §4.1; "0.1.0" does not
// parse (spec-map §14 C11).
var versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// VersionDeclaration is a parsed {read_versions, write_version} pair.
type VersionDeclaration struct {
	Read  []string
	Write string
}

// ParseVersions reads a {read_versions, write_version} object, and false
// if it is absent or malformed.
func ParseVersions(v any) (VersionDeclaration, bool) {
	m, ok := obj(v)
	if !ok {
		return VersionDeclaration{}, false
	}
	read, ok := arrAt(m, "read_versions")
	if !ok || len(read) == 0 {
		return VersionDeclaration{}, false
	}
	var d VersionDeclaration
	for _, r := range read {
		s, ok := r.(string)
		if !ok || !versionPattern.MatchString(s) {
			return VersionDeclaration{}, false
		}
		d.Read = append(d.Read, s)
	}
	d.Write, ok = strAt(m, "write_version")
	if !ok || !versionPattern.MatchString(d.Write) {
		return VersionDeclaration{}, false
	}
	return d, true
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
	if _, ok := entry["required"].(bool); !ok {
		return fail("/counterparty_declaration/extensions", "the entry carries no boolean required flag")
	}
	remote, ok := ParseVersions(entry["params"])
	if !ok {
		return fail("/counterparty_declaration/extensions", "the entry's params do not parse as {read_versions, write_version} in MAJOR.MINOR form")
	}
	mine, ok := ParseVersions(local)
	if !ok {
		return fail("/local_party", "the local version declaration does not parse")
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
