package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Derived is what a transaction's view needs of the running engine,
// beside the database: what the engine alone holds (its parse cache, the
// keys it trusts, the peers it found away, its clock) or computes with
// rules that are its own (what a waiting message carries, due conditions,
// termination proposals, the ledger with its pending instructions).
// Package record implements it; a test fakes it.
type Derived interface {
	// Parse decodes stored bytes, through the engine's parse cache: the
	// view reads the objects the engine has parsed already.
	Parse(raw []byte) (*object.View, error)
	// SignerOrg is the organisation whose key keyID is, when this
	// instance resolves it.
	SignerOrg(ctx context.Context, keyID string) (string, bool)
	// Carries says, for a person, what an outbox message carries.
	Carries(m store.OutboxMessage) string
	// WaitingFor says what t waits for while m waits to be delivered.
	WaitingFor(t store.Transaction, m store.OutboxMessage) string
	// UnreachableSince is since when peer has not answered this
	// instance; false while it answers.
	UnreachableSince(peer string) (time.Time, bool)
	// Due is where each owed obligation of rows (txn's) stands against
	// its due condition at the instance's clock, by obligation id.
	Due(ctx context.Context, txn string, rows []store.ObligationState) (map[string]DueView, error)
	// TerminationProposals are t's termination records one party signed
	// and the other has not agreed to.
	TerminationProposals(ctx context.Context, t store.Transaction) ([]TerminationView, error)
	// Balances is each obligation's money in txn, with the instance's
	// own pending instructions (package ledger).
	Balances(ctx context.Context, txn string) ([]ledger.Balance, error)
}

// EventView is one event as the agent sees it.
type EventView struct {
	Sequence    int            `json:"sequence"`
	EventID     string         `json:"event_id"`
	EventType   string         `json:"event_type"`
	FromState   string         `json:"from_state"`
	ToState     string         `json:"to_state"`
	AppendedBy  string         `json:"appended_by"`
	Status      string         `json:"status"`
	SignedBy    []string       `json:"signed_by"`
	ContentHash string         `json:"content_hash"`
	OccurredAt  string         `json:"occurred_at"`
	Data        map[string]any `json:"data"`
}

// ObjectView names one object of the record.
type ObjectView struct {
	ID         string `json:"id"`
	ObjectType string `json:"object_type"`
	CreatedBy  string `json:"created_by"`
	CreatedAt  string `json:"created_at"`
}

// ObligationView is where one obligation stands. State is the obligation
// state of §6 as this copy derives it: "due" is a pending obligation whose
// due condition is met at this instance's clock ([Derived].Due).
type ObligationView struct {
	ObligationID string   `json:"obligation_id"`
	State        string   `json:"state"`
	Assertions   []string `json:"assertions"`
	// Timing is where an owed obligation (pending, due or rejected)
	// stands against its due condition: when it is due, when overdue.
	Timing *DueView `json:"timing,omitempty"`
}

// DueView is where an owed obligation stands against its due condition.
type DueView struct {
	// DueAt is when the condition is, or will be, met (absent while it
	// waits on an act, evidence or a discharge).
	DueAt string `json:"due_at,omitempty"`
	// Due says the condition is met at this instance's clock.
	Due bool `json:"due"`
	// OverdueAt is when the obligation is, or will be, overdue.
	OverdueAt string `json:"overdue_at,omitempty"`
	Overdue   bool   `json:"overdue"`
	// WaitingOn says what the condition waits on.
	WaitingOn string `json:"waiting_on,omitempty"`
	// Unevaluable says why the condition cannot be evaluated here (a
	// calendar not configured; a condition not registered).
	Unevaluable string `json:"unevaluable,omitempty"`
}

// WaitingView is one message of this instance's that waits to be
// delivered: what it carries, since when, how often it was tried and
// when it is tried next.
type WaitingView struct {
	Counterparty string `json:"counterparty_organization_id"`
	Carries      string `json:"carries"`
	Since        string `json:"since"`
	Attempts     int    `json:"attempts"`
	NextAttempt  string `json:"next_attempt"`
	LastError    string `json:"last_error,omitempty"`
	// UnreachableSince is set while the counterparty has not answered
	// this instance: since when.
	UnreachableSince string `json:"counterparty_unreachable_since,omitempty"`
}

