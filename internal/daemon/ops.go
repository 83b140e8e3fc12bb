package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/store"
)

// The operator's endpoints (docs/deploy.md, "Health and metrics"):
//
//	GET /healthz   MCP and admin listeners, no token: the process serves HTTP
//	GET /readyz    MCP and admin listeners, no token: ready to take acts
//	GET /metrics   admin listener, the metrics token: Prometheus metrics
//
// Health and readiness say nothing a local process could not learn by
// connecting, so they need no token: a container's probe has none. The
// metrics tell business volume (acts, approvals, counterparties), so
// they are behind a token of their own, which opens nothing else: a
// scraper is never handed the admin token, which approves payments.

// MetricsTokenFile is the token a scraper presents at /metrics, in the
// state directory; serve makes it when it is missing.
const MetricsTokenFile = "tokens/metrics"

// readyTimeout bounds how long /readyz waits for the database to take its
// write: a probe answers within a container's probe timeout.
const readyTimeout = 2 * time.Second

// metricsToken reads the metrics token, making it first if needed.
func metricsToken(dir string, log *slog.Logger) (string, error) {
	tok, err := instance.LoadToken(dir, MetricsTokenFile)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := instance.NewToken(dir, MetricsTokenFile); err != nil {
		return "", fmt.Errorf("daemon: making the metrics token: %w", err)
	}
	log.Info("made the metrics token for /metrics", "file", filepath.Join(dir, MetricsTokenFile))
	return instance.LoadToken(dir, MetricsTokenFile)
}

// readiness is what /readyz reports: the parts of the daemon not ready
// (the listeners before they serve, the record's workers before they
// start, a worker that stopped, a stop under way) and whether the
// database takes a write at the moment of asking.
type readiness struct {
	st    *store.Store
	clock func() time.Time
	log   *slog.Logger

	mu    sync.Mutex
	parts map[string]*notReady
	probe *storeProbe // the database probe in flight, if any
}

type notReady struct{ why string }

// storeProbe is one write to the database; the /readyz requests that come
// while it runs wait for it instead of starting more.
type storeProbe struct {
	done chan struct{}
	err  error
}

func newReadiness(st *store.Store, clock func() time.Time, log *slog.Logger) *readiness {
	return &readiness{st: st, clock: clock, log: log, parts: map[string]*notReady{}}
}

// hold marks part not ready, for why, until the returned function is
// called (never, for a part that failed for good).
func (r *readiness) hold(part, why string) (ready func()) {
	n := &notReady{why}
	r.mu.Lock()
	r.parts[part] = n
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.parts[part] == n {
			delete(r.parts, part)
		}
		r.mu.Unlock()
	}
}

// NotReady marks a part of the daemon not ready (for why) until the
// returned function is called: a Mounter's background work before it
// starts, or for good once it stopped. /readyz answers 503 meanwhile.
func (d *Daemon) NotReady(part, why string) (ready func()) { return d.ready.hold(part, why) }

// failing returns the parts not ready now, with why.
func (r *readiness) failing(ctx context.Context) map[string]string {
	out := map[string]string{}
	r.mu.Lock()
	for part, n := range r.parts {
		out[part] = n.why
	}
	r.mu.Unlock()
	if err := r.probeStore(ctx); err != nil {
		// The error may name paths: logged, not told to an unauthenticated
		// caller.
		r.log.Warn("readiness: the database did not take a write", "error", err)
		out["store"] = "the database did not take a write"
	}
	return out
}

// probeStore writes to the database (store.ReadyProbe), sharing a probe
// already in flight, and waits at most readyTimeout. The write itself is
// not cut short (the store finishes what it began), so a stuck database
// holds one probe, not one per request.
func (r *readiness) probeStore(ctx context.Context) error {
	r.mu.Lock()
	p := r.probe
	if p == nil {
		p = &storeProbe{done: make(chan struct{})}
		r.probe = p
		go func() {
			p.err = r.st.ReadyProbe(context.WithoutCancel(ctx), r.clock())
			r.mu.Lock()
			r.probe = nil
			r.mu.Unlock()
			close(p.done)
		}()
	}
	r.mu.Unlock()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		return fmt.Errorf("no write within %s", readyTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Readiness is /readyz's answer.
type Readiness struct {
	// Status is "ready" (200) or "not_ready" (503).
	Status string `json:"status"`
	// Failing names each part not ready and why.
	Failing map[string]string `json:"failing,omitempty"`
}

func (r *readiness) serve(w http.ResponseWriter, req *http.Request) {
	res, code := Readiness{Status: "ready"}, http.StatusOK
	if f := r.failing(req.Context()); len(f) > 0 {
		res, code = Readiness{Status: "not_ready", Failing: f}, http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(res)
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok\n"))
}

// requireMetricsToken admits requests bearing the metrics token. Another
// of the instance's tokens gets 403, saying which token /metrics takes;
// anything else 401.
func requireMetricsToken(next http.Handler, token string, others []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			tok = ""
		}
		if tok != "" && instance.TokenEqual(tok, token) {
			next.ServeHTTP(w, r)
			return
		}
		for _, o := range others {
			if tok != "" && instance.TokenEqual(tok, o) {
				http.Error(w, "this token does not open /metrics: a scraper presents the metrics token ("+MetricsTokenFile+")", http.StatusForbidden)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="party-metrics"`)
		http.Error(w, "the metrics token ("+MetricsTokenFile+") is required", http.StatusUnauthorized)
	})
}

// withOps serves the operator's endpoints beside next: health and
// readiness, and the metrics when metrics is not nil.
func withOps(next http.Handler, ready *readiness, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", ready.serve)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.Handle("/", next)
	return mux
}
