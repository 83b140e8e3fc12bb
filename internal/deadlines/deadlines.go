// Package deadlines is the loop that keeps anything from waiting forever
// (docs/record-protocol.md, "Nothing waits forever (issue 39)"). At once
// and then every two seconds ([Every]) it asks the engine, which
// record.Engine implements, to
//
//   - expire the draft transactions whose latest offer's deadline has
//     passed, with the grace the parties' clock skew asks for
//     ([Engine.WorkDeadlines]: deadline.elapsed, pilot state machine §5,
//     draft → expired, appended by either party's instance by itself);
//   - raise the alerts of obligations fallen due or overdue against their
//     due condition (obligation §4) and of counterparties unreachable for
//     too long, and probe the counterparties found away
//     ([Engine.WorkTiming]).
//
// [Run] looks at once, so that a restart looks again without waiting: what
// a pass did is in the record, so nothing is lost or done twice (an expiry
// that raced a restart meets its own pending event, or the
// counterparty's). Which transaction is due, and when it is looked at
// again, is the engine's to say: a pass skips the transactions whose
// deadlines cannot have changed since it last looked.
package deadlines

import (
	"context"
	"time"
)

// Engine is what the loop asks of the engine; record.Engine is one.
type Engine interface {
	// WorkDeadlines expires the drafts whose offer's deadline passed and
	// returns how many it expired.
	WorkDeadlines(ctx context.Context) int
	// WorkTiming raises the alerts due and returns how many obligation
	// alerts it raised.
	WorkTiming(ctx context.Context) int
}

// Every is how often [Run] looks: the same period as
// record.DeadlineEvery, on which the engine's probes of an absent
// counterparty are paced.
const Every = 2 * time.Second

// Run looks at once and then every [Every] until ctx ends, and then
// returns ctx's error. A pass that overruns the period is followed by the
// next at once, not by a pile of them.
func Run(ctx context.Context, e Engine) error {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		e.WorkDeadlines(ctx)
		e.WorkTiming(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
