package peering_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/peering/peeringtest"
	"github.com/partyd/party/internal/signature"
)

// whoami answers with the organisation the request authenticated as.
func whoami(d *peering.Directory) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := d.AuthenticateRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		io.WriteString(w, p.OrganizationID)
	})
}

func get(t *testing.T, hc *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestMutualPinnedTLS(t *testing.T) {
	a, b := peeringtest.Pair(t)
	b.Serve(t, whoami(b.Directory))

	// A reaches B with B's pin and is recognised as A by its certificate.
	hc := peering.NewHTTPClient(a.Cert, b.Info, 10*time.Second)
	code, body, err := get(t, hc, b.URL("/"))
	if err != nil || code != 200 || body != a.Org {
		t.Fatalf("pinned call: %d %q %v", code, body, err)
	}

	// A pin of any other certificate fails the handshake.
	wrong := b.Info
	wrong.TLSCertificateSHA256 = a.Info.TLSCertificateSHA256
	if _, _, err := get(t, peering.NewHTTPClient(a.Cert, wrong, 10*time.Second), b.URL("/")); err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Fatalf("wrong pin accepted: %v", err)
	}

	// No client certificate: the handshake completes, the request is refused.
	noCert := peering.NewHTTPClient(tls.Certificate{}, b.Info, 10*time.Second)
	if code, _, err := get(t, noCert, b.URL("/")); err != nil || code != http.StatusForbidden {
		t.Fatalf("request without a client certificate: %d %v", code, err)
	}

	// A certificate B does not pin is refused too.
	c := peeringtest.NewNode(t, "org_eastmarch")
	if code, _, err := get(t, peering.NewHTTPClient(c.Cert, b.Info, 10*time.Second), b.URL("/")); err != nil || code != http.StatusForbidden {
		t.Fatalf("request with an unpinned client certificate: %d %v", code, err)
	}
	// Pinning C while B serves takes effect without a restart.
	if _, err := instance.AddPeer(b.Dir, c.PeerFile); err != nil {
		t.Fatal(err)
	}
	if code, body, err := get(t, peering.NewHTTPClient(c.Cert, b.Info, 10*time.Second), b.URL("/")); err != nil || code != 200 || body != c.Org {
		t.Fatalf("newly pinned peer: %d %q %v", code, body, err)
	}

	// Plain HTTP is never attempted.
	if _, _, err := get(t, hc, "http://"+b.Addr+"/"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("plain HTTP: %v", err)
	}
}

// TestConnectionsKeptForConcurrentRequests: as many requests to one peer
// at once as eight agents' acts make are served, the next time, on the
// connections the first round opened: none is closed for an idle limit
// and dialled again with a new mutual TLS handshake.
func TestConnectionsKeptForConcurrentRequests(t *testing.T) {
	t.Parallel()
	a, b := peeringtest.Pair(t)
	const n = 8
	var mu sync.Mutex
	conns := map[string]bool{}
	arrived := 0
	all := make(chan struct{})
	b.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		arrived++
		if arrived == n {
			close(all)
		}
		wait := all
		mu.Unlock()
		<-wait // every request of the round is in flight on its own connection
	}))
	hc := peering.NewHTTPClient(a.Cert, b.Info, 10*time.Second)
	for round := range 2 {
		mu.Lock()
		arrived, all = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if code, _, err := get(t, hc, b.URL("/")); err != nil || code != http.StatusOK {
					t.Errorf("round %d: %d %v", round, code, err)
				}
			})
		}
		wg.Wait()
	}
	if len(conns) != n {
		t.Fatalf("%d connections for two rounds of %d concurrent requests, want %d", len(conns), n, n)
	}
}

