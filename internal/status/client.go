package status

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/partyd/party/internal/reason"
)

// Resolver resolves the current status of a mandate from its status
// endpoint. Client is the implementation; the evaluator in package
// authority depends only on this interface.
type Resolver interface {
	// Resolve returns a document about mandateID usable now, or an error.
	Resolve(ctx context.Context, mandateID, endpoint string) (Document, error)
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// RootCAs is the pinned certificate pool status endpoints must chain
	// to. Required: the system store is never consulted.
	RootCAs *x509.CertPool
	// Clock is the time freshness is judged by (nil means time.Now).
	Clock func() time.Time
	// Timeout bounds one fetch, connection included (0 means 5 s).
	Timeout time.Duration
	// Pins, when set, returns SHA-256 fingerprints (lowercase hex) of
	// certificates accepted as they are, in addition to RootCAs: a
	// counterparty's status endpoint is reached over its pinned
	// certificate (decisions.md 14), whose bytes a peer file does not
	// carry. It is called at every handshake, so peers pinned later count.
	Pins func() []string
}

// Client resolves status endpoints over HTTPS with a pinned certificate
// pool and a cache bounded by MaxAge (see the package documentation). It is
// safe for concurrent use.
type Client struct {
	http    *http.Client
	clock   func() time.Time
	timeout time.Duration

	mu    sync.Mutex
	cache map[cacheKey]cached
}

type cacheKey struct{ mandateID, endpoint string }

type cached struct {
	doc       Document
	fetchedAt time.Time
}

// maxCacheEntries triggers a sweep of dead entries; entries die within
// MaxAge, so the cache never holds more than a minute of lookups.
const maxCacheEntries = 4096

// NewClient returns a Client. It refuses a configuration without a pinned
// certificate pool.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.RootCAs == nil {
		return nil, errors.New("status: NewClient needs a pinned certificate pool (RootCAs)")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	transport := &http.Transport{
		// No proxy from the environment: the status channel is the
		// relying party's own, end to end.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
		TLSClientConfig:     tlsConfig(cfg),
		TLSHandshakeTimeout: timeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{
		http: &http.Client{
			Transport: transport,
			Timeout:   timeout,
			// A redirect could lead anywhere, including plain HTTP. The
			// endpoint the issuer signed into the mandate answers itself.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		clock:   clock,
		timeout: timeout,
		cache:   map[cacheKey]cached{},
	}, nil
}

// tlsConfig verifies the chain against RootCAs, or, when Pins is set,
// accepts a leaf whose fingerprint is pinned and otherwise verifies the
// chain itself (Go runs custom verification only with the default off).
func tlsConfig(cfg ClientConfig) *tls.Config {
	if cfg.Pins == nil {
		return &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
	}
	roots, pins := cfg.RootCAs, cfg.Pins
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("status: no server certificate")
			}
			leaf := cs.PeerCertificates[0]
			sum := sha256.Sum256(leaf.Raw)
			fp := hex.EncodeToString(sum[:])
			for _, p := range pins() {
				if p == fp {
					now := time.Now()
					if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
						return errors.New("status: pinned certificate is outside its validity period")
					}
					return nil
				}
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: cs.ServerName})
			return err
		},
	}
}

// CheckEndpoint refuses a status endpoint that is not an absolute https://
// URL with a host and without user information or fragment, with
// A202-MANDATE-STATUS-INSECURE.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return reason.Refusef(reason.MandateStatusInsecure, "status endpoint does not parse: %v", err)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return reason.Refusef(reason.MandateStatusInsecure, "status endpoint %q is not an https:// URL", endpoint)
	}
	return nil
}

// Resolve returns the status of mandateID from endpoint, from the cache
// when a cached document is still usable and was fetched less than MaxAge
// ago, else over the network. Every failure is a *reason.Refusal carrying
// A202-MANDATE-STATUS-UNRESOLVED (and A202-MANDATE-STATUS-INSECURE as well
// for a non-https endpoint).
func (c *Client) Resolve(ctx context.Context, mandateID, endpoint string) (Document, error) {
	if err := CheckEndpoint(endpoint); err != nil {
		return Document{}, reason.Refuse(err.Error(), reason.MandateStatusInsecure, reason.MandateStatusUnresolved)
	}
	key := cacheKey{mandateID, endpoint}
	now := c.clock()
	c.mu.Lock()
	if e, ok := c.cache[key]; ok {
		if fresh(e, now) {
			c.mu.Unlock()
			return e.doc, nil
		}
		delete(c.cache, key)
	}
	c.mu.Unlock()

	doc, err := c.fetch(ctx, mandateID, endpoint)
	if err != nil {
		return Document{}, reason.Refuse(err.Error(), reason.MandateStatusUnresolved)
	}
	// Judge the answer at the time it arrived, on the same clock the cache
	// uses, so a slow answer is not fresher than it is.
	fetchedAt := c.clock()
	if err := doc.Usable(fetchedAt); err != nil {
		return Document{}, reason.Refuse(err.Error(), reason.MandateStatusUnresolved)
	}
	c.mu.Lock()
	if len(c.cache) >= maxCacheEntries {
		for k, e := range c.cache {
			if !fresh(e, fetchedAt) {
				delete(c.cache, k)
			}
		}
	}
	c.cache[key] = cached{doc: doc, fetchedAt: fetchedAt}
	c.mu.Unlock()
	return doc, nil
}

// Uncached returns a resolver over c that never answers from the cache: it
// fetches the status at the moment of asking, for an irreversible act
// whose receiver must know the actor's authority now (a payment; the
// settlement handoff's live check), and refreshes the cache with what it
// learnt.
func (c *Client) Uncached() Resolver { return uncached{c} }

type uncached struct{ c *Client }

func (u uncached) Resolve(ctx context.Context, mandateID, endpoint string) (Document, error) {
	u.c.mu.Lock()
	delete(u.c.cache, cacheKey{mandateID, endpoint})
	u.c.mu.Unlock()
	return u.c.Resolve(ctx, mandateID, endpoint)
}

// fresh reports whether a cached entry may be served at now: the document
// is usable and was fetched less than MaxAge ago (and not, by a clock that
// went backwards, in the future).
func fresh(e cached, now time.Time) bool {
	age := now.Sub(e.fetchedAt)
	return age >= -MaxSkew && age < MaxAge && e.doc.Usable(now) == nil
}

func (c *Client) fetch(ctx context.Context, mandateID, endpoint string) (Document, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return Document{}, fmt.Errorf("status request for %s: %w", mandateID, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return Document{}, fmt.Errorf("status endpoint for %s unreachable: %w", mandateID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Document{}, fmt.Errorf("status endpoint for %s answered %s", mandateID, resp.Status)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Document{}, fmt.Errorf("status endpoint for %s answered with media type %q", mandateID, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentSize+1))
	if err != nil {
		return Document{}, fmt.Errorf("status endpoint for %s: %w", mandateID, err)
	}
	if len(body) > MaxDocumentSize {
		return Document{}, fmt.Errorf("status document for %s larger than %d bytes", mandateID, MaxDocumentSize)
	}
	doc, err := Parse(body)
	if err != nil {
		return Document{}, fmt.Errorf("status for %s: %w", mandateID, err)
	}
	if doc.MandateID != mandateID {
		return Document{}, fmt.Errorf("status endpoint for %s answered about %s", mandateID, doc.MandateID)
	}
	return doc, nil
}
