package cli

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
)

// The heap of party verify.
//
// A verifier holds the decoded bundle for its whole run and adds the
// report to it; what it throws away is short-lived. Under the Go
// runtime's default pacing (GOGC=100) the heap may grow to twice what is
// live before a collection, so a 5 000-event bundle, some 60 MB live at
// its peak, reached 120-140 MB of resident memory, a third of it
// garbage. party verify therefore sets a soft memory limit once the
// bundle is read: 1.8 times the heap then, which is mostly the decoded
// bundle (the report and the run's own state add about half as much
// again, so the limit leaves the collector a quarter to work in), and no
// less than verifyMemoryFloor, below which a limit would only make a
// small bundle's run collect more often. The limit is soft: a bundle
// whose live heap outgrows it anyway is collected more often, never
// refused (the runtime bounds the collector's share of the CPU). GOGC is
// left as it is. Either variable set in the environment (GOGC,
// GOMEMLIMIT) is the user's choice, and then nothing is changed.
// The previous limit is restored when the command returns, so a caller
// running it in its own process (the tests) keeps its settings.

// verifyMemoryFloor is the least soft memory limit party verify sets.
const verifyMemoryFloor = 80 << 20

// limitVerifyMemory sets the soft memory limit for verifying a bundle
// whose decoded values are what the heap holds now, and returns the
// function that restores the limit before.
func limitVerifyMemory() (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") != "" {
		return func() {}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	limit := max(int64(verifyMemoryFloor), int64(m.HeapAlloc)*9/5)
	prev := debug.SetMemoryLimit(limit)
	if prev != math.MaxInt64 && prev < limit {
		debug.SetMemoryLimit(prev) // a lower limit someone set stays
	}
	return func() { debug.SetMemoryLimit(prev) }
}
