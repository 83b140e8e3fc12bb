package admin

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/store"
)

// style is the page's only styling. The Content-Security-Policy admits it
// by hash, so no other inline style or any script can run on the page.
const style = `body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}
.req{border:1px solid #bbb;border-radius:6px;padding:1rem;margin:1rem 0}
.req.decided{border-color:#ddd;color:#555}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0 0 .8rem}
dt{font-weight:600}dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
pre{background:#f6f6f6;padding:.8rem;overflow:auto;border-radius:4px}
.bad{color:#a00;font-weight:600}.note{background:#eef6ee;padding:.6rem;border-radius:4px}
.err{background:#fbeaea;padding:.6rem;border-radius:4px}
form.inline{display:inline-block;margin-right:1rem;vertical-align:top}
textarea{width:24rem;height:3rem}button{font-size:1rem;padding:.3rem 1rem}
header{display:flex;justify-content:space-between;align-items:baseline}`

var csp = func() string {
	sum := sha256.Sum256([]byte(style))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}()

// pageTemplate is rendered with html/template, which escapes every value
// for its context: an act document is text inside <pre>, never markup.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · party</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>{{.Style}}</style></head><body>
{{if .Login}}
<h1>Sign in to the approvals page</h1>
{{with .Error}}<p class="err">{{.}}</p>{{end}}
<p>Paste the admin token from <code>DIR/tokens/admin</code> of this instance's state directory.
The agent's token does not open this page.</p>
<form method="post" action="/login">
<label>Admin token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Sign in</button>
</form>
{{else if not .SignedIn}}
<h1>{{.Title}}</h1>
<p class="err">{{.Error}}</p>
<p><a href="/">Back to the approvals page</a></p>
{{else}}
<header><h1>Approvals · {{.Organization}}</h1>
<form method="post" action="/logout" class="inline"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit">Sign out</button></form></header>
{{with .Notice}}<p class="note">{{.}}</p>{{end}}
{{with .Error}}<p class="err">{{.}}</p>{{end}}
<p>Your agent asked you to approve these acts. Each is shown exactly as it will be taken:
the action hash is the SHA-256 of the act's canonical form below, and an approval is bound to that hash alone.</p>
<h2>Pending ({{len .Pending}})</h2>
{{range .Pending}}
<section class="req" id="{{.RequestID}}">
<dl>
<dt>Request</dt><dd>{{.RequestID}}</dd>
<dt>Requested</dt><dd>{{.RequestedAt}}</dd>
<dt>Mandate</dt><dd>{{.MandateID}}</dd>
<dt>Transaction</dt><dd>{{if .TransactionID}}{{.TransactionID}}{{else}}(none){{end}}</dd>
<dt>Action hash</dt><dd>{{.ActionHash}}{{if not .HashOK}} <span class="bad">does not match the act below: do not approve</span>{{end}}</dd>
{{range .Rules}}<dt>Held by rule</dt><dd>{{.RuleID}}: approver {{.ApproverOrganizationID}} {{.ApproverRole}}, good for {{.ExpiresAfterSeconds}} s</dd>{{end}}
</dl>
<pre>{{.ActText}}</pre>
<form method="post" action="/approvals/{{.RequestID}}/approve" class="inline">
<input type="hidden" name="csrf" value="{{$.CSRF}}">
<label>Conditions (optional, one per line)<br><textarea name="conditions"></textarea></label><br>
<button type="submit">Approve</button>
</form>
<form method="post" action="/approvals/{{.RequestID}}/reject" class="inline">
<input type="hidden" name="csrf" value="{{$.CSRF}}">
<button type="submit">Reject</button>
</form>
</section>
{{else}}
<p>No pending approval requests.</p>
{{end}}
<h2>Decided ({{len .Decided}})</h2>
{{range .Decided}}
<section class="req decided">
<dl>
<dt>Request</dt><dd>{{.RequestID}}</dd>
<dt>Decision</dt><dd>{{.Status}} at {{.DecidedAt}}</dd>
<dt>Approval</dt><dd>{{.ApprovalID}}</dd>
<dt>Mandate</dt><dd>{{.MandateID}}</dd>
<dt>Transaction</dt><dd>{{if .TransactionID}}{{.TransactionID}}{{else}}(none){{end}}</dd>
<dt>Action hash</dt><dd>{{.ActionHash}}</dd>
</dl>
<pre>{{.ActText}}</pre>
</section>
{{else}}
<p>None yet.</p>
{{end}}
{{end}}
</body></html>
`))

// pageData is what the template renders.
type pageData struct {
	Title        string
	Style        template.CSS
	Login        bool
	SignedIn     bool
	Organization string
	CSRF         string
	Notice       string
	Error        string
	Pending      []approvalView
	Decided      []approvalView
}

// approvalView is one request with its act rendered for reading.
type approvalView struct {
	RequestID     string
	RequestedAt   string
	MandateID     string
	TransactionID string
	ActionHash    string
	HashOK        bool
	Rules         []authority.MatchedRule
	ActText       string
	Status        string
	ApprovalID    string
	DecidedAt     string
}

func (h *handler) render(w http.ResponseWriter, code int, d pageData) {
	d.Style = template.CSS(style)
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, d); err != nil {
		h.log.Error("admin: rendering the page", "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	h.renderPage(w, r, http.StatusOK, r.URL.Query().Get("decided"), "")
}

// renderPage renders the approvals page. decided names a request just
// decided, whose outcome is read back from the record for the notice (the
// notice text never comes from the URL, so a link cannot put words on the
// page).
func (h *handler) renderPage(w http.ResponseWriter, r *http.Request, code int, decided, errText string) {
	list, err := h.p.Approvals(r.Context(), false)
	if err != nil {
		h.log.Error("admin: listing approval requests", "error", err)
		code, errText = describeErr(err)
	}
	d := pageData{Title: "Approvals", SignedIn: true, Organization: h.org, CSRF: h.csrf, Error: errText,
		Pending: []approvalView{}, Decided: []approvalView{}}
	for _, a := range list {
		if decided != "" && a.RequestID == decided && a.Status != store.ApprovalPending {
			d.Notice = a.RequestID + " " + a.Status + "; approval " + a.ApprovalID
		}
		v, err := view(a)
		if err != nil {
			h.log.Error("admin: rendering an act", "approval_request_id", a.RequestID, "error", err)
			continue
		}
		if a.Status == store.ApprovalPending {
			d.Pending = append(d.Pending, v)
		} else {
			d.Decided = append(d.Decided, v)
		}
	}
	h.render(w, code, d)
}

func view(a principal.Approval) (approvalView, error) {
	text, ok, err := ActText(a)
	if err != nil {
		return approvalView{}, err
	}
	return approvalView{
		RequestID: a.RequestID, RequestedAt: a.RequestedAt, MandateID: a.MandateID, TransactionID: a.TransactionID,
		ActionHash: a.ActionHash, HashOK: ok, Rules: a.Rules, ActText: text, Status: a.Status,
		ApprovalID: a.ApprovalID, DecidedAt: a.DecidedAt,
	}, nil
}

// decideForm handles the page's Approve and Reject buttons. The form token
// was checked by requireAdmin.
func (h *handler) decideForm(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("decision")
	if d != "approve" && d != "reject" {
		http.NotFound(w, r)
		return
	}
	id := r.PathValue("id")
	var conditions []string
	if d == "approve" {
		for _, line := range strings.Split(r.PostFormValue("conditions"), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				conditions = append(conditions, line)
			}
		}
	}
	if _, err := h.p.Decide(r.Context(), id, d == "approve", conditions); err != nil {
		code, detail := describeErr(err)
		h.renderPage(w, r, code, "", id+": "+detail)
		return
	}
	// Post/redirect/get: a reload of the page does not post the form again.
	http.Redirect(w, r, "/?decided="+url.QueryEscape(id), http.StatusSeeOther)
}

func (h *handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if cred, _ := h.who(r); cred == credAdmin {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	h.render(w, http.StatusOK, pageData{Title: "Sign in", Login: true})
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	switch h.classify(tok, credInvalid) {
	case credAdmin:
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: tok, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode,
			// Not Secure: the admin listener is plain HTTP on loopback,
			// where a Secure cookie would not be sent back.
		})
		h.log.Info("admin: principal signed in")
		http.Redirect(w, r, "/", http.StatusSeeOther)
	case credAgent:
		h.log.Warn("admin: sign-in with the agent token refused")
		h.render(w, http.StatusForbidden, pageData{Title: "Sign in", Login: true, Error: "That is the agent's token. The approvals page opens only with the admin token."})
	default:
		h.render(w, http.StatusUnauthorized, pageData{Title: "Sign in", Login: true, Error: "That is not this instance's admin token."})
	}
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
