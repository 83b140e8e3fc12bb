package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/store"
)

// TestReadiness: /readyz answers 200 while the database takes a write and
// no part is held, 503 naming each part held (until it is released, and a
// stale release does not clear a newer hold) and the database once it
// fails; /healthz answers 200 throughout; every other path reaches the
// listener's own handler.
func TestReadiness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "party.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	r := newReadiness(st, func() time.Time { return at }, slog.New(slog.DiscardHandler))
	h := withOps(http.NotFoundHandler(), r, nil)
	get := func(path string) (int, Readiness) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var res Readiness
		if path == "/readyz" {
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
				t.Fatalf("%s: %v: %s", path, err, rec.Body)
			}
		}
		return rec.Code, res
	}
	ready := func(want map[string]string) {
		t.Helper()
		code, res := get("/readyz")
		wantCode, wantStatus := http.StatusOK, "ready"
		if len(want) > 0 {
			wantCode, wantStatus = http.StatusServiceUnavailable, "not_ready"
		}
		if code != wantCode || res.Status != wantStatus || len(res.Failing) != len(want) {
			t.Fatalf("/readyz: %d %+v, want %d failing %v", code, res, wantCode, want)
		}
		for part, why := range want {
			if res.Failing[part] != why {
				t.Fatalf("/readyz: %+v, want %v", res, want)
			}
		}
		if code, _ := get("/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz: %d", code)
		}
	}
	ready(nil)
	if v, err := st.Meta(ctx, "ready_probe_at"); err != nil || v != "2026-12-06T09:00:00Z" {
		t.Fatalf("the probe wrote %q (%v)", v, err)
	}
	release := r.hold("record", "starting")
	ready(map[string]string{"record": "starting"})
	release()
	ready(nil)
	stale := r.hold("outbox", "starting")
	r.hold("outbox", "the outbox worker stopped")
	stale()
	ready(map[string]string{"outbox": "the outbox worker stopped"})
	st.Close()
	ready(map[string]string{"outbox": "the outbox worker stopped", "store": "the database did not take a write"})
	if code, _ := get("/mcp"); code != http.StatusNotFound {
		t.Fatalf("another path: %d", code)
	}
}
