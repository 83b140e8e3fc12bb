package cli

import (
	"runtime/debug"
	"testing"
)

// party serve's GOGC holds while it serves, and the operator's GOGC or
// GOMEMLIMIT leaves it alone.
func TestServingGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	restore := servingGC()
	if got := debug.SetGCPercent(ServeGCPercent); got != ServeGCPercent {
		t.Errorf("while serving GOGC is %d, want %d", got, ServeGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("after serving GOGC is %d, want 77 again", got)
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "150")
			restore := servingGC()
			if got := debug.SetGCPercent(77); got != 77 {
				t.Errorf("with %s set, serving changed GOGC to %d", env, got)
			}
			restore()
		})
	}
}
