package verify

import (
	"crypto"
	"fmt"
	"sort"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
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

// keyVersion is one key_record version of a key.
type keyVersion struct {
	obj        *object
	version    int64
	status     string
	controller string
	from       time.Time
	until      time.Time // zero: no declared end
	created    time.Time
	readable   bool   // from (and until, if present) parse
	trusted    bool   // hash and at least one signature verify
	why        string // why it is not trusted
	pub        crypto.PublicKey
	desc       string // describe's text, made once: every signature by the key quotes it
}

// keyChain is the version chain of one key_id.
type keyChain struct {
	keyID    string
	versions []*keyVersion // by version, ascending
}

// chain returns the key_record versions of keyID: the record whose id is
// keyID and every key_record linked to it through previous_version_id, in
// either direction.
func (r *run) chain(keyID string) *keyChain {
	if c, ok := r.keyChains[keyID]; ok {
		return c
	}
	c := &keyChain{keyID: keyID}
	if !r.forked {
		r.keyChains[keyID] = c
	}
	root, held := r.byID[keyID]
	if !held || root.typ != "key_record" {
		return c
	}
	succ := map[string][]*object{}
	for _, o := range r.objs {
		if o.typ == "key_record" {
			if p, ok := strAt(o.val, "previous_version_id"); ok {
				succ[p] = append(succ[p], o)
			}
		}
	}
	in := map[*object]bool{root: true}
	queue := []*object{root}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		next := append([]*object(nil), succ[o.id]...)
		if p, ok := strAt(o.val, "previous_version_id"); ok {
			if po, held := r.byID[p]; held && po.typ == "key_record" {
				next = append(next, po)
			}
		}
		for _, n := range next {
			if !in[n] {
				in[n] = true
				queue = append(queue, n)
			}
		}
	}
	for o := range in {
		c.versions = append(c.versions, r.keyVersionOf(o))
	}
	sort.Slice(c.versions, func(i, j int) bool {
		if c.versions[i].version != c.versions[j].version {
			return c.versions[i].version < c.versions[j].version
		}
		return c.versions[i].obj.pos < c.versions[j].obj.pos
	})
	return c
}

func (r *run) keyVersionOf(o *object) *keyVersion {
	v := &keyVersion{obj: o}
	v.version, _ = intAt(o.val, "version")
	v.status = str(o.payload, "status")
	v.controller = str(o.payload, "controller_organization_id")
	v.created, _ = timeAt(o.val, "created_at")
	var ok bool
	v.from, ok = timeAt(o.payload, "valid_from")
	v.readable = ok
	if !isNull(o.payload, "valid_until") {
		v.until, ok = timeAt(o.payload, "valid_until")
		v.readable = v.readable && ok
	}
	if pub, err := keys.ParseJWK(o.payload["public_key_jwk"]); err == nil {
		v.pub = pub
	}
	switch {
	case !o.hashOK():
		v.why = fmt.Sprintf("key_record %s v%d does not hash to its content_hash", o.subject, v.version)
	default:
		signed := false
		for _, s := range o.sigs {
			signed = signed || s.result == Verified
		}
		if signed {
			v.trusted = true
		} else {
			v.why = fmt.Sprintf("no signature of key_record %s v%d verifies", o.subject, v.version)
		}
	}
	v.desc = v.describe()
	return v
}

func (v *keyVersion) covers(t time.Time) bool {
	return v.readable && !t.Before(v.from) && (v.until.IsZero() || t.Before(v.until))
}

func (v *keyVersion) describe() string {
	if v.desc != "" {
		return v.desc
	}
	until := "no end"
	if !v.until.IsZero() {
		until = "until " + envelope.Timestamp(v.until)
	}
	return fmt.Sprintf("key_record %s v%d: %s, valid from %s, %s", v.obj.subject, v.version, v.status, envelope.Timestamp(v.from), until)
}

// atSigning resolves the key's status at signedAt: the outcome and why.
func (r *run) atSigning(keyID, signedAt string) (Result, string) {
	c := r.chain(keyID)
	if len(c.versions) == 0 {
		r.missing(keyID)
		return NotCheckable, fmt.Sprintf("no key_record for %s in the bundle, so its status at signing is unknown", keyID)
	}
	t, err := envelope.ParseTimestamp(signedAt)
	if err != nil {
		return Failed, fmt.Sprintf("signed_at %q is not a timestamp", signedAt)
	}
	var governing *keyVersion
	for _, v := range c.versions {
		if v.covers(t) && !v.created.IsZero() && !v.created.After(t) {
			governing = v // the latest version already issued when the signature was made
		}
	}
	if governing == nil {
		for _, v := range c.versions {
			if v.covers(t) {
				governing = v // the earliest statement about that instant
				break
			}
		}
	}
	if governing == nil {
		readable := false
		for _, v := range c.versions {
			readable = readable || v.readable
		}
		if !readable {
			return NotCheckable, fmt.Sprintf("no key_record version of %s states a readable validity interval", keyID)
		}
		return Failed, fmt.Sprintf("signed at %s, outside every validity interval of %s", signedAt, keyID)
	}
	if !governing.trusted {
		return NotCheckable, governing.why + ", so the status it states at signing is not relied on"
	}
	if governing.status != envelope.KeyActive {
		return Failed, fmt.Sprintf("the key was %s when it signed at %s (%s)", governing.status, signedAt, governing.describe())
	}
	return Verified, "active at " + signedAt + " (" + governing.describe() + ")"
}

// current resolves the key's status at verification time: the latest
// version. The outcome is about resolving the status, which is stated in
// the detail; a key revoked or expired now has not thereby voided the
// signatures it made while active (canonical model §4 rule 7).
func (r *run) current(keyID string) (Result, string) {
	c := r.chain(keyID)
	if len(c.versions) == 0 {
		r.missing(keyID)
		return NotCheckable, fmt.Sprintf("no key_record for %s in the bundle, so its current status is unknown", keyID)
	}
	latest := c.versions[len(c.versions)-1]
	if !latest.trusted {
		return NotCheckable, latest.why + ", so the current status it states is not relied on"
	}
	if !latest.readable {
		return NotCheckable, fmt.Sprintf("the latest key_record version of %s states no readable validity interval", keyID)
	}
	now := envelope.Timestamp(r.now)
	status := latest.status
	switch {
	case status != envelope.KeyActive:
	case r.now.Before(latest.from):
		status = "not yet valid"
	case !latest.until.IsZero() && !r.now.Before(latest.until):
		status = "expired"
	}
	if status == envelope.KeyActive {
		return Verified, fmt.Sprintf("active at %s (%s)", now, latest.describe())
	}
	return Verified, fmt.Sprintf("%s at %s (%s); this does not void signatures made while the key was active, which are judged by their status at signing",
		status, now, latest.describe())
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
		if v.pub == nil {
			return Failed, fmt.Sprintf("key_record %s v%d carries no readable public key", v.obj.subject, v.version)
		}
		if !samePublic(v.pub, pub) {
			return Failed, fmt.Sprintf("key_record %s v%d publishes a different key from the one declared as %s", v.obj.subject, v.version, keyID)
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
		if v.trusted && v.controller != "" {
			return v.controller
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
