package authority

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
)

// The synthetic parties and the transaction of the published walkthrough.
const (
	txn         = "txn_calibration_demo_01"
	profileID   = "a202-profile/calibration-service/0.1"
	orgBuyer    = "org_northstar"
	orgSupplier = "org_delta"
)

// t0 is the walkthrough's morning; mandates run a month around it.
var (
	t0        = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)
	validFrom = "2026-08-20T00:00:00Z"
	validTo   = "2026-09-20T00:00:00Z"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// keyring is a KeyResolver over an in-memory table.
type keyring struct {
	mu   sync.RWMutex
	keys map[string]Key
}

func (k *keyring) ResolveKey(_ context.Context, id string) (Key, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.keys[id]
	if !ok {
		return Key{}, fmt.Errorf("unknown key %s", id)
	}
	return key, nil
}

func (k *keyring) setStatus(id, st string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := k.keys[id]
	key.Status = st
	k.keys[id] = key
}

// mandateSet is a MandateResolver over an in-memory table.
type mandateSet struct {
	mu sync.RWMutex
	m  map[string]map[string]any
}

func (s *mandateSet) ResolveMandate(_ context.Context, id string) (map[string]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.m[id]
	if !ok {
		return nil, fmt.Errorf("no mandate %s", id)
	}
	return m, nil
}

func (s *mandateSet) put(m map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[m["id"].(string)] = m
}

// party is one organisation's principal and one of its agents.
type party struct {
	org, principal, role, agent string
	principalKey, agentKey      string
	principalSigner             signature.Signer
	agentSigner                 signature.Signer
}

func (p party) actor() Actor {
	return Actor{OrganizationID: p.org, AgentID: p.agent, KeyID: p.agentKey}
}

func (p party) requestedBy(mandateID string) envelope.Actor {
	return envelope.Actor{OrganizationID: p.org, AgentID: p.agent, MandateID: mandateID}
}

