package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/store"
)

// TestBackupWhileServing backs up the buyer's state directory with
// `party backup` while both `party serve` run and a third trade is under
// way, after two trades reached completed: every transaction the backup
// holds exports and verifies, and `party serve` on the backup, in the
// original's place, answers with the same transactions.
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	buyer, supplier := setup(t)
	// A pair of mandates for each trade, scoped to its transaction, with
	// no approval rule; setup's transaction is the first.
	type trade struct{ txn, buyerMandate, supplierMandate string }
	var trades []trade
	for i := range 3 {
		if i > 0 {
			txn, _ := envelope.NewID("txn")
			buyer.TransactionID, supplier.TransactionID = txn, txn
		}
		trades = append(trades, trade{buyer.TransactionID, issueMandate(t, buyer, supplier.Org), issueMandate(t, supplier, buyer.Org)})
	}
	s := serveBoth(t, buyer, supplier)
	// begin forms tr's transaction and has the supplier assert its
	// performance (moneyFlow.perform): acceptance_pending. finish has the
	// buyer accept (unless accepted) and pay on the sandbox rail, and the
	// supplier close it.
	begin := func(tr trade) *moneyFlow {
		buyer.TransactionID, supplier.TransactionID = tr.txn, tr.txn
		buyer.MandateID, supplier.MandateID = tr.buyerMandate, tr.supplierMandate
		f := &moneyFlow{served: s, txn: tr.txn}
		f.perform()
		return f
	}
	finish := func(f *moneyFlow, accepted bool) {
		if !accepted {
			f.accept("")
		}
		key := "pay-" + f.txn
		if pay := f.call(f.ba, "instruct_settlement", map[string]any{"mandate_id": buyer.MandateID, "obligation_id": f.obl,
			"rail": "rail_test_sandbox", "idempotency_key": key}); pay["outcome"] == "refused" {
			t.Fatalf("instruct_settlement: %v", pay)
		}
		f.awaitSucceeded(key)
		f.complete()
	}
	for _, tr := range trades[:2] {
		finish(begin(tr), false)
		records(t, buyer, supplier, tr.txn, 7)
	}

	// The backup is taken while both serve run and the third trade is
	// under way, and while its buyer accepts the performance: the backup
	// holds it acceptance_pending or settlement_pending. It is paid and
	// completed after.
	f := begin(trades[2])
	bk := filepath.Join(t.TempDir(), "northstar-backup")
	type result struct {
		out []byte
		err error
	}
	backup := make(chan result, 1)
	go func() {
		cmd := exec.Command(partyBin, "backup", "--dir", buyer.Dir, "--json", bk)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.Bytes())
		}
		backup <- result{out, err}
	}()
	f.accept("")
	r := <-backup
	if r.err != nil {
		t.Fatalf("party backup: %v", r.err)
	}
	finish(f, true)
	var sum struct {
		Out           string `json:"out"`
		DatabaseBytes int64  `json:"database_bytes"`
		Transactions  int    `json:"transactions"`
	}
	if err := json.Unmarshal(r.out, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Out != bk || sum.DatabaseBytes <= 0 || sum.Transactions != 3 {
		t.Fatalf("backup summary %+v", sum)
	}
	t.Logf("backup: %d bytes, %d transactions", sum.DatabaseBytes, sum.Transactions)

	// Every transaction the backup holds exports and verifies.
	st, err := store.Open(filepath.Join(bk, instance.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Transactions(ctx)
	st.Close()
	if err != nil || len(held) != sum.Transactions {
		t.Fatalf("the backup holds %d transactions (%v); it said %d", len(held), err, sum.Transactions)
	}
	states := map[string]string{}
	for _, x := range held {
		states[x.ID] = x.State
		out := filepath.Join(t.TempDir(), x.ID)
		party(t, "export", "--dir", bk, "--transaction", x.ID, out)
		party(t, "verify", out)
	}
	for _, tr := range trades[:2] {
		if states[tr.txn] != "completed" {
			t.Fatalf("the backup holds %s as %q, want completed", tr.txn, states[tr.txn])
		}
	}

	if st := states[trades[2].txn]; st != "acceptance_pending" && st != "settlement_pending" {
		t.Fatalf("the backup holds the trade under way as %q", st)
	}
	t.Logf("the backup holds the trade under way as %s", states[trades[2].txn])

	// Restore: the original stops, and serve starts on the backup, with
	// the same addresses (the same listeners) and keys.
	s.bp.stop(syscall.SIGTERM)
	socketsMu.Lock()
	socketsOf[bk] = socketsOf[buyer.Dir]
	socketsMu.Unlock()
	serve(t, bk)
	restored := *buyer
	restored.Dir = bk
	list := s.call(s.connect(&restored), "list_transactions", map[string]any{})
	var listed []string
	for _, x := range list["transactions"].([]any) {
		x := x.(map[string]any)
		listed = append(listed, x["transaction_id"].(string))
		// The completed ones as the backup held them; the one under way
		// as the backup was taken may move on once served.
		if want := states[x["transaction_id"].(string)]; want == "completed" && x["state"] != want {
			t.Fatalf("the restored instance lists %v; the backup held it as %q", x, states[x["transaction_id"].(string)])
		}
	}
	for id := range states {
		if !slices.Contains(listed, id) {
			t.Fatalf("the restored instance lists %v, not %s", listed, id)
		}
	}
	if len(listed) != len(states) {
		t.Fatalf("the restored instance lists %v; the backup held %v", listed, states)
	}
}
