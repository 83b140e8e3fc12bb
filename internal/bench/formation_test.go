package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// batch is how many formations one benchmark operation runs. Run with
// -benchtime=1x: one operation, one batch of 100 on a fresh pair of
// instances (ns/op is then the wall time of the whole batch). -benchtime=Nx
// runs N batches on the same pair, whose records keep growing.
const batch = 100

// workers is the concurrency of the concurrent variants.
const workers = 8

// BenchmarkFormation measures the time from calling accept_offer to the
// transaction being committed, and formations per second, over the real
// stack: see docs/performance.md, "Formation over loopback".
//
//	go test -run '^$' -bench Formation -benchtime=1x ./internal/bench
//
// sequential/*: 100 formations one after the other; the approval (when
// the mandate asks for one) is obtained before the accept_offer call and
// is not in its time. concurrent8/*: 8 goroutines, each with its own pair
// of agent sessions, take formations until 100 are done; formations/s is
// 100 over the batch's wall time (offer, approval when asked, accept).
// approval uses the buyer mandate that holds every offer.accept for the
// procurement lead (the demo's rule); direct a buyer mandate without
// approval rules. Before the batch, one formation warms the pair (TLS
// sessions, the counterparty's mandate fetched and stored, key records,
// status documents cached); its accept_offer time is reported as
// ms/accept-cold. cpu-ms/formation is the process's user and system time
// over the batch per formation: both instances and all agents run in this
// process, so it is a formation's whole cost, and it moves less than wall
// time when the host's other tenants take the cores.
func BenchmarkFormation(b *testing.B) {
	for _, c := range []struct {
		name     string
		workers  int
		approval bool
	}{
		{"sequential/approval", 1, true},
		{"sequential/direct", 1, false},
		{"concurrent8/approval", workers, true},
		{"concurrent8/direct", workers, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			p := startPair(b)
			as := make([]agents, c.workers)
			for i := range as {
				as[i] = p.connect(b)
			}
			cold, err := p.form(ctx, as[0], c.approval)
			if err != nil {
				b.Fatal(err)
			}
			var accepts []time.Duration
			var wall, cpu time.Duration
			b.ResetTimer()
			for range b.N {
				c0 := processCPU()
				got, took, err := runBatch(ctx, p, as, c.approval)
				if err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c0
				accepts = append(accepts, got...)
				wall += took
			}
			b.StopTimer()
			reportAccepts(b, accepts)
			b.ReportMetric(ms(cold), "ms/accept-cold")
			b.ReportMetric(float64(len(accepts))/wall.Seconds(), "formations/s")
			if cpu > 0 {
				b.ReportMetric(ms(cpu)/float64(len(accepts)), "cpu-ms/formation")
			}
		})
	}
}

// runBatch runs batch formations with one goroutine per agent pair and
// returns each accept_offer's wall time and the batch's.
func runBatch(ctx context.Context, p *pair, as []agents, approval bool) ([]time.Duration, time.Duration, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var accepts []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for _, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= batch {
				d, err := p.form(ctx, a, approval)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					accepts = append(accepts, d)
				}
				stop := first != nil
				mu.Unlock()
				if stop {
					return
				}
			}
		}()
	}
	wg.Wait()
	return accepts, time.Since(start), first
}
