package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/store"
)

// MandatesPath is where an instance serves its trading mandates to the
// counterparties they name (GET MandatesPath + id, pinned client
// certificate required).
const MandatesPath = "/a202/mandates/"

// MandatesHandler serves this organisation's mandates to pinned peers: a
// mandate the peer's acts are checked against is disclosed to that peer
// (and its parents, so the chain resolves), and to no one else. A mandate
// whose scope names counterparties is served only to those; the instance
// mandate (key records) to every pinned peer.
func MandatesHandler(st *store.Store, dir *peering.Directory, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		peer, err := dir.AuthenticateRequest(r)
		if err != nil {
			http.Error(w, "a pinned client certificate is required", http.StatusForbidden)
			return
		}
		id := strings.TrimPrefix(r.URL.Path, MandatesPath)
		body, ok := servable(r.Context(), st, id, peer.OrganizationID, 0)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	})
}

func servable(ctx context.Context, st *store.Store, id, peer string, depth int) ([]byte, bool) {
	rec, err := st.GetMandate(ctx, id)
	if err != nil || rec.Origin != "local" || depth > 9 {
		return nil, false
	}
	m, err := canonical.DecodeObject(rec.Body)
	if err != nil {
		return nil, false
	}
	if instance.IsInstanceMandate(m) || namesPeer(m, peer) {
		return rec.Body, true
	}
	// A parent is served when one of its children is.
	all, err := st.Mandates(ctx, "local")
	if err != nil {
		return nil, false
	}
	for _, c := range all {
		cm, err := canonical.DecodeObject(c.Body)
		if err == nil && str(cm["parent_mandate_id"]) == id {
			if _, ok := servable(ctx, st, c.ID, peer, depth+1); ok {
				return rec.Body, true
			}
		}
	}
	return nil, false
}

func namesPeer(m map[string]any, peer string) bool {
	cps, ok := sub(m, "scope")["counterparty_organization_ids"].([]any)
	if !ok {
		return true // no counterparty axis: any peer it trades with
	}
	for _, c := range cps {
		if str(c) == peer {
			return true
		}
	}
	return false
}

// HTTPMandates fetches counterparties' mandates over the pinned clients.
type HTTPMandates struct{ Clients *peering.Clients }

// FetchMandate GETs org's mandate id from its MandatesPath.
func (h HTTPMandates) FetchMandate(ctx context.Context, org, id string) ([]byte, error) {
	hc, peer, err := h.Clients.For(org)
	if err != nil {
		return nil, err
	}
	u, err := url.JoinPath(peer.BaseURL(), MandatesPath, id)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("mandate fetch: " + resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

func str(v any) string { s, _ := v.(string); return s }

func sub(m map[string]any, k string) map[string]any {
	s, _ := m[k].(map[string]any)
	if s == nil {
		return map[string]any{}
	}
	return s
}
