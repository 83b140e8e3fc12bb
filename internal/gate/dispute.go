package gate

import (
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
)

// disputeGrounds are the nine grounds of determination §3.5. The kernel
// schema's enum also holds the four appeal grounds of §7, which belong to
// the operated appeal route; the bilateral gate accepts only these nine,
// for every subject type (spec-map §14 C20).
var disputeGrounds = setOf(protocol.DisputeGrounds...)

var (
	disputeSubjectTypes  = setOf("act", "determination", "obligation_state", "refusal")
	supersessionReasons  = setOf("appeal_outcome", "corrected_input", "rule_misapplication")
	outcomeMembers       = setOf("finding", "rules_applied", "evidence_relied_on", "inputs_hash", "state_result")
	stateResultMachineOf = map[string]rules.Machine{"obligation_state": rules.Obligation}
)

// resolveRulesRef resolves a rules_ref object exactly (determination
// §4.3 item 1).
func resolveRulesRef(v any) (rules.RuleSet, bool) {
	ref, ok := obj(v)
	if !ok {
		return rules.RuleSet{}, false
	}
	id, _ := strAt(ref, "rule_set_id")
	version, _ := strAt(ref, "version")
	hash, _ := strAt(ref, "rules_hash")
	return rules.Resolve(id, version, hash)
}

func checkDispute(ps *problems, o, p map[string]any) {
	grounds, ok := arrAt(p, "grounds")
	if !ok || len(grounds) == 0 {
		ps.add(reason.DisputeGroundsUnknown, "/payload/grounds", "a dispute states at least one ground")
	}
	for i, g := range grounds {
		if s, _ := g.(string); !disputeGrounds[s] {
			ps.add(reason.DisputeGroundsUnknown, pointer("/payload/grounds", i), "ground %q is not in the closed list of determination §3.5", s)
		}
	}
	if st, _ := strAt(p, "subject_type"); !disputeSubjectTypes[st] {
		ps.add(reason.DisputeSubjectUnreferenced, "/payload/subject_type", "subject_type %q is not act, determination, obligation_state or refusal", st)
	}
	if h, _ := strAt(p, "subject_hash"); h == "" {
		// A dispute about something that can change is about nothing fixed.
		ps.add(reason.DisputeSubjectUnreferenced, "/payload/subject_hash", "a dispute names its subject by content hash, never by identifier alone")
	}
	refs, _ := arrAt(p, "evidence_refs")
	if len(refs) == 0 {
		ps.add(reason.EvidenceUnverified, "/payload/evidence_refs", "a dispute carries at least one evidence reference")
	}
	if v, ok := member(p, "evidence_refs"); ok {
		checkEvidenceRefs(ps, "/payload/evidence_refs", v, true)
	}
	if d, ok := strAt(p, "description"); ok {
		if why := freeTextLeak(d, disputeParties(p)); why != "" {
			ps.add(reason.DisclosurePolicyViolation, "/payload/description", "the description %s; free text is data and carries no rival or price data (determination §3.6)", why)
		}
	}
	if _, ok := resolveRulesRef(p["rules_ref"]); !ok {
		// A window that cannot be resolved cannot be shown to have been met.
		ps.add(reason.DisputeOutOfWindow, "/payload/rules_ref", "rules_ref does not resolve to a registered, hash-addressed rule set version")
	}
}

// disputeParties are the identifiers a dispute's free text may name.
func disputeParties(p map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, role := range []string{"raising_party", "respondent_party"} {
		party, _ := objAt(p, role)
		for _, m := range []string{"organization_id", "agent_id"} {
			if s, ok := strAt(party, m); ok {
				out[s] = true
			}
		}
	}
	return out
}

