package store

// Running totals (migration 25): what budgets count, kept as it changes.
//
// A budget's reading was a read of every transaction of its period, at
// each act it applied to, and the approvals page's reading of a mandate
// one of every transaction since the mandate took effect. Both are sums
// of one figure per transaction (budget.Commitment.Counted, dated and
// attributed by the transaction's first act) or per payment, so the store
// keeps those figures and their sums:
//
//	CREATE TABLE spend_counts (     -- one per transaction held and currency it committed in
//	  tseq, currency,               -- keyed by its transaction's number (migration 31)
//	  transaction_id,
//	  at, agent_id, counterparty,   -- its first act's (budget.Commitment)
//	  counted,                      -- Commitment.Counted now
//	  unpaid                        -- Commitment.Unpaid now; NULL when zero
//	);
//	CREATE TABLE payment_counts (   -- one per payment (spend_payments)
//	  tseq, instruction_id,         -- keyed by its transaction's number (migration 31)
//	  transaction_id, currency, counterparty, at,
//	  counted                       -- its amount; 0 once the rail reported it failed or reversed
//	);
//	CREATE TABLE budget_sums (      -- the sums of the counts above
//	  what,                         -- 'spend' (counted), 'paid' (payments), by day, hour and second;
//	                                -- 'unpaid', one row a currency and counterparty (span 0, start 0)
//	  currency,
//	  agent_id,                     -- '*': every one
//	  span (86400|3600|1|0), start, -- unix seconds, a multiple of span
//	  counterparty,                 -- '*': every one
//	  total, n                      -- the sum, a decimal; how many counts it adds
//	);                              -- keyed in that order
//
// A count changes only when one of the rows it is computed from does:
// spend and spend_payments (an act commits, pays, or is refused and
// removed: Commit, Pay, Unspend), settlements (the rail reports a payment
// failed or reversed), transactions (its state, or the transaction
// removed). Triggers on those tables name the transaction in
// budget_dirty, whoever wrote them; settleCounts, which every Update runs
// after its function and before its commit, computes those transactions'
// counts again from their own rows (recount), and moves each change into
// the sums of its day, hour and second, in the same database
// transaction. So the counts are never older than the rows, a refused or
// rolled-back act takes its counts with it, and a transaction's count is
// computed by one function whatever changed. Only figures that changed
// write: a completion moves no count, a termination or a cancellation
// does.
//
// Reading [from, to) costs the whole days, hours and seconds it covers
// (cover), one range of rows each, never a transaction's count: a
// budget's period is whole days, so it reads at most 92 rows a scope; a
// mandate since its valid_from reads, beside the days, at most 46 hours
// and 7 198 seconds at its ends, however many transactions were
// committed in them (a burst of thousands in one second is one row). The
// sums are exact decimals, added by a function registered with the driver
// (decimalAddFunc): the amounts are A202 decimals, and SQLite's sum is
// floating point.
//
// The sums hold each scope a budget reads: by agent and counterparty, by
// either, by neither ('*'). A payment's sums, and what is committed and
// not yet paid, are by counterparty only: an exposure budget reads them
// towards one counterparty, the unpaid part of every open transaction in
// one row, not one per open transaction. The key puts the counterparty
// last, so that the rows one count moves (its agent's and every agent's,
// each at its day, hour and second) lie on six runs of the table, not
// twelve; a reading by counterparty skips the other counterparties'
// rows of its days and hours.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/protocol"
	"modernc.org/sqlite"
)

const (
	whatSpend  = "spend"
	whatPaid   = "paid"
	whatUnpaid = "unpaid"
	// anyParty is budget_sums' agent or counterparty for the sum over
	// every one; no agent or organisation id is "*".
	anyParty = "*"
)

// sumSpans are the spans budget_sums keeps, longest first: a day, an
// hour and a second. The times counted are whole seconds, so any period
// is whole spans: at most its days, 46 hours and 7 198 seconds.
var sumSpans = []int64{86400, 3600, 1}

func anyOf(id string) string {
	if id == "" {
		return anyParty
	}
	return id
}

