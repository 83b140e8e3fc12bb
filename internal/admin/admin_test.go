package admin_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/budget"

	"github.com/partyd/party/internal/admin"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
)

type fixture struct {
	srv      *httptest.Server
	n        *orgtest.Node
	agent    *agent.Surface
	mandate  string
	adminTok string
	agentTok string
}

const description = `Calibrate 20 "PT-100" transmitters <script>alert(1)</script> & report`

func act(amount string) map[string]any {
	return authority.ActDocument("offer.accept", "txn_0123456789abcdef01234567", "org_delta", map[string]any{
		"profile": "a202-profile/calibration-service/0.1",
		"core": map[string]any{
			"description": description, "quantity": "20", "unit_code": "H87",
			"total": map[string]any{"currency": "EUR", "amount": amount},
		},
		"profile_terms": map[string]any{
			"completion": map[string]any{"business_days_after_collection": 8, "business_calendar": "DE"},
			"payment":    map[string]any{"prepayment_percent": "25", "balance_trigger": "buyer_acceptance"},
			"acceptance": map[string]any{"certificate_required": true, "machine_readable_result_required": true, "qualification_standard": "ISO/IEC 17025:2017"},
			"rework":     map[string]any{"included_attempts": 1},
		},
	}, map[string]any{"category": "services.calibration"})
}

