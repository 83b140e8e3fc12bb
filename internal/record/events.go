package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// act is one act this instance appends: the objects it created, the
// policy decision, and the event, stored pending until the counterparty
// countersigns.
type act struct {
	txn      string
	peer     string
	created  [][]byte // new objects of this act, in message order (decision last)
	carried  [][]byte // objects sent that were held before (an approval)
	event    object
	eventRaw []byte
	ev       store.Event
}

func (a *act) message() [][]byte {
	msg := append([][]byte{}, a.carried...)
	msg = append(msg, a.created...)
	return append(msg, a.eventRaw)
}

// prepareEvent builds and signs this instance's next event on t: it must
// extend the head of this instance's copy, move the state legally under
// RulesVersion, and cite the decision pol. Nothing is stored here.
func (e *Engine) prepareEvent(t store.Transaction, eventType string, data map[string]any, pol object, mandateID string, now time.Time) (object, []byte, store.Event, error) {
	to, ok := rules.Next(RulesVersion, rules.Aggregate, t.State, eventType)
	if !ok {
		return nil, nil, store.Event{}, refusef(reason.StateTransitionDenied, "%s is not a legal event in state %s under rules %s", eventType, t.State, RulesVersion)
	}
	var prev any
	if t.HeadHash != "" {
		prev = t.HeadHash
	}
	var from any = t.State
	seq := t.HeadSequence + 1
	payload := map[string]any{
		"stream":              map[string]any{"kind": "transaction", "id": t.ID},
		"sequence":            seq,
		"event_type":          eventType,
		"occurred_at":         envelope.Timestamp(now),
		"previous_event_hash": prev,
		"action_hash":         str(pl(pol)["action_hash"]),
		"policy_decision_id":  idOf(pol),
		"from_state":          from,
		"to_state":            to,
		"data":                data,
	}
	ev, raw, err := e.newObject("transaction_event", t.ID, mandateID, payload, "event_append", now, "")
	if err != nil {
		return nil, nil, store.Event{}, err
	}
	row := store.Event{
		TransactionID: t.ID, Sequence: seq, EventID: idOf(ev), ContentHash: hashOf(ev), PreviousEventHash: t.HeadHash,
		EventType: eventType, FromState: t.State, ToState: to, AppendedBy: e.o.Config().OrganizationID, Status: store.EventPending,
	}
	return ev, raw, row, nil
}

// commitPending stores an act's objects and its event as pending, in one
// database transaction, refusing if another event holds the position.
func (e *Engine) commitPending(ctx context.Context, a *act) error {
	return e.o.Store.Update(ctx, func(tx *store.Txn) error {
		t, err := tx.Transaction(a.txn)
		if err != nil {
			return err
		}
		if t.HeadSequence+1 != a.ev.Sequence {
			return refusef(reason.SequenceConflict, "transaction %s moved while the act was prepared", a.txn)
		}
		if _, err := tx.EventAt(a.txn, a.ev.Sequence); err == nil {
			return refusef(reason.SequenceConflict, "an event is already pending at position %d of %s: wait for its countersignature", a.ev.Sequence, a.txn)
		}
		for _, b := range a.created {
			if _, err := tx.PutObject(b, "local"); err != nil {
				return err
			}
		}
		if _, err := tx.PutObject(a.eventRaw, "local"); err != nil {
			return err
		}
		return tx.InsertEvent(a.ev)
	})
}

