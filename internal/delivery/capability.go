package delivery

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/partyd/party/internal/reason"
)

// ExtensionURI is the A202 commercial extension of binding §2.2, the only
// value that declares or activates A202 support.
const ExtensionURI = "https://schemas.a202.org/a2a-ext/commercial/0.1"

// MediaType is the media type of one object's canonical bytes (binding
// §5.2, §7.1).
const MediaType = "application/a202-commercial+json"

// Versions is a version declaration (binding §4.1, RELEASES.md §4): the
// specification set versions an implementation reads, and the one it
// writes.
type Versions struct {
	Read  []string `json:"read_versions"`
	Write string   `json:"write_version"`
}

// LocalVersions is what this implementation declares: it reads and writes
// 0.1 (spec-map C11: MAJOR.MINOR, never 0.1.0).
var LocalVersions = Versions{Read: []string{"0.1"}, Write: "0.1"}

// Params returns v as the extension entry's params object.
func (v Versions) Params() map[string]any {
	read := make([]any, len(v.Read))
	for i, r := range v.Read {
		read[i] = r
	}
	return map[string]any{"read_versions": read, "write_version": v.Write}
}

var versionPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// ParseVersions reads a params object under binding §4.1: exactly the two
// members read_versions (a non-empty array of strings) and write_version
// (a string), every value of the form MAJOR.MINOR. params is a decoded
// JSON value. Anything else does not parse.
func ParseVersions(params any) (Versions, error) {
	m, ok := params.(map[string]any)
	if !ok {
		return Versions{}, fmt.Errorf("params is not an object")
	}
	for k := range m {
		if k != "read_versions" && k != "write_version" {
			return Versions{}, fmt.Errorf("params carries %q besides read_versions and write_version", k)
		}
	}
	rawRead, ok := m["read_versions"].([]any)
	if !ok || len(rawRead) == 0 {
		return Versions{}, fmt.Errorf("read_versions is missing, not an array, or empty")
	}
	var v Versions
	for _, r := range rawRead {
		s, ok := r.(string)
		if !ok || !versionPattern.MatchString(s) {
			return Versions{}, fmt.Errorf("read_versions holds %v, not a MAJOR.MINOR string", r)
		}
		v.Read = append(v.Read, s)
	}
	w, ok := m["write_version"].(string)
	if !ok || !versionPattern.MatchString(w) {
		return Versions{}, fmt.Errorf("write_version is %v, not a MAJOR.MINOR string", m["write_version"])
	}
	v.Write = w
	return v, nil
}

// Compatible runs binding §4.2 both ways: remote's write version must be
// one local reads, and local's write version one remote reads. There is
// no nearest match and no downgrade. A declaration that writes a version
// it does not itself read (RELEASES.md §4) is not compatible with anyone.
func Compatible(local, remote Versions) error {
	switch {
	case !slices.Contains(remote.Read, remote.Write):
		return fmt.Errorf("counterparty writes %s but does not read it", remote.Write)
	case !slices.Contains(local.Read, remote.Write):
		return fmt.Errorf("counterparty writes %s, this party reads %v", remote.Write, local.Read)
	case !slices.Contains(remote.Read, local.Write):
		return fmt.Errorf("this party writes %s, counterparty reads %v", local.Write, remote.Read)
	}
	return nil
}

// Unsupported returns the one refusal of binding §3.2 and §4.3. detail is
// for local logs; the wire carries only the code.
func Unsupported(detail string) *reason.Refusal {
	return reason.Refusef(reason.ExtensionUnsupported, "%s", detail)
}

// Unreachable is condition 4 of binding §3.2: the counterparty's
// capability surface could not be retrieved. It is the same refusal as
// the others, and also wraps ErrUnavailable, because unavailability is
// not permission now and may be repaired later: the outbox retries it.
func Unreachable(detail string, cause error) error {
	return fmt.Errorf("%w: %w", ErrUnavailable, Unsupported(fmt.Sprintf("%s: %v", detail, cause)))
}

