package store

// Budgets and what they count (migration 20; package budget says what a
// budget is and how it counts).
//
//	CREATE TABLE budgets (
//	  id, kind ('spend'|'exposure'), period ('day'|'week'|'month'|'quarter'),
//	  currency, limit_amount, approve_above ('' for none), agent_id ('' any),
//	  counterparty ('' any), set_at
//	);
//	CREATE TABLE spend (           -- one row per act that committed this organisation to pay
//	  act_id,                      -- the act's policy decision id
//	  transaction_id, currency, counterparty, agent_id,
//	  amount,                      -- the total the act committed to, a decimal
//	  at                           -- unix seconds
//	);
//	CREATE TABLE spend_payments (  -- one per settlement instruction this organisation made
//	  instruction_id, transaction_id, currency, counterparty, agent_id, amount, at
//	);
//
// A commitment and a payment are written by the act that makes them, in
// its own database transaction (Txn.Commit, Txn.Pay), and read there too
// (Txn.BudgetReader), so that counting and recording are one; an act the
// counterparty refused is removed with its rows (Txn.Unspend). A
// transaction's commitment is the largest of its acts', dated and
// attributed by its first. Whether a commitment still counts follows the
// transactions row (its state), and whether a payment does the
// settlements row (a payment the rail reported failed or reversed does
// not). Budgets read none of these rows: they read the running totals
// kept from them (migration 25, budgetsums.go), which every write brings
// up to date before it commits.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/decimal"
)

const budgetColumns = `id, kind, period, currency, limit_amount, approve_above, agent_id, counterparty`

func scanBudget(row rowScanner) (budget.Budget, error) {
	var id, kind, period, currency, limit, above, agent, cp string
	if err := row.Scan(&id, &kind, &period, &currency, &limit, &above, &agent, &cp); err != nil {
		return budget.Budget{}, err
	}
	b, err := budget.New(id, budget.Kind(kind), budget.Period(period), currency, limit, above, agent, cp)
	if err != nil {
		return b, fmt.Errorf("store: budget %s as stored: %w", id, err)
	}
	return b, nil
}

// PutBudget sets a budget, replacing the one of the same id.
func (s *Store) PutBudget(ctx context.Context, b budget.Budget) error {
	above := ""
	if b.HasApproval {
		above = b.ApproveAbove.String()
	}
	_, err := s.exec(ctx, `INSERT INTO budgets(`+budgetColumns+`, set_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET kind = excluded.kind, period = excluded.period, currency = excluded.currency,
		limit_amount = excluded.limit_amount, approve_above = excluded.approve_above, agent_id = excluded.agent_id,
		counterparty = excluded.counterparty, set_at = excluded.set_at`,
		b.ID, string(b.Kind), string(b.Period), b.Currency, b.Limit.String(), above, b.AgentID, b.Counterparty, now())
	if err != nil {
		return fmt.Errorf("store: put budget %s: %w", b.ID, err)
	}
	return nil
}

// RemoveBudget removes a budget; ErrNotFound when there is none.
func (s *Store) RemoveBudget(ctx context.Context, id string) error {
	res, err := s.exec(ctx, `DELETE FROM budgets WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: remove budget %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: budget %s", ErrNotFound, id)
	}
	return nil
}

// Budgets returns the budgets set, by id.
func (s *Store) Budgets(ctx context.Context) ([]budget.Budget, error) {
	rows, err := s.query(ctx, `SELECT `+budgetColumns+` FROM budgets ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: budgets: %w", err)
	}
	return collect(rows, scanBudget)
}

// Budgets returns the budgets set, read in t.
func (t *Txn) Budgets() ([]budget.Budget, error) {
	rows, err := t.query(`SELECT ` + budgetColumns + ` FROM budgets ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: budgets: %w", err)
	}
	return collect(rows, scanBudget)
}

// Committed returns a transaction's commitment in currency as recorded:
// the largest amount its acts committed to (zero when none).
func (t *Txn) Committed(transactionID, currency string) (decimal.Decimal, error) {
	rows, err := t.query(`SELECT amount FROM spend WHERE tseq = `+txnSeq+` AND currency = ?`, transactionID, currency)
	if err != nil {
		return decimal.Zero(), err
	}
	return largest(rows)
}

// largest reads the largest of a column of decimal amounts (zero when
// none).
func largest(rows *sql.Rows) (decimal.Decimal, error) {
	defer rows.Close()
	max := decimal.Zero()
	for rows.Next() {
		d, err := scanAmount(rows, "commitment")
		if err != nil {
			return max, err
		}
		max = decimal.Max(max, d)
	}
	return max, rows.Err()
}

// scanAmount reads a row of one decimal amount, the what (commitment,
// payment) of a spend row.
func scanAmount(row rowScanner, what string) (decimal.Decimal, error) {
	var a string
	if err := row.Scan(&a); err != nil {
		return decimal.Decimal{}, err
	}
	d, err := decimal.Parse(a)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("store: %s amount %q: %w", what, a, err)
	}
	return d, nil
}

// Commit records that act actID (the id of the act's policy decision, an
// object of its message) committed this organisation to pay total in
// c.Currency in c's transaction, at. A transaction's commitment is the
// largest of its acts', dated at the first (budget.Commitment).
func (t *Txn) Commit(actID string, c budget.Charge, total decimal.Decimal, at time.Time) error {
	if err := t.number(c.TransactionID); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO spend(tseq, act_id, transaction_id, currency, counterparty, agent_id, amount, at)
		VALUES (`+txnSeqAt(2)+`, ?1, ?2, ?3, ?4, ?5, ?6, ?7)`,
		actID, c.TransactionID, c.Currency, c.Counterparty, c.Agent, total.String(), at.Unix())
	return err
}

