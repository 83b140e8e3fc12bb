package peer_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/bindings/peer"
	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/peering"
)

// serve starts n's peer listener, as `party serve` does, without a record
// engine (the carriers are covered by their own packages).
func serve(t *testing.T, n *orgtest.Node) {
	t.Helper()
	h, err := peer.Handler(peer.Config{Org: n.Org})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := n.Org.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	l := tls.NewListener(n.Sockets.Peer, peering.ServerTLSConfig(cert))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

func issue(t *testing.T, n *orgtest.Node, counterparties ...any) string {
	t.Helper()
	now := time.Now().UTC()
	m, err := n.Principal(t).IssueMandate(context.Background(), authority.IssueRequest{
		ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(24 * time.Hour)),
		Actions: []string{"offer.accept"},
		Scope: map[string]any{"categories": []any{"services.calibration"},
			"counterparty_organization_ids": counterparties},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m["id"].(string)
}

// A mandate is disclosed to the pinned peers its scope names, and to no
// one else; a client without a pinned certificate reaches only the public
// status route.
func TestMandateDisclosure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := orgtest.New(t, "org_alpha", nil, false)
	b := orgtest.New(t, "org_beta", nil, false)
	orgtest.Peer(t, a, b)
	serve(t, a)

	forB := issue(t, a, "org_beta")
	forOther := issue(t, a, "org_gamma")

	c, err := peer.NewClient(b.Org, peer.CarrierA2A, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.FetchMandate(ctx, "org_alpha", forB)
	if err != nil {
		t.Fatalf("mandate naming the peer: %v", err)
	}
	rec, err := a.Org.Store.GetMandate(ctx, forB)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, rec.Body) {
		t.Fatal("served mandate is not the stored bytes")
	}
	if _, err := c.FetchMandate(ctx, "org_alpha", forOther); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("mandate naming another organisation: got %v, want 404", err)
	}
	if _, err := c.FetchMandate(ctx, "org_alpha", "mnd_000000000000000000000000"); err == nil {
		t.Fatal("unknown mandate was served")
	}

	// No client certificate: the mandate route refuses, status answers.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://" + a.Org.Config().PeerAddr
	resp, err := anon.Get(base + peer.MandatesPath + forB)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unpinned mandate fetch: %s, want 403", resp.Status)
	}
	resp, err = anon.Get(base + "/v1/mandates/" + forB + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(forB)) {
		t.Fatalf("status: %s %s", resp.Status, body)
	}
	// Without a receiver no carrier is mounted.
	resp, err = anon.Post(base+"/a2a", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("carrier without a receiver: %s, want 404", resp.Status)
	}
}

func TestNewClientRefusesUnknownCarrier(t *testing.T) {
	t.Parallel()
	n := orgtest.New(t, "org_alpha", nil, false)
	if _, err := peer.NewClient(n.Org, "smtp", nil); err == nil {
		t.Fatal("carrier smtp accepted")
	}
	for _, c := range []peer.Carrier{peer.CarrierA2A, peer.CarrierHTTPS, ""} {
		if _, err := peer.NewClient(n.Org, c, nil); err != nil {
			t.Fatalf("carrier %q: %v", c, err)
		}
	}
}
