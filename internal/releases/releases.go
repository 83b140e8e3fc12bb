// Package releases is the loop that continues the acts a principal has
// approved since they were held, and ends the ones it rejected or let
// expire (docs/record-protocol.md, "Nothing waits forever (issue 39)",
// held acts). The act it continues is the
// one this instance takes by itself: formation's commit (the acceptor's
// own agreement.sign) that a rule of its mandate holds for approval; what
// a release does is the engine's ([Engine.ReleaseHeld], which
// record.Engine implements): the commit continues, or the transaction's
// notice carries A202-POLICY-DENIED (rejected) or A202-APPROVAL-REQUIRED
// (the approval ran out before the act was taken), and nothing is
// appended.
//
// [Run] polls every two seconds ([Every]) rather than waiting for a
// signal: the principal decides on this process's approvals page as often
// as with party approve or party reject in another process on the same
// database file, and only the database sees both.
package releases

import (
	"context"
	"time"
)

// Engine is what the loop asks of the engine; record.Engine is one.
type Engine interface {
	// ReleaseHeld continues or ends the held acts decided since its last
	// call.
	ReleaseHeld(ctx context.Context)
}

// Every is how often [Run] looks.
const Every = 2 * time.Second

// Run releases what was decided, every [Every], the first time one period
// after it starts, until ctx ends, and then returns ctx's error.
func Run(ctx context.Context, e Engine) error {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			e.ReleaseHeld(ctx)
		}
	}
}
