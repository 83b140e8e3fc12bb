// Package object is the record's object model: [View], a read-only view
// of one envelope object over its exact bytes, parsed once, and [Cache],
// which keeps the views of bytes parsed before.
//
// A view is made when bytes are read from the record or received
// (after the carrier checked that they are canonical), and never
// re-serialised to be stored, sent or exported: what was signed is what
// is kept. Its accessors name the envelope's members (ID, Type, Org, the
// payload's P and PSub) and those several kinds share: an offer's or
// agreement's terms and validity, a party member's organisation. Nothing
// here modifies the value.
//
// The typed views ([Event], [Offer], [Agreement], [Obligation],
// [Response], [Settlement]) are a view known to be of one type, made only
// by their As functions (or [ParseEvent]), with the members party reads of
// it as methods: the engine holds an obligation it loaded as an
// [Obligation] and reads its [Obligation.Obligee], and an event as an
// [Event] and reads its [Event.Seq], not a string member that could be
// misspelt, of an object that might not be one.
//
// The gate and the verifier read hostile input at map level instead:
// they must say what is wrong with an object a view would only read.
package object

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
)

// View is a read-only view of one envelope object over its exact bytes.
type View struct {
	raw []byte
	m   map[string]any
}

// Parse decodes bytes into a view. It does not check that they are in
// canonical form: bytes come to a view from the record, which stores only
// what was checked, or from a carrier, which checked them
// (delivery.CheckMessage).
func Parse(raw []byte) (*View, error) {
	m, err := canonical.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return &View{raw: raw, m: m}, nil
}

// ParseAll parses stored objects as a store read returned them:
// ParseAll(st.Read(...)).
func ParseAll(raws [][]byte, err error) ([]*View, error) { return parseAll(Parse, raws, err) }

func parseAll(parse func([]byte) (*View, error), raws [][]byte, err error) ([]*View, error) {
	if err != nil {
		return nil, err
	}
	out := make([]*View, 0, len(raws))
	for _, b := range raws {
		o, err := parse(b)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Over is the view of raw whose decoding is m, for a caller that holds
// it already (a carrier that decoded the bytes it checked; a value this
// instance built and then encoded). The caller hands m over: it is shared
// from here on and must not change.
func Over(raw []byte, m map[string]any) *View { return &View{raw: raw, m: m} }

// Raw returns the exact bytes.
func (o *View) Raw() []byte { return o.raw }

// Value returns the decoded object, for the gate and the verifier, which
// read hostile input at map level.
func (o *View) Value() map[string]any { return o.m }

// ID is the object's id.
func (o *View) ID() string { return str(o.m["id"]) }

// Type is its object_type.
func (o *View) Type() protocol.ObjectType { return protocol.ObjectType(str(o.m["object_type"])) }

// Hash is its content_hash.
func (o *View) Hash() string { return str(o.m["content_hash"]) }

// Txn is its transaction_id.
func (o *View) Txn() string { return str(o.m["transaction_id"]) }

// Payload is its payload member.
func (o *View) Payload() map[string]any { return Sub(o.m, "payload") }

// P returns a string member of the payload.
func (o *View) P(member string) string { return str(o.Payload()[member]) }

// PSub returns an object member of the payload.
func (o *View) PSub(member string) map[string]any { return Sub(o.Payload(), member) }

// By is its created_by.
func (o *View) By() map[string]any { return Sub(o.m, "created_by") }

// Org is the organisation that created it.
func (o *View) Org() string { return str(o.By()["organization_id"]) }

// Agent is the agent that created it.
func (o *View) Agent() string { return str(o.By()["agent_id"]) }

// Mandate is the mandate it was created under.
func (o *View) Mandate() string { return str(o.By()["mandate_id"]) }

// Signatures returns its signature entries.
func (o *View) Signatures() []map[string]any {
	list, _ := o.m["signatures"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if e, ok := x.(map[string]any); ok {
			out = append(out, e)
		}
	}
	return out
}

// FirstSigner is the key_id of its first signature.
func (o *View) FirstSigner() string {
	if s := o.Signatures(); len(s) > 0 {
		return str(s[0]["key_id"])
	}
	return ""
}

// Terms is the terms member of an offer's or agreement's payload.
func (o *View) Terms() map[string]any {
	t, _ := o.Payload()["terms"].(map[string]any)
	return t
}

// ValidUntil is an offer's valid_until.
func (o *View) ValidUntil() (time.Time, bool) {
	t, err := envelope.ParseTimestamp(o.P("valid_until"))
	return t, err == nil
}

// Expired reports whether an offer has lapsed at now (or names no
// valid_until it can be read at).
func (o *View) Expired(now time.Time) bool {
	t, ok := o.ValidUntil()
	return !ok || !now.Before(t)
}

// SignedDocument reports whether o is org's own signature over a record
// of the kind claim names: evidence of type signed_document that org
// created and issued, whose claim is claim. The record's hash is its
// artifact_hash.
func (o *View) SignedDocument(org, claim string) bool {
	return o.Type() == protocol.Evidence && o.P("evidence_type") == "signed_document" && o.Org() == org &&
		str(o.PSub("issuer")["organization_id"]) == org && o.P("claim") == claim
}

// PartyOrg returns the organisation of a party member of the payload
// ({organization_id, agent_id}).
func (o *View) PartyOrg(member string) string { return str(o.PSub(member)["organization_id"]) }

// Int reads a JSON number as decoding gives it (json.Number), or as a
// value built in Go, as an int; anything else is 0.
func Int(v any) int {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

func str(v any) string { s, _ := v.(string); return s }

// Sub is the object member k of m, or an empty map (never nil): a reader
// that indexes it never meets a nil map.
func Sub(m map[string]any, k string) map[string]any {
	s, _ := m[k].(map[string]any)
	if s == nil {
		return map[string]any{}
	}
	return s
}

// Cache keeps the views of recently parsed bytes, by their SHA-256. Views
// are read-only, so the view of bytes parsed before is shared: a working
// set reads the same key records, mandates and offers on every act, and
// decoding them again would cost more than reading them. Each engine has
// its own, so that two instances in one process (a test) never share a
// view. The zero Cache is empty and ready.
type Cache struct {
	mu     sync.Mutex
	parsed map[[32]byte]*View
}

// maxParsed bounds a cache; a full cache starts again empty.
const maxParsed = 8192

// Parse is [Parse], sharing the view of bytes parsed before.
func (c *Cache) Parse(raw []byte) (*View, error) {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	o, ok := c.parsed[key]
	c.mu.Unlock()
	if ok {
		return o, nil
	}
	m, err := canonical.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return c.keep(key, raw, m), nil
}

// ParseAll is [ParseAll], sharing the views of bytes parsed before.
func (c *Cache) ParseAll(raws [][]byte, err error) ([]*View, error) {
	return parseAll(c.Parse, raws, err)
}

// Remember keeps the view of b, whose decoding is m ([Over]), and returns
// the one kept for b.
func (c *Cache) Remember(b []byte, m map[string]any) *View {
	return c.keep(sha256.Sum256(b), b, m)
}

// keep puts the view of b (whose SHA-256 is key, and decoding m) in the
// cache unless one is kept for b already, and returns the one kept.
func (c *Cache) keep(key [32]byte, b []byte, m map[string]any) *View {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.parsed[key]; ok {
		return o
	}
	if c.parsed == nil || len(c.parsed) >= maxParsed {
		c.parsed = map[[32]byte]*View{}
	}
	o := &View{raw: b, m: m}
	c.parsed[key] = o
	return o
}
