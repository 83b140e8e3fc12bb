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
	"sync/atomic"
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
	sorted    []instance.PeerInfo // byOrg's values by organisation (Peers)
	byPin     map[string]string
	ambiguous map[string]bool
	stamp     time.Time
	// statted is when Peers last looked at the folder (unix nanoseconds).
	statted atomic.Int64
	now     func() time.Time // time.Now; tests move it
}

// peersRecheck is how often Peers looks at the folder: key resolution
// calls it for every signature, dozens of times an act, and a stat each
// time was a hundredth of a formation's CPU. A peer file changed on disk
// is seen by Peers within this time (as config.json is by org.Config), and
// at once by a lookup that misses (Peer, Authenticate).
const peersRecheck = time.Second

// OpenDirectory reads the peer files of the state directory stateDir.
func OpenDirectory(stateDir string, logger *slog.Logger) (*Directory, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Directory{stateDir: stateDir, logger: logger, now: time.Now}
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
	sorted := make([]instance.PeerInfo, 0, len(byOrg))
	for _, p := range byOrg {
		sorted = append(sorted, p)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].OrganizationID < sorted[j].OrganizationID })
	d.mu.Lock()
	d.byOrg, d.sorted, d.byPin, d.ambiguous, d.stamp = byOrg, sorted, byPin, ambiguous, stamp
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
// last, after re-reading the folder if it changed since it was last
// looked at, at most peersRecheck ago (a stat, not a parse). The slice is
// shared: callers read it and never change it.
func (d *Directory) Peers() []instance.PeerInfo {
	if now := d.now().UnixNano(); now-d.statted.Load() >= int64(peersRecheck) {
		d.statted.Store(now)
		d.reloadIfChanged()
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.sorted
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
