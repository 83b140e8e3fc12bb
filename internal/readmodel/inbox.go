package readmodel

import (
	"context"
	"log/slog"
	"time"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
)

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

// Offers is what the inbox asks the engine: which offer of a transaction
// is its latest and which its open amendment (the engine's reading of
// the session), and the act documents accepting one would be evaluated
// as under the caller's mandate (nil without one).
type Offers interface {
	LatestOffer(ctx context.Context, txn string) (*object.Offer, error)
	OpenAmendment(ctx context.Context, t store.Transaction) (*object.Offer, *object.Agreement, error)
	AcceptanceAct(offer *object.Offer) map[string]any
	AmendmentAct(offer *object.Offer, agr *object.Agreement) map[string]any
}

// InboxFor says whose inbox is read, and how much of it.
type InboxFor struct {
	// Agent is the calling agent: an offer addressed to another agent of
	// the organisation is not its item. AnyAgent reads every agent's.
	Agent    string
	AnyAgent bool
	// Limit is the page's size (store.DefaultPage when 0).
	Limit int
	// Now is the instance's clock: a lapsed offer is no item.
	Now time.Time
}

// Inbox lists the counterparties' offers the agent can still accept: the
// latest offer of each draft transaction, and each amendment offer of a
// committed or in_performance one, made by the counterparty, not lapsed
// and not withdrawn, newest transaction first.
//
// It reads only the transactions that may hold an open offer from the
// counterparty (store migration 10), a page at a time: however many
// transactions the instance holds, and however long ago an amendment
// offer arrived, it reads those and no others. Where it finds none open
// it says so (store.OffersClosed), and the transaction leaves the set
// until an offer arrives again: the one write a read makes, keeping the
// set small.
func Inbox(ctx context.Context, st *store.Store, o Offers, q InboxFor, log *slog.Logger) ([]InboxItem, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultPage
	}
	out := []InboxItem{}
	cursor := ""
	for len(out) < limit {
		// Read in batches of what is still wanted: a batch of MaxPage read
		// that many transactions and their offers for a page of ten once
		// the history held that many open offers (BenchmarkHistory).
		ts, next, err := st.ListTransactions(ctx, store.TransactionFilter{OpenOffer: true, Limit: min(store.MaxPage, limit-len(out)), Before: cursor})
		if err != nil {
			return nil, err
		}
		var closed []store.Transaction
		for _, t := range ts {
			if len(out) >= limit {
				break
			}
			it, open := inboxItem(ctx, st, o, q, t, log)
			switch {
			case it != nil:
				out = append(out, *it)
			case !open:
				closed = append(closed, t)
			}
		}
		if err := st.OffersClosed(ctx, closed); err != nil {
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
func inboxItem(ctx context.Context, st *store.Store, o Offers, q InboxFor, t store.Transaction, log *slog.Logger) (it *InboxItem, open bool) {
	switch protocol.State(t.State) {
	case protocol.Draft, protocol.Committed, protocol.InPerformance:
	default:
		return nil, false
	}
	// A transaction that cannot be read is left out of this page and stays
	// in the set: the next inbox looks again.
	unreadable := func(err error) (*InboxItem, bool) {
		log.Warn("inbox: a transaction could not be read", "transaction_id", t.ID, "error", err)
		return nil, true
	}
	last, err := o.LatestOffer(ctx, t.ID)
	if err != nil {
		return unreadable(err)
	}
	if last == nil || last.Org() != t.Counterparty || last.Expired(q.Now) {
		return nil, false
	}
	if w, err := st.Withdrawn(ctx, last.ID()); err != nil {
		return unreadable(err)
	} else if w {
		return nil, false
	}
	item := InboxItem{OfferID: last.ID(), TransactionID: t.ID, From: t.Counterparty, SessionID: last.SessionID(), ValidUntil: last.P("valid_until"), Terms: last.Terms()}
	if protocol.State(t.State) != protocol.Draft {
		amend, agr, err := o.OpenAmendment(ctx, t)
		if err != nil {
			return unreadable(err)
		}
		if amend == nil || amend.ID() != last.ID() {
			return nil, false // the agreed offer, not an amendment
		}
		item.Amendment, item.AmendsAgreementID = true, agr.ID()
		item.AcceptanceAct = o.AmendmentAct(last, agr)
	} else {
		item.AcceptanceAct = o.AcceptanceAct(last)
	}
	if !q.AnyAgent && last.OffereeAgent() != q.Agent {
		return nil, true // addressed to another agent of this organisation
	}
	return &item, true
}
