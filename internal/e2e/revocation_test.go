package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/verify"
)

// TestMandateRevocationInCounterpartyExport: the supplier's agent acts
// under its mandate (performance.declared, countersigned by the buyer);
// the buyer's `party serve` stops; the supplier's principal revokes the
// mandate with `party mandate revoke`; the buyer's serve starts again. With
// no message between the two, the buyer's instance fetches the supplier's
// records, keeps the revocation, and its `party export` carries it: `party
// verify` on the buyer's bundle passes, verifies the revocation's
// signature, and names it against the supplier's act as coming after it.
func TestMandateRevocationInCounterpartyExport(t *testing.T) {
	t.Parallel()
	buyer, supplier := setup(t)
	txn := buyer.TransactionID
	buyer.MandateID = issueMandate(t, buyer, supplier.Org)
	supplier.MandateID = issueMandate(t, supplier, buyer.Org)
	p := serveBoth(t, buyer, supplier)
	p.form()
	obl := objectOf(p.call(p.ba, "issue_obligation", map[string]any{"mandate_id": buyer.MandateID, "transaction_id": txn}), "obligation")
	declared := objectOf(p.call(p.sa, "assert_performance", map[string]any{"mandate_id": supplier.MandateID, "obligation_id": obl,
		"evidence": []any{map[string]any{"evidence_type": "third_party_certificate",
			"claim":         "Calibration certificates issued for 20 transmitters under ISO/IEC 17025:2017",
			"artifact_hash": strings.Repeat("ab", 32)}}}), "event")
	if declared == "" {
		t.Fatal("assert_performance named no event")
	}
	acted := time.Now().UTC().Truncate(time.Second) // the act occurred by this second
	records(t, buyer, supplier, txn, 4)

	p.bp.stop(syscall.SIGTERM)
	// Whole-second timestamps order the act and the revocation only in
	// different seconds (in the same one, the verifier cannot tell).
	eventually(t, "a second after the act", func() bool { return time.Now().UTC().Truncate(time.Second).After(acted) })
	party(t, "mandate", "revoke", "--dir", supplier.Dir, "--reason", "the agent is withdrawn", supplier.MandateID)
	p.bp = serve(t, buyer.Dir)

	// The buyer's export, once its instance holds the revocation.
	var out, rev string
	eventually(t, "the buyer's export holds the supplier's revocation", func() bool {
		out = filepath.Join(t.TempDir(), "buyer-bundle")
		party(t, "export", "--dir", buyer.Dir, "--transaction", txn, out)
		b, err := bundle.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range b.Objects {
			o := d.Value
			if pl, _ := o["payload"].(map[string]any); o["object_type"] == "revocation_record" && pl["subject_id"] == supplier.MandateID && pl["status"] == "revoked" {
				rev = o["id"].(string)
				return true
			}
		}
		return false
	})
	var rep verify.Report
	if err := json.Unmarshal([]byte(party(t, "verify", out, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	signed, named := false, false
	for _, c := range rep.Checks {
		if c.Subject == rev && strings.HasPrefix(c.Name, "signature") && c.Result == verify.Verified {
			signed = true
		}
		if c.Subject == declared && c.Name == "mandate_authority" {
			named = c.Result == verify.Verified && strings.Contains(c.Detail, rev) && strings.Contains(c.Detail, "after this event")
			if !named {
				t.Errorf("mandate_authority of %s: %s %q, want verified naming %s as after it", declared, c.Result, c.Detail, rev)
			}
		}
	}
	if !signed || !named {
		data, _ := os.ReadFile(filepath.Join(out, "bundle.json"))
		t.Fatalf("the buyer's report: revocation %s signature verified %v, named against %s %v (bundle %s)", rev, signed, declared, named, data)
	}
}
