package keys

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
)

func mustGenerate(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func refusal(t *testing.T, err error) *reason.Refusal {
	t.Helper()
	var r *reason.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a *reason.Refusal", err)
	}
	return r
}

func TestThumbprintRFC8037(t *testing.T) {
	// RFC 8037 Appendix A.2 public key and A.3 thumbprint.
	jwk := map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
	got, err := ThumbprintJWK(jwk)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("thumbprint %s, want %s", got, want)
	}
}

func TestThumbprintEC(t *testing.T) {
	// RFC 7638 §3.2: required members only, lexicographic order, no
	// whitespace. encoding/json writes struct fields in declaration order,
	// which here is that order: an independent spelling of the same input.
	k := mustGenerate(t)
	jwk, err := PublicJWK(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		Crv string `json:"crv"`
		Kty string `json:"kty"`
		X   string `json:"x"`
		Y   string `json:"y"`
	}{"P-256", "EC", jwk["x"].(string), jwk["y"].(string)})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	got, err := Thumbprint(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := EncodeBase64URL(sum[:]); got != want {
		t.Fatalf("thumbprint %s, want %s", got, want)
	}
	other := mustGenerate(t)
	if t2, _ := Thumbprint(&other.PublicKey); t2 == got {
		t.Fatal("two keys share a thumbprint")
	}
}

func TestJWKRoundTripP256(t *testing.T) {
	// Coordinates with leading zero bytes must still be 32 bytes (43
	// characters); a thousand keys meet that case several times over.
	for i := 0; i < 1000; i++ {
		k := mustGenerate(t)
		jwk, err := PublicJWK(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(jwk) != 4 || jwk["kty"] != "EC" || jwk["crv"] != "P-256" {
			t.Fatalf("jwk %v", jwk)
		}
		if len(jwk["x"].(string)) != 43 || len(jwk["y"].(string)) != 43 {
			t.Fatalf("coordinates not fixed width: %v", jwk)
		}
		pub, err := ParseJWK(jwk)
		if err != nil {
			t.Fatal(err)
		}
		if !k.PublicKey.Equal(pub) {
			t.Fatal("round trip changed the key")
		}
	}
}

func TestJWKRoundTripEd25519(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := PublicJWK(pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(jwk) != 3 || jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" {
		t.Fatalf("jwk %v", jwk)
	}
	back, err := ParseJWK(jwk)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(back) {
		t.Fatal("round trip changed the key")
	}
	if alg, _ := Algorithm(back); alg != EdDSA {
		t.Fatalf("algorithm %s", alg)
	}
}

func TestJWKPrivateMembersRefused(t *testing.T) {
	k := mustGenerate(t)
	ecJWK, _ := PublicJWK(&k.PublicKey)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	okpJWK, _ := PublicJWK(edPub)
	for _, base := range []map[string]any{ecJWK, okpJWK} {
		for _, member := range []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"} {
			jwk := map[string]any{}
			for k, v := range base {
				jwk[k] = v
			}
			secret := "c2VjcmV0LXByaXZhdGUtc2NhbGFyLXZhbHVlLXh4eHh4"
			jwk[member] = secret
			_, err := ParseJWK(jwk)
			if err == nil {
				t.Fatalf("%s JWK with %q accepted", base["kty"], member)
			}
			if !refusal(t, err).Has(reason.DisclosureDenied) {
				t.Fatalf("%s JWK with %q: %v, want A202-DISCLOSURE-DENIED", base["kty"], member, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error repeats the private value: %v", err)
			}
		}
	}
}

func TestJWKRefusals(t *testing.T) {
	k := mustGenerate(t)
	good, _ := PublicJWK(&k.PublicKey)
	with := func(name string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		if v == nil {
			delete(m, name)
		} else {
			m[name] = v
		}
		return m
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	x25519, _ := ecdh.X25519().GenerateKey(rand.Reader)
	x := good["x"].(string)
	y := good["y"].(string)
	// Flip the last y character to another valid base64url digit whose low
	// bits are zero, so the string still decodes but names another point.
	badY := y[:42] + map[bool]string{true: "A", false: "E"}[y[42] != 'A']
	cases := map[string]any{
		"not an object":       "EC",
		"kty RSA":             map[string]any{"kty": "RSA", "n": "AQAB", "e": "AQAB"},
		"crv P-384":           with("crv", "P-384"),
		"P-384 coordinates":   map[string]any{"kty": "EC", "crv": "P-384", "x": EncodeBase64URL(p384.X.FillBytes(make([]byte, 48))), "y": EncodeBase64URL(p384.Y.FillBytes(make([]byte, 48)))},
		"crv secp256k1":       with("crv", "secp256k1"),
		"OKP X25519":          map[string]any{"kty": "OKP", "crv": "X25519", "x": EncodeBase64URL(x25519.PublicKey().Bytes())},
		"OKP Ed448":           map[string]any{"kty": "OKP", "crv": "Ed448", "x": x},
		"missing y":           with("y", nil),
		"y not a string":      with("y", 7),
		"extra kid":           with("kid", "key_a"),
		"extra alg":           with("alg", "ES256"),
		"padded x":            with("x", x+"="),
		"std alphabet x":      with("x", strings.NewReplacer("-", "+", "_", "/").Replace(x)),
		"x with newline":      with("x", x[:20]+"\n"+x[20:]),
		"short x":             with("x", x[:42]),
		"33-byte x":           with("x", EncodeBase64URL(append([]byte{0}, mustDecode(t, x)...))),
		"point not on curve":  with("y", badY),
		"Ed25519 y = 2":       map[string]any{"kty": "OKP", "crv": "Ed25519", "x": EncodeBase64URL(le32(2, false))},
		"Ed25519 x=0 signed":  map[string]any{"kty": "OKP", "crv": "Ed25519", "x": EncodeBase64URL(le32(1, true))},
		"Ed25519 y = p":       map[string]any{"kty": "OKP", "crv": "Ed25519", "x": EncodeBase64URL(edPBytes())},
		"Ed25519 with y":      map[string]any{"kty": "OKP", "crv": "Ed25519", "x": EncodeBase64URL(le32(3, false)), "y": y},
		"Ed25519 short":       map[string]any{"kty": "OKP", "crv": "Ed25519", "x": EncodeBase64URL(make([]byte, 31))},
		"EC kty, OKP members": map[string]any{"kty": "EC", "crv": "Ed25519", "x": x},
	}
	for name, jwk := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "std alphabet x" && !strings.ContainsAny(x, "-_") {
				t.Skip("this key's x has no - or _ to swap")
			}
			_, err := ParseJWK(jwk)
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
			if refusal(t, err).Has(reason.DisclosureDenied) {
				t.Fatalf("%v: a public-shape problem reported as disclosure", err)
			}
		})
	}
	// The allow direction of the same cases' neighbours.
	for _, y := range []uint64{0, 3, 4} {
		if _, err := ParseJWK(map[string]any{"kty": "OKP", "crv": "Ed25519", "x": EncodeBase64URL(le32(y, false))}); err != nil {
			t.Errorf("Ed25519 y=%d refused: %v", y, err)
		}
	}
}

