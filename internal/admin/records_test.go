package admin_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/partyd/party/internal/admin"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// pair is the walkthrough's two instances with the buyer's admin listener
// over its record engine.
type pair struct {
	b, s *recordtest.Side
	c    *recordtest.Clock
	f    *fixture
}

func setupPair(t *testing.T) *pair {
	t.Helper()
	b, s, c := recordtest.Pair(t)
	f := &fixture{n: b.Node, agent: b.Agent, mandate: b.Mandate}
	f.adminTok, _ = instance.LoadToken(b.Node.Dir, instance.AdminTokenFile)
	f.agentTok, _ = instance.LoadToken(b.Node.Dir, instance.AgentTokenFile)
	f.srv = httptest.NewServer(admin.Handler(b.Princ, f.adminTok, []string{f.agentTok}, nil, admin.WithRecord(b.Engine)))
	t.Cleanup(f.srv.Close)
	return &pair{b: b, s: s, c: c, f: f}
}

// offerHeld has the supplier offer the walkthrough terms and the buyer's
// agent ask for approval of their acceptance; it returns the offer and
// the request.
func (p *pair) offerHeld(t *testing.T) (record.Outcome, agent.ApprovalRequestResult) {
	t.Helper()
	ctx := context.Background()
	o := recordtest.Offer(t, p.s, "3200.00")
	act, err := p.b.Engine.AcceptanceAct(ctx, p.b.Mandate, o.Objects["offer"])
	if err != nil {
		t.Fatal(err)
	}
	req, err := p.b.Agent.RequestApproval(ctx, agent.VerifyInput{MandateID: p.b.Mandate, ProposedAction: act})
	if err != nil {
		t.Fatal(err)
	}
	return o, req
}

// text reduces a page to its visible words, one space apart.
var tags = regexp.MustCompile(`(?s)<style>.*?</style>|<[^>]+>`)

func text(body string) string {
	return strings.Join(strings.Fields(html.UnescapeString(tags.ReplaceAllString(body, " "))), " ")
}

func wantAll(t *testing.T, page, body string, want ...string) {
	t.Helper()
	txt := text(body)
	for _, w := range want {
		if !strings.Contains(txt, w) {
			t.Errorf("%s does not say %q", page, w)
		}
	}
}

// The held acceptance opens with its summary in words, before its exact
// act and hash; the page reloads itself.
func TestApprovalSummary(t *testing.T) {
	t.Parallel()
	p := setupPair(t)
	o, req := p.offerHeld(t)
	_, body := p.f.do(t, call{method: "GET", path: "/", cookie: p.f.adminTok})
	wantAll(t, "the approvals page", body,
		"Accept an offer and form the agreement (offer.accept)",
		"Counterparty org_delta",
		"Item Calibration and digital certificates for 20 pressure transmitters",
		"Quantity 20 × H87 (piece)",
		"Total 3200.00 EUR",
		"Transaction "+o.TransactionID,
		"Offer open until",
		"Completion · business days after collection 8",
		"Payment · prepayment percent 25",
		"Acceptance · certificate required yes",
		"Held by rule r_acceptance : when the act is offer.accept; approver procurement_lead of org_northstar; an approval is good for 1h0m0s after it is given",
		"Action hash "+req.ActionHash,
	)
	if txt := text(body); strings.Index(txt, "Total 3200.00 EUR") > strings.Index(txt, `"action_type": "offer.accept"`) || !strings.Contains(txt, `"action_type": "offer.accept"`) {
		t.Fatal("the summary does not come before the exact act")
	}
	if !strings.Contains(body, `<meta http-equiv="refresh" content="15">`) {
		t.Fatal("the approvals page does not refresh itself")
	}
	if !strings.Contains(body, `name="viewport" content="width=device-width`) {
		t.Fatal("no viewport for a phone")
	}
}