// spanRange is the spans of one length starting in [lo, hi).
type spanRange struct{ span, lo, hi int64 }

// cover splits the seconds [lo, hi) into whole spans, the longest that
// fit first; spans ends with 1, so nothing is left over.
func cover(lo, hi int64, spans []int64) []spanRange {
	if lo >= hi || len(spans) == 0 {
		return nil
	}
	s := spans[0]
	a, b := -floorTo(-lo, s), floorTo(hi, s) // lo rounded up, hi down
	if a >= b {
		return cover(lo, hi, spans[1:])
	}
	return append(append([]spanRange{{s, a, b}}, cover(lo, a, spans[1:])...), cover(b, hi, spans[1:])...)
}

// floorTo is the largest multiple of s at or below x.
func floorTo(x, s int64) int64 {
	q := x / s
	if x%s != 0 && x < 0 {
		q--
	}
	return q * s
}

// spendCount is a transaction's row of spend_counts.
type spendCount struct {
	at                  int64
	agent, counterparty string
	counted, unpaid     decimal.Decimal
}

func (c spendCount) same(o spendCount) bool {
	return c.at == o.at && c.agent == o.agent && c.counterparty == o.counterparty && c.counted.Cmp(o.counted) == 0 && c.unpaid.Cmp(o.unpaid) == 0
}

// paymentCount is a payment's row of payment_counts.
type paymentCount struct {
	currency, counterparty string
	at                     int64
	counted                decimal.Decimal
}

func (p paymentCount) same(o paymentCount) bool {
	return p.currency == o.currency && p.counterparty == o.counterparty && p.at == o.at && p.counted.Cmp(o.counted) == 0
}

// settleCounts brings the counts and sums of every transaction in
// budget_dirty up to date, and empties it.
func (t *Txn) settleCounts() error {
	ids, err := t.transactionIDs(`SELECT transaction_id FROM budget_dirty`)
	if err != nil || len(ids) == 0 {
		return err
	}
	if err := t.recountAll(ids); err != nil {
		return err
	}
	_, err = t.exec(`DELETE FROM budget_dirty`)
	return err
}

// transactionIDs runs q, a query of transaction ids.
func (t *Txn) transactionIDs(q string, args ...any) ([]string, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row rowScanner) (string, error) {
		var id string
		return id, row.Scan(&id)
	})
}

// recountAll recounts the transactions ids and adds their changes into
// the sums, once for them all.
func (t *Txn) recountAll(ids []string) error {
	d := sumDeltas{}
	for _, id := range ids {
		if err := t.recount(id, d); err != nil {
			return fmt.Errorf("store: budget counts of %s: %w", id, err)
		}
	}
	if err := t.addSums(d); err != nil {
		return fmt.Errorf("store: budget sums: %w", err)
	}
	return nil
}

