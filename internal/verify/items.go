package verify

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Checks made concurrently, item by item, reassembled in item order.
//
// The concurrent parts of a run (an object's signature checks, an event's
// guard, authority, decision and approvals) each need somewhere to put
// their checks and the references they found missing while others do the
// same. One fork per item did that, at the price of a copy of the run and
// a list of checks for every object and every event of the record, all
// alive until they were joined: for a large record, more memory than the
// report itself. Instead each worker has one fork, and every item records
// the span of that fork's checks it added. A fork's checks are kept in
// chunks of chunkChecks, a new chunk begun between items when the current
// one is nearly full, so that a worker's list is never copied to grow.
// Joining then copies each item's span in item order, and merges each
// fork's missing references, a set. The report is therefore the one the
// per-item forks gave, whatever worker ran which item.

// items are the checks n items added on their workers' forks.
type items struct {
	forks  []*run
	chunks [][][]Check // per fork, its filled chunks; the current one is its checks
	spans  []span
	first  int // the size of a fork's first chunk: what its share of n items needs
}

// span is where one item's checks sit:
// chunks[fork][chunk][from:to], or the fork's current checks when chunk
// is past its filled chunks.
type span struct{ fork, chunk, from, to int32 }

// chunkChecks is the size of a fork's chunk of checks, and chunkSlack the
// room below which a new one is begun (more than any one item adds, so an
// item's checks rarely make a chunk grow).
const (
	chunkChecks = 4096
	chunkSlack  = 64
)

// newItems prepares n items run on up to workers forks of r.
func (r *run) newItems(n, workers int) *items {
	workers = max(workers, 1)
	it := &items{forks: make([]*run, workers), chunks: make([][][]Check, workers), spans: make([]span, n),
		// A countersigner's working set is tens of objects: its first
		// chunk is sized for that, not for a record of thousands.
		first: min(chunkChecks, max(2*chunkSlack, checksPerObject*(n/workers+1)+chunkSlack))}
	for w := range it.forks {
		it.forks[w] = r.fork()
	}
	return it
}

// do runs f for item i on worker w's fork and records its span. Each
// worker calls it only for its own w, so forks are never shared.
func (it *items) do(w, i int, f func(c *run)) {
	c := it.forks[w]
	// Counting what verified (Options.CountVerified, the countersigner's
	// run), a fork lists only what failed or could not be checked, almost
	// always nothing: its list grows by append from empty, in one chunk,
	// instead of chunks made for every check of a record (tens of KiB an
	// extension, zeroed and collected, for nothing).
	if !c.opt.CountVerified && cap(c.checks)-len(c.checks) < chunkSlack {
		if len(c.checks) > 0 {
			it.chunks[w] = append(it.chunks[w], c.checks)
		}
		size := chunkChecks
		if len(it.chunks[w]) == 0 && cap(c.checks) == 0 {
			size = it.first
		}
		c.checks = make([]Check, 0, size)
	}
	from := len(c.checks)
	f(c)
	it.spans[i] = span{int32(w), int32(len(it.chunks[w])), int32(from), int32(len(c.checks))}
}

// checksOf returns the checks of span s.
func (it *items) checksOf(s span) []Check {
	if cs := it.chunks[s.fork]; int(s.chunk) < len(cs) {
		return cs[s.chunk][s.from:s.to]
	}
	return it.forks[s.fork].checks[s.from:s.to]
}

// joinItems appends, for each item index in turn, its checks from every
// list in lists order (so item k of the first list, then item k of the
// second, then item k+1 of the first ...), and then the missing
// references every fork found. The lists have one item count.
func (r *run) joinItems(lists ...*items) {
	n := 0
	for _, it := range lists {
		for _, s := range it.spans {
			n += int(s.to - s.from)
		}
	}
	r.checks = slices.Grow(r.checks, n)
	// A filled chunk is let go once its last item is copied, so that the
	// checks are not held twice for the whole of the copy.
	last := make([][][]int, len(lists))
	for l, it := range lists {
		last[l] = make([][]int, len(it.forks))
		for w := range it.forks {
			last[l][w] = make([]int, len(it.chunks[w]))
		}
		for k, sp := range it.spans {
			if int(sp.chunk) < len(it.chunks[sp.fork]) {
				last[l][sp.fork][sp.chunk] = k
			}
		}
	}
	for k := range lists[0].spans {
		for l, it := range lists {
			sp := it.spans[k]
			r.checks = append(r.checks, it.checksOf(sp)...)
			if int(sp.chunk) < len(it.chunks[sp.fork]) && last[l][sp.fork][sp.chunk] == k {
				it.chunks[sp.fork][sp.chunk] = nil
			}
		}
	}
	for _, it := range lists {
		for _, c := range it.forks {
			r.verified += c.verified
			for id := range c.unresolved {
				r.unresolved[id] = true
			}
		}
	}
}

// workers is how many goroutines parallel uses for n items.
func (r *run) workers(n int) int {
	w := r.opt.Workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	return max(min(w, n), 1)
}

// parallel calls f(w, i) for every i in 0..n-1 across the configured
// number of workers; w (0 to workers(n)-1) is the worker that runs item i.
func (r *run) parallel(n int, f func(w, i int)) {
	workers := r.workers(n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(w, i)
			}
		}()
	}
	wg.Wait()
}

// checksPerObject is about how many checks a record makes per object and
// mandate: a little over eight for a bilateral record (an event's two
// signatures and their keys' status, its counts, countersignature, link,
// transition, guard, authority, decision and approvals; an act object's
// hash, signature, key status, count, signer and creator). The report's
// list is made that large at the start, so that it is not copied when it
// grows: at eight, the 5 000-event record's 142 544 checks overran it by
// 2 %, and the copy at the very end was its run's peak (15 MB). A record
// that needs more still grows it.
const checksPerObject = 9

func expectedChecks(objects int) int { return checksPerObject*objects + 64 }
