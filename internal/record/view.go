package record

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
)

// Obj is a read-only view of one envelope object over its exact bytes:
// parsed once, when the bytes are read from the record or received, and
// never re-serialised to be stored, sent or exported (what was signed is
// what is kept). The accessors read the decoded value; nothing here
// modifies it. Objects received from a peer become Objs only after the
// carrier checked that their bytes are canonical (delivery.CheckMessage).
type Obj struct {
	raw []byte
	m   map[string]any
}

// views holds the views of recently parsed bytes, by their SHA-256: one
// per engine ([Engine] field), so that two engines in one process (two
// instances in a test) never share a view, and a test starts empty.
type views struct {
	mu     sync.Mutex
	parsed map[[32]byte]*Obj
}

// parse decodes canonical bytes into a view. Views are read-only, so the
// view of bytes parsed before is shared (views): a working set reads the
// same key records, mandates and offers on every act, and decoding them
// again would cost more than reading them.
func (e *Engine) parse(raw []byte) (*Obj, error) {
	key := sha256.Sum256(raw)
	e.views.mu.Lock()
	o, ok := e.views.parsed[key]
	e.views.mu.Unlock()
	if ok {
		return o, nil
	}
	m, err := canonical.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return e.keep(key, raw, m), nil
}

// viewOver is parse(b) for b = canonical.Marshal(m), m a value this
// instance built: when m is made only of the values decoding gives
// (canonical.Decoded), decoding b would give m again, so m is the view's
// value as it stands, and b is not decoded. The caller hands m over: it
// is shared from here on and must not change.
func (e *Engine) viewOver(m map[string]any, b []byte) (*Obj, error) {
	if !canonical.Decoded(m) {
		return e.parse(b)
	}
	return e.remember(b, m), nil
}

// remember keeps the view of b, whose decoding is m, among the parsed
// views, and returns the one kept for b: parse(b) for a caller that holds
// b's decoding already (a carrier's, delivery.Message.Value; a value this
// instance built, viewOver).
func (e *Engine) remember(b []byte, m map[string]any) *Obj {
	return e.keep(sha256.Sum256(b), b, m)
}

// keep puts the view of b (whose SHA-256 is key, and decoding m) among the
// parsed views unless one is kept for b already, and returns the one kept.
func (e *Engine) keep(key [32]byte, b []byte, m map[string]any) *Obj {
	e.views.mu.Lock()
	defer e.views.mu.Unlock()
	if o, ok := e.views.parsed[key]; ok {
		return o
	}
	if e.views.parsed == nil || len(e.views.parsed) >= maxParsed {
		e.views.parsed = map[[32]byte]*Obj{}
	}
	o := &Obj{raw: b, m: m}
	e.views.parsed[key] = o
	return o
}

// parser makes views of stored bytes: an engine, which keeps them
// (Engine.parse), or a decoder, for a reader without one.
type parser interface {
	parse(raw []byte) (*Obj, error)
}

// decoder decodes bytes into a view each time, keeping none: for the
// readers of a record that run without an engine (ReadDisputes).
type decoder struct{}

func (decoder) parse(raw []byte) (*Obj, error) {
	m, err := canonical.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return &Obj{raw: raw, m: m}, nil
}

// maxParsed bounds an engine's views; a full cache starts again empty.
const maxParsed = 8192

// Raw returns the exact bytes.
func (o *Obj) Raw() []byte { return o.raw }

// Value returns the decoded object, for the gate and the verifier, which
// read hostile input at map level.
func (o *Obj) Value() map[string]any { return o.m }

// ID is the object's id.
func (o *Obj) ID() string { return str(o.m["id"]) }

// Type is its object_type.
func (o *Obj) Type() protocol.ObjectType { return protocol.ObjectType(str(o.m["object_type"])) }

// Hash is its content_hash.
func (o *Obj) Hash() string { return str(o.m["content_hash"]) }

// Txn is its transaction_id.
func (o *Obj) Txn() string { return str(o.m["transaction_id"]) }

// Payload is its payload member.
func (o *Obj) Payload() map[string]any { return sub(o.m, "payload") }

// P returns a string member of the payload.
func (o *Obj) P(member string) string { return str(o.Payload()[member]) }

