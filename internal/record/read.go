package record

import (
	"context"
	"time"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/store"
)

// Transaction returns a transaction's record (readmodel.Transaction): an
// unknown transaction is a refusal, never an empty draft.
func (e *Engine) Transaction(ctx context.Context, id string) (readmodel.TransactionView, error) {
	return readmodel.Transaction(ctx, e.db, derived{e}, id)
}

// derived answers what a transaction's view asks of the running engine
// (readmodel.Derived), with the engine's own functions: the view is
// assembled in package readmodel, the answers stay here.
type derived struct{ e *Engine }

func (d derived) Parse(raw []byte) (*Obj, error) { return d.e.parse(raw) }

func (d derived) SignerOrg(ctx context.Context, keyID string) (string, bool) {
	k, err := d.e.org.ResolveKey(ctx, keyID)
	if err != nil {
		return "", false
	}
	return k.OrganizationID, true
}

func (d derived) Carries(m store.OutboxMessage) string { return d.e.carried(m) }

func (d derived) WaitingFor(t store.Transaction, m store.OutboxMessage) string {
	return d.e.waitingFor(t, m)
}

func (d derived) UnreachableSince(peer string) (time.Time, bool) {
	a, ok := d.e.away.Load(peer)
	if !ok {
		return time.Time{}, false
	}
	return a.(*away).since, true
}

func (d derived) Due(ctx context.Context, txn string, rows []store.ObligationState) (map[string]readmodel.DueView, error) {
	views, _, err := d.e.dueViews(ctx, txn, rows, d.e.clock())
	return views, err
}

func (d derived) TerminationProposals(ctx context.Context, t store.Transaction) ([]readmodel.TerminationView, error) {
	return d.e.terminationProposals(ctx, t)
}

func (d derived) Balances(ctx context.Context, txn string) ([]ledger.Balance, error) {
	return d.e.Balances(ctx, txn)
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
	item := InboxItem{OfferID: last.ID(), TransactionID: t.ID, From: t.Counterparty, SessionID: last.SessionID(), ValidUntil: last.P("valid_until"), Terms: last.Terms()}
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
	if !a.self && last.OffereeAgent() != a.agent {
		return nil, true, nil // addressed to another agent of this organisation
	}
	return &item, true, nil
}
