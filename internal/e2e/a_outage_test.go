package e2e

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/demo"
)

// The outage is real: the counterparty's process is gone for three
// minutes, longer than every bound a message carries (a decision is good
// for 60 seconds) and than most of the back-off (at most five minutes).
const outage = 3 * time.Minute

// converging is how soon after the counterparty's return the record must
// have moved: its instance probes a peer it found away every few seconds.
const converging = 20 * time.Second

// TestOutages runs each outage case on its own pair of instances, their
// outages overlapping: one three-minute wait covers every case. (go test
// runs as many tests at once as the machine has cores, two in CI, and two
// tests each waiting three minutes held both.) This file's name sorts
// first so that the outage, the package's longest wait and the suite's
// longest path, takes the first slot once the serial tests are done: go
// test starts parallel tests in source order, files by name, and behind
// eleven others it started 37 s later.
func TestOutages(t *testing.T) {
	t.Parallel()
	cases := []*outageCase{acceptDuringOutage(t), instructDuringOutage(t)}
	for _, c := range cases {
		c.away()
	}
	for _, c := range cases {
		c.back()
	}
}

// An outageCase is an act taken while the supplier is away (during),
// what holds once the outage has lasted (ending), and what holds after
// the supplier's return (returned, given when it answered again).
type outageCase struct {
	f        *moneyFlow
	gone     time.Time
	during   func()
	ending   func()
	returned func(back time.Time)
}

// away stops the supplier's instance and runs during.
func (c *outageCase) away() {
	c.f.t.Helper()
	c.f.sp.stop(syscall.SIGKILL)
	c.gone = time.Now()
	c.during()
}

// back waits until the outage has lasted, runs ending, starts the
// supplier's instance again and, once it answers, runs returned.
func (c *outageCase) back() {
	f := c.f
	f.t.Helper()
	time.Sleep(time.Until(c.gone.Add(outage)))
	if c.ending != nil {
		c.ending()
	}
	f.sp = serve(f.t, f.supplier.Dir)
	f.sa.Close() // the session died with its process
	f.sa = f.connect(f.supplier)
	c.returned(time.Now())
}

// waiting returns what the buyer's record says waits for the supplier.
func (f *moneyFlow) waiting() []any {
	f.t.Helper()
	w, _ := f.call(f.ba, "get_transaction_record", map[string]any{"transaction_id": f.txn})["waiting"].([]any)
	return w
}

// acceptDuringOutage: the buyer accepts while the supplier is away; the
// acceptance waits (the record says what, since when, and the next try),
// and within seconds of the supplier's return the transaction is
// committed on both sides, each event once. The buyer's principal is told
// when the supplier has not answered for a minute, and when it answers
// again.
func acceptDuringOutage(t *testing.T) *outageCase {
	var hook *principalHook
	f := newMoneyFlow(t, func(buyer, _ *demo.Party) {
		hook = newPrincipalHook(t, buyer.Org)
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.srv.Certificate().Raw})
		for name, data := range map[string][]byte{"principal-webhook.secret": hook.secret, "principal-webhook-ca.pem": ca} {
			if err := os.WriteFile(filepath.Join(buyer.Dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		editConfig(t, buyer.Dir, func(c map[string]any) {
			c["principal_webhook"] = map[string]any{"url": hook.srv.URL + "/party", "secret_file": "principal-webhook.secret", "ca_file": "principal-webhook-ca.pem"}
			c["deadlines"] = map[string]any{"peer_unreachable_after_seconds": 60}
		})
	})
	offer := f.offer(time.Now().UTC().Add(time.Hour))["offer_id"]
	return &outageCase{f: f,
		during: func() {
			acc := f.call(f.ba, "accept_offer", map[string]any{"mandate_id": f.buyer.MandateID, "offer_id": offer})
			if acc["status"] != "pending" {
				t.Fatalf("accept_offer with the supplier away: %v", acc)
			}
			w := f.waiting()
			if len(w) != 1 || w[0].(map[string]any)["since"] == "" || w[0].(map[string]any)["next_attempt"] == "" {
				t.Fatalf("waiting %v", w)
			}
		},
		ending: func() {
			if w := f.waiting(); len(w) != 1 || w[0].(map[string]any)["counterparty_unreachable_since"] == nil || w[0].(map[string]any)["attempts"].(float64) < 2 {
				t.Fatalf("three minutes into the outage, waiting %v", w)
			}
		},
		returned: func(back time.Time) {
			for _, a := range []*demo.Agent{f.ba, f.sa} {
				eventually(t, a.Party.Name+" holds the transaction committed", func() bool {
					rec, err := a.Call(f.ctx, "get_transaction_record", map[string]any{"transaction_id": f.txn})
					return err == nil && rec["state"] == "committed"
				})
			}
			took := time.Since(back)
			t.Logf("committed on both sides %s after the supplier answered again", took.Round(10*time.Millisecond))
			if took > converging {
				t.Fatalf("the record moved %s after the supplier's return", took)
			}
			records(t, f.buyer, f.supplier, f.txn, 2)
			if w := f.waiting(); len(w) != 0 {
				t.Fatalf("still waiting %v", w)
			}
			eventually(t, "the buyer's principal was told of the outage and of the return", func() bool {
				return len(hook.kinds(f.supplier.Org, "peer.unreachable")) == 1 && len(hook.kinds(f.supplier.Org, "peer.reachable")) == 1
			})
			told := hook.kinds(f.supplier.Org, "peer.unreachable")[0]
			if told.body["messages_waiting"] != float64(1) || told.body["unreachable_since"] == nil {
				t.Fatalf("the outage notice %v", told.body)
			}
		},
	}
}

// instructDuringOutage: the buyer instructs payment while the supplier is
// away; within seconds of the supplier's return the instruction is
// countersigned, the money moves once, and the receipt is on both sides.
func instructDuringOutage(t *testing.T) *outageCase {
	f := newMoneyFlow(t)
	f.perform()
	f.accept("")
	key := "pay-through-an-outage-" + f.txn
	return &outageCase{f: f,
		during: func() {
			out := f.call(f.ba, "instruct_settlement", f.payArgs(f.obl, key, ""))
			if out["status"] != "pending" {
				t.Fatalf("instruct_settlement with the supplier away: %v", out)
			}
		},
		returned: func(back time.Time) {
			f.awaitSucceeded(key)
			took := time.Since(back)
			t.Logf("paid and receipted on both sides %s after the supplier answered again", took.Round(10*time.Millisecond))
			if took > converging {
				t.Fatalf("the payment completed %s after the supplier's return", took)
			}
			f.bank.movedOnce(t, map[string]string{key: "3200.00"})
			f.complete()
			f.verified()
		},
	}
}

// kinds returns the notices of kind about counterparty org.
func (h *principalHook) kinds(org, kind string) []hookNotice {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookNotice
	for _, n := range h.got {
		if n.body["kind"] == kind && n.body["counterparty_organization_id"] == org {
			out = append(out, n)
		}
	}
	return out
}
