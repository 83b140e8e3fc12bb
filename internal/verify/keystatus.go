package verify

import (
	"crypto"
	"fmt"
	"sort"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/protocol"
)

// Key status (canonical model §4 rules 6–7). A key's status is what its
// key_record version chain says: the version whose validity interval
// covered the signed time governs whether a signature was made with a good
// key, and the latest version states the key's status now. A revocation
// after signing does not void the signature; the report states both facts.
//
// A key_record version is relied on only when its own bytes hash to its
// content_hash and at least one of its signatures verifies: a status
// statement nobody can be shown to have made is not a status.

// KeyVersion is one key_record version of a key, as the status rules
// read it. The verifier reads it from a bundle's objects; a running
// instance (the countersigner's live checks) from the key records it
// holds, which it trusted when it stored them. Both judge with the same
// functions, KeyStatusAt and KeyStatusNow.
type KeyVersion struct {
	ID         string // the record's id
	Subject    string // how reports name the record
	Version    int64
	Status     string
	Controller string
	From       time.Time
	Until      time.Time // zero: no declared end
	Created    time.Time
	Readable   bool   // from (and until, if present) parse
	Trusted    bool   // its hash and at least one signature verify
	Why        string // why it is not trusted
	Public     crypto.PublicKey
	pos        int    // its place in the input, to order equal versions
	desc       string // describe's text, made once: every signature by the key quotes it
}

// ReadKeyVersion reads one decoded key_record as a version. trusted and
// why are the caller's judgement of its bytes and signatures.
func ReadKeyVersion(rec map[string]any, trusted bool, why string) KeyVersion {
	payload, _ := objAt(rec, "payload")
	v := KeyVersion{ID: str(rec, "id"), Subject: str(rec, "id"), Trusted: trusted, Why: why}
	v.Version, _ = intAt(rec, "version")
	v.Status = str(payload, "status")
	v.Controller = str(payload, "controller_organization_id")
	v.Created, _ = timeAt(rec, "created_at")
	var ok bool
	v.From, ok = timeAt(payload, "valid_from")
	v.Readable = ok
	if !isNull(payload, "valid_until") {
		v.Until, ok = timeAt(payload, "valid_until")
		v.Readable = v.Readable && ok
	}
	if pub, err := keys.ParseJWK(payload["public_key_jwk"]); err == nil {
		v.Public = pub
	}
	return v
}

// KeyChainOf returns the positions in records of keyID's key_record
// versions: the record whose id is keyID and every key_record linked to it
// through previous_version_id, in either direction (canonical model §4
// rule 6). A later version of a key is a record of its own id naming its
// predecessor; the key keeps the id of its first record, the id its
// signatures name.
func KeyChainOf(records []map[string]any, keyID string) []int {
	byID := map[string]int{}
	succ := map[string][]int{}
	for i, o := range records {
		if objectType(o) != protocol.KeyRecord {
			continue
		}
		if _, dup := byID[str(o, "id")]; !dup {
			byID[str(o, "id")] = i
		}
		if p, ok := strAt(o, "previous_version_id"); ok {
			succ[p] = append(succ[p], i)
		}
	}
	root, held := byID[keyID]
	if !held {
		return nil
	}
	in := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		next := append([]int(nil), succ[str(records[i], "id")]...)
		if p, ok := strAt(records[i], "previous_version_id"); ok {
			if pi, held := byID[p]; held {
				next = append(next, pi)
			}
		}
		for _, n := range next {
			if !in[n] {
				in[n] = true
				queue = append(queue, n)
			}
		}
	}
	out := make([]int, 0, len(in))
	for i := range in {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// sortVersions orders a chain by version, then by place.
func sortVersions(vs []KeyVersion) {
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].Version != vs[j].Version {
			return vs[i].Version < vs[j].Version
		}
		return vs[i].pos < vs[j].pos
	})
}

// KeyVersions reads keyID's version chain from held records that the
// caller has already trusted (a running instance's store), ascending.
func KeyVersions(records []map[string]any, keyID string) []KeyVersion {
	var out []KeyVersion
	for _, i := range KeyChainOf(records, keyID) {
		v := ReadKeyVersion(records[i], true, "")
		v.pos = i
		v.desc = v.describe()
		out = append(out, v)
	}
	sortVersions(out)
	return out
}

