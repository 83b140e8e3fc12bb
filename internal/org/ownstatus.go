package org

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/store"
)

// ownStatus is the evaluator's status resolver. A mandate this
// organisation's principal issued (held with origin "local") is judged by
// the status its own record holds at the moment of asking: the record is
// where `party mandate revoke|suspend|reinstate` and the approvals page
// write, in this process or another, and what the instance's status
// endpoint serves from, so asking the endpoint over HTTPS, through a
// cache, could only be older. Every other mandate, a counterparty's, is
// resolved by the status client, within its 60-second cache bound
// (commercial mandate §6.1, §9), unless this instance holds the issuer's
// revocation of it (peering.TrustMandateRevocation kept it, signed by a
// pinned principal key of the issuer): revocation is final, so a held one
// denies without asking and no status document undoes it. A held record
// only ever adds a reason to deny; that a mandate is active is still read
// from its status endpoint alone, over this instance's own channel, never
// from anything the counterparty sent (decisions.md 8).
//
// The row is read through store.GetMandate, which keeps a mandate only
// under the number every process's change to a mandate moves (store
// migration 14): read afresh, never from a cache, except that within one
// operation under store.WithKeyVersionMemo the number is the one read at
// its start or last commit (docs/record-protocol.md, "What an act sees,
// and when a write is done (issue 13)" item 1, and "Nothing waits
// forever (issue 39)").
type ownStatus struct {
	o      *Org
	remote status.Resolver
	// until keeps each own mandate's valid_until, read once: a mandate's
	// bytes never change under its id (commercial mandate §3), so this
	// is not its status, which is read every time.
	until *sync.Map // mandate id → time.Time
}

func newOwnStatus(o *Org, remote status.Resolver) ownStatus {
	return ownStatus{o: o, remote: remote, until: &sync.Map{}}
}

// Resolve implements status.Resolver.
func (s ownStatus) Resolve(ctx context.Context, mandateID, endpoint string) (status.Document, error) {
	rec, err := s.o.Store.GetMandate(ctx, mandateID)
	switch {
	case err == nil && rec.Origin != "local":
		// The issuer's revocation, held as it sent it, is final: it denies
		// without asking; its absence allows nothing, so the endpoint is
		// asked as before, over this instance's own channel.
		if rev, revoked, err := s.o.revokedByRecord(ctx, rec.Origin, mandateID); err != nil {
			return status.Document{}, reason.Refuse(fmt.Sprintf("revocations of %s unreadable from this instance's record: %v", mandateID, err), reason.MandateStatusUnresolved)
		} else if revoked {
			now := s.o.now().UTC().Truncate(time.Second)
			return status.Document{MandateID: mandateID, Status: status.Revoked, AsOf: now, ExpiresAt: now.Add(status.MaxAge), RevocationRecord: rev}, nil
		}
		return s.remote.Resolve(ctx, mandateID, endpoint)
	case errors.Is(err, store.ErrNotFound):
		return s.remote.Resolve(ctx, mandateID, endpoint)
	case err != nil:
		return status.Document{}, reason.Refuse(fmt.Sprintf("status of %s unreadable from this instance's record: %v", mandateID, err), reason.MandateStatusUnresolved)
	}
	// The endpoint a counterparty would ask is judged as it would judge
	// it, so that this side allows no act the other must refuse for it.
	if err := status.CheckEndpoint(endpoint); err != nil {
		return status.Document{}, reason.Refuse(err.Error(), reason.MandateStatusInsecure, reason.MandateStatusUnresolved)
	}
	now := s.o.now().UTC().Truncate(time.Second)
	st, err := s.statusOf(rec, now)
	if err != nil {
		return status.Document{}, reason.Refuse(fmt.Sprintf("mandate %s: %v", mandateID, err), reason.MandateStatusUnresolved)
	}
	return status.Document{MandateID: mandateID, Status: st, AsOf: now, ExpiresAt: now.Add(status.MaxAge)}, nil
}

// statusOf is an own mandate's status at now, as its status endpoint
// serves it (statusStore): the stored one, or expired once an active
// mandate's validity interval ended.
func (s ownStatus) statusOf(rec store.MandateRecord, now time.Time) (string, error) {
	if rec.Status != store.StatusActive {
		return rec.Status, nil
	}
	until, err := s.validUntil(rec)
	if err != nil {
		return "", err
	}
	if !now.Before(until) {
		return status.Expired, nil
	}
	return status.Active, nil
}

func (s ownStatus) validUntil(rec store.MandateRecord) (time.Time, error) {
	if t, ok := s.until.Load(rec.ID); ok {
		return t.(time.Time), nil
	}
	t, err := mandateValidUntil(rec.Body)
	if err != nil {
		return time.Time{}, err
	}
	s.until.Store(rec.ID, t)
	return t, nil
}

// mandateValidUntil reads valid_until from a mandate's bytes.
func mandateValidUntil(body []byte) (time.Time, error) {
	doc, err := canonical.DecodeObject(body)
	if err != nil {
		return time.Time{}, err
	}
	return envelope.ParseTimestamp(fmt.Sprint(doc["valid_until"]))
}

// Uncached is ownStatus over the status client's uncached resolver (see
// authority.Evaluator.Uncached): own mandates are read from the record
// either way.
func (s ownStatus) Uncached() status.Resolver {
	if u, ok := s.remote.(interface{ Uncached() status.Resolver }); ok {
		return ownStatus{o: s.o, remote: u.Uncached(), until: s.until}
	}
	return s
}
