package signature

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"sync"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
)

// The common case of VerifySignatures, kept apart from the full check.
//
// A record's signatures are almost all valid, and the full check of one
// (checkEntry, verifyRaw) builds what it would say if the signature were
// not: a name for the entry, the signing input in a fresh slice, the
// protected members through a map. quickEntry settles only success, with
// none of that: it accepts an entry exactly when the full check would
// return nil for it, and leaves every other entry to the full check, which
// then says why, in the same words as ever. The cost of that split is
// paid only by a signature that fails: its curve arithmetic runs twice.

// inputBufs holds buffers for signing inputs: one object's hash input,
// ".", and the protected members.
var inputBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// signatureLen is the length of the unpadded base64url of 64 bytes, the
// only value length either suite accepts.
const signatureLen = 86

// quickEntry reports whether entry verifies over content (obj's hash
// input) under the key resolve finds for it, for an object of objectType,
// remembering an accepted ES256 signature in memo (which may be nil).
// false means "not settled here", never "invalid".
func quickEntry(content []byte, objectType string, entry map[string]any, resolve KeyResolver, memo *Memo) bool {
	if len(entry) != len(entryMembers) {
		return false
	}
	alg, ok1 := entry["algorithm"].(string)
	keyID, ok2 := entry["key_id"].(string)
	purpose, ok3 := entry["purpose"].(string)
	signedAt, ok4 := entry["signed_at"].(string)
	value, ok5 := entry["signature"].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || value == Placeholder || len(value) != signatureLen {
		return false // five members, each a string, is the whole closed shape
	}
	if len(purposes[objectType]) > 0 && !PurposeAllowed(objectType, purpose) {
		return false // AllowedPurposes(objectType) != nil, without its copy
	}
	pub, err := resolve.Lookup(keyID)
	if err != nil {
		return false
	}
	if keyAlg, err := keys.Algorithm(pub); err != nil || keyAlg != alg {
		return false
	}
	for i := 0; i < len(value); i++ { // keys.DecodeBase64URL's alphabet
		c := value[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	var raw [64]byte
	if n, err := base64.RawURLEncoding.Strict().Decode(raw[:], []byte(value)); err != nil || n != len(raw) {
		return false
	}

	bp := inputBufs.Get().(*[]byte)
	defer inputBufs.Put(bp)
	in, ok := signingInput((*bp)[:0], content, alg, keyID, purpose, signedAt)
	*bp = in[:0]
	if !ok {
		return false
	}
	switch alg {
	case ES256:
		digest := sha256.Sum256(in)
		return verifyES256(pub.(*ecdsa.PublicKey), &digest, &raw, memo)
	case EdDSA:
		return ed25519.Verify(pub.(ed25519.PublicKey), in, raw[:])
	}
	return false
}

// signingInput appends content ‖ "." ‖ RFC 8785 of {algorithm, key_id,
// purpose, signed_at} to dst: the bytes protected and join build, member
// names in their canonical (sorted) order. false when a value is not
// valid UTF-8 and so has no canonical form.
func signingInput(dst, content []byte, alg, keyID, purpose, signedAt string) ([]byte, bool) {
	dst = append(dst, content...)
	dst = append(dst, `.{"algorithm":`...)
	var err error
	for _, m := range []struct{ name, value string }{
		{"", alg}, {`,"key_id":`, keyID}, {`,"purpose":`, purpose}, {`,"signed_at":`, signedAt},
	} {
		dst = append(dst, m.name...)
		if dst, err = canonical.AppendString(dst, m.value); err != nil {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// derSignature appends the ASN.1 DER of the ECDSA signature (r, s) whose
// raw form is r‖s, 32 bytes each, big-endian: SEQUENCE { INTEGER r,
// INTEGER s }, each integer minimal (leading zero bytes dropped, one zero
// byte added before a high bit), exactly as ecdsa.Verify encodes them.
// false when r or s is zero, which ecdsa.Verify refuses.
func derSignature(dst []byte, raw *[64]byte) ([]byte, bool) {
	r, s := trimZeros(raw[:32]), trimZeros(raw[32:])
	if len(r) == 0 || len(s) == 0 {
		return dst, false
	}
	n := intLen(r) + intLen(s) // at most 2 × 35 bytes: the short length form
	dst = append(dst, 0x30, byte(n))
	return appendInt(appendInt(dst, r), s), true
}

func trimZeros(b []byte) []byte {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// intLen is the length of the DER INTEGER of the positive value b.
func intLen(b []byte) int {
	if b[0]&0x80 != 0 {
		return 3 + len(b)
	}
	return 2 + len(b)
}

func appendInt(dst, b []byte) []byte {
	if b[0]&0x80 != 0 {
		return append(append(dst, 0x02, byte(len(b)+1), 0), b...)
	}
	return append(append(dst, 0x02, byte(len(b))), b...)
}
