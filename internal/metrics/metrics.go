// Package metrics is a party instance's Prometheus metrics, served by
// `party serve` at /metrics on the admin listener behind the metrics token
// (package daemon; the names are listed in docs/deploy.md, "Metrics").
//
// What moves with the acts is counted as it happens, by counters the
// record engine (record.Meter), the settlement rails (Rails) and the
// alerts (Alert) increment: a label lookup and an atomic add, nothing
// more, on the act's path. What stands (the messages waiting, the
// approvals pending, the transactions by state, the obligations past
// their deadlines) is read from the database at each scrape, so it is
// right after a restart and costs the acts nothing.
//
// Label values come from closed sets only: act names, outcomes, registered
// reason codes (a code a counterparty's answer carries that is not
// registered is counted as "unregistered"), the configured rails and the
// pinned counterparties, so no peer can grow the series without bound.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
)

// Options configure New.
type Options struct {
	// Store is the instance's database, read at each scrape.
	Store *store.Store
	// Clock is the instance's clock, against which ages are measured.
	Clock func() time.Time
	// Peers lists the pinned counterparties: each has an outbox series,
	// 0 while nothing waits for it, so that a sum or an alert on it never
	// reads an empty set as "no data".
	Peers func() []string
	// Logger is told when the database cannot be read for a scrape.
	Logger *slog.Logger
}

// Metrics is one instance's registry and counters. It implements
// record.Meter.
type Metrics struct {
	reg       *prometheus.Registry
	acts      *prometheus.CounterVec
	received  *prometheus.CounterVec
	railCalls *prometheus.CounterVec
	alerts    *prometheus.CounterVec
}

