package deadlines_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/partyd/party/internal/deadlines"
)

// engine records when each pass asked for each kind of work, as an offset
// from the start of the bubble.
type engine struct {
	start time.Time
	calls chan string
	at    chan time.Duration
	// afterTiming, when set, is called at the end of each pass.
	afterTiming func()
}

func newEngine() *engine {
	return &engine{start: time.Now(), calls: make(chan string, 64), at: make(chan time.Duration, 64)}
}

func (e *engine) WorkDeadlines(context.Context) int {
	e.calls <- "deadlines"
	e.at <- time.Since(e.start)
	return 0
}

func (e *engine) WorkTiming(context.Context) int {
	e.calls <- "timing"
	e.at <- time.Since(e.start)
	if e.afterTiming != nil {
		e.afterTiming()
	}
	return 0
}

// next waits for the next call, which the bubble's clock reaches without
// the test waiting: it moves only when every goroutine is blocked.
func (e *engine) next(t *testing.T) (string, time.Duration) {
	t.Helper()
	return <-e.calls, <-e.at
}

// TestRunLooksAtOnceThenEveryPeriod: the first pass is at once (a restart
// looks again without waiting), each asks for the expiries and then the
// alerts, and the next comes every Every, nothing in between.
func TestRunLooksAtOnceThenEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- deadlines.Run(ctx, e) }()
		for pass := range 4 {
			want := time.Duration(pass) * deadlines.Every
			for _, kind := range []string{"deadlines", "timing"} {
				if got, at := e.next(t); got != kind || at != want {
					t.Fatalf("pass %d: %s at %v, want %s at %v", pass, got, at, kind, want)
				}
			}
		}
		synctest.Wait()
		if len(e.calls) != 0 {
			t.Fatalf("a pass between periods: %d calls", len(e.calls))
		}
		stopped := time.Now()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
		if waited := time.Since(stopped); waited != 0 {
			t.Fatalf("Run returned %v after its context ended", waited)
		}
	})
}

// TestRunStopsBeforeTheNextPass: a context that ends while a pass is
// under way stops the loop once the pass returns; no further pass begins.
func TestRunStopsBeforeTheNextPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		ctx, cancel := context.WithCancel(t.Context())
		e.afterTiming = cancel
		done := make(chan error, 1)
		go func() { done <- deadlines.Run(ctx, e) }()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
		if len(e.calls) != 2 {
			t.Fatalf("%d calls, want the one pass (2)", len(e.calls))
		}
	})
}
