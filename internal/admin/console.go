package admin

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// The approvals page: the requests in words, what each does to its
// mandate's limit, a two-step decision (Approve… or Reject…, then the
// confirmation naming the act, its total and counterparty), and live
// updates by console.js that leave what a person is typing alone.

// consoleJS is the pages' one script, served from this origin
// (script-src 'self'): it shows times in the reader's own zone and keeps
// the approvals page current.
//
//go:embed console.js
var consoleJS []byte

func (h *handler) script(w http.ResponseWriter, _ *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-cache")
	w.Write(consoleJS)
}

// version names what the approvals page shows: the requests as filed and
// decided (principal.Surface.ApprovalsVersion, whichever process wrote
// them) and the budgets as they stand (they move with every act). Two
// equal versions show the same page, short of the clock.
func (h *handler) version(ctx context.Context) (string, error) {
	n, err := h.p.ApprovalsVersion(ctx)
	if err != nil {
		return "", err
	}
	bs, err := h.p.Budgets(ctx)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(bs)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d.%x", n, sum[:8]), nil
}

// apiConsole answers the open page's question, whether anything changed,
// in a few bytes: {"version": ...}.
func (h *handler) apiConsole(w http.ResponseWriter, r *http.Request) {
	v, err := h.version(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"version": v})
}

// names returns how the pages say an organisation: "Delta Calibration
// GmbH (org_delta)" where its peer file (for this organisation,
// config.json) states a display name, else its identifier alone. The name
// is only what the organisation says of itself, so the identifier that
// was pinned is always beside it.
func (h *handler) names() func(string) string {
	known := map[string]string{}
	for _, p := range h.p.Peers() {
		if p.DisplayName != "" {
			known[p.OrganizationID] = p.DisplayName
		}
	}
	if n := h.p.Config().DisplayName; n != "" {
		known[h.org] = n
	}
	return func(org string) string {
		if n, ok := known[org]; ok {
			return n + " (" + org + ")"
		}
		return org
	}
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	h.renderPage(w, r, http.StatusOK, r.URL.Query().Get("decided"), "")
}

// renderPage renders the approvals page. decided names a request just
// decided, whose outcome is read back from the record for the notice (the
// notice text never comes from the URL, so a link cannot put words on the
// page).
func (h *handler) renderPage(w http.ResponseWriter, r *http.Request, code int, decided, errText string) {
	ctx := r.Context()
	d := pageData{Title: "Approvals", Kind: "approvals", Poll: PollSeconds, Error: errText,
		Pending: []approvalView{}, Decided: []approvalView{}}
	// Read before the page, so that a change made while it renders shows
	// as a newer version and is fetched again, never missed.
	var err error
	if d.Version, err = h.version(ctx); err != nil {
		h.log.Error("admin: reading the approvals version", "error", err)
	}
	list, err := h.p.ApprovalsShown(ctx)
	if err != nil {
		h.log.Error("admin: listing approval requests", "error", err)
		code, d.Error = describeErr(err)
	}
	if d.Budgets, err = h.p.Budgets(ctx); err != nil {
		h.log.Error("admin: reading the budgets", "error", err)
	}
	wc := h.lookupContext(ctx)
	standings := map[string]principal.MandateStanding{}
	for _, a := range list {
		if decided != "" && a.RequestID == decided && a.Status != store.ApprovalPending {
			d.Notice = a.RequestID + " " + a.Status + "; approval " + a.ApprovalID
		}
		v, err := view(a, wc)
		if err != nil {
			h.log.Error("admin: rendering an act", "approval_request_id", a.RequestID, "error", err)
			continue
		}
		if a.Status == store.ApprovalPending {
			v.Limit, v.Room, v.Committed = h.mandateWords(ctx, a, standings)
			d.Pending = append(d.Pending, v)
		} else {
			v.Decision = h.decision(ctx, a.TransactionID, a.ApprovalID, wc.name)
			d.Decided = append(d.Decided, v)
		}
	}
	h.show(w, r, code, d)
}

func view(a principal.Approval, wc Context) (approvalView, error) {
	text, ok, err := ActText(a)
	if err != nil {
		return approvalView{}, err
	}
	v := approvalView{
		RequestID: a.RequestID, RequestedAt: a.RequestedAt, MandateID: a.MandateID, TransactionID: a.TransactionID,
		ActionHash: a.ActionHash, HashOK: ok, Rules: a.Rules, Summary: Summarize(a, wc), ActText: text, Status: a.Status,
		ApprovalID: a.ApprovalID, HeldBy: a.HeldBy,
	}
	// The approval's life is the shortest its rules allow (as Decide
	// signs it), the default when only a budget holds the act.
	life := authority.DefaultApprovalLife
	for i, r := range a.Rules {
		if d := time.Duration(r.ExpiresAfterSeconds) * time.Second; i == 0 || d < life {
			life = d
		}
	}
	v.GoodFor = span(life)
	return v, nil
}

