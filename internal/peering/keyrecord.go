package peering

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// ErrUntrustedKey is wrapped by every refusal of TrustKeyRecord and
// TrustedKeys.Add.
var ErrUntrustedKey = errors.New("peering: key record not trusted")

// KeyRecordsPath is where an instance serves its own organisation's
// key_record objects to pinned peers.
const KeyRecordsPath = "/a202/key-records"

// maxKeyRecordsBody bounds a key-records response; a handful of records
// is a few KiB.
const maxKeyRecordsBody = 1 << 20

// TrustKeyRecord decides whether keyRecord, the exact bytes of a
// key_record object received from or for peer, binds a key_id to a public
// key on peer's authority. It requires, in order: canonical bytes (the
// bytes that were signed, never a re-serialisation); object_type
// key_record and the A202 spec_version; a valid key_id as the object id; a
// content_hash that is the object's own; peer's organisation as both the
// payload's controller_organization_id and created_by.organization_id; a
// public_key_jwk that imports and matches the declared algorithm; when the
// key_id is one of peer's pinned principal keys, exactly that pinned key;
// and at least one object_issuance signature by a pinned principal key of
// peer (one whose RFC 7638 thumbprint the peer file lists) that verifies.
//
// The key's status and validity interval are not judged here: they are
// facts of the record that a verifier reads at signed_at and now. Every
// refusal wraps ErrUntrustedKey.
func TrustKeyRecord(peer instance.PeerInfo, keyRecord []byte) (keyID string, pub crypto.PublicKey, err error) {
	fail := func(format string, args ...any) (string, crypto.PublicKey, error) {
		return "", nil, fmt.Errorf("%w: %s", ErrUntrustedKey, fmt.Sprintf(format, args...))
	}
	obj, err := canonical.DecodeCanonical(keyRecord)
	if errors.Is(err, canonical.ErrNotCanonical) {
		return fail("bytes are not in canonical form")
	}
	if err != nil {
		return fail("%v", err)
	}
	if t, _ := obj["object_type"].(string); t != "key_record" {
		return fail("object_type is %q, not key_record", t)
	}
	if v, _ := obj["spec_version"].(string); v != envelope.SpecVersion {
		return fail("spec_version is %q", v)
	}
	keyID, _ = obj["id"].(string)
	if !keys.ValidKeyID(keyID) {
		return fail("id %q is not a key_id", keyID)
	}
	if h, err := canonical.ContentHash(obj); err != nil || h != obj["content_hash"] {
		return fail("%s: content_hash is not the record's own", keyID)
	}
	payload, _ := obj["payload"].(map[string]any)
	createdBy, _ := obj["created_by"].(map[string]any)
	if payload == nil || createdBy == nil {
		return fail("%s: no payload or created_by", keyID)
	}
	if c, _ := payload["controller_organization_id"].(string); c != peer.OrganizationID {
		return fail("%s: controlled by %q, not %s", keyID, c, peer.OrganizationID)
	}
	if c, _ := createdBy["organization_id"].(string); c != peer.OrganizationID {
		return fail("%s: created by %q, not %s", keyID, c, peer.OrganizationID)
	}
	pub, err = keys.ParseJWK(payload["public_key_jwk"])
	if err != nil {
		return fail("%s: public_key_jwk: %v", keyID, err)
	}
	if alg, _ := keys.Algorithm(pub); alg != payload["algorithm"] {
		return fail("%s: algorithm %v does not match its key", keyID, payload["algorithm"])
	}
	principals, err := pinnedPrincipals(peer)
	if err != nil {
		return fail("%v", err)
	}
	if pinned, ok := principals[keyID]; ok && !keys.SamePublic(pinned, pub) {
		return fail("%s names a pinned principal key but carries another key", keyID)
	}
	entries, err := signature.Entries(obj)
	if err != nil {
		return fail("%s: %v", keyID, err)
	}
	for i, e := range entries {
		signer, _ := e["key_id"].(string)
		pk, ok := principals[signer]
		if !ok || e["purpose"] != "object_issuance" {
			continue
		}
		if err := signature.VerifyEntry(obj, i, pk); err == nil {
			return keyID, pub, nil
		}
	}
	return fail("%s: no valid object_issuance signature by a pinned principal key of %s", keyID, peer.OrganizationID)
}

