package gate

import (
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/reason"
)

// SetContext is what a record states about itself outside its objects: a
// bundle fixture's context member, or a bundle directory's bundle.json.
// The gate's cross-object rules (CheckBindings) read it, and a SetJudge
// judges a set under it.
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

// SetJudge judges a set of objects as one record under what the record
// states about itself. Package gate carries no implementation: the
// set-level rules are the verifier's, and verify.JudgeSet is the judge a
// caller passes as Options.JudgeSet (gate never imports verify).
type SetJudge func(objects []map[string]any, ctx SetContext) Judgment

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

// mustStr is m[k] if it is a string, else "".
func mustStr(m map[string]any, k string) string {
	s, _ := strAt(m, k)
	return s
}

// isDeletion reports whether event is a *.deleted event: nothing in the
// protocol is deleted.
func isDeletion(event string) bool { return strings.HasSuffix(event, ".deleted") }

// record indexes a set by id and by declared content hash. Where two
// objects share an id (a fork), the first is indexed; the verifier's
// version chain check reports the fork.
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
		edges[id] = DischargeTargets(payloadOf(o)["due_condition"])
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

// DischargeTargets lists the obligations a due condition waits on, in
// document order: a due_on_discharge leaf, or the leaves of an all_of. The
// verifier walks the same chains, so the rule of what a condition waits
// on is here once.
func DischargeTargets(v any) []string {
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
		out = append(out, DischargeTargets(e)...)
	}
	return out
}