// TerminationView is a termination record signed by one party and not yet
// agreed by the other, as the agent sees it.
type TerminationView struct {
	ProposedBy            string `json:"proposed_by"`
	SignatureID           string `json:"termination_signature_id"`
	TerminationRecordHash string `json:"termination_record_hash"`
	ProposedAt            string `json:"proposed_at"`
	// Current says the proposal is for the record as it stands: the other
	// party can agree to it.
	Current bool `json:"current"`
	// Record is the termination record as this copy holds it now, when the
	// proposal is current.
	Record map[string]any `json:"record,omitempty"`
}

// Notice tells the agent what became of an act that did not complete as it
// returned: refused by the counterparty after it was queued, or removed
// because a renewed decision no longer allowed it. The engine stores it,
// encoded as JSON, with the transaction (store.Txn.SetNotice).
type Notice struct {
	At     string        `json:"at"`
	Codes  []reason.Code `json:"reason_codes"`
	Detail string        `json:"detail"`
}

// TransactionView is a transaction's record as this instance holds it.
type TransactionView struct {
	TransactionID string           `json:"transaction_id"`
	Counterparty  string           `json:"counterparty_organization_id"`
	Role          string           `json:"role"`
	SessionID     string           `json:"session_id,omitempty"`
	State         string           `json:"state"`
	ChainStatus   string           `json:"chain_status"`
	Events        []EventView      `json:"events"`
	Objects       []ObjectView     `json:"objects"`
	Obligations   []ObligationView `json:"obligations"`
	Forks         []ForkView       `json:"forks"`
	// TerminationProposals are termination records one party signed and
	// the other has not agreed to yet (propose_termination); one that is
	// current is agreed to with agree_termination.
	TerminationProposals []TerminationView `json:"termination_proposals"`
	// Disputes, Determinations and Exceptions are the record's disputes,
	// determinations and exceptions, each with where it stands
	// ([ReadDisputes]).
	Disputes       []DisputeView       `json:"disputes"`
	Determinations []DeterminationView `json:"determinations"`
	Exceptions     []ExceptionView     `json:"exceptions"`
	// Ledger is each obligation's money as this copy reads it (package
	// ledger): owed, paid, in flight, forgone, outstanding, and every
	// instruction with what its receipts say; an agent decides its next
	// act from it without arithmetic of its own.
	Ledger  []ledger.Balance `json:"ledger"`
	Pending string           `json:"pending,omitempty"`
	// Waiting are the messages of this instance's that wait to be
	// delivered for this transaction, oldest first.
	Waiting []WaitingView `json:"waiting"`
	// Notice says what became of an act that did not complete as it
	// returned (refused after it was queued, or no longer allowed).
	Notice *Notice `json:"notice,omitempty"`
}

// ForkView is a refused second successor kept for the record.
type ForkView struct {
	Sequence    int    `json:"sequence"`
	EventID     string `json:"event_id"`
	ContentHash string `json:"content_hash"`
	From        string `json:"from_organization_id"`
	Detail      string `json:"detail"`
	DetectedAt  string `json:"detected_at"`
}

