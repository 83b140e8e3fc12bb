package cli_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/schema"
)

// servedInstance is a `party serve` process over a fresh state directory.
type servedInstance struct {
	dir      string
	cfg      instance.Config
	agentTok string
	adminTok string
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{}
	waitErr  error
}

// startServe initialises an instance on port-0 listeners and starts the
// party binary serving them by socket activation, returning once it logs that every listener is bound.
func startServe(t *testing.T) *servedInstance {
	t.Helper()
	dir, _ := initInstance(t, "org_acme")
	cfg, err := instance.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &servedInstance{dir: dir, cfg: cfg, stderr: &syncBuffer{}, exited: make(chan struct{})}
	s.agentTok, _ = instance.LoadToken(dir, instance.AgentTokenFile)
	s.adminTok, _ = instance.LoadToken(dir, instance.AdminTokenFile)
	s.cmd = exec.Command(partyBinary(t), "serve", "--dir", dir)
	closeParent := activate(t, s.cmd, takeSockets(t, dir))
	s.cmd.Stdout = io.Discard
	s.cmd.Stderr = s.stderr
	err = s.cmd.Start()
	closeParent()
	if err != nil {
		t.Fatal(err)
	}
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	waitFor(t, "party serve to bind its listeners", 30*time.Second, func() bool {
		select {
		case <-s.exited:
			t.Fatalf("party serve exited early: %v\n%s", s.waitErr, s.stderr.String())
		default:
		}
		return strings.Contains(s.stderr.String(), `"msg":"party serving"`)
	})
	return s
}

// stop sends SIGTERM and returns the exit status.
func (s *servedInstance) stop(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("party serve did not stop after SIGTERM\n%s", s.stderr.String())
	}
	return s.cmd.ProcessState.ExitCode()
}

func do(t *testing.T, method, url, token, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServe runs the real binary and checks each listener's credential,
// in both directions: the MCP endpoint opens with the agent token and
// refuses none (401) and the admin token (403); the admin surface opens
// with the admin token and refuses the agent token (403) for issuing a
// mandate and deciding an approval. The principal's command line works
// beside the running process, its changes reach the status endpoint at
// once, and SIGTERM stops the process with exit status 0.
func TestServe(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	mcpURL := "http://" + s.cfg.MCPAddr + "/mcp"
	adminURL := "http://" + s.cfg.AdminAddr

	// The start-up line names the schema set enforced, as party version does.
	if want := `"schema_set_sha256":"` + schema.Identity().SHA256 + `"`; !strings.Contains(s.stderr.String(), want) {
		t.Fatalf("the start-up log does not carry %s:\n%s", want, s.stderr.String())
	}

	// MCP: no token, a wrong one, and the admin token.
	initReq := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	mcpHeaders := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	resp, _ := do(t, "POST", mcpURL, "", initReq, mcpHeaders...)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("MCP without a token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp, _ := do(t, "POST", mcpURL, "not-a-token", initReq, mcpHeaders...); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("MCP with a wrong token: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "POST", mcpURL, s.adminTok, initReq, mcpHeaders...); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("MCP with the admin token: %d", resp.StatusCode)
	}
	// The agent token opens it: a real client lists and calls the tools.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: &http.Client{Transport: bearerTransport{s.agentTok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("whoami: %+v %v", res, err)
	}
	cs.Close()

	// Admin surface: no token is 401 on the API and a redirect to the
	// sign-in form for the page.
	if resp, _ := do(t, "GET", adminURL+"/api/approvals", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("admin API without a token: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", adminURL+"/", "", ""); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("page without a token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The agent token cannot issue a mandate, change one or decide an
	// approval, nor read the page.
	agentMandate := strings.Replace(buyerRequest("org_acme", time.Now().UTC()), "{", `{"mandate_id": "mnd_0123456789abcdef0123dddd",`, 1)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/mandates", agentMandate},
		{"POST", "/api/approvals/req_0123456789abcdef01234567/approve", ""},
		{"POST", "/api/approvals/req_0123456789abcdef01234567/reject", ""},
		{"POST", "/api/mandates/mnd_0123456789abcdef0123dddd/revoke", ""},
		{"GET", "/api/approvals", ""},
		{"GET", "/", ""},
	} {
		if resp, body := do(t, c.method, adminURL+c.path, s.agentTok, c.body); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("agent token on %s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	// The same request with the admin token issues the mandate, so the 403
	// was the token's doing.
	adminMandate := strings.Replace(agentMandate, "dddd", "eeee", 1)
	resp, body := do(t, "POST", adminURL+"/api/mandates", s.adminTok, adminMandate)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `"id":"mnd_0123456789abcdef0123eeee"`) {
		t.Fatalf("admin token issuing: %d %s", resp.StatusCode, body)
	}
	list := mustParty(t, "mandate", "list", "--dir", s.dir)
	if strings.Contains(list, "mnd_0123456789abcdef0123dddd") || !strings.Contains(list, "mnd_0123456789abcdef0123eeee") {
		t.Fatalf("mandates after the agent's attempt:\n%s", list)
	}

	// The command line beside the running process: issue, then the status
	// endpoint (HTTPS, the instance's own certificate) serves it; revoke,
	// and the endpoint says so on the next request.
	mid := issueBuyer(t, s.dir, "org_acme")
	if got := mandateStatus(t, s, mid); got != "active" {
		t.Fatalf("status of a new mandate: %s", got)
	}
	mustParty(t, "mandate", "revoke", "--dir", s.dir, "--reason", "test", mid)
	if got := mandateStatus(t, s, mid); got != "revoked" {
		t.Fatalf("status after revoke: %s", got)
	}

	if code := s.stop(t); code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, s.stderr.String())
	}
	logs := s.stderr.String()
	if !strings.Contains(logs, `"msg":"party stopped"`) {
		t.Fatalf("no clean stop logged:\n%s", logs)
	}
	metricsTok, err := instance.LoadToken(s.dir, daemon.MetricsTokenFile) // made by serve
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{s.agentTok, s.adminTok, metricsTok} {
		if strings.Contains(logs, secret) {
			t.Fatal("a token appears in the log")
		}
	}
	// Every log line is JSON.
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not JSON: %s", line)
		}
	}
}

