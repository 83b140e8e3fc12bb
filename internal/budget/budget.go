// Package budget is the principal's spending limits: what an
// organisation's agents may commit it to pay in a period, and how much it
// may be exposed to one counterparty. A budget is deny-only local policy,
// kept beside the mandates and never in them: the mandate constraint
// registry is closed in v0.1 (commercial mandate §4: a constraint of a
// type it does not register is A202-MANDATE-CONSTRAINT-UNKNOWN to every
// relying party), and no registered constraint counts across acts, so a
// budget carried in a mandate would make every counterparty refuse the
// mandate. It is the acting instance's own rule, evaluated at the act,
// and a counterparty neither sees it nor needs to: a budget can only
// stop an act the mandate allows, never allow one it does not.
//
// # What a budget counts
//
// Budgets count money this organisation owes as buyer (the buyer owes
// the consideration, $.terms.core.total; ledger.OwedBy), from its own
// acts, in one currency:
//
//   - a commitment: the total of the terms it put its name to in a
//     transaction as buyer (its offer or counter-offer, the offer it
//     accepted, an amendment), the largest one if there were several. It
//     counts from the first such act, in the period of that act, while
//     the transaction may still bind it; a transaction that ended without
//     an agreement (cancelled, expired) releases it, and one terminated
//     after its agreement counts what was paid in it;
//   - a payment: a settlement instruction it made, in the period of the
//     instruction, unless the rail reported it failed or reversed.
//
// A spend budget is the commitments made in the current period, by any
// agent (or the one it names) towards any counterparty (or the one it
// names). An exposure budget is, towards one counterparty (the one it
// names, or each one separately): what is committed and not yet paid in
// transactions still open, plus what was paid in the period.
//
// Periods are calendar periods in UTC: the day, the ISO week from Monday,
// the month, the quarter from January, April, July or October.
//
// # The verdict
//
// An act that would raise a budget's count above its limit is denied
// (A202-POLICY-DENIED) with the budget named and what is left under it.
// An act that would raise it above the budget's approval threshold, when
// the principal set one, is held for the principal's approval
// (A202-APPROVAL-REQUIRED) instead, and an approval of that exact act
// releases it (the threshold only; the limit is never passed). The
// instance evaluates budgets in the same database transaction that
// records the act, so two acts taken at once are counted one after the
// other and cannot both pass the last euro.
package budget

import (
	"fmt"
	"regexp"
	"time"

	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/protocol"
)

// Kind is what a budget counts.
type Kind string

// Kinds.
const (
	// Spend counts the commitments made in the period.
	Spend Kind = "spend"
	// Exposure counts, towards one counterparty, what is committed and
	// unpaid plus what was paid in the period.
	Exposure Kind = "exposure"
)

// Period is a budget's calendar period, in UTC.
type Period string

// Periods.
const (
	Day     Period = "day"
	Week    Period = "week"
	Month   Period = "month"
	Quarter Period = "quarter"
)

// Budget is one limit the principal set.
type Budget struct {
	ID       string
	Kind     Kind
	Period   Period
	Currency string
	Limit    decimal.Decimal
	// ApproveAbove, when set (HasApproval), is the count above which an
	// act is held for the principal's approval rather than allowed; it is
	// below Limit.
	ApproveAbove decimal.Decimal
	HasApproval  bool
	// AgentID, when set, limits a spend budget to one agent's acts.
	AgentID string
	// Counterparty, when set, limits the budget to one counterparty; an
	// exposure budget without one applies to each counterparty apart.
	Counterparty string
}

