package verify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// statusChange adds to rec p's principal's revocation_record changing
// p's mandate to st from effective, as `party mandate
// revoke|suspend|reinstate` signs one.
func statusChange(t *testing.T, rec *verifytest.Record, p *verifytest.Party, st string, effective time.Time) string {
	t.Helper()
	obj, err := status.NewRevocationRecord(status.RevocationSpec{
		SubjectType: "mandate", SubjectID: p.MandateID, Status: st, EffectiveAt: effective,
		Reason: "status changed by the issuing principal", CreatedBy: p.Actor(), CreatedAt: effective,
	}, p.PrincipalSigner)
	if err != nil {
		t.Fatal(err)
	}
	rec.Objects = append(rec.Objects, obj)
	return obj["id"].(string)
}

// actorEvents returns the party of rec that appended more events, and
// the ids and occurred_at of those it appended under its mandate.
func actorEvents(t *testing.T, rec *verifytest.Record) (p *verifytest.Party, ids []string, at []time.Time) {
	t.Helper()
	p = rec.Buyer
	n := 0
	for _, id := range rec.EventIDs {
		if rec.Object(id)["created_by"].(map[string]any)["mandate_id"] == p.MandateID {
			n++
		}
	}
	if 2*n < len(rec.EventIDs) {
		p = rec.Supplier
	}
	for _, id := range rec.EventIDs {
		e := rec.Object(id)
		if e["created_by"].(map[string]any)["mandate_id"] != p.MandateID {
			continue
		}
		when, err := envelope.ParseTimestamp(payload(e)["occurred_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		ids, at = append(ids, id), append(at, when)
	}
	if len(ids) < 2 {
		t.Fatalf("the synthetic record has %d events of %s, want at least 2", len(ids), p.Org)
	}
	return p, ids, at
}

// TestMandateRevokedLater: a counterparty's record holds the issuer's
// revocation of its mandate (the party that appended most events),
// effective after every event appended under it. Nothing fails, and each such event's mandate_authority names the
// revocation and says it came after the event.
func TestMandateRevokedLater(t *testing.T) {
	rec := newRecord(t, 5)
	p, ids, at := actorEvents(t, rec)
	rev := statusChange(t, rec, p, status.Revoked, at[len(at)-1].Add(time.Minute))
	rep := run(rec)
	noFailures(t, rep)
	for _, id := range ids {
		c := one(t, rep, "mandate_authority", id)
		if c.Result != verify.Verified || !strings.Contains(c.Detail, rev) || !strings.Contains(c.Detail, "after this event") {
			t.Errorf("mandate_authority on %s: %s %q, want verified naming %s as after the event", id, c.Result, c.Detail, rev)
		}
	}
}

// TestMandateRevokedBefore: the revocation took effect before the
// party's last event: that event fails mandate_authority with the
// revocation named, the earlier ones do not.
func TestMandateRevokedBefore(t *testing.T) {
	rec := newRecord(t, 5)
	p, ids, at := actorEvents(t, rec)
	last := len(ids) - 1
	rev := statusChange(t, rec, p, status.Revoked, at[last].Add(-time.Second))
	rep := run(rec)
	c := one(t, rep, "mandate_authority", ids[last])
	if c.Result != verify.Failed || c.Code != reason.EvidenceTransitionIllegal || !strings.Contains(c.Detail, rev+" records "+p.MandateID+" as revoked") {
		t.Errorf("mandate_authority on the act after the revocation: %s %s %q", c.Result, c.Code, c.Detail)
	}
	wantResult(t, rep, "mandate_authority", ids[0], verify.Verified)
}

// TestMandateReinstated: a suspension, then a reinstatement, both before
// the party's last event: the mandate was active again when it was
// appended, so it passes; an event inside the suspension fails.
func TestMandateReinstated(t *testing.T) {
	rec := newRecord(t, 5)
	p, ids, at := actorEvents(t, rec)
	last := len(ids) - 1
	statusChange(t, rec, p, status.Suspended, at[last-1].Add(-time.Second))
	statusChange(t, rec, p, status.Active, at[last].Add(-time.Second))
	rep := run(rec)
	wantResult(t, rep, "mandate_authority", ids[last], verify.Verified)
	if !at[last].Add(-time.Second).After(at[last-1]) {
		t.Fatalf("the last two events are at %s and %s: no second between them", at[last-1], at[last])
	}
	wantFailed(t, rep, "mandate_authority", ids[last-1], reason.EvidenceTransitionIllegal)
}

// TestMandateRevokedInTheEventsSecond: the revocation's effective_at is
// the second the party's last event occurred in. Whole seconds cannot
// order the two, so that event's mandate_authority is not established,
// never failed and never verified.
func TestMandateRevokedInTheEventsSecond(t *testing.T) {
	rec := newRecord(t, 5)
	p, ids, at := actorEvents(t, rec)
	last := len(ids) - 1
	rev := statusChange(t, rec, p, status.Revoked, at[last])
	rep := run(rec)
	c := one(t, rep, "mandate_authority", ids[last])
	if c.Result != verify.NotCheckable || !strings.Contains(c.Detail, rev) {
		t.Errorf("mandate_authority on the event in the revocation's second: %s %q", c.Result, c.Detail)
	}
	noFailures(t, rep)
}

// TestMandateRevokedByAStranger: a revocation record of the party's
// mandate made by the other party, with the other party's valid
// principal key, changes nothing: only the issuer changes its mandate's
// status.
func TestMandateRevokedByAStranger(t *testing.T) {
	rec := newRecord(t, 5)
	p, ids, at := actorEvents(t, rec)
	other := rec.Buyer
	if other == p {
		other = rec.Supplier
	}
	obj, err := status.NewRevocationRecord(status.RevocationSpec{
		SubjectType: "mandate", SubjectID: p.MandateID, Status: status.Revoked, EffectiveAt: at[0].Add(-time.Second),
		Reason: "the counterparty says so", CreatedBy: other.Actor(), CreatedAt: at[0].Add(-time.Second),
	}, other.PrincipalSigner)
	if err != nil {
		t.Fatal(err)
	}
	rec.Objects = append(rec.Objects, obj)
	rep := run(rec)
	for _, id := range ids {
		c := one(t, rep, "mandate_authority", id)
		if c.Result != verify.Verified || !strings.Contains(c.Detail, "not by its issuer") {
			t.Errorf("mandate_authority on %s with a stranger's revocation: %s %q", id, c.Result, c.Detail)
		}
	}
}
