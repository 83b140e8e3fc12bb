package record

import (
	"context"
	"errors"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
)

// applyEvent moves the obligation states an event records, inside the
// transaction that records the event (both the appender's and the
// countersigner's). objs are the objects that travelled with it: the
// object its data names and the riders beside it (builder.ride), each
// moving its own obligation.
//
//	obligation.activated  every obligation carried        → pending
//	performance.declared  every assertion's obligation    → asserted
//	acceptance.granted,   every response's obligation     → accepted or rejected
//	acceptance.rejected                                     (a remainder named → pending)
//	agreement.amended     every obligation the amendment adds → pending;
//	                      every duty it waives            → waived
//	termination.agreed,   every obligation still open     → released (the
//	transaction.terminated                                  record signed names exactly these)
//	exception.opened      the obligation of an obligation_disputed exception → disputed
//	remediation.accepted  the remediation obligation      → pending
//
// Each event's line in actTable says what it moves (offers, apply).
func (e *Engine) applyEvent(tx *store.Txn, ev *Event, objs []*Obj) error {
	line, ok := e.acts.event(ev.EventType())
	if !ok {
		return nil
	}
	if line.offers {
		if err := tx.OffersTaken(ev.Txn()); err != nil {
			return err
		}
	}
	if line.apply == nil {
		return nil
	}
	return line.apply(e, tx, ev, objs)
}

// objectMove is what one object travelling with an event moves (moves).
type objectMove func(tx *store.Txn, ev *Event, o *Obj) error

