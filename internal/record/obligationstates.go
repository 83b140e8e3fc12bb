package record

// Obligation states: what each recorded event and object moves
// (obligation §6.1, §6.2; a waiver, §5.2), kept beside the record in the
// same commit.

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
func (e *Engine) applyEvent(tx *store.Txn, ev *Obj, objs []*Obj) error {
	switch ev.EventType() {
	case protocol.EvAgreementDirect, protocol.EvAgreementAmended, protocol.EvTransactionCancelled, protocol.EvTransactionCompleted,
		protocol.EvTerminationAgreed, protocol.EvTransactionTerminated, protocol.EvDeadlineElapsed:
		// The offer it took (or every offer, in a final state) is no
		// longer open: the inbox need not look here until another arrives
		// (store migration 10; the inbox clears any mark it finds stale).
		if err := tx.OffersTaken(ev.Txn()); err != nil {
			return err
		}
	}
	switch ev.EventType() {
	case protocol.EvSettlementInstructed:
		return e.applySettlement(tx, ev, objs)
	case protocol.EvTerminationAgreed, protocol.EvTransactionTerminated:
		return releaseOpen(tx, ev)
	}
	if ev.Data("obligation_id") == "" && ev.EventType() != protocol.EvAgreementAmended {
		return nil
	}
	put := func(id, state string, assertions []string, acceptedBy string) error {
		return tx.PutObligationState(store.ObligationState{ObligationID: id, TransactionID: ev.Txn(), State: state, Assertions: assertions, UpdatedSeq: ev.Seq(), AcceptedBy: acceptedBy})
	}
	current := func(id string) (store.ObligationState, error) {
		cur, err := tx.ObligationState(id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return cur, err
		}
		return cur, nil
	}
	for _, o := range objs {
		switch o.Type() {
		case protocol.Exception:
			// An exception over a disputed obligation moves it to
			// disputed (obligation §6.2); a failed settlement's leaves the
			// obligation as it stands.
			if ev.EventType() != protocol.EvExceptionOpened || o.P("exception_type") != string(protocol.ExceptionObligationDisputed) {
				continue
			}
			cur, err := current(o.P("obligation_id"))
			if err != nil {
				return err
			}
			if err := put(o.P("obligation_id"), string(protocol.OblDisputed), cur.Assertions, cur.AcceptedBy); err != nil {
				return err
			}
		case protocol.Obligation:
			switch ev.EventType() {
			case protocol.EvObligationActivated, protocol.EvAgreementAmended, protocol.EvRemediationAccepted:
				if err := put(o.ID(), string(protocol.OblPending), nil, ""); err != nil {
					return err
				}
			}
			// A remainder is pending once the acceptance naming it is
			// recorded (below).
		case protocol.PerformanceEvent:
			if ev.EventType() != protocol.EvPerformanceDeclared {
				continue
			}
			cur, err := current(o.P("obligation_id"))
			if err != nil {
				return err
			}
			if err := put(o.P("obligation_id"), string(protocol.OblAsserted), append(cur.Assertions, o.ID()), ""); err != nil {
				return err
			}
		case protocol.ObligationResponse:
			obl := o.P("obligation_id")
			cur, err := current(obl)
			if err != nil {
				return err
			}
			switch o.P("response_type") {
			case "accept":
				if err := put(obl, string(protocol.OblAccepted), cur.Assertions, o.ID()); err != nil {
					return err
				}
				if rem := o.P("remainder_obligation_id"); rem != "" {
					if err := put(rem, string(protocol.OblPending), nil, ""); err != nil {
						return err
					}
				}
			case "reject":
				if err := put(obl, string(protocol.OblRejected), cur.Assertions, ""); err != nil {
					return err
				}
			case "waive":
				if err := put(obl, string(protocol.OblWaived), cur.Assertions, ""); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

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
			if err := applyDisputeObjects(tx, o); err != nil {
				return err
			}
			continue
		}
		if o.Type() != protocol.ObligationResponse || o.P("response_type") != "waive" {
			continue
		}
		cur, err := tx.ObligationState(o.P("obligation_id"))
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
func releaseOpen(tx *store.Txn, ev *Obj) error {
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
	if v, err := e.o.Store.Meta(ctx, key); err != nil || v == "1" {
		return err
	}
	ts, err := e.o.Store.Transactions(ctx)
	if err != nil {
		return err
	}
	return e.o.Store.Update(ctx, func(tx *store.Txn) error {
		for _, t := range ts {
			evs, err := e.o.Store.Events(ctx, t.ID)
			if err != nil {
				return err
			}
			for _, x := range evs {
				if x.Status != store.EventRecorded {
					continue
				}
				ev, err := e.get(ctx, x.EventID)
				if err != nil {
					return err
				}
				var objs []*Obj
				for _, member := range []string{"obligation_id", "performance_event_id", "obligation_response_id"} {
					if id := ev.Data(member); id != "" {
						if o, err := e.get(ctx, id); err == nil {
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
