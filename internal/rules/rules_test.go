package rules

import (
	"testing"

	"github.com/partyd/party/internal/protocol"
)

func TestVersionsAreOrderedAndCumulative(t *testing.T) {
	vs := Versions()
	if len(vs) != 4 || vs[0] != "1.0" || Latest() != "1.3" {
		t.Fatalf("Versions() = %v, Latest() = %s", vs, Latest())
	}
	for i := 1; i < len(vs); i++ {
		if Compare(vs[i-1], vs[i]) >= 0 {
			t.Errorf("versions out of order: %s then %s", vs[i-1], vs[i])
		}
		for _, m := range []Machine{Aggregate, Session, Obligation} {
			// A later version keeps every row of the earlier one: versions
			// are immutable and cumulative.
			for _, tr := range Table(vs[i-1], m) {
				if !Legal(vs[i], m, tr.From, tr.Event, destination(tr)) {
					t.Errorf("%s row %s --%s--> %s missing from %s", m, tr.From, tr.Event, tr.To, vs[i])
				}
			}
		}
	}
}

func destination(tr Transition) string {
	if tr.To == Determined {
		return "pending"
	}
	return tr.To
}

func TestVersionedRows(t *testing.T) {
	cases := []struct {
		m     Machine
		from  string
		event protocol.EventType
		to    string
		since string
	}{
		{Aggregate, "draft", "agreement.direct", "agreement_pending", "1.3"},
		{Aggregate, "committed", "termination.agreed", "terminated", "1.2"},
		{Aggregate, "exception_open", "termination.agreed", "terminated", "1.2"},
		{Aggregate, "in_performance", "agreement.amended", "in_performance", "1.2"},
		{Aggregate, "exception_open", "transaction.completed", "completed", "1.1"},
		{Aggregate, "agreement_pending", "agreement.committed", "committed", "1.0"},
		{Aggregate, "settlement_pending", "settlement.instructed", "settlement_pending", "1.0"},
		{Aggregate, "agreement_pending", "approval.requested", "agreement_pending", "1.0"},
		{Session, "paused_for_approval", "session.closed", "closed", "1.0"},
		{Obligation, "", "obligation.activated", "pending", "1.0"},
		{Obligation, "disputed", "obligation.released", "released", "1.2"},
	}
	for _, c := range cases {
		for _, v := range Versions() {
			want := Compare(v, c.since) >= 0
			if got := Legal(v, c.m, c.from, c.event, c.to); got != want {
				t.Errorf("Legal(%s, %s, %s --%s--> %s) = %v, want %v", v, c.m, c.from, c.event, c.to, got, want)
			}
		}
		if got := Since(c.m, c.from, c.event); got != c.since {
			t.Errorf("Since(%s, %s, %s) = %q, want %q", c.m, c.from, c.event, got, c.since)
		}
	}
}

func TestIllegalTransitions(t *testing.T) {
	for _, v := range Versions() {
		if Legal(v, Aggregate, "draft", "agreement.committed", "committed") {
			t.Errorf("%s: draft→committed must never be legal", v)
		}
		if Legal(v, Aggregate, "agreement_pending", "agreement.committed", "in_performance") {
			t.Errorf("%s: a legal event with the wrong destination must be illegal", v)
		}
		if Legal(v, Obligation, "disputed", "obligation.waived", "waived") {
			t.Errorf("%s: no waiver from disputed (obligation §6.1)", v)
		}
		if _, ok := Next(v, Aggregate, "completed", "transaction.cancelled"); ok {
			t.Errorf("%s: a terminal state has no successor", v)
		}
	}
	if Legal("9.9", Aggregate, "agreement_pending", "agreement.committed", "committed") {
		t.Error("an unregistered version makes nothing legal")
	}
	if Table("0.9", Aggregate) != nil {
		t.Error("Table of an unknown version must be nil")
	}
}

func TestDeterminedDestination(t *testing.T) {
	to, ok := Next("1.0", Obligation, "disputed", "determination.recorded")
	if !ok || to != Determined {
		t.Fatalf("Next = %q, %v", to, ok)
	}
	if !Legal("1.0", Obligation, "disputed", "determination.recorded", "accepted") {
		t.Error("a binding determination may state a registered obligation state")
	}
	if Legal("1.0", Obligation, "disputed", "determination.recorded", "vanished") {
		t.Error("an unregistered destination is illegal")
	}
}

func TestStates(t *testing.T) {
	for m, want := range map[Machine]int{Aggregate: 14, Session: 8, Obligation: 10} {
		if got := len(States(m)); got != want {
			t.Errorf("%s has %d states, want %d", m, got, want)
		}
	}
	if !Terminal(Obligation, "released") || Terminal(Obligation, "rejected") {
		t.Error("obligation terminal states wrong")
	}
	if !IsAnyState("in_performance") || IsAnyState("deleted") {
		t.Error("IsAnyState wrong")
	}
	// Every row names registered states on both ends.
	for _, tr := range table {
		if tr.From != "" && !IsState(tr.Machine, tr.From) {
			t.Errorf("%s row from unregistered state %q", tr.Machine, tr.From)
		}
		if tr.To != Determined && !IsState(tr.Machine, tr.To) {
			t.Errorf("%s row to unregistered state %q", tr.Machine, tr.To)
		}
		if !Known(tr.Since) {
			t.Errorf("row %s %s since unknown version %q", tr.Machine, tr.Event, tr.Since)
		}
	}
	// (machine, from, event) identifies one row.
	seen := map[[3]string]bool{}
	for _, tr := range table {
		k := [3]string{string(tr.Machine), tr.From, string(tr.Event)}
		if seen[k] {
			t.Errorf("duplicate row %v", k)
		}
		seen[k] = true
	}
}

func TestResolve(t *testing.T) {
	rs, ok := Pilot("1.0")
	if !ok {
		t.Fatal("pilot 1.0 missing")
	}
	if _, ok := Resolve(PilotID, "1.0", rs.Hash); !ok {
		t.Error("exact reference must resolve")
	}
	if _, ok := Resolve(PilotID, "1.1", rs.Hash); ok {
		t.Error("a hash of another version must not resolve")
	}
	if _, ok := Resolve("a202-rules/other", "1.0", rs.Hash); ok {
		t.Error("an unknown rule set must not resolve")
	}
	if !rs.HasRule(PilotID+"#dispute.window") || rs.HasRule(PilotID+"#quality.threshold-met") {
		t.Error("HasRule wrong")
	}
	if rs.Grant("refusal") != Advisory || rs.Granted("refusal") {
		t.Error("an absent grant resolves to advisory and is not a grant")
	}
	if rs.Grant("act") != Binding {
		t.Error("act questions are granted binding effect")
	}
	if Effect("final").Rank() <= Binding.Rank() {
		t.Error("an unregistered effect must rank above binding")
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"1.0", "1.3", -1}, {"1.10", "1.9", 1}, {"1.2", "1.2", 0}, {"x", "1.0", -1}} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