// moves is an event's apply: each object that travelled with it moved by
// every one of the moves.
func moves(each ...objectMove) func(e *Engine, tx *store.Txn, ev *Event, objs []*Obj) error {
	return func(_ *Engine, tx *store.Txn, ev *Event, objs []*Obj) error {
		for _, o := range objs {
			for _, m := range each {
				if err := m(tx, ev, o); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// putObligation records obligation id's state as of ev.
func putObligation(tx *store.Txn, ev *Event, id, state string, assertions []string, acceptedBy string) error {
	return tx.PutObligationState(store.ObligationState{ObligationID: id, TransactionID: ev.Txn(), State: state, Assertions: assertions, UpdatedSeq: ev.Seq(), AcceptedBy: acceptedBy})
}

// obligationNow is obligation id's recorded state in transaction txn, the zero state before
// one is.
func obligationNow(tx *store.Txn, txn, id string) (store.ObligationState, error) {
	cur, err := tx.ObligationState(txn, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return cur, err
	}
	return cur, nil
}

// carriedPending: every obligation carried becomes pending (a remainder
// becomes pending once the acceptance naming it is recorded: responded).
func carriedPending(tx *store.Txn, ev *Event, o *Obj) error {
	if o.Type() != protocol.Obligation {
		return nil
	}
	return putObligation(tx, ev, o.ID(), string(protocol.OblPending), nil, "")
}

// asserted: every assertion's obligation becomes asserted.
func asserted(tx *store.Txn, ev *Event, o *Obj) error {
	if o.Type() != protocol.PerformanceEvent {
		return nil
	}
	cur, err := obligationNow(tx, ev.Txn(), o.P("obligation_id"))
	if err != nil {
		return err
	}
	return putObligation(tx, ev, o.P("obligation_id"), string(protocol.OblAsserted), append(cur.Assertions, o.ID()), "")
}

// responded: every response's obligation becomes accepted (a remainder it
// names pending), rejected or waived.
func responded(tx *store.Txn, ev *Event, o *Obj) error {
	if o.Type() != protocol.ObligationResponse {
		return nil
	}
	obl := o.P("obligation_id")
	cur, err := obligationNow(tx, ev.Txn(), obl)
	if err != nil {
		return err
	}
	switch o.P("response_type") {
	case "accept":
		if err := putObligation(tx, ev, obl, string(protocol.OblAccepted), cur.Assertions, o.ID()); err != nil {
			return err
		}
		if rem := o.P("remainder_obligation_id"); rem != "" {
			return putObligation(tx, ev, rem, string(protocol.OblPending), nil, "")
		}
	case "reject":
		return putObligation(tx, ev, obl, string(protocol.OblRejected), cur.Assertions, "")
	case "waive":
		return putObligation(tx, ev, obl, string(protocol.OblWaived), cur.Assertions, "")
	}
	return nil
}

// disputedByException: an exception over a disputed obligation moves it
// to disputed (obligation §6.2); a failed settlement's leaves the
// obligation as it stands.
func disputedByException(tx *store.Txn, ev *Event, o *Obj) error {
	if o.Type() != protocol.Exception || o.P("exception_type") != string(protocol.ExceptionObligationDisputed) {
		return nil
	}
	cur, err := obligationNow(tx, ev.Txn(), o.P("obligation_id"))
	if err != nil {
		return err
	}
	return putObligation(tx, ev, o.P("obligation_id"), string(protocol.OblDisputed), cur.Assertions, cur.AcceptedBy)
}

// releasesOpen is the apply of the events that end a transaction early
// (releaseOpen).
func releasesOpen(_ *Engine, tx *store.Txn, ev *Event, _ []*Obj) error { return releaseOpen(tx, ev) }

// applyObjects moves what an act recorded by its objects alone moves, in
// the transaction that stores it: on the acting side once the
// counterparty took the message, on the receiving side as it stores it.
// A waiver (obligation §5.2, §6.1) moves its obligation to waived; a
// dispute over an obligation's state travelling on its own (in
// exception_open) moves the obligation to disputed; a determination's
// binding state_result moves its obligation to the state named
// (disputes.go).
func (e *Engine) applyObjects(tx *store.Txn, objs []*Obj) error {
	for _, o := range objs {
		if o.Type() == protocol.Dispute || o.Type() == protocol.Determination {
			if err := e.applyDisputeObjects(tx, o); err != nil {
				return err
			}
			continue
		}
		if o.Type() != protocol.ObligationResponse || o.P("response_type") != "waive" {
			continue
		}
		cur, err := tx.ObligationState(o.Txn(), o.P("obligation_id"))
		if err != nil {
			return err
		}
		cur.State = string(protocol.OblWaived)
		if err := tx.PutObligationState(cur); err != nil {
			return err
		}
	}
	return nil
}

// releaseOpen moves every obligation of the event's transaction that is
// still open to released (obligation §6.1, obligation.released): the
// termination record both parties signed names exactly these.
func releaseOpen(tx *store.Txn, ev *Event) error {
	obls, err := tx.ObligationStates(ev.Txn())
	if err != nil {
		return err
	}
	for _, os := range obls {
		if !protocol.ObligationState(os.State).Open() {
			continue
		}
		os.State, os.UpdatedSeq = string(protocol.OblReleased), ev.Seq()
		if err := tx.PutObligationState(os); err != nil {
			return err
		}
	}
	return nil
}

// rebuildObligationStates derives the obligation states of a database
// written before they were kept (migration 7), once.
func (e *Engine) rebuildObligationStates(ctx context.Context) error {
	const key = "obligation_states_built"
	if v, err := e.db.Meta(ctx, key); err != nil || v == "1" {
		return err
	}
	ts, err := e.db.Transactions(ctx)
	if err != nil {
		return err
	}
	return e.db.Update(ctx, func(tx *store.Txn) error {
		for _, t := range ts {
			evs, err := e.db.Events(ctx, t.ID)
			if err != nil {
				return err
			}
			for _, x := range evs {
				if x.Status != store.EventRecorded {
					continue
				}
				ev, err := e.getEvent(ctx, t.ID, x.EventID)
				if err != nil {
					return err
				}
				var objs []*Obj
				for _, member := range []string{"obligation_id", "performance_event_id", "obligation_response_id"} {
					if id := ev.Data(member); id != "" {
						if o, err := e.get(ctx, t.ID, id); err == nil {
							objs = append(objs, o)
						}
					}
				}
				if err := e.applyEvent(tx, ev, objs); err != nil {
					return err
				}
			}
		}
		return tx.SetMeta(key, "1")
	})
}
