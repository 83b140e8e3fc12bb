package rails

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func instruction(key string) Instruction {
	return Instruction{InstructionID: "stl_0123456789abcdef01234567", IdempotencyKey: key, TransactionID: "txn_0123456789abcdef01234567",
		ObligationID: "obl_0123456789abcdef01234567", Currency: "EUR", Amount: "3200.00", Payer: "org_northstar", Payee: "org_delta", Attempt: 1}
}

func TestSandboxOutcomesAndLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rails", "rail_test_sandbox.json")
	s, err := NewSandbox("rail_test_sandbox", []Status{Failed, Pending, Succeeded}, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Status{Failed, Pending, Succeeded, Failed}
	for i, w := range want {
		r, err := s.Submit(ctx, instruction("key-000"+string(rune('a'+i))))
		if err != nil || r.Status != w {
			t.Fatalf("key %d: %+v %v, want %s", i, r, err, w)
		}
	}
	// A key seen before: its first answer, no money moved again.
	r, err := s.Submit(ctx, instruction("key-000a"))
	if err != nil || r.Status != Failed || s.Submissions("key-000a") != 2 || s.Executions("key-000a") != 0 {
		t.Fatalf("again: %+v %v", r, err)
	}
	// The same key for another instruction is refused.
	other := instruction("key-000c")
	other.Amount = "1.00"
	if _, err := s.Submit(ctx, other); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("reused key: %v", err)
	}
	// Pending settles when asked about, once.
	if r, err := s.Status(ctx, instruction("key-000b")); err != nil || r.Status != Succeeded || s.Executions("key-000b") != 1 {
		t.Fatalf("status: %+v %v", r, err)
	}
	s.Status(ctx, instruction("key-000b"))
	// The ledger survives a restart.
	s2, err := NewSandbox("rail_test_sandbox", []Status{Succeeded}, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Executions("key-000b") != 1 || s2.Executions("key-000c") != 1 || s2.Submissions("key-000a") != 2 {
		t.Fatal("the ledger was lost across a restart")
	}
	if r, _ := s2.Submit(ctx, instruction("key-000a")); r.Status != Failed {
		t.Fatalf("after a restart a key is answered as first: %+v", r)
	}
	if _, err := NewSandbox("rail_test_sandbox", []Status{"maybe"}, path, nil); err == nil {
		t.Fatal("an unknown outcome was accepted")
	}
}

// bank is an HTTPS endpoint that honours the webhook contract: it checks
// the signature and the idempotency key and answers each key once.
type bank struct {
	mu      sync.Mutex
	secret  []byte
	answers map[string]webhookAnswer
	calls   int
	mode    string // "", "500", "400", "slow", "garbage"
}

