package verify

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/authority"
)

// The `when` of a mandate's approval rule, evaluated over a rebuilt act by
// the evaluator's own matcher (authority.MatchRule), so the verifier and
// the evaluator can never read a rule differently.

// whenOutcome is what a `when` says about an act.
type whenOutcome int

const (
	whenNoMatch whenOutcome = iota
	whenMatches
	// whenBroken: the `when` cannot be evaluated for its own form; the
	// evaluator denies every act under such a mandate.
	whenBroken
	// whenOpen: whether the rule applies is not decided offline.
	whenOpen
)

// evalWhen evaluates one `when` over act with the evaluator's own reading
// (authority.MatchRule), and says why in words. evidence_verified needs the
// verification of the evidence the act names, which the offline verifier
// does not decide: such a rule is left open rather than read as unmatched.
func evalWhen(when map[string]any, act map[string]any) (whenOutcome, string) {
	if op, _ := when["operator"].(string); op == authority.OpEvidenceVerified {
		path, _ := when["path"].(string)
		return whenOpen, fmt.Sprintf("%s evidence_verified needs the evidence's verification, which is not decided here", path)
	}
	applies, detail, err := authority.MatchRule(context.Background(), when, act, nil)
	switch {
	case err != nil:
		return whenBroken, err.Error()
	case applies:
		return whenMatches, detail
	}
	return whenNoMatch, detail
}
