package verify_test

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"
	"math/big"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// Benchmarks over synthetic records of 10, 1 000 and 10 000 events, each
// event signed by both parties' agents with fresh ES256 keys. Run with
// -cpu 1,2: the verifier spreads hashing and signature verification over
// GOMAXPROCS workers. BenchmarkFloor does the same number of bare P-256
// verifications over precomputed digests, spread the same way: the
// verifier cannot beat it, and the gap between the two is the cost of
// everything else a verification does.
//
//	go test -run XXX -bench . -benchtime 3x -cpu 1,2 ./internal/verify

var benchSizes = []int{10, 1000, 10000}

var (
	benchMu      sync.Mutex
	benchRecords = map[int]*verifytest.Record{}
)

// benchRecord builds each size once per process, so -cpu 1,2 reuse it.
func benchRecord(b *testing.B, events int) *verifytest.Record {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if r, ok := benchRecords[events]; ok {
		return r
	}
	r := newRecord(b, events)
	benchRecords[events] = r
	return r
}

func BenchmarkVerify(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			rec := benchRecord(b, n)
			in := inputOf(rec)
			// Once untimed: the first run in a process also compiles the
			// profile schemas a step-7 registry lookup reads.
			rep := verify.Verify(in, opts())
			b.ResetTimer()
			for b.Loop() {
				rep = verify.Verify(in, opts())
			}
			if rep.Results.Failed != 0 {
				b.Fatalf("%d failures on a correct record", rep.Results.Failed)
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(len(rep.Checks))*float64(b.N)/secs, "checks/s")
			b.ReportMetric(float64(rec.Signatures())*float64(b.N)/secs, "sigs/s")
		})
	}
}

// floorJob is one precomputed ES256 verification.
type floorJob struct {
	pub    *ecdsa.PublicKey
	digest [32]byte
	r, s   *big.Int
}

func BenchmarkFloor(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			rec := benchRecord(b, n)
			jobs := floorJobs(b, rec)
			b.ResetTimer()
			for b.Loop() {
				verifyAll(b, jobs)
			}
			b.ReportMetric(float64(len(jobs))*float64(b.N)/b.Elapsed().Seconds(), "sigs/s")
		})
	}
}

func floorJobs(b *testing.B, rec *verifytest.Record) []floorJob {
	var jobs []floorJob
	add := func(in []byte, entry map[string]any) {
		pub, err := rec.Keys.Lookup(entry["key_id"].(string))
		if err != nil {
			b.Fatal(err)
		}
		raw, err := keys.DecodeBase64URL(entry["signature"].(string))
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, floorJob{pub: pub.(*ecdsa.PublicKey), digest: sha256.Sum256(in),
			r: new(big.Int).SetBytes(raw[:32]), s: new(big.Int).SetBytes(raw[32:])})
	}
	for _, o := range rec.Objects {
		list, _ := signature.Entries(o)
		for _, e := range list {
			in, err := signature.SigningInput(o, e)
			if err != nil {
				b.Fatal(err)
			}
			add(in, e)
		}
	}
	for _, m := range rec.Mandates {
		in, err := signature.MandateSigningInput(m)
		if err != nil {
			b.Fatal(err)
		}
		add(in, m["proof"].(map[string]any))
	}
	if len(jobs) != rec.Signatures() {
		b.Fatalf("%d jobs for %d signatures", len(jobs), rec.Signatures())
	}
	return jobs
}

// verifyAll verifies every job across GOMAXPROCS goroutines, as the
// verifier does.
func verifyAll(b *testing.B, jobs []floorJob) {
	workers := runtime.GOMAXPROCS(0)
	var next atomic.Int64
	var bad atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				if !ecdsa.Verify(j.pub, j.digest[:], j.r, j.s) {
					bad.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() {
		b.Fatal("a signature of the record does not verify")
	}
}

// BenchmarkVersusFloor alternates one verification of the record with the
// bare verification of its signatures and reports how much of the floor's
// speed the verifier reaches (floor time / verifier time). Alternating
// keeps the ratio meaningful on a machine whose speed drifts under other
// load, where absolute numbers from separate benchmarks are not.
func BenchmarkVersusFloor(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			rec := benchRecord(b, n)
			in := inputOf(rec)
			jobs := floorJobs(b, rec)
			verify.Verify(in, opts())
			var tv, tf time.Duration
			for b.Loop() {
				t0 := time.Now()
				if rep := verify.Verify(in, opts()); rep.Results.Failed != 0 {
					b.Fatal("failures on a correct record")
				}
				t1 := time.Now()
				verifyAll(b, jobs)
				tv, tf = tv+t1.Sub(t0), tf+time.Since(t1)
			}
			b.ReportMetric(float64(tf)/float64(tv), "floor/verify")
			b.ReportMetric(float64(len(jobs))*float64(b.N)/tv.Seconds(), "sigs/s")
		})
	}
}
