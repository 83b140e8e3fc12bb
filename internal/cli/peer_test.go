package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/instance"
)

// initDir makes a state directory for org and returns it and its peer file.
func initDir(t *testing.T, org string) (dir, peerFile string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), org)
	sum, err := instance.Init(dir, instance.InitOptions{OrganizationID: org})
	if err != nil {
		t.Fatal(err)
	}
	return dir, sum.PeerFile
}

func party(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPeerAddAndList(t *testing.T) {
	t.Parallel()
	dir, _ := initDir(t, "org_northwind")
	_, theirs := initDir(t, "org_southgate")

	code, out, errs := party("", "peer", "list", "--dir", dir)
	if code != 0 || !strings.Contains(out, "no counterparty pinned") {
		t.Fatalf("empty list: %d %q %q", code, out, errs)
	}
	code, out, _ = party("", "peer", "list", "--dir", dir, "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("empty JSON list: %d %q", code, out)
	}

	code, out, errs = party("", "peer", "add", "--dir", dir, theirs)
	if code != 0 || !strings.Contains(out, "pinned org_southgate") {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, instance.PeersDir, "org_southgate.json")); err != nil {
		t.Fatal(err)
	}
	// Flags after the file work too; the same file again changes nothing.
	code, out, _ = party("", "peer", "add", theirs, "--dir", dir, "--json")
	var res struct {
		Outcome string            `json:"outcome"`
		Peer    instance.PeerInfo `json:"peer"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Outcome != "unchanged" || res.Peer.OrganizationID != "org_southgate" {
		t.Fatalf("re-add: %d %q", code, out)
	}
	// From standard input.
	data, _ := os.ReadFile(theirs)
	if code, out, _ := party(string(data), "peer", "add", "--dir", dir, "-"); code != 0 || !strings.Contains(out, "already pinned") {
		t.Fatalf("stdin: %d %q", code, out)
	}

	code, out, _ = party("", "peer", "list", "--dir", dir)
	if code != 0 || !strings.Contains(out, "org_southgate") || !strings.Contains(out, "ORGANIZATION") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, out, _ = party("", "peer", "list", "--dir", dir, "--json")
	var peers []instance.PeerInfo
	if code != 0 || json.Unmarshal([]byte(out), &peers) != nil || len(peers) != 1 || peers[0].TLSCertificateSHA256 == "" {
		t.Fatalf("JSON list: %d %q", code, out)
	}
}

func TestPeerAddRefusals(t *testing.T) {
	dir, own := initDir(t, "org_northwind")
	_, theirs := initDir(t, "org_southgate")
	tmp := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var good map[string]any
	data, _ := os.ReadFile(theirs)
	json.Unmarshal(data, &good)
	mutate := func(name string, f func(m map[string]any)) string {
		m := map[string]any{}
		json.Unmarshal(data, &m)
		f(m)
		b, _ := json.Marshal(m)
		return write(name, string(b))
	}
	bad := map[string]string{
		"not JSON":             write("garbage.json", "{"),
		"unknown member":       mutate("unknown.json", func(m map[string]any) { m["note"] = "x" }),
		"plain HTTP card URL":  mutate("http.json", func(m map[string]any) { m["agent_card_url"] = "http://127.0.0.1:7402/.well-known/agent-card.json" }),
		"short fingerprint":    mutate("fp.json", func(m map[string]any) { m["tls_certificate_sha256"] = "abcd" }),
		"no principal pins":    mutate("nopins.json", func(m map[string]any) { m["principal_key_thumbprints"] = []any{} }),
		"unpinned principal":   mutate("unpinned.json", func(m map[string]any) { m["principal_key_thumbprints"] = []any{"AAAA"} }),
		"own organisation":     own,
		"missing file":         filepath.Join(tmp, "absent.json"),
		"wrong format version": mutate("format.json", func(m map[string]any) { m["format"] = "party-peer/9" }),
	}
	for name, file := range bad {
		code, out, errs := party("", "peer", "add", "--dir", dir, "--json", file)
		if code != 1 || !strings.Contains(out, `"outcome":"error"`) || errs == "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errs)
		}
	}
	// Nothing was pinned by any of them.
	if peers, _ := instance.Peers(dir); len(peers) != 0 {
		t.Fatalf("refused files pinned: %+v", peers)
	}

	// Re-pinning: a different file for an organisation already pinned.
	if code, _, errs := party("", "peer", "add", "--dir", dir, theirs); code != 0 {
		t.Fatalf("add: %s", errs)
	}
	repin := mutate("repin.json", func(m map[string]any) { m["tls_certificate_sha256"] = strings.Repeat("ab", 32) })
	code, _, errs := party("", "peer", "add", "--dir", dir, repin)
	if code != 1 || !strings.Contains(errs, "remove it first") {
		t.Fatalf("re-pin: %d %q", code, errs)
	}
	peers, _ := instance.Peers(dir)
	if len(peers) != 1 || peers[0].TLSCertificateSHA256 != good["tls_certificate_sha256"] {
		t.Fatal("the pinned certificate changed")
	}

	// Usage errors exit 2.
	for _, args := range [][]string{
		{"peer"},
		{"peer", "frobnicate"},
		{"peer", "add", "--dir", dir},
		{"peer", "add", "--dir", dir, theirs, own},
		{"peer", "add", theirs},
		{"peer", "list", "--dir", dir, "extra"},
		{"peer", "list", "--dir", dir, "--bogus"},
	} {
		t.Setenv("PARTY_DIR", "")
		if code, _, _ := party("", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// Not a state directory: exit 1.
	if code, _, _ := party("", "peer", "list", "--dir", t.TempDir()); code != 1 {
		t.Errorf("list outside a state directory: exit %d", code)
	}
	// Help: exit 0 on stdout.
	if code, out, _ := party("", "peer", "add", "-h"); code != 0 || !strings.Contains(out, "Usage: party peer add") {
		t.Errorf("help: %d %q", code, out)
	}
}
