package signature

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"math/big"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
)

// FuzzVerifyEntry replaces a valid signature's value and signed_at with
// fuzzed strings. Verification never panics, and the only values that
// verify are the original with its original signed_at, or the original's
// high-S twin (r, n-s), which ECDSA accepts by design.
func FuzzVerifyEntry(f *testing.F) {
	obj, k := signedOffer(f, "key_fuzz_01")
	e := entry(obj, 0)
	value, signedAt := e["signature"].(string), e["signed_at"].(string)
	raw, _ := keys.DecodeBase64URL(value)
	twin := append([]byte(nil), raw[:32]...)
	twin = append(twin, new(big.Int).Sub(elliptic.P256().Params().N, new(big.Int).SetBytes(raw[32:])).FillBytes(make([]byte, 32))...)
	f.Add(value, signedAt)
	f.Add(value+"==", signedAt)
	f.Add(value, "2026-01-02T03:04:06Z")
	f.Add(Placeholder, signedAt)
	f.Add("", "")
	f.Fuzz(func(t *testing.T, v, at string) {
		o := clone(t, obj)
		entry(o, 0)["signature"] = v
		entry(o, 0)["signed_at"] = at
		err := VerifyEntry(o, 0, &k.PublicKey)
		// The quick path VerifyEntry takes first accepts exactly what the
		// full check accepts.
		if content, herr := canonical.HashInput(o); herr == nil {
			full := verifyEntry(content, "offer", entry(o, 0), &k.PublicKey, "fuzzed")
			if quick := quickEntry(content, "offer", entry(o, 0), anyKeyID{&k.PublicKey}, nil); quick != (full == nil) {
				t.Fatalf("quick %v, full %v, for %q at %q", quick, full, v, at)
			}
		}
		if err != nil {
			return
		}
		got, derr := keys.DecodeBase64URL(v)
		if derr != nil || at != signedAt || !(bytes.Equal(got, raw) || bytes.Equal(got, twin)) {
			t.Fatalf("verified value %q at %q", v, at)
		}
	})
}

// FuzzProtected holds the signature header written directly (protected)
// to what canonical.Marshal writes for the same four members: the same
// bytes, or both refuse.
func FuzzProtected(f *testing.F) {
	for _, c := range protectedCases {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, alg, kid, purpose, at string) {
		checkProtected(t, alg, kid, purpose, at)
	})
}

// protectedCases are headers as signed here, and strings that RFC 8785
// escapes or refuses.
var protectedCases = [][4]string{
	{"ES256", "key_buyer_01", "offer_acceptance", "2026-01-02T03:04:05Z"},
	{"EdDSA", "key_x", "countersignature", "2026-12-05T00:00:00Z"},
	{"", "", "", ""},
	{"a\"b", "c\\d", "\u0000\u001f\u007f", "\b\f\n\r\t"},
	{"é€😀", "\u2028\u2029", "</script>", "\xff"},
}

func TestProtectedIsCanonical(t *testing.T) {
	for _, c := range protectedCases {
		checkProtected(t, c[0], c[1], c[2], c[3])
	}
}

func checkProtected(t *testing.T, alg, kid, purpose, at string) {
	t.Helper()
	got, err := protected(alg, kid, purpose, at)
	want, werr := canonical.Marshal(map[string]any{"algorithm": alg, "key_id": kid, "purpose": purpose, "signed_at": at})
	if (err == nil) != (werr == nil) {
		t.Fatalf("protected(%q, %q, %q, %q): error %v, canonical.Marshal's %v", alg, kid, purpose, at, err, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("protected(%q, %q, %q, %q) = %s, canonical.Marshal gives %s", alg, kid, purpose, at, got, want)
	}
}

// signedOffer returns an offer signed once, at a fixed time, by a fresh
// ES256 key named keyID, and the key.
func signedOffer(t testing.TB, keyID string) (map[string]any, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewES256(keyID, k)
	if err != nil {
		t.Fatal(err)
	}
	obj := newObject(t, "offer")
	if err := Sign(obj, s, "offer_submission", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return obj, k
}
