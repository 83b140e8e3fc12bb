// Package daemon runs a party instance: it opens the organisation's
// runtime and serves its three listeners until its context ends.
//
//   - The MCP listener (config mcp_addr, loopback, plain HTTP): the agent's
//     tools at /mcp behind the agent token, the record's resources with
//     their update notifications, and the RFC 9728 metadata.
//   - The peer listener (config peer_addr, HTTPS with the instance's
//     certificate, client certificates requested and pinned per peer): the
//     mandate status endpoints /v1/mandates/{id}/status (public), the key
//     records and the carriers counterparties use.
//   - The admin listener (config admin_addr, loopback, plain HTTP): the
//     principal's approvals page behind the admin token, and the
//     Prometheus metrics at /metrics behind the metrics token.
//
// The MCP and admin listeners both answer /healthz and /readyz without a
// token, for a container's or a supervisor's probe (ops.go).
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
	"github.com/partyd/party/internal/metrics"
	"github.com/partyd/party/internal/notify"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/schema"
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
	// Listeners, where set, are served instead of binding config's
	// addresses (Activated; tests' port-0 listeners).
	Listeners Listeners
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
	// Metrics are the instance's counters and gauges, served at /metrics.
	Metrics *metrics.Metrics

	ready *readiness

	mcpTools []mcp.Tool
}

// Mounter adds handlers and tools to a daemon before it serves, and may
// start background work bound to the daemon's context (Daemon.Go).
type Mounter func(ctx context.Context, d *Daemon) error

// AddTools adds agent tools to the MCP server.
func (d *Daemon) AddTools(t ...mcp.Tool) { d.mcpTools = append(d.mcpTools, t...) }

// bind returns the three listeners: those given, and the rest bound from
// their config addresses. On an error it closes them all.
func bind(mcpAddr, peerAddr, adminAddr string, given Listeners) (Listeners, error) {
	l := given
	for _, x := range []struct {
		slot       *net.Listener
		addr, name string
	}{{&l.MCP, mcpAddr, "MCP"}, {&l.Peer, peerAddr, "peer"}, {&l.Admin, adminAddr, "admin"}} {
		if *x.slot != nil {
			continue
		}
		ln, err := net.Listen("tcp", x.addr)
		if err != nil {
			l.closeAll()
			return Listeners{}, fmt.Errorf("daemon: %s listener: %w", x.name, err)
		}
		*x.slot = ln
	}
	return l, nil
}