// New returns the metrics of the instance opt describes: its own
// registry (several instances may run in one process: tests, the demo),
// with the Go runtime's and the process's collectors beside party's.
func New(opt Options) *Metrics {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		acts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "party_acts_total",
			Help: "This instance's acts, by act, outcome (recorded, delivered, pending, held, refused, failed) and the refusal's first reason code.",
		}, []string{"act", "outcome", "reason_code"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "party_received_messages_total",
			Help: "Counterparties' messages received, by outcome (accepted, refused, conflict, unavailable, failed) and the refusal's first reason code.",
		}, []string{"outcome", "reason_code"}),
		railCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "party_rail_calls_total",
			Help: "Calls to settlement rails, by rail, call (submit, status) and outcome (the rail's status: succeeded, failed, pending, reversed; or unreachable, key_reused, error).",
		}, []string{"rail", "call", "outcome"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "party_deadline_alerts_total",
			Help: "Deadline alerts raised (obligation.due, obligation.overdue, peer.unreachable, peer.reachable), each once.",
		}, []string{"kind"}),
	}
	m.reg.MustRegister(m.acts, m.received, m.railCalls, m.alerts, newGauges(opt),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus's exposition formats. A gauge
// the database could not give is left out of that scrape (and logged);
// the rest are served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// codeLabel bounds a reason code to the registered set.
func codeLabel(c reason.Code) string {
	if c == "" || reason.Registered(c) {
		return string(c)
	}
	return "unregistered"
}

// Act counts one act (record.Meter).
func (m *Metrics) Act(act protocol.Act, outcome string, code reason.Code) {
	m.acts.WithLabelValues(string(act), outcome, codeLabel(code)).Inc()
}

// Received counts one counterparty message (record.Meter).
func (m *Metrics) Received(outcome string, code reason.Code) {
	m.received.WithLabelValues(outcome, codeLabel(code)).Inc()
}

// Alert counts one alert; subscribe it with record.Engine.SubscribeAlerts.
func (m *Metrics) Alert(a record.Alert) {
	m.alerts.WithLabelValues(a.Kind).Inc()
}

// Rails returns reg with every rail's calls counted.
func (m *Metrics) Rails(reg *rails.Registry) *rails.Registry {
	return reg.Wrapped(func(r rails.Rail) rails.Rail { return countedRail{r, m.railCalls} })
}

// countedRail counts a rail's calls by outcome.
type countedRail struct {
	rails.Rail
	calls *prometheus.CounterVec
}

func (r countedRail) Submit(ctx context.Context, in rails.Instruction) (rails.Result, error) {
	res, err := r.Rail.Submit(ctx, in)
	r.count("submit", res, err)
	return res, err
}

func (r countedRail) Status(ctx context.Context, in rails.Instruction) (rails.Result, error) {
	res, err := r.Rail.Status(ctx, in)
	r.count("status", res, err)
	return res, err
}

func (r countedRail) count(call string, res rails.Result, err error) {
	outcome := string(res.Status)
	switch {
	case errors.Is(err, rails.ErrUnreachable):
		outcome = "unreachable"
	case errors.Is(err, rails.ErrKeyReused):
		outcome = "key_reused"
	case err != nil:
		outcome = "error"
	case !knownStatus(res.Status):
		// A rail's own word is not a label value: the set stays closed.
		outcome = "other"
	}
	r.calls.WithLabelValues(r.ID(), call, outcome).Inc()
}

func knownStatus(s rails.Status) bool {
	switch s {
	case rails.Succeeded, rails.Failed, rails.Pending, rails.Reversed:
		return true
	}
	return false
}

// states are the aggregate states (pilot state machine §3).
var states = []protocol.State{protocol.Draft, protocol.AgreementPending, protocol.Committed, protocol.InPerformance,
	protocol.AcceptancePending, protocol.SettlementPending, protocol.ExceptionOpen,
	protocol.Completed, protocol.Cancelled, protocol.Expired, protocol.Terminated}

// gauges reads what stands from the database at each scrape.
type gauges struct {
	opt                                           Options
	outboxPending, outboxOldest                   *prometheus.Desc
	approvalsPending, approvalsOldest             *prometheus.Desc
	transactions, obligationsDue, obligationsOver *prometheus.Desc
}

func newGauges(opt Options) *gauges {
	return &gauges{
		opt: opt,
		outboxPending: prometheus.NewDesc("party_outbox_pending_messages",
			"Messages waiting in the outbox for delivery, by counterparty.", []string{"peer"}, nil),
		outboxOldest: prometheus.NewDesc("party_outbox_oldest_pending_age_seconds",
			"How long the oldest message waiting for the counterparty has waited (0 when none waits).", []string{"peer"}, nil),
		approvalsPending: prometheus.NewDesc("party_approval_requests_pending",
			"Approval requests waiting for a principal's decision.", nil, nil),
		approvalsOldest: prometheus.NewDesc("party_approval_requests_oldest_pending_age_seconds",
			"How long the oldest pending approval request has waited (0 when none waits).", nil, nil),
		transactions: prometheus.NewDesc("party_transactions",
			"Transactions held, by state (expired: offers that lapsed unaccepted).", []string{"state"}, nil),
		obligationsDue: prometheus.NewDesc("party_obligations_due",
			"Obligations of open transactions still owed past their due instant (overdue ones included).", nil, nil),
		obligationsOver: prometheus.NewDesc("party_obligations_overdue",
			"Obligations of open transactions still owed past their overdue instant.", nil, nil),
	}
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.outboxPending, g.outboxOldest, g.approvalsPending, g.approvalsOldest,
		g.transactions, g.obligationsDue, g.obligationsOver} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	v, err := g.opt.Store.Gauges(context.Background())
	if err != nil {
		g.opt.Logger.Warn("metrics: reading the gauges from the database failed", "error", err)
		ch <- prometheus.NewInvalidMetric(g.transactions, err)
		return
	}
	now := g.opt.Clock()
	age := func(t time.Time) float64 {
		if t.IsZero() || t.After(now) {
			return 0
		}
		return now.Sub(t).Seconds()
	}
	seen := map[string]bool{}
	for _, q := range v.Outbox {
		seen[q.Peer] = true
		ch <- prometheus.MustNewConstMetric(g.outboxPending, prometheus.GaugeValue, float64(q.Pending), q.Peer)
		ch <- prometheus.MustNewConstMetric(g.outboxOldest, prometheus.GaugeValue, age(q.Oldest), q.Peer)
	}
	if g.opt.Peers != nil {
		for _, p := range g.opt.Peers() {
			if !seen[p] {
				seen[p] = true
				ch <- prometheus.MustNewConstMetric(g.outboxPending, prometheus.GaugeValue, 0, p)
				ch <- prometheus.MustNewConstMetric(g.outboxOldest, prometheus.GaugeValue, 0, p)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(g.approvalsPending, prometheus.GaugeValue, float64(v.ApprovalsPending))
	ch <- prometheus.MustNewConstMetric(g.approvalsOldest, prometheus.GaugeValue, age(v.OldestApproval))
	for _, st := range states {
		if _, ok := v.Transactions[string(st)]; !ok {
			v.Transactions[string(st)] = 0 // a series from the start, so increase() sees the first
		}
	}
	for state, n := range v.Transactions {
		ch <- prometheus.MustNewConstMetric(g.transactions, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(g.obligationsDue, prometheus.GaugeValue, float64(v.ObligationsDue))
	ch <- prometheus.MustNewConstMetric(g.obligationsOver, prometheus.GaugeValue, float64(v.ObligationsOverdue))
}
