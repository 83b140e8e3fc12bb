package admin_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	act, err := p.b.Engine.AcceptanceAct(ctx, p.b.Actor(), p.b.Mandate, o.Objects["offer"])
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

// The held acceptance opens with its summary in words and what it does to
// the mandate's limit, before its exact act and hash, which are folded
// one click away; the page does not reload itself.
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
		"Held by rule r_acceptance : when the act is offer.accept; approver procurement_lead of org_northstar; an approval is good for 1 hour after it is given (given now: until",
		"Mandate limit 4000.00 EUR for any one act",
		"Room left 800.00 EUR after this act's 3200.00 EUR",
		"Committed so far 0 EUR by agt_northstar_agent since the mandate took effect, in 0 transactions",
		"Action hash "+req.ActionHash,
		"You approve: Accept an offer and form the agreement (offer.accept) , 3200.00 EUR , with org_delta. Your agent may then take exactly this act, within 1 hour of now.",
		"Confirm approval", "Reason (required; signed with your rejection and kept with the request)", "Confirm rejection",
	)
	if !regexp.MustCompile(`<dt>Requested</dt><dd><time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">\d+ [A-Z][a-z]+ \d{4}, \d\d:\d\d:\d\d UTC</time></dd>`).MatchString(body) {
		t.Error("the request's time is not a <time> to the second, in UTC words")
	}
	if !strings.Contains(body, "<details><summary>The exact act (canonical JSON, what the hash covers) and its identifiers</summary>") {
		t.Error("the exact act is not one click away")
	}
	if txt := text(body); strings.Index(txt, "Total 3200.00 EUR") > strings.Index(txt, `"action_type": "offer.accept"`) || !strings.Contains(txt, `"action_type": "offer.accept"`) {
		t.Fatal("the summary does not come before the exact act")
	}
	if strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, `<main data-live="/api/console" data-version="`) {
		t.Fatal("the approvals page reloads itself, or is not live")
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
	// Before any event, the story already has the offer and the request.
	wantAll(t, "the draft's timeline", body, "No events yet", "offer "+o.Objects["offer"],
		"Offer received from org_delta Item Calibration and digital certificates for 20 pressure transmitters Quantity 20 × H87 (piece) Total 3200.00 EUR",
		"Your agent asked for your approval: Accept an offer and form the agreement (offer.accept) Total 3200.00 EUR Held by rule r_acceptance, for procurement_lead of org_northstar Waiting for your decision, on the approvals page",
		"Deadlines The offer is open until")

	// Approve on the page, then the agent accepts: the timeline moves.
	tok := csrfInput.FindStringSubmatch(body)[1]
	resp, _ := p.f.do(t, call{method: "POST", path: "/approvals/" + req.ApprovalRequestID + "/approve", cookie: p.f.adminTok, form: url.Values{"csrf": {tok}}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	st, _ := p.b.Agent.ApprovalStatus(context.Background(), req.ApprovalRequestID)
	if _, err := p.b.Engine.AcceptOffer(context.Background(), p.b.Actor(), record.AcceptInput{MandateID: p.b.Mandate, OfferID: o.Objects["offer"], ApprovalID: st.ApprovalID}); err != nil {
		t.Fatal(err)
	}
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the committed timeline", body,
		"State committed", "Timeline (5 steps, 2 events)",
		"Approved by prn_northstar_principal (procurement_lead) Act Accept an offer and form the agreement (offer.accept) Good until",
		"Offer accepted; agreement proposed State draft → agreement_pending By org_northstar; countersigned by org_delta",
		"Agreement signed by both; committed State agreement_pending → committed",
		"Offer id "+o.Objects["offer"]+" (offer)", "Event ", "(agreement.direct, position 1)",
	)
	// The human facts come first; the hashes are folded away.
	if !strings.Contains(body, `<details class="tech"><summary>Identifiers and hashes</summary>`) {
		t.Error("a step's identifiers are not folded")
	}
	if !regexp.MustCompile(`Agreement id agr_[0-9a-f]+ \(agreement\)`).MatchString(text(body)) {
		t.Error("the committing event does not name the agreement behind it")
	}

	recordtest.Complete(t, p.b, p.s, txn)
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the completed timeline", body, "State completed (final)", "Timeline (10 steps, 7 events)",
		"Obligation issued", "Performance declared State in_performance → acceptance_pending By org_delta; countersigned by org_northstar",
		"Performance accepted", "Transaction completed State settlement_pending → completed",
		"adapter_receipt", "settlement_instruction", "evidence", "performance_event", "obligation_response")
	// The payment, with its amount, rail and outcome, in its step.
	wantAll(t, "the payment's step", body, "Payment instructed State settlement_pending (unchanged)",
		"Amount 3200.00 EUR Rail rail_test_sandbox Paid by org_northstar to org_delta Outcome succeeded Rail answered")
	// Step by step, in the order it happened, from the offer to the end.
	order := []string{"Offer received from org_delta", "Offer accepted; agreement proposed", "Agreement signed by both; committed",
		"Obligation issued", "Performance declared", "Performance accepted", "Payment instructed", "Transaction completed"}
	for i, txt := 1, text(body); i < len(order); i++ {
		if strings.Index(txt, order[i-1]) > strings.Index(txt, order[i]) {
			t.Errorf("%q is told before %q", order[i], order[i-1])
		}
	}
	// The printable view: the same story with every identifier open, no
	// navigation, no objects as held.
	_, pr := p.f.do(t, call{method: "GET", path: "/transactions/" + txn + "?print=1", cookie: p.f.adminTok})
	wantAll(t, "the printable view", pr, "The printable view", "Timeline (10 steps, 7 events)", "Amount 3200.00 EUR Rail rail_test_sandbox")
	if strings.Contains(pr, "<nav>") || strings.Contains(pr, "As held (canonical JSON)") || !strings.Contains(pr, `<details class="tech" open>`) {
		t.Error("the printable view has the navigation or the objects, or folds the identifiers")
	}
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

	// A second acceptance under the same mandate: the first one's 3200.00
	// EUR is committed so far; the limit is per act, so this one has the
	// same room under it.
	p.offerHeld(t)
	_, body = p.f.do(t, call{method: "GET", path: "/", cookie: p.f.adminTok})
	wantAll(t, "the approvals page after a completed transaction", body,
		"Committed so far 3200.00 EUR by agt_northstar_agent since the mandate took effect, in 1 transaction",
		"Room left 800.00 EUR after this act's 3200.00 EUR")

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
	out, err := p.b.Engine.IssueObligation(ctx, p.b.Actor(), record.ObligationInput{MandateID: p.b.Mandate, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	obl := out.Objects["obligation"]
	claim := "calibration certificates, 20 transmitters"
	if _, err := p.s.Engine.AssertPerformance(ctx, p.s.Actor(), record.AssertInput{MandateID: p.s.Mandate, ObligationID: obl, AssertedQuantity: "20",
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: claim, ArtifactHash: canonical.SHA256Hex([]byte(claim))}}}); err != nil {
		t.Fatal(err)
	}
	_, body := p.f.do(t, call{method: "GET", path: "/transactions/" + txn, cookie: p.f.adminTok})
	wantAll(t, "the timeline awaiting acceptance", body, "Money",
		"Obligation "+obl+" Status open Consideration 3200.00 EUR",
		"Owed 0.00 EUR Paid 0.00 EUR In flight 0.00 EUR Forgone 0.00 EUR Outstanding 0.00 EUR",
		"Settlement not_due (nothing is owed until the obligation is accepted)")

	out, err = p.b.Engine.Respond(ctx, p.b.Actor(), record.RespondInput{MandateID: p.b.Mandate, ObligationID: obl, ResponseType: "accept"})
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
	wantAll(t, "the disputed timeline", body, "State exception_open", "Exception opened State in_performance → exception_open",
		"Dispute raised by org_delta against org_northstar Grounds obligation_wrongly_rejected Description The certificate covers all twenty.",
		"Dispute determined by org_northstar (presumptive) Finding The rejection is not supported by the certificate.",
		"Exceptions (1)", "Type obligation_disputed Status open Obligation "+obl,
		"Disputes (2)", "Dispute "+dsp, "Raised by org_delta against org_northstar", "Subject act "+d.Rejection, "Grounds obligation_wrongly_rejected",
		"Description The certificate covers all twenty.", "Determined yes Determination "+det, "Determined not yet",
		"Determinations (1)", "Determination "+det+" Of dispute "+dsp, "Determiner org_northstar", "Effect presumptive",
		"Finding The rejection is not supported by the certificate.")
}

