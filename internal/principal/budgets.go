package principal

import (
	"context"

	"github.com/partyd/party/internal/budget"
)

// Budgets are the principal's to set (package budget): the agent's
// surface reads how they stand, and can neither set nor lift one.

// SetBudget sets a budget, replacing the one of the same id. It applies
// from the next act, whether or not 'party serve' is running.
func (s *Surface) SetBudget(ctx context.Context, b budget.Budget) error {
	if err := s.o.Store.PutBudget(ctx, b); err != nil {
		return err
	}
	s.o.Log.Info("budget set", "budget_id", b.ID, "kind", b.Kind, "period", b.Period, "currency", b.Currency, "limit", b.Limit.String())
	return nil
}

// RemoveBudget removes a budget.
func (s *Surface) RemoveBudget(ctx context.Context, id string) error {
	if err := s.o.Store.RemoveBudget(ctx, id); err != nil {
		return err
	}
	s.o.Log.Info("budget removed", "budget_id", id)
	return nil
}

// Budgets returns every budget as it stands now.
func (s *Surface) Budgets(ctx context.Context) ([]budget.Standing, error) {
	return s.o.BudgetStandings(ctx, "")
}