// PSub returns an object member of the payload.
func (o *Obj) PSub(member string) map[string]any { return sub(o.Payload(), member) }

// By is its created_by.
func (o *Obj) By() map[string]any { return sub(o.m, "created_by") }

// Org is the organisation that created it.
func (o *Obj) Org() string { return str(o.By()["organization_id"]) }

// Agent is the agent that created it.
func (o *Obj) Agent() string { return str(o.By()["agent_id"]) }

// Mandate is the mandate it was created under.
func (o *Obj) Mandate() string { return str(o.By()["mandate_id"]) }

// Signatures returns its signature entries.
func (o *Obj) Signatures() []map[string]any {
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
func (o *Obj) FirstSigner() string {
	if s := o.Signatures(); len(s) > 0 {
		return str(s[0]["key_id"])
	}
	return ""
}

// info is its index row for store.Txn.PutVerified.
func (o *Obj) info() store.ObjectInfo {
	return store.ObjectInfo{ID: o.ID(), ObjectType: string(o.Type()), TransactionID: o.Txn(), ContentHash: o.Hash()}
}

// Event accessors (a transaction_event's payload, kernel eventPayload).

// Seq is an event's sequence.
func (o *Obj) Seq() int { return intOf(o.Payload()["sequence"]) }

// EventType is an event's event_type.
func (o *Obj) EventType() protocol.EventType { return protocol.EventType(o.P("event_type")) }

// From is an event's from_state.
func (o *Obj) From() protocol.State { return protocol.State(o.P("from_state")) }

// To is an event's to_state.
func (o *Obj) To() protocol.State { return protocol.State(o.P("to_state")) }

// Data returns a string member of an event's data.
func (o *Obj) Data(member string) string { return str(o.PSub("data")[member]) }

// Terms is the terms member of an offer's or agreement's payload.
func (o *Obj) Terms() map[string]any {
	t, _ := o.Payload()["terms"].(map[string]any)
	return t
}

// ValidUntil is an offer's valid_until.
func (o *Obj) ValidUntil() (time.Time, bool) {
	t, err := envelope.ParseTimestamp(o.P("valid_until"))
	return t, err == nil
}

// expired reports whether an offer has lapsed at now.
func (o *Obj) expired(now time.Time) bool {
	t, ok := o.ValidUntil()
	return !ok || !now.Before(t)
}

// PartyOrg returns the organisation of a party member of the payload
// ({organization_id, agent_id}).
func (o *Obj) PartyOrg(member string) string { return str(o.PSub(member)["organization_id"]) }

func intOf(v any) int {
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

// get reads one object of the record.
func (e *Engine) get(ctx context.Context, id string) (*Obj, error) {
	b, err := e.db.GetObject(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.parse(b)
}

// getTyped reads one object of the record and requires its type.
func (e *Engine) getTyped(ctx context.Context, id string, t protocol.ObjectType) (*Obj, bool) {
	o, err := e.get(ctx, id)
	if err != nil || o.Type() != t {
		return nil, false
	}
	return o, true
}

// ofType reads the objects of one type of a transaction, in storage
// order, through the (transaction_id, object_type) index.
func (e *Engine) ofType(ctx context.Context, txn string, t protocol.ObjectType) ([]*Obj, error) {
	return ofTypeIn(ctx, e.db, txn, t)
}

func str(v any) string { s, _ := v.(string); return s }

func sub(m map[string]any, k string) map[string]any {
	s, _ := m[k].(map[string]any)
	if s == nil {
		return map[string]any{}
	}
	return s
}

// party is an {organization_id, agent_id} reference.
func party(org, agent string) map[string]any {
	return map[string]any{"organization_id": org, "agent_id": agent}
}

// ownParty is org's party to an agreement: its buyer or its supplier.
func ownParty(org string, agr *Obj) map[string]any {
	if agr.PartyOrg("buyer") == org {
		return agr.PSub("buyer")
	}
	return agr.PSub("supplier")
}

func sameParty(a, b map[string]any) bool {
	return str(a["organization_id"]) == str(b["organization_id"]) && str(a["agent_id"]) == str(b["agent_id"])
}