// pinnedPrincipals returns peer's principal keys whose thumbprints the
// peer file pins, by key_id.
func pinnedPrincipals(peer instance.PeerInfo) (map[string]crypto.PublicKey, error) {
	pinned := map[string]bool{}
	for _, t := range peer.PrincipalKeyThumbprints {
		pinned[t] = true
	}
	out := map[string]crypto.PublicKey{}
	for kid, jwk := range peer.PrincipalKeys {
		pub, err := keys.ParseJWK(jwk)
		if err != nil {
			return nil, fmt.Errorf("peer file principal key %s: %w", kid, err)
		}
		if tp, err := keys.Thumbprint(pub); err == nil && pinned[tp] {
			out[kid] = pub
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("peer file of %s carries no pinned principal key", peer.OrganizationID)
	}
	return out, nil
}

// TrustedKeys is the per-peer store of trusted agent and principal keys.
// Keys enter only through TrustKeyRecord; the records are kept in the
// record (store objects with origin = the peer organisation) so a restart
// reloads them (Load) instead of trusting anything new. It is safe for
// concurrent use.
type TrustedKeys struct {
	store   *store.Store
	clients *Clients
	logger  *slog.Logger

	mu      sync.Mutex
	sets    map[string]*keys.KeySet
	last    map[string]time.Time // when each peer's records were last fetched
	asked   map[string]time.Time // when an unknown key last made us fetch
	fetchMu sync.Mutex           // one exchange at a time
	clock   func() time.Time
	pins    *Directory // where successor principal keys are pinned; nil: never
}

// PinSuccessors lets t pin a peer's successor principal key in the peer's
// file in d (see Add). Without it, a rotated principal key of a peer is
// trusted as a key, never as the peer's principal.
func (t *TrustedKeys) PinSuccessors(d *Directory) {
	t.mu.Lock()
	t.pins = d
	t.mu.Unlock()
}

// KeyRefresh bounds how old a peer's key records may be when a message of
// that peer is checked: older, and they are fetched again first, so a key
// the peer revoked or rotated is refused by this instance within this
// bound (and at once when a message names a key not held).
const KeyRefresh = 30 * time.Second

// unknownKeyPause is the least time between two fetches a peer's unknown
// key ids trigger.
const unknownKeyPause = 2 * time.Second

// SetClock sets the clock refresh ages are reckoned in (tests move it).
func (t *TrustedKeys) SetClock(c func() time.Time) {
	t.mu.Lock()
	t.clock = c
	t.mu.Unlock()
}

func (t *TrustedKeys) now() time.Time {
	t.mu.Lock()
	c := t.clock
	t.mu.Unlock()
	if c == nil {
		return time.Now()
	}
	return c()
}

// NewTrustedKeys returns an empty key store. st persists trusted records
// (nil keeps them in memory only); clients lets EnsureKeys and Exchange
// fetch records from peers (nil disables fetching).
func NewTrustedKeys(st *store.Store, clients *Clients, logger *slog.Logger) *TrustedKeys {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TrustedKeys{store: st, clients: clients, logger: logger, sets: map[string]*keys.KeySet{}, last: map[string]time.Time{}, asked: map[string]time.Time{}}
}

func (t *TrustedKeys) set(org string) *keys.KeySet {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sets[org]
	if !ok {
		s = keys.NewKeySet()
		t.sets[org] = s
	}
	return s
}

// Add trusts the key that keyRecord publishes for peer and returns its
// key_id. It refuses (ErrUntrustedKey) a record TrustKeyRecord refuses,
// and a record that binds a key_id already trusted for peer to a
// different key, whoever signed it; both refusals of a key change are
// logged at warning level, because one is either an attack or a peer that
// reused a key_id. Adding a record for a key already trusted is a no-op.
func (t *TrustedKeys) Add(ctx context.Context, peer instance.PeerInfo, keyRecord []byte) (string, error) {
	keyID, pub, err := TrustKeyRecord(peer, keyRecord)
	if err != nil {
		if id, claimed, ok := claimedKey(keyRecord); ok {
			if held, lerr := t.set(peer.OrganizationID).Lookup(id); lerr == nil && !keys.SamePublic(held, claimed) {
				t.logger.Warn("refused a key change that no pinned principal key signed",
					"organization_id", peer.OrganizationID, "key_id", id, "error", err)
			}
		}
		return "", err
	}
	if prev, later := laterVersion(keyRecord); later {
		return t.addVersion(ctx, peer, keyRecord, keyID, prev, pub)
	}
	set := t.set(peer.OrganizationID)
	held, lerr := set.Lookup(keyID)
	if lerr == nil && !keys.SamePublic(held, pub) {
		t.logger.Warn("refused a key change: a key_id names one key for good, a new key needs a new key_id",
			"organization_id", peer.OrganizationID, "key_id", keyID)
		return "", fmt.Errorf("%w: %s is already trusted with a different key", ErrUntrustedKey, keyID)
	}
	if err := set.Add(keyID, pub); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUntrustedKey, err)
	}
	if err := t.pinSuccessor(ctx, peer, keyRecord, keyID, pub); err != nil {
		// The key stays trusted as the key its record publishes; it is
		// not the peer's principal.
		t.logger.Warn("a peer's key record claims a principal key that is not pinned", "organization_id", peer.OrganizationID, "key_id", keyID, "error", err)
	}
	if t.store != nil {
		if _, err := t.store.PutObject(ctx, keyRecord, peer.OrganizationID); err != nil && !errors.Is(err, store.ErrConflict) {
			// ErrConflict means another record (say, the same key signed
			// again) is held under this id; the key is the same, so the
			// first record stays.
			return "", fmt.Errorf("peering: storing key record %s: %w", keyID, err)
		}
	}
	if lerr != nil {
		// Logged once per key and process: the same records come back at
		// every fetch (KeepCurrent asks every KeyRefresh).
		t.logger.Info("trusted a peer key", "organization_id", peer.OrganizationID, "key_id", keyID)
	}
	return keyID, nil
}

