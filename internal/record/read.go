package record

import (
	"context"
	"time"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
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

// Inbox lists the counterparties' offers this agent can still accept
// (readmodel.Inbox), a page at a time (limit, default 50). With
// mandateID, each item carries the act document accepting it is
// evaluated as.
func (e *Engine) Inbox(ctx context.Context, a Actor, mandateID string, limit int) ([]readmodel.InboxItem, error) {
	if a == (Actor{}) {
		return nil, errNoActor
	}
	// The mandate is read once for the page, not once per offer.
	var mandate map[string]any
	if mandateID != "" {
		mandate, _ = e.ownMandate(ctx, a, mandateID) // unknown: items without an act, as AcceptanceAct would refuse
	}
	return readmodel.Inbox(ctx, e.db, inboxOffers{e, mandate},
		readmodel.InboxFor{Agent: a.agent, AnyAgent: a.self, Limit: limit, Now: e.clock()}, e.log)
}

// inboxOffers answers the inbox's questions (readmodel.Offers) for one
// page, under the caller's mandate.
type inboxOffers struct {
	e       *Engine
	mandate map[string]any
}

func (o inboxOffers) LatestOffer(ctx context.Context, txn string) (*object.Offer, error) {
	return o.e.latestOffer(ctx, txn)
}

func (o inboxOffers) OpenAmendment(ctx context.Context, t store.Transaction) (*object.Offer, *object.Agreement, error) {
	return o.e.openAmendment(ctx, t)
}

func (o inboxOffers) AcceptanceAct(offer *object.Offer) map[string]any {
	if o.mandate == nil {
		return nil
	}
	return acceptanceAct(offer, o.mandate)
}

func (o inboxOffers) AmendmentAct(offer *object.Offer, agr *object.Agreement) map[string]any {
	if o.mandate == nil {
		return nil
	}
	return amendmentAct(offer, agr, o.mandate)
}
