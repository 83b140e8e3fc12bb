// Package daemon runs a party instance: it opens the organisation's
// runtime and serves its three listeners until its context ends.
//
//   - The MCP listener (config mcp_addr, loopback, plain HTTP): the agent's
//     tools at /mcp behind the agent token, and the RFC 9728 metadata.
//   - The peer listener (config peer_addr, HTTPS with the instance's
//     certificate, client certificates requested and pinned per peer): the
//     mandate status endpoints /v1/mandates/{id}/status (public), the key
//     records and the carriers counterparties use.
//   - The admin listener (config admin_addr, loopback, plain HTTP): the
//     principal's approvals page behind the admin token.
//
// Roles. The agent's listener and the peer listener are served from the
// organisation's runtime (*org.Org) and what the Mounters build on it —
// the Daemon value, the agent's surface, the record engine — none of which
// holds the principal's key. The admin listener alone is served from a
// principal.Surface, which Run builds from the runtime and the principal
// key it loads separately (principal.Open); that value is handed to the
// admin handler and to nothing else, so no agent tool and no part of the
// record engine can reach it (package principal, "Roles in the types").
//
// Shutdown is graceful: when the context ends, listeners stop accepting,
// requests in flight finish (for at most ShutdownGrace), and the record is
// closed. Nothing is lost by a hard stop either: every act is written in
// one database transaction, and deliveries wait in the outbox.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/bindings/peer"
	"github.com/partyd/party/internal/admin"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/record"
)

// ShutdownGrace bounds how long requests in flight may run after a stop.
const ShutdownGrace = 10 * time.Second

// Options adjust Run.
type Options struct {
	Logger *slog.Logger
	// Ready, if set, is called once every listener is bound.
	Ready func(Addrs)
	// Mount adds the record engine, the carriers and their tools.
	Mount []Mounter
}

// Addrs are the bound listener addresses.
type Addrs struct{ MCP, Peer, Admin string }

// Daemon is a running instance's parts, for the peer-facing handlers that
// other packages mount (see Mount). It is the agent's side of the
// instance: it holds no principal key and no principal surface.
type Daemon struct {
	Org   *org.Org
	Agent *agent.Surface
	Log   *slog.Logger
	// Engine is the record engine, once the Record mounter ran.
	Engine *record.Engine
	// Receiver receives counterparties' messages on the peer listener's
	// carriers (the record engine), once the Record mounter ran.
	Receiver delivery.InboxReceiver

	mcpTools []mcp.Tool
}

// Mounter adds handlers and tools to a daemon before it serves, and may
// start background work bound to the daemon's context (Daemon.Go).
type Mounter func(ctx context.Context, d *Daemon) error

// AddTools adds agent tools to the MCP server.
func (d *Daemon) AddTools(t ...mcp.Tool) { d.mcpTools = append(d.mcpTools, t...) }

// Run serves the instance in dir until ctx ends.
func Run(ctx context.Context, dir string, opt Options) error {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	o, err := org.Open(dir, org.Options{Logger: log})
	if err != nil {
		return err
	}
	defer o.Close()
	cfg := o.Config()
	// The principal's surface, for the admin listener only: kept out of d.
	principalSurface, err := principal.Open(o)
	if err != nil {
		return err
	}
	adminTok, err := instance.LoadToken(dir, instance.AdminTokenFile)
	if err != nil {
		return err
	}
	cert, err := o.TLSCertificate()
	if err != nil {
		return err
	}
	d := &Daemon{Org: o, Agent: agent.New(o), Log: log}
	d.mcpTools = mcp.VerifyTools(o.Store)
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	for _, m := range opt.Mount {
		if err := m(bg, d); err != nil {
			return err
		}
	}
	// Every route a counterparty reaches, in the one binding that owns them.
	peerHandler, err := peer.Handler(peer.Config{Org: o, Receiver: d.Receiver, Logger: log})
	if err != nil {
		return err
	}

	mcpLn, err := net.Listen("tcp", cfg.MCPAddr)
	if err != nil {
		return fmt.Errorf("daemon: MCP listener: %w", err)
	}
	peerLn, err := tls.Listen("tcp", cfg.PeerAddr, peering.ServerTLSConfig(cert))
	if err != nil {
		mcpLn.Close()
		return fmt.Errorf("daemon: peer listener: %w", err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		mcpLn.Close()
		peerLn.Close()
		return fmt.Errorf("daemon: admin listener: %w", err)
	}
	mcpBase := "http://" + mcpLn.Addr().String()
	// One MCP server per agent, behind its own token: each agent sees and
	// acts only under its own mandates.
	agentServers := map[string]*sdk.Server{}
	var agentToks []string
	for _, id := range cfg.AgentIDs() {
		tok, err := instance.LoadToken(dir, cfg.AgentTokenPath(id))
		if err != nil {
			mcpLn.Close()
			peerLn.Close()
			adminLn.Close()
			return err
		}
		tools := append(mcp.AgentTools(agent.NewFor(o, id)), d.mcpTools...)
		agentServers[tok] = mcp.NewAgentServer(id, tools, o.Store, log)
		agentToks = append(agentToks, tok)
	}
	servers := []*http.Server{
		{Handler: mcp.AgentsHandler(agentServers, adminTok), ReadHeaderTimeout: 10 * time.Second},
		{Handler: peerHandler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10},
		{Handler: admin.Handler(principalSurface, adminTok, agentToks, log), ReadHeaderTimeout: 10 * time.Second},
	}
	lns := []net.Listener{mcpLn, peerLn, adminLn}
	addrs := Addrs{MCP: mcpLn.Addr().String(), Peer: peerLn.Addr().String(), Admin: adminLn.Addr().String()}
	log.Info("party serving", "organization_id", cfg.OrganizationID, "mcp", mcpBase+"/mcp",
		"peer", "https://"+addrs.Peer, "admin", "http://"+addrs.Admin+"/")

	errc := make(chan error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Serve(lns[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	if opt.Ready != nil {
		opt.Ready(addrs)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("party stopping")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	for _, s := range servers {
		s.Shutdown(sctx)
	}
	wg.Wait()
	return runErr
}