// mandateWords says a pending act against its mandate: the limit on any
// one act's total, the room this act leaves under it, and what the
// mandate's agent has committed so far (principal.MandateStanding; read
// once a page for each mandate, in cache).
func (h *handler) mandateWords(ctx context.Context, a principal.Approval, cache map[string]principal.MandateStanding) (limit, room, committed string) {
	ms, ok := cache[a.MandateID]
	if !ok {
		var err error
		if ms, err = h.p.MandateStanding(ctx, a.MandateID); err != nil {
			h.log.Error("admin: reading a mandate's limit and commitments", "mandate_id", a.MandateID, "error", err)
			return "", "", ""
		}
		cache[a.MandateID] = ms
	}
	if ms.Limit == "" {
		return "none: this mandate sets no ceiling on an act's total (its other constraints and your budgets apply)", "", ""
	}
	limit = ms.Limit + " " + ms.Currency
	total := sub(sub(sub(a.Act, "proposed_terms"), "core"), "total")
	amount, err := decimal.Parse(str(total["amount"]))
	lim, lerr := decimal.Parse(ms.Limit)
	switch {
	case err != nil || lerr != nil:
	case str(total["currency"]) != ms.Currency:
		room = "none: this act is in " + str(total["currency"]) + ", the limit in " + ms.Currency
	case lim.Cmp(amount) < 0:
		room = "none: this act's " + Money(total) + " is " + amount.Sub(lim).String() + " " + ms.Currency + " over it"
	default:
		room = lim.Sub(amount).String() + " " + ms.Currency + " after this act's " + Money(total)
	}
	n := "transactions"
	if ms.Transactions == 1 {
		n = "transaction"
	}
	committed = fmt.Sprintf("%s %s by %s since the mandate took effect, in %d %s", ms.Committed, ms.Currency, ms.AgentID, ms.Transactions, n)
	return limit, room, committed
}

// decision reads a decided request's approval object in words.
func (h *handler) decision(ctx context.Context, transactionID, approvalID string, name func(string) string) *decisionView {
	if approvalID == "" {
		return nil
	}
	dec, err := h.p.Decision(ctx, transactionID, approvalID)
	if err != nil {
		h.log.Error("admin: reading an approval", "approval_id", approvalID, "error", err)
		return nil
	}
	return decisionWords(dec, h.org, name)
}

// decisionWords says who decided, when, and with what words: an
// approval's conditions, a rejection's reason (both the approval object's
// signed conditions).
func decisionWords(dec principal.Decision, own string, name func(string) string) *decisionView {
	by := dec.PrincipalID
	if dec.Role != "" {
		by += " (" + dec.Role + ")"
	}
	if dec.OrganizationID != "" && dec.OrganizationID != own {
		by += " of " + name(dec.OrganizationID)
	}
	dv := &decisionView{By: by, At: whenOf(dec.DecidedAt)}
	label := "Condition"
	if dec.Decision == authority.Rejected {
		label = "Reason"
	} else {
		dv.Until = whenOf(dec.ExpiresAt)
	}
	for _, c := range dec.Conditions {
		dv.Notes = append(dv.Notes, item{Label: label, Value: c})
	}
	return dv
}

// maxNote is the longest condition or reason line an approval holds (its
// schema's maxLength, in characters).
const maxNote = 512

// notes reads a text box as an approval's conditions: one a line, trimmed,
// blank and repeated lines dropped (the schema holds them a set).
func notes(text string) ([]string, error) {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || slices.Contains(out, l) {
			continue
		}
		if n := utf8.RuneCountInString(l); n > maxNote {
			return nil, reason.Refuse(fmt.Sprintf("a line of %d characters: a condition or reason line holds at most %d", n, maxNote))
		}
		out = append(out, l)
	}
	return out, nil
}

// decideForm handles the page's two confirmations, Confirm approval and
// Confirm rejection. The form token was checked by requireAdmin. A
// rejection from the page needs a reason: it is signed with the decision
// and shown with it.
func (h *handler) decideForm(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("decision")
	if d != "approve" && d != "reject" {
		http.NotFound(w, r)
		return
	}
	id := r.PathValue("id")
	field := "conditions"
	if d == "reject" {
		field = "reason"
	}
	words, err := notes(r.PostFormValue(field))
	if err == nil && d == "reject" && len(words) == 0 {
		err = reason.Refuse("a rejection needs a reason: say why, for the record")
	}
	if err == nil {
		_, err = h.p.Decide(r.Context(), id, d == "approve", words)
	}
	if err != nil {
		code, detail := describeErr(err)
		h.renderPage(w, r, code, "", id+": "+detail)
		return
	}
	// Post/redirect/get: a reload of the page does not post the form again.
	http.Redirect(w, r, "/?decided="+url.QueryEscape(id), http.StatusSeeOther)
}