// recount computes transaction id's counts from its own rows, writes
// those that changed, and adds their changes to d, for the caller to add
// into the sums once for every transaction it recounts (addSums).
func (t *Txn) recount(id string, d sumDeltas) error {
	spendNow, spendWas, payNow, payWas, err := t.counts(id)
	if err != nil {
		return err
	}
	for currency, was := range spendWas {
		now, ok := spendNow[currency]
		if ok && now.same(was) {
			continue
		}
		d.spend(currency, was, -1)
		if !ok {
			if _, err := t.exec(`DELETE FROM spend_counts WHERE tseq = `+txnSeq+` AND currency = ?`, id, currency); err != nil {
				return err
			}
		}
	}
	for currency, now := range spendNow {
		if was, ok := spendWas[currency]; ok && now.same(was) {
			continue
		}
		d.spend(currency, now, +1)
		var unpaid any
		if !now.unpaid.IsZero() {
			unpaid = now.unpaid.String()
		}
		if _, err := t.exec(`INSERT INTO spend_counts(tseq, transaction_id, currency, at, agent_id, counterparty, counted, unpaid)
			VALUES (`+txnSeqAt(1)+`, ?1, ?2, ?3, ?4, ?5, ?6, ?7)
			ON CONFLICT DO UPDATE SET at = excluded.at, agent_id = excluded.agent_id, counterparty = excluded.counterparty,
			counted = excluded.counted, unpaid = excluded.unpaid`, id, currency, now.at, now.agent, now.counterparty, now.counted.String(), unpaid); err != nil {
			return err
		}
	}
	for instr, was := range payWas {
		now, ok := payNow[instr]
		if ok && now.same(was) {
			continue
		}
		d.paid(was, -1)
		if !ok {
			if _, err := t.exec(`DELETE FROM payment_counts WHERE tseq = `+txnSeq+` AND instruction_id = ?`, id, instr); err != nil {
				return err
			}
		}
	}
	for instr, now := range payNow {
		if was, ok := payWas[instr]; ok && now.same(was) {
			continue
		}
		d.paid(now, +1)
		if _, err := t.exec(`INSERT INTO payment_counts(tseq, instruction_id, transaction_id, currency, counterparty, at, counted)
			VALUES (`+txnSeqAt(2)+`, ?1, ?2, ?3, ?4, ?5, ?6)
			ON CONFLICT DO UPDATE SET currency = excluded.currency,
			counterparty = excluded.counterparty, at = excluded.at, counted = excluded.counted`,
			instr, id, now.currency, now.counterparty, now.at, now.counted.String()); err != nil {
			return err
		}
	}
	return nil
}

// transactionCounts is what one statement reads of a transaction for
// its recount: its state, its commitments and payments (with their
// settlements' states), and its counts as kept; one statement, not five,
// as a recount runs in the act that commits the organisation to pay.
var transactionCounts = `
	SELECT 's', state, '', '', '', 0, '' FROM transactions WHERE id = ?1
	UNION ALL SELECT 'c', act_id, currency, counterparty, agent_id, at, amount FROM spend WHERE tseq = ` + txnSeqAt(1) + `
	UNION ALL SELECT 'p', p.instruction_id, p.currency, p.counterparty, COALESCE(st.state, ''), p.at, p.amount
		FROM spend_payments p LEFT JOIN settlements st ON st.instruction_id = p.instruction_id AND st.tseq = p.tseq WHERE p.tseq = ` + txnSeqAt(1) + `
	UNION ALL SELECT 'C', currency, agent_id, counterparty, COALESCE(unpaid, '0'), at, counted FROM spend_counts WHERE tseq = ` + txnSeqAt(1) + `
	UNION ALL SELECT 'P', instruction_id, currency, counterparty, '', at, counted FROM payment_counts WHERE tseq = ` + txnSeqAt(1)

// counts reads transaction id's counts now, computed from its rows, and as
// kept. Now: each currency's commitment (budget.Commitment: its acts'
// largest amount, dated and attributed by its first act, the
// transaction's state, what was paid in that currency) while the
// transaction is held, and each payment's amount unless the rail
// reported it failed or reversed.
func (t *Txn) counts(id string) (spendNow, spendWas map[string]spendCount, payNow, payWas map[string]paymentCount, err error) {
	spendNow, spendWas = map[string]spendCount{}, map[string]spendCount{}
	payNow, payWas = map[string]paymentCount{}, map[string]paymentCount{}
	rows, err := t.query(transactionCounts, id)
	if err != nil {
		return
	}
	defer rows.Close()
	var state string
	held := false
	type first struct {
		act string
		spendCount
	}
	firsts := map[string]first{}
	amounts := map[string]decimal.Decimal{}
	paid := map[string]decimal.Decimal{}
	for rows.Next() {
		var kind, a, currency, cp, b, amount string
		var at int64
		if err = rows.Scan(&kind, &a, &currency, &cp, &b, &at, &amount); err != nil {
			return
		}
		if kind == "s" {
			state, held = a, true
			continue
		}
		var d decimal.Decimal
		if d, err = decimal.Parse(amount); err != nil {
			err = fmt.Errorf("%s %s amount %q: %w", kind, a, amount, err)
			return
		}
		switch kind {
		case "c": // a: act, b: agent
			amounts[currency] = decimal.Max(amounts[currency], d)
			if f, ok := firsts[currency]; !ok || at < f.at || (at == f.at && a < f.act) {
				firsts[currency] = first{a, spendCount{at: at, agent: b, counterparty: cp}}
			}
		case "p": // a: instruction, b: its settlement's state
			if b == SettlementFailed || b == SettlementReversed {
				d = decimal.Zero()
			}
			payNow[a] = paymentCount{currency: currency, counterparty: cp, at: at, counted: d}
			paid[currency] = paid[currency].Add(d)
		case "C": // a: currency, currency: agent, b: unpaid
			c := spendCount{at: at, agent: currency, counterparty: cp, counted: d}
			if c.unpaid, err = decimal.Parse(b); err != nil {
				return
			}
			spendWas[a] = c
		case "P": // a: instruction
			payWas[a] = paymentCount{currency: currency, counterparty: cp, at: at, counted: d}
		}
	}
	if err = rows.Err(); err != nil {
		return
	}
	if !held {
		return // an opening offer refused: its commitment counts none
	}
	for currency, f := range firsts {
		c := budget.Commitment{TransactionID: id, Amount: amounts[currency], State: protocol.State(state), Paid: paid[currency]}
		sc := f.spendCount
		sc.counted, sc.unpaid = c.Counted(), c.Unpaid()
		spendNow[currency] = sc
	}
	return
}

