package cli

import (
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
//
// While the bundle is read, almost all that is allocated is kept: the
// decoded documents (the file buffers are reused, the leaves shared).
// Collections then find next to nothing to free, and under GOGC=100 a
// 5 000-event bundle was collected seven times on its way to 40 MB, each
// time marking all that had been read so far. runVerify raises GOGC
// to readingGCPercent for the read (two collections there), and restores
// it; the heap the limit is then computed from is the same within a
// megabyte, since what is allocated is what is kept. The same environment
// variables leave it alone.

// verifyMemoryFloor is the least soft memory limit party verify sets.
const verifyMemoryFloor = 80 << 20

// limitVerifyMemory sets the soft memory limit for verifying a bundle
// whose decoded values are what the heap holds now, and returns the
// function that restores the limit before.
func limitVerifyMemory() (restore func()) {
	if userTunesGC() {
		return func() {}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return setMemoryLimit(max(int64(verifyMemoryFloor), int64(m.HeapAlloc)*9/5))
}

// setMemoryLimit sets the soft memory limit to limit, unless a lower one
// is set already, and returns the function that restores the limit
// before. GOGC or GOMEMLIMIT in the environment is the user's choice,
// and then nothing is changed.
func setMemoryLimit(limit int64) (restore func()) {
	if userTunesGC() {
		return func() {}
	}
	prev := debug.SetMemoryLimit(limit)
	if prev < limit {
		debug.SetMemoryLimit(prev) // a lower limit someone set stays
	}
	return func() { debug.SetMemoryLimit(prev) }
}

// readingGCPercent is GOGC while party verify reads a bundle.
const readingGCPercent = 400

// setGCPercent sets GOGC to n for part of a command's run and returns the
// function that restores it. GOGC or GOMEMLIMIT in the environment is the
// user's choice, and then nothing is changed.
func setGCPercent(n int) (restore func()) {
	if userTunesGC() {
		return func() {}
	}
	prev := debug.SetGCPercent(n)
	return func() { debug.SetGCPercent(prev) }
}

// serveGC sets GOGC and the soft memory limit as party serve runs
// (ServeGCPercent, serveMemoryLimit) and returns the function that
// restores both: the collector's half of ServeRuntime.
func serveGC() (restore func()) {
	restoreGC, restoreLimit := setGCPercent(ServeGCPercent), setMemoryLimit(serveMemoryLimit)
	return func() {
		restoreLimit()
		restoreGC()
	}
}

// userTunesGC reports whether GOGC or GOMEMLIMIT is set in the
// environment: then the collector is the user's, and no command changes it.
func userTunesGC() bool { return os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") != "" }
