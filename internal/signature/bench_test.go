package signature

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/spectest"
)

// The reference record's offer (one signature) and agreement (two).
const (
	benchOffer     = "off_ef88a971e3e0ece2701a1ee1"
	benchAgreement = "agr_f3d6af902f16489fac9c9eb4"
)

func benchObject(b *testing.B, id string) map[string]any {
	b.Helper()
	return load(b, filepath.Join(spectest.ReferenceVectors(b), "objects", id+".json"))
}

// BenchmarkContentHash is canonicalisation plus SHA-256 of an object that
// is already decoded: the hashing part of every verification.
func BenchmarkContentHash(b *testing.B) {
	for _, c := range []struct{ name, id string }{{"offer", benchOffer}, {"agreement", benchAgreement}} {
		obj := benchObject(b, c.id)
		in, _ := canonical.HashInput(obj)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := canonical.ContentHash(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifySignatures verifies every signature of an object,
// hashing included: what checking a received object's signatures costs.
func BenchmarkVerifySignatures(b *testing.B) {
	set := refKeys(b)
	for _, c := range []struct{ name, id string }{{"offer-1sig", benchOffer}, {"agreement-2sig", benchAgreement}} {
		obj := benchObject(b, c.id)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := VerifySignatures(obj, set); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkP256VerifyFloor is one bare ecdsa.Verify over a precomputed
// digest: the floor under any ES256 verification.
func BenchmarkP256VerifyFloor(b *testing.B) {
	set := refKeys(b)
	obj := benchObject(b, benchOffer)
	e := entry(obj, 0)
	in, err := SigningInput(obj, e)
	if err != nil {
		b.Fatal(err)
	}
	digest := sha256.Sum256(in)
	raw, _ := keys.DecodeBase64URL(e["signature"].(string))
	r, s := new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])
	pub := lookup(b, set, e["key_id"].(string)).(*ecdsa.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if !ecdsa.Verify(pub, digest[:], r, s) {
			b.Fatal("does not verify")
		}
	}
}

// BenchmarkSign is one ES256 signature appended to the offer, hashing
// included, for comparison with verification.
func BenchmarkSign(b *testing.B) {
	k, err := keys.Generate()
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewES256("key_bench_01", k)
	if err != nil {
		b.Fatal(err)
	}
	obj := benchObject(b, benchOffer)
	at := mustTime(b, "2026-12-02T13:23:39Z")
	b.ReportAllocs()
	for b.Loop() {
		obj["signatures"] = []any{}
		if err := Sign(obj, s, "offer_submission", at); err != nil {
			b.Fatal(err)
		}
	}
}

func mustTime(b *testing.B, s string) time.Time {
	b.Helper()
	t, err := envelope.ParseTimestamp(s)
	if err != nil {
		b.Fatal(err)
	}
	return t
}
