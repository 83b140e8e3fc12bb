package gate

import (
	"fmt"
	"sort"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
)

// SetContext is what a record states about itself outside its objects: a
// bundle fixture's context member, or a bundle directory's bundle.json.
type SetContext struct {
	// RulesVersion is the rules version in force at append time for every
	// event EventRules does not name; "" means DefaultRulesVersion.
	RulesVersion string
	// EventRules names the rules version in force for particular events,
	// by event id.
	EventRules map[string]string
	// SubjectRulesVersion, when stated, is the rules version in force at
	// the subject act; a determination citing another version does not
	// follow (determination §4.1). "" leaves it unchecked.
	SubjectRulesVersion string
	// SubjectActAt, when set, is when a dispute's subject act occurred;
	// otherwise the subject object's created_at is used if the set holds it.
	SubjectActAt time.Time
	// StatedGaps are ids of objects the discloser knowingly withheld: a
	// reference to one is a stated boundary, not an incomplete disclosure.
	StatedGaps []string
	// ResolvableHashes are content hashes known to resolve outside the set.
	ResolvableHashes []string
	// Report, when not nil, is a verification report to judge (evidence
	// verification §5).
	Report any
}

func (c SetContext) versionFor(eventID string) string {
	if v, ok := c.EventRules[eventID]; ok {
		return v
	}
	if c.RulesVersion != "" {
		return c.RulesVersion
	}
	return DefaultRulesVersion
}

// Set judges a set of objects as one record: every object on its own
// (Envelope), then the cross-object checks of the seven-step procedure
// that need no keys: CheckHashes, CheckVersionChains, CheckStreams,
// CheckTransitions, CheckBindings, CheckConditionCycles, and CheckReport
// on a stated report. Signature values are not verified here (that needs
// keys; package signature); their purposes and counts are.
func Set(objects []map[string]any, ctx SetContext) Judgment {
	var ps []Problem
	for _, o := range objects {
		id := idOf(o)
		for _, p := range envelopeChecks(o) {
			p.Object = id
			ps = append(ps, p)
		}
		for _, p := range schemaLayer(schema.ValidateEnvelope, o) {
			p.Object = id
			ps = append(ps, p)
		}
	}
	ps = append(ps, CheckHashes(objects)...)
	ps = append(ps, CheckVersionChains(objects)...)
	ps = append(ps, CheckStreams(objects)...)
	ps = append(ps, CheckTransitions(objects, ctx)...)
	ps = append(ps, CheckBindings(objects, ctx)...)
	ps = append(ps, CheckConditionCycles(objects)...)
	if ctx.Report != nil {
		ps = append(ps, CheckReport(ctx.Report)...)
	}
	return judge(KindBundle, ps)
}

func idOf(o map[string]any) string {
	id, _ := strAt(o, "id")
	return id
}

func typeOf(o map[string]any) string {
	t, _ := strAt(o, "object_type")
	return t
}

func payloadOf(o map[string]any) map[string]any {
	p, _ := objAt(o, "payload")
	return p
}

// record indexes a set by id and by declared content hash. Where two
// objects share an id (a fork), the first is indexed; CheckVersionChains
// reports the fork.
type record struct {
	objects []map[string]any
	byID    map[string]map[string]any
	byHash  map[string]map[string]any
}

func index(objects []map[string]any) *record {
	r := &record{objects: objects, byID: map[string]map[string]any{}, byHash: map[string]map[string]any{}}
	for _, o := range objects {
		if id := idOf(o); id != "" {
			if _, seen := r.byID[id]; !seen {
				r.byID[id] = o
			}
		}
		if h, ok := strAt(o, "content_hash"); ok {
			if _, seen := r.byHash[h]; !seen {
				r.byHash[h] = o
			}
		}
	}
	return r
}

// get returns the object with id, if the set holds it and it has type typ
// ("" for any type).
func (r *record) get(id, typ string) (map[string]any, bool) {
	o, ok := r.byID[id]
	if !ok || (typ != "" && typeOf(o) != typ) {
		return nil, false
	}
	return o, true
}

// at builds a problem about object o.
func at(o map[string]any, code reason.Code, path, format string, args ...any) Problem {
	return Problem{Code: code, Object: idOf(o), Path: path, Detail: fmt.Sprintf(format, args...)}
}

