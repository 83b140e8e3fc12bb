// Package org is one organisation's runtime: an opened state directory
// together with what evaluates and signs on its behalf — the key resolver
// (its own keys and the keys its peers' pinned principals vouched for), the
// mandate resolver, the live status client and the policy evaluator.
//
// Everything that acts for the organisation builds on an *Org: the
// agent's surface (package agent), the record protocol, the serve process,
// and the principal's surface (package principal), which adds the
// principal's key to it.
//
// The evaluator resolves a mandate's live status in two ways: a mandate
// this organisation's principal issued by the status its own record holds
// at the act (so a revocation or suspension stops this instance's agent at
// its next act, whichever process stored it), any other by the status
// client, within its 60-second cache bound, except that a revocation its
// issuer sent (peering.TrustMandateRevocation) denies at once (ownStatus).
//
// An Org is the agent's side of the organisation. The only private keys it
// holds are the agent's signing key and, for mutual TLS with peers, the
// instance's TLS key. It never holds the principal's private key, nor any
// other organisation's: the principal's key is loaded apart, by package
// principal, into the principal's surface alone, and an Org resolves the
// principal's key id to the public key its key record states (see package
// principal, "Roles in the types"). So nothing built on an Org alone can
// issue a mandate, change a mandate's status or approve an act.
package org

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// ErrUnknownKey is returned for a key id neither this organisation nor any
// pinned peer vouches for.
var ErrUnknownKey = errors.New("org: unknown key")

// Org is an organisation's runtime. Create it with Open.
type Org struct {
	In      *instance.Instance
	Store   *store.Store
	Peers   *peering.Directory
	Clients *peering.Clients
	Trusted *peering.TrustedKeys
	Status  *status.Client
	Log     *slog.Logger
	// Clock is the time every decision is made at; tests replace it.
	Clock func() time.Time

	evaluator *authority.Evaluator

	// keys holds the key and revocation records held (keyRecords).
	keys store.KeyObjectsCache[heldKeyRecords]

	hooksMu   sync.Mutex
	requested []func(store.ApprovalRequest) // OnApprovalRequest

	// pinned holds the peers' pinned principal keys, parsed (pinnedKey).
	pinned sync.Map // key id → pinnedJWK
}

// Options adjust Open.
type Options struct {
	Logger *slog.Logger
	Clock  func() time.Time
	// StatusRoots adds certificates that status endpoints may present
	// (tests use it for a stand-alone status server); the instance's own
	// certificate and every pinned peer's are always included.
	StatusRoots []*x509.Certificate
	// NoSync opens the record without waiting for the disk at commit
	// (store.Options): for tests only.
	NoSync bool
}

// Open opens the state directory dir and wires its runtime.
func Open(dir string, o Options) (*Org, error) {
	in, err := instance.OpenWith(dir, store.Options{NoSync: o.NoSync})
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	peers, err := peering.OpenDirectory(dir, log)
	if err != nil {
		in.Close()
		return nil, err
	}
	cert, err := in.TLSCertificate()
	if err != nil {
		in.Close()
		return nil, err
	}
	clients := peering.NewClients(cert, peers, 10*time.Second)
	trusted := peering.NewTrustedKeys(in.Store, clients, log)
	trusted.SetClock(clock)
	trusted.PinSuccessors(peers)
	if err := trusted.Load(context.Background(), peers); err != nil {
		in.Close()
		return nil, err
	}
	o2 := &Org{In: in, Store: in.Store, Peers: peers, Clients: clients, Trusted: trusted, Log: log, Clock: clock}
	roots, err := o2.statusRoots(o.StatusRoots)
	if err != nil {
		in.Close()
		return nil, err
	}
	sc, err := status.NewClient(status.ClientConfig{RootCAs: roots, Clock: o2.now, Pins: o2.peerPins})
	if err != nil {
		in.Close()
		return nil, err
	}
	o2.Status = sc
	// The acting organisation's local, deny-only policy beside its
	// mandates: a minimum grade of the counterparty (package grade). Its
	// own mandates' status is read from its record (ownStatus), a
	// counterparty's through the status client.
	o2.evaluator = &authority.Evaluator{Keys: o2, Mandates: o2, Status: newOwnStatus(o2, sc), Clock: o2.now, Policy: grade.Policy{Store: in.Store, Clock: o2.now}}
	return o2, nil
}

func (o *Org) now() time.Time { return o.Clock() }

// Close releases the record.
func (o *Org) Close() error { return o.In.Close() }