// The transactions list, a timeline moving as the record does, the objects
// behind each event, the state filter, and the verification of the
// record.
func TestTransactionPages(t *testing.T) {
	t.Parallel()
	p := setupPair(t)
	o, req := p.offerHeld(t)
	txn := o.TransactionID
	_, body := p.f.do(t, call{method: "GET", path: "/transactions", cookie: p.f.adminTok})
	wantAll(t, "the list", body, txn, "draft", "3200.00 EUR", "buyer with org_delta", "0 events")
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the draft's timeline", body, "No events yet", "offer "+o.Objects["offer"])

	// Approve on the page, then the agent accepts: the timeline moves.
	tok := csrfInput.FindStringSubmatch(body)[1]
	resp, _ := p.f.do(t, call{method: "POST", path: "/approvals/" + req.ApprovalRequestID + "/approve", cookie: p.f.adminTok, form: url.Values{"csrf": {tok}}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	st, _ := p.b.Agent.ApprovalStatus(context.Background(), req.ApprovalRequestID)
	if _, err := p.b.Engine.AcceptOffer(context.Background(), record.AcceptInput{MandateID: p.b.Mandate, OfferID: o.Objects["offer"], ApprovalID: st.ApprovalID}); err != nil {
		t.Fatal(err)
	}
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the committed timeline", body,
		"State committed", "Timeline (2 events)",
		"1. Offer accepted; agreement proposed (agreement.direct)", "State draft → agreement_pending",
		"Appended by org_northstar Countersigned by org_delta",
		"2. Agreement signed by both; committed (agreement.committed)", "State agreement_pending → committed",
		"Offer id "+o.Objects["offer"]+" (offer)",
	)
	if !regexp.MustCompile(`Agreement id agr_[0-9a-f]+ \(agreement\)`).MatchString(text(body)) {
		t.Error("the committing event does not name the agreement behind it")
	}

	recordtest.Complete(t, p.b, p.s, txn)
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the completed timeline", body, "State completed (final)", "Timeline (7 events)",
		"3. Obligation issued (obligation.activated)", "4. Performance declared (performance.declared)",
		"5. Performance accepted (acceptance.granted)", "6. Payment instructed (settlement.instructed)",
		"7. Transaction completed (transaction.completed)", "Appended by org_delta Countersigned by org_northstar",
		"adapter_receipt", "settlement_instruction", "evidence", "performance_event", "obligation_response")
	// The obligation's money: accepted, owed all of its consideration,
	// paid in full by one instruction the sandbox rail reported succeeded.
	obl, stl, rcp := objectOf(t, p.b, txn, "obligation"), objectOf(t, p.b, txn, "settlement_instruction"), objectOf(t, p.b, txn, "adapter_receipt")
	wantAll(t, "the completed timeline's money", body, "Money",
		"Obligation "+obl+" Status accepted by obr_", "Consideration 3200.00 EUR",
		"Owed 3200.00 EUR Paid 3200.00 EUR In flight 0.00 EUR Forgone 0.00 EUR Outstanding 0.00 EUR",
		"Settlement settled (nothing more is to be paid or awaited)",
		"Instruction "+stl+" 3200.00 EUR succeeded · receipts "+rcp)
	if txt := text(body); strings.Contains(txt, "Failed") || strings.Contains(txt, "Reversed") || strings.Contains(txt, "contradicted") {
		t.Error("a payment that succeeded once shows a failure, a reversal or a contradiction")
	}
	_, body = p.f.do(t, call{method: "GET", path: "/transactions?state=completed", cookie: p.f.adminTok})
	wantAll(t, "the completed filter", body, txn, "7 events")
	_, body = p.f.do(t, call{method: "GET", path: "/transactions?state=draft", cookie: p.f.adminTok})
	if strings.Contains(body, txn) {
		t.Fatal("the draft filter lists a completed transaction")
	}
	wantAll(t, "the draft filter", body, "No transactions in state draft")

	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn + "/verify", cookie: p.f.adminTok})
	wantAll(t, "the verification", body, "Verification: verified", "0 failed", "under rules version 1.3",
		"Ledger (party's own rules, not the specification's)", "No finding.")
	if strings.Contains(text(body), "Failed Code") {
		t.Fatal("the report shows a failed check")
	}

	// Unknown transactions are 404; the pages need the admin token.
	if resp, _ := p.f.do(t, call{method: "GET", path: "/transactions/txn_0123456789abcdef01234567", cookie: p.f.adminTok}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown transaction: %d", resp.StatusCode)
	}
	for _, path := range []string{"/transactions", "/transactions/" + txn, "/transactions/" + txn + "/verify"} {
		if resp, _ := p.f.do(t, call{method: "GET", path: path, bearer: p.f.agentTok}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the agent token on %s: %d", path, resp.StatusCode)
		}
		if resp, _ := p.f.do(t, call{method: "GET", path: path}); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("no token on %s: %d", path, resp.StatusCode)
		}
	}
}