// Transaction reads transaction id's record from st, asking d what only
// the running engine knows (get_transaction_record, the admin pages). An
// unknown transaction is a refusal, never an empty draft.
//
// ChainStatus is "intact", "broken" when an event's sequence, previous
// hash or content hash does not follow, or "forked" when the chain is
// intact and a refused second successor was kept (store.Txn.RecordFork).
func Transaction(ctx context.Context, st *store.Store, d Derived, id string) (TransactionView, error) {
	t, err := st.GetTransaction(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return TransactionView{}, reason.Refuse("transaction " + id + " is unknown to this instance; call list_transactions")
	}
	if err != nil {
		return TransactionView{}, err
	}
	v := TransactionView{TransactionID: t.ID, Counterparty: t.Counterparty, Role: t.Role, SessionID: t.SessionID, State: t.State,
		ChainStatus: "intact", Events: []EventView{}, Objects: []ObjectView{}, Obligations: []ObligationView{}, Forks: []ForkView{}, Waiting: []WaitingView{}}
	// The transaction's objects, read once: the events are among them, and
	// the rest are listed below.
	all, err := st.TransactionObjects(ctx, id)
	if err != nil {
		return v, err
	}
	var objs []*object.View
	byID := map[string]*object.View{}
	for _, b := range all {
		if o, err := d.Parse(b); err == nil {
			objs = append(objs, o)
			byID[o.ID()] = o
		}
	}
	evs, err := st.Events(ctx, id)
	if err != nil {
		return v, err
	}
	prev := ""
	for i, x := range evs {
		ev := byID[x.EventID]
		if ev == nil { // not readable above: read it alone, for its error
			b, err := st.GetObject(ctx, x.TransactionID, x.EventID)
			if err != nil {
				return v, err
			}
			if ev, err = d.Parse(b); err != nil {
				return v, err
			}
		}
		by := []string{}
		for _, en := range ev.Signatures() {
			// A key this instance cannot resolve is shown by its id.
			if org, ok := d.SignerOrg(ctx, str(en["key_id"])); ok {
				by = append(by, org)
			} else {
				by = append(by, str(en["key_id"]))
			}
		}
		v.Events = append(v.Events, EventView{
			Sequence: x.Sequence, EventID: x.EventID, EventType: x.EventType, FromState: x.FromState, ToState: x.ToState,
			AppendedBy: x.AppendedBy, Status: x.Status, SignedBy: by, ContentHash: x.ContentHash, OccurredAt: ev.P("occurred_at"),
			Data: ev.PSub("data"),
		})
		if x.Sequence != i+1 || x.PreviousEventHash != prev {
			v.ChainStatus = "broken"
		}
		if h, err := canonical.ContentHash(ev.Value()); err != nil || h != x.ContentHash {
			v.ChainStatus = "broken"
		}
		prev = x.ContentHash
		if x.Status == store.EventPending {
			v.Pending = "event " + x.EventType + " waits for " + t.Counterparty + "'s countersignature"
		}
	}
	msgs, err := st.TransactionOutbox(ctx, id)
	if err != nil {
		return v, err
	}
	if len(msgs) > 0 && v.Pending == "" {
		v.Pending = d.WaitingFor(t, msgs[0])
	}
	for _, m := range msgs {
		w := WaitingView{Counterparty: m.Peer, Carries: d.Carries(m), Since: envelope.Timestamp(m.EnqueuedAt), Attempts: m.Attempts,
			NextAttempt: envelope.Timestamp(m.NextAttempt), LastError: m.LastError}
		if since, ok := d.UnreachableSince(m.Peer); ok {
			w.UnreachableSince = envelope.Timestamp(since)
		}
		v.Waiting = append(v.Waiting, w)
	}
	forks, err := st.Forks(ctx, id)
	if err != nil {
		return v, err
	}
	for _, f := range forks {
		v.Forks = append(v.Forks, ForkView{Sequence: f.Sequence, EventID: f.EventID, ContentHash: f.ContentHash, From: f.From, Detail: f.Detail, DetectedAt: f.DetectedAt})
	}
	if len(forks) > 0 && v.ChainStatus == "intact" {
		v.ChainStatus = "forked"
	}
	for _, o := range objs {
		if o.Type() == protocol.TransactionEvent {
			continue
		}
		v.Objects = append(v.Objects, ObjectView{ID: o.ID(), ObjectType: string(o.Type()), CreatedBy: o.Org(), CreatedAt: str(o.Value()["created_at"])})
	}
	obls, err := st.ObligationStates(ctx, id)
	if err != nil {
		return v, err
	}
	// An ended transaction owes nothing more: no due timing to show.
	var timing map[string]DueView
	if !protocol.State(t.State).Terminal() {
		if timing, err = d.Due(ctx, id, obls); err != nil {
			return v, err
		}
	}
	for _, ob := range obls {
		ov := ObligationView{ObligationID: ob.ObligationID, State: ob.State, Assertions: ob.Assertions}
		if dv, ok := timing[ob.ObligationID]; ok {
			ov.Timing = &dv
			if dv.Due && ob.State == string(protocol.OblPending) {
				ov.State = string(protocol.OblDue)
			}
		}
		v.Obligations = append(v.Obligations, ov)
	}
	if v.TerminationProposals, err = d.TerminationProposals(ctx, t); err != nil {
		return v, err
	}
	if v.Ledger, err = d.Balances(ctx, id); err != nil {
		return v, err
	}
	ds, err := ReadDisputes(ctx, st, t.ID)
	if err != nil {
		return v, err
	}
	v.Disputes, v.Determinations, v.Exceptions = ds.Disputes, ds.Determinations, ds.Exceptions
	// A notice that cannot be read is left out: the record reads without it.
	if n, err := st.Notice(ctx, id); err == nil && n != "" {
		var nt Notice
		if json.Unmarshal([]byte(n), &nt) == nil {
			v.Notice = &nt
		}
	}
	return v, nil
}