// named gives org's peer file, as the buyer pinned it, a display name: as
// if org had run `party init --name`.
func (p *pair) named(t *testing.T, org, name string) {
	t.Helper()
	path := filepath.Join(p.b.Node.Dir, instance.PeersDir, org+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var info instance.PeerInfo
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	info.DisplayName = name
	if data, err = json.MarshalIndent(info, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Reload parses the file strictly: the name is part of the format.
	if err := p.b.Node.Org.Peers.Reload(); err != nil {
		t.Fatal(err)
	}
}

// A rejection tells on the timeline: the offer from the counterparty, by
// its name, the agent's request, and who rejected it, when and why; the
// transactions list names the counterparty too.
func TestTimelineTellsARejection(t *testing.T) {
	t.Parallel()
	p := setupPair(t)
	p.named(t, "org_delta", "Delta Calibration GmbH")
	o, req := p.offerHeld(t)
	resp, body := p.f.do(t, call{method: "POST", path: "/approvals/" + req.ApprovalRequestID + "/reject", cookie: p.f.adminTok,
		form: url.Values{"csrf": {admin.FormToken(p.f.adminTok)}, "reason": {"Price above the framework agreement.\nAsk for 2900.00 EUR."}}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d %s", resp.StatusCode, body)
	}
	_, body = p.f.do(t, call{method: "GET", path: "/transactions/" + o.TransactionID, cookie: p.f.adminTok})
	wantAll(t, "the rejected offer's timeline", body, "Counterparty Delta Calibration GmbH (org_delta) (you are the buyer)",
		"Timeline (3 steps, 0 events)",
		"Offer received from Delta Calibration GmbH (org_delta) Item Calibration",
		"Your agent asked for your approval: Accept an offer and form the agreement (offer.accept) Total 3200.00 EUR",
		"Rejected by prn_northstar_principal (procurement_lead) Act Accept an offer and form the agreement (offer.accept) Reason Price above the framework agreement. Reason Ask for 2900.00 EUR.",
		"Request "+req.ApprovalRequestID, "Action hash "+req.ActionHash)
	if strings.Contains(text(body), "Waiting for your decision") {
		t.Error("a decided request still waits")
	}
	_, body = p.f.do(t, call{method: "GET", path: "/transactions", cookie: p.f.adminTok})
	wantAll(t, "the list", body, "buyer with Delta Calibration GmbH (org_delta)")
}

// The name the console shows comes from `party init --name`: it is in the
// organisation's config.json and in the peer.json it hands out, which a
// counterparty's party reads strictly; a name that is not one line of text
// is refused at init and in a peer file.
func TestInitNameReachesThePeerFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const name = "Delta Calibration GmbH"
	if _, err := instance.Init(dir, instance.InitOptions{OrganizationID: "org_named", Name: name, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, instance.PeerFile))
	if err != nil {
		t.Fatal(err)
	}
	info, err := instance.ParsePeerFile(data)
	if err != nil || info.DisplayName != name {
		t.Fatalf("peer.json names %q, %v", info.DisplayName, err)
	}
	if cfg, err := instance.LoadConfig(dir); err != nil || cfg.DisplayName != name {
		t.Fatalf("config.json names %q, %v", cfg.DisplayName, err)
	}
	if _, err := instance.Init(t.TempDir(), instance.InitOptions{OrganizationID: "org_named", Name: "Delta\nCalibration"}); err == nil {
		t.Error("init took a name of two lines")
	}
	info.DisplayName = "Delta\u0007"
	bad, _ := json.Marshal(info)
	if _, err := instance.ParsePeerFile(bad); err == nil {
		t.Error("a peer file with a control character in its name was taken")
	}
}
