package notify_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/notify"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

var secret = []byte("a shared secret for the principal's webhook")

// received is one delivery the principal's endpoint took.
type received struct {
	key  string
	body map[string]any
}

// endpoint is the principal's HTTPS endpoint: it checks each delivery's
// signature and hands on what it accepted. fail answers the first fail
// attempts with 503.
type endpoint struct {
	srv      *httptest.Server
	got      chan received
	mu       sync.Mutex
	fail     int
	attempts map[string]int
	hold     chan struct{} // when set, every answer waits for it to close
}

func newEndpoint(t *testing.T, fail int) *endpoint {
	e := &endpoint{got: make(chan received, 64), fail: fail, attempts: map[string]int{}}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.hold != nil {
			<-e.hold
		}
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Party-Timestamp")
		if !hmac.Equal([]byte(r.Header.Get("X-Party-Signature")), []byte(notify.Sign(secret, ts, body))) || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("a delivery without a valid signature: %q", r.Header.Get("X-Party-Signature"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		e.mu.Lock()
		e.attempts[key]++
		failing := e.fail > 0
		if failing {
			e.fail--
		}
		e.mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("body %s", body)
		}
		e.got <- received{key: key, body: m}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-e.got:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no notice arrived")
	}
	return received{}
}

func webhook(t *testing.T, e *endpoint, org string, opt notify.Options) *notify.Webhook {
	t.Helper()
	opt.Client = e.srv.Client()
	w, err := notify.New(e.srv.URL+"/party", secret, org, opt)
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(t.Context())
	return w
}

// Over the walkthrough: the buyer's principal is told of the approval
// request its agent made and, once, of the transaction's completion; each
// notice signed under the shared secret.
func TestApprovalRequestAndFinalState(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	e := newEndpoint(t, 0)
	w := webhook(t, e, "org_northstar", notify.Options{})
	b.Agent.OnApprovalRequest(w.ApprovalRequested)
	b.Engine.Subscribe(w.Changed)

	txn := recordtest.Form(t, b, s, "3200.00")
	r := e.next(t)
	if r.body["kind"] != notify.KindApprovalRequested || r.body["action_type"] != "offer.accept" || r.body["transaction_id"] != txn ||
		r.body["counterparty_organization_id"] != "org_delta" || r.body["organization_id"] != "org_northstar" || r.body["party_notice"] != notify.Version ||
		r.key != r.body["notice_id"] || r.body["approval_request_id"] == nil || r.body["requested_at"] == "" {
		t.Fatalf("approval notice %+v", r)
	}
	if tot, _ := r.body["total"].(map[string]any); tot["amount"] != "3200.00" || tot["currency"] != "EUR" {
		t.Fatalf("approval notice total %v", r.body["total"])
	}
	recordtest.Complete(t, b, s, txn)
	r = e.next(t)
	if r.body["kind"] != notify.KindTransactionFinal || r.body["transaction_id"] != txn || r.body["state"] != "completed" {
		t.Fatalf("final notice %+v", r)
	}
	// A later commit on the completed transaction is not told again.
	w.Changed(record.Change{TransactionID: txn, State: "completed"})
	w.Changed(record.Change{TransactionID: txn, State: "in_performance"})
	select {
	case r := <-e.got:
		t.Fatalf("told again: %+v", r)
	default:
	}
}

// A failed attempt is retried under the same Idempotency-Key until the
// endpoint takes it.
func TestRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	e := newEndpoint(t, 2)
	w := webhook(t, e, "org_delta", notify.Options{Backoff: time.Millisecond})
	w.Changed(record.Change{TransactionID: "txn_0123456789abcdef01234567", State: "cancelled"})
	r := e.next(t)
	e.mu.Lock()
	n := e.attempts[r.key]
	e.mu.Unlock()
	if n != 3 || r.body["state"] != "cancelled" {
		t.Fatalf("delivered after %d attempts: %+v", n, r)
	}
}

