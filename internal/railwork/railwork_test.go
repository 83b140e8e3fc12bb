package railwork_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/partyd/party/internal/railwork"
)

// engine is a settlement engine on a simulated clock an hour ahead of the
// bubble's, so that a wait computed on the wrong clock shows. Each pass is
// recorded as an offset from the start of the bubble; plan, when set, says
// after each pass when the next attempt falls due, by the engine's clock.
type engine struct {
	start  time.Time
	passes chan time.Duration
	wake   chan struct{}

	mu   sync.Mutex
	next time.Time
	ok   bool
	err  error
	plan func(pass int, now time.Time) (next time.Time, ok bool)
	n    int
}

func newEngine() *engine {
	return &engine{start: time.Now(), passes: make(chan time.Duration, 64), wake: make(chan struct{}, 1)}
}

func (e *engine) Now() time.Time { return time.Now().Add(time.Hour) }

func (e *engine) WorkSettlements(context.Context) int {
	e.mu.Lock()
	e.n++
	if e.plan != nil {
		e.next, e.ok = e.plan(e.n, e.Now())
	}
	e.mu.Unlock()
	e.passes <- time.Since(e.start)
	return 1
}

func (e *engine) NextSettlementAttempt(context.Context) (time.Time, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.next, e.ok, e.err
}

func (e *engine) RailWake() <-chan struct{} { return e.wake }

// run starts the worker and returns a stop that ends it and checks it
// returned at once, with its context's error.
func run(t *testing.T, e *engine) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- railwork.Run(ctx, e) }()
	return func() {
		t.Helper()
		stopped := time.Now()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
		if waited := time.Since(stopped); waited != 0 {
			t.Fatalf("Run returned %v after its context ended", waited)
		}
	}
}

// expect reads the next passes, which the bubble's clock reaches without
// the test waiting (it moves only when every goroutine is blocked), and
// checks they came at the offsets given.
func expect(t *testing.T, e *engine, want ...time.Duration) {
	t.Helper()
	for i, w := range want {
		if at := <-e.passes; at != w {
			t.Fatalf("pass %d at %v, want %v", i, at, w)
		}
	}
}

// TestRunIdlePolls: with nothing waiting, a pass at once and then every
// Poll.
func TestRunIdlePolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		stop := run(t, e)
		expect(t, e, 0, railwork.Poll, 2*railwork.Poll)
		stop()
	})
}

// TestRunFollowsTheBackoff: a rail that does not answer is asked again
// when the engine's back-off ends (1s, 2s, 4s, then 8s, which the poll
// cuts to 5s), measured on the engine's clock, not the machine's.
func TestRunFollowsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		e.plan = func(pass int, now time.Time) (time.Time, bool) {
			return now.Add(time.Second << (pass - 1)), true
		}
		stop := run(t, e)
		expect(t, e, 0, time.Second, 3*time.Second, 7*time.Second, 7*time.Second+railwork.Poll)
		stop()
	})
}

// TestRunNeverSpins: work that is already due after a pass (its attempt
// left it due) is asked about again after MinWait, not in a busy loop.
func TestRunNeverSpins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		e.plan = func(_ int, now time.Time) (time.Time, bool) { return now.Add(-time.Minute), true }
		stop := run(t, e)
		expect(t, e, 0, railwork.MinWait, 2*railwork.MinWait)
		stop()
	})
}

// TestRunPollsWhenTheStoreFails: a store that cannot say when work falls
// due leaves the worker polling, every Poll.
func TestRunPollsWhenTheStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		e.next, e.ok, e.err = e.Now(), true, errors.New("database is locked")
		stop := run(t, e)
		expect(t, e, 0, railwork.Poll)
		stop()
	})
}

// TestRunWakes: an instruction recorded while the worker sleeps is handed
// to its rail at once; the worker then sleeps a full Poll again.
func TestRunWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine()
		stop := run(t, e)
		expect(t, e, 0)
		synctest.Wait() // asleep until the poll
		e.wake <- struct{}{}
		expect(t, e, 0, railwork.Poll)
		stop()
	})
}
