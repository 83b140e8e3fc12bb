package record

// Keys and signatures: the key set a counterparty's messages are
// verified under, and one signature entry checked against the keys an
// organisation vouched for.

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/reason"
)

// verifyEntry verifies signature i of o under a key that org vouched for,
// held by a holder with the given id prefix (agt_ for an agent), active.
func (e *Engine) verifyEntry(ctx context.Context, o *Obj, i int, org, holderPrefix string) error {
	return e.verifyEntryOver(ctx, o, nil, i, org, holderPrefix)
}

// verifyEntryOver is verifyEntry for a caller that holds o's hash input
// (content, when not nil), so that it is not encoded again.
func (e *Engine) verifyEntryOver(ctx context.Context, o *Obj, content []byte, i int, org, holderPrefix string) error {
	entries := o.Signatures()
	if i >= len(entries) {
		return refusef(reason.EvidenceSignatureInvalid, "%s carries no signature %d", o.ID(), i)
	}
	k, err := e.org.ResolveKey(ctx, str(entries[i]["key_id"]))
	if err != nil || k.OrganizationID != org || !isHolder(k.HolderID, holderPrefix) {
		return refusef(reason.EvidenceSignatureInvalid, "signature %d of %s is not by a key of %s's %s", i, o.ID(), org, holderPrefix)
	}
	if err := e.liveKey(ctx, o, entries[i], k); err != nil {
		return err
	}
	return e.sigs.VerifyEntryOver(o.Value(), content, i, k.Public)
}

// keyCache holds the key set the verifier checks a counterparty's messages
// under, rebuilt when the trusted keys change.
type keyCache struct {
	sets map[string]cachedKeys
}

type cachedKeys struct {
	n   int
	set *keys.KeySet
}

// ownKeyIDs lists the keys of this organisation's first key record
// versions (a later version names a key, it is not one).
func (e *Engine) ownKeyIDs(ctx context.Context) ([]string, error) {
	krs, err := e.keyRecords(ctx)
	if err != nil {
		return nil, err
	}
	org := e.org.Config().OrganizationID
	var out []string
	for _, o := range krs {
		if o.P("controller_organization_id") == org && object.Int(o.Value()["version"]) <= 1 {
			out = append(out, o.ID())
		}
	}
	return out, nil
}

// keySet returns the public keys this instance trusts for itself and peer:
// its own principal and agent keys, the peer's pinned principal keys and
// the agent keys they vouched for.
func (e *Engine) keySet(ctx context.Context, peer string) (*keys.KeySet, error) {
	e.keysMu.Lock()
	defer e.keysMu.Unlock()
	if e.keys.sets == nil {
		e.keys.sets = map[string]cachedKeys{}
	}
	trusted := e.trusted.KeySet(peer)
	own, err := e.ownKeyIDs(ctx)
	if err != nil {
		return nil, err
	}
	// Keys are only ever added (a rotation adds one), so the counts say
	// whether the set held is current.
	n := trusted.Len()<<16 + len(own)
	if c, ok := e.keys.sets[peer]; ok && c.n == n {
		return c.set, nil
	}
	ks := keys.NewKeySet()
	add := func(id string) error {
		k, err := e.org.ResolveKey(ctx, id)
		if err != nil {
			return err
		}
		return ks.Add(id, k.Public)
	}
	// Every key of this organisation a key record publishes: its
	// principal's and all its agents', current and retired, so that what
	// an old key signed still verifies.
	for _, id := range own {
		if err := add(id); err != nil {
			return nil, err
		}
	}
	p, err := e.peers.Peer(peer)
	if err != nil {
		return nil, err
	}
	for id := range p.PrincipalKeys {
		if err := add(id); err != nil {
			return nil, err
		}
	}
	for _, id := range trusted.IDs() {
		if err := add(id); err != nil {
			return nil, fmt.Errorf("record: trusted key %s: %w", id, err)
		}
	}
	e.keys.sets[peer] = cachedKeys{n: n, set: ks}
	return ks, nil
}