// An endpoint that does not answer holds up no act: the approval request
// is stored and answered while every delivery waits.
func TestActNotHeldUp(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	e := newEndpoint(t, 0)
	e.hold = make(chan struct{})
	w := webhook(t, e, "org_northstar", notify.Options{Queue: 1})
	b.Agent.OnApprovalRequest(w.ApprovalRequested)
	o := recordtest.Offer(t, s, "3200.00")
	act, err := b.Engine.AcceptanceAct(context.Background(), b.Actor(), b.Mandate, o.Objects["offer"])
	if err != nil {
		t.Fatal(err)
	}
	// More requests than the queue holds, while the endpoint hangs: each
	// returns, each is stored.
	for range 3 {
		req, err := b.Agent.RequestApproval(context.Background(), agent.VerifyInput{MandateID: b.Mandate, ProposedAction: act})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := b.Agent.ApprovalStatus(context.Background(), req.ApprovalRequestID); st.Status != store.ApprovalPending {
			t.Fatalf("request %s is %s", req.ApprovalRequestID, st.Status)
		}
	}
	close(e.hold)
	if r := e.next(t); r.body["kind"] != notify.KindApprovalRequested {
		t.Fatalf("after the endpoint answered: %+v", r)
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := instance.Config{OrganizationID: "org_delta"}
	if w, err := notify.Open(dir, cfg, notify.Options{}); w != nil || err != nil {
		t.Fatalf("not configured: %v %v", w, err)
	}
	os.WriteFile(filepath.Join(dir, "hook.secret"), append(secret, '\n'), 0o600)
	for _, c := range []instance.WebhookConfig{
		{URL: "http://example.invalid/hook", SecretFile: "hook.secret"},
		{URL: "https://user@example.invalid/hook", SecretFile: "hook.secret"},
		{URL: "https://example.invalid/hook"},
		{URL: "https://example.invalid/hook", SecretFile: "missing.secret"},
	} {
		cfg.PrincipalWebhook = &c
		if _, err := notify.Open(dir, cfg, notify.Options{}); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	cfg.PrincipalWebhook = &instance.WebhookConfig{URL: "https://example.invalid/hook", SecretFile: "hook.secret"}
	if w, err := notify.Open(dir, cfg, notify.Options{}); w == nil || err != nil {
		t.Fatalf("configured: %v", err)
	}
	// A private CA: the endpoint's certificate is verified against
	// ca_file's roots, and a file holding none is refused.
	e := newEndpoint(t, 0)
	os.WriteFile(filepath.Join(dir, "hook-ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.srv.Certificate().Raw}), 0o600)
	os.WriteFile(filepath.Join(dir, "not-a-ca.pem"), []byte("no certificate here"), 0o600)
	cfg.PrincipalWebhook = &instance.WebhookConfig{URL: e.srv.URL + "/party", SecretFile: "hook.secret", CAFile: "not-a-ca.pem"}
	if _, err := notify.Open(dir, cfg, notify.Options{}); err == nil {
		t.Fatal("a ca_file without a certificate accepted")
	}
	cfg.PrincipalWebhook.CAFile = "hook-ca.pem"
	w, err := notify.Open(dir, cfg, notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(t.Context())
	w.Changed(record.Change{TransactionID: "txn_0123456789abcdef01234567", State: "completed"})
	if r := e.next(t); r.body["kind"] != notify.KindTransactionFinal {
		t.Fatalf("through the private CA: %+v", r.body)
	}
}

// The engine's alerts reach the principal: an obligation fallen due (and
// then overdue), told by both sides, each once; a counterparty away past
// the bound, and back.
func TestAlerts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	e := newEndpoint(t, 0)
	w := webhook(t, e, "org_delta", notify.Options{Clock: c.Now})
	s.Engine.SubscribeAlerts(w.Alerted)
	txn := recordtest.Form(t, b, s, "3200.00")
	at := c.Now().Add(time.Hour)
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn,
		DueCondition: map[string]any{"type": "due_at_time", "at": at.Format(time.RFC3339)}})
	if err != nil {
		t.Fatal(err)
	}
	c.Add(time.Hour + record.DefaultOverdueAfter)
	s.Engine.WorkTiming(ctx)
	for _, kind := range []string{notify.KindObligationDue, notify.KindObligationOverdue} {
		r := e.next(t)
		if r.body["kind"] != kind || r.body["obligation_id"] != out.Objects["obligation"] || r.body["transaction_id"] != txn ||
			r.body["due_at"] != at.Format(time.RFC3339) || r.body["counterparty_organization_id"] != "org_northstar" {
			t.Fatalf("%s notice %+v", kind, r.body)
		}
	}
	s.Engine.WorkTiming(ctx)
	s.Out.SetDown(true)
	since := c.Now()
	if _, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: out.Objects["obligation"],
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: "certificates", ArtifactHash: "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"}}}); err != nil {
		t.Fatal(err)
	}
	c.Add(record.DefaultUnreachableAfter)
	s.Engine.WorkTiming(ctx)
	r := e.next(t)
	if r.body["kind"] != notify.KindPeerUnreachable || r.body["counterparty_organization_id"] != "org_northstar" ||
		r.body["unreachable_since"] != since.Format(time.RFC3339) || r.body["messages_waiting"] != float64(1) {
		t.Fatalf("unreachable notice %+v", r.body)
	}
	s.Out.SetDown(false)
	c.Add(time.Minute)
	recordtest.Flush(ctx, b, s)
	if r := e.next(t); r.body["kind"] != notify.KindPeerReachable || r.body["unreachable_since"] != since.Format(time.RFC3339) {
		t.Fatalf("reachable notice %+v", r.body)
	}
	select {
	case r := <-e.got:
		t.Fatalf("told again: %+v", r.body)
	case <-time.After(100 * time.Millisecond):
	}
}
