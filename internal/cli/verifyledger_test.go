package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
)

// The ledger section over reports built in memory: what failed or was
// reversed is said only when there is any, a bundle without obligations
// owes nothing, and the closing line says what the findings did to the
// exit status. (verify.txtar runs the command over signed bundles.)
func TestLedgerSummary(t *testing.T) {
	t.Parallel()
	eur := func(a string) ledger.Money { return ledger.Money{Currency: "EUR", Amount: a} }
	rep := verify.LedgerReport{
		Transactions: []*ledger.Ledger{{TransactionID: "txn_1", Obligations: []ledger.Balance{
			{ObligationID: "obl_1", Status: ledger.StatusAccepted, Owed: eur("100.00"), Paid: eur("0.00"), InFlight: eur("0.00"),
				Failed: eur("40.00"), Reversed: eur("60.00"), Forgone: eur("0.00"), Outstanding: eur("100.00"), Settlement: ledger.SettlementUnpaid},
			{ObligationID: "obl_2", Status: ledger.StatusAccepted, Owed: eur("5.00"), Paid: eur("0.00"), InFlight: eur("5.00"),
				Failed: eur("0.00"), Reversed: eur("0.00"), Forgone: eur("0.00"), Outstanding: eur("0.00"), Settlement: ledger.SettlementInFlight},
		}}},
		Findings: []ledger.Finding{
			{Rule: "instruction_owed", Subject: "stl_2", Code: reason.SettlementTriggerAbsent, Detail: "pays more than is outstanding"},
			{Rule: "receipt_recorded", Subject: "adp_3", Code: reason.SettlementReceiptUnmatched, Detail: "answers no recorded instruction"},
		},
	}
	for _, strict := range []bool{false, true} {
		var out bytes.Buffer
		ledgerSummary(&out, rep, strict)
		got := out.String()
		for _, want := range []string{
			"\nLedger (party's own rules, not the specification's):\n  transaction txn_1\n",
			"    obl_1 (accepted): owed 100.00 EUR, paid 0.00, in flight 0.00, forgone 0.00, outstanding 100.00, failed 40.00, reversed 60.00, settlement unpaid\n",
			"    obl_2 (accepted): owed 5.00 EUR, paid 0.00, in flight 5.00, forgone 0.00, outstanding 0.00, settlement in_flight\n",
			"\nLedger findings (2):\n  instruction_owed  stl_2  " + string(reason.SettlementTriggerAbsent) + "\n      pays more than is outstanding\n",
			"  receipt_recorded  adp_3  " + string(reason.SettlementReceiptUnmatched) + "\n      answers no recorded instruction\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("strict %v: the section lacks %q:\n%s", strict, want, got)
			}
		}
		closing := "2 ledger finding(s): party's own rules, not checks; the exit status is the checks' (--ledger-strict counts them).\n"
		if strict {
			closing = "2 ledger finding(s), and --ledger-strict: exit 1.\n"
		}
		if !strings.HasSuffix(got, closing) || strings.Contains(got, "no finding") {
			t.Errorf("strict %v: the section does not close with %q:\n%s", strict, closing, got)
		}
	}

	var out bytes.Buffer
	ledgerSummary(&out, verify.LedgerReport{Transactions: []*ledger.Ledger{}, Findings: []ledger.Finding{}}, true)
	if want := "\nLedger (party's own rules, not the specification's):\n  no obligation issued: nothing is owed\n  no finding\n"; out.String() != want {
		t.Errorf("without obligations:\n%s\nwant\n%s", out.String(), want)
	}
}

// A partial disclosure's transaction is listed as not judged, and the
// ledger finds nothing about it.
func TestLedgerSummaryUnjudged(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	ledgerSummary(&out, verify.LedgerReport{Transactions: []*ledger.Ledger{{TransactionID: "txn_1", Obligations: []ledger.Balance{}}},
		Findings: []ledger.Finding{}, Unjudged: []string{"txn_1: the bundle states it withheld adp_1"}}, false)
	if want := "  transaction txn_1\n  not judged: txn_1: the bundle states it withheld adp_1\n  no finding\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("got\n%s\nwant it to end\n%s", out.String(), want)
	}
}
