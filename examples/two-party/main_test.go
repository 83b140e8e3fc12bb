package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/instance"
)

// syncBuffer is a bytes.Buffer the example writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWalkthrough runs the example as the README's first command does
// with --keep-running, in a fresh directory, and checks what it says and
// leaves behind: the deal told (what, for how much, who approved, what was
// paid); while it keeps running, the approvals page it names signs in with
// the token in the file it names, and no token is printed; both bundles
// verify with nothing failed and hold the same events.
func TestWalkthrough(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	var buf syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(ctx, out, true, "3200.00", &buf) }()
	for !strings.Contains(buf.String(), "Instances keep running") {
		select {
		case err := <-done:
			t.Fatalf("the example ended before it kept running: %v\n%s", err, buf.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	said := buf.String()
	for _, want := range []string{
		"approve (admin surface)",
		"Traded     Calibration and digital certificates for 20 pressure transmitters: 20 piece",
		"Supplier   delta (org_delta)",
		"Buyer      northstar (org_northstar)",
		"Price      3200.00 EUR",
		"Approved   by northstar's procurement_lead, ",
		"Paid       3200.00 EUR by northstar to delta on rail_test_sandbox: succeeded (receipt ",
		"Ended      completed",
		"reached completed",
	} {
		if !strings.Contains(said, want) {
			t.Fatalf("the output does not say %q:\n%s", want, said)
		}
	}
	// The approvals page and the token file it names, as a person would
	// use them; no token appears in what was printed.
	for _, name := range []string{"northstar", "delta"} {
		dir := filepath.Join(out, name)
		m := regexp.MustCompile(`approvals page  (http://\S+)/  \(sign in with the admin token: (\S+)\)`).FindAllStringSubmatch(said, -1)
		var page, tokFile string
		for _, x := range m {
			if strings.HasPrefix(x[2], dir+string(filepath.Separator)) {
				page, tokFile = x[1], x[2]
			}
		}
		if page == "" {
			t.Fatalf("no approvals page printed for %s:\n%s", name, said)
		}
		for _, f := range []string{instance.AdminTokenFile, instance.AgentTokenFile, daemon.MetricsTokenFile} {
			tok, err := instance.LoadToken(dir, f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(said, tok) {
				t.Fatalf("%s's %s was printed", name, f)
			}
		}
		tok, err := os.ReadFile(tokFile)
		if err != nil {
			t.Fatal(err)
		}
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.PostForm(page+"/login", url.Values{"token": {strings.TrimSpace(string(tok))}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
			t.Fatalf("signing in to %s's approvals page with %s: %s at %s\n%s", name, tokFile, resp.Status, resp.Request.URL, body)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
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
	if err := run(context.Background(), filepath.Join(t.TempDir(), "run"), false, "4800.00", &buf); err == nil {
		t.Fatalf("an offer over the 4000.00 EUR limit went through:\n%s", buf.String())
	}
}
