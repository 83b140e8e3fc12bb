package record_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/partyd/party/internal/record"
)

// TestWorkingSetDoesNotGrowWithRounds: the countersigner checks an act
// against a working set bounded by the act, not by how long the
// transaction ran (issue 13). After 2 and after 22 rounds of assertion and
// rejection, the obligor's next assertion is checked, on both sides, over
// working sets of the same sizes.
func TestWorkingSetDoesNotGrowWithRounds(t *testing.T) {
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	var mu sync.Mutex
	var sizes []int
	stop := record.ObserveWorkingSets(func(id string, n int) {
		if id == txn {
			mu.Lock()
			sizes = append(sizes, n)
			mu.Unlock()
		}
	})
	defer stop()
	round := 0
	assert := func() {
		t.Helper()
		round++
		if _, err := s.Engine.AssertPerformance(ctx, record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence(fmt.Sprintf("certificates, round %d", round))}); err != nil {
			t.Fatal(err)
		}
	}
	rounds := func(n int) {
		t.Helper()
		for range n {
			assert()
			if _, err := b.Engine.Respond(ctx, record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure := func() []int {
		t.Helper()
		mu.Lock()
		sizes = nil
		mu.Unlock()
		assert()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
	rounds(2)
	early := measure()
	if _, err := b.Engine.Respond(ctx, record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient"}); err != nil {
		t.Fatal(err)
	}
	rounds(20)
	late := measure()
	if len(early) == 0 || !slices.Equal(early, late) {
		t.Fatalf("working sets of the assertion after 2 rounds %v, after 22 rounds %v", early, late)
	}
}