// Unspend forgets the commitments and payments of the acts of transaction
// transactionID whose objects ids are (an act the counterparty refused,
// removed whole).
func (t *Txn) Unspend(transactionID string, ids []string) error {
	for _, id := range ids {
		if _, err := t.exec(`DELETE FROM spend WHERE tseq = `+txnSeq+` AND act_id = ?`, transactionID, id); err != nil {
			return err
		}
		if _, err := t.exec(`DELETE FROM spend_payments WHERE tseq = `+txnSeq+` AND instruction_id = ?`, transactionID, id); err != nil {
			return err
		}
	}
	return nil
}

// Pay records a settlement instruction this organisation made, paying
// c.Amount in c's transaction, at.
func (t *Txn) Pay(instructionID string, c budget.Charge, at time.Time) error {
	if err := t.number(c.TransactionID); err != nil {
		return err
	}
	_, err := t.exec(`INSERT INTO spend_payments(tseq, instruction_id, transaction_id, currency, counterparty, agent_id, amount, at)
		VALUES (`+txnSeqAt(2)+`, ?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT DO NOTHING`, instructionID, c.TransactionID, c.Currency, c.Counterparty, c.Agent, c.Amount.String(), at.Unix())
	return err
}

// query runs a multi-row read inside the transaction.
func (t *Txn) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.s.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(t.ctx, st).QueryContext(t.ctx, args...)
}

// BudgetReader reads what budgets count inside t (budget.Reader), its
// own writes included: it brings the totals up to date first.
func (t *Txn) BudgetReader() budget.Reader {
	return budgetReader{query: t.query, before: t.settleCounts}
}

// BudgetReader reads what budgets count, for a report (budget.Reader);
// run it under a Snapshot for one consistent reading. Outside a write
// the totals are always up to date: every write brings them up to date
// before it commits (Update), and Open before it returns (fillCounts).
// A reading that finds them behind (a write outside Update, which none
// makes) fails instead of counting wrong.
func (s *Store) BudgetReader(ctx context.Context) budget.Reader {
	return budgetReader{
		query: func(q string, args ...any) (*sql.Rows, error) { return s.query(ctx, q, args...) },
		before: func() error {
			var behind bool
			if err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM budget_dirty)`).Scan(&behind); err != nil {
				return err
			}
			if behind {
				return errors.New("store: budget totals are behind the rows they count (a write outside Update)")
			}
			return nil
		},
	}
}

type budgetReader struct {
	query  func(string, ...any) (*sql.Rows, error)
	before func() error
}

func (r budgetReader) ready() error {
	if r.before == nil {
		return nil
	}
	return r.before()
}

// Spent sums the counted commitments of [from, to) from budget_sums:
// the whole days, hours and seconds it covers (cover).
func (r budgetReader) Spent(currency, agent, counterparty string, from, to time.Time) (decimal.Decimal, int, error) {
	if err := r.ready(); err != nil {
		return decimal.Zero(), 0, err
	}
	return r.sum(whatSpend, currency, anyOf(agent), anyOf(counterparty), cover(from.Unix(), to.Unix(), sumSpans))
}

func (r budgetReader) Unpaid(currency, counterparty string) (decimal.Decimal, error) {
	if err := r.ready(); err != nil {
		return decimal.Zero(), err
	}
	sum, _, err := r.sum(whatUnpaid, currency, anyParty, counterparty, unpaidSpan)
	return sum, err
}

func (r budgetReader) Paid(currency, counterparty string, from, to time.Time) (decimal.Decimal, int, error) {
	if err := r.ready(); err != nil {
		return decimal.Zero(), 0, err
	}
	return r.sum(whatPaid, currency, anyParty, counterparty, cover(from.Unix(), to.Unix(), sumSpans))
}

// unpaidSpan is where the 'unpaid' sums lie, which are not by time: one
// row at span 0, start 0.
var unpaidSpan = []spanRange{{0, 0, 1}}

// sum adds up the rows of budget_sums of what in currency by agent and
// counterparty (anyParty for every one) in spans.
func (r budgetReader) sum(what, currency, agent, counterparty string, spans []spanRange) (decimal.Decimal, int, error) {
	total, n := decimal.Zero(), 0
	for _, sp := range spans {
		rows, err := r.query(`SELECT total, n FROM budget_sums WHERE what = ? AND currency = ? AND agent_id = ? AND span = ? AND start >= ? AND start < ?
			AND counterparty = ?`, what, currency, agent, sp.span, sp.lo, sp.hi, counterparty)
		if err != nil {
			return total, n, fmt.Errorf("store: budget sums: %w", err)
		}
		d, k, err := addRows(rows)
		if err != nil {
			return total, n, err
		}
		total, n = total.Add(d), n+k
	}
	return total, n, nil
}

// addRows adds up rows of (decimal amount, count).
func addRows(rows *sql.Rows) (decimal.Decimal, int, error) {
	defer rows.Close()
	sum, n := decimal.Zero(), 0
	for rows.Next() {
		var a string
		var k int
		if err := rows.Scan(&a, &k); err != nil {
			return sum, n, err
		}
		d, err := decimal.Parse(a)
		if err != nil {
			return sum, n, fmt.Errorf("store: budget amount %q: %w", a, err)
		}
		sum, n = sum.Add(d), n+k
	}
	return sum, n, rows.Err()
}

// Committed returns a transaction's commitment in currency as recorded
// (zero when none).
func (s *Store) Committed(ctx context.Context, transactionID, currency string) (decimal.Decimal, error) {
	rows, err := s.query(ctx, `SELECT amount FROM spend WHERE tseq = `+txnSeq+` AND currency = ?`, transactionID, currency)
	if err != nil {
		return decimal.Zero(), err
	}
	return largest(rows)
}
