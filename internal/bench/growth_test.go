package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/history"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// BenchmarkGrowth measures whether an act costs more as history grows: the
// same act on instances that hold 10 and 10 000 committed transactions,
// an act at event 10 and at event 300 of one transaction, the start of an
// engine over 10 and 10 000 transactions, and a page of list_transactions
// and list_inbox at 10 000. See docs/performance.md, "Growth".
//
//	go test -run '^$' -bench Growth -benchtime 20x ./internal/bench
//
// Sub-benchmarks: Growth/txns=N/{propose_offer, accept_offer,
// issue_obligation, list_transactions, list_inbox, engine_start} and
// Growth/one-transaction/assert_performance/event={10,300} and
// Growth/mandates={10,10000}/issue_obligation (each instance holding that
// many more mandates of its own). The acts also
// report the read and write system calls of their timed parts (reads/op,
// writes/op, wKB/op; ioMeter): SQLite's page reads and WAL frame writes,
// counted, where wall time on a shared host is not steady.
//
// The instances run in process (the record engine over its real outbox
// and an in-process carrier, as recordtest sets them up), so what is
// measured is the engine's and the database's work, not loopback. The
// history is generated (package history): one genuine formation, then
// n-1 copies of it under fresh ids, re-hashed and re-signed, on both
// sides, so each instance holds n committed transactions, each a valid
// record, in its tables and indexes.
func BenchmarkGrowth(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("txns=%d", n), func(b *testing.B) { growthAt(b, n) })
	}
	b.Run("one-transaction", growthInOneTransaction)
	b.Run("alternated", growthAlternated)
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("mandates=%d", n), func(b *testing.B) { growthWithMandates(b, n) })
	}
}

// growthAlternated measures each act on a pair holding 10 transactions
// and on one holding 10 000 alternately, in one loop, small then large
// and large then small in turn, so that a host whose speed drifts (other
// tenants of a shared machine) slows both sizes alike and the ratio
// between them is what history costs. Each size reports its mean wall
// time, process CPU time and write system calls per act, and the ratios
// large over small (wall-ratio, cpu-ratio). The CPU and the writes are the
// whole process's: both instances of the pair measured, and whatever the
// other, idle pair does meanwhile (nothing but its timers).
func growthAlternated(b *testing.B) {
	ctx := context.Background()
	sizes := [2]int{10, 10000}
	pairs := [2]*growthPair{newGrowthPair(b, sizes[0]), newGrowthPair(b, sizes[1])}
	alternate(b, sizes, pairs, []growthAct{
		{"propose_offer", func(b *testing.B, p *growthPair) func() error {
			return func() error { _, err := p.s.Engine.ProposeOffer(ctx, p.s.Actor(), p.offerInput()); return err }
		}},
		{"accept_offer", acceptOffer},
		{"issue_obligation", issueObligation},
	})
}

// growthAct is one act measured alternately on two pairs.
type growthAct struct {
	name string
	// prep makes what the act needs, untimed, and returns the act.
	prep func(b *testing.B, p *growthPair) func() error
}