// Config is the instance configuration, as config.json says now (a
// principal's `party agent add` or `party key rotate` in another process
// is picked up within a second).
func (o *Org) Config() instance.Config {
	if err := o.In.Refresh(); err != nil {
		o.Log.Warn("rereading config.json failed; acting on the configuration held", "error", err)
	}
	return o.In.Current()
}

// Evaluator returns the policy evaluator, which resolves keys, mandates and
// live status through this Org.
func (o *Org) Evaluator() *authority.Evaluator { return o.evaluator }

// statusRoots is the pool status endpoints must chain to: the instance's
// own certificate (for its own mandates) and every pinned peer's.
func (o *Org) statusRoots(extra []*x509.Certificate) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	own, err := instance.LoadCertificate(o.In.Dir)
	if err != nil {
		return nil, err
	}
	pool.AddCert(own)
	for _, c := range extra {
		pool.AddCert(c)
	}
	return pool, nil
}

// peerPins returns the pinned certificate fingerprints of every peer: a
// counterparty's status endpoint is on its pinned peer listener.
func (o *Org) peerPins() []string {
	var pins []string
	for _, p := range o.Peers.Peers() {
		pins = append(pins, p.TLSCertificateSHA256)
	}
	return pins
}

// AgentSigner signs as this organisation's primary agent (the one that
// countersigns the counterparty's events).
func (o *Org) AgentSigner() (signature.Signer, error) {
	return o.SignerFor(o.Config().AgentID)
}

// SignerFor signs as one of this instance's agents, with its current key.
func (o *Org) SignerFor(agentID string) (signature.Signer, error) {
	o.Config() // pick up a rotated key
	kid, k, err := o.In.AgentSigningKey(agentID)
	if err != nil {
		return nil, err
	}
	return signature.NewSigner(kid, k)
}

// ResolveKey implements authority.KeyResolver: the principal keys a pinned
// peer file carries, then every key a key record held here publishes,
// this organisation's own (its principal's and agents', current and
// retired) and the keys a pinned principal of a peer vouched for. The
// key's holder is the principal for a key record the key signs itself,
// else the agent that published it; its status is what its version chain
// states now (KeyStanding), revoked when a revocation record revoked its
// holder.
func (o *Org) ResolveKey(ctx context.Context, keyID string) (authority.Key, error) {
	cfg := o.Config()
	recs, err := o.keyRecords(ctx)
	if err != nil {
		return authority.Key{}, err
	}
	for _, p := range o.Peers.Peers() {
		if jwk, ok := p.PrincipalKeys[keyID]; ok {
			pub, err := o.pinnedKey(keyID, jwk)
			if err != nil {
				return authority.Key{}, err
			}
			holder := p.PrincipalIDs[keyID]
			// The pin makes the key the peer's principal's; whether it is
			// still in service is what the peer's records of it say (a
			// principal key retired by a rotation is expired), and active
			// while the peer has said nothing.
			st := envelope.KeyActive
			if r, held := recs.byID[keyID]; held && r.origin == p.OrganizationID {
				st = o.statusNow(recs, keyID, "")
			}
			return authority.Key{Public: pub, OrganizationID: p.OrganizationID, HolderID: holder, Status: st}, nil
		}
	}
	root, ok := recs.byID[keyID]
	if !ok || root.obj["object_type"] != "key_record" {
		return authority.Key{}, fmt.Errorf("%w: %s", ErrUnknownKey, keyID)
	}
	payload, _ := root.obj["payload"].(map[string]any)
	controller, _ := payload["controller_organization_id"].(string)
	var pub crypto.PublicKey
	switch {
	case controller == cfg.OrganizationID && root.origin == "local":
		if pub, err = root.pub, root.pubErr; err != nil {
			return authority.Key{}, fmt.Errorf("org: own key record %s: %w", keyID, err)
		}
	default:
		// A peer's key is trusted only as its pinned principal vouched
		// for it (peering.TrustKeyRecord), never for being in the store.
		if pub, err = o.Trusted.Lookup(controller, keyID); err != nil || root.origin != controller {
			return authority.Key{}, fmt.Errorf("%w: %s", ErrUnknownKey, keyID)
		}
	}
	holder := root.holder
	if holder == "principal" {
		holder = cfg.PrincipalID
		if controller != cfg.OrganizationID {
			holder = "" // a peer's principal keys are the pinned ones
		}
	}
	st := o.statusNow(recs, keyID, holder)
	return authority.Key{Public: pub, OrganizationID: controller, HolderID: holder, Status: st}, nil
}

