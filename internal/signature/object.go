package signature

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
)

// Placeholder is the literal value the published fixtures carry in place
// of a cryptographic signature. It is reported as not checkable, never as
// verified or failed: a fixture showing a shape says nothing about keys.
const Placeholder = "synthetic-placeholder-signature-value"

// ErrNotCheckable is wrapped by errors for signatures that cannot be
// checked: the Placeholder value, or a key_id the resolver does not know.
// It is not a *reason.Refusal, so a caller that only asks "did it verify?"
// (err == nil) treats it as a failure, which is the safe reading.
var ErrNotCheckable = errors.New("signature: not checkable")

// entryMembers are the members of a signature entry (kernel schema
// $defs/signature, a closed shape).
var entryMembers = []string{"key_id", "algorithm", "signature", "signed_at", "purpose"}

// protected returns RFC 8785 of {algorithm, key_id, purpose, signed_at},
// written directly: the names are in the order RFC 8785 sorts them, and
// each value is a string in its canonical form (canonical.AppendString,
// which refuses one that is not UTF-8). It is what canonical.Marshal
// writes for the same four members (TestProtectedIsCanonical,
// FuzzProtected), without building a map and sorting its keys for every
// signature made or checked.
func protected(algorithm, keyID, purpose, signedAt string) ([]byte, error) {
	b := make([]byte, 0, 56+len(algorithm)+len(keyID)+len(purpose)+len(signedAt))
	var err error
	for i, m := range [...]struct{ name, value string }{
		{`{"algorithm":`, algorithm},
		{`,"key_id":`, keyID},
		{`,"purpose":`, purpose},
		{`,"signed_at":`, signedAt},
	} {
		b = append(b, m.name...)
		if b, err = canonical.AppendString(b, m.value); err != nil {
			return nil, fmt.Errorf("signature header member %d: %w", i, err)
		}
	}
	return append(b, '}'), nil
}

// join returns content ‖ "." ‖ header in one allocation.
func join(content, header []byte) []byte {
	out := make([]byte, 0, len(content)+1+len(header))
	out = append(out, content...)
	out = append(out, '.')
	return append(out, header...)
}

// stringMembers reads the named string members of m, refusing any that is
// absent or not a string.
func stringMembers(m map[string]any, what string, names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, n := range names {
		s, ok := m[n].(string)
		if !ok {
			return nil, reason.Refuse(fmt.Sprintf("%s member %q is missing or not a string", what, n), reason.EvidenceSignatureInvalid)
		}
		out[i] = s
	}
	return out, nil
}

// SigningInput returns the bytes the signature entry covers over obj:
// canonical.HashInput(obj), one ".", and RFC 8785 of the entry's
// {algorithm, key_id, purpose, signed_at}. The entry need not be in obj's
// signatures array, and its signature member is not read.
func SigningInput(obj map[string]any, entry map[string]any) ([]byte, error) {
	content, err := canonical.HashInput(obj)
	if err != nil {
		return nil, fmt.Errorf("signature: hash input of %v: %w", obj["id"], err)
	}
	return entryInput(content, entry)
}

func entryInput(content []byte, entry map[string]any) ([]byte, error) {
	v, err := stringMembers(entry, "signature entry", "algorithm", "key_id", "purpose", "signed_at")
	if err != nil {
		return nil, err
	}
	header, err := protected(v[0], v[1], v[2], v[3])
	if err != nil {
		return nil, fmt.Errorf("signature: protected members: %w", err)
	}
	return join(content, header), nil
}

// Sign signs obj with s for purpose at signedAt and appends the entry
// {key_id, algorithm, signature, signed_at, purpose} to obj["signatures"],
// creating the array if absent. Earlier entries are untouched and stay
// valid: the signatures array is outside every signing input.
//
// It refuses (with A202-EVIDENCE-SIGNATURE-INVALID, the code a verifier
// would give the result) a purpose the table does not allow for the
// object's type, and refuses an object whose content_hash, when present,
// is not its content's hash: a signature beside a stale hash would be a
// signed object that fails its own hash check.
func Sign(obj map[string]any, s Signer, purpose string, signedAt time.Time) error {
	return SignOver(obj, nil, s, purpose, signedAt)
}