// TestPeersSeesANewPeerFile: a peer file added while the directory is in
// use is found at once by a lookup that misses (Peer), and by Peers, which
// key resolution calls at every signature, once its recheck is due (within
// a second), not by a stat at every call.
func TestPeersSeesANewPeerFile(t *testing.T) {
	a, b := peeringtest.Pair(t)
	now := time.Now()
	peering.SetClock(b.Directory, func() time.Time { return now })
	if got := b.Directory.Peers(); len(got) != 1 {
		t.Fatalf("%d peers, want 1", len(got))
	}
	other := a.Info
	other.OrganizationID = "org_second"
	other.TLSCertificateSHA256 = strings.Repeat("ab", 32)
	data, err := jsonMarshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := instance.AddPeer(b.Dir, data); err != nil {
		t.Fatal(err)
	}
	if got := b.Directory.Peers(); len(got) != 1 {
		t.Fatalf("Peers looked at the folder again within a second: %d peers", len(got))
	}
	now = now.Add(time.Second)
	if got := b.Directory.Peers(); len(got) != 2 || got[1].OrganizationID != "org_second" {
		t.Fatalf("a second later: %+v", got)
	}
	third := a.Info
	third.OrganizationID = "org_third"
	third.TLSCertificateSHA256 = strings.Repeat("cd", 32)
	if data, err = jsonMarshal(third); err != nil {
		t.Fatal(err)
	}
	if _, err := instance.AddPeer(b.Dir, data); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Directory.Peer("org_third"); err != nil || p.OrganizationID != "org_third" {
		t.Fatalf("a lookup that misses: %+v %v", p, err)
	}
}

func TestAuthenticateRefusesAmbiguousPin(t *testing.T) {
	a, b := peeringtest.Pair(t)
	// A second organisation's peer file carrying A's certificate pin.
	other := a.Info
	other.OrganizationID = "org_impostor"
	data, err := jsonMarshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := instance.AddPeer(b.Dir, data); err != nil {
		t.Fatal(err)
	}
	if err := b.Directory.Reload(); err != nil {
		t.Fatal(err)
	}
	b.Serve(t, whoami(b.Directory))
	hc := peering.NewHTTPClient(a.Cert, b.Info, 10*time.Second)
	if code, _, err := get(t, hc, b.URL("/")); err != nil || code != http.StatusForbidden {
		t.Fatalf("ambiguous pin authenticated: %d %v", code, err)
	}
	if _, err := b.Directory.Authenticate(nil); !errors.Is(err, peering.ErrUnauthenticated) {
		t.Fatalf("no TLS state: %v", err)
	}
}

