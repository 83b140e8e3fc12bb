package verify

import (
	"fmt"
	"sort"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Step 3: version chains (§4 step 3). Version 1 names no predecessor and
// every later version names one; each version is its predecessor's plus
// one and of the same type; no version has two successors. A predecessor
// the bundle does not hold is where the disclosed chain starts: not
// checkable, not a gap. Two different objects under one id claim one
// identity, which is the same fault as a fork.
//
// Determination supersession chains follow the same no-forks rule
// (determination §5 rule 3), with that document's code,
// A202-DETERMINATION-SUPERSESSION-FORKED.
func (r *run) step3() {
	for _, o := range r.clashes {
		r.add(3, "id_unique", o.subject, Failed, reason.EvidenceChainGap,
			"another, different object in the bundle has the same id: two objects claim one identity")
	}
	var successors claims
	for _, o := range r.objs {
		version, vok := intAt(o.val, "version")
		prevV, present := o.val["previous_version_id"]
		prev, hasPrev := prevV.(string)
		switch {
		case !vok || version < 1:
			r.add(3, "version", o.subject, Failed, reason.EvidenceChainGap, fmt.Sprintf("version is %s, not an integer from 1", show(o.val["version"])))
		case present && prevV != nil && !hasPrev:
			r.add(3, "version_chain", o.subject, Failed, reason.EvidenceChainGap, "previous_version_id is neither null nor an identifier")
		case version > 1 && !hasPrev:
			r.add(3, "version_chain", o.subject, Failed, reason.EvidenceChainGap, fmt.Sprintf("version %d names no predecessor", version))
		}
		if hasPrev {
			successors.add(prev, o)
		}
	}
	forked := func(prev string, n int) string {
		return fmt.Sprintf("%s has %d successors: two objects claim to be its current version", prev, n)
	}
	r.unforked(successors, "version_chain_fork", reason.EvidenceChainGap, forked, func(prev string, o *object) {
		version, _ := intAt(o.val, "version")
		p, held := r.byID[prev]
		switch {
		case version == 1:
			r.add(3, "version_chain", o.subject, Failed, reason.EvidenceChainGap, "version 1 names a predecessor, "+prev)
		case !held:
			r.add(3, "version_chain", o.subject, NotCheckable, "", prev+" is not in the bundle: the disclosed chain starts here")
			r.missing(prev)
		case p.typ != o.typ:
			r.add(3, "version_chain", o.subject, Failed, reason.EvidenceChainGap, fmt.Sprintf("a %s cannot be a version of %s, a %s", o.typ, prev, p.typ))
		default:
			pv, _ := intAt(p.val, "version")
			if version != pv+1 {
				r.add(3, "version_chain", o.subject, Failed, reason.EvidenceChainGap, fmt.Sprintf("version %d follows version %d of %s", version, pv, prev))
			} else {
				r.add(3, "version_chain", o.subject, Verified, "", fmt.Sprintf("version %d follows version %d, %s", version, pv, prev))
			}
		}
	})

	var superseded claims
	for _, o := range r.objs {
		if o.typ != protocol.Determination {
			continue
		}
		s, ok := objAt(o.payload, "supersedes")
		if !ok {
			continue
		}
		superseded.add(str(s, "determination_id"), o)
	}
	forked = func(t string, n int) string {
		return fmt.Sprintf("%d determinations supersede %s: two claim to be current on one question", n, t)
	}
	r.unforked(superseded, "supersession_fork", reason.DeterminationSupersessionForked, forked, func(t string, o *object) {
		if d, held := r.byID[t]; !held {
			r.add(3, "supersession_chain", o.subject, NotCheckable, "", t+" is not in the bundle")
			r.missing(t)
		} else if d.typ != protocol.Determination {
			r.add(3, "supersession_chain", o.subject, Failed, reason.DeterminationSupersessionForked, fmt.Sprintf("%s is a %s, not a determination", t, d.typ))
		} else {
			r.add(3, "supersession_chain", o.subject, Verified, "", "the only determination superseding "+t)
		}
	})
}

// claims collects the objects that claim to follow one id (its successor
// versions, the determinations superseding it), the ids in the order
// first claimed, so that checks come out in bundle order.
type claims struct {
	ids []string
	by  map[string][]*object
}

func (c *claims) add(id string, o *object) {
	if c.by == nil {
		c.by = map[string][]*object{}
	}
	if _, seen := c.by[id]; !seen {
		c.ids = append(c.ids, id)
	}
	c.by[id] = append(c.by[id], o)
}

// unforked applies the no-forks rule of both chains: an id that several
// objects claim to follow is a fork, check failed with code on each of
// them (why says it, given the id and how many claim it); every other id
// is handed to f with its one claimant, in the order first claimed.
func (r *run) unforked(c claims, check string, code reason.Code, why func(id string, n int) string, f func(id string, o *object)) {
	for _, id := range c.ids {
		s := c.by[id]
		if len(s) > 1 {
			for _, o := range s {
				r.add(3, check, o.subject, Failed, code, why(id, len(s)))
			}
			continue
		}
		f(id, s[0])
	}
}

// stream is one disclosed event stream, its events in sequence order.
type stream struct {
	key       string // "kind:id"
	kind, id  string
	events    []*object
	fromStart bool   // disclosed from its first event
	linked    []bool // linked[i]: event i follows event i-1 without a break
}

// Step 4: per-stream continuity (§4 step 4). Within each disclosed stream
// and only within it: sequence rises by one and previous_event_hash is the
// hash of the bytes of the preceding event. The first disclosed event
// names no predecessor (the stream is disclosed from its start) or one the
// bundle does not hold (a stated boundary, not a gap, §6 rule 3). Nothing
// is inferred across streams.
func (r *run) step4() {
	for _, o := range r.objs {
		if o.typ != protocol.TransactionEvent {
			continue
		}
		sm, ok := objAt(o.payload, "stream")
		kind, id := str(sm, "kind"), str(sm, "id")
		if !ok || kind == "" || id == "" {
			r.add(4, "stream", o.subject, Failed, reason.EvidenceChainGap, "the event names no stream {kind, id}, so it continues no stream")
			continue
		}
		key := kind + ":" + id
		s, seen := r.streamBy[key]
		if !seen {
			s = &stream{key: key, kind: kind, id: id}
			r.streamBy[key] = s
			r.streams = append(r.streams, s)
		}
		s.events = append(s.events, o)
	}
	for _, s := range r.streams {
		sort.SliceStable(s.events, func(i, j int) bool {
			a, aok := intAt(s.events[i].payload, "sequence")
			b, bok := intAt(s.events[j].payload, "sequence")
			if aok != bok {
				return aok
			}
			if a != b {
				return a < b
			}
			return s.events[i].pos < s.events[j].pos
		})
		s.linked = make([]bool, len(s.events))
		r.streamStart(s)
		for i := 1; i < len(s.events); i++ {
			res, detail := r.link(s, s.events[i-1], s.events[i])
			s.linked[i] = res == Verified
			r.add(4, "event_chain", s.key, res, reason.EvidenceChainGap, detail)
		}
	}
}

func (r *run) streamStart(s *stream) {
	e := s.events[0]
	p := e.payload
	seq, seqOK := intAt(p, "sequence")
	prev, hasPrev := strAt(p, "previous_event_hash")
	switch {
	case !seqOK:
		r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap, fmt.Sprintf("the sequence of %s is %s, not an integer", e.subject, show(p["sequence"])))
	case isNull(p, "previous_event_hash") && seq == 1:
		s.fromStart = true
		r.add(4, "stream_start", s.key, Verified, "", fmt.Sprintf("disclosed from its first event, %s", e.subject))
	case isNull(p, "previous_event_hash"):
		r.add(4, "stream_start", s.key, NotCheckable, "",
			fmt.Sprintf("the first disclosed event, %s, names no predecessor yet carries sequence %d: where the stream starts is not established", e.subject, seq))
	case !hasPrev:
		r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap, fmt.Sprintf("previous_event_hash of %s is neither null nor a hash", e.subject))
	case seq == 1:
		r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap, fmt.Sprintf("%s carries sequence 1 yet names a predecessor", e.subject))
	default:
		t, held := r.byHash[prev]
		if !held {
			if d, declared := r.byDeclared[prev]; declared {
				r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap,
					fmt.Sprintf("%s names %s, which %s declares but whose bytes hash to %s", e.subject, short(prev), d.subject, short(d.recomputed)))
				return
			}
			r.add(4, "stream_boundary", s.key, NotCheckable, "",
				fmt.Sprintf("disclosed from mid-stream: %s names a predecessor the bundle does not hold (a stated boundary, not a gap)", e.subject))
			return
		}
		switch {
		case t.typ != protocol.TransactionEvent:
			r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap, fmt.Sprintf("%s names %s, a %s, as its predecessor", e.subject, t.subject, t.typ))
		case r.streamOf(t) != s.key:
			r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap,
				fmt.Sprintf("%s names %s on stream %s as its predecessor: continuity never runs across streams", e.subject, t.subject, r.streamOf(t)))
		default:
			r.add(4, "stream_start", s.key, Failed, reason.EvidenceChainGap, fmt.Sprintf("%s names %s, which is ordered after it, as its predecessor", e.subject, t.subject))
		}
	}
}