// Run serves the instance in dir until ctx ends.
func Run(ctx context.Context, dir string, opt Options) error {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	// Given listeners are closed on any return before bind takes them.
	given := opt.Listeners
	defer func() { given.closeAll() }()
	o, err := org.Open(dir, org.Options{Logger: log})
	if err != nil {
		return err
	}
	defer o.Close()
	// One serve, so one record engine, per state directory.
	unlock, err := instance.LockServe(dir)
	if err != nil {
		return err
	}
	defer unlock()
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
	metricsTok, err := metricsToken(dir, log)
	if err != nil {
		return err
	}
	d := &Daemon{Org: o, Agent: agent.New(o), Log: log, ready: newReadiness(o.Store, o.Clock, log),
		Metrics: metrics.New(metrics.Options{Store: o.Store, Clock: o.Clock, Peers: peerIDs(o), Logger: log})}
	// Until every listener serves.
	listening := d.NotReady("listeners", "starting")
	d.mcpTools = mcp.VerifyTools(o.Store)
	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	for _, m := range opt.Mount {
		if err := m(bg, d); err != nil {
			return err
		}
	}
	// The peers' key and revocation records, fetched when no message
	// brings them: a revocation made while either side was down arrives
	// once both are up (docs/record-protocol.md, "Mandate revocations
	// travel").
	go o.Trusted.KeepCurrent(bg, o.Peers, peering.KeyRefresh)
	// Every route a counterparty reaches, in the one binding that owns them.
	peerHandler, err := peer.Handler(peer.Config{Org: o, Receiver: d.Receiver, Logger: log})
	if err != nil {
		return err
	}

	lns, err := bind(cfg.MCPAddr, cfg.PeerAddr, cfg.AdminAddr, given)
	given = Listeners{} // bind owns them now
	if err != nil {
		return err
	}
	mcpLn, adminLn := lns.MCP, lns.Admin
	peerLn := tls.NewListener(lns.Peer, peering.ServerTLSConfig(cert))
	mcpBase := "http://" + mcpLn.Addr().String()
	// The principal's webhook, when configured: approval requests, final
	// states and the engine's alerts, delivered best effort beside the
	// acts (package notify).
	hook, err := notify.Open(dir, cfg, notify.Options{Logger: log})
	if err != nil {
		lns.closeAll()
		return err
	}
	if hook != nil {
		d.Agent.OnApprovalRequest(hook.ApprovalRequested)
		if d.Engine != nil {
			cancel := d.Engine.Subscribe(hook.Changed)
			defer cancel()
			cancelAlerts := d.Engine.SubscribeAlerts(hook.Alerted)
			defer cancelAlerts()
		}
		go hook.Run(bg)
	}
	var mcpOpts []mcp.Option
	if d.Engine != nil {
		// Each transaction and the inbox as resources, with notifications.
		mcpOpts = append(mcpOpts, mcp.WithResources(bg, d.Engine))
	}
	// One MCP server per agent, behind its own token: each agent sees and
	// acts only under its own mandates.
	agentServers := map[string]*sdk.Server{}
	var agentToks []string
	for _, id := range cfg.AgentIDs() {
		tok, err := instance.LoadToken(dir, cfg.AgentTokenPath(id))
		if err != nil {
			lns.closeAll()
			return err
		}
		a := agent.NewFor(o, id)
		tools := append(mcp.AgentTools(a), d.mcpTools...)
		// Its approval requests as resources, with notifications.
		opts := append(append([]mcp.Option{}, mcpOpts...), mcp.WithApprovals(bg, a))
		agentServers[tok] = mcp.NewAgentServer(id, tools, o.Store, log, opts...)
		agentToks = append(agentToks, tok)
	}
	var adminOpts []admin.Option
	if d.Engine != nil {
		// The transaction pages read the record through the engine.
		adminOpts = append(adminOpts, admin.WithRecord(d.Engine))
	}
	metricsHandler := requireMetricsToken(d.Metrics.Handler(), metricsTok, append([]string{adminTok}, agentToks...))
	servers := []*http.Server{
		{Handler: withOps(mcp.AgentsHandler(agentServers, adminTok), d.ready, nil), ReadHeaderTimeout: 10 * time.Second},
		{Handler: peerHandler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10},
		{Handler: withOps(admin.Handler(principalSurface, adminTok, agentToks, log, adminOpts...), d.ready, metricsHandler), ReadHeaderTimeout: 10 * time.Second},
	}
	serving := []net.Listener{mcpLn, peerLn, adminLn}
	addrs := Addrs{MCP: mcpLn.Addr().String(), Peer: peerLn.Addr().String(), Admin: adminLn.Addr().String()}
	log.Info("party serving", "organization_id", cfg.OrganizationID, "mcp", mcpBase+"/mcp",
		"peer", "https://"+addrs.Peer, "admin", "http://"+addrs.Admin+"/",
		"schema_set_sha256", schema.Identity().SHA256) // the set it enforces (party version)

	errc := make(chan error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Serve(serving[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	listening()
	if opt.Ready != nil {
		opt.Ready(addrs)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	d.NotReady("serve", "stopping")
	log.Info("party stopping")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	for _, s := range servers {
		s.Shutdown(sctx)
	}
	wg.Wait()
	return runErr
}

// peerIDs lists the pinned counterparties, for the metrics' outbox series.
func peerIDs(o *org.Org) func() []string {
	return func() []string {
		var ids []string
		for _, p := range o.Peers.Peers() {
			ids = append(ids, p.OrganizationID)
		}
		return ids
	}
}