// objectOf returns the id of the one object of a type a side holds for a
// transaction.
func objectOf(t *testing.T, sd *recordtest.Side, txn, typ string) string {
	t.Helper()
	raws, err := sd.Node.Org.Store.TransactionObjectsOfType(context.Background(), txn, typ)
	if err != nil || len(raws) != 1 {
		t.Fatalf("%d %s objects on %s: %v", len(raws), typ, txn, err)
	}
	o, err := canonical.DecodeObject(raws[0])
	if err != nil {
		t.Fatal(err)
	}
	return o["id"].(string)
}

// An obligation's money on the timeline before it is paid: nothing owed
// while performance awaits acceptance; once accepted, all of its
// consideration owed and outstanding, nothing paid.
func TestTimelineShowsUnpaidMoney(t *testing.T) {
	t.Parallel()
	p := setupPair(t)
	ctx := context.Background()
	txn := recordtest.Form(t, p.b, p.s, "3200.00")
	out, err := p.b.Engine.IssueObligation(ctx, record.ObligationInput{MandateID: p.b.Mandate, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	obl := out.Objects["obligation"]
	claim := "calibration certificates, 20 transmitters"
	if _, err := p.s.Engine.AssertPerformance(ctx, record.AssertInput{MandateID: p.s.Mandate, ObligationID: obl, AssertedQuantity: "20",
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: claim, ArtifactHash: canonical.SHA256Hex([]byte(claim))}}}); err != nil {
		t.Fatal(err)
	}
	_, body := p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the timeline awaiting acceptance", body, "Money",
		"Obligation "+obl+" Status open Consideration 3200.00 EUR",
		"Owed 0.00 EUR Paid 0.00 EUR In flight 0.00 EUR Forgone 0.00 EUR Outstanding 0.00 EUR",
		"Settlement not_due (nothing is owed until the obligation is accepted)")

	out, err = p.b.Engine.Respond(ctx, record.RespondInput{MandateID: p.b.Mandate, ObligationID: obl, ResponseType: "accept"})
	if err != nil || out.State != "settlement_pending" {
		t.Fatalf("accept: %+v %v", out, err)
	}
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the timeline awaiting payment", body,
		"Obligation "+obl+" Status accepted by "+out.Objects["obligation_response"]+" Consideration 3200.00 EUR",
		"Owed 3200.00 EUR Paid 0.00 EUR In flight 0.00 EUR Forgone 0.00 EUR Outstanding 3200.00 EUR",
		"Settlement unpaid (owed and not yet paid in full")
	if strings.Contains(text(body), "Instruction stl_") {
		t.Error("an unpaid obligation shows an instruction")
	}
}

// TestTimelineShowsDisputesAndExceptions: a dispute over the buyer's
// rejection, the buyer's determination conceding it, and an exception a
// dispute over the obligation's state opened show on the buyer's
// timeline, each in words, with the events that moved the state.
func TestTimelineShowsDisputesAndExceptions(t *testing.T) {
	t.Parallel()
	p := setupPair(t)
	txn := recordtest.Form(t, p.b, p.s, "3200.00")
	d := recordtest.Dispute(t, p.b, p.s, p.c, txn)
	obl, dsp, det := d.ObligationID, d.ActDispute, d.Determination
	_, body := p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the disputed timeline", body, "State exception_open", "6. Exception opened (exception.opened)",
		"State in_performance → exception_open",
		"Exceptions (1)", "Type obligation_disputed Status open Obligation "+obl,
		"Disputes (2)", "Dispute "+dsp, "Raised by org_delta against org_northstar", "Subject act "+d.Rejection, "Grounds obligation_wrongly_rejected",
		"Description The certificate covers all twenty.", "Determined yes Determination "+det, "Determined not yet",
		"Determinations (1)", "Determination "+det+" Of dispute "+dsp, "Determiner org_northstar", "Effect presumptive",
		"Finding The rejection is not supported by the certificate.")
}
