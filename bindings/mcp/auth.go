package mcp

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/partyd/party/internal/instance"
)

// ProtectedResourcePath is where the RFC 9728 protected-resource metadata
// of the MCP endpoint is served.
const ProtectedResourcePath = "/.well-known/oauth-protected-resource"

// requestBase is the base URL a client used to reach this listener: the
// bound address says nothing useful behind a port mapping or inside a
// container, the Host header does. Only loopback HTTP is served here, so the
// scheme is http.
func requestBase(r *http.Request) string { return "http://" + r.Host }

// RequireToken admits requests that carry "Authorization: Bearer <want>".
// A request with no token or an unknown one gets 401 with a
// WWW-Authenticate challenge naming the protected-resource metadata; a
// request carrying the token of another surface (forbidden) gets 403, so a
// principal who pastes the admin token into an agent client is told why it
// does not work rather than being asked to authenticate again. Tokens are
// compared in constant time and never logged.
// An empty metadataURL is derived from the request's Host.
func RequireToken(want, forbidden, metadataURL string, next http.Handler) http.Handler {
	return RequireTokens(map[string]http.Handler{want: next}, forbidden, metadataURL)
}

// RequireTokens is RequireToken for several tokens, each opening its own
// handler (each agent's MCP server behind its own token). Every token is
// compared, in constant time, whatever the request presents.
func RequireTokens(routes map[string]http.Handler, forbidden, metadataURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metadataURL := metadataURL
		if metadataURL == "" {
			metadataURL = requestBase(r) + ProtectedResourcePath
		}
		tok, ok := bearer(r)
		var next http.Handler
		for want, h := range routes {
			if ok && instance.TokenEqual(tok, want) {
				next = h
			}
		}
		switch {
		case next != nil:
			next.ServeHTTP(w, r)
		case ok && forbidden != "" && instance.TokenEqual(tok, forbidden):
			http.Error(w, "this token is not valid on this surface", http.StatusForbidden)
		default:
			challenge := `Bearer realm="party"`
			if metadataURL != "" {
				challenge += `, resource_metadata="` + metadataURL + `"`
			}
			if ok {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
		}
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// ProtectedResourceMetadata serves the RFC 9728 document for the MCP
// endpoint at resource (empty: /mcp on the Host the request named). party's
// tokens are issued by `party init`, not by an authorization server, so
// none is listed; the document tells a client that a bearer token in the
// Authorization header is what it needs.
func ProtectedResourceMetadata(resource string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := resource
		if res == "" {
			res = requestBase(r) + "/mcp"
		}
		doc, _ := json.Marshal(map[string]any{
			"resource":                 res,
			"bearer_methods_supported": []string{"header"},
			"resource_name":            "party agent tools (A202)",
		})
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})
}
