package cli_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/reason"
)

// TestMCPStdio launches `party mcp` as an MCP client would and uses it:
// the agent's tools and nothing of the principal's, whoami over the same
// record the command line wrote, and a clean exit when the client closes
// standard input. With no `party serve` beside it the mandate's status
// cannot be resolved, and the act is denied rather than allowed.
func TestMCPStdio(t *testing.T) {
	dir, _ := initInstance(t, "org_acme")
	mid := issueBuyer(t, dir, "org_acme")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(partyBinary(t), "mcp", "--dir", dir)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"whoami", "verify_mandate", "request_approval", "approval_status"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s missing from %v", want, names)
		}
	}
	// Nothing on the agent's surface acts on mandates or decides an
	// approval: those are the principal's (decisions.md 9).
	for _, name := range names {
		if strings.Contains(name, "mandate") && name != "verify_mandate" ||
			strings.Contains(name, "approv") && name != "request_approval" && name != "approval_status" ||
			strings.HasPrefix(name, "revoke") || strings.HasPrefix(name, "suspend") || strings.HasPrefix(name, "reinstate") {
			t.Errorf("the agent's tools include %s, a principal's act", name)
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
			Status    string `json:"status"`
		} `json:"mandates"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &who); err != nil || who.OrganizationID != "org_acme" || len(who.Mandates) != 1 || who.Mandates[0].MandateID != mid {
		t.Fatalf("whoami: %s", b)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "verify_mandate", Arguments: map[string]any{
		"mandate_id": mid, "proposed_action": acceptAct("1200.00"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Decision    string        `json:"decision"`
		ReasonCodes []reason.Code `json:"reason_codes"`
	}
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &v); err != nil || v.Decision != "deny" || !slices.Contains(v.ReasonCodes, reason.MandateStatusUnresolved) {
		t.Fatalf("verify without a status endpoint: %s", b)
	}

	if err := cs.Close(); err != nil {
		t.Fatalf("party mcp did not exit cleanly: %v\n%s", err, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d\n%s", code, stderr.String())
	}
	logs := stderr.String()
	if !strings.Contains(logs, "the peer listener does not answer") {
		t.Errorf("no warning that serve is not running:\n%s", logs)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not JSON: %s", line)
		}
	}
}