func (b *bank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("X-Party-Signature") != Sign(b.secret, r.Header.Get("X-Party-Timestamp"), body) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	switch b.mode {
	case "500":
		http.Error(w, "down", http.StatusInternalServerError)
		return
	case "400":
		http.Error(w, "no", http.StatusBadRequest)
		return
	case "slow":
		b.mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		b.mu.Lock()
	case "garbage":
		w.Write([]byte(`{"status":"succeeded","extra":1}`))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if r.Method == http.MethodGet {
		key = strings.TrimPrefix(r.URL.Path, "/pay/")
	} else {
		var req webhookRequest
		if err := json.Unmarshal(body, &req); err != nil || req.IdempotencyKey != key || req.Version != "0.1" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
	}
	a, seen := b.answers[key]
	if !seen {
		ref := "bank-" + key
		a = webhookAnswer{Status: Succeeded, ExternalReference: &ref}
		b.answers[key] = a
	}
	json.NewEncoder(w).Encode(a)
}

func TestWebhookContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := []byte("a shared secret of 32 bytes.....")
	bk := &bank{secret: secret, answers: map[string]webhookAnswer{}}
	srv := httptest.NewTLSServer(bk)
	defer srv.Close()
	w, err := NewWebhook("rail_acme_bank", srv.URL+"/pay", secret, srv.Client(), 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.Submit(ctx, instruction("key-bank-01"))
	if err != nil || r.Status != Succeeded || r.ExternalReference != "bank-key-bank-01" || r.SpecVersion != WebhookSpecVersion {
		t.Fatalf("submit: %+v %v", r, err)
	}
	if r, err := w.Status(ctx, instruction("key-bank-01")); err != nil || r.Status != Succeeded {
		t.Fatalf("status: %+v %v", r, err)
	}
	for _, c := range []struct {
		mode string
		want func(Result, error) bool
	}{
		{"500", func(_ Result, err error) bool { return errors.Is(err, ErrUnreachable) }},
		{"slow", func(_ Result, err error) bool { return errors.Is(err, ErrUnreachable) }},
		{"garbage", func(_ Result, err error) bool { return errors.Is(err, ErrUnreachable) }},
		{"400", func(r Result, err error) bool { return err == nil && r.Status == Failed && r.ErrorCode == "http_400" }},
	} {
		bk.mu.Lock()
		bk.mode = c.mode
		bk.mu.Unlock()
		r, err := w.Submit(ctx, instruction("key-bank-02"))
		if !c.want(r, err) {
			t.Fatalf("%s: %+v %v", c.mode, r, err)
		}
	}
	// A rail that is not reached over HTTPS, or with a short secret, is
	// refused at configuration.
	if _, err := NewWebhook("rail_acme_bank", "http://pay.example/a202", secret, nil, 0, nil); err == nil {
		t.Fatal("a plain http webhook was accepted")
	}
	if _, err := NewWebhook("rail_acme_bank", srv.URL, []byte("short"), nil, 0, nil); err == nil {
		t.Fatal("a short secret was accepted")
	}
	// Another party's signature is refused by the endpoint: the contract
	// authenticates the instance to its bank.
	bk.mu.Lock()
	bk.mode = ""
	bk.mu.Unlock()
	forged, _ := NewWebhook("rail_acme_bank", srv.URL+"/pay", []byte("another secret of 32 bytes......"), srv.Client(), time.Second, nil)
	if r, err := forged.Submit(ctx, instruction("key-bank-03")); err != nil || r.Status != Failed || r.ErrorCode != "http_401" {
		t.Fatalf("wrong secret: %+v %v", r, err)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg, err := Open(dir, []Config{{ID: "rail_test_sandbox", Kind: "sandbox"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Get("rail_test_sandbox"); !ok {
		t.Fatal("the sandbox is not registered")
	}
	if _, ok := reg.Get("rail_default"); ok {
		t.Fatal("an unconfigured rail resolved")
	}
	for _, bad := range [][]Config{
		{{ID: "bank", Kind: "sandbox"}},
		{{ID: "rail_x_bank", Kind: "carrier_pigeon"}},
		{{ID: "rail_test_sandbox", Kind: "sandbox"}, {ID: "rail_test_sandbox", Kind: "sandbox"}},
		{{ID: "rail_acme_bank", Kind: "webhook", URL: "https://pay.example", SecretFile: "missing"}},
	} {
		if _, err := Open(dir, bad, nil); err == nil {
			t.Fatalf("%+v was accepted", bad)
		}
	}
}

// TestWebhookCAFile: ca_file gives the webhook rail the roots its
// payment system's certificate is verified against, and only those.
func TestWebhookCAFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := []byte("a shared secret of 32 bytes.....")
	srv := httptest.NewUnstartedServer(&bank{secret: secret, answers: map[string]webhookAnswer{}})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("rails/bank.secret", secret)
	abs := write("rails/bank-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	write("rails/other-ca.pem", otherCA(t))
	write("rails/empty.pem", []byte("not a certificate\n"))
	submit := func(caFile string) (Result, error) {
		t.Helper()
		reg, err := Open(dir, []Config{{ID: "rail_acme_bank", Kind: "webhook", URL: srv.URL + "/pay", SecretFile: "rails/bank.secret",
			CAFile: caFile, TimeoutSeconds: 5}}, nil)
		if err != nil {
			t.Fatalf("ca_file %q: %v", caFile, err)
		}
		r, _ := reg.Get("rail_acme_bank")
		return r.Submit(ctx, instruction("key-ca-"+filepath.Base(caFile)+"-0001"))
	}
	for _, ca := range []string{"rails/bank-ca.pem", abs} {
		if r, err := submit(ca); err != nil || r.Status != Succeeded {
			t.Fatalf("ca_file %s: %+v %v", ca, r, err)
		}
	}
	// Without ca_file the system roots, which do not know the private CA;
	// with another CA's bundle, the endpoint is not trusted either.
	for _, ca := range []string{"", "rails/other-ca.pem"} {
		if r, err := submit(ca); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("ca_file %q reached the endpoint: %+v %v", ca, r, err)
		}
	}
	for ca, want := range map[string]string{"rails/empty.pem": "holds no PEM certificate", "rails/missing.pem": "no such file"} {
		_, err := Open(dir, []Config{{ID: "rail_acme_bank", Kind: "webhook", URL: srv.URL, SecretFile: "rails/bank.secret", CAFile: ca}}, nil)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "rail_acme_bank") {
			t.Fatalf("ca_file %s: %v, want an error saying %q", ca, err, want)
		}
	}
}

// otherCA is a PEM root certificate of a CA that signed nothing the test
// servers present (every httptest server shares one certificate).
func otherCA(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
