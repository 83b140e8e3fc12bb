package record_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/verify"
)

// Keys that rotate and revoke (issue 16 item 4): a rotated key's earlier
// signatures keep verifying, with their status at signing and now both
// reported, while new acts are signed with the new key and accepted; a
// revoked key is refused by the counterparty within its key-record
// refresh bound; exports carry the revocation records.

// check returns the report's check name on subject, or fails.
func check(t *testing.T, rep *verify.Report, name, subject string) verify.Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name && c.Subject == subject {
			return c
		}
	}
	t.Fatalf("no check %s on %s", name, subject)
	return verify.Check{}
}

// verifyAt verifies sd's record of txn as its export reads, at now (the
// test's clock), and requires nothing failed.
func verifyAt(t *testing.T, sd *recordtest.Side, txn string, now time.Time) *verify.Report {
	t.Helper()
	c, _, err := export.Collect(context.Background(), sd.Node.Org.Store, txn)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Verify(verify.Input{Objects: c.Objects, Mandates: c.Mandates, Keys: c.Keys, TransactionID: txn},
		verify.Options{RulesVersion: c.Manifest.RulesVersion, Now: now})
	if f := rep.Failures(); len(f) != 0 {
		t.Fatalf("%s's record fails at %s: %+v", sd.Node.Org.Config().OrganizationID, now, f)
	}
	return rep
}

// onlyReissuedActs: after a rotation, the supplier's assertion under its
// old mandate s.Mandate is refused (A202-MANDATE-INACTIVE) and the same
// under the reissued one is taken into both records, as event 4.
func onlyReissuedActs(t *testing.T, b, s *recordtest.Side, txn, obl, reissued string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence("certificates")})
	if !hasCode(err, reason.MandateInactive) {
		t.Fatalf("an act under the mandate the rotation replaced: %v", err)
	}
	out, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: reissued, ObligationID: obl, Evidence: evidence("certificates")})
	if err != nil || out.Status != record.StatusRecorded {
		t.Fatalf("the act under the reissued mandate: %+v %v", out, err)
	}
	recordtest.SameRecord(t, b, s, txn, 4)
}

// TestRotatedKeyOldSignaturesVerifyNewKeyActs: the supplier's principal
// rotates its agent's key mid-transaction. The events the old key signed
// stay in both records and verify (active at signing, expired now); the
// supplier's mandate is reissued to the new key, its next act is signed
// with the new key and countersigned by a buyer that learns the new key
// from its key records; the old mandate signs nothing any more.
func TestRotatedKeyOldSignaturesVerifyNewKeyActs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := committed(t)
	oldKey := s.Node.Org.Config().AgentKeyID

	c.Add(2 * time.Second)
	rot, err := s.Princ.RotateAgentKey(ctx, s.Node.Org.Config().AgentID, false, "routine rotation")
	if err != nil {
		t.Fatal(err)
	}
	newMandate := rot.Mandates[s.Mandate]
	if rot.NewKeyID == oldKey || newMandate == "" || s.Node.Org.Config().AgentKeyID != rot.NewKeyID {
		t.Fatalf("rotation: %+v", rot)
	}
	c.Add(2 * time.Second)

	// The old mandate binds the old key: nothing is signed under it.
	onlyReissuedActs(t, b, s, txn, obl, newMandate)
	evs, _ := s.Node.Org.Store.Events(ctx, txn)
	signer := func(i int) string {
		raw, _ := s.Node.Org.Store.GetObject(ctx, txn, evs[i].EventID)
		o, _ := canonical.DecodeObject(raw)
		for _, en := range o["signatures"].([]any) {
			if kid := en.(map[string]any)["key_id"].(string); kid == oldKey || kid == rot.NewKeyID {
				return kid
			}
		}
		return ""
	}
	if signer(1) != oldKey || signer(3) != rot.NewKeyID {
		t.Fatalf("event 2 signed by %s, event 4 by %s", signer(1), signer(3))
	}
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, txn)
		rep := verifyAt(t, sd, txn, c.Now())
		now := check(t, rep, "key_status_now", oldKey)
		if now.Result != verify.Verified || !strings.HasPrefix(now.Detail, "expired") {
			t.Fatalf("%s: the old key now: %s %s", sd.Node.Org.Config().OrganizationID, now.Result, now.Detail)
		}
		if c := check(t, rep, "key_status_now", rot.NewKeyID); !strings.HasPrefix(c.Detail, "active") {
			t.Fatalf("the new key now: %s", c.Detail)
		}
	}
}

// TestRevokedAgentKeyRefusedByPeerWithin60s: the supplier's agent key is
// revoked (a key lost, its mandates left as they are, so only the key's
// record says so). A message signed with it before the revocation, sent
// after, is refused by the buyer once its key records of the supplier are
// older than the refresh bound (30 s, well within 60 s): A202-MANDATE-
// INACTIVE, neither record moving. The exported bundle carries the key's
// revocation record and its retired version, and its verifier reports the
// key active at signing for what it signed before and revoked now.
func TestRevokedAgentKeyRefusedByPeerWithin60s(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c, txn, obl := committed(t)
	key := s.Node.Org.Config().AgentKeyID
	msg := recordtest.Capture(t, s, func() (record.Outcome, error) {
		return s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence("certificates")})
	})

	c.Add(2 * time.Second)
	retired, rev, err := s.Princ.RevokeKey(ctx, key, "the agent's laptop was lost")
	if err != nil || retired == "" || rev == "" {
		t.Fatalf("revoking the key: %s %s %v", retired, rev, err)
	}
	c.Add(31 * time.Second)
	refusedWith(t, "an act signed with the revoked key", b, s, txn, reason.MandateInactive, func() error {
		_, err := b.Engine.Receive(ctx, "org_delta", txn, delivery.Raw(msg))
		return err
	})

	dir := filepath.Join(t.TempDir(), "bundle")
	if _, err := export.Write(ctx, b.Node.Org.Store, txn, dir, export.Options{}); err != nil {
		t.Fatal(err)
	}
	bd, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, o := range bd.ObjectValues() {
		found[o["id"].(string)] = true
	}
	if !found[rev] || !found[retired] {
		t.Fatalf("the buyer's export lacks the revocation record %s or the retired key version %s", rev, retired)
	}
	rep := verify.Verify(verify.BundleInput(bd), verify.Options{RulesVersion: bd.Manifest.RulesVersion, Now: c.Now()})
	if f := rep.Failures(); len(f) != 0 {
		t.Fatalf("the bundle fails: %+v", f)
	}
	now := check(t, rep, "key_status_now", key)
	if !strings.HasPrefix(now.Detail, "revoked") {
		t.Fatalf("the key now: %s", now.Detail)
	}
	evs, _ := b.Node.Org.Store.Events(ctx, txn)
	at := check(t, rep, "key_status_at_signing[0]", evs[1].EventID)
	if at.Result != verify.Verified || !strings.HasPrefix(at.Detail, "active") {
		t.Fatalf("what the key signed before: %s %s", at.Result, at.Detail)
	}
	if !slices.ContainsFunc(rep.Checks, func(c verify.Check) bool {
		return c.Name == "version_chain" && c.Subject == retired && c.Result == verify.Verified
	}) {
		t.Fatal("the retired version's chain is not verified")
	}
}