// pinnedKey parses the JWK a peer file pins under keyID, once for the
// same members and values: a principal key is resolved at every signature
// of the counterparty's principal, and its peer file rarely changes.
func (o *Org) pinnedKey(keyID string, jwk any) (crypto.PublicKey, error) {
	m, _ := jwk.(map[string]any)
	if held, ok := o.pinned.Load(keyID); ok && m != nil && reflect.DeepEqual(held.(pinnedJWK).src, m) {
		return held.(pinnedJWK).pub, nil
	}
	pub, err := keys.ParseJWK(jwk)
	if err == nil && m != nil {
		o.pinned.Store(keyID, pinnedJWK{src: maps.Clone(m), pub: pub})
	}
	return pub, err
}

// pinnedJWK is a peer file's principal key as pinnedKey parsed it, with
// the members it was parsed from.
type pinnedJWK struct {
	src map[string]any
	pub crypto.PublicKey
}

// keyHolder is who holds the key a key record publishes: "principal" when
// the key signs its own record (a principal's key record is self-signed,
// instance bootstrap), else the agent that published it. Self-signed means
// a signature that verifies under the key the record publishes
// (signature.SelfSigned, as the principal's rotation and the peer's trust
// in a successor read it), not an entry that only names the key: a record
// that merely claims it would otherwise be taken for a principal's and
// escape the revocation of the agent who holds it (holderRevoked). It is
// read once per record, when the records are read (readKeyRecords).
func keyHolder(rec map[string]any) string {
	payload, _ := rec["payload"].(map[string]any)
	if pub, err := keys.ParseJWK(payload["public_key_jwk"]); err == nil && signature.SelfSigned(rec, pub) {
		return "principal"
	}
	by, _ := rec["created_by"].(map[string]any)
	holder, _ := by["agent_id"].(string)
	return holder
}

// heldKeyRecords are the key and revocation records held, decoded.
type heldKeyRecords struct {
	list        []map[string]any // key records, store order
	byID        map[string]heldRecord
	revocations []map[string]any
	// mandateRevoked holds, by mandate id, the earliest revocation a peer
	// made of one of its mandates (nil when none is held).
	mandateRevoked map[string]heldRevocation
	// versions keeps each key id's version chain (verify.KeyVersions)
	// once read from list: every signature made or checked asks for its
	// key's status, and reading the chain again parsed and described
	// every version each time (a twentieth of the objects a formation
	// allocated).
	versions *sync.Map // key id → []verify.KeyVersion
}

// versionsOf returns keyID's version chain in recs, read once. Callers
// only read it.
func (recs heldKeyRecords) versionsOf(keyID string) []verify.KeyVersion {
	if recs.versions == nil {
		return verify.KeyVersions(recs.list, keyID)
	}
	if vs, ok := recs.versions.Load(keyID); ok {
		return vs.([]verify.KeyVersion)
	}
	vs := verify.KeyVersions(recs.list, keyID)
	recs.versions.Store(keyID, vs)
	return vs
}

type heldRecord struct {
	obj    map[string]any
	origin string
	holder string // keyHolder(obj)
	// pub and pubErr are the key the record publishes, parsed once with
	// the records (ResolveKey reads it at every own signature).
	pub    crypto.PublicKey
	pubErr error
}

// keyRecords returns every key record held (both organisations': a
// handful), the revocation records of agents and keys, and the peers'
// revocations of their mandates. They are read at every key resolution,
// several times an act, so they are kept, decoded, until one is stored,
// changed or removed (store.KeyObjectsCache).
// The values are shared between callers, who only read them.
func (o *Org) keyRecords(ctx context.Context) (heldKeyRecords, error) {
	return o.keys.Get(ctx, o.Store, o.readKeyRecords)
}

