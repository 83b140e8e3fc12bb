package delivery

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/partyd/party/internal/gate"

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

// JudgeDeclaration is the fail-closed capability check of binding §3.2
// and §4.2 on a counterparty's AgentCard capabilities object (decoded
// JSON, the object holding extensions[]): nil when gate.Declaration
// accepts it against local, otherwise an A202-EXTENSION-UNSUPPORTED
// refusal whose detail says which condition failed. The judgment is the
// gate's, so the runtime and `party gate` refuse the same declarations.
func JudgeDeclaration(local Versions, capabilities any) error {
	j := gate.Declaration(local.Params(), capabilities)
	if j.Accepted() {
		return nil
	}
	detail := "the declaration is refused"
	if len(j.Problems) > 0 {
		detail = j.Problems[0].String()
	}
	// The gate names one code for every failure; say so on the wire
	// whatever it found (binding §4.3).
	return Unsupported(detail)
}

// JudgePreflight is the same check on a plain-HTTPS capability preflight
// document (decoded JSON) {uri, read_versions, write_version}: it is
// judged as the one extension entry it declares, with the versions as its
// params and required true (the preflight exists only for a party that
// requires the extension). A member besides those three does not parse.
func JudgePreflight(local Versions, doc any) error {
	m, ok := doc.(map[string]any)
	if !ok {
		return Unsupported("condition 2: the preflight document is not an object")
	}
	params := map[string]any{}
	for k, v := range m {
		switch k {
		case "uri":
		case "read_versions", "write_version":
			params[k] = v
		default:
			return Unsupported(fmt.Sprintf("condition 2: the preflight carries %q besides uri, read_versions and write_version", k))
		}
	}
	return JudgeDeclaration(local, map[string]any{"extensions": []any{
		map[string]any{"uri": m["uri"], "required": true, "params": params},
	}})
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