var (
	idPattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
	orgPattern      = regexp.MustCompile(`^org_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
	agentPattern    = regexp.MustCompile(`^agt_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
)

// New reads a budget from its written form, refusing one that could not
// be applied as written.
func New(id string, kind Kind, period Period, currency, limit, approveAbove, agentID, counterparty string) (Budget, error) {
	b := Budget{ID: id, Kind: kind, Period: period, Currency: currency, AgentID: agentID, Counterparty: counterparty}
	if !idPattern.MatchString(id) {
		return b, fmt.Errorf("budget id %q: lower-case letters, digits, '.', '_' and '-', at most 64", id)
	}
	switch kind {
	case Spend, Exposure:
	default:
		return b, fmt.Errorf("budget %s: kind %q is neither spend nor exposure", id, kind)
	}
	switch period {
	case Day, Week, Month, Quarter:
	default:
		return b, fmt.Errorf("budget %s: period %q is not day, week, month or quarter", id, period)
	}
	if !currencyPattern.MatchString(currency) {
		return b, fmt.Errorf("budget %s: currency %q is not an ISO 4217 code", id, currency)
	}
	var err error
	if b.Limit, err = decimal.Parse(limit); err != nil || b.Limit.Sign() < 0 {
		return b, fmt.Errorf("budget %s: limit %q is not a decimal amount of at least 0", id, limit)
	}
	if approveAbove != "" {
		if b.ApproveAbove, err = decimal.Parse(approveAbove); err != nil || b.ApproveAbove.Sign() < 0 {
			return b, fmt.Errorf("budget %s: approval threshold %q is not a decimal amount of at least 0", id, approveAbove)
		}
		if b.ApproveAbove.Cmp(b.Limit) >= 0 {
			return b, fmt.Errorf("budget %s: the approval threshold %s is not below the limit %s", id, approveAbove, limit)
		}
		b.HasApproval = true
	}
	if agentID != "" {
		if kind == Exposure {
			return b, fmt.Errorf("budget %s: an exposure is the organisation's, not one agent's", id)
		}
		if !agentPattern.MatchString(agentID) {
			return b, fmt.Errorf("budget %s: agent %q is not an agent identifier", id, agentID)
		}
	}
	if counterparty != "" && !orgPattern.MatchString(counterparty) {
		return b, fmt.Errorf("budget %s: counterparty %q is not an organization identifier", id, counterparty)
	}
	return b, nil
}

// Window returns the period of b that holds now: [start, end), in UTC.
func (b Budget) Window(now time.Time) (start, end time.Time) {
	return Window(b.Period, now)
}

// Window returns the calendar period p that holds now, in UTC.
func Window(p Period, now time.Time) (start, end time.Time) {
	now = now.UTC()
	y, m, d := now.Date()
	switch p {
	case Day:
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case Week:
		back := (int(now.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 7)
	case Quarter:
		start = time.Date(y, m-(m-1)%3, 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 3, 0)
	default: // Month
		start = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
}

// Charge is what one act adds to the budgets that apply to it: Amount
// more committed, in Currency, by Agent, towards Counterparty.
type Charge struct {
	TransactionID string
	Currency      string
	Counterparty  string
	Agent         string
	Amount        decimal.Decimal
}

// Applies reports whether b counts c.
func (b Budget) Applies(c Charge) bool {
	return b.Currency == c.Currency &&
		(b.AgentID == "" || b.AgentID == c.Agent) &&
		(b.Counterparty == "" || b.Counterparty == c.Counterparty)
}

// Outcome is a budget's verdict on an act.
type Outcome string

// Outcomes.
const (
	Allow Outcome = "allow"
	Hold  Outcome = "hold"
	Deny  Outcome = "deny"
)

// Verdict is one budget's verdict on one act.
type Verdict struct {
	Budget  Budget
	Outcome Outcome
	// Used is the count before the act, After with it.
	Used, After decimal.Decimal
	// Start and End are the period counted.
	Start, End time.Time
}

// Left is what remains under the limit before the act, never below zero.
func (v Verdict) Left() decimal.Decimal {
	if left := v.Budget.Limit.Sub(v.Used); left.Sign() > 0 {
		return left
	}
	return v.Budget.Limit.Sub(v.Budget.Limit) // zero, written with the limit's places
}

// Judge is b's verdict on adding amount to used, counted over [start,
// end).
func (b Budget) Judge(used, amount decimal.Decimal, start, end time.Time) Verdict {
	v := Verdict{Budget: b, Outcome: Allow, Used: used, After: used.Add(amount), Start: start, End: end}
	if amount.Sign() <= 0 {
		return v // an act that adds nothing is never stopped
	}
	switch {
	case v.After.Cmp(b.Limit) > 0:
		v.Outcome = Deny
	case b.HasApproval && v.After.Cmp(b.ApproveAbove) > 0:
		v.Outcome = Hold
	}
	return v
}

// Explain says a verdict in words, for the principal and the agent (never
// the counterparty).
func (v Verdict) Explain() string {
	b := v.Budget
	what := fmt.Sprintf("budget %s (%s %s per %s", b.ID, b.Currency, b.Kind, b.Period)
	if b.AgentID != "" {
		what += ", agent " + b.AgentID
	}
	if b.Counterparty != "" {
		what += ", towards " + b.Counterparty
	}
	what += ")"
	switch v.Outcome {
	case Deny:
		return fmt.Sprintf("%s: this act would bring it to %s, above its limit %s; %s is used since %s and %s is left",
			what, v.After, b.Limit, v.Used, v.Start.Format(time.DateOnly), v.Left())
	case Hold:
		return fmt.Sprintf("%s: this act would bring it to %s, above the approval threshold %s (limit %s); %s is used since %s",
			what, v.After, b.ApproveAbove, b.Limit, v.Used, v.Start.Format(time.DateOnly))
	default:
		return fmt.Sprintf("%s: %s used of %s since %s, %s left", what, v.Used, b.Limit, v.Start.Format(time.DateOnly), v.Left())
	}
}

// Worst returns the verdict that decides an act: the first deny, else the
// first hold, else an allow (ok false when vs is empty).
func Worst(vs []Verdict) (Verdict, bool) {
	var hold *Verdict
	for i := range vs {
		switch vs[i].Outcome {
		case Deny:
			return vs[i], true
		case Hold:
			if hold == nil {
				hold = &vs[i]
			}
		}
	}
	if hold != nil {
		return *hold, true
	}
	if len(vs) == 0 {
		return Verdict{}, false
	}
	return vs[0], true
}

// Commitment is one transaction's commitment as the instance holds it.
type Commitment struct {
	TransactionID string
	Amount        decimal.Decimal
	// State is the transaction's state now.
	State protocol.State
	// Paid is what was paid in it: its payments, less those the rail
	// reported failed or reversed.
	Paid decimal.Decimal
}

// Counted is what the commitment counts towards a spend budget: nothing
// once the transaction ended without an agreement, what was paid once it
// was terminated, and otherwise all of it.
func (c Commitment) Counted() decimal.Decimal {
	switch c.State {
	case protocol.Cancelled, protocol.Expired:
		return decimal.Zero()
	case protocol.Terminated:
		return c.Paid
	}
	return c.Amount
}

// Unpaid is what the commitment counts towards an exposure budget as
// committed and not yet paid: nothing once the transaction ended, and
// otherwise the amount less what was paid, never below zero.
func (c Commitment) Unpaid() decimal.Decimal {
	switch c.State {
	case protocol.Cancelled, protocol.Expired, protocol.Terminated, protocol.Completed:
		return decimal.Zero()
	}
	return decimal.Max(decimal.Zero(), c.Amount.Sub(c.Paid))
}

// Reader reads what budgets count, summed. The store implements it over
// the database transaction that records an act (so the count and the act
// are one), and over a snapshot for reports. It keeps each transaction's
// Counted and Unpaid, and their sums by day, hour and second, as the rows
// they are computed from change, so that a reading costs the days, hours
// and seconds of its period, not the transactions in it (package store,
// budgetsums.go).
type Reader interface {
	// Spent is the sum of Counted over the commitments in currency whose
	// first act was in [from, to), by agent and towards counterparty when
	// they are not "", and how many commitments that is.
	Spent(currency, agent, counterparty string, from, to time.Time) (decimal.Decimal, int, error)
	// Unpaid is the sum of Unpaid over the commitments in currency
	// towards counterparty (those of transactions not ended).
	Unpaid(currency, counterparty string) (decimal.Decimal, error)
	// Paid is the sum of the amounts paid in currency towards
	// counterparty in [from, to), less those the rail reported failed or
	// reversed, and how many payments that is (those included, at zero).
	Paid(currency, counterparty string, from, to time.Time) (decimal.Decimal, int, error)
}

// Used is b's count now, towards counterparty (the act's, for a budget
// that names none), and the period counted.
func Used(r Reader, b Budget, counterparty string, now time.Time) (used decimal.Decimal, start, end time.Time, err error) {
	start, end = b.Window(now)
	if b.Counterparty != "" {
		counterparty = b.Counterparty
	}
	switch b.Kind {
	case Spend:
		used, _, err = r.Spent(b.Currency, b.AgentID, b.Counterparty, start, end)
	case Exposure:
		var paid decimal.Decimal
		if used, err = r.Unpaid(b.Currency, counterparty); err == nil {
			paid, _, err = r.Paid(b.Currency, counterparty, start, end)
			used = used.Add(paid)
		}
	default:
		used = decimal.Zero()
	}
	return used, start, end, err
}

// Evaluate is every applicable budget's verdict on charge c at now, in
// the order given.
func Evaluate(r Reader, budgets []Budget, c Charge, now time.Time) ([]Verdict, error) {
	var out []Verdict
	for _, b := range budgets {
		if !b.Applies(c) {
			continue
		}
		used, start, end, err := Used(r, b, c.Counterparty, now)
		if err != nil {
			return nil, err
		}
		out = append(out, b.Judge(used, c.Amount, start, end))
	}
	return out, nil
}

// Standing is one budget as it stands now, for the principal's and the
// agent's surfaces.
type Standing struct {
	ID           string `json:"budget_id"`
	Kind         Kind   `json:"kind"`
	Period       Period `json:"period"`
	Currency     string `json:"currency"`
	Limit        string `json:"limit"`
	ApproveAbove string `json:"approve_above,omitempty"`
	AgentID      string `json:"agent_id,omitempty"`
	// Counterparty is the counterparty counted: the budget's, or for an
	// exposure budget that names none, the one this standing is about.
	Counterparty string `json:"counterparty,omitempty"`
	Used         string `json:"used"`
	Left         string `json:"left"`
	PeriodStart  string `json:"period_start"`
	PeriodEnd    string `json:"period_end"`
}

// Standings reads every budget that applies to agent (every budget when
// agent is ""), now. An exposure budget that names no counterparty stands
// once for each of counterparties.
func Standings(r Reader, budgets []Budget, agent string, counterparties []string, now time.Time) ([]Standing, error) {
	out := []Standing{}
	for _, b := range budgets {
		if agent != "" && b.AgentID != "" && b.AgentID != agent {
			continue
		}
		cps := []string{b.Counterparty}
		if b.Kind == Exposure && b.Counterparty == "" {
			cps = counterparties
		}
		for _, cp := range cps {
			used, start, end, err := Used(r, b, cp, now)
			if err != nil {
				return nil, err
			}
			v := Verdict{Budget: b, Used: used}
			s := Standing{
				ID: b.ID, Kind: b.Kind, Period: b.Period, Currency: b.Currency, Limit: b.Limit.String(), AgentID: b.AgentID,
				Counterparty: cp, Used: used.String(), Left: v.Left().String(),
				PeriodStart: start.Format(time.RFC3339), PeriodEnd: end.Format(time.RFC3339),
			}
			if b.HasApproval {
				s.ApproveAbove = b.ApproveAbove.String()
			}
			out = append(out, s)
		}
	}
	return out, nil
}
