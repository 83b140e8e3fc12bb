// Package admin is the principal's surface over HTTP, on the admin
// listener: pages for a person (the approvals, each held act summarised in
// words before its exact canonical form and action hash; the transactions
// and each one's timeline; the verification of a record), and the same
// decisions (plus the mandate acts) as JSON for scripts.
//
// The pages are server-rendered (html/template) and use no external asset;
// the Content-Security-Policy admits the one stylesheet by hash and one
// same-origin script, console.js, which shows times in the reader's zone
// and keeps an open approvals page current without reloading it (it asks
// GET /api/console every PollSeconds and changes only the parts that
// changed, never a request being decided: console.go). Without script the
// pages work as before, times in UTC. They are laid out for a phone-width
// screen first. Events and objects are rendered from their types and
// members, so the acts later lifecycle work adds show without a change
// here (words.go, records.go, story.go).
//
// Every request but the sign-in form needs the admin token, presented as
// "Authorization: Bearer <token>" (scripts) or as the HttpOnly,
// SameSite=Strict cookie the sign-in form at /login sets (a browser). The
// agent's token is refused with 403 everywhere, however it is presented:
// an agent may ask for an approval, never give one (decisions.md 9).
//
// A browser's state-changing requests are guarded twice against
// cross-site request forgery: each must carry the form token (a value
// derived from the admin token, which a page on another site cannot know)
// and pass net/http's cross-origin check on the Sec-Fetch-Site and Origin
// headers. A Bearer request carries its credential in a header no other
// site can make a browser send, so it needs neither.
//
// Routes:
//
//	GET  /login                                 sign-in form
//	POST /login                                 sign in (form field "token")
//	POST /logout                                sign out
//	GET  /                                      the approvals page
//	GET  /transactions[?state=S]                the transactions, filtered by state
//	GET  /transactions/{id}[?print=1]           one transaction's timeline and objects (printable)
//	GET  /transactions/{id}/verify              the seven steps over its record, as a report
//	POST /approvals/{id}/approve|reject         the page's confirmations (reason required to reject)
//	GET  /console.js                            the pages' script
//	GET  /api/console                           {"version"}: whether the approvals page changed
//	GET  /api/approvals[?all=1]                 approval requests as JSON
//	POST /api/approvals/{id}/approve|reject     decide; body {"conditions": [...], "reason": ...} optional
//	GET  /api/mandates                          mandates this instance issued
//	POST /api/mandates                          issue; body is an issue request
//	POST /api/mandates/{id}/suspend|reinstate|revoke  body {"reason": ...} optional
package admin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
)

// CookieName is the session cookie the sign-in form sets. It holds the
// admin token itself: the admin listener is on loopback and the token is
// what a session would otherwise have to be checked against anyway.
const CookieName = "party_admin"

// CSRFField is the form field (and CSRFHeader the header, for a script
// that signs in with the cookie) carrying the form token.
const (
	CSRFField  = "csrf"
	CSRFHeader = "X-CSRF-Token"
)

// maxBody bounds request bodies: an issue request is at most one A202
// document.
const maxBody = canonical.MaxDocumentSize

// csrfLabel is the fixed message the form token is an HMAC of. Versioned
// so that a change of scheme invalidates old forms rather than reusing
// them.
const csrfLabel = "party admin form token v1"

// FormToken returns the form token for adminToken: HMAC-SHA256 of a fixed
// label keyed with the admin token. It is stable for the token's life, so
// a page open in two tabs works, and learning it does not reveal the
// token.
func FormToken(adminToken string) string {
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte(csrfLabel))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

type handler struct {
	p      *principal.Surface
	org    string
	admin  string
	agents []string
	csrf   string
	log    *slog.Logger
	rec    *record.Engine // nil: no transaction pages
}

// Option adjusts Handler.
type Option func(*handler)

// WithRecord adds the transaction pages over the record engine e: the
// list, each transaction's timeline and the verification of its record.
// Without it those pages say that no record is mounted.
func WithRecord(e *record.Engine) Option {
	return func(h *handler) { h.rec = e }
}