// CheckHashes recomputes every object's content hash over its canonical
// bytes (evidence verification §4 step 1): a mismatch is
// A202-EVIDENCE-HASH-MISMATCH. Annotations are outside the hashed bytes,
// so adding or changing them never breaks a hash, and a hash computed over
// them does not match.
func CheckHashes(objects []map[string]any) []Problem {
	var ps []Problem
	for _, o := range objects {
		declared, ok := strAt(o, "content_hash")
		if !ok || !isHash(declared) {
			continue // refused for its form already
		}
		h, err := canonical.ContentHash(o)
		if err != nil {
			ps = append(ps, at(o, reason.EvidenceHashMismatch, "/content_hash", "the object has no canonical form: %v", err))
			continue
		}
		if h != declared {
			ps = append(ps, at(o, reason.EvidenceHashMismatch, "/content_hash", "content_hash does not match the object's canonical bytes"))
		}
	}
	return ps
}

// CheckSignatures checks every object's signature purposes and minimum
// count (evidence verification §4 step 2, the parts that need no keys).
// Set runs the same checks as part of each object's own judgment.
func CheckSignatures(objects []map[string]any) []Problem {
	var ps []Problem
	for _, o := range objects {
		var each problems
		checkSignatures(&each, o, typeOf(o))
		for _, p := range each {
			if p.Code != "" {
				p.Object = idOf(o)
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// CheckVersionChains checks object version chains (evidence verification
// §4 step 3): version 1 has no predecessor, each later version is its
// predecessor's plus one and of the same type, and no version has two
// successors. A predecessor the set does not hold is a boundary.
func CheckVersionChains(objects []map[string]any) []Problem {
	r := index(objects)
	var ps []Problem
	successors := map[string][]map[string]any{}
	var order []string
	for _, o := range objects {
		version, _ := intAt(o, "version")
		prev, hasPrev := strAt(o, "previous_version_id")
		if version == 1 && hasPrev {
			ps = append(ps, at(o, reason.EvidenceChainGap, "/previous_version_id", "version 1 names a predecessor"))
		}
		if !hasPrev {
			continue
		}
		if _, seen := successors[prev]; !seen {
			order = append(order, prev)
		}
		successors[prev] = append(successors[prev], o)
		if earlier, ok := r.get(prev, ""); ok {
			ev, _ := intAt(earlier, "version")
			if version != ev+1 {
				ps = append(ps, at(o, reason.EvidenceChainGap, "/version", "version %d follows version %d of %s", version, ev, prev))
			}
			if typeOf(earlier) != typeOf(o) {
				ps = append(ps, at(o, reason.EvidenceChainGap, "/previous_version_id", "a %s cannot succeed a %s", typeOf(o), typeOf(earlier)))
			}
		}
	}
	for _, prev := range order {
		if s := successors[prev]; len(s) > 1 {
			for _, o := range s {
				ps = append(ps, at(o, reason.EvidenceChainGap, "/previous_version_id", "%s has %d successors: the chain forks", prev, len(s)))
			}
		}
	}
	return ps
}

// streamKey names a stream: kind and id.
func streamKey(o map[string]any) (kind, id string) {
	s, _ := objAt(payloadOf(o), "stream")
	kind, _ = strAt(s, "kind")
	id, _ = strAt(s, "id")
	return kind, id
}

// eventsByStream groups the set's transaction events by stream, each
// group ordered by sequence (ties keep set order).
func eventsByStream(objects []map[string]any) (map[string][]map[string]any, []string) {
	groups := map[string][]map[string]any{}
	var keys []string
	for _, o := range objects {
		if typeOf(o) != "transaction_event" {
			continue
		}
		kind, id := streamKey(o)
		k := kind + "/" + id
		if _, seen := groups[k]; !seen {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], o)
	}
	for _, k := range keys {
		g := groups[k]
		sort.SliceStable(g, func(i, j int) bool {
			a, _ := intAt(payloadOf(g[i]), "sequence")
			b, _ := intAt(payloadOf(g[j]), "sequence")
			return a < b
		})
	}
	return groups, keys
}

// CheckStreams checks per-stream continuity (evidence verification §4
// step 4): within a stream each event's sequence is its predecessor's plus
// one and its previous_event_hash is that predecessor's content hash. The
// first disclosed event of a stream may name a predecessor the set does
// not hold: that is a disclosed boundary, not a gap. Nothing is inferred
// across streams, and an event whose predecessor sits on another stream
// is a gap, because sequences are per stream.
func CheckStreams(objects []map[string]any) []Problem {
	r := index(objects)
	groups, keys := eventsByStream(objects)
	var ps []Problem
	for _, k := range keys {
		g := groups[k]
		for i, e := range g {
			p := payloadOf(e)
			seq, _ := intAt(p, "sequence")
			prev, hasPrev := strAt(p, "previous_event_hash")
			if seq == 1 && hasPrev {
				ps = append(ps, at(e, reason.EvidenceChainGap, "/payload/previous_event_hash", "the first event of a stream has no predecessor"))
			}
			if i > 0 {
				before := g[i-1]
				bseq, _ := intAt(payloadOf(before), "sequence")
				if seq != bseq+1 {
					ps = append(ps, at(e, reason.EvidenceChainGap, "/payload/sequence", "sequence %d follows %d on stream %s", seq, bseq, k))
				}
				if h, _ := strAt(before, "content_hash"); !hasPrev || prev != h {
					ps = append(ps, at(e, reason.EvidenceChainGap, "/payload/previous_event_hash", "previous_event_hash does not name the preceding event %s", idOf(before)))
				}
				continue
			}
			if !hasPrev {
				continue
			}
			pred, held := r.byHash[prev]
			if !held {
				continue // a stated boundary
			}
			if typeOf(pred) != "transaction_event" {
				ps = append(ps, at(e, reason.EvidenceChainGap, "/payload/previous_event_hash", "the predecessor %s is not an event", idOf(pred)))
				continue
			}
			pk, pid := streamKey(pred)
			if pk+"/"+pid != k {
				ps = append(ps, at(e, reason.EvidenceChainGap, "/payload/previous_event_hash",
					"the predecessor %s sits on stream %s/%s: continuity is never asserted across streams", idOf(pred), pk, pid))
			} else {
				ps = append(ps, at(e, reason.EvidenceChainGap, "/payload/previous_event_hash", "the predecessor %s is ordered after this event", idOf(pred)))
			}
		}
	}
	return ps
}

// CheckConditionCycles refuses due_on_discharge conditions that form a
// cycle among the set's obligations (obligation §4): no obligation on the
// cycle could ever become due.
func CheckConditionCycles(objects []map[string]any) []Problem {
	edges := map[string][]string{}
	var ids []string
	byID := map[string]map[string]any{}
	for _, o := range objects {
		if typeOf(o) != "obligation" {
			continue
		}
		id := idOf(o)
		if _, seen := byID[id]; seen {
			continue
		}
		byID[id] = o
		ids = append(ids, id)
		edges[id] = dischargeTargets(payloadOf(o)["due_condition"])
	}
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	onCycle := map[string]bool{}
	var stack []string
	var visit func(string)
	visit = func(n string) {
		state[n] = active
		stack = append(stack, n)
		for _, m := range edges[n] {
			if _, held := byID[m]; !held {
				continue
			}
			switch state[m] {
			case unvisited:
				visit(m)
			case active:
				for i := len(stack) - 1; i >= 0; i-- {
					onCycle[stack[i]] = true
					if stack[i] == m {
						break
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, id := range ids {
		if state[id] == unvisited {
			visit(id)
		}
	}
	var ps []Problem
	for _, id := range ids {
		if onCycle[id] {
			ps = append(ps, at(byID[id], reason.ObligationConditionCyclic, "/payload/due_condition", "the discharge conditions form a cycle through %s", id))
		}
	}
	return ps
}

// dischargeTargets lists the obligations a due condition waits on.
func dischargeTargets(v any) []string {
	c, ok := obj(v)
	if !ok {
		return nil
	}
	var out []string
	if t, _ := strAt(c, "type"); t == "due_on_discharge" {
		if id, ok := strAt(c, "obligation_id"); ok {
			out = append(out, id)
		}
	}
	list, _ := arrAt(c, "conditions")
	for _, e := range list {
		out = append(out, dischargeTargets(e)...)
	}
	return out
}
