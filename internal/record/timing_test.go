package record_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/due"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// alerts collects the alerts an engine raises.
type alerts struct {
	mu   sync.Mutex
	list []record.Alert
}

func listen(sd *recordtest.Side) *alerts {
	a := &alerts{}
	sd.Engine.SubscribeAlerts(func(x record.Alert) {
		a.mu.Lock()
		a.list = append(a.list, x)
		a.mu.Unlock()
	})
	return a
}

func (a *alerts) kinds() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, x := range a.list {
		out = append(out, x.Kind)
	}
	return out
}

// obligationView returns where obl stands on sd.
func obligationView(t *testing.T, sd *recordtest.Side, txn, obl string) readmodel.ObligationView {
	t.Helper()
	for _, o := range stateOf(t, sd, txn).Obligations {
		if o.ObligationID == obl {
			return o
		}
	}
	t.Fatalf("%s holds no obligation %s", sd.Node.Org.Config().OrganizationID, obl)
	return readmodel.ObligationView{}
}

// TestObligationFallsDueAndOverdue: an obligation due in an hour is
// pending until then, due on both sides from then (the view's state),
// overdue a day later; each instant is raised once on each side, also
// across a restart, and an assertion ends both.
func TestObligationFallsDueAndOverdue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	at := c.Now().Add(time.Hour)
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn,
		DueCondition: map[string]any{"type": "due_at_time", "at": envelope.Timestamp(at)}})
	if err != nil {
		t.Fatal(err)
	}
	obl := out.Objects["obligation"]
	ab, as := listen(b), listen(s)
	work := func() int { return b.Engine.WorkTiming(ctx) + s.Engine.WorkTiming(ctx) }
	each := func(state string, dueNow, overdue bool) {
		t.Helper()
		for _, sd := range []*recordtest.Side{b, s} {
			v := obligationView(t, sd, txn, obl)
			if v.State != state || v.Timing == nil || v.Timing.Due != dueNow || v.Timing.Overdue != overdue || v.Timing.DueAt != envelope.Timestamp(at) {
				t.Fatalf("%s: %+v %+v", sd.Node.Org.Config().OrganizationID, v, v.Timing)
			}
		}
	}
	if n := work(); n != 0 {
		t.Fatalf("%d alerts an hour early", n)
	}
	each("pending", false, false)
	c.Add(time.Hour)
	if n := work(); n != 2 {
		t.Fatalf("%d alerts at the due time", n)
	}
	each("due", true, false)
	c.Add(record.DefaultOverdueAfter)
	if n := work(); n != 2 {
		t.Fatalf("%d alerts a day after", n)
	}
	each("due", true, true)
	if n := work(); n != 0 {
		t.Fatalf("%d alerts raised again", n)
	}
	for _, a := range []*alerts{ab, as} {
		if k := a.kinds(); len(k) != 2 || k[0] != record.AlertObligationDue || k[1] != record.AlertObligationOverdue {
			t.Fatalf("alerts %v", k)
		}
		if x := a.list[0]; x.ObligationID != obl || x.TransactionID != txn || !x.At.Equal(at) {
			t.Fatalf("alert %+v", x)
		}
	}
	// A restarted instance raises nothing again.
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out)
	s.Out.Reconnect(b.Engine)
	if n := b.Engine.WorkTiming(ctx); n != 0 {
		t.Fatalf("%d alerts raised again after a restart", n)
	}
	// The supplier performs, late: the obligation is asserted, no longer
	// owed with nothing outstanding.
	assertPerformance(t, s, obl, "20")
	for _, sd := range []*recordtest.Side{b, s} {
		if v := obligationView(t, sd, txn, obl); v.State != "asserted" || v.Timing != nil {
			t.Fatalf("%+v", v)
		}
	}
}

