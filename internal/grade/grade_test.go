package grade_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
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

// pair is two pinned instances: the assessor (northstar) and the
// assessed (delta), whose peer listener serves the probe route.
func pair(t *testing.T, clock func() time.Time) (assessor, assessed *orgtest.Node) {
	t.Helper()
	assessor = orgtest.New(t, "org_northstar", clock, true)
	assessed = orgtest.New(t, "org_delta", clock, true)
	orgtest.Peer(t, assessor, assessed)
	assessed.Mux.Handle(grade.ProbePath, grade.ProbeHandler(assessed.Org.Peers, nil))
	return assessor, assessed
}

// assess runs the published bilateral cases against the assessed node
// over the assessor's pinned client.
func assess(t *testing.T, assessor *orgtest.Node, about string) grade.Assessment {
	t.Helper()
	cases, err := grade.Cases(spectest.SpecDir(t))
	if err != nil {
		t.Fatal(err)
	}
	hc, peer, err := assessor.Org.Clients.For(about)
	if err != nil {
		t.Fatal(err)
	}
	a, err := grade.Assess(context.Background(), grade.HTTPProber{Client: hc, BaseURL: peer.BaseURL()}, about, cases, assessor.Org.Clock())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// issue assesses delta and has northstar's principal sign the grade.
func issue(t *testing.T, assessor, assessed *orgtest.Node) map[string]any {
	t.Helper()
	a := assess(t, assessor, assessed.Org.Config().OrganizationID)
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

// TestGradeIssuedAboutCounterparty: northstar runs the published
// bilateral families against delta's live instance, over delta's peer
// listener, and issues a band-1 peer-assessed grade that delta (and
// northstar) verify under the pinned principal key; a tampered grade, an
// expired one, an overclaiming one and one with a band the published set
// cannot establish are refused with their codes.
func TestGradeIssuedAboutCounterparty(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	northstar, delta := pair(t, clock)
	g := issue(t, northstar, delta)

	if g["level"] != "peer_assessed" || g["status"] != "active" || g["held_out_coverage"] != nil {
		t.Fatalf("grade: %v", g)
	}
	scope := g["scope"].(map[string]any)
	if rs := scope["role_scopes"].([]any); len(rs) != 1 || rs[0] != grade.Scope {
		t.Fatalf("role scopes %v", rs)
	}
	for _, d := range grade.DimensionNames {
		r := g["dimensions"].(map[string]any)[d].(map[string]any)
		if r["band"] != 1 && r["band"] != json.Number("1") {
			t.Errorf("dimension %s: band %v; party passes every published bilateral case", d, r["band"])
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
	doc, report, err := grade.Build(grade.Spec{Implementation: "party", Assessment: a, IssuedAt: now, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	doc["dimensions"].(map[string]any)["D"].(map[string]any)["established_from"] = []any{"auction"}
	if _, err := northstar.Principal(t).IssueGrade(context.Background(), doc, report); err == nil || !slices.Contains(reason.CodesOf(err), reason.GradeScopeOverclaim) {
		t.Fatalf("an overclaiming grade was issued: %v", err)
	}
	if held, _ := northstar.Org.Store.GradesAbout(context.Background(), "org_delta"); len(held) != 1 {
		t.Fatalf("a refused grade was kept: %d held", len(held))
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

// lenient is an instance that accepts everything it is shown.
type lenient struct{}

func (lenient) Probe(context.Context, []byte) (grade.Verdict, error) {
	return grade.Verdict{Kind: "envelope", Outcome: gate.Accepted, ReasonCodes: []reason.Code{}}, nil
}

// TestGradeOfAnInstanceThatGuesses: an instance that accepts the refused
// cases is graded band 0 in every dimension whose families carry
// negative cases, and its grade says which cases failed.
func TestGradeOfAnInstanceThatGuesses(t *testing.T) {
	t.Parallel()
	cases, err := grade.Cases(spectest.SpecDir(t))
	if err != nil {
		t.Fatal(err)
	}
	a, err := grade.Assess(context.Background(), lenient{}, "org_delta", cases, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Failed()) != 95 {
		t.Errorf("%d cases failed, want the 95 negative ones", len(a.Failed()))
	}
	for _, d := range grade.DimensionNames {
		if a.Band(d) != 0 {
			t.Errorf("dimension %s is band %d for an instance that refuses nothing", d, a.Band(d))
		}
	}
}

// TestProbeAnswersPinnedPeersOnly: the probe route judges a case for a
// pinned peer and refuses an unauthenticated caller and other methods.
func TestProbeAnswersPinnedPeersOnly(t *testing.T) {
	t.Parallel()
	northstar, delta := pair(t, time.Now)
	hc, peer, err := northstar.Org.Clients.For("org_delta")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"spec_version":"a202-commercial/0.1"}`)
	v, err := grade.HTTPProber{Client: hc, BaseURL: peer.BaseURL()}.Probe(context.Background(), body)
	if err != nil || v.Outcome != gate.Refused {
		t.Fatalf("probe: %+v %v", v, err)
	}
	resp, err := hc.Get(peer.BaseURL() + grade.ProbePath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %s", resp.Status)
	}
	// A request without a pinned client certificate is refused.
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodPost, grade.ProbePath, strings.NewReader(string(body)))
	grade.ProbeHandler(delta.Org.Peers, nil).ServeHTTP(rec, req)
	if rec.status != http.StatusForbidden {
		t.Errorf("an unauthenticated probe answered %d", rec.status)
	}
}

type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(s int) { r.status = s }

// TestMinimumGradePolicy: a mandate's local policy denies an act towards a
// counterparty no grade about which is held, or whose latest grade is
// expired or short in a required dimension, and allows it once a grade
// meeting the minimum is held.
func TestMinimumGradePolicy(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	northstar, delta := pair(t, clock)
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
	g := issue(t, northstar, delta)
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
// can once it graded the buyer's live instance; the buyer, re-evaluating
// the offer under the supplier's mandate alone, countersigns what the
// supplier's policy allowed.
func TestMinimumGradeInMandatePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	b.Node.Mux.Handle(grade.ProbePath, grade.ProbeHandler(b.Node.Org.Peers, nil))
	if err := s.Princ.SetMinimumGrade(ctx, s.Mandate, grade.Minimum{"A": 1, "C": 1}); err != nil {
		t.Fatal(err)
	}
	offer := func() (record.Outcome, error) {
		return s.Engine.ProposeOffer(ctx, record.OfferInput{MandateID: s.Mandate, Counterparty: "org_northstar", Terms: recordtest.Terms("1000.00"),
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
	if _, err := b.Node.Org.Store.GetObject(ctx, out.Objects["offer"]); err != nil {
		t.Fatalf("the buyer does not hold the offer: %v", err)
	}
}
