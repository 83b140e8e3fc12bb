package org_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
)

// Mandate revocations travel (docs/record-protocol.md, the section of
// that name): a principal's revocation of a mandate reaches, among its
// key records, the counterparties the mandate is disclosed to, which keep
// it when it is their peer's revocation of a mandate they hold as that
// peer's, and deny under it at once.

// issueFor has n's principal issue a mandate scoped to counterparty and
// returns its id and status endpoint.
func issueFor(t *testing.T, n *orgtest.Node, now time.Time, counterparty string) (string, string) {
	t.Helper()
	m, err := n.Principal(t).IssueMandate(context.Background(), authority.IssueRequest{
		ValidFrom: envelope.Timestamp(now.Add(-time.Minute)), ValidUntil: envelope.Timestamp(now.Add(24 * time.Hour)),
		Actions:       []string{"offer.accept"},
		Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m["id"].(string), m["status_endpoint"].(string)
}

// holdAs stores from's mandate id in to's record as from's, as the
// record engine does once it checked the mandate (record.fetchMandate).
func holdAs(t *testing.T, from, to *orgtest.Node, id string) {
	t.Helper()
	ctx := context.Background()
	rec, err := from.Org.Store.GetMandate(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Org.Store.PutMandate(ctx, rec.Body, from.Org.Config().OrganizationID); err != nil {
		t.Fatal(err)
	}
}

// heldRevocations are the ids of the revocation records n holds.
func heldRevocations(t *testing.T, n *orgtest.Node) []string {
	t.Helper()
	raws, err := n.Org.Store.ObjectsOfType(context.Background(), "revocation_record")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range raws {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o["id"].(string))
	}
	return ids
}

// revocationOf is the revocation record n's principal stored for its
// mandate id.
func revocationOf(t *testing.T, n *orgtest.Node, id string) map[string]any {
	t.Helper()
	b, err := n.Org.Store.MandateRevocation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	o, err := canonical.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestMandateRevocationReachesTheCounterparty: delta's principal revokes
// two mandates, one scoped to northstar, one to a third organisation.
// Delta serves northstar the first revocation only (the second mandate is
// not disclosed to it), which northstar fetches and keeps; its evaluator, which had resolved
// the mandate active from delta's status endpoint a moment before (a
// document its status client may keep for 60 seconds), now finds it
// revoked, carrying the record it holds, without asking again.
func TestMandateRevocationReachesTheCounterparty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &testClock{t: time.Now().UTC().Truncate(time.Second)}
	a := orgtest.New(t, "org_northstar", c.now, true)
	b := orgtest.New(t, "org_delta", c.now, true)
	c.set(time.Now().UTC().Truncate(time.Second)) // after Init: its keys are dated by the wall clock
	orgtest.Peer(t, a, b)
	id, endpoint := issueFor(t, b, c.now(), "org_northstar")
	elsewhere, _ := issueFor(t, b, c.now(), "org_eastmarch")
	holdAs(t, b, a, id)

	resolver := a.Org.Evaluator().Status
	if doc, err := resolver.Resolve(ctx, id, endpoint); err != nil || doc.Status != status.Active {
		t.Fatalf("before the revocation: %+v %v", doc, err)
	}
	for _, m := range []string{id, elsewhere} {
		if err := b.Principal(t).Revoke(ctx, m, "the agent is withdrawn"); err != nil {
			t.Fatal(err)
		}
	}
	rev := revocationOf(t, b, id)
	// Delta serves northstar the revocation of the mandate disclosed to
	// it, not the other.
	hc, peer, err := a.Org.Clients.For("org_delta")
	if err != nil {
		t.Fatal(err)
	}
	served, err := peering.FetchKeyRecords(ctx, hc, peer)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, raw := range served {
		o, err := canonical.DecodeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := o["payload"].(map[string]any); o["object_type"] == "revocation_record" {
			subjects = append(subjects, p["subject_id"].(string))
		}
	}
	if !slices.Equal(subjects, []string{id}) {
		t.Fatalf("delta serves northstar revocations of %v, want of %s only (not %s)", subjects, id, elsewhere)
	}
	if _, err := a.Org.Trusted.Exchange(ctx, "org_delta"); err != nil {
		t.Fatal(err)
	}
	if got := heldRevocations(t, a); !slices.Equal(got, []string{rev["id"].(string)}) {
		t.Fatalf("northstar holds revocations %v, want only %v", got, rev["id"])
	}
	held, err := a.Org.Store.GetObject(ctx, "", rev["id"].(string)) // a revocation record is bound to no transaction
	if want, _ := b.Org.Store.MandateRevocation(ctx, id); err != nil || string(held) != string(want) {
		t.Fatalf("northstar holds other bytes than delta signed: %v", err)
	}
	doc, err := resolver.Resolve(ctx, id, endpoint)
	if err != nil || doc.Status != status.Revoked || doc.RevocationRecord["id"] != rev["id"] || doc.Usable(c.now()) != nil {
		t.Fatalf("after the revocation arrived: %+v %v, want revoked by %v", doc, err, rev["id"])
	}
	// So does the resolver an irreversible act asks, which never reads
	// the status client's cache.
	if doc, err := a.Org.Evaluator().Uncached().Status.Resolve(ctx, id, endpoint); err != nil || doc.Status != status.Revoked {
		t.Fatalf("uncached, after the revocation arrived: %+v %v", doc, err)
	}
}

// keyRecordsWith is n's key-records route serving n's own records
// followed by extra.
func keyRecordsWith(n *orgtest.Node, extra func() [][]byte) http.Handler {
	own := peering.OwnKeyRecords(n.Org.Store, n.Org.Config().OrganizationID)
	return peering.KeyRecordsHandler(n.Org.Peers, func(ctx context.Context, peer string) ([][]byte, error) {
		recs, err := own(ctx, peer)
		return append(recs, extra()...), err
	}, nil)
}

// serveOn serves h on n's peer listener, over the TLS its peers pin.
func serveOn(t *testing.T, n *orgtest.Node, h http.Handler) {
	t.Helper()
	cert, err := n.Org.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(peering.KeyRecordsPath, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(tls.NewListener(n.Sockets.Peer, peering.ServerTLSConfig(cert)))
	t.Cleanup(func() { srv.Close() })
}

// principalSigner signs as n's principal, reading its key file as only a
// principal's own process does.
func principalSigner(t *testing.T, n *orgtest.Node) signature.Signer {
	t.Helper()
	k, err := keys.ReadPrivateFile(filepath.Join(n.Dir, instance.PrincipalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewSigner(n.Org.Config().PrincipalKeyID, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHostileMandateRevocationsRefused: delta, a pinned peer, serves
// among its key records revocations that are not its word about its own
// mandate: its principal's revocation of northstar's own mandate; one
// created in northstar's name; its principal's revocation of a third
// organisation's mandate northstar holds; that organisation's own genuine
// revocation, relayed; one of delta's mandate signed by a key delta's
// pinned principal key is not; and delta's genuine one with its payload
// changed after signing. Northstar keeps none of them, and its evaluator
// still asks the status endpoints. Once delta's principal revokes that
// mandate for real, the same fetch keeps exactly that record.
func TestHostileMandateRevocationsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	a := orgtest.New(t, "org_northstar", clock, false)
	b := orgtest.New(t, "org_delta", clock, false)
	c := orgtest.New(t, "org_eastmarch", clock, false)
	orgtest.Peer(t, a, b)
	orgtest.Peer(t, a, c)
	own, _ := issueFor(t, a, now, "org_delta")
	deltas, deltasEndpoint := issueFor(t, b, now, "org_northstar")
	third, _ := issueFor(t, c, now, "org_northstar")
	holdAs(t, b, a, deltas)
	holdAs(t, c, a, third)
	if err := c.Principal(t).Revoke(ctx, third, "withdrawn"); err != nil {
		t.Fatal(err)
	}
	relayed, err := c.Org.Store.MandateRevocation(ctx, third)
	if err != nil {
		t.Fatal(err)
	}

	bs := principalSigner(t, b)
	cfgB := b.Org.Config()
	revoke := func(s signature.Signer, by envelope.Actor, mandate string) map[string]any {
		t.Helper()
		obj, err := status.NewRevocationRecord(status.RevocationSpec{
			SubjectType: "mandate", SubjectID: mandate, Status: status.Revoked, EffectiveAt: now,
			Reason: "withdrawn", CreatedBy: by, CreatedAt: now,
		}, s)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	asDelta := func(m string) envelope.Actor {
		return envelope.Actor{OrganizationID: "org_delta", AgentID: cfgB.AgentID, MandateID: m}
	}
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := signature.NewSigner(cfgB.PrincipalKeyID, stranger)
	if err != nil {
		t.Fatal(err)
	}
	changed := revoke(bs, asDelta(deltas), deltas)
	changed["payload"].(map[string]any)["reason"] = "changed after signing"
	delete(changed, "content_hash")
	if err := envelope.Seal(changed); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		record []byte
		why    string // what the refusal says
	}{
		{mustCanon(t, revoke(bs, asDelta(own), own)), "is not a mandate of org_delta"},
		{mustCanon(t, revoke(bs, envelope.Actor{OrganizationID: "org_northstar", AgentID: a.Org.Config().AgentID, MandateID: own}, own)), "is created for org_northstar, not org_delta"},
		{mustCanon(t, revoke(bs, asDelta(third), third)), "is not a mandate of org_delta"},
		{relayed, "is created for org_eastmarch, not org_delta"},
		{mustCanon(t, revoke(forger, asDelta(deltas), deltas)), "no valid object_issuance signature by a pinned principal key of org_delta"},
		{mustCanon(t, changed), "no valid object_issuance signature by a pinned principal key of org_delta"},
	}
	peer, err := a.Org.Peers.Peer("org_delta")
	if err != nil {
		t.Fatal(err)
	}
	var hostile [][]byte
	for i, c := range cases {
		if err := peering.TrustMandateRevocation(ctx, a.Org.Store, peer, c.record); !errors.Is(err, peering.ErrUntrustedKey) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("hostile record %d: %v, want a refusal saying %q", i, err, c.why)
		}
		hostile = append(hostile, c.record)
	}
	serveOn(t, b, keyRecordsWith(b, func() [][]byte { return hostile }))

	if _, err := a.Org.Trusted.Exchange(ctx, "org_delta"); err != nil {
		t.Fatal(err) // delta's key records themselves are trusted
	}
	if got := heldRevocations(t, a); len(got) != 0 {
		t.Fatalf("northstar kept %v from a hostile peer", got)
	}
	// Delta serves no status endpoint here: with nothing held, its
	// mandate's status is unresolved, not revoked.
	if _, err := a.Org.Evaluator().Status.Resolve(ctx, deltas, deltasEndpoint); !slices.Contains(reason.CodesOf(err), reason.MandateStatusUnresolved) {
		t.Fatalf("delta's mandate with no revocation held: %v", err)
	}

	// The check can keep: delta's principal's own revocation passes.
	if err := b.Principal(t).Revoke(ctx, deltas, "the agent is withdrawn"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Org.Trusted.Exchange(ctx, "org_delta"); err != nil {
		t.Fatal(err)
	}
	if got, want := heldRevocations(t, a), revocationOf(t, b, deltas)["id"]; len(got) != 1 || got[0] != want {
		t.Fatalf("northstar holds %v, want only %v", got, want)
	}
	if doc, err := a.Org.Evaluator().Status.Resolve(ctx, deltas, deltasEndpoint); err != nil || doc.Status != status.Revoked {
		t.Fatalf("delta's mandate with its revocation held: %+v %v", doc, err)
	}
}

// TestMandateRevocationFetchedUntilItArrives: delta's principal revokes
// its mandate while delta's peer listener answers every request with 503
// (an outage behind its front end); northstar's KeepCurrent keeps asking,
// and the revocation is held soon after delta serves again, with nothing
// else done on either side.
func TestMandateRevocationFetchedUntilItArrives(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := orgtest.New(t, "org_northstar", nil, false)
	b := orgtest.New(t, "org_delta", nil, false)
	orgtest.Peer(t, a, b)
	id, _ := issueFor(t, b, time.Now().UTC(), "org_northstar")
	holdAs(t, b, a, id)
	var up atomic.Bool
	var refused atomic.Int32
	records := keyRecordsWith(b, func() [][]byte { return nil })
	serveOn(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			refused.Add(1)
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		records.ServeHTTP(w, r)
	}))
	if err := b.Principal(t).Revoke(ctx, id, "the agent is withdrawn"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		a.Org.Trusted.KeepCurrent(ctx, a.Org.Peers, 20*time.Millisecond)
		close(done)
	}()
	defer func() { cancel(); <-done }()
	eventually(t, "northstar asks twice while delta is down", func() bool { return refused.Load() >= 2 })
	if got := heldRevocations(t, a); len(got) != 0 {
		t.Fatalf("held %v before delta served anything", got)
	}
	up.Store(true)
	want := revocationOf(t, b, id)["id"]
	eventually(t, "the revocation arrives", func() bool {
		got := heldRevocations(t, a)
		return len(got) == 1 && got[0] == want
	})
}

// eventually polls cond for up to ten seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not so after ten seconds: %s", what)
		}
	}
}

func mustCanon(t *testing.T, v any) []byte {
	t.Helper()
	b, err := canonical.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