// mandateStatus reads a mandate's status endpoint as a relying party
// would: over HTTPS, trusting only the instance's certificate.
func mandateStatus(t *testing.T, s *servedInstance, id string) string {
	t.Helper()
	cert, err := instance.LoadCertificate(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}}
	resp, err := c.Get("https://" + s.cfg.PeerAddr + "/v1/mandates/" + id + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		MandateID string `json:"mandate_id"`
		Status    string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.MandateID != id {
		t.Fatalf("status document: %+v %v (HTTP %d)", doc, err, resp.StatusCode)
	}
	return doc.Status
}

// failedServe runs `party serve --dir dir`, which must exit 1 at once, and
// returns what it wrote on standard error.
func failedServe(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(partyBinary(t), "serve", "--dir", dir)
	var errb syncBuffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("party serve --dir %s: %v, want exit 1\n%s", dir, err, errb.String())
	}
	return errb.String()
}

// TestServeRefusesATakenPort: a listener that cannot bind is a failure
// to start, exit 1, not a process that serves part of the instance. The
// second state directory is configured with the first's addresses.
func TestServeRefusesATakenPort(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	other := filepath.Join(t.TempDir(), "st")
	mustParty(t, "init", "--dir", other, "--org", "org_other",
		"--mcp-addr", s.cfg.MCPAddr, "--peer-addr", s.cfg.PeerAddr, "--admin-addr", s.cfg.AdminAddr)
	if stderr := failedServe(t, other); !strings.Contains(stderr, "listener") {
		t.Fatalf("no reason given:\n%s", stderr)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("first serve: exit %d", code)
	}
}

// TestServeRefusesAServedDirectory: a second serve of a directory that is
// being served exits 1 before it serves anything, naming the first one's
// pid (instance.LockServe), and the first goes on serving.
func TestServeRefusesAServedDirectory(t *testing.T) {
	t.Parallel()
	s := startServe(t)
	want := fmt.Sprintf("is already served by another process (pid %d): one party serve per state directory", s.cmd.Process.Pid)
	if stderr := failedServe(t, s.dir); !strings.Contains(stderr, want) {
		t.Fatalf("the refusal does not name the first serve:\n%s", stderr)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("first serve: exit %d\n%s", code, s.stderr.String())
	}
}
