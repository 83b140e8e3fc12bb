package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/demo"
)

// TestWalkthrough runs the example as the README's first command does, in a
// fresh directory, and checks what it leaves behind: both bundles verify
// with nothing failed and hold the same events.
func TestWalkthrough(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	var buf bytes.Buffer
	if err := run(out, false, "3200.00", &buf); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "approve (admin surface)") {
		t.Fatalf("the buyer's acceptance was not approved by its principal:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "reached completed") {
		t.Fatalf("the walkthrough did not reach completed:\n%s", buf.String())
	}
	var events [][]string
	for _, name := range []string{"northstar-bundle", "delta-bundle"} {
		rep, hs, err := demo.Check(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 || rep.Results.Verified == 0 {
			t.Fatalf("%s: %+v", name, rep.Results)
		}
		events = append(events, hs)
	}
	if len(events[0]) != 7 || strings.Join(events[0], ",") != strings.Join(events[1], ",") {
		t.Fatalf("the bundles hold different events: %v / %v", events[0], events[1])
	}
	// Each organisation's state directory is its own: no private key of one
	// appears anywhere under the other's.
	for _, pr := range [][2]string{{"northstar", "delta"}, {"delta", "northstar"}} {
		secret, err := os.ReadFile(filepath.Join(out, pr[0], "keys", "agent.pem"))
		if err != nil {
			t.Fatal(err)
		}
		filepath.Walk(filepath.Join(out, pr[1]), func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				if data, _ := os.ReadFile(p); bytes.Contains(data, secret) {
					t.Errorf("%s's agent key found in %s", pr[0], p)
				}
			}
			return nil
		})
	}
}

// TestAmountOverLimitFails shows the example fails when something does not
// hold: an offer over the supplier's mandate is denied and the run stops.
func TestAmountOverLimitFails(t *testing.T) {
	var buf bytes.Buffer
	if err := run(filepath.Join(t.TempDir(), "run"), false, "4800.00", &buf); err == nil {
		t.Fatalf("an offer over the 4000.00 EUR limit went through:\n%s", buf.String())
	}
}
