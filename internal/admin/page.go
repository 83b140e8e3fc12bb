package admin

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/budget"
)

// style is the pages' only styling. The Content-Security-Policy admits it
// by hash, so no other inline style can apply. It is written for a phone
// first: one column, nothing wider than the screen (long identifiers and
// documents wrap or scroll in their box); printing drops the navigation
// and the forms.
const style = `*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:.8rem;color:#222;line-height:1.4}
h1{font-size:1.3rem;margin:.4rem 0}h2{font-size:1.1rem;margin-top:1.6rem}h3{font-size:1rem;margin:.2rem 0}
nav{display:flex;flex-wrap:wrap;gap:.4rem 1rem;align-items:center;border-bottom:1px solid #ddd;padding-bottom:.5rem}
nav a{font-weight:600}nav form{margin-left:auto}
.req,.ev,.obj{border:1px solid #bbb;border-radius:6px;padding:.8rem;margin:.8rem 0}
.req.decided{border-color:#ddd}
.summary{font-size:1.05rem}.summary dd{font-family:inherit}
dl{display:grid;grid-template-columns:minmax(7rem,max-content) 1fr;gap:.2rem .8rem;margin:0 0 .6rem}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.mono,code{font-family:ui-monospace,monospace;overflow-wrap:anywhere}
pre{background:#f6f6f6;padding:.6rem;overflow:auto;border-radius:4px;max-width:100%;font-size:.85rem}
.bad{color:#a00;font-weight:600}.ok{color:#060;font-weight:600}.gap{color:#850;font-weight:600}
.note{background:#eef6ee;padding:.6rem;border-radius:4px}.err{background:#fbeaea;padding:.6rem;border-radius:4px}
.live{color:#555;font-size:.9rem}
textarea{width:100%;height:4rem;font:inherit}
button,select{font-size:1rem;padding:.45rem 1rem;border-radius:6px;border:1px solid #888;background:#f4f4f4;color:#222}
.big{font-size:1.15rem;font-weight:600}.state{display:inline-block;padding:0 .4rem;border-radius:4px;background:#eee;font-family:ui-monospace,monospace}
.actions{display:flex;flex-wrap:wrap;gap:.6rem;align-items:flex-start;margin-top:.6rem}
details.decide{flex:1 1 17rem}
details.decide>summary{display:inline-block;list-style:none;padding:.55rem 1.2rem;border-radius:6px;font-size:1.05rem;font-weight:600;color:#222;border:1px solid #888;background:#fff}
details.decide>summary::-webkit-details-marker{display:none}
details.decide.yes>summary{background:#1f5fa8;border-color:#1f5fa8;color:#fff}
details.decide.no>summary{color:#a33;border-color:#a33}
details.decide[open]>summary{outline:3px solid #fc3}
.confirm{border:2px solid #1f5fa8;border-radius:6px;padding:.6rem;margin-top:.5rem;background:#f3f7fc}
details.no .confirm{border-color:#a33;background:#fbf1f1}
button.primary{background:#1f5fa8;border-color:#1f5fa8;color:#fff;font-weight:600}button.danger{background:#a33;border-color:#a33;color:#fff;font-weight:600}
ol.story{list-style:none;padding:0;margin:0}ol.story li{border-left:3px solid #89a;padding:.2rem 0 .6rem .8rem;margin-bottom:.4rem}
ol.story li.step-pending{border-left-color:#c90}ol.story li.step-bad{border-left-color:#a33}ol.story li.step-ok{border-left-color:#393}
ol.story .when{color:#555;font-size:.9rem;margin:0}
details.tech{font-size:.9rem;color:#444}
.rows{display:grid;gap:.5rem}.row{border:1px solid #ccc;border-radius:6px;padding:.6rem;display:grid;grid-template-columns:1fr auto;gap:.2rem .8rem}
.row .meta{color:#555;font-size:.9rem}
details summary{cursor:pointer;color:#246}
@media (max-width:30rem){dl{grid-template-columns:1fr}dt{margin-top:.3rem}.row{grid-template-columns:1fr}}
@media print{nav,form,.actions,.noprint,.live{display:none}body{max-width:none;padding:0;font-size:10.5pt}a{color:inherit;text-decoration:none}ol.story li,.ev{break-inside:avoid}}`