// world is two organisations, their keys, a live HTTPS status endpoint
// for every mandate issued, a pinned status client, and an evaluator, all
// on one injected clock.
type world struct {
	t        testing.TB
	clock    *fakeClock
	keys     *keyring
	mandates *mandateSet
	store    *status.MemoryStore
	srv      *httptest.Server
	hits     *atomic.Int64
	client   *status.Client
	ev       *Evaluator

	buyer, junior, supplier party
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{
		t:        t,
		clock:    &fakeClock{t: t0},
		keys:     &keyring{keys: map[string]Key{}},
		mandates: &mandateSet{m: map[string]map[string]any{}},
		store:    status.NewMemoryStore(),
		hits:     &atomic.Int64{},
	}
	h, err := status.NewHandler(w.store, w.clock.Now, status.MaxAge)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(w.srv.Certificate())
	if w.client, err = status.NewClient(status.ClientConfig{RootCAs: pool, Clock: w.clock.Now, Timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	w.buyer = w.newParty(orgBuyer, "prn_northstar_procurement_director", "procurement_director", "agt_northstar_buyer_01", "key_northstar_principal_01", "key_northstar_agent_01")
	w.junior = w.newParty(orgBuyer, "prn_northstar_procurement_director", "procurement_director", "agt_northstar_junior_01", "", "key_northstar_agent_02")
	w.junior.principalKey, w.junior.principalSigner = w.buyer.principalKey, w.buyer.principalSigner
	w.supplier = w.newParty(orgSupplier, "prn_delta_managing_director", "managing_director", "agt_delta_supplier_01", "key_delta_principal_01", "key_delta_agent_01")
	w.ev = &Evaluator{Keys: w.keys, Mandates: w.mandates, Status: w.client, Clock: w.clock.Now}
	return w
}

// newParty generates keys for a principal (when principalKey is set) and an
// agent, and records their bindings in the keyring.
func (w *world) newParty(org, principal, role, agent, principalKey, agentKey string) party {
	p := party{org: org, principal: principal, role: role, agent: agent, principalKey: principalKey, agentKey: agentKey}
	if principalKey != "" {
		p.principalSigner = w.newKey(principalKey, org, principal)
	}
	p.agentSigner = w.newKey(agentKey, org, agent)
	return p
}

func (w *world) newKey(keyID, org, holder string) signature.Signer {
	priv, err := keys.Generate()
	if err != nil {
		w.t.Fatal(err)
	}
	s, err := signature.NewES256(keyID, priv)
	if err != nil {
		w.t.Fatal(err)
	}
	w.keys.mu.Lock()
	w.keys.keys[keyID] = Key{Public: &priv.PublicKey, OrganizationID: org, HolderID: holder, Status: envelope.KeyActive}
	w.keys.mu.Unlock()
	return s
}

// walkthroughRequest is the buyer mandate of the published walkthrough:
// offer.accept, agreement.sign and settlement.instruct on one transaction
// with one counterparty in NL, up to 4000.00 EUR.
func (w *world) walkthroughRequest() IssueRequest {
	return IssueRequest{
		Issuer:                    Issuer{OrganizationID: orgBuyer, PrincipalID: w.buyer.principal, KeyID: w.buyer.principalKey},
		Subject:                   Subject{AgentID: w.buyer.agent, KeyID: w.buyer.agentKey},
		RepresentedOrganizationID: orgBuyer,
		ValidFrom:                 validFrom,
		ValidUntil:                validTo,
		Actions:                   []string{ActOfferAccept, ActAgreementSign, ActSettlementInstruct},
		Scope: map[string]any{
			"transaction_ids":               []any{txn},
			"counterparty_organization_ids": []any{orgSupplier},
			"geographies":                   []any{"NL"},
		},
		SpendingLimit: &SpendingLimit{Currency: "EUR", Amount: "4000.00"},
	}
}

// prepare fills the identifier and the live status endpoint of req.
func (w *world) prepare(req IssueRequest) IssueRequest {
	if req.MandateID == "" {
		id, err := envelope.NewID("mnd")
		if err != nil {
			w.t.Fatal(err)
		}
		req.MandateID = id
	}
	if req.StatusEndpoint == "" {
		req.StatusEndpoint = status.EndpointFor(w.srv.URL, req.MandateID)
	}
	return req
}

// issue issues req with the issuing principal's key, registers the mandate
// as active at the status endpoint and makes it resolvable as a parent.
func (w *world) issue(req IssueRequest, signer signature.Signer) map[string]any {
	w.t.Helper()
	req = w.prepare(req)
	m, err := Issue(req, signer, w.clock.Now())
	if err != nil {
		w.t.Fatalf("issue: %v", err)
	}
	w.publish(m)
	return m
}

func (w *world) issueChild(req IssueRequest, parent map[string]any, signer signature.Signer) map[string]any {
	w.t.Helper()
	req = w.prepare(req)
	pid := parent["id"].(string)
	req.ParentMandateID = &pid
	m, err := IssueDelegated(req, parent, signer, w.clock.Now())
	if err != nil {
		w.t.Fatalf("issue child: %v", err)
	}
	w.publish(m)
	return m
}

func (w *world) publish(m map[string]any) {
	if err := w.store.Register(m["id"].(string)); err != nil {
		w.t.Fatal(err)
	}
	w.mandates.put(m)
}

// signRaw signs a draft without any of Issue's checks, to put a document
// the issuer would refuse in front of the evaluator.
func (w *world) signRaw(req IssueRequest, signer signature.Signer) map[string]any {
	w.t.Helper()
	m, err := w.prepare(req).Draft()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := signature.SignMandate(m, signer, w.clock.Now()); err != nil {
		w.t.Fatal(err)
	}
	w.publish(m)
	return m
}

// setStatus applies a signed revocation_record moving mandate id to st.
func (w *world) setStatus(id, st string, signer signature.Signer) {
	w.t.Helper()
	rec, err := status.NewRevocationRecord(status.RevocationSpec{
		SubjectType: "mandate", SubjectID: id, Status: st,
		EffectiveAt: w.clock.Now(), CreatedAt: w.clock.Now(),
		Reason:    "authority withdrawn by the issuing principal",
		CreatedBy: w.buyer.requestedBy(id),
	}, signer)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.store.Apply(rec); err != nil {
		w.t.Fatal(err)
	}
}

// terms is a complete calibration-service terms object at a total amount.
func terms(amount string) map[string]any {
	return map[string]any{
		"profile": profileID,
		"core": map[string]any{
			"description": "Calibration of pressure transmitters with certificates",
			"quantity":    "20",
			"unit_code":   "H87",
			"total":       map[string]any{"currency": "EUR", "amount": amount},
		},
		"profile_terms": map[string]any{
			"completion": map[string]any{"business_days_after_collection": 15, "business_calendar": "NL"},
			"payment":    map[string]any{"prepayment_percent": "20", "balance_trigger": "buyer_acceptance"},
			"acceptance": map[string]any{
				"certificate_required":             true,
				"machine_readable_result_required": true,
				"qualification_standard":           "ISO/IEC 17025:2017",
			},
			"rework": map[string]any{"included_attempts": 1},
		},
	}
}

// acceptAct is the buyer's offer.accept at amount, performed in NL.
func acceptAct(amount string) map[string]any {
	return ActDocument(ActOfferAccept, txn, orgSupplier, terms(amount), map[string]any{"geography": "NL"})
}

func (w *world) evaluate(m, act map[string]any, actor Actor, approval map[string]any) Result {
	return w.ev.Evaluate(context.Background(), Request{Mandate: m, Act: act, Actor: actor, Approval: approval})
}

func wantDecision(t testing.TB, r Result, d Decision, codes ...reason.Code) {
	t.Helper()
	if r.Decision != d {
		t.Fatalf("decision %s, want %s; findings: %s", r.Decision, d, findings(r))
	}
	for _, c := range codes {
		found := false
		for _, x := range r.ReasonCodes {
			found = found || x == c
		}
		if !found {
			t.Fatalf("reason codes %v lack %s; findings: %s", r.ReasonCodes, c, findings(r))
		}
	}
	if d == Allow && len(r.ReasonCodes) != 0 {
		t.Fatalf("allow with reason codes %v", r.ReasonCodes)
	}
}

func findings(r Result) string {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "[%s %s %s] ", f.Step, f.Code, f.Detail)
	}
	return b.String()
}

func wantRefusal(t testing.TB, err error, code reason.Code) {
	t.Helper()
	var r *reason.Refusal
	if !errors.As(err, &r) || !r.Has(code) {
		t.Fatalf("want a refusal carrying %s, got %v", code, err)
	}
}