// keyChain is the version chain of one key_id.
type keyChain struct {
	keyID    string
	versions []KeyVersion // by version, ascending
}

// chain returns the key_record versions of keyID in the bundle.
func (r *run) chain(keyID string) *keyChain {
	if c, ok := r.keyChains[keyID]; ok {
		return c
	}
	c := &keyChain{keyID: keyID}
	if !r.forked {
		r.keyChains[keyID] = c
	}
	root, held := r.byID[keyID]
	if !held || root.typ != protocol.KeyRecord {
		return c
	}
	if r.keyRecs == nil {
		for _, o := range r.objs {
			if o.typ == protocol.KeyRecord {
				r.keyRecs = append(r.keyRecs, o)
			}
		}
		r.keyVals = make([]map[string]any, len(r.keyRecs))
		for i, o := range r.keyRecs {
			r.keyVals[i] = o.val
		}
	}
	for _, i := range KeyChainOf(r.keyVals, keyID) {
		c.versions = append(c.versions, r.keyVersionOf(r.keyRecs[i]))
	}
	sortVersions(c.versions)
	return c
}

func (r *run) keyVersionOf(o *object) KeyVersion {
	version, _ := intAt(o.val, "version")
	trusted, why := false, ""
	switch {
	case !o.hashOK():
		why = fmt.Sprintf("key_record %s v%d does not hash to its content_hash", o.subject, version)
	default:
		for _, s := range o.sigs {
			trusted = trusted || s.result == Verified
		}
		if !trusted {
			why = fmt.Sprintf("no signature of key_record %s v%d verifies", o.subject, version)
		}
	}
	v := ReadKeyVersion(o.val, trusted, why)
	v.Subject, v.pos = o.subject, o.pos
	v.desc = v.describe()
	return v
}

func (v KeyVersion) covers(t time.Time) bool {
	return v.Readable && !t.Before(v.From) && (v.Until.IsZero() || t.Before(v.Until))
}

func (v KeyVersion) describe() string {
	if v.desc != "" {
		return v.desc
	}
	until := "no end"
	if !v.Until.IsZero() {
		until = "until " + envelope.Timestamp(v.Until)
	}
	return fmt.Sprintf("key_record %s v%d: %s, valid from %s, %s", v.Subject, v.Version, v.Status, envelope.Timestamp(v.From), until)
}

// atSigning resolves the key's status at signedAt: the outcome and why.
func (r *run) atSigning(keyID, signedAt string) (Result, string) {
	c := r.chain(keyID)
	if len(c.versions) == 0 {
		r.missing(keyID)
	}
	return KeyStatusAt(c.versions, keyID, signedAt)
}

// KeyStatusAt resolves a key's status at signedAt from its version chain
// (canonical model §4 rule 6): the latest version already issued when the
// signature was made whose validity interval covers that instant governs;
// failing that, the earliest version covering it. Verified means the key
// was active then; Failed, that it was not (suspended, revoked, or outside
// every interval); NotCheckable, that no trusted version says.
func KeyStatusAt(versions []KeyVersion, keyID, signedAt string) (Result, string) {
	if len(versions) == 0 {
		return NotCheckable, fmt.Sprintf("no key_record for %s in the bundle, so its status at signing is unknown", keyID)
	}
	t, err := envelope.ParseTimestamp(signedAt)
	if err != nil {
		return Failed, fmt.Sprintf("signed_at %q is not a timestamp", signedAt)
	}
	var governing *KeyVersion
	for i := range versions {
		v := &versions[i]
		if v.covers(t) && !v.Created.IsZero() && !v.Created.After(t) {
			governing = v // the latest version already issued when the signature was made
		}
	}
	if governing == nil {
		for i := range versions {
			if versions[i].covers(t) {
				governing = &versions[i] // the earliest statement about that instant
				break
			}
		}
	}
	if governing == nil {
		readable := false
		for _, v := range versions {
			readable = readable || v.Readable
		}
		if !readable {
			return NotCheckable, fmt.Sprintf("no key_record version of %s states a readable validity interval", keyID)
		}
		return Failed, fmt.Sprintf("signed at %s, outside every validity interval of %s", signedAt, keyID)
	}
	if !governing.Trusted {
		return NotCheckable, governing.Why + ", so the status it states at signing is not relied on"
	}
	if governing.Status != envelope.KeyActive {
		return Failed, fmt.Sprintf("the key was %s when it signed at %s (%s)", governing.Status, signedAt, governing.describe())
	}
	// The instant is the signature's own signed_at; leaving it out of the
	// detail lets every signature of one key version share one string.
	return Verified, "active at signing (" + governing.describe() + ")"
}

