package record

import (
	"context"
	"sync"

	"github.com/partyd/party/internal/store"
)

// Change says that a transaction's record, as this instance holds it, may
// have changed: a commit touching it has just completed. It is a hint to
// read again, never the content: subscribers read the transaction (or the
// inbox) themselves, so a Change cannot disagree with the record.
type Change struct {
	// TransactionID is the transaction the commit touched.
	TransactionID string
	// State is the transaction's state after the commit ("" when the
	// commit removed it, as a refused first act does).
	State string
}

// subscribers are the functions Subscribe registered.
type subscribers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(Change)
}

// Subscribe registers fn to be called after every commit that touches a
// transaction's record on this instance: an own act stored, a peer's act
// countersigned, a reply (the peer's countersignature) stored, a refusal
// that removed an act, a renewal, a fork kept, a settlement receipt. Both
// sides call it, so a subscriber hears of its own acts and of the
// counterparty's.
//
// fn runs on the committing goroutine after the commit, outside the
// transaction's lock: it must not block or call back into the engine
// synchronously (hand the change to a goroutine of its own). The returned
// function removes the subscription.
func (e *Engine) Subscribe(fn func(Change)) (cancel func()) {
	s := &e.subs
	s.mu.Lock()
	if s.fns == nil {
		s.fns = map[int]func(Change){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

// update runs fn in one database transaction (store.Update) and, once it
// committed, tells the subscribers that txn changed. Every commit of the
// engine that changes a transaction's record goes through it, so that
// every act, the existing ones and those added later, is heard.
func (e *Engine) update(ctx context.Context, txn string, fn func(tx *store.Txn) error) error {
	if err := e.o.Store.Update(ctx, fn); err != nil {
		return err
	}
	e.changed(ctx, txn)
	return nil
}

// changed tells every subscriber that txn changed.
func (e *Engine) changed(ctx context.Context, txn string) {
	if txn == "" {
		return
	}
	e.subs.mu.Lock()
	fns := make([]func(Change), 0, len(e.subs.fns))
	for _, fn := range e.subs.fns {
		fns = append(fns, fn)
	}
	e.subs.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	c := Change{TransactionID: txn}
	if t, err := e.o.Store.GetTransaction(context.WithoutCancel(ctx), txn); err == nil {
		c.State = t.State
	}
	for _, fn := range fns {
		fn(c)
	}
}
