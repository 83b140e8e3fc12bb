package cli

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/partyd/party/internal/instance"
)

func init() {
	register("health", "exit 0 if the instance's three listeners answer (for container health checks)", runHealth)
}

const healthUsage = `Usage: party health --dir DIR

Checks that the instance in DIR is serving: the MCP listener answers its
protected-resource metadata, the admin listener answers (asking for its
token), and the peer listener completes a TLS handshake with this
instance's own certificate and serves the AgentCard. A listener bound to
all interfaces (0.0.0.0 or [::]) is reached on loopback. It sends no token.

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
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthUsage) }
	dir := fs.String("dir", "", "state directory")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() != 0 {
		fs.Usage()
		return 2
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
		{"mcp", plain, "http://" + loopback(cfg.MCPAddr) + "/.well-known/oauth-protected-resource", func(s int) bool { return s == http.StatusOK }},
		{"admin", plain, "http://" + loopback(cfg.AdminAddr) + "/api/approvals", func(s int) bool { return s == http.StatusUnauthorized }},
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
		resp.Body.Close()
		if !c.ok(resp.StatusCode) {
			fmt.Fprintf(stdout, "%-6s unexpected answer %s\n", c.name, resp.Status)
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
