// Package orgtest starts party instances for tests: a state directory on
// loopback port-0 listeners, its organisation runtime, and its peer listener
// serving mandate status over HTTPS, as `party serve` would.
package orgtest

import (
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/status"
)

// Sockets are an instance's three listeners, bound on loopback port 0
// and held open from before `party init` writes their addresses until a
// daemon serves them (daemon.Listeners): no address is probed and
// released, so no parallel test can take it in between. The test's
// cleanup closes whatever is still open.
type Sockets struct{ MCP, Peer, Admin net.Listener }

// Listen binds three loopback listeners on port 0.
func Listen(t testing.TB) Sockets {
	t.Helper()
	var ls [3]net.Listener
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	return Sockets{MCP: ls[0], Peer: ls[1], Admin: ls[2]}
}

// Addrs returns the three addresses, for `party init`.
func (s Sockets) Addrs() (mcp, peer, admin string) {
	return s.MCP.Addr().String(), s.Peer.Addr().String(), s.Admin.Addr().String()
}

// Node is one test instance.
type Node struct {
	Dir string
	Org *org.Org
	Sum instance.Summary
	// Sockets are the node's listeners, for a daemon to serve; Peer is
	// nil when the node serves its own peer listener.
	Sockets Sockets
	// Mux is the peer listener's handler (when serving); tests mount
	// more on it.
	Mux *http.ServeMux
}

// New initialises an instance for orgID under t.TempDir, on listeners it
// holds (Node.Sockets), and opens it. When
// serveStatus is set, its peer listener serves mandate status over HTTPS.
func New(t testing.TB, orgID string, clock func() time.Time, serveStatus bool) *Node {
	t.Helper()
	dir := filepath.Join(t.TempDir(), orgID)
	socks := Listen(t)
	mcpAddr, peerAddr, adminAddr := socks.Addrs()
	sum, err := instance.Init(dir, instance.InitOptions{
		OrganizationID: orgID, MCPAddr: mcpAddr, PeerAddr: peerAddr, AdminAddr: adminAddr,
	})
	if err != nil {
		t.Fatal(err)
	}
	o, err := org.Open(dir, org.Options{Clock: clock, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	n := &Node{Dir: dir, Org: o, Sum: sum, Sockets: socks}
	if serveStatus {
		n.serveStatus(t)
	}
	return n
}

// Principal returns the principal's surface of the node: its runtime with
// the principal key loaded beside it, as `party mandate` and the admin
// listener have it. Node.Org itself holds no principal key.
func (n *Node) Principal(t testing.TB) *principal.Surface {
	t.Helper()
	p, err := principal.Open(n.Org)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *Node) serveStatus(t testing.TB) {
	cert, err := n.Org.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	h, err := status.NewHandler(n.Org.StatusStore(), n.Org.Clock, 0)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/mandates/", h)
	mux.Handle(peering.KeyRecordsPath, peering.KeyRecordsHandler(n.Org.Peers, peering.OwnKeyRecords(n.Org.Store, n.Org.Config().OrganizationID), nil))
	n.Mux = mux
	l := tls.NewListener(n.Sockets.Peer, peering.ServerTLSConfig(cert))
	n.Sockets.Peer = nil
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// Peer pins each node's peer file in the other and reloads both
// directories, as `party peer add` on both sides would.
func Peer(t testing.TB, a, b *Node) {
	t.Helper()
	for _, pair := range [][2]*Node{{a, b}, {b, a}} {
		data, err := os.ReadFile(filepath.Join(pair[1].Dir, instance.PeerFile))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := instance.AddPeer(pair[0].Dir, data); err != nil {
			t.Fatal(err)
		}
		if err := pair[0].Org.Peers.Reload(); err != nil {
			t.Fatal(err)
		}
	}
}