// le32 encodes a small y as an Ed25519 point encoding, with the x sign bit.
func le32(y uint64, sign bool) []byte {
	b := make([]byte, 32)
	for i := 0; i < 8; i++ {
		b[i] = byte(y >> (8 * i))
	}
	if sign {
		b[31] |= 0x80
	}
	return b
}

// edPBytes is 2^255-19 little-endian: a non-canonical y.
func edPBytes() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = 0xff
	}
	b[0] = 0xed
	b[31] = 0x7f
	return b
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := DecodeBase64URL(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeBase64URL(t *testing.T) {
	for _, s := range []string{"AA", "AAA", "_-8", ""} {
		if _, err := DecodeBase64URL(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range []string{"AA==", "AA=", "+/8", "AA\nAA", "AA AA", "AB", "A", "AA\r"} {
		if _, err := DecodeBase64URL(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestPrivatePEMRoundTrip(t *testing.T) {
	k := mustGenerate(t)
	data, err := MarshalPrivatePEM(k)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("not a PKCS#8 PEM block: %.40q", data)
	}
	back, err := ParsePrivatePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Equal(back) {
		t.Fatal("round trip changed the key")
	}

	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	data, err = MarshalPrivatePEM(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParsePrivatePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	if !edPriv.Equal(back) {
		t.Fatal("Ed25519 round trip changed the key")
	}
}

// TestReadPrivateFile reads a key file of mode 0600 and refuses the same
// file once its group or others may read it, or when it holds no key,
// without putting key material in the error.
func TestReadPrivateFile(t *testing.T) {
	k := mustGenerate(t)
	data, _ := MarshalPrivatePEM(k)
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPrivateFile(path)
	if err != nil || !k.Equal(got) {
		t.Fatalf("read back %v", err)
	}
	body := strings.Split(string(data), "\n")[1]
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPrivateFile(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %v: %v", mode, err)
		}
	}
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrivateFile(path); err == nil || strings.Contains(err.Error(), body[:16]) {
		t.Errorf("not a key: %v", err)
	}
	if _, err := ReadPrivateFile(filepath.Join(t.TempDir(), "absent.pem")); err == nil {
		t.Error("a missing file read")
	}
}

func TestPrivatePEMRefusals(t *testing.T) {
	k := mustGenerate(t)
	good, _ := MarshalPrivatePEM(k)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := MarshalPrivatePEM(p384); err == nil {
		t.Error("P-384 key marshalled")
	}
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	sec1DER, _ := x509.MarshalECPrivateKey(k)
	block, _ := pem.Decode(good)
	corrupt := append([]byte(nil), block.Bytes...)
	corrupt[len(corrupt)/2] ^= 0xff
	cases := map[string][]byte{
		"empty":           nil,
		"not PEM":         []byte("hello"),
		"P-384":           pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p384DER}),
		"SEC 1 block":     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER}),
		"SEC 1 as PKCS#8": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: sec1DER}),
		"two keys":        append(append([]byte(nil), good...), good...),
		"headers":         pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: block.Bytes}),
		"corrupt":         pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: corrupt}),
	}
	body := strings.Split(string(good), "\n")[1]
	for name, data := range cases {
		_, err := ParsePrivatePEM(data)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), body[:16]) {
			t.Errorf("%s: error carries key material: %v", name, err)
		}
	}
	// Trailing whitespace is what editors add; it is not a second key.
	if _, err := ParsePrivatePEM(append(append([]byte(nil), good...), '\n', '\n')); err != nil {
		t.Errorf("trailing newline refused: %v", err)
	}
}

