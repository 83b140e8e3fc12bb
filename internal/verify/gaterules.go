package verify

import (
	"fmt"
	"strings"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// The cross-object rules of the kernel documents that the gate computes
// over a set (package gate: CheckBindings, CheckConditionCycles,
// CheckReport) are reported here as checks of their own, each with its
// name, step and subject. The verifier does not restate those rules: it
// asks the gate, per rule and over exactly the objects the rule relates
// (an agreement and its predecessor, an obligation and its agreement, a
// response and its obligation and remainder, ...), so that what comes
// back is that rule's answer about that subject. What the verifier adds
// is coverage: which subjects a rule applies to, and whether the objects
// it needs are held. A rule that returned no problem over a subject whose
// objects are all held is verified; one whose objects are not all held is
// not_checkable, and says which; each code returned is one failed check.

// bindings asks gate.CheckBindings about set, under what the discloser
// stated, and keeps the problems about subject carrying one of codes.
func (r *run) bindings(set []map[string]any, subject string, codes ...reason.Code) []gate.Problem {
	return about(withCode(gate.CheckBindings(set, r.statedContext()), codes...), subject)
}

// statedContext is what the discloser stated about its disclosure, in
// the gate's terms; nothing at all when it stated nothing.
func (r *run) statedContext() gate.SetContext {
	if d := r.in.Disclosure; d != nil {
		return gate.SetContext{StatedGaps: d.StatedGaps, ResolvableHashes: d.ResolvableHashes}
	}
	return gate.SetContext{}
}

// stated reports whether the discloser said what it withheld.
func (r *run) stated() bool { return r.in.Disclosure != nil }

// statedGap reports whether id is among the objects the discloser said it
// withheld.
func (r *run) statedGap(id string) bool {
	return r.in.Disclosure != nil && contains(r.in.Disclosure.StatedGaps, id)
}

// withCode keeps the problems that carry one of codes.
func withCode(ps []gate.Problem, codes ...reason.Code) []gate.Problem {
	var out []gate.Problem
	for _, p := range ps {
		for _, c := range codes {
			if p.Code == c {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// about keeps the problems about the object with id.
func about(ps []gate.Problem, id string) []gate.Problem {
	var out []gate.Problem
	for _, p := range ps {
		if p.Object == id {
			out = append(out, p)
		}
	}
	return out
}

// atPaths keeps the problems at one of paths, or under one of them.
func atPaths(ps []gate.Problem, paths ...string) []gate.Problem {
	var out []gate.Problem
	for _, p := range ps {
		for _, path := range paths {
			if p.Path == path || strings.HasPrefix(p.Path, path+"/") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// fromGate reports a rule over one subject from the problems the gate
// returned: one failed check per code, its detail every problem with
// that code and where it sits; none is verified with detail ok.
func (r *run) fromGate(step int, name, subject string, ps []gate.Problem, ok string) {
	if len(ps) == 0 {
		r.add(step, name, subject, Verified, "", ok)
		return
	}
	var order []reason.Code
	details := map[reason.Code][]string{}
	for _, p := range ps {
		if _, seen := details[p.Code]; !seen {
			order = append(order, p.Code)
		}
		d := p.Detail
		if p.Path != "" {
			d = fmt.Sprintf("%s (at %s)", d, p.Path)
		}
		details[p.Code] = append(details[p.Code], d)
	}
	for _, code := range order {
		r.add(step, name, subject, Failed, code, strings.Join(details[code], "; "))
	}
}

// values are the objects as held, duplicates of an id included (the
// gate indexes the first, as the verifier does).
func (r *run) values() []map[string]any {
	out := make([]map[string]any, len(r.objs))
	for i, o := range r.objs {
		out[i] = o.val
	}
	return out
}

// heldAs returns the object with id if the bundle holds one of type typ.
func (r *run) heldAs(id string, typ protocol.ObjectType) (*object, bool) {
	o, held := r.byID[id]
	if !held || o.typ != typ {
		return nil, false
	}
	return o, true
}
