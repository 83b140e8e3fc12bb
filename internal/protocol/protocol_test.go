package protocol

import (
	"slices"
	"testing"
)

// Every act an event records is one party performs, and no two events
// record one act: an act is appended as exactly one event type.
func TestEventActsArePartysActs(t *testing.T) {
	seen := map[Act]EventType{}
	for ev, a := range eventActs {
		if !slices.Contains(Acts, a) {
			t.Errorf("%s records %s, which is not in Acts", ev, a)
		}
		if prev, ok := seen[a]; ok {
			t.Errorf("%s and %s both record %s", prev, ev, a)
		}
		seen[a] = ev
	}
	if a, ok := EvAgreementDirect.Act(); ok {
		t.Errorf("agreement.direct records %s whoever appends it; its act depends on its appender", a)
	}
	if a, ok := EvTransactionCancelled.Act(); !ok || a != ActTransactionCancel {
		t.Errorf("transaction.cancelled records %q, %v", a, ok)
	}
}
