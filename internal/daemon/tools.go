package daemon

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/org"
)

// Tools returns the agent tools a daemon over o would serve: the agent's
// surface and whatever each Mounter adds, without binding any listener.
// `party mcp` serves them over stdio beside (not instead of) a running
// `party serve`, so an agent client that launches a process sees exactly
// the tools the HTTP endpoint offers. Handlers the mounters register for
// the peer listener are dropped, since nothing listens here; background
// work they start is bound to ctx.
func Tools(ctx context.Context, o *org.Org, log *slog.Logger, mounts []Mounter) ([]mcp.Tool, error) {
	if log == nil {
		log = slog.Default()
	}
	d := &Daemon{Org: o, Agent: agent.New(o), Log: log, peerMux: http.NewServeMux()}
	d.mcpTools = append(mcp.AgentTools(d.Agent), mcp.VerifyTools(o.Store)...)
	for _, m := range mounts {
		if err := m(ctx, d); err != nil {
			return nil, err
		}
	}
	return d.mcpTools, nil
}
