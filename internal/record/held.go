package record

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// The record as the countersigner's check reads it. verify.Gather decides
// which objects the rules read about an extension (the working set) and
// reads them through a verify.Reader; heldReader is that reader over this
// instance's store. It adds what only the instance knows: which mandates
// it may rely on (its own and the counterparty's, not those of its other
// counterparties) and which events are recorded rather than pending.

// heldReader reads the record of a transaction with peer from st, a
// snapshot of the store (store.Snapshot), so that the working set is one
// consistent state.
type heldReader struct {
	e    *Engine
	st   *store.Store
	peer string
	// txn is the transaction whose record is read: Object finds its
	// objects only (verify.Gather follows no reference out of it).
	txn string
}

func (r heldReader) Object(ctx context.Context, id string) (map[string]any, error) {
	b, err := r.st.GetObject(ctx, r.txn, id)
	if err != nil {
		return nil, err
	}
	o, err := r.e.parse(b)
	if err != nil {
		return nil, err
	}
	return o.Value(), nil
}

func (r heldReader) Events(ctx context.Context, txn string, types ...string) ([]verify.EventRef, error) {
	var rows []store.Event
	var err error
	if len(types) == 0 {
		rows, err = r.st.Events(ctx, txn)
	} else {
		rows, err = r.st.EventsOfTypes(ctx, txn, types...)
	}
	if err != nil {
		return nil, err
	}
	refs := make([]verify.EventRef, len(rows))
	for i, x := range rows {
		refs[i] = eventRef(x)
	}
	return refs, nil
}

// LatestEvent reads the one event alone (store.LatestEventOfType), so
// that the rounds before it are not even read.
func (r heldReader) LatestEvent(ctx context.Context, txn, typ string) (verify.EventRef, bool, error) {
	return found(r.st.LatestEventOfType(ctx, txn, typ))
}

func (r heldReader) EventAt(ctx context.Context, txn string, seq int) (verify.EventRef, bool, error) {
	return found(r.st.EventAt(ctx, txn, seq))
}

func (r heldReader) Objects(ctx context.Context, txn string, types ...string) ([]map[string]any, error) {
	return values(r.e.views.ParseAll(r.st.TransactionObjectsOfTypes(ctx, txn, types...)))
}

func (r heldReader) Responses(ctx context.Context, txn string, types ...string) ([]map[string]any, error) {
	return values(r.e.views.ParseAll(r.st.ObligationResponsesOfTypes(ctx, txn, types...)))
}

func (r heldReader) KeyRecords(ctx context.Context) ([]map[string]any, error) {
	return values(r.e.keyRecords(ctx))
}

// Mandate reads a mandate this instance issued or received from peer.
func (r heldReader) Mandate(ctx context.Context, id string) (map[string]any, bool, error) {
	rec, err := r.st.GetMandate(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if rec.Origin != originLocal && rec.Origin != r.peer {
		return nil, false, nil
	}
	m, err := r.e.parse(rec.Body)
	if err != nil {
		return nil, false, err
	}
	return m.Value(), true, nil
}

func eventRef(x store.Event) verify.EventRef {
	return verify.EventRef{ID: x.EventID, Sequence: x.Sequence, Recorded: x.Status == store.EventRecorded}
}

// found is an event read by position or type, absent when not found.
func found(x store.Event, err error) (verify.EventRef, bool, error) {
	if errors.Is(err, store.ErrNotFound) {
		return verify.EventRef{}, false, nil
	}
	if err != nil {
		return verify.EventRef{}, false, err
	}
	return eventRef(x), true, nil
}

// values are the views' values.
func values(list []*Obj, err error) ([]map[string]any, error) {
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(list))
	for i, o := range list {
		out[i] = o.Value()
	}
	return out, nil
}

// eventAt reads the event at a position of a transaction.
func (e *Engine) eventAt(ctx context.Context, txn string, seq int) (*Event, error) {
	ev, err := e.db.EventAt(ctx, txn, seq)
	if err != nil {
		return nil, err
	}
	return e.getEvent(ctx, txn, ev.EventID)
}

// keyRecords returns every key record held (of every organisation), by
// the object-type index, read again only once one was stored or changed,
// by any process (store.KeyObjectsCache). The list is shared: callers
// only read it.
func (e *Engine) keyRecords(ctx context.Context) ([]*Obj, error) {
	return e.kr.Get(ctx, e.db, func(ctx context.Context) ([]*Obj, error) {
		return e.views.ParseAll(e.db.ObjectsOfType(ctx, string(protocol.KeyRecord)))
	})
}

// testingOnlyWorkingSet, when set, is told the size of every working set
// extend builds (objects held, mandates), with its transaction (a test
// that history does not grow it).
var testingOnlyWorkingSet atomic.Pointer[func(txn string, n, mandates int)]

// readWorkingSet reads the working set (verify.Gather), a dozen reads or
// so, in one read transaction (store.Snapshot), ended before the rules
// run; then the key set, cached (keySet).
func (e *Engine) readWorkingSet(ctx context.Context, st *state, news []*Obj) (verify.Extension, error) {
	snap, done := e.db.Snapshot(ctx)
	defer done()
	tip := verify.Tip{
		Transaction: st.t.ID,
		Parties:     [2]string{e.org.Config().OrganizationID, st.t.Counterparty},
		Excluded:    st.excluded,
	}
	if st.known {
		tip.Head = st.t.HeadSequence
	}
	vals := make([]map[string]any, len(news))
	for i, o := range news {
		vals[i] = o.Value()
	}
	x, err := verify.Gather(ctx, heldReader{e: e, st: snap, peer: st.t.Counterparty, txn: tip.Transaction}, tip, vals)
	if err != nil {
		return x, err
	}
	x.Keys, err = e.keySet(ctx, st.t.Counterparty)
	return x, err
}

// extend runs the verifier's rules over the record of st extended by
// news (verify.Extend) and returns their refusal, if any. awaiting names
// new objects this instance is about to sign besides an event.
func (e *Engine) extend(ctx context.Context, st *state, news []*Obj, awaiting ...string) error {
	x, err := e.readWorkingSet(ctx, st, news)
	if err != nil {
		return err
	}
	if f := testingOnlyWorkingSet.Load(); f != nil {
		(*f)(st.t.ID, len(x.Held), len(x.Mandates))
	}
	x.Awaiting = awaiting
	// Only a check that did not verify decides anything here (Err): the
	// verified ones are counted, not listed.
	out := verify.Extend(x, verify.Options{RulesVersion: RulesVersion, Now: e.clock(), CountVerified: true, Memo: &e.sigs})
	return out.Err()
}
