package record

import (
	"errors"
	"fmt"
	"testing"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/reason"
)

// TestMeterOutcome: what a Meter is told of each kind of answer, a
// wrapped one included.
func TestMeterOutcome(t *testing.T) {
	t.Parallel()
	held := reason.Refusef(reason.ApprovalRequired, "held")
	held.ApprovalRequestID = "apq_1"
	for _, c := range []struct {
		err     error
		outcome string
		code    reason.Code
	}{
		{nil, StatusRecorded, ""},
		{reason.Refusef(reason.StateTransitionDenied, "no"), "refused", reason.StateTransitionDenied},
		{fmt.Errorf("renewed: %w", reason.Refusef(reason.SequenceConflict, "moved")), "refused", reason.SequenceConflict},
		{reason.Refuse("arguments: bad"), "refused", ""},
		{held, "held", reason.ApprovalRequired},
		{fmt.Errorf("%w: busy", delivery.ErrUnavailable), "unavailable", ""},
		{fmt.Errorf("%w: fork", delivery.ErrConflict), "conflict", ""},
		{errors.New("disk full"), "failed", ""},
	} {
		outcome, code := meterOutcome(StatusRecorded, c.err)
		if outcome != c.outcome || code != c.code {
			t.Errorf("%v: %s %s, want %s %s", c.err, outcome, code, c.outcome, c.code)
		}
	}
}