func (o *Org) readKeyRecords(ctx context.Context) (heldKeyRecords, error) {
	out := heldKeyRecords{byID: map[string]heldRecord{}, versions: &sync.Map{}}
	err := o.eachHeld(ctx, "key_record", func(obj map[string]any, origin string) {
		out.list = append(out.list, obj)
		if id, _ := obj["id"].(string); id != "" {
			if _, dup := out.byID[id]; !dup {
				payload, _ := obj["payload"].(map[string]any)
				pub, perr := keys.ParseJWK(payload["public_key_jwk"])
				out.byID[id] = heldRecord{obj: obj, origin: origin, holder: keyHolder(obj), pub: pub, pubErr: perr}
			}
		}
	})
	if err != nil {
		return out, err
	}
	err = o.eachHeld(ctx, "revocation_record", func(obj map[string]any, origin string) {
		p, _ := obj["payload"].(map[string]any)
		if p["subject_type"] != "mandate" {
			out.revocations = append(out.revocations, obj)
			return
		}
		// A peer's revocation of its own mandate, kept as received
		// (peering.TrustMandateRevocation). This instance's own mandates'
		// changes are read from their rows instead (ownStatus).
		if id, _ := p["subject_id"].(string); origin != "local" && p["status"] == status.Revoked {
			if out.mandateRevoked == nil {
				out.mandateRevoked = map[string]heldRevocation{}
			}
			eff, err := envelope.ParseTimestamp(fmt.Sprint(p["effective_at"]))
			if held, dup := out.mandateRevoked[id]; err == nil && (!dup || eff.Before(held.effective)) {
				out.mandateRevoked[id] = heldRevocation{obj: obj, origin: origin, effective: eff}
			}
		}
	})
	return out, err
}

// eachHeld decodes every object of type objectType the store holds and
// hands it to f with its origin, in the store's order; the first object
// that does not decode ends the reading with its error.
func (o *Org) eachHeld(ctx context.Context, objectType string, f func(obj map[string]any, origin string)) error {
	rows, err := o.Store.ObjectsWithOrigin(ctx, objectType)
	if err != nil {
		return err
	}
	for _, r := range rows {
		obj, err := canonical.DecodeObject(r.Body)
		if err != nil {
			return err
		}
		f(obj, r.Origin)
	}
	return nil
}

// heldRevocation is a peer's revocation of one of its mandates, held.
type heldRevocation struct {
	obj       map[string]any
	origin    string // the organisation it came from
	effective time.Time
}

// revokedByRecord returns the revocation record, held from the
// organisation issuer, that revoked its mandate id by now, if any: a
// revocation is final (commercial mandate §9), so a held one is reason
// enough to deny whatever a status endpoint says, and the absence of one
// says nothing (ownStatus).
func (o *Org) revokedByRecord(ctx context.Context, issuer, id string) (map[string]any, bool, error) {
	recs, err := o.keyRecords(ctx)
	if err != nil {
		return nil, false, err
	}
	r, held := recs.mandateRevoked[id]
	if !held || r.origin != issuer || o.Clock().Before(r.effective) {
		return nil, false, nil
	}
	return r.obj, true, nil
}

// statusNow is a key's status now: its version chain's (verify.KeyStatusNow),
// or its holder's when a revocation record took the holder out of service.
func (o *Org) statusNow(recs heldKeyRecords, keyID, holder string) string {
	now := o.Clock()
	st, _, _ := verify.KeyStatusNow(recs.versionsOf(keyID), keyID, now)
	if st != envelope.KeyActive {
		return st
	}
	if h := holderRevoked(recs.revocations, holder, now); h != "" {
		return h
	}
	return st
}

// holderRevoked is the status a revocation record in effect gives the
// agent holder ("" when none does): the latest one effective by now.
func holderRevoked(revs []map[string]any, holder string, now time.Time) string {
	status, at := "", time.Time{}
	for _, r := range revs {
		p, _ := r["payload"].(map[string]any)
		if p["subject_type"] != "agent" || p["subject_id"] != holder || holder == "" {
			continue
		}
		eff, err := envelope.ParseTimestamp(fmt.Sprint(p["effective_at"]))
		if err != nil || now.Before(eff) || eff.Before(at) {
			continue
		}
		status, at = fmt.Sprint(p["status"]), eff
	}
	if status == envelope.KeyActive {
		return ""
	}
	return status
}

// KeyStanding is a key's status as the live checks judge a new signature
// by it (canonical model §4 rules 6–7): at the signature's signed_at, by
// the version of its key record chain that governed then, and now, by the
// latest version (and the holder's revocation record, if any).
type KeyStanding struct {
	AtSigning       verify.Result
	AtSigningDetail string
	Now             string
	NowDetail       string
}

