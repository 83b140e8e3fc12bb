package cli

import (
	"math"
	"runtime/debug"
	"testing"
)

// party verify's collector settings hold for the read or the run only,
// and the user's own settings are left alone.
func TestVerifyMemorySettings(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	restore := readingBundle()
	if got := debug.SetGCPercent(readingGCPercent); got != readingGCPercent {
		t.Errorf("while reading GOGC is %d, want %d", got, readingGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("after reading GOGC is %d, want 77 again", got)
	}

	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	restore = limitVerifyMemory()
	if got := debug.SetMemoryLimit(-1); got < verifyMemoryFloor || got == math.MaxInt64 {
		t.Errorf("memory limit while verifying %d, want at least %d", got, verifyMemoryFloor)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after verifying %d, want none", got)
	}

	t.Setenv("GOGC", "150")
	restoreGC, restoreLimit := readingBundle(), limitVerifyMemory()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("with GOGC set, reading changed GOGC to %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOGC set, verifying set a memory limit %d", got)
	}
	restoreGC()
	restoreLimit()
}