func TestKeySet(t *testing.T) {
	s := NewKeySet()
	a, b := mustGenerate(t), mustGenerate(t)
	if err := s.Add("key_alpha", &a.PublicKey); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("key_alpha", &a.PublicKey); err != nil {
		t.Fatalf("re-adding the same key: %v", err)
	}
	if err := s.Add("key_alpha", &b.PublicKey); err == nil {
		t.Fatal("a second key under one key_id accepted")
	}
	for _, id := range []string{"alpha", "key_", "key_ab", "KEY_alpha", "key_-abc", "key_" + strings.Repeat("a", 129)} {
		if err := s.Add(id, &b.PublicKey); err == nil {
			t.Errorf("key_id %q accepted", id)
		}
	}
	if err := s.Add("key_p384", &(func() *ecdsa.PrivateKey { k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader); return k }()).PublicKey); err == nil {
		t.Error("P-384 key accepted")
	}
	if _, err := s.Lookup("key_beta"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	got, err := s.Lookup("key_alpha")
	if err != nil || !a.PublicKey.Equal(got) {
		t.Fatalf("lookup: %v", err)
	}
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := s.Add("key_beta", edPub); err != nil {
		t.Fatal(err)
	}
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeySet(data)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(back.IDs(), ",") != "key_alpha,key_beta" || back.Len() != 2 {
		t.Fatalf("ids %v", back.IDs())
	}
	for _, id := range back.IDs() {
		x, _ := s.Lookup(id)
		y, _ := back.Lookup(id)
		if !SamePublic(x, y) {
			t.Fatalf("%s changed in keys.json round trip", id)
		}
	}
}

func TestParseKeySetRefusals(t *testing.T) {
	k := mustGenerate(t)
	jwk, _ := PublicJWK(&k.PublicKey)
	good, _ := json.Marshal(jwk)
	cases := map[string]string{
		"not an object":  `[]`,
		"duplicate id":   `{"key_aaa":` + string(good) + `,"key_aaa":` + string(good) + `}`,
		"bad id":         `{"aaa":` + string(good) + `}`,
		"private member": `{"key_aaa":` + strings.Replace(string(good), `{`, `{"d":"AAAA",`, 1) + `}`,
		"bad jwk":        `{"key_aaa":{"kty":"EC"}}`,
	}
	for name, data := range cases {
		if _, err := ParseKeySet([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := ParseKeySet([]byte(cases["private member"]))
	if !refusal(t, err).Has(reason.DisclosureDenied) {
		t.Errorf("private member in keys.json: %v", err)
	}
}

func TestReferenceKeys(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	set, err := LoadKeySet(filepath.Join(dir, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 4 {
		t.Fatalf("%d keys, want 4", set.Len())
	}
	// Each JWK names the same key as the reference's SPKI PEM file, a
	// check of coordinate order and padding against a second encoding.
	for _, id := range set.IDs() {
		data, err := os.ReadFile(filepath.Join(dir, "keys", id+".pub.pem"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s: no PEM", id)
		}
		spki, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := set.Lookup(id)
		if !SamePublic(pub, spki) {
			t.Fatalf("%s: keys.json and PEM disagree", id)
		}
		if _, err := Thumbprint(pub); err != nil {
			t.Fatal(err)
		}
	}
}
