package admin_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/browsertest"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// updateScreenshots rewrites the screenshots docs/cli.md shows.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the pages' screenshots to docs/img")

// shot saves a screenshot of the page in the test's directory, checks it
// is a picture, and, with -update-screenshots, writes it to docs/img.
func shot(t *testing.T, p *browsertest.Page, name string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	p.Screenshot(path)
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %d bytes, %v", name, len(b), err)
	}
	if *updateScreenshots {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func wantText(t *testing.T, p *browsertest.Page, what string, want ...string) {
	t.Helper()
	txt := strings.Join(strings.Fields(p.Text()), " ")
	for _, w := range want {
		if !strings.Contains(txt, w) {
			t.Errorf("%s does not show %q", what, w)
		}
	}
}

// In a real browser at a phone's width: sign in, read the held
// acceptance's summary, approve it with the button, and watch the
// transaction's timeline move to committed and on to completed; then
// verify the record from the page.
func TestBrowserApproveAndTimeline(t *testing.T) {
	t.Parallel()
	br := browsertest.Start(t)
	p := setupPair(t)
	o, req := p.offerHeld(t)
	txn := o.TransactionID
	pg := br.NewPage(390)

	pg.Navigate(p.f.srv.URL + "/")
	if !strings.HasSuffix(pg.URL(), "/login") {
		t.Fatalf("not sent to sign in: %s", pg.URL())
	}
	pg.Act(`document.querySelector('input[name=token]').value = ` + strconv.Quote(p.f.adminTok) + `; document.querySelector('form[action="/login"] button').click()`)
	wantText(t, pg, "the approvals page", "Pending (1)",
		"Accept an offer and form the agreement (offer.accept)", "org_delta",
		"Calibration and digital certificates for 20 pressure transmitters",
		"20 × H87 (piece)", "3200.00 EUR", "Offer open until", "r_acceptance", "procurement_lead of org_northstar",
		"Mandate limit 4000.00 EUR for any one act")
	if pg.Overflows() {
		t.Error("the approvals page is wider than a phone's screen")
	}
	shot(t, pg, "approvals.png")
	// The exact act and its hash, one click away.
	sel := `section[id=` + strconv.Quote(req.ApprovalRequestID) + `]`
	if strings.Contains(pg.Text(), req.ActionHash) {
		t.Error("the action hash is not folded away")
	}
	pg.Eval(`document.querySelector('` + sel + ` details:not(.decide) > summary').click()`)
	wantText(t, pg, "the exact act", req.ActionHash, `"action_type": "offer.accept",`)

	pg.Eval(`document.querySelector('` + sel + ` details.yes > summary').click()`)
	pg.Act(`document.querySelector('` + sel + ` form[action$="/approve"] button').click()`)
	wantText(t, pg, "the page after approving", req.ApprovalRequestID+" approved", "Pending (0)", "Decided (1)")
	st, err := p.b.Agent.ApprovalStatus(context.Background(), req.ApprovalRequestID)
	if err != nil || st.Status != "approved" {
		t.Fatalf("the button did not approve: %+v %v", st, err)
	}

	pg.Navigate(p.f.srv.URL + "/transactions/" + txn)
	wantText(t, pg, "the draft's timeline", "draft", "No events yet")
	if _, err := p.b.Engine.AcceptOffer(context.Background(), p.b.Actor(), record.AcceptInput{MandateID: p.b.Mandate, OfferID: o.Objects["offer"], ApprovalID: st.ApprovalID}); err != nil {
		t.Fatal(err)
	}
	pg.Navigate(p.f.srv.URL + "/transactions/" + txn)
	wantText(t, pg, "the committed timeline", "Timeline (5 steps, 2 events)", "Offer accepted; agreement proposed", "Agreement signed by both; committed",
		"draft → agreement_pending", "agreement_pending → committed")

	recordtest.Complete(t, p.b, p.s, txn)
	pg.Navigate(p.f.srv.URL + "/transactions")
	wantText(t, pg, "the list", txn, "completed", "3200.00 EUR")
	pg.Act(`document.querySelector('a[href="/transactions/` + txn + `"]').click()`)
	wantText(t, pg, "the completed timeline", "completed (final)", "Timeline (10 steps, 7 events)", "Transaction completed", "Payment instructed",
		"Amount 3200.00 EUR", "Outcome succeeded", "Money", "Owed 3200.00 EUR", "Paid 3200.00 EUR", "Outstanding 0.00 EUR", "Settlement settled")
	if pg.Overflows() {
		t.Error("the timeline is wider than a phone's screen")
	}
	wide := br.NewPage(960)
	wide.Navigate(pg.URL())
	shot(t, wide, "timeline.png")

	pg.Act(`document.querySelector('a[href$="/verify"]').click()`)
	wantText(t, pg, "the verification", "Verification: verified", "0 failed", "Ledger (party's own rules, not the specification's)", "No finding.")
}

// In a browser in Kolkata, at a phone's width: the counterparty is named,
// times read in the reader's zone with the zone said; Approve… decides
// nothing until its confirmation; and a condition being typed survives
// the page's live updates, which add a new request and move one decided
// elsewhere, with its reason, to Decided.
func TestBrowserConsoleLive(t *testing.T) {
	t.Parallel()
	br := browsertest.Start(t)
	p := setupPair(t)
	p.named(t, "org_delta", "Delta Calibration GmbH")
	_, req := p.offerHeld(t)
	pg := br.NewPage(390)
	pg.Zone("Asia/Kolkata", "en-US")
	pg.Navigate(p.f.srv.URL + "/login")
	pg.Act(`document.querySelector('input[name=token]').value = ` + strconv.Quote(p.f.adminTok) + `; document.querySelector('form[action="/login"] button').click()`)
	wantText(t, pg, "the console", "Pending (1)", "Counterparty Delta Calibration GmbH (org_delta)", "show by themselves")

	sel := `section[id=` + strconv.Quote(req.ApprovalRequestID) + `]`
	at, _ := pg.Eval(`document.querySelector('` + sel + ` time').getAttribute('datetime')`).(string)
	shown, _ := pg.Eval(`document.querySelector('` + sel + ` time').textContent`).(string)
	ts, err := time.Parse(time.RFC3339, at)
	if err != nil {
		t.Fatalf("the request's time %q: %v", at, err)
	}
	if local := ts.In(time.FixedZone("IST", 5*3600+1800)).Format("15:04:05"); !strings.Contains(shown, local) ||
		!(strings.Contains(shown, "GMT+5:30") || strings.Contains(shown, "IST")) {
		t.Errorf("the request's time %s shows as %q, not at %s in Kolkata with its zone", at, shown, local)
	}

	// The first click decides nothing: it asks, naming what and how much.
	if strings.Contains(pg.Text(), "Confirm approval") {
		t.Fatal("the confirmation shows before Approve… is clicked")
	}
	pg.Eval(`document.querySelector('` + sel + ` details.yes > summary').click()`)
	wantText(t, pg, "the confirmation", "You approve: Accept an offer and form the agreement (offer.accept), 3200.00 EUR, with Delta Calibration GmbH (org_delta).",
		"Confirm approval")
	if st, _ := p.b.Agent.ApprovalStatus(context.Background(), req.ApprovalRequestID); st.Status != "pending" {
		t.Fatalf("Approve… decided: %s", st.Status)
	}

	// Typing a condition; meanwhile a new request comes, and is shown.
	const typed = "collect after 14:00"
	area := `document.querySelector('` + sel + ` textarea[name=conditions]')`
	pg.Eval(`(() => { const a = ` + area + `; a.focus(); a.value = ` + strconv.Quote(typed) + `; return true })()`)
	kept := func(when string) {
		t.Helper()
		if v, _ := pg.Eval(`document.activeElement === ` + area + ` && ` + area + `.value === ` + strconv.Quote(typed) +
			` && document.querySelector('` + sel + ` details.yes').open`).(bool); !v {
			t.Fatalf("%s: the condition being typed, its focus or its open confirmation was lost", when)
		}
	}
	_, req2 := p.offerHeld(t)
	pg.WaitFor("the new request to show", `document.querySelectorAll('#pending > section').length === 2 && document.getElementById('pending-head').textContent === 'Pending (2)'`)
	kept("after a new request")

	// Rejected elsewhere, with a reason: it leaves Pending for Decided.
	if resp, body := p.f.do(t, call{method: "POST", path: "/api/approvals/" + req2.ApprovalRequestID + "/reject", bearer: p.f.adminTok,
		body: `{"reason": "Two calibrations in one month is one too many."}`}); resp.StatusCode != http.StatusOK {
		t.Fatalf("reject: %d %s", resp.StatusCode, body)
	}
	pg.WaitFor("the rejection to show", `document.querySelectorAll('#pending > section').length === 1 && document.getElementById('decided').innerText.includes('one too many')`)
	kept("after a rejection elsewhere")
	wantText(t, pg, "the console after the rejection", "Pending (1)", "Decided (1)", "Rejected: Accept an offer and form the agreement (offer.accept)",
		"Decided by prn_northstar_principal (procurement_lead)", "Reason Two calibrations in one month is one too many.")
	if pg.Overflows() {
		t.Error("the console is wider than a phone's screen")
	}

	pg.Act(`document.querySelector('` + sel + ` form[action$="/approve"] button').click()`)
	wantText(t, pg, "the console after approving", "Pending (0)", "Decided (2)", "Approved: Accept an offer", "Condition "+typed)
}
