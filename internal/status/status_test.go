package status

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
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
)

const mandateID = "mnd_0123456789abcdef01234567"

var t0 = time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)

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

func pinned(srv *httptest.Server) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return pool
}

func newClient(t *testing.T, srv *httptest.Server, clock *fakeClock) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{RootCAs: pinned(srv), Clock: clock.Now, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantUnresolved(t *testing.T, err error) {
	t.Helper()
	var r *reason.Refusal
	if !errors.As(err, &r) || !r.Has(reason.MandateStatusUnresolved) {
		t.Fatalf("want A202-MANDATE-STATUS-UNRESOLVED, got %v", err)
	}
}

func testSigner(t *testing.T, keyID string) signature.Signer {
	t.Helper()
	priv, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewES256(keyID, priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func record(t *testing.T, subject, st string, at time.Time) map[string]any {
	t.Helper()
	rec, err := NewRevocationRecord(RevocationSpec{
		SubjectType: "mandate",
		SubjectID:   subject,
		Status:      st,
		EffectiveAt: at,
		Reason:      "principal withdrew the authority",
		CreatedBy:   envelope.Actor{OrganizationID: "org_northstar", AgentID: "agt_northstar_buyer_01", MandateID: subject},
		CreatedAt:   at,
	}, testSigner(t, "key_northstar_principal_01"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func doc(status string, asOf time.Time, life time.Duration) []byte {
	return []byte(fmt.Sprintf(`{"as_of":%q,"expires_at":%q,"mandate_id":%q,"status":%q}`,
		stamp(asOf), stamp(asOf.Add(life)), mandateID, status))
}

func TestParseAcceptsTheDocument(t *testing.T) {
	d, err := Parse(doc(Active, t0, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d.MandateID != mandateID || !d.Active() || !d.AsOf.Equal(t0) || !d.ExpiresAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("parsed %+v", d)
	}
	again, err := d.Marshal()
	if err != nil || string(again) != string(doc(Active, t0, 30*time.Second)) {
		t.Fatalf("round trip gave %s, %v", again, err)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"extra member":      `{"as_of":"2026-12-02T13:00:00Z","expires_at":"2026-12-02T13:00:30Z","mandate_id":"` + mandateID + `","status":"active","note":"x"}`,
		"missing expires":   `{"as_of":"2026-12-02T13:00:00Z","mandate_id":"` + mandateID + `","status":"active"}`,
		"unknown status":    `{"as_of":"2026-12-02T13:00:00Z","expires_at":"2026-12-02T13:00:30Z","mandate_id":"` + mandateID + `","status":"ACTIVE"}`,
		"offset timestamp":  `{"as_of":"2026-12-02T14:00:00+01:00","expires_at":"2026-12-02T13:00:30Z","mandate_id":"` + mandateID + `","status":"active"}`,
		"fraction":          `{"as_of":"2026-12-02T13:00:00.5Z","expires_at":"2026-12-02T13:00:30Z","mandate_id":"` + mandateID + `","status":"active"}`,
		"not a mandate id":  `{"as_of":"2026-12-02T13:00:00Z","expires_at":"2026-12-02T13:00:30Z","mandate_id":"agt_x123","status":"active"}`,
		"duplicate member":  `{"as_of":"2026-12-02T13:00:00Z","as_of":"2026-12-02T13:00:00Z","expires_at":"2026-12-02T13:00:30Z","mandate_id":"` + mandateID + `","status":"active"}`,
		"record not object": `{"as_of":"2026-12-02T13:00:00Z","expires_at":"2026-12-02T13:00:30Z","mandate_id":"` + mandateID + `","status":"active","revocation_record":"revoked"}`,
		"not json":          `status: active`,
	} {
		if _, err := Parse([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseChecksTheCarriedRecord(t *testing.T) {
	rec := record(t, mandateID, Revoked, t0)
	good := Document{MandateID: mandateID, Status: Revoked, AsOf: t0, ExpiresAt: t0.Add(time.Minute), RevocationRecord: rec}
	b, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Parse(b); err != nil || d.RevocationRecord == nil || d.Active() {
		t.Fatalf("a revoked document with its record: %+v, %v", d, err)
	}
	// "active" beside a record saying "revoked" is two answers.
	mixed := good
	mixed.Status = Active
	b, _ = mixed.Marshal()
	if _, err := Parse(b); err == nil {
		t.Error("active document carrying a revoked record accepted")
	}
	other := good
	other.RevocationRecord = record(t, "mnd_fedcba9876543210fedcba98", Revoked, t0)
	b, _ = other.Marshal()
	if _, err := Parse(b); err == nil {
		t.Error("document carrying another mandate's record accepted")
	}
}

func TestUsable(t *testing.T) {
	d := Document{MandateID: mandateID, Status: Active, AsOf: t0, ExpiresAt: t0.Add(MaxAge)}
	for _, c := range []struct {
		name string
		d    Document
		now  time.Time
		ok   bool
	}{
		{"at as_of", d, t0, true},
		{"one second before expiry", d, t0.Add(59 * time.Second), true},
		{"at expiry", d, t0.Add(MaxAge), false},
		{"within skew of a future as_of", d, t0.Add(-MaxSkew), true},
		{"future beyond skew", d, t0.Add(-MaxSkew - time.Second), false},
		{"lives longer than 60 s", Document{MandateID: mandateID, Status: Active, AsOf: t0, ExpiresAt: t0.Add(MaxAge + time.Second)}, t0, false},
		{"expires before as_of", Document{MandateID: mandateID, Status: Active, AsOf: t0, ExpiresAt: t0}, t0, false},
	} {
		if err := c.d.Usable(c.now); (err == nil) != c.ok {
			t.Errorf("%s: Usable = %v", c.name, err)
		}
	}
}

// liveServer serves a MemoryStore holding mandateID over TLS with the
// shared fake clock.
func liveServer(t *testing.T, clock *fakeClock, ttl time.Duration) (*httptest.Server, *MemoryStore, *atomic.Int64) {
	t.Helper()
	store := NewMemoryStore()
	if err := store.Register(mandateID); err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(store, clock.Now, ttl)
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, store, &hits
}

func TestRevocationSeenWithinSixtySeconds(t *testing.T) {
	clock := &fakeClock{t: t0}
	srv, store, hits := liveServer(t, clock, MaxAge)
	c := newClient(t, srv, clock)
	endpoint := EndpointFor(srv.URL, mandateID)
	ctx := context.Background()

	d, err := c.Resolve(ctx, mandateID, endpoint)
	if err != nil || !d.Active() {
		t.Fatalf("first resolve: %+v, %v", d, err)
	}
	if err := store.Apply(record(t, mandateID, Revoked, clock.Now())); err != nil {
		t.Fatal(err)
	}
	// Inside the bound the cached answer may still be served...
	clock.Advance(59 * time.Second)
	if d, err := c.Resolve(ctx, mandateID, endpoint); err != nil || !d.Active() || hits.Load() != 1 {
		t.Fatalf("at +59 s: %+v, %v, %d fetches", d, err, hits.Load())
	}
	// ...and at 60 s it never is.
	clock.Advance(time.Second)
	d, err = c.Resolve(ctx, mandateID, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != Revoked || d.RevocationRecord == nil || hits.Load() != 2 {
		t.Fatalf("at +60 s: %+v, %d fetches", d, hits.Load())
	}
}

func TestCacheEndsAtExpiresAt(t *testing.T) {
	clock := &fakeClock{t: t0}
	srv, _, hits := liveServer(t, clock, 20*time.Second)
	c := newClient(t, srv, clock)
	endpoint := EndpointFor(srv.URL, mandateID)
	for i, step := range []time.Duration{0, 19 * time.Second, time.Second} {
		clock.Advance(step)
		if _, err := c.Resolve(context.Background(), mandateID, endpoint); err != nil {
			t.Fatalf("resolve %d: %v", i, err)
		}
	}
	if hits.Load() != 2 {
		t.Fatalf("%d fetches, want 2 (the answer expired at +20 s)", hits.Load())
	}
}

func TestClientRefusesPlainHTTPBeforeConnecting(t *testing.T) {
	var hits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer plain.Close()
	clock := &fakeClock{t: t0}
	tlsSrv, _, _ := liveServer(t, clock, MaxAge)
	c := newClient(t, tlsSrv, clock)
	for _, endpoint := range []string{
		EndpointFor(plain.URL, mandateID),
		"HTTP://" + strings.TrimPrefix(plain.URL, "http://") + "/x",
		"ftp://status.example/x",
		"//status.example/x",
		"https://user:pw@status.example/x",
	} {
		_, err := c.Resolve(context.Background(), mandateID, endpoint)
		wantUnresolved(t, err)
		var r *reason.Refusal
		if errors.As(err, &r) && !r.Has(reason.MandateStatusInsecure) {
			t.Errorf("%s: no A202-MANDATE-STATUS-INSECURE in %v", endpoint, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("a plain-HTTP endpoint was contacted %d times", hits.Load())
	}
}

func TestClientRefusesUnpinnedCertificate(t *testing.T) {
	clock := &fakeClock{t: t0}
	srv, _, _ := liveServer(t, clock, MaxAge)
	c, err := NewClient(ClientConfig{RootCAs: x509.NewCertPool(), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Resolve(context.Background(), mandateID, EndpointFor(srv.URL, mandateID))
	wantUnresolved(t, err)
	if _, err := NewClient(ClientConfig{}); err == nil {
		t.Fatal("a client without a pinned pool was built")
	}
}

func TestClientUnreachable(t *testing.T) {
	clock := &fakeClock{t: t0}
	srv, _, _ := liveServer(t, clock, MaxAge)
	c := newClient(t, srv, clock)
	endpoint := EndpointFor(srv.URL, mandateID)
	srv.Close()
	_, err := c.Resolve(context.Background(), mandateID, endpoint)
	wantUnresolved(t, err)
}

// TestClientRefusesBadAnswers serves one bad answer per case from a TLS
// server the client trusts.
func TestClientRefusesBadAnswers(t *testing.T) {
	clock := &fakeClock{t: t0}
	type answer func(w http.ResponseWriter, r *http.Request)
	jsonBody := func(b []byte) answer {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		}
	}
	cases := map[string]answer{
		"stale":          jsonBody(doc(Active, t0.Add(-2*time.Minute), MaxAge)),
		"future-dated":   jsonBody(doc(Active, t0.Add(MaxSkew+time.Second), 10*time.Second)),
		"lives too long": jsonBody(doc(Active, t0, MaxAge+time.Second)),
		"another mandate": jsonBody([]byte(fmt.Sprintf(`{"as_of":%q,"expires_at":%q,"mandate_id":"mnd_fedcba9876543210fedcba98","status":"active"}`,
			stamp(t0), stamp(t0.Add(time.Minute))))),
		"malformed":    jsonBody([]byte(`{"status":"active"}`)),
		"not found":    func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
		"server error": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
		},
		"wrong type":    func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(doc(Active, t0, MaxAge)) },
		"oversize body": jsonBody(append(doc(Active, t0, MaxAge), []byte(strings.Repeat(" ", MaxDocumentSize))...)),
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(a))
			defer srv.Close()
			c := newClient(t, srv, clock)
			_, err := c.Resolve(context.Background(), mandateID, EndpointFor(srv.URL, mandateID))
			wantUnresolved(t, err)
		})
	}
	// Within the skew a slightly future as_of is accepted.
	srv := httptest.NewTLSServer(http.HandlerFunc(jsonBody(doc(Active, t0.Add(3*time.Second), 30*time.Second))))
	defer srv.Close()
	if _, err := newClient(t, srv, clock).Resolve(context.Background(), mandateID, EndpointFor(srv.URL, mandateID)); err != nil {
		t.Fatalf("as_of 3 s ahead: %v", err)
	}
}

func TestHandlerServesOnlyOverTLS(t *testing.T) {
	store := NewMemoryStore()
	_ = store.Register(mandateID)
	h, err := NewHandler(store, func() time.Time { return t0 }, 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(h)
	defer plain.Close()
	resp, err := http.Get(EndpointFor(plain.URL, mandateID))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("plain HTTP answered %d", resp.StatusCode)
	}
	if _, err := NewHandler(store, nil, 61*time.Second); err == nil {
		t.Fatal("a ttl over 60 s was accepted")
	}
}

func TestHandlerAnswers(t *testing.T) {
	clock := &fakeClock{t: t0}
	srv, _, _ := liveServer(t, clock, 30*time.Second)
	client := srv.Client()
	get := func(path, method string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get("/v1/mandates/"+mandateID+"/status", http.MethodGet); r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	if r := get("/v1/mandates/mnd_fedcba9876543210fedcba98/status", http.MethodGet); r.StatusCode != 404 {
		t.Errorf("unknown mandate: %d", r.StatusCode)
	}
	if r := get("/v1/mandates/not-a-mandate/status", http.MethodGet); r.StatusCode != 404 {
		t.Errorf("bad id: %d", r.StatusCode)
	}
	if r := get("/v1/mandates/"+mandateID+"/status", http.MethodPost); r.StatusCode != 405 {
		t.Errorf("POST: %d", r.StatusCode)
	}
}

func TestMemoryStoreTransitions(t *testing.T) {
	s := NewMemoryStore()
	if err := s.Register(mandateID); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(mandateID); err == nil {
		t.Error("registering twice would reset a revocation")
	}
	steps := []struct {
		to string
		ok bool
	}{
		{Active, false}, {Suspended, true}, {Suspended, false}, {Active, true},
		{Revoked, true}, {Active, false}, {Suspended, false}, {Revoked, false},
	}
	for i, st := range steps {
		err := s.Apply(record(t, mandateID, st.to, t0.Add(time.Duration(i)*time.Minute)))
		if (err == nil) != st.ok {
			t.Errorf("step %d to %s: %v", i, st.to, err)
		}
	}
	if e, _ := s.Status(context.Background(), mandateID); e.Status != Revoked {
		t.Fatalf("final status %s", e.Status)
	}
	if err := s.Apply(record(t, "mnd_fedcba9876543210fedcba98", Revoked, t0)); !errors.Is(err, ErrUnknownMandate) {
		t.Errorf("unknown mandate: %v", err)
	}
}

func TestNewRevocationRecord(t *testing.T) {
	priv, _ := keys.Generate()
	s, _ := signature.NewES256("key_northstar_principal_01", priv)
	rec, err := NewRevocationRecord(RevocationSpec{
		SubjectType: "key", SubjectID: "key_northstar_agent_01", Status: Revoked,
		EffectiveAt: t0, Reason: "key retired", CreatedAt: t0,
		CreatedBy: envelope.Actor{OrganizationID: "org_northstar", AgentID: "agt_northstar_buyer_01", MandateID: mandateID},
	}, s)
	if err != nil {
		t.Fatal(err)
	}
	if rec["transaction_id"] != nil || rec["object_type"] != "revocation_record" {
		t.Fatalf("envelope: %v", rec)
	}
	if err := signature.VerifyEntry(rec, 0, &priv.PublicKey); err != nil {
		t.Fatalf("signature: %v", err)
	}
	other, _ := keys.Generate()
	if err := signature.VerifyEntry(rec, 0, &other.PublicKey); err == nil {
		t.Fatal("verified under another key")
	}
	for name, spec := range map[string]RevocationSpec{
		"prefix":   {SubjectType: "mandate", SubjectID: "agt_x123", Status: Revoked, Reason: "r"},
		"type":     {SubjectType: "principal", SubjectID: "prn_x123", Status: Revoked, Reason: "r"},
		"status":   {SubjectType: "mandate", SubjectID: mandateID, Status: Expired, Reason: "r"},
		"reason":   {SubjectType: "mandate", SubjectID: mandateID, Status: Revoked},
		"too long": {SubjectType: "mandate", SubjectID: mandateID, Status: Revoked, Reason: strings.Repeat("x", 513)},
	} {
		spec.CreatedBy = envelope.Actor{OrganizationID: "org_northstar", AgentID: "agt_northstar_buyer_01", MandateID: mandateID}
		if _, err := NewRevocationRecord(spec, s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestClientAcceptsPinnedFingerprintOnly(t *testing.T) {
	clock := &fakeClock{t: t0}
	srv, _, _ := liveServer(t, clock, MaxAge)
	sum := sha256.Sum256(srv.Certificate().Raw)
	pin := hex.EncodeToString(sum[:])
	pins := []string{}
	c, err := NewClient(ClientConfig{RootCAs: x509.NewCertPool(), Clock: clock.Now, Pins: func() []string { return pins }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(context.Background(), mandateID, EndpointFor(srv.URL, mandateID)); err == nil {
		t.Fatal("an unpinned certificate was accepted")
	}
	pins = []string{strings.Repeat("0", 64), pin}
	if _, err := c.Resolve(context.Background(), mandateID, EndpointFor(srv.URL, mandateID)); err != nil {
		t.Fatalf("pinned certificate refused: %v", err)
	}
}