// Issue seals obj (envelope.Seal) and signs it for object_issuance at
// signedAt: how an object one party issues alone, an approval or a
// revocation record, is made ready to hand out.
func Issue(obj map[string]any, s Signer, signedAt time.Time) error {
	if err := envelope.Seal(obj); err != nil {
		return err
	}
	return Sign(obj, s, "object_issuance", signedAt)
}

// SignOver is Sign for a caller that holds obj's hash input, content
// (canonical.HashInput(obj), as envelope.SealInput returns it): the same
// checks and the same signature, without encoding obj again. content must
// be exactly those bytes; nil means Sign computes them.
func SignOver(obj map[string]any, content []byte, s Signer, purpose string, signedAt time.Time) error {
	objectType, _ := obj["object_type"].(string)
	if !PurposeAllowed(objectType, purpose) {
		return purposeRefused(objectType, purpose)
	}
	list, ok := signatureList(obj)
	if !ok {
		return fmt.Errorf("signature: signatures of %v is a %T, want an array", obj["id"], obj["signatures"])
	}
	if content == nil {
		var err error
		if content, err = canonical.HashInput(obj); err != nil {
			return fmt.Errorf("signature: hash input of %v: %w", obj["id"], err)
		}
	}
	if h, present := obj["content_hash"]; present && h != canonical.SHA256Hex(content) {
		return fmt.Errorf("signature: %v has a content_hash that is not its content's hash; seal it before signing", obj["id"])
	}
	entry, err := EntryOver(objectType, content, s, purpose, signedAt)
	if err != nil {
		return err
	}
	obj["signatures"] = append(list, entry)
	return nil
}

// EntryOver makes the signature entry {key_id, algorithm, signature,
// signed_at, purpose} of an object whose hash input is content
// (canonical.HashInput of the object, as envelope.SealInput returns it),
// without the object: for a caller that writes the object's bytes
// itself (package history, which rewrites a record's canonical bytes in
// place). It refuses a purpose the table does not allow for objectType.
func EntryOver(objectType string, content []byte, s Signer, purpose string, signedAt time.Time) (map[string]any, error) {
	if !PurposeAllowed(objectType, purpose) {
		return nil, purposeRefused(objectType, purpose)
	}
	at, err := timestamp(signedAt)
	if err != nil {
		return nil, err
	}
	return makeEntry(content, s, purpose, at)
}

// purposeRefused is the refusal of purpose signing an objectType.
func purposeRefused(objectType, purpose string) error {
	return reason.Refuse(fmt.Sprintf("purpose %q may not sign a %q (allowed: %s)", purpose, objectType, strings.Join(AllowedPurposes(objectType), ", ")), reason.EvidenceSignatureInvalid)
}

// timestamp writes signed_at in the one form party uses; a zero time is
// refused rather than written as year 1.
func timestamp(t time.Time) (string, error) {
	if t.IsZero() {
		return "", errors.New("signature: signing time is not set")
	}
	return envelope.Timestamp(t), nil
}

// makeEntry signs content ‖ "." ‖ protected members with s.
func makeEntry(content []byte, s Signer, purpose, signedAt string) (map[string]any, error) {
	keyID, alg := s.KeyID(), s.Algorithm()
	if !keys.ValidKeyID(keyID) {
		return nil, fmt.Errorf("signature: signer key_id %q is not a valid key_id", keyID)
	}
	if alg != ES256 && alg != EdDSA {
		return nil, fmt.Errorf("signature: signer algorithm %q is not ES256 or EdDSA", alg)
	}
	header, err := protected(alg, keyID, purpose, signedAt)
	if err != nil {
		return nil, fmt.Errorf("signature: protected members: %w", err)
	}
	raw, err := s.Sign(join(content, header))
	if err != nil {
		return nil, fmt.Errorf("signature: sign with %s: %w", keyID, err)
	}
	return map[string]any{
		"key_id":    keyID,
		"algorithm": alg,
		"signature": keys.EncodeBase64URL(raw),
		"signed_at": signedAt,
		"purpose":   purpose,
	}, nil
}

