package record

import (
	"context"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
)

// Obj is a read-only view of one envelope object over its exact bytes
// (package object): parsed once, when the bytes are read from the record
// or received, and never re-serialised to be stored, sent or exported.
// Objects received from a peer become Objs only after the carrier checked
// that their bytes are canonical (delivery.CheckMessage).
type Obj = object.View

// Event is an event's typed view ([object.Event]).
type Event = object.Event

// parse decodes canonical bytes into a view, shared with every other
// parse of the same bytes by this engine (object.Cache).
func (e *Engine) parse(raw []byte) (*Obj, error) { return e.views.Parse(raw) }

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
func (e *Engine) remember(b []byte, m map[string]any) *Obj { return e.views.Remember(b, m) }

// info is o's index row for store.Txn.PutVerified.
func info(o *Obj) store.ObjectInfo {
	return store.ObjectInfo{ID: o.ID(), ObjectType: string(o.Type()), TransactionID: o.Txn(), ContentHash: o.Hash()}
}

// get reads object id of transaction txn's record. An object is found by
// its transaction and its id (store, migration 26): the same id in another
// transaction is not this record's, and is not read.
func (e *Engine) get(ctx context.Context, txn, id string) (*Obj, error) {
	b, err := e.db.GetObject(ctx, txn, id)
	if err != nil {
		return nil, err
	}
	return e.parse(b)
}

// getEvent reads event id of transaction txn's record.
func (e *Engine) getEvent(ctx context.Context, txn, id string) (*Event, error) {
	b, err := e.db.GetObject(ctx, txn, id)
	if err != nil {
		return nil, err
	}
	return e.views.ParseEvent(b)
}

// named reads the offer, obligation or dispute id that an agent names by
// its id alone, from the transaction it belongs to
// (store.NamedObjectTransaction): nil when none is held, or it is not of
// the type as makes a view of.
func named[T any](ctx context.Context, e *Engine, id string, as func(*Obj) *T) *T {
	txn, err := e.db.NamedObjectTransaction(ctx, id)
	if err != nil {
		return nil
	}
	return held(ctx, e, txn, id, as)
}

// namedTyped is named for a type without a typed view.
func (e *Engine) namedTyped(ctx context.Context, id string, t protocol.ObjectType) (*Obj, bool) {
	txn, err := e.db.NamedObjectTransaction(ctx, id)
	if err != nil {
		return nil, false
	}
	return e.getTyped(ctx, txn, id, t)
}

// lookupHeld resolves id for an act on transaction txn from the record:
// an object of txn, or one bound to no transaction (a key record).
func (e *Engine) lookupHeld(ctx context.Context, txn, id string) map[string]any {
	if o, err := e.get(ctx, txn, id); err == nil {
		return o.Value()
	}
	if o, err := e.get(ctx, "", id); err == nil {
		return o.Value()
	}
	return nil
}

// messageEvent is the event a message carries last, or nil when its last
// object is not an event (a message carrying only an agreement). Every
// message this instance queues with an event carries it last.
func messageEvent(objs []*Obj) *Event {
	if len(objs) == 0 {
		return nil
	}
	return object.AsEvent(objs[len(objs)-1])
}

// getTyped reads object id of transaction txn's record and requires its
// type.
func (e *Engine) getTyped(ctx context.Context, txn, id string, t protocol.ObjectType) (*Obj, bool) {
	o, err := e.get(ctx, txn, id)
	if err != nil || o.Type() != t {
		return nil, false
	}
	return o, true
}

// held reads object id of transaction txn's record as the typed view as
// makes of it (object.AsOffer, ...): nil when it is not held, or not of
// that type.
func held[T any](ctx context.Context, e *Engine, txn, id string, as func(*Obj) *T) *T {
	o, err := e.get(ctx, txn, id)
	if err != nil {
		return nil
	}
	return as(o)
}

// ofType reads the objects of one type of a transaction, in storage
// order, through the (transaction_id, object_type) index.
func (e *Engine) ofType(ctx context.Context, txn string, t protocol.ObjectType) ([]*Obj, error) {
	return object.ParseAll(e.db.TransactionObjectsOfType(ctx, txn, string(t)))
}

func str(v any) string { s, _ := v.(string); return s }

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
