// Package admin is the principal's surface over HTTP, on the admin
// listener: a small approvals page for a person, and the same decisions as
// JSON for scripts. Every request needs the admin token, as
// "Authorization: Bearer <token>" or, for the page, the cookie the sign-in
// form sets; the agent's token is refused with 403.
package admin

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Handler returns the admin surface of o.
func Handler(o *org.Org, adminToken, agentToken string, log *slog.Logger) http.Handler {
	p := principal.New(o)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/approvals", func(w http.ResponseWriter, r *http.Request) {
		list, err := p.Approvals(r.Context(), r.URL.Query().Get("all") == "")
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	mux.HandleFunc("POST /api/approvals/{id}/{decision}", func(w http.ResponseWriter, r *http.Request) {
		d := r.PathValue("decision")
		if d != "approve" && d != "reject" {
			http.NotFound(w, r)
			return
		}
		obj, err := p.Decide(r.Context(), r.PathValue("id"), d == "approve", nil)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"approval_id": obj["id"], "decision": d})
	})
	return requireAdmin(adminToken, agentToken, mux)
}

func requireAdmin(want, agent string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := ""
		if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
			tok = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
		}
		switch {
		case tok != "" && instance.TokenEqual(tok, want):
			next.ServeHTTP(w, r)
		case tok != "" && instance.TokenEqual(tok, agent):
			http.Error(w, "the agent token is not valid on the principal's surface", http.StatusForbidden)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="party-admin"`)
			http.Error(w, "the admin token is required", http.StatusUnauthorized)
		}
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	var r *reason.Refusal
	switch {
	case errors.As(err, &r):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"outcome": "refused", "reason_codes": r.Codes, "detail": r.Detail})
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]any{"outcome": "error", "detail": err.Error()})
	case errors.Is(err, principal.ErrDecided):
		writeJSON(w, http.StatusConflict, map[string]any{"outcome": "error", "detail": err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]any{"outcome": "error", "detail": err.Error()})
	}
}