// signatureList is obj's signatures array, the one rule Sign and Entries
// read it by: a missing member is no signatures (nil, true), anything
// other than an array is not a list (ok false).
func signatureList(obj map[string]any) (list []any, ok bool) {
	switch v := obj["signatures"].(type) {
	case nil:
		return nil, true
	case []any:
		return v, true
	}
	return nil, false
}

// Entries returns obj's signature entries. A missing array is empty; an
// array that is not one, or an entry that is not an object, is refused.
func Entries(obj map[string]any) ([]map[string]any, error) {
	list, ok := signatureList(obj)
	if !ok {
		return nil, reason.Refuse(fmt.Sprintf("signatures of %v is not an array", obj["id"]), reason.EvidenceSignatureInvalid)
	}
	out := make([]map[string]any, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, reason.Refuse(fmt.Sprintf("signature %d of %v is not an object", i, obj["id"]), reason.EvidenceSignatureInvalid)
		}
		out[i] = m
	}
	return out, nil
}

// VerifyEntry verifies signature i of obj under pub. It checks, in order:
// the entry's shape (exactly the five members, all strings); the purpose
// against the table for obj's type (types with no table row are not
// restricted here); the Placeholder (ErrNotCheckable); that the
// algorithm matches the key (ES256 with a P-256 key, EdDSA with Ed25519);
// that the value is unpadded base64url of exactly 64 bytes (so a DER
// ES256 value is refused); and the signature over SigningInput. High-S
// ES256 values are accepted: JOSE does not forbid them and the reference
// emits them.
//
// A failure is a *reason.Refusal with A202-EVIDENCE-SIGNATURE-INVALID.
func VerifyEntry(obj map[string]any, i int, pub crypto.PublicKey) error {
	return VerifyEntryOver(obj, nil, i, pub)
}

// VerifyEntryOver is VerifyEntry for a caller that may already hold obj's
// hash input, content (canonical.HashInput(obj), as one has that checked
// the content hash): the same checks and the same errors, without
// encoding the object again. content must be exactly those bytes, or nil,
// and then VerifyEntryOver computes them; it is read, not kept. A valid
// entry is settled by quickEntry (the key's table once it has one, and
// nothing built for an error); any other takes the full check, which says
// why.
func VerifyEntryOver(obj map[string]any, content []byte, i int, pub crypto.PublicKey) error {
	return (*Memo)(nil).VerifyEntryOver(obj, content, i, pub)
}

// VerifyEntryOver is the package's VerifyEntryOver, with m's memory of
// accepted signatures (memo.go).
func (m *Memo) VerifyEntryOver(obj map[string]any, content []byte, i int, pub crypto.PublicKey) error {
	if content == nil {
		var err error
		if content, err = canonical.HashInput(obj); err != nil {
			return reason.Refuse(fmt.Sprintf("hash input of %v: %v", obj["id"], err), reason.EvidenceSignatureInvalid)
		}
	}
	list, err := Entries(obj)
	if err != nil {
		return err
	}
	if i < 0 || i >= len(list) {
		return reason.Refuse(fmt.Sprintf("%v has no signature %d", obj["id"], i), reason.EvidenceSignatureInvalid)
	}
	objectType, _ := obj["object_type"].(string)
	if quickEntry(content, objectType, list[i], anyKeyID{pub}, m) {
		return nil
	}
	return verifyEntry(content, objectType, list[i], pub, fmt.Sprintf("signature %d of %v", i, obj["id"]))
}

// anyKeyID resolves every key id to one key: VerifyEntry's caller chose
// the key, and the entry's key_id is not looked up.
type anyKeyID struct{ pub crypto.PublicKey }

func (k anyKeyID) Lookup(string) (crypto.PublicKey, error) { return k.pub, nil }

