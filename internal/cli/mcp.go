package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/partyd/party/bindings/mcp/bridge"
	"github.com/partyd/party/internal/instance"
)

func init() {
	register("mcp", "connect an MCP client that launches a process (stdio) to the running serve", runMCP)
}

const mcpUsage = `Usage: party mcp --dir DIR [--agent AGENT_ID] [--log-level LEVEL]

Connects an agent client that launches its MCP server as a process to the
running 'party serve' of DIR: a bridge between standard input and output
and serve's MCP endpoint (config.json's mcp_addr, path /mcp), which it
calls with the agent token in DIR/tokens/agent. Every message is
forwarded both ways, notifications included, so the client sees exactly
the tools serve offers, acting on the one record engine serve runs.
Standard output carries only the protocol; logs are JSON lines on
standard error, and never hold the token. Of DIR it reads config.json and
tokens/agent, nothing else. With --agent, it connects as one of the
instance's further agents ('party agent add'), with that agent's token
(DIR/tokens/agents/AGENT_ID): the client then sees and acts under that
agent's mandates only.

Start 'party serve --dir DIR' first: when nothing answers at mcp_addr,
party mcp says so on standard error and exits 1.

The process ends when the client closes standard input, or on SIGINT or
SIGTERM; it ends with status 1 when serve stops, restarts (its sessions
are gone: restart the client) or refuses the token.

Exit status: 0 after a clean end, 1 when serve cannot be reached or the
bridge fails, 2 on a usage error.
`

func runMCP(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party mcp", mcpUsage)
	agentID := c.String("agent", "", "connect as this agent of the instance (default its primary agent)")
	dir, log, code, ok := c.longRunning(args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := instance.LoadConfig(dir)
	if err != nil {
		log.Error("party mcp: reading the instance", "error", err)
		return 1
	}
	tokenFile := instance.AgentTokenFile
	if *agentID != "" {
		if _, known := cfg.KeyOf(*agentID); !known {
			log.Error("party mcp: not an active agent of this instance", "agent_id", *agentID)
			return 1
		}
		tokenFile = cfg.AgentTokenPath(*agentID)
	}
	token, err := instance.LoadToken(dir, tokenFile)
	if err != nil {
		log.Error("party mcp: reading the agent token", "error", err)
		return 1
	}
	addr := loopback(cfg.MCPAddr)
	err = bridge.Run(ctx, stdin, stdout, bridge.Options{Endpoint: "http://" + addr + "/mcp", Token: token, Logger: log})
	switch {
	case err == nil, ctx.Err() != nil && errors.Is(err, context.Canceled):
		log.Info("party mcp stopped")
		return 0
	case errors.Is(err, bridge.ErrNotRunning):
		log.Error(fmt.Sprintf("party serve is not running: nothing answers at %s (mcp_addr); start it with: party serve --dir %s", addr, dir),
			"mcp_addr", addr, "error", err)
	default:
		log.Error("party mcp failed", "error", err)
	}
	return 1
}