func TestTrustKeyRecord(t *testing.T) {
	a, _ := peeringtest.Pair(t)
	for _, rec := range a.KeyRecords {
		id, pub, err := peering.TrustKeyRecord(a.Info, rec)
		if err != nil {
			t.Fatal(err)
		}
		if id != a.Instance.Config.AgentKeyID && id != a.Instance.Config.PrincipalKeyID {
			t.Fatalf("key id %s", id)
		}
		if id == a.Instance.Config.AgentKeyID && !equalKey(a.Instance.AgentKey().Public(), pub) {
			t.Fatal("agent key differs")
		}
	}
	agentRec := a.KeyRecords[1]

	refuse := func(name string, peer instance.PeerInfo, rec []byte) {
		t.Helper()
		if _, _, err := peering.TrustKeyRecord(peer, rec); !errors.Is(err, peering.ErrUntrustedKey) {
			t.Errorf("%s: trusted (%v)", name, err)
		}
	}
	// Another organisation's pins do not vouch for A's keys.
	c := peeringtest.NewNode(t, "org_eastmarch")
	refuse("record checked against another peer", c.Info, agentRec)
	// Bytes that are not canonical are not the signed bytes.
	refuse("non-canonical bytes", a.Info, append([]byte(" "), agentRec...))
	refuse("pretty-printed", a.Info, indent(t, agentRec))
	// A changed payload breaks content_hash; a resealed one breaks the signature.
	obj, _ := canonical.DecodeObject(agentRec)
	obj["payload"].(map[string]any)["status"] = "suspended"
	refuse("tampered payload", a.Info, mustMarshal(t, obj))
	envelope.Seal(obj)
	refuse("resealed tampered payload", a.Info, mustMarshal(t, obj))

	now := time.Now()
	spec := func(id string, pub any) envelope.KeyRecordSpec {
		return envelope.KeyRecordSpec{KeyID: id, Controller: a.Org, PublicKey: pub, ValidFrom: now,
			CreatedBy: envelope.Actor{OrganizationID: a.Org, AgentID: a.Instance.Config.AgentID, MandateID: "mnd_aaaaaaaaaaaaaaaaaaaaaaaa"}, CreatedAt: now}
	}
	// Signed by A's agent key, which is not a principal key.
	fresh, _ := keys.Generate()
	rec, err := peering.IssueKeyRecord(spec("key_fresh_one", fresh.Public()), a.Instance.Config.AgentKeyID, a.Instance.AgentKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	refuse("signed by the agent key", a.Info, rec)
	// Signed by a principal key the peer file lists but does not pin.
	rogue, _ := keys.Generate()
	rec, _ = peering.IssueKeyRecord(spec("key_fresh_two", fresh.Public()), "key_rogue_principal", rogue, now)
	unpinned := a.Info
	jwk, _ := keys.PublicJWK(rogue.Public())
	unpinned.PrincipalKeys = map[string]map[string]any{a.Instance.Config.PrincipalKeyID: a.Info.PrincipalKeys[a.Instance.Config.PrincipalKeyID], "key_rogue_principal": jwk}
	refuse("signed by an unpinned principal key", unpinned, rec)
	// A record under the principal's key_id carrying another key, even
	// signed by the pinned principal, does not rebind the principal.
	rec, _ = peering.IssueKeyRecord(spec(a.Instance.Config.PrincipalKeyID, fresh.Public()), a.Instance.Config.PrincipalKeyID, a.PrincipalKey(t), now)
	refuse("principal key_id with another key", a.Info, rec)
	// The allow direction of the same construction: a new key signed by the pinned principal.
	rec, _ = peering.IssueKeyRecord(spec("key_fresh_three", fresh.Public()), a.Instance.Config.PrincipalKeyID, a.PrincipalKey(t), now)
	if _, _, err := peering.TrustKeyRecord(a.Info, rec); err != nil {
		t.Fatalf("fresh key signed by the pinned principal: %v", err)
	}
	refuse("not a key_record", a.Info, []byte(`{"object_type":"offer"}`))
}

func TestTrustedKeysRefuseKeyChange(t *testing.T) {
	a, b := peeringtest.Pair(t)
	ctx := context.Background()
	var logs bytes.Buffer
	tk := peering.NewTrustedKeys(b.Instance.Store, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, rec := range a.KeyRecords {
		if _, err := tk.Add(ctx, a.Info, rec); err != nil {
			t.Fatal(err)
		}
	}
	agentID := a.Instance.Config.AgentKeyID
	if _, err := tk.Lookup(a.Org, agentID); err != nil {
		t.Fatal(err)
	}
	// The same record again is a no-op.
	if _, err := tk.Add(ctx, a.Info, a.KeyRecords[1]); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	other, _ := keys.Generate()
	spec := envelope.KeyRecordSpec{KeyID: agentID, Controller: a.Org, PublicKey: other.Public(), ValidFrom: now,
		CreatedBy: envelope.Actor{OrganizationID: a.Org, AgentID: a.Instance.Config.AgentID, MandateID: "mnd_aaaaaaaaaaaaaaaaaaaaaaaa"}, CreatedAt: now}

	// A key change signed by nobody pinned: refused and logged.
	rogue, _ := keys.Generate()
	rec, _ := peering.IssueKeyRecord(spec, "key_rogue_principal", rogue, now)
	if _, err := tk.Add(ctx, a.Info, rec); !errors.Is(err, peering.ErrUntrustedKey) {
		t.Fatalf("unsigned key change: %v", err)
	}
	if !strings.Contains(logs.String(), "no pinned principal key signed") || !strings.Contains(logs.String(), agentID) {
		t.Fatalf("key change not logged: %s", logs.String())
	}
	// Even the pinned principal cannot rebind a key_id: refused and logged.
	logs.Reset()
	rec, _ = peering.IssueKeyRecord(spec, a.Instance.Config.PrincipalKeyID, a.PrincipalKey(t), now)
	if _, err := tk.Add(ctx, a.Info, rec); !errors.Is(err, peering.ErrUntrustedKey) {
		t.Fatalf("key change: %v", err)
	}
	if !strings.Contains(logs.String(), "refused a key change") {
		t.Fatalf("key change not logged: %s", logs.String())
	}
	pub, _ := tk.Lookup(a.Org, agentID)
	if !equalKey(a.Instance.AgentKey().Public(), pub) {
		t.Fatal("the trusted key changed")
	}
	// Nothing of A's is trusted for another organisation.
	if _, err := tk.Lookup("org_eastmarch", agentID); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("key trusted across organisations: %v", err)
	}

	// The trusted records were kept and reload after a restart.
	tk2 := peering.NewTrustedKeys(b.Instance.Store, nil, nil)
	if err := tk2.Load(ctx, b.Directory); err != nil {
		t.Fatal(err)
	}
	if _, err := tk2.Lookup(a.Org, agentID); err != nil {
		t.Fatalf("after reload: %v", err)
	}
	// B's own records are not trusted as a peer's.
	if tk2.Known(b.Org) {
		t.Fatal("own keys loaded as a peer's")
	}
}

func TestKeyRecordExchange(t *testing.T) {
	a, b := peeringtest.Pair(t)
	ctx := context.Background()
	b.Serve(t, peering.KeyRecordsHandler(b.Directory, peering.OwnKeyRecords(b.Instance.Store, b.Org), nil))

	// A fetches B's records on first contact and trusts both keys.
	tk := peering.NewTrustedKeys(a.Instance.Store, peering.NewClients(a.Cert, a.Directory, 10*time.Second), nil)
	if tk.Known(b.Org) {
		t.Fatal("known before contact")
	}
	if err := tk.EnsureKeys(ctx, b.Org); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{b.Instance.Config.AgentKeyID, b.Instance.Config.PrincipalKeyID} {
		if _, err := tk.Lookup(b.Org, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// B holds A's records too (as a peer's, in A's store), but serves only its own.
	records, err := peering.FetchKeyRecords(ctx, peering.NewHTTPClient(a.Cert, b.Info, 10*time.Second), b.Info)
	if err != nil || len(records) != 2 || !bytes.Equal(records[0], b.KeyRecords[0]) || !bytes.Equal(records[1], b.KeyRecords[1]) {
		t.Fatalf("served records differ from the stored bytes (%d, %v)", len(records), err)
	}
	if _, err := a.Instance.Store.GetObject(ctx, "", b.Instance.Config.AgentKeyID); err != nil {
		t.Fatalf("trusted record not kept: %v", err)
	}

	// Without a pinned certificate the records are not served.
	c := peeringtest.NewNode(t, "org_eastmarch")
	if _, err := peering.FetchKeyRecords(ctx, peering.NewHTTPClient(c.Cert, b.Info, 10*time.Second), b.Info); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("unpinned fetch: %v", err)
	}
	// An unknown organisation cannot be contacted.
	if err := tk.EnsureKeys(ctx, "org_nobody"); !errors.Is(err, peering.ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", err)
	}
}

func TestKeyRecordExchangeRefusesForeignRecords(t *testing.T) {
	a, b := peeringtest.Pair(t)
	c := peeringtest.NewNode(t, "org_eastmarch")
	ctx := context.Background()
	// B serves C's records as if they were its own.
	b.Serve(t, peering.KeyRecordsHandler(b.Directory, func(context.Context, string) ([][]byte, error) { return c.KeyRecords, nil }, nil))
	tk := peering.NewTrustedKeys(nil, peering.NewClients(a.Cert, a.Directory, 10*time.Second), nil)
	if err := tk.EnsureKeys(ctx, b.Org); !errors.Is(err, peering.ErrUntrustedKey) {
		t.Fatalf("foreign records trusted: %v", err)
	}
	if tk.Known(b.Org) || tk.Known(c.Org) {
		t.Fatal("a key was trusted")
	}
}

// helpers

func equalKey(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

func jsonMarshal(p instance.PeerInfo) ([]byte, error) {
	return json.Marshal(p)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := canonical.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSuccessorPrincipalKeyPinned: a peer's principal rotates its key
// (principal.RotatePrincipalKey). The successor's key record, signed by
// the new key and by the pinned one, is pinned in the peer file; records
// built by hand with valid keys that lack either signature, or whose
// voucher is a principal key the peer has retired, are not.
func TestSuccessorPrincipalKeyPinned(t *testing.T) {
	a, b := peeringtest.Pair(t)
	ctx := context.Background()
	var logs bytes.Buffer
	tk := peering.NewTrustedKeys(b.Instance.Store, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	tk.PinSuccessors(b.Directory)
	for _, rec := range a.KeyRecords {
		if _, err := tk.Add(ctx, a.Info, rec); err != nil {
			t.Fatal(err)
		}
	}
	cfg := a.Instance.Config
	now := time.Now().UTC().Truncate(time.Second)
	actor := envelope.Actor{OrganizationID: a.Org, AgentID: cfg.AgentID, MandateID: "mnd_aaaaaaaaaaaaaaaaaaaaaaaa"}
	principal, err := signature.NewSigner(cfg.PrincipalKeyID, a.PrincipalKey(t))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := signature.NewSigner(cfg.AgentKeyID, a.Instance.AgentKey())
	if err != nil {
		t.Fatal(err)
	}
	// successor builds the key record of a fresh key, signed by itself
	// (self) and then by each of by.
	successor := func(self bool, by ...signature.Signer) (string, []byte) {
		t.Helper()
		k, _ := keys.Generate()
		kid, _ := envelope.NewID("key")
		rec, err := envelope.NewKeyRecord(envelope.KeyRecordSpec{KeyID: kid, Controller: a.Org, PublicKey: k.Public(), ValidFrom: now, CreatedBy: actor, CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := envelope.Seal(rec); err != nil {
			t.Fatal(err)
		}
		if self {
			s, _ := signature.NewSigner(kid, k)
			by = append([]signature.Signer{s}, by...)
		}
		for _, s := range by {
			if err := signature.Sign(rec, s, "object_issuance", now); err != nil {
				t.Fatal(err)
			}
		}
		b, err := canonical.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		return kid, b
	}
	pinned := func(kid string) bool {
		t.Helper()
		p, err := b.Directory.Peer(a.Org)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := p.PrincipalKeys[kid]
		return ok
	}
	before, _ := os.ReadFile(filepath.Join(b.Dir, instance.PeersDir, a.Org+".json"))
	unchanged := func(what string) {
		t.Helper()
		now, _ := os.ReadFile(filepath.Join(b.Dir, instance.PeersDir, a.Org+".json"))
		if !bytes.Equal(now, before) {
			t.Fatalf("%s changed the peer file", what)
		}
	}

	kid, rec := successor(true)
	if _, err := tk.Add(ctx, a.Info, rec); !errors.Is(err, peering.ErrUntrustedKey) || pinned(kid) {
		t.Fatalf("a self-signed key nobody pinned vouched for: %v", err)
	}
	unchanged("a self-signed key")
	kid, rec = successor(true, agent)
	if _, err := tk.Add(ctx, a.Info, rec); !errors.Is(err, peering.ErrUntrustedKey) || pinned(kid) {
		t.Fatalf("a principal key vouched for by the agent: %v", err)
	}
	unchanged("a principal key vouched for by the agent")
	kid, rec = successor(false, principal)
	if _, err := tk.Add(ctx, a.Info, rec); err != nil || pinned(kid) {
		t.Fatalf("an agent key the principal signed is trusted as a key, not pinned: %v pinned=%v", err, pinned(kid))
	}
	unchanged("an agent key")

	kid, rec = successor(true, principal)
	if _, err := tk.Add(ctx, a.Info, rec); err != nil || !pinned(kid) {
		t.Fatalf("the successor: %v pinned=%v", err, pinned(kid))
	}
	onDisk, err := instance.Peers(b.Dir)
	if err != nil || len(onDisk) != 1 || onDisk[0].PrincipalIDs[kid] != cfg.PrincipalID || len(onDisk[0].PrincipalKeyThumbprints) != 2 {
		t.Fatalf("the successor in the peer file on disk: %+v %v", onDisk, err)
	}
	if _, ok := onDisk[0].PrincipalKeys[cfg.PrincipalKeyID]; !ok {
		t.Fatal("the predecessor is no longer pinned")
	}

	// The predecessor retired (a later version of its record, expired):
	// it vouches for nothing new.
	old, err := envelope.NewKeyRecord(envelope.KeyRecordSpec{KeyID: "key_" + strings.Repeat("r", 24), Controller: a.Org, PublicKey: a.PrincipalKey(t).Public(),
		ValidFrom: now, ValidUntil: now.Add(time.Minute), CreatedBy: actor, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	old["version"], old["previous_version_id"] = json.Number("2"), cfg.PrincipalKeyID
	if err := envelope.Seal(old); err != nil {
		t.Fatal(err)
	}
	if err := signature.Sign(old, principal, "object_issuance", now); err != nil {
		t.Fatal(err)
	}
	ob, _ := canonical.Marshal(old)
	if _, err := tk.Add(ctx, a.Info, ob); err != nil {
		t.Fatal(err)
	}
	tk.SetClock(func() time.Time { return now.Add(time.Hour) })
	before, _ = os.ReadFile(filepath.Join(b.Dir, instance.PeersDir, a.Org+".json"))
	logs.Reset()
	kid, rec = successor(true, principal)
	if _, err := tk.Add(ctx, a.Info, rec); err != nil || pinned(kid) {
		t.Fatalf("a successor vouched for by a retired key: %v pinned=%v", err, pinned(kid))
	}
	unchanged("a successor vouched for by a retired key")
	if !strings.Contains(logs.String(), "expired now") {
		t.Fatalf("not logged: %s", logs.String())
	}
}
