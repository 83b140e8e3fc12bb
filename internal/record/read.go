package record

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

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
// due condition is met at this instance's clock (timing.go).
type ObligationView struct {
	ObligationID string   `json:"obligation_id"`
	State        string   `json:"state"`
	Assertions   []string `json:"assertions"`
	// Timing is where an owed obligation (pending, due or rejected)
	// stands against its due condition: when it is due, when overdue.
	Timing *DueView `json:"timing,omitempty"`
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
	// (readmodel.ReadDisputes).
	Disputes       []readmodel.DisputeView       `json:"disputes"`
	Determinations []readmodel.DeterminationView `json:"determinations"`
	Exceptions     []readmodel.ExceptionView     `json:"exceptions"`
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

// Transaction returns a transaction's record. An unknown transaction is a
// refusal, never an empty draft.
func (e *Engine) Transaction(ctx context.Context, id string) (TransactionView, error) {
	t, err := e.db.GetTransaction(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return TransactionView{}, reason.Refuse("transaction " + id + " is unknown to this instance; call list_transactions")
	}
	if err != nil {
		return TransactionView{}, err
	}
	v := TransactionView{TransactionID: t.ID, Counterparty: t.Counterparty, Role: t.Role, SessionID: t.SessionID, State: t.State,
		ChainStatus: "intact", Events: []EventView{}, Objects: []ObjectView{}, Obligations: []ObligationView{}, Forks: []ForkView{}, Waiting: []WaitingView{}}
	evs, err := e.db.Events(ctx, id)
	if err != nil {
		return v, err
	}
	prev := ""
	for i, x := range evs {
		ev, err := e.get(ctx, x.EventID)
		if err != nil {
			return v, err
		}
		by := []string{}
		for _, en := range ev.Signatures() {
			if k, err := e.org.ResolveKey(ctx, str(en["key_id"])); err == nil {
				by = append(by, k.OrganizationID)
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
		if h, err := contentHash(ev); err != nil || h != x.ContentHash {
			v.ChainStatus = "broken"
		}
		prev = x.ContentHash
		if x.Status == store.EventPending {
			v.Pending = "event " + x.EventType + " waits for " + t.Counterparty + "'s countersignature"
		}
	}
	msgs, err := e.db.TransactionOutbox(ctx, id)
	if err != nil {
		return v, err
	}
	if len(msgs) > 0 && v.Pending == "" {
		v.Pending = e.waitingFor(t, msgs[0])
	}
	for _, m := range msgs {
		w := WaitingView{Counterparty: m.Peer, Carries: e.carried(m), Since: envelope.Timestamp(m.EnqueuedAt), Attempts: m.Attempts,
			NextAttempt: envelope.Timestamp(m.NextAttempt), LastError: m.LastError}
		if a, ok := e.away.Load(m.Peer); ok {
			w.UnreachableSince = envelope.Timestamp(a.(*away).since)
		}
		v.Waiting = append(v.Waiting, w)
	}
	forks, err := e.db.Forks(ctx, id)
	if err != nil {
		return v, err
	}
	for _, f := range forks {
		v.Forks = append(v.Forks, ForkView{Sequence: f.Sequence, EventID: f.EventID, ContentHash: f.ContentHash, From: f.From, Detail: f.Detail, DetectedAt: f.DetectedAt})
	}
	if len(forks) > 0 && v.ChainStatus == "intact" {
		v.ChainStatus = "forked"
	}
	all, err := e.db.TransactionObjects(ctx, id)
	if err != nil {
		return v, err
	}
	for _, b := range all {
		o, err := e.parse(b)
		if err != nil || o.Type() == protocol.TransactionEvent {
			continue
		}
		v.Objects = append(v.Objects, ObjectView{ID: o.ID(), ObjectType: string(o.Type()), CreatedBy: o.Org(), CreatedAt: str(o.Value()["created_at"])})
	}
	obls, err := e.db.ObligationStates(ctx, id)
	if err != nil {
		return v, err
	}
	var timing map[string]DueView
	if !protocol.State(t.State).Terminal() {
		if timing, _, err = e.dueViews(ctx, id, obls, e.clock()); err != nil {
			return v, err
		}
	}
	for _, ob := range obls {
		ov := ObligationView{ObligationID: ob.ObligationID, State: ob.State, Assertions: ob.Assertions}
		if d, ok := timing[ob.ObligationID]; ok {
			ov.Timing = &d
			if d.Due && ob.State == string(protocol.OblPending) {
				ov.State = string(protocol.OblDue)
			}
		}
		v.Obligations = append(v.Obligations, ov)
	}
	if v.TerminationProposals, err = e.terminationProposals(ctx, t); err != nil {
		return v, err
	}
	if v.Ledger, err = e.Balances(ctx, id); err != nil {
		return v, err
	}
	if err := e.disputeViews(ctx, t, &v); err != nil {
		return v, err
	}
	if n, err := e.db.Notice(ctx, id); err == nil && n != "" {
		var nt Notice
		if json.Unmarshal([]byte(n), &nt) == nil {
			v.Notice = &nt
		}
	}
	return v, nil
}

// ListTransactions returns one page of the transactions this instance
// holds (readmodel.ListTransactions).
func (e *Engine) ListTransactions(ctx context.Context, f readmodel.ListFilter) (readmodel.TransactionPage, error) {
	return readmodel.ListTransactions(ctx, e.db, f)
}

// Transactions lists every transaction this instance holds
// (readmodel.Transactions).
func (e *Engine) Transactions(ctx context.Context) ([]readmodel.TransactionSummary, error) {
	return readmodel.Transactions(ctx, e.db)
}

// InboxItem is an offer waiting for this agent's answer.
type InboxItem struct {
	OfferID       string         `json:"offer_id"`
	TransactionID string         `json:"transaction_id"`
	From          string         `json:"from_organization_id"`
	SessionID     string         `json:"session_id"`
	ValidUntil    string         `json:"valid_until"`
	Terms         map[string]any `json:"terms"`
	// AcceptanceAct is the act document accept_offer evaluates under the
	// given mandate: pass it to verify_mandate (and request_approval).
	// For an amendment offer it is accept_amendment's (agreement.amend).
	AcceptanceAct map[string]any `json:"acceptance_act,omitempty"`
	// Amendment says the offer amends the agreement in force (named by
	// AmendsAgreementID): accept it with accept_amendment.
	Amendment         bool   `json:"amendment,omitempty"`
	AmendsAgreementID string `json:"amends_agreement_id,omitempty"`
}

// Inbox lists the counterparties' offers this agent can still accept: the
// latest offer of each draft transaction, and each amendment offer of a
// committed or in_performance one, made by the counterparty, not lapsed
// and not withdrawn. With mandateID, each item carries the
// acceptance act document. It reads draft transactions only, by the state
// index, a page at a time (limit, default 50).
func (e *Engine) Inbox(ctx context.Context, a Actor, mandateID string, limit int) ([]InboxItem, error) {
	if a == (Actor{}) {
		return nil, errNoActor
	}
	if limit <= 0 {
		limit = store.DefaultPage
	}
	now := e.clock()
	// The mandate is read once for the page, not once per offer.
	var mandate map[string]any
	if mandateID != "" {
		mandate, _ = e.ownMandate(ctx, a, mandateID) // unknown: items without an act, as AcceptanceAct would refuse
	}
	out := []InboxItem{}
	// Only the transactions that may hold an open offer from the
	// counterparty (store migration 10), newest first, page after page:
	// however many transactions the instance holds, and however long ago
	// an amendment offer arrived, this reads those and no others. Where
	// it finds none open, it says so, and the transaction leaves the set
	// until an offer arrives again.
	cursor := ""
	for len(out) < limit {
		ts, next, err := e.db.ListTransactions(ctx, store.TransactionFilter{OpenOffer: true, Limit: store.MaxPage, Before: cursor})
		if err != nil {
			return nil, err
		}
		var closed []store.Transaction
		for _, t := range ts {
			if len(out) >= limit {
				break
			}
			it, open, err := e.inboxItem(ctx, a, t, mandate, now)
			if err != nil {
				return nil, err
			}
			switch {
			case it != nil:
				out = append(out, *it)
			case !open:
				closed = append(closed, t)
			}
		}
		if err := e.db.OffersClosed(ctx, closed); err != nil {
			return nil, err
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return out, nil
}

// inboxItem is the inbox's item for t: its latest offer when that is the
// counterparty's, current, not withdrawn and addressed to the calling
// agent, and, in a formed transaction, an amendment offer. open says
// whether t holds an open offer from the counterparty at all (one for
// another agent of this organisation is open, but not this agent's item).
func (e *Engine) inboxItem(ctx context.Context, a Actor, t store.Transaction, mandate map[string]any, now time.Time) (it *InboxItem, open bool, err error) {
	switch protocol.State(t.State) {
	case protocol.Draft, protocol.Committed, protocol.InPerformance:
	default:
		return nil, false, nil
	}
	// A transaction that cannot be read is left out of this page and stays
	// in the set: the next inbox looks again.
	unreadable := func(err error) (*InboxItem, bool, error) {
		e.log.Warn("inbox: a transaction could not be read", "transaction_id", t.ID, "error", err)
		return nil, true, nil
	}
	last, err := e.latestOffer(ctx, t.ID)
	if err != nil {
		return unreadable(err)
	}
	if last == nil || last.Org() != t.Counterparty || last.Expired(now) {
		return nil, false, nil
	}
	if w, err := e.db.Withdrawn(ctx, last.ID()); err != nil {
		return unreadable(err)
	} else if w {
		return nil, false, nil
	}
	item := InboxItem{OfferID: last.ID(), TransactionID: t.ID, From: t.Counterparty, SessionID: last.P("session_id"), ValidUntil: last.P("valid_until"), Terms: last.Terms()}
	if protocol.State(t.State) != protocol.Draft {
		amend, agr, err := e.openAmendment(ctx, t)
		if err != nil {
			return unreadable(err)
		}
		if amend == nil || amend.ID() != last.ID() {
			return nil, false, nil // the agreed offer, not an amendment
		}
		item.Amendment, item.AmendsAgreementID = true, agr.ID()
		if mandate != nil {
			item.AcceptanceAct = amendmentAct(last, agr, mandate)
		}
	} else if mandate != nil {
		item.AcceptanceAct = acceptanceAct(last, mandate)
	}
	if !a.self && str(last.PSub("offeree")["agent_id"]) != a.agent {
		return nil, true, nil // addressed to another agent of this organisation
	}
	return &item, true, nil
}
