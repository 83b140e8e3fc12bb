package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/org"
)

func init() {
	register("mcp", "serve the agent's tools over stdio, for an MCP client that launches a process", runMCP)
}

const mcpUsage = `Usage: party mcp --dir DIR [--log-level LEVEL]

Serves the agent's MCP tools over standard input and output, for an agent
client that launches the server as a process. Standard output carries
only the protocol; logs are JSON lines on standard error.

The tools are the same as on 'party serve's MCP endpoint, over the same
record, and the process needs no token: whoever can start it can already
read the state directory. Run 'party serve' beside it: it serves the
mandate status endpoints the evaluator resolves (without them every act
is denied with A202-MANDATE-STATUS-UNRESOLVED) and receives the
counterparty's messages. A warning is logged when the peer listener does
not answer.

The process ends when the client closes standard input, or on SIGINT or
SIGTERM.

Exit status: 0 after a clean end, 1 when the instance cannot be opened or
the server fails, 2 on a usage error.
`

func runMCP(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party mcp", mcpUsage)
	dir, log, code, ok := c.longRunning(args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := org.Open(dir, org.Options{Logger: log})
	if err != nil {
		log.Error("party mcp: opening the instance", "error", err)
		return 1
	}
	defer o.Close()
	peerAddr := o.Config().PeerAddr
	if conn, err := net.DialTimeout("tcp", peerAddr, 2*time.Second); err != nil {
		log.Warn("the peer listener does not answer; start 'party serve' so mandate status resolves and counterparties can reach this instance",
			"peer_addr", peerAddr)
	} else {
		conn.Close()
	}
	tools, err := daemon.Tools(ctx, o, log, serveMounts)
	if err != nil {
		log.Error("party mcp: mounting tools", "error", err)
		return 1
	}
	server := mcp.NewServer(tools, o.Store, log)
	log.Info("party mcp serving on stdio", "organization_id", o.Config().OrganizationID, "tools", len(tools))
	// ServeStdio uses the process's own standard streams, which are the
	// ones Main was given whenever it runs as the party binary.
	if err := mcp.ServeStdio(ctx, server); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		log.Error("party mcp: server", "error", err)
		return 1
	}
	log.Info("party mcp stopped")
	return 0
}