// Handler returns the admin surface over the principal's surface p, the
// one value in a serve process that signs as the principal (see package
// principal, "Roles in the types"). adminToken opens it; the agents'
// tokens are recognised only to be refused with 403.
func Handler(p *principal.Surface, adminToken string, agentTokens []string, log *slog.Logger, opts ...Option) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{p: p, org: p.Config().OrganizationID, admin: adminToken, agents: agentTokens, csrf: FormToken(adminToken), log: log}
	for _, o := range opts {
		o(h)
	}

	private := http.NewServeMux()
	private.HandleFunc("GET /{$}", h.page)
	private.HandleFunc("POST /approvals/{id}/{decision}", h.decideForm)
	private.HandleFunc("POST /logout", h.logout)
	private.HandleFunc("GET /transactions", h.transactions)
	private.HandleFunc("GET /transactions/{id}", h.transaction)
	private.HandleFunc("GET /transactions/{id}/verify", h.verifyRecord)
	private.HandleFunc("GET /console.js", h.script)
	private.HandleFunc("GET /api/console", h.apiConsole)
	private.HandleFunc("GET /api/approvals", h.apiApprovals)
	private.HandleFunc("POST /api/approvals/{id}/{decision}", h.apiDecide)
	private.HandleFunc("GET /api/mandates", h.apiMandates)
	private.HandleFunc("POST /api/mandates", h.apiIssue)
	private.HandleFunc("POST /api/mandates/{id}/{change}", h.apiChange)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", h.loginForm)
	mux.HandleFunc("POST /login", h.login)
	mux.Handle("/", h.requireAdmin(private))
	return http.NewCrossOriginProtection().Handler(mux)
}

// credential says what a request presented.
type credential int

const (
	credNone    credential = iota // nothing, or a token that opens nothing
	credAdmin                     // the admin token
	credAgent                     // the agent token: refused
	credInvalid                   // a Bearer token that is neither
)

// who reads the request's credential and whether it came as a cookie. A
// Bearer header wins over a cookie, so a script's explicit token is what
// counts.
func (h *handler) who(r *http.Request) (credential, bool) {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, tok, _ := strings.Cut(a, " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return credInvalid, false
		}
		return h.classify(tok, credInvalid), false
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return h.classify(c.Value, credNone), true
	}
	return credNone, false
}

