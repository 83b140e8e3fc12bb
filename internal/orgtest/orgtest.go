// Package orgtest starts party instances for tests: a state directory on
// free loopback ports, its organisation runtime, and its peer listener
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

// FreeAddr returns a loopback address with a port that was free a moment
// ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Node is one test instance.
type Node struct {
	Dir string
	Org *org.Org
	Sum instance.Summary
	// Mux is the peer listener's handler (when serving); tests mount
	// more on it.
	Mux *http.ServeMux
}

// New initialises an instance for orgID under t.TempDir and opens it. When
// serveStatus is set, its peer listener serves mandate status over HTTPS.
func New(t testing.TB, orgID string, clock func() time.Time, serveStatus bool) *Node {
	t.Helper()
	dir := filepath.Join(t.TempDir(), orgID)
	sum, err := instance.Init(dir, instance.InitOptions{
		OrganizationID: orgID, MCPAddr: FreeAddr(t), PeerAddr: FreeAddr(t), AdminAddr: FreeAddr(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	o, err := org.Open(dir, org.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	n := &Node{Dir: dir, Org: o, Sum: sum}
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
	l, err := tls.Listen("tcp", n.Org.Config().PeerAddr, peering.ServerTLSConfig(cert))
	if err != nil {
		t.Fatal(err)
	}
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
