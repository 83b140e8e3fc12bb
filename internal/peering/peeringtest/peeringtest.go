// Package peeringtest builds real party instances for tests of the layers
// that talk between instances: a state directory made by instance.Init on
// a free loopback port, its TLS certificate, the principal-signed key
// records of both of its keys that init stored in its record, and helpers to pin two instances to
// each other and to serve a handler on the instance's own listener.
//
// Ports are picked by listening on 127.0.0.1:0 and kept open, so the
// address written into the state directory is the one the test serves on;
// Restart listens again on the same address after Stop.
package peeringtest

import (
	"crypto"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/peering"
)

// Node is one instance under test.
type Node struct {
	Dir       string
	Org       string
	Instance  *instance.Instance
	Cert      tls.Certificate
	Info      instance.PeerInfo // its own peer file, as a counterparty reads it
	PeerFile  []byte
	Addr      string // host:port of its peer listener
	Directory *peering.Directory
	// KeyRecords are its principal's and agent's key records, stored in
	// its record with origin "local".
	KeyRecords [][]byte

	mu  sync.Mutex
	ln  net.Listener
	srv *http.Server
}

// NewNode makes a state directory for org on a free loopback port.
func NewNode(t testing.TB, org string) *Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	dir := filepath.Join(t.TempDir(), org)
	if _, err := instance.Init(dir, instance.InitOptions{OrganizationID: org, PeerAddr: addr}); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	in, err := instance.Open(dir)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	cert, err := in.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := os.ReadFile(filepath.Join(dir, instance.PeerFile))
	if err != nil {
		t.Fatal(err)
	}
	info, err := instance.ParsePeerFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	d, err := peering.OpenDirectory(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Dir: dir, Org: org, Instance: in, Cert: cert, Info: info, PeerFile: pf, Addr: addr, Directory: d, ln: ln}
	n.KeyRecords = issueKeyRecords(t, n)
	t.Cleanup(func() {
		n.Stop()
		in.Close()
	})
	return n
}

func issueKeyRecords(t testing.TB, n *Node) [][]byte {
	t.Helper()
	// instance.Init issues the instance's key records itself, signed by
	// the principal under the instance mandate.
	held, err := n.Instance.Store.ObjectsOfType(t.Context(), "key_record")
	if err != nil || len(held) != 2 {
		t.Fatalf("instance.Init left %d key records (%v), want the principal's and the agent's", len(held), err)
	}
	return held
}

// PrincipalKey reads the node's principal key from its state directory, as
// the principal's own tooling would, for tests that issue further key
// records. The instance never holds it (package principal).
func (n *Node) PrincipalKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := keys.ReadPrivateFile(filepath.Join(n.Dir, filepath.FromSlash(instance.PrincipalKeyFile)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Pin adds other's peer file to n's peers/ folder, as `party peer add`
// does.
func (n *Node) Pin(t testing.TB, other *Node) {
	t.Helper()
	if _, err := instance.AddPeer(n.Dir, other.PeerFile); err != nil {
		t.Fatal(err)
	}
	if err := n.Directory.Reload(); err != nil {
		t.Fatal(err)
	}
}

// Pair returns two nodes pinned to each other.
func Pair(t testing.TB) (a, b *Node) {
	t.Helper()
	a = NewNode(t, "org_northwind")
	b = NewNode(t, "org_southgate")
	a.Pin(t, b)
	b.Pin(t, a)
	return a, b
}

// Serve serves h over TLS (peering.ServerTLSConfig) on n's listener until
// Stop or the end of the test.
func (n *Node) Serve(t testing.TB, h http.Handler) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		t.Fatal("peeringtest: already serving")
	}
	if n.ln == nil {
		ln, err := net.Listen("tcp", n.Addr)
		if err != nil {
			t.Fatalf("peeringtest: listening again on %s: %v", n.Addr, err)
		}
		n.ln = ln
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         peering.ServerTLSConfig(n.Cert),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(discard{}, "", 0),
	}
	ln := tls.NewListener(n.ln, srv.TLSConfig)
	n.srv = srv
	go func() {
		// Serve ends with ErrServerClosed, or with net.ErrClosed when Stop
		// closed the listener before Serve began; both are a Stop.
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("peeringtest: serve: %v", err)
		}
	}()
}

// Stop closes the server and its listener; Serve listens again on the
// same address.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Close()
		n.srv = nil
	}
	// Closed here as well as by srv.Close: the serving goroutine may not
	// have registered the listener yet, and the port must be free when
	// Stop returns.
	if n.ln != nil {
		n.ln.Close()
		n.ln = nil
	}
}

// URL returns https://Addr + path.
func (n *Node) URL(path string) string { return "https://" + n.Addr + path }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
