package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
)

// privateMembers are the JWK members that carry private key material in any
// key type RFC 7518 §6 and RFC 8037 §2 define. Their presence is refused
// before anything else is looked at.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// EncodeBase64URL returns b in base64url without padding (RFC 7515 §2), the
// encoding of JWK coordinates and signature values.
func EncodeBase64URL(b []byte) string {
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeBase64URL decodes base64url without padding, strictly: the
// standard alphabet's '+' and '/', padding '=', whitespace and line breaks
// (which encoding/base64 would otherwise skip), and non-zero trailing bits
// are all refused, so each byte string has exactly one accepted spelling.
func DecodeBase64URL(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, fmt.Errorf("keys: base64url value has %q at offset %d (want unpadded base64url)", c, i)
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("keys: base64url value: %w", err)
	}
	return b, nil
}

// PublicJWK returns the public JWK of a P-256 ECDSA key
// ({"kty":"EC","crv":"P-256","x","y"}, each coordinate the fixed 32 bytes
// in unpadded base64url) or an Ed25519 key ({"kty":"OKP","crv":"Ed25519",
// "x"}). The result is a decoded JSON value, ready to sit in a payload.
func PublicJWK(pub crypto.PublicKey) (map[string]any, error) {
	alg, err := Algorithm(pub)
	if err != nil {
		return nil, err
	}
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		pt, err := p.Bytes() // 0x04 ‖ X ‖ Y, each left-padded to 32 bytes
		if err != nil {
			return nil, fmt.Errorf("keys: encode P-256 public key: %w", err)
		}
		return map[string]any{
			"kty": "EC",
			"crv": "P-256",
			"x":   EncodeBase64URL(pt[1:33]),
			"y":   EncodeBase64URL(pt[33:65]),
		}, nil
	case ed25519.PublicKey:
		return map[string]any{
			"kty": "OKP",
			"crv": "Ed25519",
			"x":   EncodeBase64URL(p),
		}, nil
	}
	return nil, fmt.Errorf("keys: no JWK form for %s key type %T", alg, pub)
}

// ParseJWK imports a public JWK given as a decoded JSON object. It returns a
// *ecdsa.PublicKey for EC P-256 and an ed25519.PublicKey for OKP Ed25519.
//
// It refuses, as a *reason.Refusal: a private member (d, and the RSA and
// symmetric ones) with A202-DISCLOSURE-DENIED; and, with no code (a
// schema-layer refusal), any other kty or crv, a member outside the public
// ones (the key_record schema's JWK shapes are closed), a coordinate that is
// not 32 bytes of unpadded base64url, and a point that is not on its curve.
func ParseJWK(v any) (crypto.PublicKey, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, reason.Refuse(fmt.Sprintf("JWK is a %T, want a JSON object", v))
	}
	var priv []string
	for _, name := range privateMembers {
		if _, present := m[name]; present {
			priv = append(priv, name)
		}
	}
	if len(priv) > 0 {
		// Name the members, never their values.
		return nil, reason.Refuse("JWK carries private member(s) "+strings.Join(priv, ", ")+"; a private key is never exchanged", reason.DisclosureDenied)
	}
	kty, _ := m["kty"].(string)
	crv, _ := m["crv"].(string)
	switch {
	case kty == "EC" && crv == "P-256":
		if err := onlyMembers(m, "kty", "crv", "x", "y"); err != nil {
			return nil, err
		}
		x, err := coordinate(m, "x")
		if err != nil {
			return nil, err
		}
		y, err := coordinate(m, "y")
		if err != nil {
			return nil, err
		}
		pt := make([]byte, 0, 65)
		pt = append(pt, 4)
		pt = append(pt, x...)
		pt = append(pt, y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
		if err != nil {
			return nil, reason.Refuse("JWK point is not on P-256: " + err.Error())
		}
		return pub, nil
	case kty == "OKP" && crv == "Ed25519":
		if err := onlyMembers(m, "kty", "crv", "x"); err != nil {
			return nil, err
		}
		x, err := coordinate(m, "x")
		if err != nil {
			return nil, err
		}
		if !onEdwards25519(x) {
			return nil, reason.Refuse("JWK x is not the encoding of a point on edwards25519")
		}
		return ed25519.PublicKey(x), nil
	default:
		return nil, reason.Refuse(fmt.Sprintf("JWK kty %q crv %q is not EC P-256 or OKP Ed25519", kty, crv))
	}
}