// pinSuccessor pins keyID as a principal key of peer when its record
// (already trusted by TrustKeyRecord) is a successor principal key: signed
// by the key it publishes, as every principal key record is, and vouched
// for by a principal key pinned in peer's file that the records held show
// active at that signature's signed_at and still active now (a retired
// principal key vouches for nothing new, so a successor is learned before
// its predecessor's retirement, which the peer serves after it). Records
// that are not self-signed are agent keys and are left alone; a
// self-signed one that no live pinned key vouched for is an error.
func (t *TrustedKeys) pinSuccessor(ctx context.Context, peer instance.PeerInfo, keyRecord []byte, keyID string, pub crypto.PublicKey) error {
	t.mu.Lock()
	d := t.pins
	t.mu.Unlock()
	principals, err := pinnedPrincipals(peer)
	if err != nil {
		return err
	}
	if _, pinned := principals[keyID]; pinned || d == nil {
		return nil
	}
	obj, err := canonical.DecodeObject(keyRecord)
	if err != nil {
		return err
	}
	if !signature.SelfSigned(obj, pub) {
		return nil
	}
	entries, err := signature.Entries(obj)
	if err != nil {
		return err
	}
	held, err := t.heldRecords(ctx, peer.OrganizationID)
	if err != nil {
		return err
	}
	now := t.now()
	var why []string
	for i, e := range entries {
		by, _ := e["key_id"].(string)
		pk, ok := principals[by]
		if !ok || e["purpose"] != "object_issuance" || signature.VerifyEntry(obj, i, pk) != nil {
			continue
		}
		if vs := verify.KeyVersions(held, by); len(vs) > 0 {
			at, detail := verify.KeyStatusAt(vs, by, fmt.Sprint(e["signed_at"]))
			if st, _, _ := verify.KeyStatusNow(vs, by, now); at != verify.Verified || st != envelope.KeyActive {
				why = append(why, fmt.Sprintf("%s is %s now (at signing: %s)", by, st, detail))
				continue
			}
		}
		if _, err := instance.PinPrincipalKey(d.stateDir, peer.OrganizationID, keyID, pub, peer.PrincipalIDs[by]); err != nil {
			return err
		}
		if err := d.Reload(); err != nil {
			return err
		}
		t.logger.Info("pinned a peer's successor principal key", "organization_id", peer.OrganizationID, "key_id", keyID, "vouched_for_by", by)
		return nil
	}
	if len(why) == 0 {
		why = append(why, "no pinned principal key signed it")
	}
	return fmt.Errorf("%w: %s is self-signed, as a principal key is, but %s", ErrUntrustedKey, keyID, strings.Join(why, "; "))
}

