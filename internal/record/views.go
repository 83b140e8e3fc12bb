package record

import (
	"context"
	"errors"
	"sort"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// EventView is one event as the agent sees it.
type EventView struct {
	Sequence    int      `json:"sequence"`
	EventID     string   `json:"event_id"`
	EventType   string   `json:"event_type"`
	FromState   string   `json:"from_state"`
	ToState     string   `json:"to_state"`
	AppendedBy  string   `json:"appended_by"`
	Status      string   `json:"status"`
	SignedBy    []string `json:"signed_by"`
	ContentHash string   `json:"content_hash"`
	Data        any      `json:"data"`
}

// ObjectView names one object of the record.
type ObjectView struct {
	ID         string `json:"id"`
	ObjectType string `json:"object_type"`
	CreatedBy  string `json:"created_by"`
}

// TransactionView is a transaction's record as this instance holds it.
type TransactionView struct {
	TransactionID string       `json:"transaction_id"`
	Counterparty  string       `json:"counterparty_organization_id"`
	Role          string       `json:"role"`
	SessionID     string       `json:"session_id,omitempty"`
	State         string       `json:"state"`
	ChainStatus   string       `json:"chain_status"`
	Events        []EventView  `json:"events"`
	Objects       []ObjectView `json:"objects"`
	Forks         []store.Fork `json:"forks"`
	Pending       string       `json:"pending,omitempty"`
}

// Transaction returns a transaction's record. An unknown transaction is a
// refusal, never an empty draft.
func (e *Engine) Transaction(ctx context.Context, id string) (TransactionView, error) {
	t, err := e.o.Store.GetTransaction(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return TransactionView{}, reason.Refuse("transaction " + id + " is unknown to this instance; call list_transactions")
	}
	if err != nil {
		return TransactionView{}, err
	}
	v := TransactionView{TransactionID: t.ID, Counterparty: t.Counterparty, Role: t.Role, SessionID: t.SessionID, State: t.State,
		ChainStatus: "intact", Events: []EventView{}, Objects: []ObjectView{}}
	evs, err := e.o.Store.Events(ctx, id)
	if err != nil {
		return v, err
	}
	prev := ""
	for i, x := range evs {
		ev, _, err := e.load(ctx, x.EventID)
		if err != nil {
			return v, err
		}
		entries, _ := signature.Entries(ev)
		var by []string
		for _, en := range entries {
			if k, err := e.o.ResolveKey(ctx, str(en["key_id"])); err == nil {
				by = append(by, k.OrganizationID)
			} else {
				by = append(by, str(en["key_id"]))
			}
		}
		v.Events = append(v.Events, EventView{
			Sequence: x.Sequence, EventID: x.EventID, EventType: x.EventType, FromState: x.FromState, ToState: x.ToState,
			AppendedBy: x.AppendedBy, Status: x.Status, SignedBy: by, ContentHash: x.ContentHash, Data: pl(ev)["data"],
		})
		if x.Sequence != i+1 || x.PreviousEventHash != prev {
			v.ChainStatus = "broken"
		}
		if h, err := canonical.ContentHash(ev); err != nil || h != x.ContentHash {
			v.ChainStatus = "broken"
		}
		prev = x.ContentHash
		if x.Status == store.EventPending {
			v.Pending = "event " + x.EventType + " waits for " + t.Counterparty + "'s countersignature"
		}
	}
	forks, err := e.o.Store.Forks(ctx, id)
	if err != nil {
		return v, err
	}
	v.Forks = forks
	if v.Forks == nil {
		v.Forks = []store.Fork{}
	}
	if len(forks) > 0 && v.ChainStatus == "intact" {
		v.ChainStatus = "forked"
	}
	all, err := e.o.Store.TransactionObjects(ctx, id)
	if err != nil {
		return v, err
	}
	for _, b := range all {
		o, err := canonical.DecodeObject(b)
		if err != nil || typeOf(o) == "transaction_event" {
			continue
		}
		v.Objects = append(v.Objects, ObjectView{ID: idOf(o), ObjectType: typeOf(o), CreatedBy: str(sub(o, "created_by")["organization_id"])})
	}
	return v, nil
}

// TransactionSummary is one line of list_transactions.
type TransactionSummary struct {
	TransactionID string `json:"transaction_id"`
	Counterparty  string `json:"counterparty_organization_id"`
	Role          string `json:"role"`
	State         string `json:"state"`
	Events        int    `json:"events"`
	UpdatedAt     string `json:"updated_at"`
}

// Transactions lists every transaction this instance holds.
func (e *Engine) Transactions(ctx context.Context) ([]TransactionSummary, error) {
	ts, err := e.o.Store.Transactions(ctx)
	if err != nil {
		return nil, err
	}
	out := []TransactionSummary{}
	for _, t := range ts {
		out = append(out, TransactionSummary{TransactionID: t.ID, Counterparty: t.Counterparty, Role: t.Role, State: t.State, Events: t.HeadSequence, UpdatedAt: t.UpdatedAt})
	}
	return out, nil
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
	AcceptanceAct map[string]any `json:"acceptance_act,omitempty"`
}

// Inbox lists the counterparties' offers this agent can still accept: the
// latest offer of each draft transaction, made by the counterparty, not
// lapsed. With mandateID, each item carries the acceptance act document.
func (e *Engine) Inbox(ctx context.Context, mandateID string) ([]InboxItem, error) {
	ts, err := e.o.Store.Transactions(ctx)
	if err != nil {
		return nil, err
	}
	now := e.o.Clock()
	out := []InboxItem{}
	for _, t := range ts {
		if t.State != "draft" {
			continue
		}
		offers, err := e.offers(ctx, t.ID)
		if err != nil || len(offers) == 0 {
			continue
		}
		last := offers[len(offers)-1]
		if str(sub(last, "created_by")["organization_id"]) != t.Counterparty || expired(last, now) {
			continue
		}
		if w, _ := e.o.Store.Withdrawn(ctx, idOf(last)); w {
			continue
		}
		p := pl(last)
		terms, _ := p["terms"].(map[string]any)
		it := InboxItem{OfferID: idOf(last), TransactionID: t.ID, From: t.Counterparty, SessionID: str(p["session_id"]), ValidUntil: str(p["valid_until"]), Terms: terms}
		if mandateID != "" {
			if act, err := e.AcceptanceAct(ctx, mandateID, idOf(last)); err == nil {
				it.AcceptanceAct = act
			}
		}
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionID < out[j].TransactionID })
	return out, nil
}

// Resume continues every transaction whose formation this instance drives
// and that stopped half-way (after a restart, say). It is idempotent.
func (e *Engine) Resume(ctx context.Context) {
	ts, err := e.o.Store.Transactions(ctx)
	if err != nil {
		return
	}
	for _, t := range ts {
		// A reply that arrived but was not processed (the process stopped in
		// between) is in the outbox: process it now.
		if evs, err := e.o.Store.Events(ctx, t.ID); err == nil && len(evs) > 0 && evs[len(evs)-1].Status == store.EventPending {
			if msgs, err := e.o.Store.DeliveredOutbox(ctx, t.ID); err == nil {
				for _, m := range msgs {
					e.HandleReply(ctx, m.Peer, m.TransactionID, m.Objects, m.Reply)
				}
			}
		}
		if t.State != "agreement_pending" {
			continue
		}
		unlock := e.lock(t.ID)
		if err := e.followUp(ctx, t.ID); err != nil && !e.queued(err) {
			e.log.Warn("resuming formation failed", "transaction_id", t.ID, "error", err)
		}
		unlock()
	}
}