// current resolves the key's status at verification time: the latest
// version. The outcome is about resolving the status, which is stated in
// the detail; a key revoked or expired now has not thereby voided the
// signatures it made while active (canonical model §4 rule 7).
func (r *run) current(keyID string) (Result, string) {
	c := r.chain(keyID)
	if len(c.versions) == 0 {
		r.missing(keyID)
	}
	_, res, detail := KeyStatusNow(c.versions, keyID, r.now)
	return res, detail
}

// Key statuses now, beyond a key_record's own (KeyStatusNow).
const (
	KeyExpired    = "expired"
	KeyNotYet     = "not yet valid"
	KeyUnresolved = "unresolved"
)

// KeyStatusNow resolves a key's status at now from its version chain: the
// latest version states it, and its validity interval bounds it (expired,
// not yet valid). res is about resolving it: Verified when a trusted,
// readable latest version states it, NotCheckable (status unresolved)
// otherwise. A key revoked or expired now has not thereby voided the
// signatures it made while active (canonical model §4 rule 7); what a
// running instance refuses is a new act under it.
func KeyStatusNow(versions []KeyVersion, keyID string, now time.Time) (status string, res Result, detail string) {
	if len(versions) == 0 {
		return KeyUnresolved, NotCheckable, fmt.Sprintf("no key_record for %s in the bundle, so its current status is unknown", keyID)
	}
	latest := versions[len(versions)-1]
	if !latest.Trusted {
		return KeyUnresolved, NotCheckable, latest.Why + ", so the current status it states is not relied on"
	}
	if !latest.Readable {
		return KeyUnresolved, NotCheckable, fmt.Sprintf("the latest key_record version of %s states no readable validity interval", keyID)
	}
	at := envelope.Timestamp(now)
	status = latest.Status
	switch {
	case status != envelope.KeyActive:
	case now.Before(latest.From):
		status = KeyNotYet
	case !latest.Until.IsZero() && !now.Before(latest.Until):
		status = KeyExpired
	}
	if status == envelope.KeyActive {
		return status, Verified, fmt.Sprintf("active at %s (%s)", at, latest.describe())
	}
	return status, Verified, fmt.Sprintf("%s at %s (%s); this does not void signatures made while the key was active, which are judged by their status at signing",
		status, at, latest.describe())
}

// recordMatches checks that the key_records of keyID publish the key the
// bundle declares under that id: a record publishing another key would
// make the status it states a statement about some other key.
func (r *run) recordMatches(keyID string) (Result, string) {
	c := r.chain(keyID)
	if r.in.Keys == nil {
		return NotCheckable, "the bundle declares no keys to compare the key_record with"
	}
	pub, err := r.in.Keys.Lookup(keyID)
	if err != nil {
		return NotCheckable, keyID + " is not among the declared keys"
	}
	for _, v := range c.versions {
		if v.Public == nil {
			return Failed, fmt.Sprintf("key_record %s v%d carries no readable public key", v.Subject, v.Version)
		}
		if !samePublic(v.Public, pub) {
			return Failed, fmt.Sprintf("key_record %s v%d publishes a different key from the one declared as %s", v.Subject, v.Version, keyID)
		}
	}
	return Verified, fmt.Sprintf("every key_record version of %s publishes the declared key", keyID)
}

func samePublic(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// controllerOf returns the organisation a key belongs to, as far as the
// bundle establishes it: a trusted key_record's controller, else the
// represented organisation of a mandate whose verified proof names the key
// as its subject's. "" means not established.
func (r *run) controllerOf(keyID string) string {
	for _, v := range r.chain(keyID).versions {
		if v.Trusted && v.Controller != "" {
			return v.Controller
		}
	}
	for _, m := range r.mandates {
		if m.proof.result != Verified {
			continue
		}
		if subj, ok := objAt(m.val, "subject"); ok && str(subj, "key_id") == keyID {
			if org := str(m.val, "represented_organization_id"); org != "" {
				return org
			}
		}
	}
	return ""
}