// heldRecords are the key records held for org, decoded.
func (t *TrustedKeys) heldRecords(ctx context.Context, org string) ([]map[string]any, error) {
	if t.store == nil {
		return nil, nil
	}
	raws, err := t.store.ObjectsOfType(ctx, "key_record")
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, b := range raws {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			continue
		}
		if p, _ := o["payload"].(map[string]any); p["controller_organization_id"] == org {
			out = append(out, o)
		}
	}
	return out, nil
}

// current is peer as its file reads now: a successor principal key
// pinned by the record before makes the next one trusted on its word.
func (t *TrustedKeys) current(peer instance.PeerInfo) instance.PeerInfo {
	t.mu.Lock()
	d := t.pins
	t.mu.Unlock()
	if d == nil {
		return peer
	}
	if p, err := d.Peer(peer.OrganizationID); err == nil {
		return p
	}
	return peer
}

// laterVersion reports whether a key record is a later version of
// another (version above 1), and names its predecessor.
func laterVersion(record []byte) (string, bool) {
	obj, err := canonical.DecodeObject(record)
	if err != nil {
		return "", false
	}
	v, _ := obj["version"].(json.Number)
	prev, _ := obj["previous_version_id"].(string)
	return prev, v != "" && v != "1" && prev != ""
}

// addVersion keeps a later version of a trusted key's record (a key
// rotated or revoked: canonical model §4 rule 6): its predecessor must be
// a record held for the same peer publishing the same key, and it signs
// nothing itself, so no key id is trusted by it; what it states is read
// from the chain when a key's status is judged.
func (t *TrustedKeys) addVersion(ctx context.Context, peer instance.PeerInfo, record []byte, id, prev string, pub crypto.PublicKey) (string, error) {
	if t.store == nil {
		return "", fmt.Errorf("%w: %s: a later key record version needs the record it follows", ErrUntrustedKey, id)
	}
	held, err := t.store.GetObject(ctx, "", prev) // key records are bound to no transaction
	if err != nil {
		return "", fmt.Errorf("%w: %s follows %s, which is not held", ErrUntrustedKey, id, prev)
	}
	if _, pp, err := TrustKeyRecord(peer, held); err != nil || !keys.SamePublic(pp, pub) {
		return "", fmt.Errorf("%w: %s follows %s, which is not %s's record of the same key", ErrUntrustedKey, id, prev, peer.OrganizationID)
	}
	if _, err := t.store.PutObject(ctx, record, peer.OrganizationID); err != nil && !errors.Is(err, store.ErrConflict) {
		return "", fmt.Errorf("peering: storing key record %s: %w", id, err)
	}
	t.logger.Info("kept a later version of a peer key's record", "organization_id", peer.OrganizationID, "record", id, "follows", prev)
	return id, nil
}

// TrustRevocationRecord decides whether record, the exact bytes of a
// revocation_record received from or for peer, is peer's statement about
// one of its agents or keys: the checks of every revocation record
// (trustRevocation) and subject an agent or a key. (A mandate's
// revocation needs the mandate too: TrustMandateRevocation.)
func TrustRevocationRecord(peer instance.PeerInfo, record []byte) error {
	obj, err := trustRevocation(peer, record)
	if err != nil {
		return err
	}
	payload, _ := obj["payload"].(map[string]any)
	if st := payload["subject_type"]; st != "agent" && st != "key" {
		return fmt.Errorf("%w: %v revokes a %v, not an agent or key", ErrUntrustedKey, obj["id"], st)
	}
	return nil
}

