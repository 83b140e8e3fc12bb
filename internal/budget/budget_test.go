package budget

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/protocol"
)

func dec(t testing.TB, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWindow(t *testing.T) {
	t.Parallel()
	// Sunday 6 December 2026, late evening.
	now := time.Date(2026, 12, 6, 23, 59, 59, 0, time.UTC)
	for _, c := range []struct {
		p          Period
		start, end string
	}{
		{Day, "2026-12-06", "2026-12-07"},
		{Week, "2026-11-30", "2026-12-07"}, // from Monday
		{Month, "2026-12-01", "2027-01-01"},
		{Quarter, "2026-10-01", "2027-01-01"},
	} {
		s, e := Window(c.p, now)
		if got := s.Format(time.DateOnly) + ".." + e.Format(time.DateOnly); got != c.start+".."+c.end {
			t.Errorf("%s: %s, want %s..%s", c.p, got, c.start, c.end)
		}
	}
	// A Monday starts its own week; the first day of a quarter its own.
	s, _ := Window(Week, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	if s.Day() != 30 {
		t.Errorf("a Monday's week starts %s", s)
	}
	s, _ = Window(Quarter, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	if s.Month() != time.April {
		t.Errorf("1 April's quarter starts %s", s)
	}
	// Periods are UTC whatever the clock's zone.
	s, _ = Window(Day, time.Date(2026, 12, 7, 0, 30, 0, 0, time.FixedZone("CET", 3600)))
	if s.Day() != 6 {
		t.Errorf("00:30 CET is 23:30 UTC the day before; the day starts %s", s)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                                                   string
		id, kind, period, currency, limit, above, agent, party string
		want                                                   string
	}{
		{"id", "Monthly EUR", "spend", "month", "EUR", "1", "", "", "", "budget id"},
		{"kind", "a", "save", "month", "EUR", "1", "", "", "", "kind"},
		{"period", "a", "spend", "year", "EUR", "1", "", "", "", "period"},
		{"currency", "a", "spend", "month", "eur", "1", "", "", "", "currency"},
		{"limit", "a", "spend", "month", "EUR", "1e3", "", "", "", "limit"},
		{"negative limit", "a", "spend", "month", "EUR", "-1", "", "", "", "limit"},
		{"threshold at limit", "a", "spend", "month", "EUR", "100", "100", "", "", "not below"},
		{"agent on exposure", "a", "exposure", "month", "EUR", "100", "", "agt_buyer01", "", "exposure"},
		{"agent id", "a", "spend", "month", "EUR", "100", "", "buyer", "", "agent"},
		{"counterparty id", "a", "spend", "month", "EUR", "100", "", "", "delta", "counterparty"},
	} {
		_, err := New(c.id, Kind(c.kind), Period(c.period), c.currency, c.limit, c.above, c.agent, c.party)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
	if _, err := New("monthly-eur", Spend, Month, "EUR", "4000.00", "3000.00", "agt_buyer01", "org_delta"); err != nil {
		t.Fatal(err)
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	b, err := New("m", Spend, Month, "EUR", "4000.00", "3000.00", "", "")
	if err != nil {
		t.Fatal(err)
	}
	var start, end time.Time
	for _, c := range []struct {
		used, amount string
		want         Outcome
	}{
		{"0", "3000.00", Allow},   // at the threshold is not above it
		{"0", "3000.01", Hold},    // a cent above it
		{"3000", "1000.00", Hold}, // at the limit, above the threshold
		{"2000", "2000.01", Deny}, // a cent above the limit
		{"4000", "0", Allow},      // nothing added is never stopped
		{"5000", "0.01", Deny},    // already over (a budget lowered since)
	} {
		v := b.Judge(dec(t, c.used), dec(t, c.amount), start, end)
		if v.Outcome != c.want {
			t.Errorf("used %s + %s: %s, want %s", c.used, c.amount, v.Outcome, c.want)
		}
	}
	plain, _ := New("p", Spend, Month, "EUR", "4000.00", "", "", "")
	if v := plain.Judge(dec(t, "2000"), dec(t, "2000.00"), start, end); v.Outcome != Allow {
		t.Errorf("the last euro up to the limit: %s, want allow", v.Outcome)
	}
	v := b.Judge(dec(t, "3900"), dec(t, "200"), start, end)
	if v.Left().Cmp(dec(t, "100")) != 0 || !strings.Contains(v.Explain(), "100.00 is left") {
		t.Errorf("left %s, explained %q", v.Left(), v.Explain())
	}
}

// reader is a Reader over fixed rows, summed here with the rules the
// store sums by (Commitment.Counted and Unpaid).
type reader struct {
	made     []Commitment
	open     map[string][]Commitment
	payments map[string][]string
}

func (r reader) Spent(currency, agent, counterparty string, from, to time.Time) (decimal.Decimal, int, error) {
	sum := decimal.Zero()
	for _, c := range r.made {
		sum = sum.Add(c.Counted())
	}
	return sum, len(r.made), nil
}

func (r reader) Unpaid(currency, counterparty string) (decimal.Decimal, error) {
	sum := decimal.Zero()
	for _, c := range r.open[counterparty] {
		sum = sum.Add(c.Unpaid())
	}
	return sum, nil
}

func (r reader) Paid(currency, counterparty string, from, to time.Time) (decimal.Decimal, int, error) {
	sum := decimal.Zero()
	for _, p := range r.payments[counterparty] {
		d, err := decimal.Parse(p)
		if err != nil {
			return sum, 0, err
		}
		sum = sum.Add(d)
	}
	return sum, len(r.payments[counterparty]), nil
}

func TestCounting(t *testing.T) {
	t.Parallel()
	c := func(amount string, st protocol.State, paid string) Commitment {
		return Commitment{Amount: dec(t, amount), State: st, Paid: dec(t, paid)}
	}
	r := reader{
		made: []Commitment{
			c("100", protocol.Draft, "0"),             // an open offer reserves
			c("200", protocol.Completed, "200"),       // paid and done: spent
			c("400", protocol.Expired, "0"),           // never agreed: released
			c("800", protocol.Cancelled, "0"),         // never agreed: released
			c("1600", protocol.Terminated, "50"),      // ended after agreement: what was paid
			c("3200", protocol.InPerformance, "1000"), // agreed: all of it
		},
		open: map[string][]Commitment{
			"org_delta": {c("3200", protocol.InPerformance, "1000"), c("100", protocol.Draft, "0")},
		},
		payments: map[string][]string{"org_delta": {"1000", "200"}},
	}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	spend, _ := New("s", Spend, Month, "EUR", "10000", "", "", "")
	used, _, _, err := Used(r, spend, "org_delta", now)
	if err != nil || used.String() != "3550" {
		t.Fatalf("spend used %s (%v), want 100+200+50+3200 = 3550", used, err)
	}
	exp, _ := New("x", Exposure, Month, "EUR", "10000", "", "", "")
	used, _, _, err = Used(r, exp, "org_delta", now)
	if err != nil || used.String() != "3500" {
		t.Fatalf("exposure used %s (%v), want unpaid 2200+100 plus paid 1200 = 3500", used, err)
	}
	// An exposure budget naming no counterparty counts the act's alone.
	used, _, _, _ = Used(r, exp, "org_other", now)
	if !used.IsZero() {
		t.Fatalf("exposure towards another counterparty: %s", used)
	}
	// Evaluate applies only the budgets that count the charge.
	other, _ := New("usd", Spend, Month, "USD", "1", "", "", "")
	mine, _ := New("mine", Spend, Month, "EUR", "1", "", "agt_other01", "")
	vs, err := Evaluate(r, []Budget{spend, other, mine, exp}, Charge{Currency: "EUR", Counterparty: "org_delta", Agent: "agt_buyer01", Amount: dec(t, "6500")}, now)
	if err != nil || len(vs) != 2 {
		t.Fatalf("%d verdicts (%v), want the two EUR budgets that count agt_buyer01", len(vs), err)
	}
	if w, _ := Worst(vs); w.Budget.ID != "s" || w.Outcome != Deny {
		t.Fatalf("worst %s %s, want the spend budget's deny (3550+6500 > 10000)", w.Budget.ID, w.Outcome)
	}
}

func ExampleBudget_Judge() {
	b, _ := New("monthly-eur", Spend, Month, "EUR", "4000.00", "3000.00", "", "")
	start, end := b.Window(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	used, _ := decimal.Parse("2500.00")
	for _, amount := range []string{"400.00", "900.00", "1600.00"} {
		a, _ := decimal.Parse(amount)
		fmt.Println(amount, b.Judge(used, a, start, end).Outcome)
	}
	// Output:
	// 400.00 allow
	// 900.00 hold
	// 1600.00 deny
}
