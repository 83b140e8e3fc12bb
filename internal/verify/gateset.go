package verify

import (
	"fmt"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
)

// JudgeSet judges a set of objects as one record for the gate: the gate's
// set judge (gate.SetJudge), which package gate does not carry itself, so
// that every set-level rule has one implementation, the verifier's. `party
// gate` passes it as gate.Options.JudgeSet for bundle fixtures.
//
// The judgment is, in this order:
//
//  1. Every object's own judgment, as gate.Envelope gives it for received
//     bytes (the normative checks of its type and the schema layer), each
//     problem naming the object.
//  2. Every failed check of Verify over the set, run with no keys (the
//     gate verifies no signature value: a signature that cannot be checked
//     is not_checkable there, and not_checkable is not a gate problem),
//     under the context's rules version (gate.DefaultRulesVersion when it
//     states none) and per-event versions, reading events under the
//     kernel's one signature (Options.SingleSignedEvents, as the published
//     fixtures are signed), with the context's stated gaps and resolvable
//     hashes as the discloser's statement (a context always states one: no
//     gaps means nothing withheld) and its report as the stated report.
//     Each becomes a problem with the check's code, its subject as Object
//     and its name, step and detail as Detail (a check has no Path; the
//     detail of one the verifier asked the gate for says where).
//  3. What the gate's context decides and the verifier does not take:
//     - a rules version that is not registered makes nothing legal under
//     it, so an event the verifier could not replay for that reason
//     (transition_legality not_checkable), and an obligation version
//     under such a record version, is A202-EVIDENCE-TRANSITION-ILLEGAL;
//     - SubjectRulesVersion governs the rules version a determination
//     must cite (determination_rules_in_force): the verifier takes it
//     from the record's rules version, which for the gate may be only the
//     assumed default, so its check is replaced by gate.CheckBindings's
//     under the context, which checks it exactly when it is stated;
//     - SubjectActAt, when set, governs a dispute's window
//     (dispute_window): the verifier runs the window from the subject's
//     created_at only, so, when the context states the act's time, its
//     check is replaced by gate.CheckBindings's under the context.
//     These two replacements go once Options can carry a stated subject
//     rules version and subject act time to step 6.
//  4. The cross-object rules of gate.CheckBindings over the whole set
//     under the context that no check of the verifier raised about the
//     same object with the same code. The verifier asks CheckBindings
//     itself, rule by rule over the objects each relates, for most of
//     them, so this adds only what it does not ask: an agreement naming
//     an acceptance of another offer, an assertion in another unit than
//     its obligation's, a response binding an assertion about another
//     obligation, a settlement instruction's trigger and parties, and the
//     two context rules of item 3. CheckConditionCycles and CheckReport
//     are not asked again: the verifier reports them on every subject
//     they concern (due_condition_acyclic, stated_report).
//
// JudgeSet never fails as a function: whatever the set, it returns a
// judgment of kind gate.KindBundle.
func JudgeSet(objects []map[string]any, ctx gate.SetContext) gate.Judgment {
	var ps []gate.Problem
	for _, o := range objects {
		id := str(o, "id")
		for _, p := range gate.Envelope(o, gate.Options{}).Problems {
			p.Object = id
			ps = append(ps, p)
		}
	}

	version := ctx.RulesVersion
	if version == "" {
		version = gate.DefaultRulesVersion
	}
	versionFor := func(eventID string) string {
		if v, ok := ctx.EventRules[eventID]; ok {
			return v
		}
		return version
	}
	in := Input{
		Objects:      objects,
		Disclosure:   &Disclosure{StatedGaps: ctx.StatedGaps, ResolvableHashes: ctx.ResolvableHashes},
		StatedReport: ctx.Report,
	}
	rep := Verify(in, Options{RulesVersion: version, EventRules: ctx.EventRules, SingleSignedEvents: true})

	type raised struct {
		code    reason.Code
		subject string
	}
	seen := map[raised]bool{}
	for _, c := range rep.Checks {
		switch {
		case c.Result == NotCheckable && c.Name == "transition_legality" && !rules.Known(versionFor(c.Subject)),
			c.Result == NotCheckable && c.Name == "obligation_state" && !rules.Known(version):
			c.Code = reason.EvidenceTransitionIllegal
			c.Detail = "rules version " + show(versionFor(c.Subject)) + " is not registered, so nothing is legal under it"
		case c.Result != Failed:
			continue
		case c.Name == "determination_rules_in_force":
			continue // the context governs it (item 3)
		case c.Name == "dispute_window" && !ctx.SubjectActAt.IsZero():
			continue // the context governs it (item 3)
		}
		seen[raised{c.Code, c.Subject}] = true
		ps = append(ps, gate.Problem{Code: c.Code, Object: c.Subject, Detail: fmt.Sprintf("%s (step %d): %s", c.Name, c.Step, c.Detail)})
	}
	for _, p := range gate.CheckBindings(objects, ctx) {
		if k := (raised{p.Code, p.Object}); p.Code == "" || !seen[k] {
			seen[k] = true
			ps = append(ps, p)
		}
	}

	j := gate.Judgment{Kind: gate.KindBundle, Outcome: gate.Accepted, Problems: ps}
	if len(ps) > 0 {
		j.Outcome, j.Codes = gate.Refused, gate.Codes(ps)
	}
	return j
}
