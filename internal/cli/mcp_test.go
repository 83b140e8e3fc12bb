package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/reason"
)

// serveInProcess runs the instance in dir as `party serve` does (the
// daemon with the record engine) until the test ends, and returns once
// its listeners are bound.
func serveInProcess(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	socks := takeSockets(t, dir) // the daemon closes them
	go func() {
		done <- daemon.Run(ctx, dir, daemon.Options{
			Logger:    slog.New(slog.DiscardHandler),
			Listeners: daemon.Listeners{MCP: socks.MCP, Peer: socks.Peer, Admin: socks.Admin},
			Mount:     []daemon.Mounter{daemon.Record(daemon.PeerOptions{})},
			Ready:     func(daemon.Addrs) { close(ready) },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not bind its listeners")
	}
}

// bridgeDir is a directory holding only what `party mcp` may read of a
// state directory: config.json and the agent token.
func bridgeDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bridge")
	for _, name := range []string{instance.ConfigFile, instance.AgentTokenFile} {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func listTools(t *testing.T, ctx context.Context, cs *sdk.ClientSession) []*sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// TestMCPBridge runs serve in process and `party mcp` as the bridge to it
// (cli.Main, over pipes, as an MCP client that launched it sees it): the
// client lists exactly the tools a direct client of serve's endpoint
// lists, and its calls act on serve's record — a verification resolves
// the mandate's live status from serve's status endpoint, and an approval
// request is what the principal then sees. The bridge runs on a directory
// holding only config.json and tokens/agent, so it reads nothing else:
// no database, no key. Standard output carries only the protocol (the
// client decodes every line of it), the log on standard error is JSON
// lines without the token, and closing the client's side ends the bridge
// with status 0.
func TestMCPBridge(t *testing.T) {
	t.Parallel()
	dir, _ := initInstance(t, "org_acme")
	mid := issueBuyer(t, dir, "org_acme")
	serveInProcess(t, dir)
	cfg, err := instance.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	token, err := instance.LoadToken(dir, instance.AgentTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	direct, err := sdk.NewClient(&sdk.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: "http://" + cfg.MCPAddr + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := listTools(t, ctx, direct)
	wantInstructions := direct.InitializeResult().Instructions
	direct.Close()

	toBridge, fromClient := io.Pipe()
	toClient, fromBridge := io.Pipe()
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- cli.Main([]string{"mcp", "--dir", bridgeDir(t, dir)}, toBridge, fromBridge, &stderr)
		fromBridge.Close()
	}()
	t.Cleanup(func() { fromClient.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bridged", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatalf("connect through party mcp: %v\n%s", err, stderr.String())
	}
	if got := cs.InitializeResult().Instructions; got != wantInstructions || got == "" {
		t.Fatalf("instructions through the bridge: %q", got)
	}
	got := listTools(t, ctx, cs)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("tools through the bridge:\n%s\nserve's:\n%s", gb, wb)
	}
	var names []string
	for _, tool := range got {
		names = append(names, tool.Name)
	}
	for _, name := range []string{"whoami", "verify_mandate", "request_approval", "accept_offer", "get_transaction_record"} {
		if !slices.Contains(names, name) {
			t.Errorf("tool %s missing from %v", name, names)
		}
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("whoami: %+v %v", res, err)
	}
	var who struct {
		OrganizationID string `json:"organization_id"`
		Mandates       []struct {
			MandateID string `json:"mandate_id"`
		} `json:"mandates"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &who); err != nil || who.OrganizationID != "org_acme" || len(who.Mandates) != 1 || who.Mandates[0].MandateID != mid {
		t.Fatalf("whoami: %s", b)
	}
	// serve's status endpoint answers, so the act is judged, not denied
	// for want of a status.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "verify_mandate", Arguments: map[string]any{"mandate_id": mid, "proposed_action": acceptAct("1200.00")}})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Decision    string        `json:"decision"`
		ReasonCodes []reason.Code `json:"reason_codes"`
	}
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &v); err != nil || v.Decision != "allow" || slices.Contains(v.ReasonCodes, reason.MandateStatusUnresolved) {
		t.Fatalf("verify_mandate through the bridge: %s", b)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "request_approval", Arguments: map[string]any{"mandate_id": mid, "proposed_action": acceptAct("3200.00")}})
	if err != nil || res.IsError {
		t.Fatalf("request_approval: %+v %v", res, err)
	}
	var asked struct {
		ID string `json:"approval_request_id"`
	}
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &asked); err != nil || asked.ID == "" {
		t.Fatalf("request_approval: %s", b)
	}
	if list := mustParty(t, "approvals", "--dir", dir, "--json"); !strings.Contains(list, asked.ID) {
		t.Fatalf("the principal does not see %s:\n%s", asked.ID, list)
	}

	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("party mcp: exit %d\n%s", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("party mcp did not end when the client closed its side")
	}
	logs := stderr.String()
	if strings.Contains(logs, token) {
		t.Fatal("the agent token is in the log")
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not JSON: %s", line)
		}
	}
}

// TestMCPServeNotRunning runs the party binary as a client would launch
// it, with no serve for the directory: it says on standard error, in a
// JSON log line, that serve is not running at mcp_addr and how to start
// it, writes nothing on standard output, and exits 1 at once rather than
// waiting for the client.
func TestMCPServeNotRunning(t *testing.T) {
	t.Parallel()
	dir, _ := initInstance(t, "org_acme")
	socks := takeSockets(t, dir) // nothing listens: the address refuses
	socks.MCP.Close()
	cfg, err := instance.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := instance.LoadToken(dir, instance.AgentTokenFile)
	cmd := exec.Command(partyBinary(t), "mcp", "--dir", dir)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	in, err := cmd.StdinPipe() // held open: the client is still there
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("party mcp kept running with no serve\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if stdout.String() != "" {
		t.Fatalf("stdout is the protocol's, but holds %q", stdout.String())
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec struct {
			Level, Msg string
			MCPAddr    string `json:"mcp_addr"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if rec.Level == "ERROR" && rec.MCPAddr == cfg.MCPAddr &&
			strings.Contains(rec.Msg, "party serve is not running") && strings.Contains(rec.Msg, cfg.MCPAddr) &&
			strings.Contains(rec.Msg, "party serve --dir "+dir) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no error naming %s and 'party serve --dir %s':\n%s", cfg.MCPAddr, dir, stderr.String())
	}
	if strings.Contains(stderr.String(), token) {
		t.Fatal("the agent token is in the log")
	}
}
