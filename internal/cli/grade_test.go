package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/bindings/peer"
	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/spectest"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// serveCarriers has n's peer listener carry both bindings in front of a
// record engine, as `party serve` does (bindings/peer); no other route is
// added.
func serveCarriers(t *testing.T, n *orgtest.Node) {
	t.Helper()
	client, err := peer.NewClient(n.Org, peer.CarrierA2A, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := record.New(record.Of(n.Org), record.Options{Transport: client, Mandates: client})
	if err := engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := n.Org.Config()
	as, err := a2a.NewServer(a2a.ServerConfig{Card: a2a.Card(a2a.CardOptions{OrganizationID: cfg.OrganizationID, PublicURL: cfg.PublicURL}),
		Clients: n.Org.Clients, Receiver: engine})
	if err != nil {
		t.Fatal(err)
	}
	as.Mount(n.Mux)
	hs, err := https.NewServer(https.ServerConfig{Clients: n.Org.Clients, Inbox: engine})
	if err != nil {
		t.Fatal(err)
	}
	hs.Mount(n.Mux)
}

// TestGradeIssueAboutLiveCounterparty: party grade issue --about presents
// the published refused cases to the counterparty's live instance over
// A2A and plain HTTPS (there is no probe route) and signs a grade of what
// it observed, which the counterparty verifies under the pinned principal
// key and refuses once a byte of it changed; grading leaves the
// counterparty's record as it was.
func TestGradeIssueAboutLiveCounterparty(t *testing.T) {
	t.Parallel()
	spec := spectest.SpecDir(t)
	northstar := orgtest.New(t, "org_northstar", time.Now, true)
	delta := orgtest.New(t, "org_delta", time.Now, true)
	orgtest.Peer(t, northstar, delta)
	serveCarriers(t, northstar)
	serveCarriers(t, delta)

	file := filepath.Join(t.TempDir(), "grade.json")
	code, out, errs := run(t, "grade", "issue", "--dir", northstar.Dir, "--about", "org_delta", "--spec", spec, "--implementation", "party", "--out", file)
	if code != 0 {
		t.Fatalf("grade issue: %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "graded org_delta over a2a and https: 50 passed, 0 failed, 15 inconclusive, 53 not presented: A=1 B=1 C=1 D=unassessed E=1") || strings.Contains(out, "failed negative/") {
		t.Errorf("grade issue printed %q", out)
	}
	if txns, err := delta.Org.Store.Transactions(context.Background()); err != nil || len(txns) != 0 {
		t.Errorf("grading left %d transactions in the counterparty's record (%v)", len(txns), err)
	}
	code, out, errs = run(t, "grade", "verify", "--dir", delta.Dir, "--json", file)
	if code != 0 || !strings.Contains(out, `"outcome":"accepted"`) {
		t.Fatalf("grade verify at the subject: %d %s %s", code, out, errs)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	doc["subject"].(map[string]any)["implementation"] = "something else"
	tampered, _ := json.Marshal(doc)
	bad := filepath.Join(t.TempDir(), "tampered.json")
	if err := os.WriteFile(bad, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "grade", "verify", "--dir", delta.Dir, "--json", bad)
	if code != 1 || !strings.Contains(out, "A202-EVIDENCE-SIGNATURE-INVALID") {
		t.Errorf("a tampered grade: %d %s", code, out)
	}
	if code, out, _ = run(t, "grade", "import", "--dir", delta.Dir, file); code != 0 || !strings.Contains(out, "imported the grade org_northstar issued about org_delta") {
		t.Errorf("grade import: %d %s", code, out)
	}
	if code, out, _ = run(t, "grade", "list", "--dir", northstar.Dir, "--about", "org_delta"); code != 0 || !strings.Contains(out, "about org_delta by org_northstar") || !strings.Contains(out, "A=1 B=1 C=1 D=unassessed E=1") {
		t.Errorf("grade list: %d %s", code, out)
	}
}