func (h *handler) classify(tok string, otherwise credential) credential {
	switch {
	case instance.TokenEqual(tok, h.admin):
		return credAdmin
	}
	for _, a := range h.agents {
		if a != "" && instance.TokenEqual(tok, a) {
			return credAgent
		}
	}
	return otherwise
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

func (h *handler) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, viaCookie := h.who(r)
		switch cred {
		case credAdmin:
		case credAgent:
			h.log.Warn("admin: agent token refused", "method", r.Method, "path", r.URL.Path)
			h.fail(w, r, http.StatusForbidden, "the agent token is not valid on the principal's surface")
			return
		default:
			if !isAPI(r) && r.Method == http.MethodGet && cred == credNone {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="party-admin"`)
			h.fail(w, r, http.StatusUnauthorized, "the admin token is required")
			return
		}
		if viaCookie && r.Method != http.MethodGet && r.Method != http.MethodHead {
			tok := r.Header.Get(CSRFHeader)
			if tok == "" {
				r.Body = http.MaxBytesReader(w, r.Body, maxBody)
				tok = r.PostFormValue(CSRFField)
			}
			if !hmac.Equal([]byte(tok), []byte(h.csrf)) {
				h.log.Warn("admin: form without a valid form token refused", "method", r.Method, "path", r.URL.Path)
				h.fail(w, r, http.StatusForbidden, "this form is missing its form token; reload the page and try again")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// fail answers an error as JSON on the API and as a short page elsewhere.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, code int, detail string) {
	if isAPI(r) {
		writeJSON(w, code, map[string]any{"outcome": "error", "reason_codes": []reason.Code{}, "detail": detail})
		return
	}
	h.render(w, code, pageData{Title: http.StatusText(code), Error: detail, SignedIn: false})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// errorStatus maps an error from the principal's surface to an HTTP status
// and the body every surface uses for it.
func errorStatus(err error) (int, map[string]any) {
	var r *reason.Refusal
	switch {
	case errors.As(err, &r):
		codes := r.Codes
		if codes == nil {
			codes = []reason.Code{}
		}
		return http.StatusUnprocessableEntity, map[string]any{"outcome": "refused", "reason_codes": codes, "detail": r.Detail}
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, map[string]any{"outcome": "error", "reason_codes": []reason.Code{}, "detail": err.Error()}
	case errors.Is(err, principal.ErrNotLocal):
		// The mandate exists but another organisation issued it: this
		// principal has no standing to change it.
		return http.StatusForbidden, map[string]any{"outcome": "error", "reason_codes": []reason.Code{}, "detail": err.Error()}
	case errors.Is(err, principal.ErrDecided), errors.Is(err, principal.ErrWrongStatus), errors.Is(err, principal.ErrFinal), errors.Is(err, store.ErrConflict):
		// The act conflicts with the state it would change.
		return http.StatusConflict, map[string]any{"outcome": "error", "reason_codes": []reason.Code{}, "detail": err.Error()}
	}
	return http.StatusInternalServerError, map[string]any{"outcome": "error", "reason_codes": []reason.Code{}, "detail": err.Error()}
}

func writeErr(w http.ResponseWriter, err error) {
	code, body := errorStatus(err)
	writeJSON(w, code, body)
}

// readJSONBody decodes an optional JSON body strictly into v; an empty
// body leaves v as it is.
func readJSONBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return reason.Refuse("body: " + err.Error())
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if _, err := canonical.Decode(data); err != nil {
		return reason.Refuse("body: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return reason.Refuse("body: " + err.Error())
	}
	return nil
}

func (h *handler) apiApprovals(w http.ResponseWriter, r *http.Request) {
	list, err := h.p.Approvals(r.Context(), r.URL.Query().Get("all") == "")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handler) apiDecide(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("decision")
	if d != "approve" && d != "reject" {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Conditions []string `json:"conditions"`
		// Reason is a rejection's, kept as its conditions (one a line).
		Reason string `json:"reason"`
	}
	if err := readJSONBody(w, r, &body); err != nil {
		writeErr(w, err)
		return
	}
	if body.Reason != "" {
		if d == "approve" {
			writeErr(w, reason.Refuse("body: a reason is a rejection's; an approval takes conditions"))
			return
		}
		why, err := notes(body.Reason)
		if err != nil {
			writeErr(w, err)
			return
		}
		body.Conditions = append(body.Conditions, why...)
	}
	obj, err := h.p.Decide(r.Context(), r.PathValue("id"), d == "approve", body.Conditions)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approval_id": obj["id"], "decision": d, "approval": obj})
}

func (h *handler) apiMandates(w http.ResponseWriter, r *http.Request) {
	list, err := h.p.Mandates(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *handler) apiIssue(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeErr(w, reason.Refuse("body: "+err.Error()))
		return
	}
	req, err := authority.ParseIssueRequest(data)
	if err != nil {
		writeErr(w, reason.Refuse(err.Error()))
		return
	}
	m, err := h.p.IssueMandate(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, m)
}

func (h *handler) apiChange(w http.ResponseWriter, r *http.Request) {
	var change func(ctx context.Context, id, why string) error
	switch r.PathValue("change") {
	case "suspend":
		change = h.p.Suspend
	case "reinstate":
		change = h.p.Reinstate
	case "revoke":
		change = h.p.Revoke
	default:
		http.NotFound(w, r)
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := readJSONBody(w, r, &body); err != nil {
		writeErr(w, err)
		return
	}
	id := r.PathValue("id")
	if err := change(r.Context(), id, body.Reason); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"mandate_id": id, "change": r.PathValue("change")})
}

// ActText returns an approval request's act document as a person should
// read it: its canonical (RFC 8785) bytes, whose SHA-256 is the action
// hash, indented. Indenting adds only whitespace between tokens, so every
// member, string and number is exactly what the hash covers, in that
// order. ok reports whether those bytes do hash to the request's action
// hash; an act that does not must not be approved.
func ActText(a principal.Approval) (text string, ok bool, err error) {
	b, err := canonical.Marshal(a.Act)
	if err != nil {
		return "", false, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return "", false, err
	}
	return buf.String(), canonical.SHA256Hex(b) == a.ActionHash, nil
}

// describeErr is the one-line reason a page shows for a failed decision.
func describeErr(err error) (int, string) {
	code, body := errorStatus(err)
	detail := fmt.Sprint(body["detail"])
	if codes, _ := body["reason_codes"].([]reason.Code); len(codes) > 0 {
		s := make([]string, len(codes))
		for i, c := range codes {
			s[i] = string(c)
		}
		detail = strings.Join(s, " ") + ": " + detail
	}
	return code, detail
}
