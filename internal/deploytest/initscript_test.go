package deploytest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/store"
)

// asParty, set in a child's environment, makes the test binary run the
// party command line instead of the tests: deploy/init.sh then calls the
// real CLI without a separate build.
const asParty = "DEPLOYTEST_RUN_PARTY"

func TestMain(m *testing.M) {
	if os.Getenv(asParty) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// Under -race a program sleeps a second as it exits (atexit_sleep_ms),
	// and the init script starts party many times: 10 ms is enough.
	if !strings.Contains(os.Getenv("GORACE"), "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=10"))
	}
	os.Exit(m.Run())
}

func partyEnv(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), asParty+"=1", "PARTY="+exe)
}

// party runs the party command line in a child process.
func party(t *testing.T, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = partyEnv(t)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// needCommands skips while the command line lacks a command the init
// script uses; they are being written alongside it.
func needCommands(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		out, _ := party(t, n, "-h")
		if strings.Contains(out, "unknown command") {
			t.Skipf("party has no %q command yet; deploy/init.sh needs it", n)
		}
	}
}

var (
	validFrom  = regexp.MustCompile(`"valid_from": *"[^"]*"`)
	validUntil = regexp.MustCompile(`"valid_until": *"[^"]*"`)
)

// issueRequest is TestMandateRequestsIssue's check of one request file.
func issueRequest(t *testing.T, org, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// deploy/init.sh rewrites these two members with sed; each must be
	// there once, in the form its expression matches.
	if n, m := len(validFrom.FindAll(data, -1)), len(validUntil.FindAll(data, -1)); n != 1 || m != 1 {
		t.Fatalf("%s: %d valid_from and %d valid_until members in the form deploy/init.sh rewrites, want 1 each", file, n, m)
	}
	req, err := authority.ParseIssueRequest(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	req.ValidFrom = envelope.Timestamp(now)
	req.ValidUntil = envelope.Timestamp(now.AddDate(0, 0, 90))
	node := orgtest.New(t, org, nil, false)
	m, err := node.Principal(t).IssueMandate(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: the principal cannot issue it: %v", file, err)
	}
	if m["represented_organization_id"] != org {
		t.Errorf("%s: issued for %v", file, m["represented_organization_id"])
	}
}

// initEnv returns the environment docker-compose.yml gives SERVICE.
func initEnv(t *testing.T, service string) []string {
	t.Helper()
	doc := loadCompose(t, repoPath("docker-compose.yml"))
	env, ok := doc.(map[string]any)["services"].(map[string]any)[service].(map[string]any)["environment"].(map[string]any)
	if !ok {
		t.Fatalf("service %s has no environment mapping", service)
	}
	var out []string
	for k, v := range env {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	return out
}

type orgDirs struct{ org, host, data, tokens string }

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ", a, b)
	}
}

func localMandates(t *testing.T, dir string) int {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, instance.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ms, err := st.Mandates(context.Background(), "local")
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// TestInitScript runs deploy/init.sh as the compose init services do, with
// their environment, on directories standing in for the volumes, then the
// pin steps; then all of it again, which must change nothing.
func TestInitScript(t *testing.T) {
	needCommands(t, "init", "peer", "mandate")
	shells := [][]string{{"sh"}}
	if p, err := exec.LookPath("busybox"); err == nil {
		shells = append(shells, []string{p, "sh"}) // the init image's shell
	}
	for _, sh := range shells {
		t.Run(filepath.Base(sh[0]), func(t *testing.T) { runInitScript(t, sh) })
	}
}

func runInitScript(t *testing.T, sh []string) {
	root := t.TempDir()
	peers := filepath.Join(root, "peers")
	orgs := []orgDirs{
		{"org_northstar", "northstar", filepath.Join(root, "northstar-state"), filepath.Join(root, "northstar-agent-token")},
		{"org_delta", "delta", filepath.Join(root, "delta-state"), filepath.Join(root, "delta-agent-token")},
	}
	for _, d := range []string{peers, orgs[0].data, orgs[0].tokens, orgs[1].data, orgs[1].tokens} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	runInit := func(o orgDirs, data string) (string, error) {
		cmd := exec.Command(sh[0], append(sh[1:], repoPath("deploy", "init.sh"))...)
		cmd.Env = append(partyEnv(t), initEnv(t, strings.TrimPrefix(o.org, "org_")+"-init")...)
		cmd.Env = append(cmd.Env,
			"PARTY_DATA="+data, "PARTY_PEERS="+peers, "PARTY_TOKENS="+o.tokens,
			"PARTY_MANDATE_REQUEST="+repoPath("deploy", "mandates", o.org+".json"), "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var keys [2][]byte
	for round := 1; round <= 2; round++ {
		for i, o := range orgs {
			if out, err := runInit(o, o.data); err != nil {
				t.Fatalf("round %d: init.sh for %s: %v\n%s", round, o.org, err, out)
			}
			cfg, err := instance.LoadConfig(o.data)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OrganizationID != o.org || cfg.MCPAddr != "0.0.0.0:7401" || cfg.AdminAddr != "0.0.0.0:7403" ||
				cfg.PeerAddr != "0.0.0.0:7402" || cfg.PublicURL != "https://"+o.host+":7402" {
				t.Errorf("%s: config %+v", o.org, cfg)
			}
			k, err := os.ReadFile(filepath.Join(o.data, instance.PrincipalKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			if round == 1 {
				keys[i] = k
			} else if !bytes.Equal(k, keys[i]) {
				t.Errorf("%s: the second run replaced the principal key", o.org)
			}
			if n := localMandates(t, o.data); n != 2 {
				t.Errorf("round %d: %s holds %d mandates of its own, want the instance mandate and the requested one", round, o.org, n)
			}
			pf := filepath.Join(peers, o.org+".json")
			sameFile(t, filepath.Join(o.data, instance.PeerFile), pf)
			if m := mode(t, pf); m != 0o644 {
				t.Errorf("%s mode %v", pf, m)
			}
			tok := filepath.Join(o.tokens, "agent")
			sameFile(t, filepath.Join(o.data, instance.AgentTokenFile), tok)
			if m := mode(t, tok); m != 0o600 {
				t.Errorf("%s mode %v", tok, m)
			}
			if ents, _ := os.ReadDir(o.tokens); len(ents) != 1 {
				t.Errorf("%s holds %d files, want the agent token only", o.tokens, len(ents))
			}
			cert, err := instance.LoadCertificate(o.data)
			if err != nil {
				t.Fatal(err)
			}
			if err := cert.VerifyHostname(o.host); err != nil {
				t.Errorf("%s: the TLS certificate does not name %s: %v", o.org, o.host, err)
			}
		}
		if ents, _ := os.ReadDir(peers); len(ents) != 2 {
			t.Errorf("round %d: the peers volume holds %d files, want the two peer files", round, len(ents))
		}
		// The pin services: each pins the other's peer file.
		for i, o := range orgs {
			other := orgs[1-i]
			if out, err := party(t, "peer", "add", "--dir", o.data, filepath.Join(peers, other.org+".json")); err != nil {
				t.Fatalf("round %d: %s pins %s: %v\n%s", round, o.org, other.org, err, out)
			}
			ps, err := instance.Peers(o.data)
			if err != nil || len(ps) != 1 || ps[0].OrganizationID != other.org {
				t.Errorf("%s pinned %+v, %v", o.org, ps, err)
			}
		}
	}
	// An init service given the other organisation's state refuses it.
	if out, err := runInit(orgs[0], orgs[1].data); err == nil {
		t.Errorf("init.sh for %s accepted %s's state:\n%s", orgs[0].org, orgs[1].org, out)
	}
}
