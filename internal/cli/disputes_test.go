package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/partyd/party/internal/recordtest"
)

// TestDisputesListsWhatWentWrong: party disputes shows the principal of
// each side the exception a disputed obligation opened, both disputes (one
// determined) and the determination, from the database alone; --open
// leaves the determined dispute and the determination out.
func TestDisputesListsWhatWentWrong(t *testing.T) {
	t.Parallel()
	b, s, c := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	d := recordtest.Dispute(t, b, s, c, txn)
	for _, sd := range []*recordtest.Side{b, s} {
		code, out, errs := run(t, "disputes", "--dir", sd.Node.Dir)
		if code != 0 {
			t.Fatalf("party disputes: %d %s", code, errs)
		}
		for _, want := range []string{
			txn + " exception exc_", "obligation_disputed open: obligation " + d.ObligationID + ", opened by org_delta, dispute " + d.StateDispute,
			txn + " dispute " + d.ActDispute + " determined: by org_delta against org_northstar over act " + d.Rejection,
			txn + " dispute " + d.StateDispute + " undetermined: by org_delta against org_northstar over obligation_state",
			"grounds obligation_wrongly_rejected",
			txn + " determination " + d.Determination + " of " + d.ActDispute + ": by org_northstar, presumptive",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: party disputes printed\n%s\nwant %q", sd.Node.Org.Config().OrganizationID, out, want)
			}
		}
		code, out, _ = run(t, "disputes", "--dir", sd.Node.Dir, "--transaction", txn, "--open", "--json")
		var got struct {
			TransactionID  string           `json:"transaction_id"`
			Disputes       []map[string]any `json:"disputes"`
			Determinations []map[string]any `json:"determinations"`
			Exceptions     []map[string]any `json:"exceptions"`
		}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("--open --json: %d %v %s", code, err, out)
		}
		if got.TransactionID != txn || len(got.Disputes) != 1 || got.Disputes[0]["dispute_id"] != d.StateDispute || len(got.Determinations) != 0 ||
			len(got.Exceptions) != 1 || got.Exceptions[0]["status"] != "open" {
			t.Fatalf("--open --json: %s", out)
		}
	}
}
