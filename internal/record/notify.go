package record

import (
	"context"
	"slices"
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

// subscribers are the functions Subscribe (or SubscribeAlerts)
// registered, in the order they were registered.
type subscribers[T any] struct {
	mu   sync.Mutex
	next int
	fns  []subscriber[T]
}

type subscriber[T any] struct {
	id int
	fn func(T)
}

// add registers fn and returns the function that removes it.
func (s *subscribers[T]) add(fn func(T)) (cancel func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	s.fns = append(s.fns, subscriber[T]{id, fn})
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.fns = slices.DeleteFunc(s.fns, func(x subscriber[T]) bool { return x.id == id })
		s.mu.Unlock()
	}
}

// list returns the registered functions.
func (s *subscribers[T]) list() []subscriber[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fns)
}

// Subscribe registers fn to be called after every commit that touches a
// transaction's record on this instance: an own act stored, a peer's act
// countersigned, a reply (the peer's countersignature) stored, a refusal
// that removed an act, a renewal, a fork kept, a settlement receipt; and
// when an obligation of it falls due or overdue (timing.go), which no
// commit of the record marks. Both sides call it, so a subscriber hears
// of its own acts and of the counterparty's.
//
// fn runs on the committing goroutine after the commit, outside the
// transaction's lock: it must not block or call back into the engine
// synchronously (hand the change to a goroutine of its own). The returned
// function removes the subscription. Subscribers are called one after
// another in the order they subscribed.
func (e *Engine) Subscribe(fn func(Change)) (cancel func()) { return e.subs.add(fn) }

// update runs fn in one database transaction (store.Update) and, once it
// committed, tells the subscribers that txn changed. Every commit of the
// engine that changes a transaction's record goes through it, so that
// every act, the existing ones and those added later, is heard.
//
// The state the subscribers are told is the one fn left the transaction
// in, when anyone is subscribed: the state fn wrote or read (store.Txn.State),
// else read inside the same database transaction, where a read after the
// commit would open a read transaction of its own (2 % of a formation's
// CPU).
func (e *Engine) update(ctx context.Context, txn string, fn func(tx *store.Txn) error) error {
	var state string
	read := false
	err := e.db.Update(ctx, func(tx *store.Txn) error {
		if err := fn(tx); err != nil {
			return err
		}
		if txn != "" && e.subscribed() {
			read = true
			if st, err := tx.State(txn); err == nil {
				state = st
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.changed(ctx, txn, state, read)
	return nil
}

// subscribed reports whether anyone is subscribed.
func (e *Engine) subscribed() bool {
	e.subs.mu.Lock()
	defer e.subs.mu.Unlock()
	return len(e.subs.fns) > 0
}

// changed tells every subscriber that txn changed, in state (read from
// the store if known is false: the subscription came after the commit
// began).
func (e *Engine) changed(ctx context.Context, txn, state string, known bool) {
	if txn == "" {
		return
	}
	e.looked.Delete(txn) // its deadlines are looked at again (timing.go)
	fns := e.subs.list()
	if len(fns) == 0 {
		return
	}
	c := Change{TransactionID: txn, State: state}
	if !known {
		if t, err := e.db.GetTransaction(context.WithoutCancel(ctx), txn); err == nil {
			c.State = t.State
		}
	}
	for _, s := range fns {
		s.fn(c)
	}
}