// trustRevocation runs the checks every revocation record of peer must
// pass, whatever its subject, and returns the record decoded: canonical
// bytes (the bytes signed, never a re-serialisation), object_type
// revocation_record, its own content_hash, accepted by the gate (kernel
// schema and envelope rules), created for peer's organisation, and an
// object_issuance signature by a pinned principal key of peer that
// verifies. Every refusal wraps ErrUntrustedKey.
func trustRevocation(peer instance.PeerInfo, record []byte) (map[string]any, error) {
	fail := func(format string, args ...any) (map[string]any, error) {
		return nil, fmt.Errorf("%w: %s", ErrUntrustedKey, fmt.Sprintf(format, args...))
	}
	obj, err := canonical.DecodeCanonical(record)
	if errors.Is(err, canonical.ErrNotCanonical) {
		return fail("bytes are not in canonical form")
	}
	if err != nil {
		return fail("%v", err)
	}
	if obj["object_type"] != "revocation_record" {
		return fail("object_type is %v, not revocation_record", obj["object_type"])
	}
	if h, err := canonical.ContentHash(obj); err != nil || h != obj["content_hash"] {
		return fail("%v: content_hash is not the record's own", obj["id"])
	}
	if j := gate.Envelope(obj, gate.Options{}); !j.Accepted() {
		return fail("%v: the gate refuses it: %v", obj["id"], j.Err())
	}
	by, _ := obj["created_by"].(map[string]any)
	if by["organization_id"] != peer.OrganizationID {
		return fail("%v is created for %v, not %s", obj["id"], by["organization_id"], peer.OrganizationID)
	}
	principals, err := pinnedPrincipals(peer)
	if err != nil {
		return fail("%v", err)
	}
	entries, err := signature.Entries(obj)
	if err != nil {
		return fail("%v: %v", obj["id"], err)
	}
	for i, e := range entries {
		pk, ok := principals[fmt.Sprint(e["key_id"])]
		if ok && e["purpose"] == "object_issuance" && signature.VerifyEntry(obj, i, pk) == nil {
			return obj, nil
		}
	}
	return fail("%v: no valid object_issuance signature by a pinned principal key of %s", obj["id"], peer.OrganizationID)
}

// claimedKey reads the key_id and key a record claims, without trusting
// anything, to recognise an attempted key change.
func claimedKey(record []byte) (string, crypto.PublicKey, bool) {
	obj, err := canonical.DecodeObject(record)
	if err != nil {
		return "", nil, false
	}
	id, _ := obj["id"].(string)
	payload, _ := obj["payload"].(map[string]any)
	if id == "" || payload == nil {
		return "", nil, false
	}
	pub, err := keys.ParseJWK(payload["public_key_jwk"])
	if err != nil {
		return "", nil, false
	}
	return id, pub, true
}

// Lookup returns the key trusted for org under keyID, or an error
// wrapping keys.ErrUnknownKey.
func (t *TrustedKeys) Lookup(org, keyID string) (crypto.PublicKey, error) {
	return t.set(org).Lookup(keyID)
}

// KeySet returns org's trusted keys as a resolver for package signature.
// The set only grows; it is shared, not copied.
func (t *TrustedKeys) KeySet(org string) *keys.KeySet { return t.set(org) }

// Known reports whether any key of org is trusted.
func (t *TrustedKeys) Known(org string) bool { return t.set(org).Len() > 0 }