func request(now time.Time, id string) authority.IssueRequest {
	return authority.IssueRequest{
		MandateID:     id,
		ValidFrom:     envelope.Timestamp(now.Add(-time.Minute)),
		ValidUntil:    envelope.Timestamp(now.Add(24 * time.Hour)),
		Actions:       []string{"offer.accept"},
		Scope:         map[string]any{"categories": []any{"services.calibration"}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		ApprovalRules: []map[string]any{{
			"id":                    "r_large",
			"when":                  map[string]any{"path": "$.proposed_terms.core.total.amount", "operator": "minimum", "value": "3000.00"},
			"approver":              map[string]any{"organization_id": "org_acme", "role": "procurement_lead"},
			"expires_after_seconds": 900,
		}},
	}
}

func setup(t *testing.T) *fixture {
	t.Helper()
	n := orgtest.New(t, "org_acme", nil, true)
	p := n.Principal(t)
	m, err := p.IssueMandate(context.Background(), request(time.Now().UTC(), ""))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{n: n, agent: agent.New(n.Org), mandate: m["id"].(string)}
	f.adminTok, _ = instance.LoadToken(n.Dir, instance.AdminTokenFile)
	f.agentTok, _ = instance.LoadToken(n.Dir, instance.AgentTokenFile)
	f.srv = httptest.NewServer(admin.Handler(p, f.adminTok, []string{f.agentTok}, nil))
	t.Cleanup(f.srv.Close)
	return f
}

// ask makes the agent request approval of an act of the given amount.
func (f *fixture) ask(t *testing.T, amount string) agent.ApprovalRequestResult {
	t.Helper()
	r, err := f.agent.RequestApproval(context.Background(), agent.VerifyInput{MandateID: f.mandate, ProposedAction: act(amount)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) status(t *testing.T, id string) string {
	t.Helper()
	st, err := f.agent.ApprovalStatus(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Status
}

// client does not follow redirects, so tests see them.
var client = &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type call struct {
	method, path, body string
	bearer             string
	cookie             string
	form               url.Values
	header             map[string]string
}

func (f *fixture) do(t *testing.T, c call) (*http.Response, string) {
	t.Helper()
	body := c.body
	if c.form != nil {
		body = c.form.Encode()
	}
	req, err := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: admin.CookieName, Value: c.cookie})
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signIn posts the sign-in form and returns the cookie it sets.
func (f *fixture) signIn(t *testing.T) *http.Cookie {
	t.Helper()
	resp, body := f.do(t, call{method: "POST", path: "/login", form: url.Values{"token": {f.adminTok}}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("sign in: %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == admin.CookieName {
			return c
		}
	}
	t.Fatal("sign in set no cookie")
	return nil
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestSignInCookie(t *testing.T) {
	f := setup(t)
	c := f.signIn(t)
	if c.Value != f.adminTok || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v", c)
	}
	// Wrong token: 401 and the form again, no cookie.
	resp, body := f.do(t, call{method: "POST", path: "/login", form: url.Values{"token": {"guess"}}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(body, `name="token"`) {
		t.Fatalf("wrong token: %d %v", resp.StatusCode, resp.Cookies())
	}
	// The agent token: 403, no cookie.
	resp, _ = f.do(t, call{method: "POST", path: "/login", form: url.Values{"token": {f.agentTok}}})
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("agent token at sign-in: %d %v", resp.StatusCode, resp.Cookies())
	}
	// The form itself is public; signed in, it sends you to the page.
	if resp, _ := f.do(t, call{method: "GET", path: "/login"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /login: %d", resp.StatusCode)
	}
	if resp, _ := f.do(t, call{method: "GET", path: "/login", cookie: f.adminTok}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /login signed in: %d", resp.StatusCode)
	}
	// Sign out clears the cookie.
	_, body = f.do(t, call{method: "GET", path: "/", cookie: f.adminTok})
	tok := csrfInput.FindStringSubmatch(body)[1]
	resp, _ = f.do(t, call{method: "POST", path: "/logout", cookie: f.adminTok, form: url.Values{"csrf": {tok}}})
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("sign out: %d %v", resp.StatusCode, resp.Cookies())
	}
}

func TestNoTokenIsUnauthenticated(t *testing.T) {
	f := setup(t)
	resp, _ := f.do(t, call{method: "GET", path: "/"})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("page without a token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, c := range []call{
		{method: "GET", path: "/api/approvals"},
		{method: "GET", path: "/api/mandates"},
		{method: "POST", path: "/api/approvals/req_0123456789abcdef01234567/approve"},
		{method: "POST", path: "/approvals/req_0123456789abcdef01234567/approve", form: url.Values{"csrf": {admin.FormToken(f.adminTok)}}},
		{method: "GET", path: "/api/approvals", bearer: "not-the-token"},
		{method: "GET", path: "/", bearer: "not-the-token"},
		{method: "GET", path: "/", header: map[string]string{"Authorization": "Basic " + f.adminTok}},
	} {
		resp, _ := f.do(t, c)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
	// A cookie holding something else is no sign-in either.
	if resp, _ := f.do(t, call{method: "GET", path: "/", cookie: "stale"}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("stale cookie: %d", resp.StatusCode)
	}
}

// TestAgentTokenForbidden: however the agent's token is presented, the
// principal's surface answers 403 and decides nothing.
func TestAgentTokenForbidden(t *testing.T) {
	f := setup(t)
	r := f.ask(t, "3200.00")
	issue, _ := json.Marshal(request(time.Now().UTC(), "mnd_0123456789abcdef0123dddd"))
	csrf := admin.FormToken(f.adminTok)
	for _, c := range []call{
		{method: "GET", path: "/", bearer: f.agentTok},
		{method: "GET", path: "/api/approvals", bearer: f.agentTok},
		{method: "GET", path: "/api/mandates", bearer: f.agentTok},
		{method: "GET", path: "/api/console", bearer: f.agentTok},
		{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/approve", bearer: f.agentTok},
		{method: "POST", path: "/api/mandates", bearer: f.agentTok, body: string(issue)},
		{method: "POST", path: "/api/mandates/" + f.mandate + "/revoke", bearer: f.agentTok},
		// As a cookie, even with the right form token.
		{method: "POST", path: "/approvals/" + r.ApprovalRequestID + "/approve", cookie: f.agentTok, form: url.Values{"csrf": {csrf}}},
		{method: "GET", path: "/", cookie: f.agentTok},
		// A Bearer header wins over a cookie: the agent cannot borrow the
		// principal's session.
		{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/approve", bearer: f.agentTok, cookie: f.adminTok, header: map[string]string{admin.CSRFHeader: csrf}},
	} {
		resp, body := f.do(t, c)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("agent token on %s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	if st := f.status(t, r.ApprovalRequestID); st != "pending" {
		t.Fatalf("request became %s", st)
	}
	ms, _ := f.n.Principal(t).Mandates(context.Background())
	for _, m := range ms {
		if m.ID == "mnd_0123456789abcdef0123dddd" {
			t.Fatal("the agent token issued a mandate")
		}
		if m.ID == f.mandate && m.Status != "active" {
			t.Fatal("the agent token revoked a mandate")
		}
	}
}

// TestPageShowsActAndDecides: the page lists the pending request with its
// mandate, transaction, hash and the act as escaped text; the Approve
// button works with the cookie and form token and is refused without the
// token, with a wrong one, or from another site.
func TestPageShowsActAndDecides(t *testing.T) {
	f := setup(t)
	r1 := f.ask(t, "3200.00")
	r2 := f.ask(t, "3700.00")
	c := f.signIn(t)

	resp, body := f.do(t, call{method: "GET", path: "/", cookie: c.Value})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("page: %d", resp.StatusCode)
	}
	for _, want := range []string{r1.ApprovalRequestID, r2.ApprovalRequestID, f.mandate, "txn_0123456789abcdef01234567",
		r1.ActionHash, r2.ActionHash, `&#34;amount&#34;: &#34;3200.00&#34;`, "r_large",
		`action="/approvals/` + r1.ApprovalRequestID + `/approve"`, `action="/approvals/` + r1.ApprovalRequestID + `/reject"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The description's markup is text, not markup.
	if strings.Contains(body, "<script>") {
		t.Fatal("the act's markup reached the page unescaped")
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; report") {
		t.Fatalf("escaped description missing:\n%s", body)
	}
	if strings.Contains(body, "does not match") {
		t.Fatal("an honest act is flagged")
	}
	// Script only from this origin (the console's), none inline.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") ||
		strings.Contains(csp, "unsafe") || strings.Contains(body, "<script>") || !strings.Contains(body, `<script src="/console.js" defer></script>`) {
		t.Fatalf("CSP %q", csp)
	}
	if strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatal("the page still reloads itself")
	}
	m := csrfInput.FindStringSubmatch(body)
	if m == nil || html.UnescapeString(m[1]) != admin.FormToken(f.adminTok) {
		t.Fatalf("form token on the page: %v", m)
	}
	csrf := html.UnescapeString(m[1])
	approve := "/approvals/" + r1.ApprovalRequestID + "/approve"

	// Without the form token, with a wrong one, and cross-site: refused,
	// nothing decided.
	for _, bad := range []call{
		{method: "POST", path: approve, cookie: c.Value, form: url.Values{}},
		{method: "POST", path: approve, cookie: c.Value, form: url.Values{"csrf": {"forged"}}},
		{method: "POST", path: approve, cookie: c.Value, form: url.Values{"csrf": {admin.FormToken("another token")}}},
		{method: "POST", path: approve, cookie: c.Value, form: url.Values{"csrf": {csrf}}, header: map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{method: "POST", path: approve, cookie: c.Value, form: url.Values{"csrf": {csrf}}, header: map[string]string{"Origin": "https://evil.example"}},
		// The JSON API with the cookie needs the token too.
		{method: "POST", path: "/api/approvals/" + r1.ApprovalRequestID + "/approve", cookie: c.Value},
	} {
		if resp, body := f.do(t, bad); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s %v %v: %d %s", bad.path, bad.form, bad.header, resp.StatusCode, body)
		}
	}
	if st := f.status(t, r1.ApprovalRequestID); st != "pending" {
		t.Fatalf("a refused form decided: %s", st)
	}

	// The open page's question, whether anything changed: the same
	// answer until something does.
	version := func() string {
		t.Helper()
		resp, body := f.do(t, call{method: "GET", path: "/api/console", cookie: c.Value})
		var v struct{ Version string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil || v.Version == "" {
			t.Fatalf("/api/console: %d %s", resp.StatusCode, body)
		}
		return v.Version
	}
	before := version()
	if again := version(); again != before {
		t.Fatalf("the version moved with nothing changed: %s, %s", before, again)
	}

	// With cookie and token: approved, with the conditions typed.
	resp, _ = f.do(t, call{method: "POST", path: approve, cookie: c.Value, form: url.Values{"csrf": {csrf}, "conditions": {"collect after 14:00\r\n\r\n  certificate in PDF  "}}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?decided="+r1.ApprovalRequestID {
		t.Fatalf("approve: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	st, _ := f.agent.ApprovalStatus(context.Background(), r1.ApprovalRequestID)
	if st.Status != "approved" || st.ApprovalID == "" {
		t.Fatalf("after approve: %+v", st)
	}
	if version() == before {
		t.Error("the version did not move with a decision")
	}
	apr, err := f.n.Org.Store.GetObject(context.Background(), st.TransactionID, st.ApprovalID)
	if err != nil || !strings.Contains(string(apr), `"conditions":["collect after 14:00","certificate in PDF"]`) {
		t.Fatalf("approval object %s %v", apr, err)
	}

	// Rejecting from the page needs a reason; with one, it is signed
	// into the rejection and shown with it.
	reject := "/approvals/" + r2.ApprovalRequestID + "/reject"
	resp, body = f.do(t, call{method: "POST", path: reject, cookie: c.Value, form: url.Values{"csrf": {csrf}, "reason": {" \r\n "}}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "a rejection needs a reason") {
		t.Fatalf("reject without a reason: %d", resp.StatusCode)
	}
	if st := f.status(t, r2.ApprovalRequestID); st != "pending" {
		t.Fatalf("a reasonless rejection decided: %s", st)
	}
	resp, _ = f.do(t, call{method: "POST", path: reject, cookie: c.Value, form: url.Values{"csrf": {csrf}, "reason": {"Above this quarter's plan."}}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	st2, _ := f.agent.ApprovalStatus(context.Background(), r2.ApprovalRequestID)
	if st2.Status != "rejected" {
		t.Fatalf("after reject: %s", st2.Status)
	}
	if rej, err := f.n.Org.Store.GetObject(context.Background(), st2.TransactionID, st2.ApprovalID); err != nil ||
		!strings.Contains(string(rej), `"conditions":["Above this quarter's plan."],"decision":"rejected"`) {
		t.Fatalf("rejection object %s %v", rej, err)
	}

	// The page now shows both under Decided, with the notice read from the
	// record, and deciding again is a conflict shown on the page.
	_, body = f.do(t, call{method: "GET", path: "/?decided=" + r1.ApprovalRequestID, cookie: c.Value})
	if !strings.Contains(body, "Pending (0)") || !strings.Contains(body, "Decided (2)") ||
		!strings.Contains(body, r1.ApprovalRequestID+" approved; approval "+st.ApprovalID) {
		t.Fatalf("page after deciding:\n%s", body)
	}
	// Who decided, with the conditions and the reason.
	wantAll(t, "the decided requests", body,
		"Approved : Accept an offer and form the agreement (offer.accept) Decided by prn_acme_principal (procurement_lead),",
		"Condition collect after 14:00 Condition certificate in PDF Good until",
		"Rejected : Accept an offer and form the agreement (offer.accept) Decided by prn_acme_principal (procurement_lead),",
		"Reason Above this quarter's plan.")
	if _, body := f.do(t, call{method: "GET", path: "/?decided=everything+approved", cookie: c.Value}); strings.Contains(body, "everything approved") {
		t.Fatal("the notice echoes the URL")
	}
	resp, body = f.do(t, call{method: "POST", path: approve, cookie: c.Value, form: url.Values{"csrf": {csrf}}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already decided") {
		t.Fatalf("approve twice: %d", resp.StatusCode)
	}
}

// TestJSONAPI: the bearer API decides without a form token, and reports
// refusals and conflicts with their status codes.
func TestJSONAPI(t *testing.T) {
	f := setup(t)
	r := f.ask(t, "3300.00")
	resp, body := f.do(t, call{method: "GET", path: "/api/approvals", bearer: f.adminTok})
	var list []principal.Approval
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].RequestID != r.ApprovalRequestID {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	// Unknown members in the body are refused, not ignored.
	resp, _ = f.do(t, call{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/approve", bearer: f.adminTok, body: `{"condition": ["x"]}`})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("misspelt body: %d", resp.StatusCode)
	}
	// A reason is a rejection's.
	if resp, _ := f.do(t, call{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/approve", bearer: f.adminTok, body: `{"reason": "fine"}`}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("approve with a reason: %d", resp.StatusCode)
	}
	resp, body = f.do(t, call{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/approve", bearer: f.adminTok, body: `{"conditions": ["weekdays only"]}`})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"decision":"approve"`) || !strings.Contains(body, `"weekdays only"`) {
		t.Fatalf("approve: %d %s", resp.StatusCode, body)
	}
	if resp, _ := f.do(t, call{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/reject", bearer: f.adminTok}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("reject after approve: %d", resp.StatusCode)
	}
	if resp, _ := f.do(t, call{method: "POST", path: "/api/approvals/req_0123456789abcdef01234567/approve", bearer: f.adminTok}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown request: %d", resp.StatusCode)
	}
	if resp, _ := f.do(t, call{method: "POST", path: "/api/approvals/" + r.ApprovalRequestID + "/maybe", bearer: f.adminTok}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown decision: %d", resp.StatusCode)
	}
	// With --all semantics: decided requests appear.
	_, body = f.do(t, call{method: "GET", path: "/api/approvals?all=1", bearer: f.adminTok})
	if !strings.Contains(body, `"status":"approved"`) {
		t.Fatalf("all: %s", body)
	}

	// Mandates: issue, refuse an unbounded one with its code, suspend,
	// revoke, revoke again (conflict).
	issue, _ := json.Marshal(request(time.Now().UTC(), "mnd_0123456789abcdef0123eeee"))
	resp, body = f.do(t, call{method: "POST", path: "/api/mandates", bearer: f.adminTok, body: string(issue)})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `"proof":{`) {
		t.Fatalf("issue: %d %s", resp.StatusCode, body)
	}
	unbounded := request(time.Now().UTC(), "")
	unbounded.SpendingLimit, unbounded.ApprovalRules = nil, nil
	ub, _ := json.Marshal(unbounded)
	resp, body = f.do(t, call{method: "POST", path: "/api/mandates", bearer: f.adminTok, body: string(ub)})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `"reason_codes":["A202-MANDATE-UNBOUNDED"]`) {
		t.Fatalf("unbounded: %d %s", resp.StatusCode, body)
	}
	for _, step := range []struct {
		change string
		code   int
	}{{"suspend", 200}, {"suspend", 409}, {"revoke", 200}, {"revoke", 409}, {"reinstate", 409}, {"expire", 404}} {
		resp, body := f.do(t, call{method: "POST", path: "/api/mandates/mnd_0123456789abcdef0123eeee/" + step.change, bearer: f.adminTok, body: `{"reason": "test"}`})
		if resp.StatusCode != step.code {
			t.Fatalf("%s: %d %s", step.change, resp.StatusCode, body)
		}
	}
	if resp, _ := f.do(t, call{method: "POST", path: "/api/mandates/mnd_ffffffffffffffffffffffff/revoke", bearer: f.adminTok}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown mandate: %d", resp.StatusCode)
	}
	_, body = f.do(t, call{method: "GET", path: "/api/mandates", bearer: f.adminTok})
	if !strings.Contains(body, `"mandate_id":"mnd_0123456789abcdef0123eeee","subject":"agt_acme_agent","status":"revoked"`) {
		t.Fatalf("mandates: %s", body)
	}
}

// TestActTextFlagsAMismatch: an act whose canonical form does not hash to
// the request's action hash is flagged, on the page and for the CLI.
func TestActTextFlagsAMismatch(t *testing.T) {
	a := principal.Approval{Act: act("3200.00"), ActionHash: strings.Repeat("0", 64)}
	text, ok, err := admin.ActText(a)
	if err != nil || ok {
		t.Fatalf("mismatch not flagged: %v %v", ok, err)
	}
	if !strings.Contains(text, "\n  \"action_type\": \"offer.accept\",\n") {
		t.Fatalf("not indented canonical text:\n%s", text)
	}
	hash, err := authority.ActionHash(act("3200.00"))
	if err != nil {
		t.Fatal(err)
	}
	a.ActionHash = hash
	if _, ok, _ := admin.ActText(a); !ok {
		t.Fatal("a matching act is flagged")
	}
}

// TestPageShowsBudgets: the approvals page shows each budget with what is
// used and left, and names the budget that holds a request.
func TestPageShowsBudgets(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	b, err := budget.New("monthly-eur", budget.Spend, budget.Month, "EUR", "4000.00", "3000.00", "", "")
	if err != nil {
		t.Fatal(err)
	}
	p := f.n.Principal(t)
	if err := p.SetBudget(ctx, b); err != nil {
		t.Fatal(err)
	}
	doc := act("3200.00")
	res, err := f.agent.Evaluate(ctx, f.mandate, doc, "")
	if err != nil {
		t.Fatal(err)
	}
	res.Findings = append(res.Findings, authority.Finding{Step: authority.StepBudget, Hold: true, Code: "A202-APPROVAL-REQUIRED",
		Detail: "held by this organisation's budget monthly-eur: this act would bring it to 3200.00, above the approval threshold 3000.00"})
	res.Decision = authority.RequireApproval
	if _, err := f.n.Org.FileApproval(ctx, f.mandate, doc, res); err != nil {
		t.Fatal(err)
	}
	c := f.signIn(t)
	_, body := f.do(t, call{method: "GET", path: "/", cookie: c.Value})
	for _, want := range []string{"<h2>Budgets</h2>", "monthly-eur", `<span class="big">0</span> used of 4000.00, 4000.00 left`, "above 3000.00 waits for your approval",
		"<dt>Held by budget</dt><dd>held by this organisation&#39;s budget monthly-eur"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the page lacks %q:\n%s", want, body)
		}
	}
}
