package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// contentHash recomputes an object's content hash from its decoded value.
func contentHash(o *Obj) (string, error) { return canonical.ContentHash(o.m) }

// viewOf turns an object this instance built as a value into a view over
// its canonical bytes.
func viewOf(m map[string]any) (*Obj, error) {
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	return viewOver(m, b)
}

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
	k, err := e.o.ResolveKey(ctx, str(entries[i]["key_id"]))
	if err != nil || k.OrganizationID != org || !isHolder(k.HolderID, holderPrefix) {
		return refusef(reason.EvidenceSignatureInvalid, "signature %d of %s is not by a key of %s's %s", i, o.ID(), org, holderPrefix)
	}
	if err := e.liveKey(ctx, o, entries[i], k); err != nil {
		return err
	}
	return e.sigs.VerifyEntryOver(o.m, content, i, k.Public)
}

// request is an idempotent call under way (Idempotent). recorded is set
// once the act it made committed: the acts that follow from it in the same
// call (formation's commit) record nothing more.
type request struct {
	scope, id, argsHash string
	recorded            bool
}

type requestKey struct{}

// actRef is what an idempotent call records about the act it made.
type actRef struct {
	TransactionID string            `json:"transaction_id"`
	Objects       map[string]string `json:"objects,omitempty"`
}

// recordRequest records the call under way, if any, in the act's commit
// transaction: a crash before the commit leaves nothing, so the call may
// be retried; after it, a retry finds the act.
func recordRequest(ctx context.Context, tx *store.Txn, txn string, names map[string]string) error {
	r, ok := ctx.Value(requestKey{}).(*request)
	if !ok || r.recorded {
		return nil
	}
	b, err := json.Marshal(actRef{TransactionID: txn, Objects: names})
	if err != nil {
		return err
	}
	err = tx.RecordRequest(r.scope, r.id, r.argsHash, string(b))
	if errors.Is(err, store.ErrRequestReused) {
		return reason.Refuse("request_id " + r.id + " was already used with other arguments; choose a new request_id for a new request")
	}
	return err
}

// requestRecorded marks the call under way as recorded, once its act
// committed.
func requestRecorded(ctx context.Context) {
	if r, ok := ctx.Value(requestKey{}).(*request); ok {
		r.recorded = true
	}
}

// ErrRequestReused is returned by Idempotent when a request id is presented
// again with other arguments.
var ErrRequestReused = errors.New("record: request id already used with other arguments")

// Idempotent runs an act at most once per (scope, request id): a call
// repeated with the same id and arguments returns the act's outcome as the
// record holds it now, without acting again; the same id with other
// arguments is refused. The record of the call is written in the act's own
// commit, so a crash mid-act leaves either no act and no record (the call
// may be retried as is) or both.
func (e *Engine) Idempotent(ctx context.Context, scope, requestID, argsHash string, run func(ctx context.Context) (Outcome, error)) (Outcome, error) {
	if requestID == "" {
		return run(ctx)
	}
	unlock := e.locks.lock("request\x00" + scope + "\x00" + requestID)
	defer unlock()
	prior, err := e.o.Store.LookupRequest(ctx, scope, requestID)
	switch {
	case err == nil && prior.ArgsHash != argsHash:
		return Outcome{}, reason.Refuse("request_id " + requestID + " was already used with other arguments; choose a new request_id for a new request")
	case err == nil:
		var ref actRef
		if err := json.Unmarshal([]byte(prior.Act), &ref); err != nil {
			return Outcome{}, err
		}
		out, err := e.outcome(ctx, ref.TransactionID, ref.Objects)
		if out.Status == StatusRecorded && !slices.ContainsFunc(keysOf(ref.Objects), func(k string) bool { return k == "event" }) {
			out.Status = StatusDelivered
		}
		return out, err
	case !errors.Is(err, store.ErrNotFound):
		return Outcome{}, err
	}
	return run(context.WithValue(ctx, requestKey{}, &request{scope: scope, id: requestID, argsHash: argsHash}))
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
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
	org := e.o.Config().OrganizationID
	var out []string
	for _, o := range krs {
		if o.P("controller_organization_id") == org && intOf(o.m["version"]) <= 1 {
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
	trusted := e.o.Trusted.KeySet(peer)
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
		k, err := e.o.ResolveKey(ctx, id)
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
	p, err := e.o.Peers.Peer(peer)
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
