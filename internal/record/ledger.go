package record

import (
	"context"
	"time"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
)

// The ledger of a transaction as this copy of the record holds it
// (package ledger): what the acting side checks an act against before it
// builds it, and what the agent and the principal are shown. The
// countersigner reads the same rules through the verifier's run over the
// extended record (verify.Extend), and its live checks call them again by
// name: one rule, one place.

// ledgerTypes are the objects a balance reads.
var ledgerTypes = []string{
	string(protocol.Agreement), string(protocol.Obligation), string(protocol.ObligationResponse), string(protocol.PerformanceEvent),
	string(protocol.Determination), string(protocol.Settlement), string(protocol.AdapterReceipt), string(protocol.Evidence),
}

// ledgerEvents are the events a balance reads.
var ledgerEvents = []string{
	string(protocol.EvAcceptanceGranted), string(protocol.EvAcceptanceRejected),
	string(protocol.EvSettlementInstructed), string(protocol.EvTransactionCompleted),
	string(protocol.EvTerminationAgreed), string(protocol.EvTransactionTerminated),
}

// ledgerRecord reads txn's record for the ledger: the objects it holds
// and the recorded events a balance reads. Objects of this instance's own
// acts still awaiting their countersignature are not part of the record
// (a pending act is not recorded) and are left out, but for a pending
// settlement instruction, which counts as in flight: money on its way is
// money the payer may not instruct again.
func (e *Engine) ledgerRecord(ctx context.Context, txn string) (ledger.Record, error) {
	rec := ledger.Record{TransactionID: txn}
	pending := map[string]bool{} // objects of own acts not yet recorded
	msgs, err := e.db.TransactionOutbox(ctx, txn)
	if err != nil {
		return rec, err
	}
	for _, m := range msgs {
		objs, err := e.message(m)
		if err != nil || len(objs) == 0 {
			continue
		}
		ev := messageEvent(objs)
		if ev == nil || ev.Org() != e.org.Config().OrganizationID {
			continue // an act recorded by its objects alone counts once sent (a waiver), or a countersignature
		}
		if x, err := e.db.EventAt(ctx, txn, ev.Seq()); err != nil || x.Status == store.EventRecorded || x.EventID != ev.ID() {
			continue
		}
		for _, o := range objs {
			pending[o.ID()] = true
		}
		if ev.EventType() == protocol.EvSettlementInstructed {
			rec.InFlight = append(rec.InFlight, ev.Data("settlement_instruction_id"))
			delete(pending, ev.Data("settlement_instruction_id"))
		}
	}
	objs, err := e.views.ParseAll(e.db.TransactionObjectsOfTypes(ctx, txn, ledgerTypes...))
	if err != nil {
		return rec, err
	}
	for _, o := range objs {
		if !pending[o.ID()] {
			rec.Objects = append(rec.Objects, o.Value())
		}
	}
	rows, err := e.db.EventsOfTypes(ctx, txn, ledgerEvents...)
	if err != nil {
		return rec, err
	}
	for _, x := range rows {
		if x.Status != store.EventRecorded {
			continue
		}
		ev, err := e.getEvent(ctx, txn, x.EventID)
		if err != nil {
			return rec, err
		}
		rec.Events = append(rec.Events, ev.Value())
	}
	return rec, nil
}

// ledgerOf is txn's ledger as this copy holds it now.
func (e *Engine) ledgerOf(ctx context.Context, txn string) (*ledger.Ledger, error) {
	rec, err := e.ledgerRecord(ctx, txn)
	if err != nil {
		return nil, err
	}
	return ledger.Compute(rec), nil
}

// ledgerAt is txn's ledger as the record stood at t (an act's own time:
// the record it signs is the one a third party recomputes at its time).
func (e *Engine) ledgerAt(ctx context.Context, txn string, t time.Time) (*ledger.Ledger, error) {
	rec, err := e.ledgerRecord(ctx, txn)
	if err != nil {
		return nil, err
	}
	return ledger.ComputeAt(rec, t), nil
}

// Balances returns each obligation's balance in txn as this copy holds it
// now, in issue order (package ledger).
func (e *Engine) Balances(ctx context.Context, txn string) ([]ledger.Balance, error) {
	l, err := e.ledgerOf(ctx, txn)
	if err != nil {
		return nil, err
	}
	return l.Obligations, nil
}
