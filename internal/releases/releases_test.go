package releases_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/partyd/party/internal/releases"
)

// engine records when each release was asked for, as an offset from the
// start of the bubble.
type engine struct {
	start time.Time
	at    chan time.Duration
}

func (e *engine) ReleaseHeld(context.Context) { e.at <- time.Since(e.start) }

// TestRunReleasesEveryPeriod: the first release is one period after the
// start, then one every Every, nothing in between; the loop ends with its
// context, at once. The bubble's clock moves only when every goroutine is
// blocked, so nothing here waits.
func TestRunReleasesEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &engine{start: time.Now(), at: make(chan time.Duration, 64)}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- releases.Run(ctx, e) }()
		synctest.Wait()
		if len(e.at) != 0 {
			t.Fatalf("released at once, before a period passed")
		}
		for n := 1; n <= 3; n++ {
			if at, want := <-e.at, time.Duration(n)*releases.Every; at != want {
				t.Fatalf("release %d at %v, want %v", n, at, want)
			}
		}
		synctest.Wait()
		if len(e.at) != 0 {
			t.Fatalf("a release between periods")
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
