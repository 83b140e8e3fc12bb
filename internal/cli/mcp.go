package cli

import (
	"context"
	"errors"
	"fmt"
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
	dir := c.dirFlag()
	level := c.String("log-level", "", "debug, info, warn or error (default config.json's log_level)")
	pos, code, done := c.parse(args, stdout, stderr)
	if done {
		return code
	}
	switch {
	case len(pos) > 0:
		return c.usageError(stderr, "unexpected argument %q", pos[0])
	case *dir == "":
		return c.usageError(stderr, "--dir is required")
	}
	if *level != "" {
		if _, err := parseLevel(*level); err != nil {
			return c.usageError(stderr, "%v", err)
		}
	}
	log, err := jsonLogger(stderr, *dir, *level)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name(), err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := org.Open(*dir, org.Options{Logger: log})
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
