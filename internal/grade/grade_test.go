package grade_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/store"
)

// TestCasesAreTheBilateralFamilies: the published manifest, partitioned
// by the family patterns of role scopes §4.3, gives the 118 bilateral
// cases across sixteen families, and no operated one.
func TestCasesAreTheBilateralFamilies(t *testing.T) {
	t.Parallel()
	cases, err := grade.Cases(spectest.SpecDir(t))
	if err != nil {
		t.Fatal(err)
	}
	// The shared list of the bilateral partition names each fixture and
	// its family (fixture | kind | outcome | code | family | ...).
	listed := map[string]string{}
	data, err := os.ReadFile(spectest.SharedFile(t, "fixtures-bilateral.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		cols := strings.Split(line, " | ")
		if len(cols) >= 5 && !strings.HasPrefix(line, "#") {
			listed[strings.TrimSpace(cols[0])] = strings.TrimSpace(cols[4])
		}
	}
	per := map[string]int{}
	valid := 0
	for _, c := range cases {
		per[c.Family]++
		if c.Valid {
			valid++
		}
		if listed[c.Fixture] != c.Family {
			t.Errorf("case %s is placed in %s; the bilateral partition has it in %q", c.Fixture, c.Family, listed[c.Fixture])
		}
	}
	if len(listed) != len(cases) {
		t.Errorf("%d cases, the bilateral partition lists %d", len(cases), len(listed))
	}
	if len(cases) != 118 || valid != 23 || len(per) != 16 {
		t.Fatalf("%d cases (%d valid) in %d families, want 118 (23) in 16: %v", len(cases), valid, len(per), per)
	}
	for fam, n := range map[string]int{"mandate": 9, "obligation": 19, "evidence-and-verification": 23, "dispute-and-determination": 20, "conformance-grade": 6, "policy-decision": 1} {
		if per[fam] != n {
			t.Errorf("family %s has %d cases, want %d", fam, per[fam], n)
		}
	}
	if fam, ok := grade.FamilyOf("negative/invitation-claim-secret-in-shared-object.json"); ok {
		t.Errorf("an invitation fixture is placed in %s", fam)
	}
}

// carry mounts both carriers on n's peer listener in front of receiver,
// as `party serve` does (bindings/peer). The conformance probe route of
// earlier versions is gone: nothing but the carriers is presented to.
func carry(t testing.TB, n *orgtest.Node, receiver delivery.InboxReceiver) {
	t.Helper()
	cfg := n.Org.Config()
	as, err := a2a.NewServer(a2a.ServerConfig{Card: a2a.Card(a2a.CardOptions{OrganizationID: cfg.OrganizationID, PublicURL: cfg.PublicURL}),
		Clients: n.Org.Clients, Receiver: receiver})
	if err != nil {
		t.Fatal(err)
	}
	as.Mount(n.Mux)
	hs, err := https.NewServer(https.ServerConfig{Clients: n.Org.Clients, Inbox: receiver})
	if err != nil {
		t.Fatal(err)
	}
	hs.Mount(n.Mux)
}

// pair is the walkthrough's two instances, each serving both carriers in
// front of its record engine: the assessor (northstar, the buyer) and the
// assessed (delta, the supplier).
func pair(t *testing.T) (assessor, assessed *recordtest.Side) {
	t.Helper()
	b, s, _ := recordtest.Pair(t)
	for _, sd := range []*recordtest.Side{b, s} {
		carry(t, sd.Node, sd.Engine)
	}
	return b, s
}

// assess presents the published refused cases to about over both of
// the assessor's carriers.
func assess(t *testing.T, assessor *orgtest.Node, about string) grade.Assessment {
	t.Helper()
	cases, err := grade.Cases(spectest.SpecDir(t))
	if err != nil {
		t.Fatal(err)
	}
	cars, err := grade.Carriers(assessor.Org.Clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := grade.Assess(context.Background(), grade.Run{Subject: about, Carriers: cars, Record: assessor.Org.Store, Now: assessor.Org.Clock()}, cases)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// issue assesses about and has the assessor's principal sign the grade.
func issue(t *testing.T, assessor *orgtest.Node, about string) map[string]any {
	t.Helper()
	a := assess(t, assessor, about)
	doc, report, err := grade.Build(grade.Spec{Implementation: "party", Assessment: a, IssuedAt: assessor.Org.Clock(), ValidFor: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := assessor.Principal(t).IssueGrade(context.Background(), doc, report)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// snapshot is what an instance's record holds: its transactions and the
// objects of each.
func snapshot(t *testing.T, st *store.Store) string {
	t.Helper()
	ctx := context.Background()
	txns, err := st.Transactions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, x := range txns {
		objs, err := st.TransactionObjects(ctx, x.ID)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(x.ID + " " + x.State + "\n")
		for _, o := range objs {
			b.WriteString(canonical.SHA256Hex(o) + "\n")
		}
	}
	return b.String()
}

// TestGradeThroughTheCarriers: northstar presents every refused case of
// the bilateral families to delta's live instance over A2A and over plain
// HTTPS, the way any A202 message travels, with no probe route anywhere.
// Delta refuses every kernel case with the case's own code over both
// bindings, found by its gate before any signature is resolved; the
// bundle cases are refused on their synthetic signatures before any
// cross-object rule is read (inconclusive, or a pass where the signature
// is the case's code); mandates, chains, grades, declarations, positive
// cases and bundles with a context are not presented. The grade says so:
// bands 1 from the families fully observed, D unassessed. Nothing in
// delta's record changed.
func TestGradeThroughTheCarriers(t *testing.T) {
	t.Parallel()
	northstar, delta := pair(t)
	recordtest.Offer(t, delta, "1000.00") // a transaction in both records
	before := snapshot(t, delta.Node.Org.Store)
	if !strings.HasPrefix(before, "txn_") {
		t.Fatalf("delta holds no transaction to keep: %q", before)
	}

	a := assess(t, northstar.Node, "org_delta")
	if !slices.Equal(a.Carriers, []string{"a2a", "https"}) {
		t.Fatalf("carriers %v", a.Carriers)
	}
	if f := a.With(grade.Fail); len(f) != 0 {
		t.Errorf("party fails %d refused cases of its own over the carriers: %+v", len(f), f)
	}
	var kernel, inconclusive int
	for _, r := range a.Results {
		if r.Verdict == grade.NotPresented {
			if len(r.Observations) != 0 || r.Why == "" {
				t.Errorf("%s: not presented, with %d observations and why %q", r.Fixture, len(r.Observations), r.Why)
			}
			if r.Expected == grade.Refused && (r.Kind == "kernel" || (r.Kind == "bundle" && !bundleWithContext(t, r.Fixture))) {
				t.Errorf("%s (%s) was not presented: %s", r.Fixture, r.Kind, r.Why)
			}
			continue
		}
		if r.Expected != grade.Refused || !strings.HasPrefix(r.Transaction, "txn_") || r.Objects == 0 {
			t.Errorf("%s presented as %+v", r.Fixture, r)
		}
		if len(r.Observations) != 2 || r.Observations[0].Carrier != "a2a" || r.Observations[1].Carrier != "https" {
			t.Fatalf("%s: observations %+v, want one over each binding", r.Fixture, r.Observations)
		}
		for _, o := range r.Observations {
			if o.Outcome != grade.Refused {
				t.Errorf("%s over %s: %s", r.Fixture, o.Carrier, o.Outcome)
			}
		}
		switch r.Kind {
		case "kernel":
			kernel++
			for _, o := range r.Observations {
				if r.ExpectedCode != "" && !slices.Equal(o.ReasonCodes, []reason.Code{r.ExpectedCode}) {
					t.Errorf("%s over %s: refused with %v, the case's code is %s", r.Fixture, o.Carrier, o.ReasonCodes, r.ExpectedCode)
				}
			}
			if r.Verdict != grade.Pass {
				t.Errorf("kernel case %s: %s", r.Fixture, r.Verdict)
			}
		case "bundle":
			if r.Verdict == grade.Inconclusive {
				inconclusive++
				if !slices.Equal(r.Observations[0].ReasonCodes, []reason.Code{reason.EvidenceSignatureInvalid}) {
					t.Errorf("%s is inconclusive with %v", r.Fixture, r.Observations[0].ReasonCodes)
				}
			}
		default:
			t.Errorf("%s of kind %s was presented", r.Fixture, r.Kind)
		}
	}
	if kernel != 48 || inconclusive == 0 {
		t.Errorf("%d kernel cases presented (want the 48 refused ones), %d inconclusive bundle cases", kernel, inconclusive)
	}
	want := map[string][]string{"A": {"party-family"}, "B": {"policy-decision", "envelope-annotation", "offer"}, "C": {"offer"}, "E": {"settlement", "key-record"}}
	for _, d := range grade.DimensionNames {
		band, assessed := a.Band(d)
		if fams, ok := want[d]; ok != assessed || (ok && (band != 1 || !slices.Equal(a.Established(d), fams))) {
			t.Errorf("dimension %s: band %d, assessed %v, from %v; want band 1 from %v", d, band, assessed, a.Established(d), fams)
		}
	}
	if after := snapshot(t, delta.Node.Org.Store); after != before {
		t.Errorf("grading changed delta's record:\nbefore %s\nafter  %s", before, after)
	}
	if txns, _ := northstar.Node.Org.Store.Transactions(context.Background()); len(txns) != 1 {
		t.Errorf("the assessor holds %d transactions after grading, want the one offer", len(txns))
	}
}

// bundleWithContext reports whether a bundle fixture states a context.
func bundleWithContext(t *testing.T, fixture string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.SpecDir(t), "conformance", "fixtures", "v0.1", filepath.FromSlash(fixture)))
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	return len(b.Context) > 0
}

// TestGradeIssuedAboutCounterparty: northstar grades delta's live
// instance over its carriers and issues a peer-assessed grade of band 1
// on the families observed, naming the extension the carriers activate as
// its transport, that delta (and northstar) verify under the pinned
// principal key; a tampered grade, an expired one, an overclaiming one and
// one with a band the published set cannot establish are refused with
// their codes.
func TestGradeIssuedAboutCounterparty(t *testing.T) {
	t.Parallel()
	ns, dl := pair(t)
	northstar, delta := ns.Node, dl.Node
	now := northstar.Org.Clock()
	g := issue(t, northstar, "org_delta")

	if g["level"] != "peer_assessed" || g["status"] != "active" || g["held_out_coverage"] != nil {
		t.Fatalf("grade: %v", g)
	}
	scope := g["scope"].(map[string]any)
	if rs := scope["role_scopes"].([]any); len(rs) != 1 || rs[0] != grade.Scope {
		t.Fatalf("role scopes %v", rs)
	}
	if tr := scope["transports"].([]any); len(tr) != 1 || tr[0] != delivery.ExtensionURI {
		t.Errorf("transports %v, want the extension both carriers activate", tr)
	}
	for _, d := range grade.DimensionNames {
		r, _ := g["dimensions"].(map[string]any)[d].(map[string]any)
		switch {
		case d == "D" && r != nil:
			t.Errorf("dimension D is %v; no family of it is fully observed over a carrier", r)
		case d != "D" && (r == nil || (r["band"] != 1 && r["band"] != json.Number("1"))):
			t.Errorf("dimension %s: %v; party refuses every refused case it was presented", d, r)
		}
	}
	held, err := northstar.Org.Store.GradesAbout(context.Background(), "org_delta")
	if err != nil || len(held) != 1 || held[0].IssuerOrg != "org_northstar" || len(held[0].Assessment) == 0 {
		t.Fatalf("the issued grade is not kept with its assessment: %+v %v", held, err)
	}
	ref := g["determination_ref"].(map[string]any)
	if ref["determination_hash"] != canonical.SHA256Hex(held[0].Assessment) {
		t.Error("determination_hash is not the hash of the assessment report kept")
	}
	var report grade.Assessment
	if err := json.Unmarshal(held[0].Assessment, &report); err != nil || len(report.With(grade.Pass)) == 0 || len(report.With(grade.Pass)[0].Observations) != 2 {
		t.Errorf("the report hashed does not hold each case's observation per binding: %v", err)
	}

	// delta, the subject, verifies it under northstar's pinned principal key.
	keysAtDelta := grade.PrincipalKeys(context.Background(), delta.Org)
	if j := grade.Check(clone(t, g), keysAtDelta, now); !j.Accepted() {
		t.Fatalf("the issued grade is refused by its subject: %v", j.Problems)
	}

	tampered := clone(t, g)
	tampered["dimensions"].(map[string]any)["A"].(map[string]any)["band"] = 0
	wantRefused(t, "tampered", grade.Check(tampered, keysAtDelta, now), reason.EvidenceSignatureInvalid)

	expires, _ := time.Parse(time.RFC3339, g["expires_at"].(string))
	j := grade.Check(clone(t, g), keysAtDelta, expires.Add(time.Second))
	wantRefused(t, "expired", j)
	if !strings.Contains(j.Err().Error(), "expired") {
		t.Errorf("the refusal of an expired grade does not say so: %v", j.Err())
	}

	over := clone(t, g)
	over["dimensions"].(map[string]any)["B"].(map[string]any)["established_from"] = []any{"policy-decision", "session-event"}
	resign(t, northstar, over)
	wantRefused(t, "overclaiming", grade.Check(over, keysAtDelta, now), reason.GradeScopeOverclaim)

	banded := clone(t, g)
	banded["dimensions"].(map[string]any)["C"].(map[string]any)["band"] = 2
	resign(t, northstar, banded)
	wantRefused(t, "band 2 from the published set", grade.Check(banded, keysAtDelta, now))

	// A grade signed by a key the checker does not trust is refused too,
	// as is one its own subject signed.
	self := clone(t, g)
	resign(t, delta, self)
	wantRefused(t, "self-signed", grade.Check(self, grade.PrincipalKeys(context.Background(), northstar.Org), now))
	wantRefused(t, "untrusted key", grade.Check(clone(t, g), func(string) (gate.GradeKey, bool) { return gate.GradeKey{}, false }, now), reason.EvidenceSignatureInvalid)

	// Nothing overclaiming is signed by the principal's surface.
	a := assess(t, northstar, "org_delta")
	doc, report2, err := grade.Build(grade.Spec{Implementation: "party", Assessment: a, IssuedAt: now, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	doc["dimensions"].(map[string]any)["B"].(map[string]any)["established_from"] = []any{"auction"}
	if _, err := northstar.Principal(t).IssueGrade(context.Background(), doc, report2); err == nil || !slices.Contains(reason.CodesOf(err), reason.GradeScopeOverclaim) {
		t.Fatalf("an overclaiming grade was issued: %v", err)
	}
	if held, _ := northstar.Org.Store.GradesAbout(context.Background(), "org_delta"); len(held) != 1 {
		t.Fatalf("a refused grade was kept: %d held", len(held))
	}
}

func clone(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	b, err := canonical.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canonical.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// resign signs doc again with node's principal key, as a principal
// determined to issue it would.
func resign(t *testing.T, n *orgtest.Node, doc map[string]any) {
	t.Helper()
	k, err := keys.ReadPrivateFile(filepath.Join(n.Dir, filepath.FromSlash(instance.PrincipalKeyFile)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewSigner(n.Org.Config().PrincipalKeyID, k)
	if err != nil {
		t.Fatal(err)
	}
	delete(doc, "signature")
	if err := signature.SignGrade(doc, s, n.Org.Clock()); err != nil {
		t.Fatal(err)
	}
}

func wantRefused(t *testing.T, what string, j gate.Judgment, codes ...reason.Code) {
	t.Helper()
	if j.Accepted() {
		t.Errorf("%s grade accepted", what)
		return
	}
	for _, c := range codes {
		if !j.Has(c) {
			t.Errorf("%s grade refused with %v, want %s", what, j.Codes, c)
		}
	}
}

// TestMinimumGradePolicy: a mandate's local policy denies an act towards a
// counterparty no grade about which is held, or whose latest grade is
// expired or short in a required dimension, and allows it once a grade
// meeting the minimum is held.
func TestMinimumGradePolicy(t *testing.T) {
	t.Parallel()
	ns, _ := pair(t)
	northstar := ns.Node
	now := northstar.Org.Clock()
	clock := func() time.Time { return now }
	ctx := context.Background()
	p := grade.Policy{Store: northstar.Org.Store, Clock: clock}
	mnd := "mnd_policy_test_000001"
	act := map[string]any{"action_type": "offer.accept", "counterparty_organization_id": "org_delta"}
	if why := p.Deny(ctx, mnd, act); why != nil {
		t.Fatalf("a mandate without a policy is denied: %v", why)
	}
	if err := northstar.Org.Store.SetMinimumGrade(ctx, mnd, map[string]int{"A": 1, "E": 1}); err != nil {
		t.Fatal(err)
	}
	if why := p.Deny(ctx, mnd, act); len(why) != 1 || !strings.Contains(why[0], "no grade") {
		t.Fatalf("no grade held: %v", why)
	}
	g := issue(t, northstar, "org_delta")
	if why := p.Deny(ctx, mnd, act); why != nil {
		t.Fatalf("a counterparty meeting the minimum is denied: %v", why)
	}
	if why := p.Deny(ctx, mnd, map[string]any{"counterparty_organization_id": "org_other"}); len(why) == 0 {
		t.Error("a counterparty with no grade passes")
	}
	expires, _ := time.Parse(time.RFC3339, g["expires_at"].(string))
	late := grade.Policy{Store: northstar.Org.Store, Clock: func() time.Time { return expires }}
	if why := late.Deny(ctx, mnd, act); len(why) == 0 {
		t.Error("an expired grade meets the minimum")
	}
	if err := northstar.Org.Store.SetMinimumGrade(ctx, mnd, map[string]int{"A": 2}); err != nil {
		t.Fatal(err)
	}
	if why := p.Deny(ctx, mnd, act); len(why) != 1 || !strings.Contains(why[0], "A is band 1") {
		t.Errorf("band 1 meets a minimum of 2: %v", why)
	}
}

// TestMinimumGradeInMandatePolicy: across two instances, a supplier whose
// principal requires a minimum grade of the counterparty cannot offer to a
// buyer it holds no grade about (A202-POLICY-DENIED, nothing sent), and
// can once it graded the buyer's live instance over its carriers; the buyer, re-evaluating
// the offer under the supplier's mandate alone, countersigns what the
// supplier's policy allowed.
func TestMinimumGradeInMandatePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s := pair(t)
	if err := s.Princ.SetMinimumGrade(ctx, s.Mandate, grade.Minimum{"A": 1, "C": 1}); err != nil {
		t.Fatal(err)
	}
	offer := func() (record.Outcome, error) {
		return s.Engine.ProposeOffer(ctx, s.Actor(), record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("1000.00"),
			ValidUntil: envelope.Timestamp(time.Now().UTC().Add(time.Hour))})
	}
	if _, err := offer(); !slices.Contains(reason.CodesOf(err), reason.PolicyDenied) || !strings.Contains(err.Error(), "no grade about org_northstar") {
		t.Fatalf("an offer to an ungraded counterparty: %v", err)
	}
	if s.Out.Sent != 0 {
		t.Fatalf("a denied offer was sent (%d messages)", s.Out.Sent)
	}
	a := assess(t, s.Node, "org_northstar")
	doc, report, err := grade.Build(grade.Spec{Implementation: "party", Assessment: a, IssuedAt: s.Node.Org.Clock(), ValidFor: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Princ.IssueGrade(ctx, doc, report); err != nil {
		t.Fatal(err)
	}
	out, err := offer()
	if err != nil || out.Status != record.StatusDelivered {
		t.Fatalf("an offer to a graded counterparty: %+v %v", out, err)
	}
	if _, err := b.Node.Org.Store.GetObject(ctx, out.TransactionID, out.Objects["offer"]); err != nil {
		t.Fatalf("the buyer does not hold the offer: %v", err)
	}
}

// hostile is a peer that serves both carriers in front of app alone: no
// gate, no record.
func hostile(t *testing.T, app delivery.ReceiverFunc) (assessor *orgtest.Node) {
	t.Helper()
	assessor = orgtest.New(t, "org_northstar", time.Now, true)
	peerNode := orgtest.New(t, "org_delta", time.Now, true)
	orgtest.Peer(t, assessor, peerNode)
	refuse := delivery.ReceiverFunc(func(context.Context, string, string, delivery.Message) ([][]byte, error) {
		return nil, reason.Refuse("the assessor takes nothing in")
	})
	carry(t, assessor, delivery.NewInbox(assessor.Org.Store, refuse, delivery.InboxOptions{}))
	carry(t, peerNode, delivery.NewInbox(peerNode.Org.Store, app, delivery.InboxOptions{}))
	return assessor
}

// TestGradeOfAHostilePeer: a peer that takes every message over both
// bindings fails every case presented to it, and one that refuses
// everything with one code fails every case that calls for another; each
// is band 0 in all five dimensions, and the assessment names the cases it
// failed.
func TestGradeOfAHostilePeer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		app  delivery.ReceiverFunc
		// passes says which refused cases it still passes.
		passes func(grade.Result) bool
		failed string // one case it must fail
	}{
		{"accepts everything", func(context.Context, string, string, delivery.Message) ([][]byte, error) { return nil, nil },
			// The bindings in front of it refuse carrier framing inside
			// signed bytes before any application (binding §5.4).
			func(r grade.Result) bool { return r.Fixture == "negative/envelope-carries-carrier-metadata.json" },
			"negative/offer-negative-money.json"},
		{"refuses with a wrong code", func(context.Context, string, string, delivery.Message) ([][]byte, error) {
			return nil, reason.Refuse("no", reason.TermsInvalid)
		}, func(r grade.Result) bool { return r.ExpectedCode == "" || r.ExpectedCode == reason.TermsInvalid },
			"negative/offer-unregistered-profile.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := assess(t, hostile(t, tc.app), "org_delta")
			failed := map[string]bool{}
			for _, r := range a.With(grade.Fail) {
				failed[r.Fixture] = true
			}
			for _, r := range a.Results {
				if r.Verdict == grade.NotPresented {
					continue
				}
				if tc.passes(r) != (r.Verdict == grade.Pass) || (r.Verdict != grade.Pass && !failed[r.Fixture]) {
					t.Errorf("%s: %s %+v", r.Fixture, r.Verdict, r.Observations)
				}
			}
			if !failed[tc.failed] {
				t.Errorf("the assessment does not name %s among the failed cases", tc.failed)
			}
			doc, _, err := grade.Build(grade.Spec{Implementation: "hostile", Assessment: a, IssuedAt: time.Now(), ValidFor: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range grade.DimensionNames {
				r, _ := doc["dimensions"].(map[string]any)[d].(map[string]any)
				if r == nil || r["band"] != 0 || len(r["established_from"].([]any)) == 0 {
					t.Errorf("dimension %s of a hostile peer: %v", d, r)
				}
			}
		})
	}
}

// transportFunc answers every message from a function, for judging
// without a network.
type transportFunc func(txn string, objects [][]byte) error

func (f transportFunc) Deliver(_ context.Context, _, txn string, objects [][]byte) (delivery.Message, error) {
	return delivery.Message{}, f(txn, objects)
}

// heldRecord is an assessor's record holding the transactions named.
type heldRecord map[string]bool

func (h heldRecord) GetTransaction(_ context.Context, id string) (store.Transaction, error) {
	if h[id] {
		return store.Transaction{ID: id}, nil
	}
	return store.Transaction{}, store.ErrNotFound
}

// TestJudgingWhatACarrierShows: a refusal on the presented objects'
// synthetic signatures alone is inconclusive (not a pass, not a failure,
// and its family establishes no band); one carrier that takes a case
// fails it whatever the other did; a case whose transaction the assessor
// holds is not presented; a case of no transaction travels under an id
// minted for it; a counterparty that only ever asks to be tried again, or
// a binding whose capability check fails, ends the run with no
// assessment.
func TestJudgingWhatACarrierShows(t *testing.T) {
	t.Parallel()
	cases, err := grade.Cases(spectest.SpecDir(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const demoTxn = "txn_calibration_demo_01"
	var sent []string
	sigOnly := transportFunc(func(txn string, _ [][]byte) error {
		sent = append(sent, txn)
		return reason.Refuse("unknown keys", reason.EvidenceSignatureInvalid)
	})
	takes := transportFunc(func(string, [][]byte) error { return nil })
	run := grade.Run{Subject: "org_delta", Carriers: []grade.Carrier{{Name: "a2a", Transport: sigOnly}, {Name: "https", Transport: sigOnly}},
		Record: heldRecord{demoTxn: true}, Now: time.Now()}
	a, err := grade.Assess(ctx, run, cases)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(sent, demoTxn) {
		t.Error("a case was presented under a transaction the assessor holds")
	}
	minted := map[string]bool{}
	for _, r := range a.Results {
		switch {
		case r.Verdict == grade.Pass && r.ExpectedCode != reason.EvidenceSignatureInvalid && r.ExpectedCode != "":
			t.Errorf("%s passes on a refusal with the signature code alone", r.Fixture)
		case r.Verdict == grade.Inconclusive && r.ExpectedCode == reason.EvidenceSignatureInvalid:
			t.Errorf("%s is inconclusive, refused with its own code", r.Fixture)
		case r.Verdict == grade.Fail:
			t.Errorf("%s fails on a refusal with the signature code alone", r.Fixture)
		case r.Family == "party-family" && r.Expected == grade.Refused:
			if !strings.HasPrefix(r.Transaction, "txn_") || minted[r.Transaction] {
				t.Errorf("%s, of no transaction, travelled under %q", r.Fixture, r.Transaction)
			}
			minted[r.Transaction] = true
		}
		if r.Transaction == demoTxn || (r.Verdict == grade.NotPresented && r.Kind == "kernel" && r.Expected == grade.Refused && !strings.Contains(r.Why, demoTxn)) {
			t.Errorf("%s: %s under %q: %s", r.Fixture, r.Verdict, r.Transaction, r.Why)
		}
	}
	if len(minted) == 0 || len(a.With(grade.Inconclusive)) == 0 {
		t.Fatalf("%d cases under minted ids, %d inconclusive", len(minted), len(a.With(grade.Inconclusive)))
	}
	for _, d := range grade.DimensionNames {
		if band, assessed := a.Band(d); assessed {
			t.Errorf("dimension %s is band %d from cases nothing was observed of", d, band)
		}
	}

	run.Record = heldRecord{}
	run.Carriers = []grade.Carrier{{Name: "a2a", Transport: sigOnly}, {Name: "https", Transport: takes}}
	if a, err = grade.Assess(ctx, run, cases); err != nil {
		t.Fatal(err)
	}
	for _, r := range a.Results {
		if r.Verdict != grade.NotPresented && (r.Verdict != grade.Fail || r.Observations[0].Verdict == grade.Fail || r.Observations[1].Verdict != grade.Fail) {
			t.Errorf("%s, taken over https: %s %+v", r.Fixture, r.Verdict, r.Observations)
		}
	}

	busy := transportFunc(func(string, [][]byte) error { return delivery.ErrUnavailable })
	run.Carriers = []grade.Carrier{{Name: "a2a", Transport: busy}}
	if _, err := grade.Assess(ctx, run, cases); !errors.Is(err, delivery.ErrUnavailable) {
		t.Errorf("a counterparty that never answers: %v", err)
	}
	// A binding the counterparty does not take A202 messages over says
	// nothing about a case: the run ends, nothing is judged.
	unsupported := transportFunc(func(string, [][]byte) error { return delivery.Unsupported("no extension entry") })
	run.Carriers = []grade.Carrier{{Name: "a2a", Transport: sigOnly}, {Name: "https", Transport: unsupported}}
	if _, err := grade.Assess(ctx, run, cases); !slices.Contains(reason.CodesOf(err), reason.ExtensionUnsupported) {
		t.Errorf("a binding the counterparty does not support: %v", err)
	}
}
