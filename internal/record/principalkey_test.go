package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/verify"
)

// Rotating the principal's key (issue 16 item 4; principal.RotatePrincipalKey):
// the counterparty pins the successor on the pinned key's word and accepts
// authority it issues; a principal key that no pinned key vouched for
// issues nothing the counterparty accepts.

// peerFileOf is side's pinned peer file of org.
func peerFileOf(t *testing.T, sd *recordtest.Side, org string) instance.PeerInfo {
	t.Helper()
	ps, err := instance.Peers(sd.Node.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.OrganizationID == org {
			return p
		}
	}
	t.Fatalf("no peer file of %s", org)
	return instance.PeerInfo{}
}

// TestPrincipalKeyRotatedMidTransaction: the supplier's principal rotates
// its own key mid-transaction. Its mandates are reissued under the new
// key; the buyer, seconds later (well within peering.KeyRefresh), meets
// the reissued mandate's unknown issuer key, fetches the supplier's key
// records at once, pins the new principal key beside the old,
// countersigns the supplier's next act under the reissued mandate, and
// judges the old principal key expired. Both
// records verify, the old key reported active at signing and expired now;
// the supplier's principal reopens with the new key and the old key file
// is gone.
func TestPrincipalKeyRotatedMidTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := committed(t)
	supplier := s.Node.Org.Config().OrganizationID
	oldKey := s.Node.Org.Config().PrincipalKeyID

	c.Add(2 * time.Second)
	rot, err := s.Princ.RotatePrincipalKey(ctx, false, "annual rotation")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Node.Org.Config()
	newMandate := rot.Mandates[s.Mandate]
	if rot.OldKeyID != oldKey || cfg.PrincipalKeyID != rot.NewKeyID || newMandate == "" || rot.Retired[oldKey] == "" {
		t.Fatalf("rotation: %+v, config names %s", rot, cfg.PrincipalKeyID)
	}
	if _, err := os.Stat(filepath.Join(s.Node.Dir, instance.PrincipalKeyFile)); !os.IsNotExist(err) {
		t.Fatalf("the old principal key file is still there: %v", err)
	}
	own, err := os.ReadFile(filepath.Join(s.Node.Dir, instance.PeerFile))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := instance.ParsePeerFile(own); err != nil || len(p.PrincipalKeys) != 2 || len(p.PrincipalKeyThumbprints) != 2 {
		t.Fatalf("the supplier's own peer.json after the rotation: %+v %v", p, err)
	}
	c.Add(3 * time.Second)

	onlyReissuedActs(t, b, s, txn, obl, newMandate)

	p := peerFileOf(t, b, supplier)
	if _, ok := p.PrincipalKeys[rot.NewKeyID]; !ok || p.PrincipalIDs[rot.NewKeyID] != cfg.PrincipalID {
		t.Fatalf("the buyer did not pin the supplier's new principal key: %+v", p)
	}
	if _, ok := p.PrincipalKeys[oldKey]; !ok {
		t.Fatal("the buyer dropped the old principal key's pin")
	}
	// What the buyer pinned is what the supplier now hands out: adding
	// the supplier's new peer.json is a no-op, not a refused re-pin.
	if _, err := instance.AddPeer(b.Node.Dir, own); err != nil {
		t.Fatalf("the supplier's new peer.json against the buyer's updated pin: %v", err)
	}
	if k, err := b.Node.Org.ResolveKey(ctx, oldKey); err != nil || k.Status != verify.KeyExpired {
		t.Fatalf("the buyer's view of the old principal key: %+v %v", k, err)
	}
	if k, err := b.Node.Org.ResolveKey(ctx, rot.NewKeyID); err != nil || k.Status != envelope.KeyActive || k.HolderID != cfg.PrincipalID {
		t.Fatalf("the buyer's view of the new principal key: %+v %v", k, err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, txn)
		rep := verifyAt(t, sd, txn, c.Now())
		if c := check(t, rep, "key_status_now", oldKey); !strings.HasPrefix(c.Detail, "expired") {
			t.Fatalf("%s: the old principal key now: %s", sd.Node.Org.Config().OrganizationID, c.Detail)
		}
	}
	// The principal's surface opens again from the state directory.
	if _, err := principal.Open(s.Node.Org); err != nil {
		t.Fatalf("reopening the principal after the rotation: %v", err)
	}
}

// TestUnvouchedPrincipalKeyRefusedByCountersigner: a lying supplier makes
// itself a principal key that no pinned key vouched for (its key record
// signed by the key itself and by the supplier's own agent key, both
// valid), serves it with its key records, and acts under a mandate that
// key issued. Its own engine takes the act (the key is its own); the
// buyer refuses it with both records unchanged and its peer file as it
// was.
func TestUnvouchedPrincipalKeyRefusedByCountersigner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := committed(t)
	cfg := s.Node.Org.Config()
	now := c.Now().UTC().Truncate(time.Second)

	k, _ := keys.Generate()
	kid, _ := envelope.NewID("key")
	rogue, _ := signature.NewSigner(kid, k)
	agentSigner, err := s.Node.Org.AgentSigner()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := envelope.NewKeyRecord(envelope.KeyRecordSpec{KeyID: kid, Controller: cfg.OrganizationID, PublicKey: k.Public(), ValidFrom: now,
		CreatedBy: envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, MandateID: s.Mandate}, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Seal(rec); err != nil {
		t.Fatal(err)
	}
	for _, by := range []signature.Signer{rogue, agentSigner} {
		if err := signature.Sign(rec, by, "object_issuance", now); err != nil {
			t.Fatal(err)
		}
	}
	rb, _ := canonical.Marshal(rec)
	if _, err := s.Node.Org.Store.PutObject(ctx, rb, "local"); err != nil {
		t.Fatal(err)
	}
	// The supplier's trading mandate, issued again by the rogue key.
	held, err := s.Node.Org.Store.GetMandate(ctx, s.Mandate)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := canonical.DecodeObject(held.Body)
	mid, _ := envelope.NewID("mnd")
	doc["status_endpoint"] = strings.ReplaceAll(doc["status_endpoint"].(string), s.Mandate, mid)
	for _, f := range []string{"spec_version", "id", "proof"} {
		delete(doc, f)
	}
	if doc["parent_mandate_id"] == nil {
		delete(doc, "parent_mandate_id")
	}
	doc["issuer"].(map[string]any)["key_id"] = kid
	raw, _ := canonical.Marshal(doc)
	var req authority.IssueRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		t.Fatal(err)
	}
	req.MandateID = mid
	m, err := authority.Issue(req, rogue, now)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := canonical.Marshal(m)
	if err := s.Node.Org.Store.PutMandate(ctx, mb, "local"); err != nil {
		t.Fatal(err)
	}
	msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
		return s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: m["id"].(string), ObligationID: obl, Evidence: evidence("certificates")})
	})
	c.Add(31 * time.Second)
	before := peerFileOf(t, b, cfg.OrganizationID)
	refusedWith(t, "an act under a mandate an unvouched principal key issued", b, s, txn, reason.EvidenceSignatureInvalid, func() error {
		_, err := b.Engine.Receive(ctx, cfg.OrganizationID, txn, delivery.Raw(msg))
		return err
	})
	after := peerFileOf(t, b, cfg.OrganizationID)
	if _, pinned := after.PrincipalKeys[kid]; pinned || !slices.Equal(before.PrincipalKeyThumbprints, after.PrincipalKeyThumbprints) {
		t.Fatalf("the buyer pinned the unvouched key: %+v", after)
	}
}
