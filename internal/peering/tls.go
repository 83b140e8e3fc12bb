package peering

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/partyd/party/internal/instance"
)

// ErrUnauthenticated is wrapped by Authenticate when a request carries no
// client certificate, or one no peer file pins, or one outside its
// validity period.
var ErrUnauthenticated = errors.New("peering: no pinned client certificate")

// ServerTLSConfig returns the TLS configuration of the peer listener: the
// instance's own certificate, TLS 1.3 only, and a client certificate
// requested but neither required nor chain-verified (see the package
// documentation: the pin is checked per request by Authenticate).
func ServerTLSConfig(own tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{own},
		ClientAuth:   tls.RequestClientCert,
	}
}

// ClientTLSConfig returns the TLS configuration for calling peer: own is
// presented as the client certificate, and the server is accepted only if
// its leaf certificate's SHA-256 is the peer file's pin and the
// certificate is within its validity period.
func ClientTLSConfig(own tls.Certificate, peer instance.PeerInfo) *tls.Config {
	pin := peer.TLSCertificateSHA256
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{own},
		// Chain and host name verification are replaced, deliberately and
		// entirely, by the pin in VerifyConnection, which Go runs even
		// when InsecureSkipVerify is set: the peer's certificate is
		// self-signed, and the pin names the exact certificate the
		// organisation handed over, which no other certificate for the
		// same host name can satisfy.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return checkPin(cs.PeerCertificates, pin, time.Now())
		},
	}
}

// checkPin accepts exactly one certificate: the leaf whose SHA-256 is pin,
// within its validity period.
func checkPin(chain []*x509.Certificate, pin string, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("peering: peer presented no certificate")
	}
	leaf := chain[0]
	if got := instance.CertFingerprint(leaf.Raw); got != pin {
		return fmt.Errorf("peering: peer certificate %s is not the pinned %s", got, pin)
	}
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("peering: pinned certificate is outside its validity period (%s to %s)", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// maxIdlePerPeer is how many connections to one peer are kept open between
// requests. Each agent's act and the outbox worker hold one while they
// wait for the peer's answer; a connection beyond the idle limit is closed
// when its request ends and a new one dialled for the next, each a mutual
// TLS handshake (two signatures, two certificate checks and a key exchange
// on each side). With a limit of 4, eight agents acting at once spent
// about a fiftieth of the two instances' CPU on handshakes.
const maxIdlePerPeer = 32

// NewHTTPClient returns an HTTP client that talks to peer only: TLS pinned
// by ClientTLSConfig, https URLs only, no redirects, no proxy from the
// environment (a proxy could not see inside the pinned TLS anyway, and an
// environment variable should not reroute commercial traffic), and the
// given overall timeout per request (0 means none).
func NewHTTPClient(own tls.Certificate, peer instance.PeerInfo, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     ClientTLSConfig(own, peer),
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: maxIdlePerPeer,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{
		Transport: httpsOnly{tr},
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// httpsOnly refuses any request that is not https, so that a mistyped or
// hostile URL can never send a peer's traffic in the clear.
type httpsOnly struct{ base *http.Transport }

func (h httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("peering: %s is not an https URL; peers are reached over HTTPS only", r.URL.Redacted())
	}
	return h.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// underlying transport.
func (h httpsOnly) CloseIdleConnections() { h.base.CloseIdleConnections() }

// Clients hands out one pinned HTTP client per counterparty, made on first
// use from the peer file in a Directory. A re-pinned peer gets a new
// client: the cache is keyed by organisation and pin.
type Clients struct {
	own     tls.Certificate
	dir     *Directory
	timeout time.Duration

	mu    sync.Mutex
	cache map[string]*http.Client
}

// NewClients returns a Clients presenting own and using each client's
// overall request timeout (0 means none).
func NewClients(own tls.Certificate, dir *Directory, timeout time.Duration) *Clients {
	return &Clients{own: own, dir: dir, timeout: timeout, cache: map[string]*http.Client{}}
}

// For returns the pinned client for org and its peer file.
func (c *Clients) For(org string) (*http.Client, instance.PeerInfo, error) {
	peer, err := c.dir.Peer(org)
	if err != nil {
		return nil, instance.PeerInfo{}, err
	}
	key := org + "\x00" + peer.TLSCertificateSHA256
	c.mu.Lock()
	defer c.mu.Unlock()
	hc, ok := c.cache[key]
	if !ok {
		hc = NewHTTPClient(c.own, peer, c.timeout)
		c.cache[key] = hc
	}
	return hc, peer, nil
}

// Directory returns the directory the clients are made from.
func (c *Clients) Directory() *Directory { return c.dir }

// Certificate returns the certificate the clients present.
func (c *Clients) Certificate() tls.Certificate { return c.own }
