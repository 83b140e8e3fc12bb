package cli_test

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/orgtest"
)

// runParty runs the command line in this process and returns its output and
// exit status.
func runParty(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// mustParty is party for a command that must succeed.
func mustParty(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runParty(t, "", args...)
	if code != 0 {
		t.Fatalf("party %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// partyBinary is the party command TestMain installs on $PATH for the
// scripts; tests that need a real process (serve, mcp over stdio) run it.
func partyBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("party")
	if err != nil {
		t.Fatalf("party is not on $PATH, which TestMain sets up: %v", err)
	}
	return bin
}

// socketsOf holds each initialised directory's listeners (bound on port
// 0 before init writes their addresses) for serveInProcess.
var (
	socketsMu sync.Mutex
	socketsOf = map[string]orgtest.Sockets{}
)

// takeSockets hands over dir's listeners: the caller serves or closes
// them.
func takeSockets(t *testing.T, dir string) orgtest.Sockets {
	t.Helper()
	socketsMu.Lock()
	defer socketsMu.Unlock()
	s, ok := socketsOf[dir]
	if !ok {
		t.Fatalf("%s was not made by initInstance", dir)
	}
	delete(socketsOf, dir)
	return s
}

// activate makes cmd, a `party serve`, start under socket activation with
// socks (sd_listen_fds(3); daemon.Activated). LISTEN_PID must name the
// server's own process, known only after fork: a shell sets it and execs.
// The returned function closes the parent's copies once cmd has started.
func activate(t *testing.T, cmd *exec.Cmd, socks orgtest.Sockets) func() {
	t.Helper()
	var files []*os.File
	for _, l := range []net.Listener{socks.MCP, socks.Peer, socks.Admin} {
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	cmd.Args = append([]string{"sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`}, cmd.Args...)
	cmd.Path = "/bin/sh"
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), "LISTEN_FDS=3", "LISTEN_FDNAMES=mcp:peer:admin")
	return func() {
		for _, f := range files {
			f.Close()
		}
	}
}

// initInstance runs `party init --json` on free loopback ports and
// returns the directory and the summary it printed.
func initInstance(t *testing.T, orgID string) (string, instance.Summary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "st")
	socks := orgtest.Listen(t)
	socketsMu.Lock()
	socketsOf[dir] = socks
	socketsMu.Unlock()
	mcpAddr, peerAddr, adminAddr := socks.Addrs()
	out := mustParty(t, "init", "--dir", dir, "--org", orgID, "--json",
		"--mcp-addr", mcpAddr, "--peer-addr", peerAddr, "--admin-addr", adminAddr)
	var sum instance.Summary
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("init --json: %v\n%s", err, out)
	}
	return dir, sum
}

// TestInitSummaryMatchesInstance checks that what `init --json` reports is
// what the state directory holds: the identifiers and key ids in
// config.json, and a peer file that validates and pins this instance's
// own certificate.
func TestInitSummaryMatchesInstance(t *testing.T) {
	t.Parallel()
	dir, sum := initInstance(t, "org_acme")
	cfg, err := instance.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum.OrganizationID != cfg.OrganizationID || sum.PrincipalID != cfg.PrincipalID || sum.AgentID != cfg.AgentID ||
		sum.PrincipalKeyID != cfg.PrincipalKeyID || sum.AgentKeyID != cfg.AgentKeyID {
		t.Fatalf("summary %+v disagrees with config %+v", sum, cfg)
	}
	if sum.PrincipalKeyID == sum.AgentKeyID {
		t.Fatal("principal and agent share a key id")
	}
	if sum.MCPURL != "http://"+cfg.MCPAddr+"/mcp" || sum.AdminURL != "http://"+cfg.AdminAddr+"/" {
		t.Fatalf("urls %s %s for %s %s", sum.MCPURL, sum.AdminURL, cfg.MCPAddr, cfg.AdminAddr)
	}
	data, err := os.ReadFile(sum.PeerFile)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := instance.ParsePeerFile(data)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := instance.LoadCertificate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if peer.OrganizationID != "org_acme" || peer.TLSCertificateSHA256 != instance.CertFingerprint(cert.Raw) {
		t.Fatalf("peer file %+v does not pin this instance", peer)
	}
	// The two tokens differ and are private to the owner.
	agentTok, _ := instance.LoadToken(dir, instance.AgentTokenFile)
	adminTok, _ := instance.LoadToken(dir, instance.AdminTokenFile)
	if agentTok == adminTok || agentTok == "" {
		t.Fatal("agent and admin tokens are equal or empty")
	}
	for _, f := range []string{instance.AgentTokenFile, instance.AdminTokenFile, instance.PrincipalKeyFile, instance.AgentKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Fatalf("%s: mode %v, %v", f, st.Mode(), err)
		}
	}
}

// syncBuffer is a bytes.Buffer a child process writes to while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds or the deadline passes. The deadline
// bounds a hang; it asserts nothing about speed.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s after %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
