package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

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
// mandate (key records) to every pinned peer (peering.MandateServedTo,
// which also decides who is served a mandate's revocation).
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
		body, ok := peering.MandateServedTo(r.Context(), st, id, peer.OrganizationID)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	})
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
