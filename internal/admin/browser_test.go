package admin_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
		req.ActionHash)
	if pg.Overflows() {
		t.Error("the approvals page is wider than a phone's screen")
	}
	shot(t, pg, "approvals.png")

	pg.Act(`document.querySelector('section[id=` + strconv.Quote(req.ApprovalRequestID) + `] form[action$="/approve"] button').click()`)
	wantText(t, pg, "the page after approving", req.ApprovalRequestID+" approved", "Pending (0)", "Decided (1)")
	st, err := p.b.Agent.ApprovalStatus(context.Background(), req.ApprovalRequestID)
	if err != nil || st.Status != "approved" {
		t.Fatalf("the button did not approve: %+v %v", st, err)
	}

	pg.Navigate(p.f.srv.URL + "/transactions/" + txn)
	wantText(t, pg, "the draft's timeline", "draft", "No events yet")
	if _, err := p.b.Engine.AcceptOffer(context.Background(), record.AcceptInput{MandateID: p.b.Mandate, OfferID: o.Objects["offer"], ApprovalID: st.ApprovalID}); err != nil {
		t.Fatal(err)
	}
	pg.Navigate(p.f.srv.URL + "/transactions/" + txn)
	wantText(t, pg, "the committed timeline", "Timeline (2 events)", "agreement.direct", "agreement.committed", "draft → agreement_pending", "agreement_pending → committed")

	recordtest.Complete(t, p.b, p.s, txn)
	pg.Navigate(p.f.srv.URL + "/transactions")
	wantText(t, pg, "the list", txn, "completed", "3200.00 EUR")
	pg.Act(`document.querySelector('a[href="/transactions/` + txn + `"]').click()`)
	wantText(t, pg, "the completed timeline", "completed (final)", "Timeline (7 events)", "transaction.completed", "settlement.instructed",
		"Money", "Owed 3200.00 EUR", "Paid 3200.00 EUR", "Outstanding 0.00 EUR", "Settlement settled")
	if pg.Overflows() {
		t.Error("the timeline is wider than a phone's screen")
	}
	wide := br.NewPage(960)
	wide.Navigate(pg.URL())
	shot(t, wide, "timeline.png")

	pg.Act(`document.querySelector('a[href$="/verify"]').click()`)
	wantText(t, pg, "the verification", "Verification: verified", "0 failed", "Ledger (party's own rules, not the specification's)", "No finding.")
}
