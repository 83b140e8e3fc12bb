package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"runtime"
	"sync"
	"testing"
	"time"
)

// probeVerifies is how many ES256 verifications each processor does in one
// probe: about 20 ms at this host's full speed.
const probeVerifies = 300

// probeSettle is how long the probe waits for the process to go quiet.
const probeSettle = 300 * time.Millisecond

// probeSig is what the probe verifies: one P-256 key, digest and
// signature, made once.
var probeSig = sync.OnceValue(func() (p struct {
	pub    *ecdsa.PublicKey
	digest []byte
	sig    []byte
}) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	d := sha256.Sum256([]byte("host probe"))
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		panic(err)
	}
	p.pub, p.digest, p.sig = &k.PublicKey, d[:], sig
	return p
})

// hostProbe measures how fast the host runs right now: the wall time of
// one ES256 verification (crypto/ecdsa, no per-key table) while every
// processor the host has runs probeVerifies of them at once. The work is
// fixed, so the number moves only with the host: its other tenants, or
// the hypervisor taking the cores. This host's speed swings by a third
// within minutes, and a formation benchmark read beside the probe tells
// "this build is slower" from "this host is slower now"
// (docs/performance.md, "A fifteenth pass").
func hostProbe() time.Duration {
	// The instances' own work trails a batch by some milliseconds (the
	// last deliveries, the collector): let it end first.
	time.Sleep(probeSettle)
	p := probeSig()
	n := runtime.NumCPU()
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			for range probeVerifies {
				if !ecdsa.VerifyASN1(p.pub, p.digest, p.sig) {
					panic("host probe: the signature does not verify")
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start) / probeVerifies
}

// BenchmarkHostProbe reports the host's speed alone (hostProbe), for
// reading beside other runs.
func BenchmarkHostProbe(b *testing.B) {
	var sum time.Duration
	for range b.N {
		sum += hostProbe()
	}
	b.ReportMetric(float64(sum.Nanoseconds())/1e3/float64(b.N), "us/host-probe")
	b.ReportMetric(0, "ns/op")
}
