// Package railwork is the payer's settlement worker (settlement handoff
// §2–§7): it decides when this instance asks its rails about the
// instructions it pays. What one pass does is the engine's
// ([Engine.WorkSettlements], which record.Engine implements): every
// instruction recorded in both records and not yet answered, or answered
// pending, or answered succeeded while its transaction is open to a
// reversal, is handed to its rail under its idempotency key, the attempt
// counted durably before the call, and the answer becomes an
// adapter_receipt in both records. A failed or unanswered call is asked
// again when the engine's back-off ends (delivery.Outbox.Backoff), which
// the engine records as the instruction's next attempt.
//
// [Run] makes a pass at once, then sleeps until the first of:
//
//   - the earliest next attempt the engine holds
//     ([Engine.NextSettlementAttempt]), measured on the engine's clock
//     ([Engine.Now]), which a test may simulate, and never less than
//     [MinWait], so that an attempt already due is not spun on;
//   - a wake ([Engine.RailWake]): an instruction this instance pays was
//     just recorded, and its rail is asked within the moment;
//   - [Poll], so that nothing the engine could not read is forgotten.
//
// Everything it decides is in the record, so a restart loses nothing:
// the first pass finds what is due.
package railwork

import (
	"context"
	"time"
)

// Engine is what the worker asks of the engine; record.Engine is one.
type Engine interface {
	// WorkSettlements does the rail work that is due and returns how many
	// instructions it worked on.
	WorkSettlements(ctx context.Context) int
	// NextSettlementAttempt is when the earliest rail work falls due, by
	// the engine's clock (past when a pass left some due); ok is false
	// when none waits.
	NextSettlementAttempt(ctx context.Context) (next time.Time, ok bool, err error)
	// Now is the engine's clock.
	Now() time.Time
	// RailWake receives when rail work falls due at once.
	RailWake() <-chan struct{}
}

// Poll is the longest the worker sleeps without a pass.
const Poll = 5 * time.Second

// MinWait is the shortest sleep between passes.
const MinWait = 50 * time.Millisecond

// Run does the rail work as it falls due (see the package documentation)
// until ctx ends, and then returns ctx's error.
func Run(ctx context.Context, e Engine) error {
	for {
		e.WorkSettlements(ctx)
		timer := time.NewTimer(wait(ctx, e))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		case <-e.RailWake():
			timer.Stop()
		}
	}
}

// wait is how long to sleep after a pass: until the next attempt falls
// due, within [MinWait, Poll]. A store that cannot say waits Poll.
func wait(ctx context.Context, e Engine) time.Duration {
	next, ok, err := e.NextSettlementAttempt(ctx)
	if err != nil || !ok {
		return Poll
	}
	if d := next.Sub(e.Now()); d < Poll {
		return max(d, MinWait)
	}
	return Poll
}
