package peering

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/partyd/party/internal/instance"
)

// ErrUnknownPeer is wrapped by Directory.Peer when no peer file names the
// organisation.
var ErrUnknownPeer = errors.New("peering: no pinned peer file for this organisation")

// Directory is the set of counterparties pinned in a state directory's
// peers/ folder, indexed by organisation and by TLS certificate pin. It
// re-reads the folder when a lookup misses and the folder changed since
// it was last read, so `party peer add` takes effect without a restart.
// It is safe for concurrent use.
type Directory struct {
	stateDir string
	logger   *slog.Logger

	mu        sync.RWMutex
	byOrg     map[string]instance.PeerInfo
	byPin     map[string]string
	ambiguous map[string]bool
	stamp     time.Time
}

// OpenDirectory reads the peer files of the state directory stateDir.
func OpenDirectory(stateDir string, logger *slog.Logger) (*Directory, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Directory{stateDir: stateDir, logger: logger}
	if err := d.Reload(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Directory) peersDir() string { return filepath.Join(d.stateDir, instance.PeersDir) }

// Reload re-reads the peer files.
func (d *Directory) Reload() error {
	var stamp time.Time
	if st, err := os.Stat(d.peersDir()); err == nil {
		stamp = st.ModTime()
	}
	peers, err := instance.Peers(d.stateDir)
	if err != nil {
		return fmt.Errorf("peering: %w", err)
	}
	byOrg := make(map[string]instance.PeerInfo, len(peers))
	byPin := make(map[string]string, len(peers))
	ambiguous := map[string]bool{}
	for _, p := range peers {
		byOrg[p.OrganizationID] = p
		if other, dup := byPin[p.TLSCertificateSHA256]; dup {
			// Two organisations pinned to one certificate: a request
			// with it could be either, so it authenticates as neither.
			ambiguous[p.TLSCertificateSHA256] = true
			d.logger.Warn("two peer files pin the same TLS certificate; requests presenting it are refused",
				"organization_id", p.OrganizationID, "other_organization_id", other)
			continue
		}
		byPin[p.TLSCertificateSHA256] = p.OrganizationID
	}
	d.mu.Lock()
	d.byOrg, d.byPin, d.ambiguous, d.stamp = byOrg, byPin, ambiguous, stamp
	d.mu.Unlock()
	return nil
}

// reloadIfChanged re-reads the folder if its modification time moved.
func (d *Directory) reloadIfChanged() {
	st, err := os.Stat(d.peersDir())
	if err != nil {
		return
	}
	d.mu.RLock()
	same := st.ModTime().Equal(d.stamp)
	d.mu.RUnlock()
	if same {
		return
	}
	if err := d.Reload(); err != nil {
		d.logger.Error("re-reading peer files failed; keeping the previous set", "error", err)
	}
}

// Peer returns the pinned peer file of org.
func (d *Directory) Peer(org string) (instance.PeerInfo, error) {
	if p, ok := d.lookupOrg(org); ok {
		return p, nil
	}
	d.reloadIfChanged()
	if p, ok := d.lookupOrg(org); ok {
		return p, nil
	}
	return instance.PeerInfo{}, fmt.Errorf("%w: %s", ErrUnknownPeer, org)
}

func (d *Directory) lookupOrg(org string) (instance.PeerInfo, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, ok := d.byOrg[org]
	return p, ok
}

// Peers returns the pinned peers, sorted by organisation: the set read
// last, after re-reading the folder if it changed since (a stat, not a
// parse, on the common path: key resolution calls this on every signature).
func (d *Directory) Peers() []instance.PeerInfo {
	d.reloadIfChanged()
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]instance.PeerInfo, 0, len(d.byOrg))
	for _, p := range d.byOrg {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OrganizationID < out[j].OrganizationID })
	return out
}

// Authenticate maps the client certificate of a TLS connection to the
// pinned peer whose peer file names its SHA-256. It returns an error
// wrapping ErrUnauthenticated when there is no connection state, no
// certificate, an unpinned certificate, an ambiguous pin or a certificate
// outside its validity period.
func (d *Directory) Authenticate(cs *tls.ConnectionState) (instance.PeerInfo, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return instance.PeerInfo{}, fmt.Errorf("%w: none presented", ErrUnauthenticated)
	}
	leaf := cs.PeerCertificates[0]
	pin := instance.CertFingerprint(leaf.Raw)
	org, ok, ambiguous := d.lookupPin(pin)
	if !ok && !ambiguous {
		d.reloadIfChanged()
		org, ok, ambiguous = d.lookupPin(pin)
	}
	if ambiguous {
		return instance.PeerInfo{}, fmt.Errorf("%w: certificate %s is pinned by more than one peer file", ErrUnauthenticated, pin)
	}
	if !ok {
		return instance.PeerInfo{}, fmt.Errorf("%w: certificate %s is not pinned", ErrUnauthenticated, pin)
	}
	now := time.Now()
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return instance.PeerInfo{}, fmt.Errorf("%w: certificate of %s is outside its validity period", ErrUnauthenticated, org)
	}
	p, found := d.lookupOrg(org)
	if !found {
		return instance.PeerInfo{}, fmt.Errorf("%w: certificate %s is not pinned", ErrUnauthenticated, pin)
	}
	return p, nil
}

// AuthenticateRequest is Authenticate on the request's TLS state. A plain
// HTTP request has none and is refused.
func (d *Directory) AuthenticateRequest(r *http.Request) (instance.PeerInfo, error) {
	return d.Authenticate(r.TLS)
}

func (d *Directory) lookupPin(pin string) (org string, ok, ambiguous bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.ambiguous[pin] {
		return "", false, true
	}
	org, ok = d.byPin[pin]
	return org, ok, false
}

type peerKey struct{}

// WithPeer returns ctx carrying the authenticated peer organisation, for
// handlers below the authentication layer.
func WithPeer(ctx context.Context, org string) context.Context {
	return context.WithValue(ctx, peerKey{}, org)
}

// PeerFrom returns the authenticated peer organisation WithPeer stored.
func PeerFrom(ctx context.Context) (string, bool) {
	org, ok := ctx.Value(peerKey{}).(string)
	return org, ok && org != ""
}