// Load re-trusts the peer key records held in the store: for every
// key_record whose controller is a peer pinned in dir, TrustKeyRecord runs
// again against the current peer file, so a re-pinned peer's old records
// are not trusted by inheritance. Records of other organisations (this
// instance's own) are skipped; records that no longer verify are logged
// and skipped.
func (t *TrustedKeys) Load(ctx context.Context, dir *Directory) error {
	if t.store == nil {
		return nil
	}
	records, err := t.store.ObjectsOfType(ctx, "key_record")
	if err != nil {
		return fmt.Errorf("peering: loading key records: %w", err)
	}
	for _, rec := range records {
		obj, err := canonical.DecodeObject(rec)
		if err != nil {
			continue
		}
		payload, _ := obj["payload"].(map[string]any)
		org, _ := payload["controller_organization_id"].(string)
		peer, err := dir.Peer(org)
		if err != nil {
			continue
		}
		if _, err := t.Add(ctx, t.current(peer), rec); err != nil {
			t.logger.Warn("a stored peer key record is no longer trusted", "organization_id", org, "key_id", obj["id"], "error", err)
		}
	}
	return nil
}

// EnsureKeys makes org's key records current: fetched on first contact,
// and again when they were fetched more than KeyRefresh ago, so that a key
// the peer rotated or revoked reaches this instance within that bound.
// Between fetches it does nothing.
func (t *TrustedKeys) EnsureKeys(ctx context.Context, org string) error {
	now := t.now()
	t.mu.Lock()
	last, fetched := t.last[org]
	t.mu.Unlock()
	if t.Known(org) && fetched && now.Sub(last) < KeyRefresh {
		return nil
	}
	if t.Known(org) && t.clients == nil {
		return nil
	}
	_, err := t.Exchange(ctx, org)
	if err != nil && t.Known(org) {
		// The records held stand until the peer serves newer ones; the
		// next message asks again.
		t.logger.Warn("refreshing a peer's key records failed; judging by the records held", "organization_id", org, "error", err)
		at := t.now().Add(unknownKeyPause - KeyRefresh)
		t.mu.Lock()
		t.last[org] = at
		t.mu.Unlock()
		return nil
	}
	return err
}