func (r *run) streamOf(e *object) string {
	sm, _ := objAt(e.payload, "stream")
	return str(sm, "kind") + ":" + str(sm, "id")
}

// link checks that b directly follows a in one stream.
func (r *run) link(s *stream, a, b *object) (Result, string) {
	as, aok := intAt(a.payload, "sequence")
	bs, bok := intAt(b.payload, "sequence")
	prev, hasPrev := strAt(b.payload, "previous_event_hash")
	switch {
	case !aok || !bok:
		return Failed, fmt.Sprintf("%s or %s carries no integer sequence", a.subject, b.subject)
	case bs == as:
		return Failed, fmt.Sprintf("%s and %s both carry sequence %d: the stream forks", a.subject, b.subject, bs)
	case bs != as+1:
		return Failed, fmt.Sprintf("sequence %d (%s) follows %d (%s)", bs, b.subject, as, a.subject)
	case !hasPrev:
		return Failed, fmt.Sprintf("%s names no predecessor, but %s precedes it", b.subject, a.subject)
	case a.hashErr != nil:
		return Failed, fmt.Sprintf("%s has no canonical form to hash", a.subject)
	case prev != a.recomputed:
		if prev == a.declared {
			return Failed, fmt.Sprintf("%s names %s, which %s declares, but the bytes of %s hash to %s", b.subject, short(prev), a.subject, a.subject, short(a.recomputed))
		}
		return Failed, fmt.Sprintf("previous_event_hash of %s is %s, not the hash of the preceding event %s (%s)", b.subject, short(prev), a.subject, short(a.recomputed))
	}
	return Verified, fmt.Sprintf("%s follows %s", b.subject, a.subject)
}