// JudgeDeclaration is the fail-closed capability check of binding §3.2 on
// a counterparty's AgentCard capabilities.extensions value (decoded JSON):
// nil when exactly one entry carries ExtensionURI, its params parse and
// the versions are compatible with local; otherwise an A202-EXTENSION-
// UNSUPPORTED refusal whose detail says which condition failed. Two
// entries with the URI are an unparseable declaration: which one counts
// would be a guess.
func JudgeDeclaration(local Versions, extensions any) error {
	list, ok := extensions.([]any)
	if extensions != nil && !ok {
		return Unsupported("condition 2: capabilities.extensions is not an array")
	}
	var entry map[string]any
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok || m["uri"] != ExtensionURI {
			continue
		}
		if entry != nil {
			return Unsupported("condition 2: the card declares " + ExtensionURI + " more than once")
		}
		entry = m
	}
	if entry == nil {
		return Unsupported("condition 1: the card carries no entry for " + ExtensionURI)
	}
	remote, err := ParseVersions(entry["params"])
	if err != nil {
		return Unsupported("condition 2: the version declaration does not parse: " + err.Error())
	}
	if err := Compatible(local, remote); err != nil {
		return Unsupported("condition 3: no compatible version: " + err.Error())
	}
	return nil
}

// JudgePreflight is the same check on a plain-HTTPS capability preflight
// document (decoded JSON): exactly uri, read_versions and write_version,
// uri equal to ExtensionURI, versions parsing and compatible.
func JudgePreflight(local Versions, doc any) error {
	m, ok := doc.(map[string]any)
	if !ok {
		return Unsupported("condition 2: the preflight document is not an object")
	}
	if m["uri"] != ExtensionURI {
		return Unsupported(fmt.Sprintf("condition 1: the preflight declares %v, not %s", m["uri"], ExtensionURI))
	}
	params := make(map[string]any, len(m))
	for k, v := range m {
		if k != "uri" {
			params[k] = v
		}
	}
	remote, err := ParseVersions(params)
	if err != nil {
		return Unsupported("condition 2: the version declaration does not parse: " + err.Error())
	}
	if err := Compatible(local, remote); err != nil {
		return Unsupported("condition 3: no compatible version: " + err.Error())
	}
	return nil
}

// CapabilityCache remembers passed capability checks per counterparty for
// a while, so a busy exchange does not fetch the counterparty's card
// before every message. Only a pass is remembered: a failure is checked
// afresh next time, and a pass expires after the TTL, so a counterparty
// that stops declaring support is refused again within one TTL. It is
// safe for concurrent use.
type CapabilityCache struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	passed map[string]passedCheck
}

type passedCheck struct {
	until time.Time
	value string
}

// NewCapabilityCache returns a cache keeping passes for ttl (0 keeps
// none: every call checks).
func NewCapabilityCache(ttl time.Duration) *CapabilityCache {
	return &CapabilityCache{ttl: ttl, now: time.Now, passed: map[string]passedCheck{}}
}

// Check returns the value a passed check for key produced within the TTL,
// or runs check and remembers its value if it passes.
func (c *CapabilityCache) Check(ctx context.Context, key string, check func(context.Context) (string, error)) (string, error) {
	c.mu.Lock()
	p, ok := c.passed[key]
	c.mu.Unlock()
	if ok && c.now().Before(p.until) {
		return p.value, nil
	}
	v, err := check(ctx)
	if err != nil {
		c.mu.Lock()
		delete(c.passed, key)
		c.mu.Unlock()
		return "", err
	}
	if c.ttl > 0 {
		c.mu.Lock()
		c.passed[key] = passedCheck{until: c.now().Add(c.ttl), value: v}
		c.mu.Unlock()
	}
	return v, nil
}

// Forget drops a remembered pass, for a caller that learned the
// counterparty no longer supports the extension (an absent echo, say).
func (c *CapabilityCache) Forget(key string) {
	c.mu.Lock()
	delete(c.passed, key)
	c.mu.Unlock()
}
