package record

import (
	"context"
	"errors"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Meter counts what the engine does, for an operator's metrics (package
// metrics implements it over Prometheus counters). Its methods run on the
// act's or the message's goroutine once it is done: they must be cheap and
// must not block.
type Meter interface {
	// Act counts one act of this instance's (perform). outcome is the
	// Outcome's status (recorded, delivered, pending), "held" (for a
	// principal's approval: code is A202-APPROVAL-REQUIRED), "refused"
	// (code is the refusal's first reason code, "" when it has none) or
	// "failed" (an error of this instance's own: nothing was decided).
	Act(act protocol.Act, outcome string, code reason.Code)
	// Received counts one message from a counterparty (Receive):
	// "accepted" (answered, a redelivery included), "refused" (code as
	// for Act), "conflict" (a chain conflict), "unavailable" (the
	// counterparty is told to try again) or "failed".
	Received(outcome string, code reason.Code)
}

// Outcomes a Meter is told besides an Outcome's status.
const (
	meterHeld        = "held"
	meterRefused     = "refused"
	meterFailed      = "failed"
	meterAccepted    = "accepted"
	meterConflict    = "conflict"
	meterUnavailable = "unavailable"
)

// perform runs one act (performAct) and counts its outcome.
func (e *Engine) perform(ctx context.Context, spec actSpec) (Outcome, error) {
	out, err := e.performAct(ctx, spec)
	if e.meter != nil {
		outcome, code := meterOutcome(out.Status, err)
		e.meter.Act(spec.name, outcome, code)
	}
	return out, err
}

// Receive is the receiving side of every message (delivery.Receiver):
// receive, counted. from is the organisation the pinned client
// certificate authenticated.
func (e *Engine) Receive(ctx context.Context, from, txn string, msg delivery.Message) ([][]byte, error) {
	reply, err := e.receive(ctx, from, txn, msg)
	if e.meter != nil {
		outcome, code := meterOutcome(meterAccepted, err)
		e.meter.Received(outcome, code)
	}
	return reply, err
}

// meterOutcome names what became of an act or a message: ok when err is
// nil, else what kind of error it is and the refusal's first code.
func meterOutcome(ok string, err error) (string, reason.Code) {
	if err == nil {
		return ok, ""
	}
	var r *reason.Refusal
	switch {
	case errors.As(err, &r):
		var code reason.Code
		if len(r.Codes) > 0 {
			code = r.Codes[0]
		}
		if r.ApprovalRequestID != "" {
			return meterHeld, code
		}
		return meterRefused, code
	case errors.Is(err, delivery.ErrConflict):
		return meterConflict, ""
	case errors.Is(err, delivery.ErrUnavailable):
		return meterUnavailable, ""
	}
	return meterFailed, ""
}