func verifyEntry(content []byte, objectType string, entry map[string]any, pub crypto.PublicKey, what string) error {
	c, err := checkEntry(content, objectType, entry, what)
	if err != nil {
		return err
	}
	return verifyRaw(c.input, c.alg, c.value, pub, c.what)
}

// checked is a signature entry whose shape and purpose passed, with the
// bytes it claims to sign.
type checked struct {
	input      []byte
	alg, value string
	what       string
}

// checkEntry does everything VerifyEntry does before the key is needed:
// shape, placeholder, purpose, and the signing input.
func checkEntry(content []byte, objectType string, entry map[string]any, what string) (checked, error) {
	for k := range entry {
		known := false
		for _, m := range entryMembers {
			known = known || k == m
		}
		if !known {
			return checked{}, reason.Refuse(fmt.Sprintf("%s has member %q outside a signature entry", what, k), reason.EvidenceSignatureInvalid)
		}
	}
	v, err := stringMembers(entry, what, "algorithm", "key_id", "purpose", "signed_at", "signature")
	if err != nil {
		return checked{}, err
	}
	alg, keyID, purpose, signedAt, value := v[0], v[1], v[2], v[3], v[4]
	what = fmt.Sprintf("%s (%q, %q)", what, keyID, purpose)
	// The purpose is checked before the placeholder: a signature issued
	// for the wrong act is wrong whatever its value (the runner checks
	// purposes without looking at values).
	if AllowedPurposes(objectType) != nil && !PurposeAllowed(objectType, purpose) {
		return checked{}, reason.Refuse(fmt.Sprintf("%s: purpose %q may not sign a %s", what, purpose, objectType), reason.EvidenceSignatureInvalid)
	}
	if value == Placeholder {
		return checked{}, fmt.Errorf("%s: %w: placeholder value", what, ErrNotCheckable)
	}
	header, err := protected(alg, keyID, purpose, signedAt)
	if err != nil {
		return checked{}, reason.Refuse(fmt.Sprintf("%s: protected members: %v", what, err), reason.EvidenceSignatureInvalid)
	}
	return checked{input: join(content, header), alg: alg, value: value, what: what}, nil
}

// verifyRaw checks an encoded signature value over input.
func verifyRaw(input []byte, alg, value string, pub crypto.PublicKey, what string) error {
	keyAlg, err := keys.Algorithm(pub)
	if err != nil {
		return reason.Refuse(fmt.Sprintf("%s: %v", what, err), reason.EvidenceSignatureInvalid)
	}
	if alg != ES256 && alg != EdDSA {
		return reason.Refuse(fmt.Sprintf("%s: algorithm %q is not ES256 or EdDSA", what, alg), reason.EvidenceSignatureInvalid)
	}
	if alg != keyAlg {
		return reason.Refuse(fmt.Sprintf("%s: algorithm %s does not match the %s key", what, alg, keyAlg), reason.EvidenceSignatureInvalid)
	}
	raw, err := keys.DecodeBase64URL(value)
	if err != nil {
		return reason.Refuse(fmt.Sprintf("%s: value: %v", what, err), reason.EvidenceSignatureInvalid)
	}
	if len(raw) != 64 {
		return reason.Refuse(fmt.Sprintf("%s: %s value is %d bytes, want 64 (raw r‖s, not DER)", what, alg, len(raw)), reason.EvidenceSignatureInvalid)
	}
	var ok bool
	switch alg {
	case ES256:
		digest := sha256.Sum256(input)
		r := new(big.Int).SetBytes(raw[:32])
		s := new(big.Int).SetBytes(raw[32:])
		ok = ecdsa.Verify(pub.(*ecdsa.PublicKey), digest[:], r, s)
	case EdDSA:
		ok = ed25519.Verify(pub.(ed25519.PublicKey), input, raw)
	}
	if !ok {
		return reason.Refuse(fmt.Sprintf("%s: signature does not verify", what), reason.EvidenceSignatureInvalid)
	}
	return nil
}

// KeyResolver finds the public key a key_id names. *keys.KeySet is one.
type KeyResolver interface {
	Lookup(keyID string) (crypto.PublicKey, error)
}

