package keys

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
)

// FuzzParseJWKJSON: import never panics, never accepts a private member,
// and whatever it accepts exports back to a JWK that imports as the same
// key with the same thumbprint.
func FuzzParseJWKJSON(f *testing.F) {
	k, _ := Generate()
	ec, _ := PublicJWK(&k.PublicKey)
	ecJSON, _ := json.Marshal(ec)
	f.Add(ecJSON)
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}`))
	f.Add([]byte(`{"kty":"EC","crv":"P-256","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := ParseJWKJSON(data)
		if err != nil {
			return
		}
		var raw map[string]json.RawMessage
		if json.Unmarshal(data, &raw) == nil {
			for _, m := range privateMembers {
				if _, ok := raw[m]; ok {
					t.Fatalf("accepted a JWK with private member %q", m)
				}
			}
		}
		jwk, err := PublicJWK(pub)
		if err != nil {
			t.Fatalf("accepted key does not export: %v", err)
		}
		back, err := ParseJWK(jwk)
		if err != nil {
			t.Fatalf("exported JWK does not import: %v", err)
		}
		if !SamePublic(pub, back) {
			t.Fatal("export/import changed the key")
		}
		t1, _ := Thumbprint(pub)
		t2, _ := ThumbprintJWK(jwk)
		if t1 != t2 {
			t.Fatal("thumbprint changed across export")
		}
		if ed, ok := pub.(ed25519.PublicKey); ok && len(ed) != ed25519.PublicKeySize {
			t.Fatal("short Ed25519 key accepted")
		}
	})
}