// rollback removes a refused act: its pending event and the objects it
// created. A refused act leaves no trace.
func (e *Engine) rollback(ctx context.Context, a *act) {
	err := e.o.Store.Update(ctx, func(tx *store.Txn) error {
		if err := tx.DeletePendingEvent(a.txn, a.ev.Sequence, a.ev.EventID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		for _, b := range a.created {
			o, err := canonical.DecodeObject(b)
			if err != nil {
				continue
			}
			if err := tx.DeleteObject(idOf(o)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.log.Error("could not remove a refused act", "transaction_id", a.txn, "event_id", a.ev.EventID, "error", err)
	}
}

// deliver sends an act and handles the answer: a countersigned event is
// recorded; a refusal removes the act; a queued message leaves it pending.
func (e *Engine) deliver(ctx context.Context, a *act) (Outcome, error) {
	reply, err := e.send.Send(ctx, a.peer, a.txn, a.message())
	switch {
	case err == nil:
		if err := e.recordCountersigned(ctx, a.peer, a.event, a.eventRaw, reply); err != nil {
			return Outcome{}, err
		}
	case e.queued(err):
		t, _ := e.o.Store.GetTransaction(ctx, a.txn)
		return Outcome{TransactionID: a.txn, Status: "pending", State: t.State,
			WaitingFor: fmt.Sprintf("%s to countersign %s (event %d); delivery is retried until it answers", a.peer, a.ev.EventType, a.ev.Sequence)}, nil
	default:
		e.rollback(ctx, a)
		return Outcome{}, err
	}
	t, err := e.o.Store.GetTransaction(ctx, a.txn)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{TransactionID: a.txn, Status: "recorded", State: t.State}, nil
}

// recordCountersigned checks the counterparty's reply to one of our events
// and records the event: the reply must be our event's exact bytes with one
// more signature, the counterparty agent's event_append, which verifies.
func (e *Engine) recordCountersigned(ctx context.Context, peer string, ours object, oursRaw []byte, reply [][]byte) error {
	var got []byte
	for _, b := range reply {
		o, err := canonical.DecodeObject(b)
		if err == nil && idOf(o) == idOf(ours) {
			got = b
		}
	}
	if got == nil {
		return errf("%s's reply carries no countersigned %s", peer, idOf(ours))
	}
	o, err := canonical.DecodeObject(got)
	if err != nil {
		return err
	}
	if hashOf(o) != hashOf(ours) {
		return refusef(reason.EvidenceHashMismatch, "%s returned event %s with other content", peer, idOf(ours))
	}
	entries, err := signature.Entries(o)
	if err != nil || len(entries) != 2 {
		return refusef(reason.EvidenceSignatureInvalid, "the countersigned %s carries %d signatures, not 2", idOf(ours), len(entries))
	}
	mine, _ := signature.Entries(ours)
	a, _ := canonical.Marshal(mine[0])
	b, _ := canonical.Marshal(entries[0])
	if !bytes.Equal(a, b) {
		return refusef(reason.EvidenceSignatureInvalid, "the countersigned %s does not keep our signature first and unchanged", idOf(ours))
	}
	if str(entries[1]["purpose"]) != "event_append" {
		return refusef(reason.EvidenceSignatureInvalid, "the countersignature's purpose is %v", entries[1]["purpose"])
	}
	k, err := e.o.ResolveKey(ctx, str(entries[1]["key_id"]))
	if err != nil || k.OrganizationID != peer || len(k.HolderID) < 4 || k.HolderID[:4] != "agt_" {
		return refusef(reason.EvidenceSignatureInvalid, "the countersignature is not by an agent key %s vouched for", peer)
	}
	if err := signature.VerifyEntry(o, 1, k.Public); err != nil {
		return err
	}
	p := pl(o)
	row := store.Event{TransactionID: str(o["transaction_id"]), ContentHash: hashOf(o), ToState: str(p["to_state"])}
	if n, ok := p["sequence"].(interface{ Int64() (int64, error) }); ok {
		v, _ := n.Int64()
		row.Sequence = int(v)
	}
	err = e.o.Store.Update(ctx, func(tx *store.Txn) error {
		held, err := tx.GetObject(idOf(ours))
		if err != nil {
			return err
		}
		if bytes.Equal(held, got) {
			return nil // already recorded (the reply came twice)
		}
		if err := tx.ReplaceObject(idOf(ours), held, got); err != nil {
			return err
		}
		return tx.MarkRecorded(row)
	})
	if err != nil {
		return err
	}
	e.log.Info("event recorded", "transaction_id", row.TransactionID, "sequence", row.Sequence, "event_type", p["event_type"], "to_state", row.ToState)
	return nil
}

// HandleReply processes the reply to a message that was delivered after
// the act returned pending (the outbox's OnDelivered). It is idempotent.
func (e *Engine) HandleReply(ctx context.Context, peer, txn string, sent, reply [][]byte) {
	unlock := e.lock(txn)
	defer unlock()
	for _, b := range sent {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			continue
		}
		switch typeOf(o) {
		case "transaction_event":
			if err := e.recordCountersigned(ctx, peer, o, b, reply); err != nil {
				e.log.Error("a countersignature did not verify", "transaction_id", txn, "event_id", idOf(o), "error", err)
				return
			}
		case "agreement":
			if len(sent) == 1 {
				if err := e.storeCosigned(ctx, peer, txn, o, reply); err != nil {
					e.log.Error("a co-signed agreement did not verify", "transaction_id", txn, "error", err)
					return
				}
			}
		}
	}
	if err := e.followUp(ctx, txn); err != nil && !e.queued(err) {
		e.log.Error("continuing the transaction failed", "transaction_id", txn, "error", err)
	}
}

// HandleFailure removes an act whose queued message the counterparty
// refused (the outbox's OnFailed).
func (e *Engine) HandleFailure(ctx context.Context, peer, txn string, sent [][]byte, cause error) {
	unlock := e.lock(txn)
	defer unlock()
	a := &act{txn: txn, peer: peer}
	for _, b := range sent {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			continue
		}
		switch typeOf(o) {
		case "transaction_event":
			a.ev = store.Event{Sequence: seqOf(o), EventID: idOf(o)}
		case "approval":
		default:
			a.created = append(a.created, b)
		}
	}
	if a.ev.EventID != "" {
		e.rollback(ctx, a)
	}
	e.log.Warn("the counterparty refused an act; it was removed", "transaction_id", txn, "codes", reason.CodesOf(cause), "error", cause)
}

func seqOf(o object) int {
	if n, ok := pl(o)["sequence"].(interface{ Int64() (int64, error) }); ok {
		v, _ := n.Int64()
		return int(v)
	}
	if n, ok := pl(o)["sequence"].(int); ok {
		return n
	}
	return 0
}

// receiveEvent is the countersigning side of every event: the checks the
// package documentation lists, then the countersignature. check runs the
// event type's own guard and the re-evaluation of the appender's act. It
// returns the reply: the countersigned event.
func (e *Engine) receiveEvent(ctx context.Context, from, txn string, ev object, supporting []object, supportingRaw [][]byte, check func(t store.Transaction) error) ([][]byte, error) {
	p := pl(ev)
	seq := seqOf(ev)
	if seq < 1 {
		return nil, refusef(reason.EvidenceChainGap, "event %s has no sequence", idOf(ev))
	}
	entries, _ := signature.Entries(ev)
	if len(entries) != 1 || str(entries[0]["purpose"]) != "event_append" {
		return nil, refusef(reason.EvidenceSignatureInvalid, "an event arrives with exactly one event_append signature, its appender's")
	}
	if k, err := e.o.ResolveKey(ctx, str(entries[0]["key_id"])); err != nil || len(k.HolderID) < 4 || k.HolderID[:4] != "agt_" {
		return nil, refusef(reason.EvidenceSignatureInvalid, "event %s is not signed by an agent key of %s", idOf(ev), from)
	}
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s is unknown here", txn)
	}
	if t.Counterparty != from {
		return nil, refusef(reason.StreamMismatch, "transaction %s is held with %s, not %s", txn, t.Counterparty, from)
	}
	evs, err := e.o.Store.Events(ctx, txn)
	if err != nil {
		return nil, err
	}
	for _, x := range evs {
		if x.Sequence != seq {
			continue
		}
		if x.ContentHash == hashOf(ev) && x.Status == store.EventRecorded {
			held, err := e.o.Store.GetObject(ctx, x.EventID)
			if err != nil {
				return nil, err
			}
			return [][]byte{held}, nil // the same event again: the same answer
		}
		raw, _ := canonical.Marshal(ev)
		detail := fmt.Sprintf("event %s at position %d of %s conflicts with event %s held there", idOf(ev), seq, txn, x.EventID)
		if x.Status == store.EventRecorded {
			_ = e.o.Store.Update(ctx, func(tx *store.Txn) error {
				return tx.RecordFork(txn, seq, idOf(ev), hashOf(ev), raw, from, detail)
			})
			e.log.Warn("fork refused and kept", "transaction_id", txn, "sequence", seq, "event_id", idOf(ev), "held", x.EventID)
		}
		return nil, fmt.Errorf("%w: %w", delivery.ErrConflict, refusef(reason.EvidenceChainGap, "%s", detail))
	}
	if seq != t.HeadSequence+1 || str(p["previous_event_hash"]) != t.HeadHash {
		return nil, refusef(reason.EvidenceChainGap, "event %s (position %d, predecessor %v) does not extend this record (head %d, %s)", idOf(ev), seq, p["previous_event_hash"], t.HeadSequence, t.HeadHash)
	}
	if str(p["from_state"]) != t.State {
		return nil, refusef(reason.StateTransitionDenied, "event %s moves from %v, this record is in %s", idOf(ev), p["from_state"], t.State)
	}
	to, ok := rules.Next(RulesVersion, rules.Aggregate, t.State, str(p["event_type"]))
	if !ok || to != str(p["to_state"]) {
		return nil, refusef(reason.StateTransitionDenied, "%v from %s is not a legal transition to %v under rules %s", p["event_type"], t.State, p["to_state"], RulesVersion)
	}
	if st := sub(p, "stream"); str(st["kind"]) != "transaction" || str(st["id"]) != txn {
		return nil, refusef(reason.StreamMismatch, "event %s is not on the stream of transaction %s", idOf(ev), txn)
	}
	if err := check(t); err != nil {
		return nil, err
	}
	signed, err := e.sign(ev, "event_append", e.o.Clock())
	if err != nil {
		return nil, err
	}
	row := store.Event{
		TransactionID: txn, Sequence: seq, EventID: idOf(ev), ContentHash: hashOf(ev), PreviousEventHash: t.HeadHash,
		EventType: str(p["event_type"]), FromState: t.State, ToState: to, AppendedBy: from, Status: store.EventPending,
	}
	err = e.o.Store.Update(ctx, func(tx *store.Txn) error {
		for _, b := range supportingRaw {
			if _, err := tx.PutObject(b, from); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		if _, err := tx.PutObject(signed, from); err != nil {
			return err
		}
		if err := tx.InsertEvent(row); err != nil {
			return err
		}
		return tx.MarkRecorded(row)
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("event countersigned", "transaction_id", txn, "sequence", seq, "event_type", row.EventType, "from", from, "to_state", to)
	return [][]byte{signed}, nil
}
