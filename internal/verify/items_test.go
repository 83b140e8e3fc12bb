package verify_test

import (
	"reflect"
	"testing"

	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// A record large enough that each worker's checks fill several chunks
// (items.go) gives the same report on one worker, two and three as it
// does with every item's checks kept apart: in item order, whatever
// worker ran which item.
func TestDeterministicAcrossChunks(t *testing.T) {
	rec, err := verifytest.Large(1200)
	if err != nil {
		t.Fatal(err)
	}
	var first *verify.Report
	for _, workers := range []int{1, 2, 3} {
		o := opts()
		o.Workers = workers
		rep := verify.Verify(inputOf(rec), o)
		if rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
			t.Fatalf("%d workers: %d failed, %d not checkable", workers, rep.Results.Failed, rep.Results.NotCheckable)
		}
		if len(rep.Checks) < 3*4096 {
			t.Fatalf("%d checks: too few to fill a chunk per worker", len(rep.Checks))
		}
		if first == nil {
			first = rep
		} else if !reflect.DeepEqual(first, rep) {
			t.Fatalf("%d workers give another report than one", workers)
		}
	}
}
