package verify

import (
	"github.com/partyd/party/internal/reason"
)

// Result is the outcome of one check. There are exactly three, and they
// are never collapsed into two (evidence verification §5).
type Result string

// The three outcomes of evidence verification §5.
const (
	// Verified: the check was executed and passed.
	Verified Result = "verified"
	// Failed: the check was executed and did not pass. A failed check
	// always carries a registered refusal code.
	Failed Result = "failed"
	// NotCheckable: the check could not be executed with what the
	// verifier holds. It carries no code, and it is neither of the others.
	NotCheckable Result = "not_checkable"
)

// RoleScope is the role scope the verifier reads records under.
const RoleScope = "a202-scope/bilateral/0.1"

// Check is one executed or attempted check. In JSON a check carries code
// only when it failed: a check that passed or could not run raised
// nothing (§8, last ¶), and the report never says so with a null or an
// empty string.
type Check struct {
	// Step is the step of evidence verification §4 (1–7) the check
	// belongs to.
	Step int `json:"step"`
	// Name says what was checked, e.g. "content_hash", "signature[1]",
	// "event_chain", "transition_legality".
	Name string `json:"name"`
	// Subject is what the check is about: an object or mandate id, a
	// key_id, a stream ("kind:id"), or a missing identifier.
	Subject string `json:"subject"`
	// Result is verified, failed or not_checkable.
	Result Result `json:"result"`
	// Code is the registered refusal code of a failed check, and empty
	// otherwise: a check that could not run raised nothing (§8, last ¶).
	Code reason.Code `json:"code,omitempty"`
	// Detail says why, in words; for not_checkable it says what was
	// missing.
	Detail string `json:"detail"`
}

// Counts tallies the checks by outcome. It has one member per outcome and
// nothing that sums them into a verdict.
type Counts struct {
	Verified     int `json:"verified"`
	Failed       int `json:"failed"`
	NotCheckable int `json:"not_checkable"`
}

// TimeRange is the span of time the objects in scope cover: the earliest
// and latest created_at (and, for events, occurred_at) among them.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Scope states what the report covers (evidence verification §5 rule 2,
// §6 rule 2).
type Scope struct {
	// TransactionID is the transaction the bundle states it is about, if
	// it states one.
	TransactionID string `json:"transaction_id,omitempty"`
	// Objects are the ids of the envelope objects verified, sorted.
	Objects []string `json:"objects_in_scope"`
	// Mandates are the ids of the mandates verified, sorted.
	Mandates []string `json:"mandates_in_scope"`
	// StreamsDisclosed are the event streams the bundle discloses, as
	// "kind:id", sorted.
	StreamsDisclosed []string `json:"streams_disclosed"`
	// TimeRange is nil, and omitted, when no object carries a readable
	// time.
	TimeRange *TimeRange `json:"time_range,omitempty"`
}

// Raised names one refusal code raised against one subject (evidence
// verification §5 rule 3).
type Raised struct {
	Code    reason.Code `json:"code"`
	Subject string      `json:"subject"`
}

// Report is the verification report of evidence verification §5: every
// check with its own outcome, the counts per outcome, the scope, and the
// gaps of §4 step 7. There is deliberately no overall pass or fail member:
// a reader who wants one must decide what to do with the not_checkable
// set, which is the decision §5 rule 4 leaves to the relying party.
type Report struct {
	// RoleScope is the role scope the record was read under.
	RoleScope string `json:"role_scope"`
	// RulesVersion is the rules version stated for the record ("" when
	// none was stated: every transition is then not_checkable).
	RulesVersion string `json:"rules_version"`
	// VerifiedAt is the verification time: the instant current key status
	// was read against.
	VerifiedAt string `json:"verified_at"`
	// Scope is what the report covers.
	Scope Scope `json:"scope"`
	// Results counts the checks per outcome.
	Results Counts `json:"results"`
	// Checks are every check, in a fixed order: by step, then in the
	// order of the objects as held.
	Checks []Check `json:"checks"`
	// Raised lists each refusal code raised with the subject it was raised
	// against, in check order, without repeats.
	Raised []Raised `json:"raised"`
	// UndisclosedStreams are streams objects in the bundle name that the
	// bundle does not disclose.
	UndisclosedStreams []string `json:"undisclosed_streams"`
	// UnresolvedReferences are identifiers a check needed and the bundle
	// does not hold: objects, mandates, policy decisions, keys, key
	// records, rules versions.
	UnresolvedReferences []string `json:"unresolved_references"`
	// UnreferencedEvidence are evidence objects nothing in the bundle
	// references.
	UnreferencedEvidence []string `json:"unreferenced_evidence"`
	// UnregisteredTypes are evidence types, condition types, constraint
	// types and profiles that do not resolve in their registries.
	UnregisteredTypes []string `json:"unregistered_types"`
	// Ledger is party's own reading of the money (ledger.go): balances
	// and findings, apart from the checks, which it never changes.
	Ledger LedgerReport `json:"ledger"`
}

// Failures returns the failed checks, in report order.
func (r *Report) Failures() []Check { return r.with(Failed) }

// Gaps returns the not_checkable checks, in report order.
func (r *Report) Gaps() []Check { return r.with(NotCheckable) }

func (r *Report) with(res Result) []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Result == res {
			out = append(out, c)
		}
	}
	return out
}

// CodesRaised returns the distinct codes of the failed checks, sorted.
func (r *Report) CodesRaised() []reason.Code {
	var codes []reason.Code
	for _, c := range r.Checks {
		if c.Result == Failed {
			codes = append(codes, c.Code)
		}
	}
	return reason.Normalize(codes)
}