// sumKey is one row of budget_sums.
type sumKey struct {
	what, currency, agent, counterparty string
	span, start                         int64
}

type sumDelta struct {
	total decimal.Decimal
	n     int
}

// sumDeltas is what a recount adds to budget_sums, row by row, so that a
// count that moves within a row writes it once.
type sumDeltas map[sumKey]sumDelta

func (d sumDeltas) add(k sumKey, amount decimal.Decimal, sign int) {
	x := d[k]
	if sign < 0 {
		x.total = x.total.Sub(amount)
	} else {
		x.total = x.total.Add(amount)
	}
	x.n += sign
	d[k] = x
}

func (d sumDeltas) spend(currency string, c spendCount, sign int) {
	d.add(sumKey{whatUnpaid, currency, anyParty, c.counterparty, 0, 0}, c.unpaid, sign)
	for _, s := range sumSpans {
		start := floorTo(c.at, s)
		for _, who := range [][2]string{{c.agent, c.counterparty}, {c.agent, anyParty}, {anyParty, c.counterparty}, {anyParty, anyParty}} {
			d.add(sumKey{whatSpend, currency, who[0], who[1], s, start}, c.counted, sign)
		}
	}
}

func (d sumDeltas) paid(p paymentCount, sign int) {
	for _, s := range sumSpans {
		d.add(sumKey{whatPaid, p.currency, anyParty, p.counterparty, s, floorTo(p.at, s)}, p.counted, sign)
	}
}

// addSums adds d into budget_sums: what adds, in one statement whose
// sums are added by decimalAddFunc inside SQLite, so that no row is read
// first; what takes away (a count moved or removed, rarer), row by row,
// from a row that must be there.
func (t *Txn) addSums(d sumDeltas) error {
	var q strings.Builder
	var args []any
	for k, x := range d {
		switch {
		case x.n == 0 && x.total.IsZero():
		case x.n < 0 || x.total.Sign() < 0:
			var total string
			var n int
			err := t.queryRow(`UPDATE budget_sums SET total = `+decimalAddFunc+`(total, ?), n = n + ?
				WHERE what = ? AND currency = ? AND agent_id = ? AND counterparty = ? AND span = ? AND start = ? RETURNING total, n`,
				signed(x.total), x.n, k.what, k.currency, k.agent, k.counterparty, k.span, k.start).Scan(&total, &n)
			if err == sql.ErrNoRows {
				return fmt.Errorf("budget sum %+v taken from, not there: the counts and sums disagree", k)
			}
			if err != nil {
				return err
			}
			if d, err := decimal.Parse(total); err != nil || n != 0 || !d.IsZero() {
				continue
			}
			// A row that comes to nothing goes (as before any count was
			// in it), so that a budget reads the same either way.
			if _, err := t.exec(`DELETE FROM budget_sums WHERE what = ? AND currency = ? AND agent_id = ? AND counterparty = ? AND span = ? AND start = ?`,
				k.what, k.currency, k.agent, k.counterparty, k.span, k.start); err != nil {
				return err
			}
		default:
			if len(args) > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, k.what, k.currency, k.agent, k.counterparty, k.span, k.start, x.total.String(), x.n)
			if len(args) == 8*sumRowsAStatement {
				if err := t.upsertSums(q.String(), args); err != nil {
					return err
				}
				q.Reset()
				args = args[:0]
			}
		}
	}
	if len(args) == 0 {
		return nil
	}
	return t.upsertSums(q.String(), args)
}

