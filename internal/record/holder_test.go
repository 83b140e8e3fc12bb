package record

import "testing"

// A key's holder id comes from a counterparty's key record, so it may be
// anything, including shorter than the prefix it is compared with: the
// comparison says no, and never panics.
func TestIsHolderOnShortIDs(t *testing.T) {
	for _, c := range []struct {
		holder, prefix string
		want           bool
	}{
		{"", "agt_", false}, {"a", "agt_", false}, {"ag", "agt_", false}, {"agt", "agt_", false},
		{"agt_", "agt_", true}, {"agt_1234", "agt_", true}, {"prn_1234", "agt_", false}, {"prn_x", "prn_", true},
	} {
		if got := isHolder(c.holder, c.prefix); got != c.want {
			t.Errorf("isHolder(%q, %q) = %v, want %v", c.holder, c.prefix, got, c.want)
		}
	}
}
