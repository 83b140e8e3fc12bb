package verify_test

import (
	"strings"
	"testing"

	"github.com/partyd/party/internal/verify"
)

// The ledger section of a report: a whole record is judged; one whose
// stream is disclosed from the middle, or whose discloser states it
// withheld what a balance reads, is not (a finding could come from what
// was left out), and its balances are reported as far as they show.
func TestLedgerJudgesOnlyWholeMoney(t *testing.T) {
	rec := newRecord(t, 5) // formation to acceptance: one accepted obligation, nothing paid
	rep := run(rec)
	if len(rep.Ledger.Transactions) != 1 || len(rep.Ledger.Unjudged) != 0 || len(rep.Ledger.Findings) != 0 {
		t.Fatalf("a whole record: %+v", rep.Ledger)
	}
	b := rep.Ledger.Transactions[0].Obligations[0]
	if b.Status != "accepted" || b.Owed.Amount == "0.00" || b.Outstanding.Amount != b.Owed.Amount {
		t.Fatalf("balance %+v", b)
	}

	in := inputOf(rec)
	in.Disclosure = &verify.Disclosure{StatedGaps: []string{"adp_withheld_000000000001"}}
	rep = verify.Verify(in, opts())
	if len(rep.Ledger.Unjudged) != 1 || !strings.Contains(rep.Ledger.Unjudged[0], "withheld adp_withheld_000000000001") || len(rep.Ledger.Transactions) != 1 {
		t.Fatalf("a receipt stated as withheld: %+v", rep.Ledger)
	}

	rec = newRecord(t, 5)
	remove(rec, rec.EventIDs[0])
	rep = run(rec)
	if len(rep.Ledger.Unjudged) != 1 || !strings.Contains(rep.Ledger.Unjudged[0], "not disclosed from its start") {
		t.Fatalf("a stream disclosed from the middle: %+v", rep.Ledger)
	}
}