// sumRowsAStatement is the most rows one statement of addSums adds: well
// within SQLite's bound on a statement's parameters, and few statements'
// texts (one for each number of rows up to it) for the store to prepare.
const sumRowsAStatement = 32

func (t *Txn) upsertSums(values string, args []any) error {
	_, err := t.exec(`INSERT INTO budget_sums(what, currency, agent_id, counterparty, span, start, total, n) VALUES `+values+`
		ON CONFLICT DO UPDATE SET total = `+decimalAddFunc+`(total, excluded.total), n = n + excluded.n`, args...)
	return err
}

// signed writes a decimal that may be negative: an A202 decimal, or one
// after "-".
func signed(d decimal.Decimal) string {
	if d.Sign() < 0 {
		return "-" + decimal.Zero().Sub(d).String()
	}
	return d.String()
}

// decimalAddFunc is the SQL function addSums adds with: exact decimal
// addition of an A202 decimal and a signed one (signed), refusing a
// result below zero, so that a sum can never go negative unseen. It is
// registered with the driver for this process's connections; the
// schema does not use it, so any SQLite reads the database.
const decimalAddFunc = "party_decimal_add"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(decimalAddFunc, 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		a, aok := args[0].(string)
		b, bok := args[1].(string)
		if !aok || !bok {
			return nil, fmt.Errorf("%s: want two decimal strings, have %T and %T", decimalAddFunc, args[0], args[1])
		}
		x, err := decimal.Parse(a)
		if err != nil {
			return nil, err
		}
		neg := strings.HasPrefix(b, "-")
		y, err := decimal.Parse(strings.TrimPrefix(b, "-"))
		if err != nil {
			return nil, err
		}
		if neg {
			x = x.Sub(y)
		} else {
			x = x.Add(y)
		}
		if x.Sign() < 0 {
			return nil, fmt.Errorf("%s: %s %s goes below zero: the counts and sums disagree", decimalAddFunc, a, b)
		}
		return x.String(), nil
	})
}

// fillBatch is how many transactions of the backlog one write counts.
const fillBatch = 500

// fillCounts computes the counts and sums of the transactions a database
// held when migration 25 reached it (budget_backlog), a batch a write,
// so that a large database is not held under one write for long, and an
// interrupted fill resumes where it stopped.
func (s *Store) fillCounts(ctx context.Context) error {
	var some bool
	if err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM budget_backlog)`).Scan(&some); err != nil || !some {
		return err // nothing to fill: Open writes nothing
	}
	for {
		left := false
		err := s.Update(ctx, func(t *Txn) error {
			ids, err := t.transactionIDs(`SELECT transaction_id FROM budget_backlog LIMIT ?`, fillBatch)
			if err != nil {
				return err
			}
			if err := t.recountAll(ids); err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := t.exec(`DELETE FROM budget_backlog WHERE transaction_id = ?`, id); err != nil {
					return err
				}
			}
			left = len(ids) == fillBatch
			return nil
		})
		if err != nil || !left {
			return err
		}
		if testingOnlyStopFill != nil {
			if err := testingOnlyStopFill(); err != nil {
				return err
			}
		}
	}
}

// testingOnlyStopFill, when set, runs after each batch of fillCounts that
// leaves more to do; its error stops the fill there, as a process killed
// between two batches (TestRunningTotalsFillResumes).
var testingOnlyStopFill func() error