// ParseJWKJSON decodes a JWK from JSON text with the strict decoder
// (duplicate members refused) and imports it with ParseJWK.
func ParseJWKJSON(data []byte) (crypto.PublicKey, error) {
	m, err := canonical.DecodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("keys: JWK: %w", err)
	}
	return ParseJWK(m)
}

func onlyMembers(m map[string]any, allowed ...string) error {
	var extra []string
	for k := range m {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return reason.Refuse(fmt.Sprintf("JWK has member(s) %s outside %s", strings.Join(extra, ", "), strings.Join(allowed, ", ")))
	}
	return nil
}

// coordinate reads a 32-byte JWK coordinate. The fixed width matters: a
// shorter, unpadded coordinate would give the same key a second JWK and so
// a second thumbprint.
func coordinate(m map[string]any, name string) ([]byte, error) {
	s, ok := m[name].(string)
	if !ok {
		return nil, reason.Refuse(fmt.Sprintf("JWK member %q is missing or not a string", name))
	}
	b, err := DecodeBase64URL(s)
	if err != nil {
		return nil, reason.Refuse(fmt.Sprintf("JWK member %q: %v", name, err))
	}
	if len(b) != 32 {
		return nil, reason.Refuse(fmt.Sprintf("JWK member %q is %d bytes, want 32", name, len(b)))
	}
	return b, nil
}

// edwards25519 constants: the field prime p = 2^255 - 19 and the curve
// constant d = -121665/121666 mod p (RFC 8032 §5.1).
var (
	edP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	edD = func() *big.Int {
		inv := new(big.Int).ModInverse(big.NewInt(121666), edP)
		d := new(big.Int).Mul(big.NewInt(-121665), inv)
		return d.Mod(d, edP)
	}()
	edLegendre = new(big.Int).Rsh(new(big.Int).Sub(edP, big.NewInt(1)), 1)
)

// onEdwards25519 reports whether enc decodes to a curve point under RFC 8032
// §5.1.3: y canonical (< p), and (y²-1)/(dy²+1) a square mod p, with x = 0
// only when the sign bit is clear. Go's ed25519 would only find a bad key
// when a verification fails; refusing it at import says what is wrong.
// Only public data passes through here, so variable-time arithmetic is fine.
func onEdwards25519(enc []byte) bool {
	le := make([]byte, 32)
	copy(le, enc)
	sign := le[31] >> 7
	le[31] &= 0x7f
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		le[i], le[j] = le[j], le[i]
	}
	y := new(big.Int).SetBytes(le)
	if y.Cmp(edP) >= 0 {
		return false
	}
	y2 := new(big.Int).Mul(y, y)
	y2.Mod(y2, edP)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	u.Mod(u, edP)
	v := new(big.Int).Mul(edD, y2)
	v.Add(v, big.NewInt(1))
	v.Mod(v, edP)
	vinv := new(big.Int).ModInverse(v, edP)
	if vinv == nil {
		return false
	}
	x2 := u.Mul(u, vinv)
	x2.Mod(x2, edP)
	if x2.Sign() == 0 {
		return sign == 0
	}
	return new(big.Int).Exp(x2, edLegendre, edP).Cmp(big.NewInt(1)) == 0
}

// Thumbprint returns the RFC 7638 thumbprint of a public key: SHA-256 over
// the JSON object of the key type's required members (EC: crv, kty, x, y;
// OKP: crv, kty, x) in lexicographic order without whitespace, in unpadded
// base64url. It is the key fingerprint peers exchange and pin (decisions.md
// items 5 and 14).
func Thumbprint(pub crypto.PublicKey) (string, error) {
	jwk, err := PublicJWK(pub)
	if err != nil {
		return "", err
	}
	// The member values are base64url and fixed names, so no JSON escaping
	// can arise; RFC 8785 of this object is exactly RFC 7638's form.
	var s string
	if jwk["kty"] == "EC" {
		s = fmt.Sprintf(`{"crv":"P-256","kty":"EC","x":"%s","y":"%s"}`, jwk["x"], jwk["y"])
	} else {
		s = fmt.Sprintf(`{"crv":"Ed25519","kty":"OKP","x":"%s"}`, jwk["x"])
	}
	sum := sha256.Sum256([]byte(s))
	return EncodeBase64URL(sum[:]), nil
}

// ThumbprintJWK imports jwk with ParseJWK and returns its Thumbprint, so a
// thumbprint is only ever computed over a key that would be accepted.
func ThumbprintJWK(jwk any) (string, error) {
	pub, err := ParseJWK(jwk)
	if err != nil {
		return "", err
	}
	return Thumbprint(pub)
}