func checkDetermination(ps *problems, p map[string]any) {
	question, _ := objAt(p, "question")
	outcome, okOutcome := objAt(p, "outcome")

	// No enumerated verdict: the outcome is a reasoned finding in a closed
	// shape (determination §4.2).
	if !okOutcome {
		ps.add(reason.DeterminationNotFollowing, "/payload/outcome", "a determination carries a reasoned outcome")
	} else {
		for _, k := range sortedKeys(outcome) {
			if !outcomeMembers[k] {
				ps.add(reason.DeterminationNotFollowing, pointer("/payload/outcome", k), "the outcome is a reasoned finding, not a verdict (member %q)", k)
			}
		}
		if f, _ := strAt(outcome, "finding"); f == "" {
			ps.add(reason.DeterminationNotFollowing, "/payload/outcome/finding", "the outcome states a finding")
		}
	}

	// The four conditions of determination §4.3, as far as they are
	// static: rules resolve, rules applied resolve inside them, evidence is
	// named, inputs are hashed.
	rs, resolved := resolveRulesRef(question["rules_ref"])
	if !resolved {
		ps.add(reason.DeterminationNotFollowing, "/payload/question/rules_ref", "rules_ref does not resolve to a registered, hash-addressed rule set version")
	} else {
		applied, _ := arrAt(outcome, "rules_applied")
		if len(applied) == 0 {
			ps.add(reason.DeterminationNotFollowing, "/payload/outcome/rules_applied", "the outcome names the rules applied")
		}
		for i, r := range applied {
			if s, _ := r.(string); !rs.HasRule(s) {
				ps.add(reason.DeterminationNotFollowing, pointer("/payload/outcome/rules_applied", i), "rule %q does not resolve in %s %s", s, rs.ID, rs.Version)
			}
		}
		for _, m := range []string{"authority_basis_ref", "appeal_route_ref"} {
			if s, _ := strAt(p, m); !rs.HasRule(s) {
				ps.add(reason.DeterminationNotFollowing, pointer("/payload", m), "%s %q does not resolve in the rules in force", m, s)
			}
		}
	}
	if ev, _ := arrAt(outcome, "evidence_relied_on"); len(ev) == 0 {
		ps.add(reason.DeterminationNotFollowing, "/payload/outcome/evidence_relied_on", "the outcome names the evidence relied on")
	}
	if v, ok := member(outcome, "evidence_relied_on"); ok {
		checkEvidenceRefs(ps, "/payload/outcome/evidence_relied_on", v, true)
	}
	if h, _ := strAt(outcome, "inputs_hash"); h == "" {
		ps.add(reason.DeterminationNotFollowing, "/payload/outcome/inputs_hash", "the outcome hashes the inputs it was taken against")
	}

	// The effect claimed never exceeds what the rules grant this question
	// class; no grant, or no resolvable rules, is advisory (determination §6).
	class, _ := strAt(question, "subject_type")
	grant := rules.Advisory
	if resolved {
		grant = rs.Grant(class)
	}
	claimed, _ := strAt(p, "effect")
	if rules.Effect(claimed).Rank() > grant.Rank() {
		ps.add(reason.DeterminationEffectOverclaim, "/payload/effect", "effect %q exceeds the %s the rules grant for a %q question", claimed, grant, class)
	}

	// state_result is inert unless binding, names the determined subject,
	// and names a registered state (determination §4.2, §6).
	if sr, ok := objAt(outcome, "state_result"); ok {
		if claimed != string(rules.Binding) {
			ps.add(reason.DeterminationEffectOverclaim, "/payload/outcome/state_result", "a state_result moves state only under a binding effect")
		}
		sid, _ := strAt(sr, "subject_id")
		qid, _ := strAt(question, "subject_id")
		if sid != qid {
			ps.add(reason.DisputeSubjectUnreferenced, "/payload/outcome/state_result/subject_id", "state_result names a subject other than the one determined")
		}
		state, _ := strAt(sr, "state")
		registered := rules.IsAnyState(state)
		if m, ok := stateResultMachineOf[class]; ok {
			registered = rules.IsState(m, state)
		}
		if !registered {
			ps.add(reason.StateTransitionDenied, "/payload/outcome/state_result/state", "state %q is not registered for the determined subject", state)
		}
	}

	if sup, ok := objAt(p, "supersedes"); ok {
		if r, _ := strAt(sup, "reason"); !supersessionReasons[r] {
			ps.add(reason.DeterminationSupersessionUnreasoned, "/payload/supersedes/reason", "a superseding determination states a registered reason (determination §5)")
		}
	}

	determined, ok1 := timeAt(p, "determined_at")
	effective, ok2 := timeAt(p, "effective_from")
	if ok1 && ok2 && effective.Before(determined) {
		ps.add("", "/payload/effective_from", "effective_from is at or after determined_at (determination §4)")
	}
}
