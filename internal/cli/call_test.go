package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCall calls the agent's tools on a running instance with `party
// call`: results on stdout (whole, or one member with --get), arguments
// assembled from every form in order with later ones winning (observed
// through verify_mandate's decision, which turns on the act's amount and
// the mandate), and a refusal, an unknown tool, a missing member or no
// serve each exit 1 with nothing on stdout.
func TestCall(t *testing.T) {
	t.Parallel()
	dir, _ := initInstance(t, "org_acme")
	mid := issueBuyer(t, dir, "org_acme")
	serveInProcess(t, dir)

	out := mustParty(t, "call", "--dir", dir, "whoami")
	var who map[string]any
	if err := json.Unmarshal([]byte(out), &who); err != nil || who["organization_id"] != "org_acme" {
		t.Fatalf("whoami: %v\n%s", err, out)
	}
	if out := mustParty(t, "call", "--dir", dir, "--get", "organization_id", "whoami"); out != "org_acme\n" {
		t.Fatalf("--get organization_id: %q", out)
	}
	if out := mustParty(t, "call", "whoami", "--get", "mandates.0.mandate_id", "--dir", dir); out != mid+"\n" {
		t.Fatalf("--get mandates.0.mandate_id: %q, want %s", out, mid)
	}

	// Held above 3000.00 EUR: the decision tells which act and mandate
	// reached the tool.
	small, _ := json.Marshal(acceptAct("2000.00"))
	large, _ := json.Marshal(acceptAct("3500.00"))
	file := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(file, []byte(`{"mandate_id": "mnd_not_this_one", "proposed_action": `+string(large)+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	decide := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := runParty(t, stdin, append([]string{"call", "--dir", dir, "--get", "decision", "verify_mandate"}, args...)...)
		if code != 0 {
			t.Fatalf("verify_mandate %q: exit %d\n%s%s", args, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"@" + file, "mandate_id=" + mid}, "require_approval"},
		{"", []string{"@" + file, "mandate_id=" + mid, "proposed_action:=" + string(small)}, "allow"},
		{"", []string{`{"proposed_action": ` + string(small) + `}`, "mandate_id=" + mid}, "allow"},
		{`{"mandate_id": "` + mid + `"}`, []string{"proposed_action:=" + string(large), "-"}, "require_approval"},
	} {
		if got := decide(c.stdin, c.args...); got != c.want {
			t.Errorf("verify_mandate %q: %s, want %s", c.args, got, c.want)
		}
	}

	for name, args := range map[string][]string{
		"a refused act":   {"accept_offer", "mandate_id=" + mid, "offer_id=off_0123456789abcdef01234567"},
		"an unknown tool": {"no_such_tool"},
		"a missing --get": {"--get", "mandates.7.mandate_id", "whoami"},
	} {
		out, errOut, code := runParty(t, "", append([]string{"call", "--dir", dir}, args...)...)
		if code != 1 || out != "" || errOut == "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1, nothing, a reason", name, code, out, errOut)
		}
		if name == "a refused act" && !strings.Contains(errOut, `"outcome": "refused"`) {
			t.Errorf("the refusal is not shown: %s", errOut)
		}
	}

	for name, args := range map[string][]string{
		"no tool":      {"call", "--dir", dir},
		"no --dir":     {"call", "whoami"},
		"a bare word":  {"call", "--dir", dir, "whoami", "mandate_id"},
		"not JSON":     {"call", "--dir", dir, "list_inbox", "limit:=ten"},
		"not a object": {"call", "--dir", dir, "whoami", "[1]"},
	} {
		if _, _, code := runParty(t, "", args...); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
	}

	idle, _ := initInstance(t, "org_idle")
	takeSockets(t, idle).MCP.Close() // nothing listens there
	_, errOut, code := runParty(t, "", "call", "--dir", idle, "whoami")
	if code != 1 || !strings.Contains(errOut, "party serve is not running") {
		t.Fatalf("no serve: exit %d\n%s", code, errOut)
	}
}
