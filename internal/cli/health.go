package cli

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/instance"
)

func init() {
	register("health", "exit 0 if the instance is ready and its three listeners answer (for container health checks)", runHealth)
}

const healthUsage = `Usage: party health --dir DIR

Checks that the instance in DIR is serving and ready: the MCP listener
answers /healthz, the admin listener answers /readyz with 200 (the
database takes a write, every listener serves, the record's workers run;
otherwise it names what is not ready), and the peer listener completes a
TLS handshake with this instance's own certificate and serves the
AgentCard. A listener bound to all interfaces (0.0.0.0 or [::]) is
reached on loopback. It sends no token.

Exit status: 0 when all three answer, 1 otherwise, 2 on a usage error.
`

func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func runHealth(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party health", healthUsage)
	dir := c.dirFlag()
	pos, code, done := c.parseDir(args, dir, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		return c.usageError(stderr, "unexpected arguments %q", pos)
	}
	cfg, err := instance.LoadConfig(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "party health: %v\n", err)
		return 1
	}
	in, err := instance.Open(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "party health: %v\n", err)
		return 1
	}
	pool, err := in.CertificatePool()
	in.Close()
	if err != nil {
		fmt.Fprintf(stderr, "party health: %v\n", err)
		return 1
	}
	plain := &http.Client{Timeout: 3 * time.Second}
	peerAddr := loopback(cfg.PeerAddr)
	host, _, _ := net.SplitHostPort(peerAddr)
	tlsc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}}}
	checks := []struct {
		name string
		c    *http.Client
		url  string
		ok   func(int) bool
	}{
		{"mcp", plain, "http://" + loopback(cfg.MCPAddr) + "/healthz", func(s int) bool { return s == http.StatusOK }},
		{"admin", plain, "http://" + loopback(cfg.AdminAddr) + "/readyz", func(s int) bool { return s == http.StatusOK }},
		{"peer", tlsc, "https://" + peerAddr + instance.AgentCardPath, func(s int) bool { return s == http.StatusOK }},
	}
	failed := false
	for _, c := range checks {
		resp, err := c.c.Get(c.url)
		if err != nil {
			fmt.Fprintf(stdout, "%-6s down: %v\n", c.name, err)
			failed = true
			continue
		}
		var ready daemon.Readiness
		if resp.StatusCode == http.StatusServiceUnavailable {
			json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&ready)
		}
		resp.Body.Close()
		if !c.ok(resp.StatusCode) {
			fmt.Fprintf(stdout, "%-6s unexpected answer %s\n", c.name, resp.Status)
			for _, part := range slices.Sorted(maps.Keys(ready.Failing)) {
				fmt.Fprintf(stdout, "       not ready: %s: %s\n", part, ready.Failing[part])
			}
			failed = true
			continue
		}
		fmt.Fprintf(stdout, "%-6s ok\n", c.name)
	}
	if failed {
		return 1
	}
	return 0
}