// KeyStanding judges keyID at signedAt and now, with the rules the
// verifier applies (verify.KeyStatusAt, verify.KeyStatusNow) over the key
// records this instance holds.
func (o *Org) KeyStanding(ctx context.Context, keyID, signedAt string) (KeyStanding, error) {
	recs, err := o.keyRecords(ctx)
	if err != nil {
		return KeyStanding{}, err
	}
	vs := recs.versionsOf(keyID)
	var ks KeyStanding
	ks.AtSigning, ks.AtSigningDetail = verify.KeyStatusAt(vs, keyID, signedAt)
	var res verify.Result
	ks.Now, res, ks.NowDetail = verify.KeyStatusNow(vs, keyID, o.Clock())
	if res != verify.Verified {
		ks.Now = verify.KeyUnresolved
	}
	if root, ok := recs.byID[keyID]; ok && ks.Now == envelope.KeyActive {
		if h := holderRevoked(recs.revocations, root.holder, o.Clock()); h != "" {
			ks.Now, ks.NowDetail = h, "its holder "+root.holder+" is "+h+" by a revocation record"
		}
	}
	return ks, nil
}

// PublicKey resolves a key id to its public key (for signature checks).
func (o *Org) PublicKey(ctx context.Context, keyID string) (crypto.PublicKey, error) {
	k, err := o.ResolveKey(ctx, keyID)
	if err != nil {
		return nil, err
	}
	return k.Public, nil
}

// ResolveMandate implements authority.MandateResolver over the record.
func (o *Org) ResolveMandate(ctx context.Context, mandateID string) (map[string]any, error) {
	m, err := o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return nil, err
	}
	return canonical.DecodeObject(m.Body)
}

// AgentMandate returns a mandate this organisation's principal issued to
// agentID, one of this instance's agents: the only mandates that agent can
// act under. Any other id, and an empty agentID, is refused with
// A202-POLICY-DENIED: the caller names the agent, so the check cannot be
// skipped by forgetting to.
func (o *Org) AgentMandate(ctx context.Context, agentID, id string) (map[string]any, error) {
	rec, err := o.AgentMandateRecord(ctx, agentID, id)
	if err != nil {
		return nil, err
	}
	return canonical.DecodeObject(rec.Body)
}

// AgentMandateRecord is AgentMandate's stored row, for a caller that
// decodes (and keeps) its bytes itself.
func (o *Org) AgentMandateRecord(ctx context.Context, agentID, id string) (store.MandateRecord, error) {
	if agentID == "" {
		return store.MandateRecord{}, reason.Refusef(reason.PolicyDenied, "mandate %s: no agent named to act under it", id)
	}
	rec, err := o.OwnMandateRecord(ctx, id)
	if err != nil {
		return store.MandateRecord{}, err
	}
	if rec.SubjectAgentID != agentID {
		return store.MandateRecord{}, reason.Refusef(reason.PolicyDenied, "mandate %s is issued to another agent, not to %s; call whoami for the mandates you hold", id, agentID)
	}
	return rec, nil
}

// OwnMandateRecord returns the stored row of a mandate this organisation
// issued to one of this instance's agents, whichever: what the instance
// acts under for itself (in answer to its counterparty, at a deadline),
// never what an agent's call reaches (AgentMandateRecord).
func (o *Org) OwnMandateRecord(ctx context.Context, id string) (store.MandateRecord, error) {
	rec, err := o.Store.GetMandate(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.MandateRecord{}, err
	}
	if err != nil || rec.Origin != "local" || !o.Config().HasAgent(rec.SubjectAgentID) {
		return store.MandateRecord{}, reason.Refusef(reason.PolicyDenied, "mandate %s is not a mandate this instance issued to its agents; call whoami for the mandates you hold", id)
	}
	return rec, nil
}

// StatusStore adapts the record to status.Store: the status of the
// mandates this organisation issued, each with its latest revocation
// record.
func (o *Org) StatusStore() status.Store { return statusStore{o} }

type statusStore struct{ o *Org }

func (s statusStore) Status(ctx context.Context, mandateID string) (status.Entry, error) {
	m, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil || m.Origin != "local" {
		return status.Entry{}, fmt.Errorf("%w: %s", status.ErrUnknownMandate, mandateID)
	}
	e := status.Entry{Status: m.Status}
	if until, err := mandateValidUntil(m.Body); err == nil && !s.o.now().Before(until) && m.Status == store.StatusActive {
		e.Status = status.Expired
	}
	if rec, err := s.o.Store.MandateRevocation(ctx, mandateID); err == nil {
		obj, err := canonical.DecodeObject(rec)
		if err != nil {
			return status.Entry{}, err
		}
		e.Record = obj
	} else if !errors.Is(err, store.ErrNotFound) {
		return status.Entry{}, err
	}
	return e, nil
}

// TLSCertificate is the instance's certificate, used as server and client
// certificate towards peers.
func (o *Org) TLSCertificate() (tls.Certificate, error) { return o.In.TLSCertificate() }
