// Package rules is the A202 pilot rule set as data: which state transitions
// each rules version makes legal, and what a rules reference resolves to.
//
// A record replays against the rules version that was in force when each
// event appended, never against the newest one (evidence verification §4
// step 5, pilot state machine §5.3). Versions are cumulative and immutable:
//
//	1.0  the base aggregate and session machines (pilot state machine §5,
//	     §6.1) and the obligation machine (obligation §6.1)
//	1.1  exception_open --transaction.completed--> completed
//	1.2  termination.agreed from the four committed states and
//	     exception_open; agreement.amended self-loops on committed and
//	     in_performance; obligation.released
//	1.3  draft --agreement.direct--> agreement_pending (A202-0014)
//
// The versioned sets are published only in the conformance runner; the
// prose tables are the same rows without version numbers. Three prose rows
// the runner lacks are kept here because the prose is normative and the
// runner is a tool (spec-map §14 C4): the approval.requested self-loop on
// agreement_pending, session.closed from any non-terminal session state,
// and the five invitation self-loops on published and qualifying.
//
// Three machines are distinguished. Aggregate is the transaction's state
// (its events sit on the transaction stream), Session the negotiation
// session's (session stream, operated only), and Obligation one
// obligation's. A transition is identified by (from, event) within a
// machine; the one row whose destination is not fixed is
// disputed --determination.recorded--> the state a binding determination
// states, which the table writes as Determined.
//
// The package also holds the pilot rule set's published metadata (rule
// identifiers, rules hashes, effect grants per question class, dispute and
// appeal windows), so that a rules_ref on a dispute or determination can be
// resolved exactly or not at all. The rules hashes are the placeholder
// values the specification publishes; a reference that names a version
// with any other hash does not resolve (determination §4.3 item 1).
package rules

import (
	"strconv"
	"strings"

	"github.com/partyd/party/internal/protocol"
)

// Machine names one of the three state machines.
type Machine string

// The state machines of the pilot specification.
const (
	Aggregate  Machine = "aggregate"
	Session    Machine = "session"
	Obligation Machine = "obligation"
)

// Determined is the destination of the obligation row whose next state is
// the one a binding determination states (obligation §6.1).
const Determined = "*determined*"

// Transition is one row of a machine's table.
type Transition struct {
	Machine Machine
	From    string // "" for the row that creates the machine's subject
	Event   protocol.EventType
	To      string // a state of Machine, or Determined
	Since   string // the first rules version that registers the row
	// Operated marks rows only a venue operator can append (role scopes
	// §5); a bilateral record never carries them, but they stay legal in
	// the version tables because the tables are one vocabulary.
	Operated bool
}

// versions in order. A new version is appended, never inserted.
var versions = []string{"1.0", "1.1", "1.2", "1.3"}

// Versions returns the registered rules versions, oldest first.
func Versions() []string { return append([]string(nil), versions...) }

// Latest returns the newest registered rules version.
func Latest() string { return versions[len(versions)-1] }

// Known reports whether v is a registered rules version.
func Known(v string) bool { return rank(v) >= 0 }

// rank is the position of v in versions, or -1.
func rank(v string) int {
	for i, x := range versions {
		if x == v {
			return i
		}
	}
	return -1
}

var states = map[Machine][]string{
	Aggregate: names(protocol.Draft, published, qualifying, negotiating, protocol.AgreementPending,
		protocol.Committed, protocol.InPerformance, protocol.AcceptancePending, protocol.SettlementPending,
		protocol.Completed, protocol.ExceptionOpen, protocol.Cancelled, protocol.Expired, protocol.Terminated),
	Session: names(sessionOpened, sessionActive, sessionPausedForApproval, sessionAccepted, sessionRejected,
		sessionWithdrawn, sessionExpired, sessionClosed),
	Obligation: names(protocol.OblPending, protocol.OblDue, protocol.OblAsserted, protocol.OblAccepted, protocol.OblRejected,
		protocol.OblDisputed, oblDischarged, protocol.OblWaived, oblExpired, protocol.OblReleased),
}

var terminal = map[Machine][]string{
	Aggregate:  names(protocol.Cancelled, protocol.Expired, protocol.Completed, protocol.Terminated),
	Session:    names(sessionRejected, sessionWithdrawn, sessionExpired, sessionClosed),
	Obligation: names(oblDischarged, protocol.OblWaived, oblExpired, protocol.OblReleased),
}

// names spells typed states as the strings the tables hold (a document's
// state is compared as it was read).
func names[S ~string](list ...S) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

// States returns the registered states of m.
func States(m Machine) []string { return append([]string(nil), states[m]...) }

// IsState reports whether s is a registered state of m.
func IsState(m Machine, s string) bool { return contains(states[m], s) }

// IsAnyState reports whether s is a registered state of any machine: the
// vocabulary a determination's state_result is checked against.
func IsAnyState(s string) bool {
	return IsState(Aggregate, s) || IsState(Session, s) || IsState(Obligation, s)
}

// Terminal reports whether s is a terminal state of m.
func Terminal(m Machine, s string) bool { return contains(terminal[m], s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Table returns the rows legal under version for machine m, in table
// order; nil for an unknown version.
func Table(version string, m Machine) []Transition {
	r := rank(version)
	if r < 0 {
		return nil
	}
	var out []Transition
	for _, t := range table {
		if t.Machine == m && rank(t.Since) <= r {
			out = append(out, t)
		}
	}
	return out
}

// Next returns the destination of event from state from in machine m under
// rules version, and whether the transition is legal there at all. For the
// determination row the destination is Determined.
func Next(version string, m Machine, from string, event protocol.EventType) (to string, ok bool) {
	r := rank(version)
	if r < 0 {
		return "", false
	}
	for _, t := range table {
		if t.Machine == m && t.From == from && t.Event == event && rank(t.Since) <= r {
			return t.To, true
		}
	}
	return "", false
}

// Legal reports whether the recorded transition from --event--> to is legal
// in machine m under rules version. A Determined row accepts any
// registered state of m as its destination.
func Legal(version string, m Machine, from string, event protocol.EventType, to string) bool {
	next, ok := Next(version, m, from, event)
	if !ok {
		return false
	}
	if next == Determined {
		return IsState(m, to)
	}
	return next == to
}

// Since returns the first rules version under which from --event--> is a
// row of m, or "" if no version registers it. Verifiers use it to say
// "legal only from 1.3" rather than just "illegal".
func Since(m Machine, from string, event protocol.EventType) string {
	for _, t := range table {
		if t.Machine == m && t.From == from && t.Event == event {
			return t.Since
		}
	}
	return ""
}

// Compare orders two "MAJOR.MINOR" version strings numerically: -1, 0, +1.
// A string that does not parse sorts before every one that does.
func Compare(a, b string) int {
	pa, oka := parseVersion(a)
	pb, okb := parseVersion(b)
	switch {
	case !oka && !okb:
		return strings.Compare(a, b)
	case !oka:
		return -1
	case !okb:
		return 1
	}
	for i := range 2 {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func parseVersion(v string) ([2]int, bool) {
	major, minor, ok := strings.Cut(v, ".")
	if !ok {
		return [2]int{}, false
	}
	x, err1 := strconv.Atoi(major)
	y, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || x < 0 || y < 0 {
		return [2]int{}, false
	}
	return [2]int{x, y}, true
}