// TestDueConditionsFromTheRecord: a condition on an act of the record is
// met when the act was appended; business days are counted under the
// calendar the condition names, when this instance knows it, and left
// unevaluated, never guessed, when it does not.
func TestDueConditionsFromTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	committed := stateOf(t, b, txn).Events[1]
	_, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn, Deliverables: []record.DeliverableInput{
		{Quantity: "10", Consideration: &record.Money{Currency: "EUR", Amount: "1600.00"},
			DueCondition: map[string]any{"type": "due_on_event", "act_ref": committed.ContentHash}},
		{Quantity: "10", Consideration: &record.Money{Currency: "EUR", Amount: "1600.00"},
			DueCondition: map[string]any{"type": "due_at_time", "business_days": map[string]any{"days": 3, "calendar": "DE"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var onAct, onDays string
	for _, o := range stateOf(t, b, txn).Obligations {
		if onAct == "" {
			onAct = o.ObligationID
		} else {
			onDays = o.ObligationID
		}
	}
	v := obligationView(t, s, txn, onAct)
	if v.State != "due" || v.Timing.DueAt != committed.OccurredAt {
		t.Fatalf("on the commit: %+v %+v", v, v.Timing)
	}
	v = obligationView(t, s, txn, onDays)
	if v.State != "pending" || v.Timing.DueAt != "" || v.Timing.Unevaluable == "" {
		t.Fatalf("under a calendar not configured: %+v %+v", v, v.Timing)
	}
	// The supplier's principal configures the calendar: no business day
	// at all in the week but Wednesday.
	cal, err := due.ParseCalendar([]string{"monday", "tuesday", "thursday", "friday", "saturday", "sunday"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Engine = recordtest.NewEngine(t, s.Node, s.Out, func(o *record.Options) { o.Timing.Calendars = map[string]due.Calendar{"DE": cal} })
	b.Out.Reconnect(s.Engine)
	v = obligationView(t, s, txn, onDays)
	issued, _ := time.Parse(time.RFC3339, stateOf(t, s, txn).Events[2].OccurredAt)
	want := cal.After(issued, 3)
	if want.Weekday() != time.Wednesday || want.Sub(issued) < 14*24*time.Hour {
		t.Fatalf("three Wednesdays after %s: %s", issued, want)
	}
	if v.State != "pending" || v.Timing.DueAt != envelope.Timestamp(want) {
		t.Fatalf("under the calendar: %+v %+v", v, v.Timing)
	}
	c.Add(want.Sub(c.Now()))
	// The obligation on the commit, due and (weeks on) overdue, and this
	// one, due.
	if n := s.Engine.WorkTiming(ctx); n != 3 {
		t.Fatalf("%d alerts", n)
	}
	if v = obligationView(t, s, txn, onDays); v.State != "due" {
		t.Fatalf("%+v", v)
	}
}

// TestUnreachableCounterpartyTold: a counterparty that leaves a message
// unanswered past Timing.UnreachableAfter is told to the principal once,
// with since when and how much waits, and its return likewise; the
// transaction's view says what waits, since when, and the next try.
func TestUnreachableCounterpartyTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	ab := listen(b)
	b.Out.SetDown(true)
	away := c.Now()
	if out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil || out.Status != record.StatusPending {
		t.Fatalf("%+v %v", out, err)
	}
	v := stateOf(t, b, o.TransactionID)
	if len(v.Waiting) != 1 || v.Waiting[0].Counterparty != "org_delta" || v.Waiting[0].Attempts != 1 || v.Waiting[0].LastError == "" ||
		v.Waiting[0].UnreachableSince != envelope.Timestamp(away) || v.Waiting[0].NextAttempt == "" || v.Waiting[0].Since == "" {
		t.Fatalf("waiting %+v", v.Waiting)
	}
	c.Add(record.DefaultUnreachableAfter - time.Second)
	b.Engine.WorkTiming(ctx)
	if k := ab.kinds(); len(k) != 0 {
		t.Fatalf("told early: %v", k)
	}
	c.Add(time.Second)
	b.Engine.WorkTiming(ctx)
	b.Engine.WorkTiming(ctx)
	if k := ab.kinds(); len(k) != 1 || k[0] != record.AlertPeerUnreachable {
		t.Fatalf("alerts %v", k)
	}
	if x := ab.list[0]; x.Counterparty != "org_delta" || !x.At.Equal(away) || x.Waiting != 1 {
		t.Fatalf("alert %+v", x)
	}
	// The supplier is heard from again (it offers once more): its return
	// is told, and what waited for it is due at once, not after the
	// back-off it was waiting out.
	b.Out.SetDown(false)
	recordtest.Offer(t, s, "1200.00")
	if k := ab.kinds(); len(k) != 2 || k[1] != record.AlertPeerReachable {
		t.Fatalf("alerts %v", k)
	}
	if next := b.Pending(t)[0].NextAttempt; next.After(c.Now()) {
		t.Fatalf("the acceptance waits until %s", next)
	}
	recordtest.Flush(ctx, b, s)
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
	if v := stateOf(t, b, o.TransactionID); len(v.Waiting) != 0 {
		t.Fatalf("still waiting %+v", v.Waiting)
	}
}

// TestPeerBackWithinSeconds: an acceptance made while the supplier is
// away for three minutes, past every bound a decision has, waits out its
// back-off; the buyer's probes find the supplier back as soon as it
// answers, the acceptance is due at once, renewed as it is sent (its
// first decision is stale by then) and recorded on both sides, once.
func TestPeerBackWithinSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	// The buyer's back-off as party serve's: up to five minutes.
	b.Engine = recordtest.NewEngine(t, b.Node, b.Out, func(o *record.Options) { o.Outbox.MaxBackoff = 5 * time.Minute })
	s.Out.Reconnect(b.Engine)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	b.Out.SetDown(true)
	if out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil || out.Status != record.StatusPending {
		t.Fatalf("%+v %v", out, err)
	}
	probe := func() {
		recordtest.Flush(ctx, b) // the outbox worker: attempts what is due
		b.Engine.WorkTiming(ctx)
		record.WaitProbes(b.Engine) // the probe runs beside the work
	}
	for elapsed := time.Duration(0); elapsed < 3*time.Minute; elapsed += 2 * time.Second {
		c.Add(2 * time.Second)
		probe()
	}
	// The supplier returns while the acceptance waits out a back-off of
	// at least 30 seconds more (the back-off is drawn at random).
	for i := 0; b.Pending(t)[0].NextAttempt.Sub(c.Now()) < 30*time.Second; i++ {
		if i > 150 {
			t.Fatal("the back-off never grew past 30 seconds")
		}
		c.Add(2 * time.Second)
		probe()
	}
	b.Out.SetDown(false)
	// The next probe is due within a sixtieth of the outage.
	for i := 0; i < 5 && b.Pending(t)[0].NextAttempt.After(c.Now()); i++ {
		c.Add(2 * time.Second)
		probe()
	}
	if next := b.Pending(t)[0].NextAttempt; next.After(c.Now()) {
		t.Fatalf("the supplier is back and the acceptance waits until %s", next)
	}
	recordtest.Flush(ctx, b, s)
	if types := recordtest.SameRecord(t, b, s, o.TransactionID, 2); types[0] != "agreement.direct" {
		t.Fatalf("events %v", types)
	}
}