// KeepCurrent fetches the key and revocation records of every peer
// pinned in dir now, and again every period while ctx lasts, skipping a
// peer whose records were fetched less than period ago (by a message's
// EnsureKeys, say). It is what makes a peer's revocation reach this
// instance when no message passes between the two: the peer serves its
// records for as long as it holds them, and this instance asks until it
// has had them, whichever of the two was down when they were made. A
// failed fetch is logged at debug level and tried at the next period: a
// peer that is away is the outbox's concern, not an error here.
func (t *TrustedKeys) KeepCurrent(ctx context.Context, dir *Directory, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		for _, p := range dir.Peers() {
			t.mu.Lock()
			last, fetched := t.last[p.OrganizationID]
			t.mu.Unlock()
			if fetched && t.now().Sub(last) < period {
				continue
			}
			if _, err := t.Exchange(ctx, p.OrganizationID); err != nil && ctx.Err() == nil {
				t.logger.Debug("fetching a peer's key and revocation records failed; asking again later", "organization_id", p.OrganizationID, "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// EnsureKnown fetches org's key records again when one of keyIDs is
// neither trusted for org nor held (a key the peer added since the last
// fetch), at most once per unknownKeyPause.
func (t *TrustedKeys) EnsureKnown(ctx context.Context, org string, keyIDs []string) error {
	set := t.set(org)
	unknown := false
	for _, id := range keyIDs {
		if _, err := set.Lookup(id); err != nil {
			unknown = true
		}
	}
	if !unknown || t.clients == nil {
		return nil
	}
	now := t.now()
	t.mu.Lock()
	asked := t.asked[org]
	pause := now.Sub(asked) < unknownKeyPause
	if !pause {
		t.asked[org] = now
	}
	t.mu.Unlock()
	if pause {
		return nil
	}
	_, err := t.Exchange(ctx, org)
	return err
}

// Exchange fetches org's key records from its KeyRecordsPath over the
// pinned client and trusts each with Add, returning how many are now
// trusted for org. A record that is refused is logged and does not stop
// the others; an exchange that yields no trusted key is an error.
func (t *TrustedKeys) Exchange(ctx context.Context, org string) (int, error) {
	if t.clients == nil {
		return 0, errors.New("peering: this key store cannot fetch key records")
	}
	t.fetchMu.Lock()
	defer t.fetchMu.Unlock()
	hc, peer, err := t.clients.For(org)
	if err != nil {
		return 0, err
	}
	records, err := FetchKeyRecords(ctx, hc, peer)
	if err != nil {
		return 0, err
	}
	// Key records first, in the order served (a version after the one it
	// follows), then the revocation records of the peer's agents, keys
	// and mandates, judged under the principal keys the first pinned.
	var revocations [][]byte
	for _, rec := range records {
		if typeOf(rec) == "revocation_record" {
			revocations = append(revocations, rec)
			continue
		}
		if _, err := t.Add(ctx, peer, rec); err != nil {
			t.logger.Warn("refused a key record from a peer", "organization_id", org, "error", err)
		}
		peer = t.current(peer)
	}
	for _, rec := range revocations {
		if err := t.trustRevocation(ctx, peer, rec); err != nil {
			if errors.Is(err, errNotRelied) {
				t.logger.Debug("left a peer's revocation of a mandate this instance does not hold", "organization_id", org, "error", err)
			} else {
				t.logger.Warn("refused a revocation record from a peer", "organization_id", org, "error", err)
			}
			continue
		}
		if t.store != nil {
			if _, err := t.store.PutObject(ctx, rec, peer.OrganizationID); err != nil && !errors.Is(err, store.ErrConflict) {
				return 0, fmt.Errorf("peering: storing a revocation record of %s: %w", org, err)
			}
		}
	}
	n := t.set(org).Len()
	if n == 0 {
		return 0, fmt.Errorf("%w: %s served no key record this instance trusts", ErrUntrustedKey, org)
	}
	at := t.now()
	t.mu.Lock()
	t.last[org] = at
	t.mu.Unlock()
	return n, nil
}

// trustRevocation judges one revocation record a peer served: a mandate's
// by TrustMandateRevocation, which needs the mandates held (so a key
// store without a record keeps none), any other by TrustRevocationRecord.
func (t *TrustedKeys) trustRevocation(ctx context.Context, peer instance.PeerInfo, record []byte) error {
	obj, err := canonical.DecodeObject(record)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrustedKey, err)
	}
	if p, _ := obj["payload"].(map[string]any); p["subject_type"] != "mandate" {
		return TrustRevocationRecord(peer, record)
	}
	if t.store == nil {
		return fmt.Errorf("%w: %v: a mandate's revocation needs the mandates held", ErrUntrustedKey, obj["id"])
	}
	return TrustMandateRevocation(ctx, t.store, peer, record)
}

func typeOf(record []byte) string {
	obj, err := canonical.DecodeObject(record)
	if err != nil {
		return ""
	}
	s, _ := obj["object_type"].(string)
	return s
}

// KeyRecordsURL returns the URL of peer's key records.
func KeyRecordsURL(peer instance.PeerInfo) (string, error) {
	base := peer.BaseURL()
	if base == "" {
		return "", fmt.Errorf("peering: peer file of %s has no usable agent_card_url", peer.OrganizationID)
	}
	return url.JoinPath(base, KeyRecordsPath)
}

// FetchKeyRecords GETs peer's key records with a pinned client and returns
// the exact bytes of each (nothing is trusted yet; see TrustedKeys.Add).
func FetchKeyRecords(ctx context.Context, hc *http.Client, peer instance.PeerInfo) ([][]byte, error) {
	u, err := KeyRecordsURL(peer)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("peering: fetching key records of %s: %w", peer.OrganizationID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("peering: key records of %s: HTTP %s", peer.OrganizationID, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyRecordsBody+1))
	if err != nil {
		return nil, fmt.Errorf("peering: key records of %s: %w", peer.OrganizationID, err)
	}
	if len(body) > maxKeyRecordsBody {
		return nil, fmt.Errorf("peering: key records of %s exceed %d bytes", peer.OrganizationID, maxKeyRecordsBody)
	}
	// Each element of a []json.RawMessage is the element's bytes exactly as
	// served, which is what TrustKeyRecord must see.
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("peering: key records of %s: %w", peer.OrganizationID, err)
	}
	out := make([][]byte, len(raw))
	for i, r := range raw {
		out[i] = []byte(r)
	}
	return out, nil
}

// KeyRecordSource returns this instance's own key_record objects and
// revocation records, as exact canonical bytes, for the pinned peer org
// that asks.
type KeyRecordSource func(ctx context.Context, org string) ([][]byte, error)

// OwnKeyRecords is the KeyRecordSource of an instance whose records are in
// st: every stored key_record whose controller is ownOrg, every version of
// each in the order stored, then ownOrg's revocation records of its agents
// and keys and of those of its mandates that are disclosed to the asking
// peer (MandateServedTo), so that a counterparty keeps in its own record
// the revocation of a mandate it relied on (commercial mandate §9).
func OwnKeyRecords(st *store.Store, ownOrg string) KeyRecordSource {
	return func(ctx context.Context, peer string) ([][]byte, error) {
		all, err := st.ObjectsOfType(ctx, "key_record")
		if err != nil {
			return nil, err
		}
		var out [][]byte
		for _, rec := range all {
			obj, err := canonical.DecodeObject(rec)
			if err != nil {
				continue
			}
			payload, _ := obj["payload"].(map[string]any)
			if payload["controller_organization_id"] == ownOrg {
				out = append(out, rec)
			}
		}
		revs, err := st.ObjectsWithOrigin(ctx, "revocation_record")
		if err != nil {
			return nil, err
		}
		for _, rec := range revs {
			obj, err := canonical.DecodeObject(rec.Body)
			if err != nil {
				continue
			}
			by, _ := obj["created_by"].(map[string]any)
			payload, _ := obj["payload"].(map[string]any)
			if by["organization_id"] != ownOrg {
				continue
			}
			switch payload["subject_type"] {
			case "agent", "key":
				out = append(out, rec.Body)
			case "mandate":
				id, _ := payload["subject_id"].(string)
				if rec.Origin != "local" {
					continue
				}
				if _, ok := MandateServedTo(ctx, st, id, peer); ok {
					out = append(out, rec.Body)
				}
			}
		}
		return out, nil
	}
}

// KeyRecordsHandler serves GET KeyRecordsPath: the records src returns, as
// a JSON array whose elements are the records' exact bytes. Only a pinned
// peer may read them (403 otherwise); other methods get 405.
func KeyRecordsHandler(dir *Directory, src KeyRecordSource, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		peer, err := dir.AuthenticateRequest(r)
		if err != nil {
			logger.Info("refused a key-records request without a pinned client certificate", "remote_addr", r.RemoteAddr, "error", err)
			http.Error(w, "a pinned client certificate is required", http.StatusForbidden)
			return
		}
		records, err := src(r.Context(), peer.OrganizationID)
		if err != nil {
			logger.Error("reading own key records failed", "error", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		var buf bytes.Buffer
		buf.WriteByte('[')
		for i, rec := range records {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(rec)
		}
		buf.WriteByte(']')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if _, err := w.Write(buf.Bytes()); err != nil {
			logger.Debug("writing key records failed", "organization_id", peer.OrganizationID, "error", err)
		}
	})
}

// IssueKeyRecord builds, seals and signs the key_record that spec
// describes, signed (purpose object_issuance) by the organisation's
// principal key, and returns its canonical bytes: the record a peer's
// TrustKeyRecord accepts once the principal key is pinned there. Package
// instance, or whoever provisions an instance's keys, stores the result
// with store.PutObject so that KeyRecordsHandler serves it.
func IssueKeyRecord(spec envelope.KeyRecordSpec, principalKeyID string, principal crypto.Signer, signedAt time.Time) ([]byte, error) {
	obj, err := envelope.NewKeyRecord(spec)
	if err != nil {
		return nil, err
	}
	if err := envelope.Seal(obj); err != nil {
		return nil, err
	}
	s, err := signature.NewSigner(principalKeyID, principal)
	if err != nil {
		return nil, err
	}
	if err := signature.Sign(obj, s, "object_issuance", signedAt); err != nil {
		return nil, err
	}
	return canonical.Marshal(obj)
}