// acceptOffer is accept_offer to committed, on an offer and approval
// made untimed.
func acceptOffer(b *testing.B, p *growthPair) func() error {
	o := recordtest.Offer(b, p.s, "3200.00")
	apr := recordtest.Approve(b, p.b, o.Objects["offer"])
	return func() error {
		out, err := p.b.Engine.AcceptOffer(context.Background(), p.b.Actor(), record.AcceptInput{MandateID: p.b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
		if err == nil && out.State != "committed" {
			err = fmt.Errorf("accept_offer left %s", out.State)
		}
		return err
	}
}

// issueObligation is issue_obligation on a transaction formed untimed.
func issueObligation(b *testing.B, p *growthPair) func() error {
	txn := recordtest.Form(b, p.b, p.s, "3200.00")
	return func() error {
		_, err := p.b.Engine.IssueObligation(context.Background(), p.b.Actor(), record.ObligationInput{MandateID: p.b.Mandate, TransactionID: txn})
		return err
	}
}

// alternate runs each act on the pair of sizes[0] and on that of
// sizes[1] in turn, b.N times each (see growthAlternated), and reports
// each size's mean wall time, CPU and read and write system calls per
// act, its median wall time, and three ratios large over small: of the
// means (wall-ratio), of the medians (p50-ratio), and the median of the
// b.N paired ratios (pair-ratio), each the large act over the small one
// it ran beside. With -growth.samples, each act's times are also
// written to a file there, one alternation a line.
func alternate(b *testing.B, sizes [2]int, pairs [2]*growthPair, acts []growthAct) {
	for _, act := range acts {
		b.Run(act.name, func(b *testing.B) {
			var cpu [2]time.Duration
			var walls [2][]time.Duration // each act's wall time, in the order run
			io := [2]*ioMeter{newIOMeter(b), newIOMeter(b)}
			b.StopTimer()
			for i := range b.N {
				for k := range 2 {
					j := (i + k) % 2
					call := act.prep(b, pairs[j])
					io[j].start()
					var err error
					c0, w0 := processCPU(), time.Now()
					// Labelled by size: a CPU profile of a run (-cpuprofile)
					// shows one size's acts with pprof -tagfocus size=N.
					pprof.Do(context.Background(), pprof.Labels("size", strconv.Itoa(sizes[j])), func(context.Context) { err = call() })
					walls[j] = append(walls[j], time.Since(w0))
					cpu[j] += processCPU() - c0
					io[j].stop()
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			n := float64(b.N)
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 / n }
			var wall, p50 [2]time.Duration
			for j := range walls {
				for _, d := range walls[j] {
					wall[j] += d
				}
				p50[j] = median(slices.Clone(walls[j]))
			}
			for j, size := range sizes {
				b.ReportMetric(ms(wall[j]), fmt.Sprintf("ms@%d", size))
				b.ReportMetric(ms(cpu[j]), fmt.Sprintf("cpu-ms@%d", size))
				b.ReportMetric(float64(io[j].sum.reads)/n, fmt.Sprintf("reads@%d", size))
				b.ReportMetric(float64(io[j].sum.writes)/n, fmt.Sprintf("writes@%d", size))
				b.ReportMetric(float64(io[j].sum.disk)/n/1024, fmt.Sprintf("diskKB@%d", size))
				b.ReportMetric(float64(p50[j])/1e6, fmt.Sprintf("p50-ms@%d", size))
			}
			b.ReportMetric(float64(wall[1])/float64(wall[0]), "wall-ratio")
			b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio")
			// The median act of each size, beside the mean: one act that
			// met a checkpoint of the write-ahead log or a collection
			// moves a mean of 20 by a third on this host, not a median.
			b.ReportMetric(float64(p50[1])/float64(p50[0]), "p50-ratio")
			b.ReportMetric(pairRatio(walls), "pair-ratio")
			writeSamples(b, sizes, walls)
		})
	}
}

// pairRatio is the median of the ratios walls[1][i] / walls[0][i]: each
// large act over the small act run beside it, a few milliseconds apart.
// A host whose speed changes over seconds (another tenant's burst) moves
// both acts of a pair alike, where it moves one size's mean or median
// more than the other's whenever the burst meets more of one size's acts.
func pairRatio(walls [2][]time.Duration) float64 {
	r := make([]float64, len(walls[0]))
	for i := range r {
		r[i] = float64(walls[1][i]) / float64(walls[0][i])
	}
	slices.Sort(r)
	return r[len(r)/2]
}

var growthSamples = flag.String("growth.samples", "", "a directory into which alternate writes each act's wall times, in microseconds, one alternation a line")

// writeSamples writes walls to a new file -growth.samples/<benchmark>.n<N>.*.tsv
// (one per run, with -count; N is b.N, 1 for the testing package's first
// probe of each benchmark): the two sizes, then a line per alternation,
// the small size's time then the large's.
func writeSamples(b *testing.B, sizes [2]int, walls [2][]time.Duration) {
	if *growthSamples == "" {
		return
	}
	var buf strings.Builder
	fmt.Fprintf(&buf, "%d\t%d\n", sizes[0], sizes[1])
	for i := range walls[0] {
		fmt.Fprintf(&buf, "%d\t%d\n", walls[0][i].Microseconds(), walls[1][i].Microseconds())
	}
	name := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
	f, err := os.CreateTemp(*growthSamples, fmt.Sprintf("%s.n%d.*.tsv", name, b.N))
	if err == nil {
		_, err = f.WriteString(buf.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		b.Fatal(err)
	}
}

// median is the middle of ds (the upper of the two middles of an even
// count); ds is sorted in place.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// growthWithMandates measures an act on instances that each hold n
// mandates of their own beside the one the act is taken under: an
// organisation that issues a mandate per transaction, as the demo does,
// holds one per transaction it ever made.
func growthWithMandates(b *testing.B, n int) {
	ctx := context.Background()
	p := newGrowthPair(b, 10)
	for _, sd := range []*recordtest.Side{p.b, p.s} {
		for i := range n {
			if _, err := sd.Princ.IssueMandate(ctx, authority.IssueRequest{
				ValidFrom: envelope.Timestamp(p.c.Now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(p.c.Now().Add(24 * time.Hour)),
				Actions:       []string{"offer.submit"},
				Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{fmt.Sprintf("org_other%d", i)}},
				SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "10.00"},
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("issue_obligation", p.issueObligation)
}

// growthAt runs the acts and reads measured against history on a pair
// that holds n transactions.
func growthAt(b *testing.B, n int) {
	ctx := context.Background()
	{
		p := newGrowthPair(b, n)
		b.Run("propose_offer", func(b *testing.B) {
			m := newIOMeter(b)
			b.StopTimer()
			for range b.N {
				m.start()
				_, err := p.s.Engine.ProposeOffer(ctx, p.s.Actor(), p.offerInput())
				m.stop()
				if err != nil {
					b.Fatal(err)
				}
			}
			m.report()
		})
		b.Run("accept_offer", func(b *testing.B) {
			m := newIOMeter(b)
			b.StopTimer()
			for range b.N {
				o := recordtest.Offer(b, p.s, "3200.00")
				apr := recordtest.Approve(b, p.b, o.Objects["offer"])
				m.start()
				out, err := p.b.Engine.AcceptOffer(ctx, p.b.Actor(), record.AcceptInput{MandateID: p.b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
				m.stop()
				if err != nil || out.State != "committed" {
					b.Fatalf("%+v %v", out, err)
				}
			}
			m.report()
		})
		b.Run("issue_obligation", p.issueObligation)
		b.Run("list_transactions", func(b *testing.B) {
			for range b.N {
				page, err := p.b.Engine.ListTransactions(ctx, readmodel.ListFilter{Limit: 50})
				if err != nil || len(page.Transactions) == 0 {
					b.Fatal(err)
				}
			}
		})
		b.Run("list_inbox", func(b *testing.B) {
			// A full page waits, whatever the acts above left: the
			// supplier's open offers topped up to 50.
			for {
				items, err := p.b.Engine.Inbox(ctx, p.b.Actor(), p.b.Mandate, 50)
				if err != nil {
					b.Fatal(err)
				}
				if len(items) == 50 {
					break
				}
				if _, err := p.s.Engine.ProposeOffer(ctx, p.s.Actor(), p.offerInput()); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				items, err := p.b.Engine.Inbox(ctx, p.b.Actor(), p.b.Mandate, 50)
				if err != nil || len(items) != 50 {
					b.Fatal(len(items), err)
				}
			}
		})
		b.Run("engine_start", func(b *testing.B) {
			for range b.N {
				o, err := org.Open(p.b.Node.Dir, org.Options{Clock: p.c.Now})
				if err != nil {
					b.Fatal(err)
				}
				e := record.New(record.Of(o), record.Options{Transport: p.b.Out})
				if err := e.Start(ctx); err != nil {
					b.Fatal(err)
				}
				e.Resume(ctx)
				o.Close()
			}
		})
	}
}

// growthInOneTransaction measures one act at event 10 and at event 300 of
// one transaction: the obligor asserts (timed), the obligee rejects
// (untimed), and so on.
func growthInOneTransaction(b *testing.B) {
	ctx := context.Background()
	p := newGrowthPair(b, 10)
	txn := recordtest.Form(b, p.b, p.s, "3200.00")
	out, err := p.b.Engine.IssueObligation(ctx, p.b.Actor(), record.ObligationInput{MandateID: p.b.Mandate, TransactionID: txn})
	if err != nil {
		b.Fatal(err)
	}
	obl := out.Objects["obligation"]
	cycle := func(timed *ioMeter) {
		if timed != nil {
			timed.start()
		}
		if _, err := p.s.Engine.AssertPerformance(ctx, p.s.Actor(), record.AssertInput{MandateID: p.s.Mandate, ObligationID: obl,
			Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: "certificates", ArtifactHash: canonical.SHA256Hex([]byte("c"))}}}); err != nil {
			b.Fatal(err)
		}
		if timed != nil {
			timed.stop()
		}
		if _, err := p.b.Engine.Respond(ctx, p.b.Actor(), record.RespondInput{MandateID: p.b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, at := range []int{10, 300} {
		for head := p.head(b, txn); head+1 < at; head += 2 {
			cycle(nil)
		}
		b.Run(fmt.Sprintf("assert_performance/event=%d", at), func(b *testing.B) {
			m := newIOMeter(b)
			b.StopTimer()
			for range b.N {
				cycle(m)
			}
			m.report()
		})
	}
}

// growthPair is a recordtest pair whose instances hold n transactions.
type growthPair struct {
	b, s *recordtest.Side
	c    *recordtest.Clock
	// done is a completed transaction traded on the pair, bundle its
	// export, admin the buyer's principal surface (newHistoryPair).
	done, bundle string
	admin        http.Handler
	// pending is the approval request the request_approval act left
	// (historyActs).
	pending string
}

func newGrowthPair(b *testing.B, n int) *growthPair {
	b.Helper()
	bs, ss, c := recordtest.Pair(b)
	p := &growthPair{b: bs, s: ss, c: c}
	src := history.Trade(b, bs, ss, c, history.Committed)
	if _, err := src.Generate(context.Background(), n-1, history.Mix{{Kind: history.Committed, Weight: 1}}); err != nil {
		b.Fatal(err)
	}
	return p
}

// issueObligation times the buyer's issue_obligation on a transaction
// formed (untimed) before each.
func (p *growthPair) issueObligation(b *testing.B) {
	m := newIOMeter(b)
	b.StopTimer()
	for range b.N {
		txn := recordtest.Form(b, p.b, p.s, "3200.00")
		m.start()
		_, err := p.b.Engine.IssueObligation(context.Background(), p.b.Actor(), record.ObligationInput{MandateID: p.b.Mandate, TransactionID: txn})
		m.stop()
		if err != nil {
			b.Fatal(err)
		}
	}
	m.report()
}

func (p *growthPair) offerInput() record.OfferInput {
	return record.OfferInput{MandateID: p.s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
		ValidUntil: envelope.Timestamp(p.c.Now().Add(24 * time.Hour))}
}

func (p *growthPair) head(b *testing.B, txn string) int {
	t, err := p.b.Node.Org.Store.GetTransaction(context.Background(), txn)
	if err != nil {
		b.Fatal(err)
	}
	return t.HeadSequence
}
