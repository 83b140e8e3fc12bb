package rules

import "time"

// Effect is the strength a determination claims or a rule set grants
// (determination §6): advisory < presumptive < binding.
type Effect string

// The registered effects.
const (
	Advisory    Effect = "advisory"
	Presumptive Effect = "presumptive"
	Binding     Effect = "binding"
)

// Rank orders effects; an unregistered effect ranks above binding, so that
// comparing it against any grant reads as an overclaim rather than a pass.
func (e Effect) Rank() int {
	switch e {
	case Advisory:
		return 0
	case Presumptive:
		return 1
	case Binding:
		return 2
	}
	return 3
}

// RuleSet is one exact, hash-addressed version of a rule set: what a
// rules_ref resolves to (determination §4.3 item 1).
type RuleSet struct {
	ID      string // "a202-rules/pilot"
	Version string // "1.0" … "1.3"; also the transition table version
	Hash    string // rules_hash a reference must carry to resolve
	// RuleIDs are the identifiers rules_applied, authority_basis_ref and
	// appeal_route_ref may name.
	RuleIDs []string
	// Grants is the effect available per question class (dispute
	// subject_type). A class that is absent grants nothing, which resolves
	// downward to advisory (determination §6).
	Grants map[string]Effect
	// DisputeWindow and AppealWindow run from the subject act.
	DisputeWindow time.Duration
	AppealWindow  time.Duration
}

// PilotID is the identifier of the one rule set v0.1 publishes.
const PilotID = "a202-rules/pilot"

var pilotRuleIDs = []string{
	PilotID + "#dispute.window",
	PilotID + "#appeal.window",
	PilotID + "#appeal.route",
	PilotID + "#determiner.authority",
	PilotID + "#determination.effect",
	PilotID + "#obligation.acceptance-binds-assertion",
	PilotID + "#obligation.remainder-required",
	PilotID + "#state.transition-legality",
	PilotID + "#disclosure.session-isolation",
}

// pilotHashes are the published placeholder rules hashes per version.
var pilotHashes = map[string]string{
	"1.0": "11a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80",
	"1.1": "22b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091",
	"1.2": "33c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2",
	"1.3": "44d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3",
}

// Pilot returns the pilot rule set at version, or false if the version is
// not registered.
func Pilot(version string) (RuleSet, bool) {
	h, ok := pilotHashes[version]
	if !ok {
		return RuleSet{}, false
	}
	return RuleSet{
		ID:      PilotID,
		Version: version,
		Hash:    h,
		RuleIDs: append([]string(nil), pilotRuleIDs...),
		// Every pilot version grants the same effects: an act question may
		// be decided bindingly, an obligation's state presumptively, and a
		// refusal not at all.
		Grants: map[string]Effect{
			"act":              Binding,
			"obligation_state": Presumptive,
			"determination":    Binding,
		},
		DisputeWindow: 168 * time.Hour,
		AppealWindow:  336 * time.Hour,
	}, true
}

// Resolve returns the rule set a rules_ref names. It resolves only when
// the identifier, the version and the hash all match a registered set:
// unavailability is not permission, so a caller treats false as a refusal.
func Resolve(ruleSetID, version, hash string) (RuleSet, bool) {
	if ruleSetID != PilotID {
		return RuleSet{}, false
	}
	rs, ok := Pilot(version)
	if !ok || rs.Hash != hash {
		return RuleSet{}, false
	}
	return rs, true
}

// HasRule reports whether id names a rule inside the set.
func (rs RuleSet) HasRule(id string) bool { return contains(rs.RuleIDs, id) }

// Grant returns the effect the set grants for a question class, Advisory
// when it grants none.
func (rs RuleSet) Grant(questionClass string) Effect {
	if e, ok := rs.Grants[questionClass]; ok {
		return e
	}
	return Advisory
}

// Granted reports whether the set names any grant for the question class;
// Grant's Advisory fallback is not a grant.
func (rs RuleSet) Granted(questionClass string) bool {
	_, ok := rs.Grants[questionClass]
	return ok
}
