package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// The collector settings party verify (while reading, then its memory
// limit) and party serve make hold for that part of the run only, and
// the user's GOGC or GOMEMLIMIT leaves them alone.
func TestCollectorSettings(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	for _, c := range []struct {
		n   int
		set func() func()
	}{
		{readingGCPercent, func() func() { return setGCPercent(readingGCPercent) }},
		{ServeGCPercent, serveGC},
	} {
		n := c.n
		restore := c.set()
		if got := debug.SetGCPercent(n); got != n {
			t.Errorf("GOGC is %d, want %d", got, n)
		}
		restore()
		if got := debug.SetGCPercent(77); got != 77 {
			t.Errorf("after restoring GOGC is %d, want 77 again", got)
		}
	}

	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	restore := serveGC()
	if got := debug.SetMemoryLimit(-1); got != serveMemoryLimit {
		t.Errorf("memory limit while serving %d, want %d", got, serveMemoryLimit)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after serving %d, want none", got)
	}
	debug.SetMemoryLimit(serveMemoryLimit / 2)
	restore = serveGC()
	if got := debug.SetMemoryLimit(-1); got != serveMemoryLimit/2 {
		t.Errorf("serving lowered a limit already set to %d", got)
	}
	restore()
	debug.SetMemoryLimit(math.MaxInt64)

	restore = limitVerifyMemory()
	if got := debug.SetMemoryLimit(-1); got < verifyMemoryFloor || got == math.MaxInt64 {
		t.Errorf("memory limit while verifying %d, want at least %d", got, verifyMemoryFloor)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after verifying %d, want none", got)
	}

	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "150")
			restoreGC, restoreLimit := serveGC(), limitVerifyMemory()
			if got := debug.SetGCPercent(77); got != 77 {
				t.Errorf("with %s set, GOGC changed to %d", env, got)
			}
			if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
				t.Errorf("with %s set, a memory limit %d", env, got)
			}
			restoreGC()
			restoreLimit()
		})
	}
}

// party serve runs with one processor more than the runtime chose, for
// the serve only; GOMAXPROCS in the environment leaves the number alone.
func TestServeProcessors(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	t.Setenv("GOMAXPROCS", "")
	before := runtime.GOMAXPROCS(0)
	restore := ServeRuntime()
	if got := runtime.GOMAXPROCS(0); got != before+1 {
		t.Errorf("GOMAXPROCS while serving %d, want %d", got, before+1)
	}
	if got := debug.SetGCPercent(-1); got != ServeGCPercent {
		t.Errorf("GOGC while serving %d, want %d", got, ServeGCPercent)
	}
	debug.SetGCPercent(ServeGCPercent)
	restore()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS after serving %d, want %d again", got, before)
	}

	t.Setenv("GOMAXPROCS", "1")
	restore = serveProcs()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("with GOMAXPROCS set, serving changed it to %d", got)
	}
	restore()
}
