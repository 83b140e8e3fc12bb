package record_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// changeLog collects the changes one engine announces.
type changeLog struct {
	mu  sync.Mutex
	got []record.Change
}

func (l *changeLog) add(c record.Change) { l.mu.Lock(); l.got = append(l.got, c); l.mu.Unlock() }

func (l *changeLog) states(txn string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.got {
		if c.TransactionID == txn {
			out = append(out, c.State)
		}
	}
	return out
}

// Both sides announce every commit of a formation: the offer stored, each
// event appended, countersigned and its countersignature stored, with the
// state the record reached; a cancelled subscription hears nothing more.
func TestChangesAnnouncedOnBothSides(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	var bl, sl changeLog
	cancelB := b.Engine.Subscribe(bl.add)
	s.Engine.Subscribe(sl.add)
	txn := recordtest.Form(t, b, s, "3200.00")
	for name, l := range map[string]*changeLog{"buyer": &bl, "supplier": &sl} {
		st := l.states(txn)
		if len(st) < 3 || st[0] != "draft" || st[len(st)-1] != "committed" {
			t.Fatalf("%s announced %v", name, st)
		}
	}
	// The supplier countersigns agreement.direct before its own
	// agreement.committed comes back countersigned; the buyer stores both
	// in one write (the commitment in the answer).
	if st := sl.states(txn); !slices.Contains(st, "agreement_pending") {
		t.Fatalf("supplier announced %v", st)
	}
	cancelB()
	n := len(bl.states(txn))
	o := recordtest.Offer(t, s, "100.00")
	if got := len(bl.states(o.TransactionID)); got != 0 || len(bl.states(txn)) != n {
		t.Fatalf("a cancelled subscription still heard %d changes", got)
	}
	if st := sl.states(o.TransactionID); len(st) == 0 || st[0] != "draft" {
		t.Fatalf("the supplier's own offer was not announced: %v", st)
	}
}

// Subscribers are called in the order they subscribed, every time, and one
// cancelled in the middle leaves the others' order as it was.
func TestSubscribersCalledInOrder(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	var mu sync.Mutex
	var calls []int
	sub := func(n int) func() {
		return b.Engine.Subscribe(func(record.Change) { mu.Lock(); calls = append(calls, n); mu.Unlock() })
	}
	sub(1)
	cancel2 := sub(2)
	sub(3)
	check := func(want []int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(calls) == 0 || len(calls)%len(want) != 0 {
			t.Fatalf("calls %v", calls)
		}
		for i, n := range calls {
			if n != want[i%len(want)] {
				t.Fatalf("calls %v, want repeats of %v", calls, want)
			}
		}
		calls = nil
	}
	recordtest.Form(t, b, s, "3200.00")
	check([]int{1, 2, 3})
	cancel2()
	sub(4)
	recordtest.Form(t, b, s, "100.00")
	check([]int{1, 3, 4})
}
