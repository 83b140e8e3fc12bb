package org

import (
	"context"
	"time"

	"github.com/partyd/party/internal/budget"
)

// BudgetStandings reads every budget of this organisation that applies to
// agent ("" for all of them) as it stands at the organisation's clock, an
// exposure budget that names no counterparty once for each pinned peer
// (package budget).
func (o *Org) BudgetStandings(ctx context.Context, agent string) ([]budget.Standing, error) {
	st, done := o.Store.Snapshot(ctx)
	defer done()
	bs, err := st.Budgets(ctx)
	if err != nil || len(bs) == 0 {
		return []budget.Standing{}, err
	}
	var peers []string
	for _, p := range o.Peers.Peers() {
		peers = append(peers, p.OrganizationID)
	}
	return budget.Standings(st.BudgetReader(ctx), bs, agent, peers, o.Clock())
}

// BudgetVerdicts is what the budgets that apply to c would say of it now
// (c.Amount committed in its transaction, less what is already), before anything is recorded: what
// verify_mandate reports. The act itself is counted again when it is
// taken, in the write that records it.
func (o *Org) BudgetVerdicts(ctx context.Context, c budget.Charge) ([]budget.Verdict, error) {
	st, done := o.Store.Snapshot(ctx)
	defer done()
	bs, err := st.Budgets(ctx)
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	held, err := st.Committed(ctx, c.TransactionID, c.Currency)
	if err != nil {
		return nil, err
	}
	c.Amount = c.Amount.Sub(held)
	return budget.Evaluate(st.BudgetReader(ctx), bs, c, o.Clock().UTC().Truncate(time.Second))
}