// VerifySignatures verifies every signature of obj against the keys
// resolve finds, and that obj carries at least MinSignatures of its type.
// The hash input is computed once for all entries.
//
// It returns nil when every signature verifies; a *reason.Refusal with
// A202-EVIDENCE-SIGNATURE-INVALID naming every failing signature when any
// fails or too few are present; otherwise, when some could not be checked
// (placeholder value, key_id resolve does not know), an error wrapping
// ErrNotCheckable. content_hash and key status are not checked here.
func VerifySignatures(obj map[string]any, resolve KeyResolver) error {
	return verifySignatures(obj, nil, false, resolve, nil)
}

// VerifySignaturesOver is VerifySignatures for a caller that already holds
// obj's hash input, content (canonical.HashInput(obj), as a verifier has
// once it has checked the content hash): the same checks and the same
// errors, without encoding the object again. content must be exactly
// those bytes; it is read, not kept. Signatures are looked up in, and
// those accepted added to, m's memory (memo.go); a nil m has none.
func (m *Memo) VerifySignaturesOver(obj map[string]any, content []byte, resolve KeyResolver) error {
	return verifySignatures(obj, content, true, resolve, m)
}

func verifySignatures(obj map[string]any, content []byte, haveContent bool, resolve KeyResolver, memo *Memo) error {
	list, err := Entries(obj)
	if err != nil {
		return err
	}
	objectType, _ := obj["object_type"].(string)
	var failed, unchecked []string
	if min := MinSignatures(objectType); len(list) < min {
		failed = append(failed, fmt.Sprintf("a %s needs %d signature(s), has %d", objectType, min, len(list)))
	}
	if !haveContent {
		if content, err = canonical.HashInput(obj); err != nil {
			return reason.Refuse(fmt.Sprintf("hash input of %v: %v", obj["id"], err), reason.EvidenceSignatureInvalid)
		}
	}
	for i, e := range list {
		if quickEntry(content, objectType, e, resolve, memo) {
			continue // valid: the full check below would find nothing to say
		}
		what := fmt.Sprintf("signature %d of %v", i, obj["id"])
		keyID, _ := e["key_id"].(string)
		c, err := checkEntry(content, objectType, e, what)
		if err != nil {
			if errors.Is(err, ErrNotCheckable) {
				unchecked = append(unchecked, err.Error())
			} else {
				failed = append(failed, refusalDetail(err))
			}
			continue
		}
		pub, err := resolve.Lookup(keyID)
		if err != nil {
			unchecked = append(unchecked, fmt.Sprintf("%s: %v", c.what, err))
			continue
		}
		if err := verifyRaw(c.input, c.alg, c.value, pub, c.what); err != nil {
			failed = append(failed, refusalDetail(err))
		}
	}
	switch {
	case len(failed) > 0:
		return reason.Refuse(strings.Join(failed, "; "), reason.EvidenceSignatureInvalid)
	case len(unchecked) > 0:
		return fmt.Errorf("%w: %s", ErrNotCheckable, strings.Join(unchecked, "; "))
	}
	return nil
}

// refusalDetail is the detail of a refusal, or the error text of anything
// else, for joining several failures into one refusal.
func refusalDetail(err error) string {
	var r *reason.Refusal
	if errors.As(err, &r) {
		return r.Detail
	}
	return err.Error()
}

// SelfSigned reports whether obj, a key_record publishing pub, carries an
// object_issuance signature by the key it publishes (a signature entry
// naming the record's own id) that verifies. A principal's key record is
// self-signed, an agent's is signed by a principal key: this is how every
// reader tells them apart.
func SelfSigned(obj map[string]any, pub crypto.PublicKey) bool {
	entries, err := Entries(obj)
	if err != nil {
		return false
	}
	for i, e := range entries {
		if e["key_id"] == obj["id"] && e["purpose"] == "object_issuance" && VerifyEntry(obj, i, pub) == nil {
			return true
		}
	}
	return false
}