// csp admits the stylesheet by hash and same-origin script only: the
// console's script (/console.js), which fetches from this origin alone.
// No inline script or handler can run.
var csp = func() string {
	sum := sha256.Sum256([]byte(style))
	return "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}()

// pageTemplate is rendered with html/template, which escapes every value
// for its context: an act document is text inside <pre>, never markup.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"at": whenOf}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · party</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>{{.Style}}</style>{{if .SignedIn}}
<script src="/console.js" defer></script>{{end}}</head><body>
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
{{if not .Print}}<nav><span class="big">party · {{.Organization}}</span><a href="/">Approvals</a><a href="/transactions">Transactions</a>
<form method="post" action="/logout"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit">Sign out</button></form></nav>{{end}}
{{with .Notice}}<p class="note">{{.}}</p>{{end}}
{{with .Error}}<p class="err">{{.}}</p>{{end}}
{{if eq .Kind "approvals"}}{{template "approvals" .}}
{{else if eq .Kind "transactions"}}{{template "transactions" .}}
{{else if eq .Kind "timeline"}}{{template "timeline" .Timeline}}
{{else if eq .Kind "verify"}}{{template "verify" .}}
{{end}}
{{end}}
</body></html>
{{define "when"}}{{if .At}}<time datetime="{{.At}}">{{.Text}}</time>{{else}}{{.Text}}{{end}}{{end}}
{{define "items"}}{{range .}}<dt>{{.Label}}</dt><dd>{{if .At}}<time datetime="{{.At}}">{{.Value}}</time>{{else}}{{.Value}}{{end}}</dd>{{end}}{{end}}
{{define "approvals"}}
<main data-live="/api/console" data-version="{{.Version}}" data-every="{{.Poll}}">
<h1>Approvals</h1>
<p>Your agent asked you to approve these acts. Each opens with what it does in words, then what it does to the mandate's limit;
the exact act, as it will be taken, is one click away: the action hash is the SHA-256 of its canonical form, and an approval is bound to that hash alone.</p>
<p id="live" class="live">Reload this page to see new requests.</p>
<div id="budgets">{{with .Budgets}}<h2>Budgets</h2>
<p>What your agents have committed this organisation to pay, against the budgets you set (party budget). An act past a limit is refused; one past an approval threshold waits here.</p>
<dl class="summary">
{{range .}}<dt class="mono">{{.ID}}</dt><dd>{{.Currency}} {{.Kind}} per {{.Period}}{{with .AgentID}}, agent {{.}}{{end}}{{with .Counterparty}}, towards {{.}}{{end}}: <span class="big">{{.Used}}</span> used of {{.Limit}}, {{.Left}} left{{with .ApproveAbove}}; above {{.}} waits for your approval{{end}}</dd>
{{end}}</dl>
{{end}}</div>
<h2 id="pending-head">Pending ({{len .Pending}})</h2>
<div id="pending">
{{range .Pending}}
<section class="req" id="{{.RequestID}}" data-request>
{{template "summary" .}}
{{if not .HashOK}}<p class="err">The act below does not hash to the action hash this request names: do not approve it. Reject it, and ask why it differs.</p>{{end}}
<details><summary>The exact act (canonical JSON, what the hash covers) and its identifiers</summary>
<dl>
<dt>Request</dt><dd class="mono">{{.RequestID}}</dd>
<dt>Mandate</dt><dd class="mono">{{.MandateID}}</dd>
<dt>Action hash</dt><dd class="mono">{{.ActionHash}}{{if not .HashOK}} <span class="bad">does not match the act below: do not approve</span>{{end}}</dd>
</dl>
<pre>{{.ActText}}</pre></details>
<div class="actions">
{{if .HashOK}}<details class="decide yes"><summary>Approve…</summary>
<form method="post" action="/approvals/{{.RequestID}}/approve" class="confirm">
<input type="hidden" name="csrf" value="{{$.CSRF}}">
<p>You approve: <b>{{.Summary.Act}}</b>{{with .Summary.Total}}, <b>{{.}}</b>{{end}}{{with .Summary.Counterparty}}, with {{.}}{{end}}.
Your agent may then take exactly this act{{with .GoodFor}}, within {{.}} of now{{end}}.</p>
<label>Conditions (optional, one per line; signed with your approval)<br><textarea name="conditions" maxlength="4000"></textarea></label>
<p><button type="submit" class="primary">Confirm approval</button></p>
</form></details>{{end}}
<details class="decide no"><summary>Reject…</summary>
<form method="post" action="/approvals/{{.RequestID}}/reject" class="confirm">
<input type="hidden" name="csrf" value="{{$.CSRF}}">
<p>You reject: <b>{{.Summary.Act}}</b>{{with .Summary.Total}}, {{.}}{{end}}. Your agent may not take this act on this request.</p>
<label>Reason (required; signed with your rejection and kept with the request)<br><textarea name="reason" required maxlength="512"></textarea></label>
<p><button type="submit" class="danger">Confirm rejection</button></p>
</form></details>
</div>
</section>
{{else}}
<p id="none-pending">No pending approval requests.</p>
{{end}}
</div>
<h2 id="decided-head">Decided ({{len .Decided}})</h2>
<div id="decided">
{{range .Decided}}
<section class="req decided" id="d-{{.RequestID}}">
<h3 class="big"><span class="{{if eq .Status "approved"}}ok{{else}}bad{{end}}">{{if eq .Status "approved"}}Approved{{else if eq .Status "rejected"}}Rejected{{else}}{{.Status}}{{end}}</span>: {{.Summary.Act}}</h3>
<dl class="summary">
{{with .Decision}}<dt>Decided by</dt><dd>{{.By}}, {{template "when" .At}}</dd>
{{range .Notes}}<dt>{{.Label}}</dt><dd>{{.Value}}</dd>{{end}}
{{if .Until.At}}<dt>Good until</dt><dd>{{template "when" .Until}}</dd>{{end}}{{end}}
{{with .Summary.Counterparty}}<dt>Counterparty</dt><dd>{{.}}</dd>{{end}}
{{with .Summary.Total}}<dt>Total</dt><dd>{{.}}</dd>{{end}}
{{with .Summary.Transaction}}<dt>Transaction</dt><dd class="mono"><a href="/transactions/{{.}}">{{.}}</a></dd>{{end}}
</dl>
<details><summary>The exact act and its identifiers</summary>
<dl>
<dt>Request</dt><dd class="mono">{{.RequestID}}</dd>
<dt>Approval</dt><dd class="mono">{{.ApprovalID}}</dd>
<dt>Mandate</dt><dd class="mono">{{.MandateID}}</dd>
<dt>Action hash</dt><dd class="mono">{{.ActionHash}}</dd>
</dl>
<pre>{{.ActText}}</pre></details>
</section>
{{else}}
<p id="none-decided">None yet.</p>
{{end}}
</div>
</main>
{{end}}
{{define "summary"}}{{with .Summary}}
<h3 class="big">{{.Act}}</h3>
<dl class="summary">
{{with .Counterparty}}<dt>Counterparty</dt><dd>{{.}}</dd>{{end}}
{{with .Item}}<dt>Item</dt><dd>{{.}}</dd>{{end}}
{{with .Quantity}}<dt>Quantity</dt><dd>{{.}}</dd>{{end}}
{{with .Total}}<dt>Total</dt><dd class="big">{{.}}</dd>{{end}}{{end}}
{{with .Limit}}<dt>Mandate limit</dt><dd>{{.}} for any one act</dd>{{end}}
{{with .Room}}<dt>Room left</dt><dd>{{.}}</dd>{{end}}
{{with .Committed}}<dt>Committed so far</dt><dd>{{.}}</dd>{{end}}
{{with .HeldBy}}<dt>Held by budget</dt><dd>{{.}}</dd>{{end}}
{{with .Summary}}{{with .Transaction}}<dt>Transaction</dt><dd class="mono"><a href="/transactions/{{.}}">{{.}}</a></dd>{{end}}
{{with .Profile}}<dt>Profile</dt><dd class="mono">{{.}}</dd>{{end}}
{{with .Category}}<dt>Category</dt><dd>{{.}}</dd>{{end}}
{{template "items" .Dates}}
{{template "items" .Terms}}
{{template "items" .Other}}
{{range .Rules}}<dt>Held by rule</dt><dd><span class="mono">{{.ID}}</span>{{with .Condition}}: when {{.}}{{end}}; approver {{.Approver}}{{with .GoodFor}}; an approval is good for {{.}} after it is given{{end}}{{if .Until.At}} (given now: until {{template "when" .Until}}){{end}}</dd>{{end}}{{end}}
</dl>
{{end}}
{{define "transactions"}}
<h1>Transactions</h1>
<form method="get" action="/transactions"><label>State <select name="state"><option value="">all</option>
{{range .States}}<option value="{{.}}"{{if eq . $.Filter}} selected{{end}}>{{.}}</option>{{end}}</select></label> <button type="submit">Show</button></form>
<div class="rows">
{{range .Rows}}
<div class="row"><div><a class="mono" href="/transactions/{{.ID}}">{{.ID}}</a><br>{{with .Item}}{{.}}{{else}}(no terms yet){{end}}</div>
<div><span class="state">{{.State}}</span>{{with .Amount}}<br><span class="big">{{.}}</span>{{end}}</div>
<div class="meta">{{.Role}} with {{.Counterparty}} · {{.Events}} events</div><div class="meta">last activity {{template "when" (at .UpdatedAt)}}</div></div>
{{else}}
<p>No transactions{{with .Filter}} in state {{.}}{{end}}.</p>
{{end}}
</div>
{{with .Next}}<p><a href="/transactions?state={{$.Filter}}&amp;before={{.}}">Older transactions</a></p>{{end}}
{{end}}
{{define "head"}}
<h1>Transaction <span class="mono">{{.ID}}</span></h1>
<dl class="summary">
<dt>State</dt><dd><span class="state">{{.State}}</span>{{if .Terminal}} (final){{end}}</dd>
<dt>Counterparty</dt><dd>{{.Counterparty}} (you are the {{.Role}})</dd>
{{with .Item}}<dt>Item</dt><dd>{{.}}</dd>{{end}}
{{with .Quantity}}<dt>Quantity</dt><dd>{{.}}</dd>{{end}}
{{with .Amount}}<dt>Total</dt><dd class="big">{{.}}</dd>{{end}}
<dt>Chain</dt><dd>{{.ChainStatus}}</dd>
{{with .Pending}}<dt>Waiting</dt><dd>{{.}}</dd>{{end}}
{{with .Notice}}<dt>Notice</dt><dd class="bad">{{.}}</dd>{{end}}
</dl>
{{end}}
{{define "timeline"}}
{{template "head" .}}
{{if .Print}}<p class="noprint">The printable view: every step with its identifiers and hashes. Print it with your browser's Print command. <a href="/transactions/{{.ID}}">Back to the timeline</a></p>
{{else}}<p class="noprint"><a class="big" href="/transactions/{{.ID}}/verify">Verify this record</a> (runs the seven steps of evidence verification over this record, as a third party would over its export) · <a href="/transactions/{{.ID}}?print=1">Printable view</a></p>{{end}}
{{with .Deadlines}}<h2>Deadlines</h2>
<dl>{{template "items" .}}</dl>{{end}}
<h2>Timeline ({{len .Steps}} steps, {{len .Events}} events)</h2>
<ol class="story">
{{range .Steps}}
<li{{with .Class}} class="step-{{.}}"{{end}} id="{{.Anchor}}">
<p class="when">{{template "when" .When}}</p>
<h3>{{.Title}}</h3>
{{with .Facts}}<dl>{{template "items" .}}</dl>{{end}}
{{if or .Tech .Links}}<details class="tech"{{if $.Print}} open{{end}}><summary>Identifiers and hashes</summary><dl>
{{range .Links}}<dt>{{.Member}}</dt><dd><a class="mono" href="#{{.ID}}">{{.ID}}</a> ({{.Type}})</dd>{{end}}
{{range .Tech}}<dt>{{.Label}}</dt><dd class="mono">{{.Value}}</dd>{{end}}
</dl></details>{{end}}
</li>
{{else}}
<li>Nothing yet.</li>
{{end}}
</ol>
{{if not .Events}}<p>No events yet: nothing has been agreed.</p>{{end}}
{{if .Forks}}
<h2>Forks ({{len .Forks}})</h2>
<p>Events a counterparty sent for a position already taken. They were refused and are kept here; they are not part of the record.</p>
{{range .Forks}}<div class="ev"><dl><dt>Position</dt><dd>{{.Sequence}}</dd><dt>Event</dt><dd class="mono">{{.EventID}}</dd><dt>From</dt><dd>{{.From}}</dd><dt>Detected</dt><dd>{{template "when" (at .DetectedAt)}}</dd><dt>Why</dt><dd>{{.Detail}}</dd></dl></div>{{end}}
{{end}}
{{if .Exceptions}}
<h2>Exceptions ({{len .Exceptions}})</h2>
<p>Something went wrong after commitment: a failed payment, or a disputed obligation. The exception pauses the transaction until it is remediated, resolved or the transaction is terminated.</p>
{{range .Exceptions}}<div class="ev"><dl><dt>Exception</dt><dd><a class="mono" href="#{{.ExceptionID}}">{{.ExceptionID}}</a></dd><dt>Type</dt><dd>{{.ExceptionType}}</dd><dt>Status</dt><dd><span class="state">{{.Status}}</span>{{with .EndedBy}} (the transaction ended: {{.}}){{end}}</dd><dt>Obligation</dt><dd><a class="mono" href="#{{.ObligationID}}">{{.ObligationID}}</a></dd>{{with .DisputeID}}<dt>Dispute</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}{{with .SettlementInstructionID}}<dt>Failed instruction</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}<dt>Opened by</dt><dd>{{.OpenedBy}} at {{template "when" (at .OpenedAt)}}</dd>{{range .RemediationOffers}}<dt>Remediation offered</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}</dl></div>{{end}}
{{end}}
{{if .Disputes}}
<h2>Disputes ({{len .Disputes}})</h2>
<p>Raising a dispute suspends nothing; the respondent determines it.</p>
{{range .Disputes}}<div class="ev"><dl><dt>Dispute</dt><dd><a class="mono" href="#{{.DisputeID}}">{{.DisputeID}}</a></dd><dt>Raised by</dt><dd>{{.RaisedBy}} against {{.Respondent}} at {{template "when" (at .RaisedAt)}}</dd><dt>Subject</dt><dd>{{.SubjectType}} <a class="mono" href="#{{.SubjectID}}">{{.SubjectID}}</a></dd><dt>Grounds</dt><dd>{{range $i, $g := .Grounds}}{{if $i}}, {{end}}{{$g}}{{end}}</dd>{{with .Description}}<dt>Description</dt><dd>{{.}}</dd>{{end}}<dt>Determined</dt><dd>{{if .Determined}}yes{{else if .EndedBy}}no: the transaction ended ({{.EndedBy}}){{else}}<span class="gap">not yet</span>{{end}}</dd>{{range .Determinations}}<dt>Determination</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}</dl></div>{{end}}
{{end}}
{{if .Determinations}}
<h2>Determinations ({{len .Determinations}})</h2>
<p>A determination is never deleted; a later one supersedes it, with a reason.</p>
{{range .Determinations}}<div class="ev"><dl><dt>Determination</dt><dd><a class="mono" href="#{{.DeterminationID}}">{{.DeterminationID}}</a></dd><dt>Of dispute</dt><dd><a class="mono" href="#{{.DisputeID}}">{{.DisputeID}}</a></dd><dt>Determiner</dt><dd>{{.Determiner}} at {{template "when" (at .DeterminedAt)}}</dd><dt>Effect</dt><dd>{{.Effect}}</dd><dt>Finding</dt><dd>{{.Finding}}</dd>{{with .StateResult}}<dt>State result</dt><dd>{{.}}</dd>{{end}}{{with .Supersedes}}<dt>Supersedes</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}{{with .SupersessionReason}}<dt>Reason</dt><dd>{{.}}</dd>{{end}}{{with .SupersededBy}}<dt>Superseded by</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}</dl></div>{{end}}
{{end}}
{{if .Obligations}}
<h2>Obligations</h2>
{{range .Obligations}}<div class="ev"><dl><dt>Obligation</dt><dd><a class="mono" href="#{{.ObligationID}}">{{.ObligationID}}</a></dd><dt>State</dt><dd><span class="state">{{.State}}</span></dd>{{range .Assertions}}<dt>Assertion</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}</dl></div>{{end}}
{{end}}
{{if .Money}}
<h2>Money</h2>
<p>What each obligation is owed and was paid, as this instance's ledger reads it from the record: owed is the accepted share of the consideration, nothing before acceptance;
paid, what a payment rail reported succeeded; in flight, what was instructed and not yet answered; forgone, what both parties signed is not to be paid; outstanding, what may still be instructed.</p>
{{range .Money}}<div class="ev"><dl><dt>Obligation</dt><dd><a class="mono" href="#{{.ObligationID}}">{{.ObligationID}}</a></dd>
<dt>Status</dt><dd><span class="state">{{.Status}}</span>{{with .AcceptedBy}} by <a class="mono" href="#{{.}}">{{.}}</a>{{end}}</dd>{{with .RemainderOf}}<dt>Remainder of</dt><dd><a class="mono" href="#{{.}}">{{.}}</a></dd>{{end}}
<dt>Consideration</dt><dd>{{.Consideration}}</dd>
<dt>Owed</dt><dd class="big">{{.Owed}}</dd>
<dt>Paid</dt><dd>{{.Paid}}</dd>
<dt>In flight</dt><dd>{{.InFlight}}</dd>{{with .Failed}}<dt>Failed</dt><dd>{{.}}</dd>{{end}}{{with .Reversed}}<dt>Reversed</dt><dd class="bad">{{.}}</dd>{{end}}
<dt>Forgone</dt><dd>{{.Forgone}}</dd>{{range .Adjustments}}<dt>Adjustment record</dt><dd class="mono">{{.}}</dd>{{end}}
<dt>Outstanding</dt><dd class="big">{{.Outstanding}}</dd>
<dt>Settlement</dt><dd><span{{with .Class}} class="{{.}}"{{end}}>{{.Settlement}}</span>{{with .Says}} ({{.}}){{end}}</dd>
{{range .Instructions}}<dt>Instruction</dt><dd><a class="mono" href="#{{.ID}}">{{.ID}}</a> {{.Amount}} <span class="state">{{.Status}}</span> · {{if .Receipts}}receipts{{range .Receipts}} <a class="mono" href="#{{.}}">{{.}}</a>{{end}}{{else}}no receipt yet{{end}}{{if .Contradicting}} · <span class="bad">contradicted by{{range .Contradicting}} <a class="mono" href="#{{.}}">{{.}}</a>{{end}}</span> (kept as evidence, changing nothing){{end}}</dd>
{{end}}</dl></div>{{end}}
{{end}}
{{if not .Print}}<h2>Objects ({{len .Objects}})</h2>
<p>Every object of the record as this instance holds it, in the order it was stored. Open one to read it in words and as signed.</p>
{{range .Objects}}
<details class="obj" id="{{.ID}}"><summary><b>{{.Type}}</b> <span class="mono">{{.ID}}</span> · {{.CreatedBy}} · {{template "when" (at .CreatedAt)}}</summary>
<dl>{{template "items" .Words}}<dt>Content hash</dt><dd class="mono">{{.Hash}}</dd></dl>
<details><summary>As held (canonical JSON)</summary><pre>{{.JSON}}</pre></details>
</details>
{{end}}{{end}}
{{end}}
{{define "verify"}}
{{template "head" .Timeline}}
{{with .Report}}
<h2>Verification: <span class="{{.Class}}">{{.Verdict}}</span></h2>
<p>{{.Counts.Verified}} verified · {{.Counts.Failed}} failed · {{.Counts.NotCheckable}} not checkable, under rules version {{.RulesVersion}}, at {{template "when" (at .VerifiedAt)}}.</p>
{{if .Failed}}<h3 class="bad">Failed</h3>
{{range .Failed}}<div class="ev"><dl><dt>Code</dt><dd class="mono bad">{{.Code}}</dd><dt>Step</dt><dd>{{.Step}}: {{.Name}}</dd><dt>Subject</dt><dd class="mono">{{.Subject}}</dd><dt>Why</dt><dd>{{.Detail}}</dd></dl></div>{{end}}{{end}}
{{if .Gaps}}<h3 class="gap">Not checkable</h3>
{{range .Gaps}}<div class="ev"><dl><dt>Step</dt><dd>{{.Step}}: {{.Name}}</dd><dt>Subject</dt><dd class="mono">{{.Subject}}</dd><dt>Missing</dt><dd>{{.Detail}}</dd></dl></div>{{end}}{{end}}
{{if .Unresolved}}<p>Unresolved references: <span class="mono">{{range .Unresolved}}{{.}} {{end}}</span></p>{{end}}
{{if .Undisclosed}}<p>Undisclosed streams: <span class="mono">{{range .Undisclosed}}{{.}} {{end}}</span></p>{{end}}
{{if .Unregistered}}<p>Unregistered types: <span class="mono">{{range .Unregistered}}{{.}} {{end}}</span></p>{{end}}
<details><summary>Verified checks ({{len .Verified}})</summary>
<ol>{{range .Verified}}<li>step {{.Step}} {{.Name}} <span class="mono">{{.Subject}}</span>: {{.Detail}}</li>{{end}}</ol></details>
<h2>Ledger (party's own rules, not the specification's)</h2>
<p>Whether the money in the record adds up: what was instructed, paid and completed against what each obligation is owed (each obligation's money is on the timeline).
No step fails for a finding here: the steps above judge a record as the specification does.</p>
{{range .Unjudged}}<p>Not judged: {{.}}.</p>{{end}}
{{range .Findings}}<div class="ev"><dl><dt>Rule</dt><dd class="mono">{{.Rule}}</dd><dt>Subject</dt><dd class="mono">{{.Subject}}</dd><dt>Code</dt><dd class="mono bad">{{.Code}}</dd><dt>Why</dt><dd>{{.Detail}}</dd></dl></div>
{{else}}<p class="ok">No finding.</p>{{end}}
{{end}}
<p><a href="/transactions/{{.Timeline.ID}}">Back to the timeline</a></p>
{{end}}
`))

// PollSeconds is how often an open approvals page asks whether anything
// changed (GET /api/console, a few bytes); only when something did does it
// fetch the page again, and then it changes only the parts that changed
// (console.js).
const PollSeconds = 3

// pageData is what the template renders.
type pageData struct {
	Title        string
	Kind         string // approvals, transactions, timeline, verify, error
	Style        template.CSS
	Login        bool
	SignedIn     bool
	Print        bool
	Organization string
	CSRF         string
	Notice       string
	Error        string
	// The approvals page: the version it shows (apiConsole), how often
	// it asks, the requests and the budgets.
	Version string
	Poll    int
	Pending []approvalView
	Decided []approvalView
	Budgets []budget.Standing
	// The transactions list.
	States []string
	Filter string
	Rows   []txnRow
	Next   string
	// One transaction, and its verification.
	Timeline *timelineView
	Report   *reportView
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
	Summary       Summary
	ActText       string
	Status        string
	ApprovalID    string
	HeldBy        string
	// GoodFor is how long an approval given now would be good for.
	GoodFor string
	// The mandate's limit on any one act, the room this act leaves under
	// it, and what the mandate's agent committed so far (mandateWords).
	Limit, Room, Committed string
	// Decision is who decided, when and with what words; nil while
	// pending.
	Decision *decisionView
}

// decisionView is a decided request's approval object in words.
type decisionView struct {
	By    string
	At    when
	Notes []item // an approval's conditions, or a rejection's reason
	Until when   // an approval's expiry; none for a rejection
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

// show renders a page for the signed-in principal.
func (h *handler) show(w http.ResponseWriter, _ *http.Request, code int, d pageData) {
	d.SignedIn, d.Organization, d.CSRF = true, h.names()(h.org), h.csrf
	h.render(w, code, d)
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
