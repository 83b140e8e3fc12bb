package peering

import (
	"context"
	"errors"
	"fmt"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/store"
)

// MandateServedTo returns the bytes of this organisation's mandate id when
// it is disclosed to the pinned peer org: the instance mandate (under
// which key records are published) to every pinned peer; a trading
// mandate to the counterparties its scope names, or to every pinned peer
// when its scope names none; a parent when one of its children is served,
// so the chain resolves. A mandate another organisation issued is never
// served. The same rule decides which of a mandate's status changes travel
// (OwnKeyRecords): a peer learns of a revocation exactly when it may know
// the mandate.
func MandateServedTo(ctx context.Context, st *store.Store, id, org string) ([]byte, bool) {
	return servedTo(ctx, st, id, org, 0)
}

// maxMandateDepth bounds the walk from a parent to its children, as the
// delegation depth bounds a chain.
const maxMandateDepth = 9

func servedTo(ctx context.Context, st *store.Store, id, org string, depth int) ([]byte, bool) {
	rec, err := st.GetMandate(ctx, id)
	if err != nil || rec.Origin != "local" || depth > maxMandateDepth {
		return nil, false
	}
	m, err := canonical.DecodeObject(rec.Body)
	if err != nil {
		return nil, false
	}
	if instance.IsInstanceMandate(m) || namesPeer(m, org) {
		return rec.Body, true
	}
	all, err := st.Mandates(ctx, "local")
	if err != nil {
		return nil, false
	}
	for _, c := range all {
		cm, err := canonical.DecodeObject(c.Body)
		if parent, _ := cm["parent_mandate_id"].(string); err == nil && parent == id {
			if _, ok := servedTo(ctx, st, c.ID, org, depth+1); ok {
				return rec.Body, true
			}
		}
	}
	return nil, false
}

// namesPeer reports whether a mandate's scope lets it deal with org: its
// counterparty_organization_ids name org, or it has no such axis.
func namesPeer(m map[string]any, org string) bool {
	scope, _ := m["scope"].(map[string]any)
	cps, ok := scope["counterparty_organization_ids"].([]any)
	if !ok {
		return true
	}
	for _, c := range cps {
		if s, _ := c.(string); s == org {
			return true
		}
	}
	return false
}

// errNotRelied marks a peer's mandate revocation about a mandate this
// instance does not hold: not a forgery, merely nothing to keep (a
// mandate that names no counterparty is disclosed, and so are its status
// changes, to every pinned peer, most of which never met it).
var errNotRelied = errors.New("peering: the mandate is not one this instance holds")

// TrustMandateRevocation decides whether record, the exact bytes of a
// revocation_record received from or for peer, is peer's own statement
// about one of peer's mandates that this instance holds (commercial
// mandate §9): the checks of every revocation record (canonical bytes,
// its own content_hash, the gate, created for peer's organisation, an
// object_issuance signature by a pinned principal key of peer that
// verifies), subject_type mandate, and the subject a mandate held in st
// as peer's (stored with origin peer, which package record does only
// after checking that peer's principal issued it for peer). A revocation
// of this instance's own mandate, of a third organisation's, or of one
// not held is refused. Every refusal wraps ErrUntrustedKey.
func TrustMandateRevocation(ctx context.Context, st *store.Store, peer instance.PeerInfo, record []byte) error {
	obj, err := trustRevocation(peer, record)
	if err != nil {
		return err
	}
	payload, _ := obj["payload"].(map[string]any)
	if payload["subject_type"] != "mandate" {
		return fmt.Errorf("%w: %v revokes a %v, not a mandate", ErrUntrustedKey, obj["id"], payload["subject_type"])
	}
	id, _ := payload["subject_id"].(string)
	rec, err := st.GetMandate(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %v is about %s: %w", ErrUntrustedKey, obj["id"], id, errNotRelied)
	}
	if err != nil {
		return err
	}
	if rec.Origin != peer.OrganizationID {
		return fmt.Errorf("%w: %v is about %s, which is not a mandate of %s", ErrUntrustedKey, obj["id"], id, peer.OrganizationID)
	}
	return nil
}
