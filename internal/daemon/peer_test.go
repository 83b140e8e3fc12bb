package daemon

import (
	"testing"

	"github.com/partyd/party/internal/deadlines"
	"github.com/partyd/party/internal/record"
)

// TestDeadlinePeriod: the deadline loop Record starts looks as often as
// the engine expects it to, on which its probes of an absent counterparty
// are paced (record.DeadlineEvery).
func TestDeadlinePeriod(t *testing.T) {
	if deadlines.Every != record.DeadlineEvery {
		t.Fatalf("deadlines.Every %v, record.DeadlineEvery %v", deadlines.Every, record.DeadlineEvery)
	}
}
