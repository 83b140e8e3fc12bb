package signature

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"math/big"
	"testing"

	"filippo.io/nistec"
)

func p256Key(t testing.TB) (*ecdsa.PrivateKey, *nistec.P256Point) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := k.PublicKey.Bytes()
	q, err := nistec.NewP256Point().SetBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return k, q
}

func scalar(x *big.Int) [32]byte {
	var b [32]byte
	x.FillBytes(b[:])
	return b
}

// The table's k·Q is the library's, for random scalars and the edges of
// every window (0, 1, the order and its neighbours, all ones).
func TestP256TableMul(t *testing.T) {
	t.Parallel()
	_, q := p256Key(t)
	tab := newP256Table(q)
	n := elliptic.P256().Params().N
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	ks := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(63), big.NewInt(64), new(big.Int).Sub(n, big.NewInt(1)), n, new(big.Int).Add(n, big.NewInt(1)), max}
	for i := range 200 {
		k, _ := rand.Int(rand.Reader, max)
		if i%4 == 0 {
			k.Rsh(k, uint(i)) // short scalars: high windows empty
		}
		ks = append(ks, k)
	}
	for _, k := range ks {
		b := scalar(k)
		want, err := nistec.NewP256Point().ScalarMult(q, b[:])
		if err != nil {
			t.Fatal(err)
		}
		if got := tab.mul(&b); !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("k = %x: table and ScalarMult differ", b)
		}
	}
}

// Verification with a table accepts exactly what crypto/ecdsa accepts:
// valid signatures (high s included), and none of their alterations.
func TestP256TableAgreesWithECDSA(t *testing.T) {
	t.Parallel()
	k, q := p256Key(t)
	other, _ := p256Key(t)
	tab := newP256Table(q)
	n := elliptic.P256().Params().N
	accepted := 0
	for i := range 100 {
		digest := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		flipped := digest
		flipped[i%32] ^= 1 << (i % 8)
		cases := []struct {
			name   string
			digest [32]byte
			r, s   *big.Int
			pub    *ecdsa.PublicKey
		}{
			{"valid", digest, r, s, &k.PublicKey},
			{"high s", digest, r, new(big.Int).Sub(n, s), &k.PublicKey},
			{"r+1", digest, new(big.Int).Add(r, big.NewInt(1)), s, &k.PublicKey},
			{"s+1", digest, r, new(big.Int).Add(s, big.NewInt(1)), &k.PublicKey},
			{"r+n", digest, new(big.Int).Add(r, n), s, &k.PublicKey},
			{"s+n", digest, r, new(big.Int).Add(s, n), &k.PublicKey},
			{"r=0", digest, big.NewInt(0), s, &k.PublicKey},
			{"s=0", digest, r, big.NewInt(0), &k.PublicKey},
			{"r=n", digest, new(big.Int).Set(n), s, &k.PublicKey},
			{"s=n", digest, r, new(big.Int).Set(n), &k.PublicKey},
			{"swapped", digest, s, r, &k.PublicKey},
			{"other digest", flipped, r, s, &k.PublicKey},
			{"other key", digest, r, s, &other.PublicKey},
		}
		for _, c := range cases {
			if c.r.BitLen() > 256 || c.s.BitLen() > 256 {
				continue // not representable as r‖s
			}
			var raw [64]byte
			c.r.FillBytes(raw[:32])
			c.s.FillBytes(raw[32:])
			want := ecdsa.Verify(c.pub, c.digest[:], c.r, c.s)
			tb := tab
			if c.pub != &k.PublicKey {
				b, _ := c.pub.Bytes()
				oq, _ := nistec.NewP256Point().SetBytes(b)
				tb = newP256Table(oq)
			}
			if got := tb.verify(&c.digest, &raw); got != want {
				t.Fatalf("%d %s: table says %v, crypto/ecdsa %v", i, c.name, got, want)
			}
			if want {
				accepted++
			}
		}
	}
	if accepted != 200 { // valid and high s, each round
		t.Fatalf("%d signatures accepted, want 200", accepted)
	}
}

// A key's table is built at its keyTableAfter-th use, and verifyES256
// decides the same before and after.
func TestVerifyES256BuildsTable(t *testing.T) {
	t.Parallel()
	k, _ := p256Key(t)
	digest := sha256.Sum256([]byte("x"))
	r, s, _ := ecdsa.Sign(rand.Reader, k, digest[:])
	var good, bad [64]byte
	r.FillBytes(good[:32])
	s.FillBytes(good[32:])
	bad = good
	bad[63] ^= 1
	for i := range keyTableAfter + 2 {
		if !verifyES256(&k.PublicKey, &digest, &good, nil) || verifyES256(&k.PublicKey, &digest, &bad, nil) {
			t.Fatalf("use %d: valid refused or altered accepted", i)
		}
	}
	if point, _ := k.PublicKey.Bytes(); tableForPoint(point) == nil {
		t.Fatalf("no table after %d uses", keyTableAfter+2)
	}
	b, _ := k.PublicKey.Bytes()
	if v, _ := keyUses.Load(string(b)); v.(*keyUse).uses.Load() != keyTableAfter {
		t.Fatalf("uses counted past the threshold: %d", v.(*keyUse).uses.Load())
	}
}

// FuzzP256Table: for any digest and r‖s, under a key with a table, the
// table's answer is crypto/ecdsa's.
func FuzzP256Table(f *testing.F) {
	k, q := p256Key(f)
	tab := newP256Table(q)
	for i := range 4 {
		digest := sha256.Sum256([]byte{byte(i)})
		r, s, _ := ecdsa.Sign(rand.Reader, k, digest[:])
		var raw [64]byte
		r.FillBytes(raw[:32])
		s.FillBytes(raw[32:])
		f.Add(digest[:], raw[:])
	}
	f.Fuzz(func(t *testing.T, d, sig []byte) {
		if len(d) != 32 || len(sig) != 64 {
			return
		}
		digest, raw := [32]byte(d), [64]byte(sig)
		want := ecdsa.Verify(&k.PublicKey, d, new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
		if got := tab.verify(&digest, &raw); got != want {
			t.Fatalf("table %v, crypto/ecdsa %v", got, want)
		}
	})
}

// p256Edges are the values an r or s most easily gets wrong: 0, 1, the
// order n and its neighbours, the field prime p (above n), and 2^256-1.
var p256Edges = func() []*big.Int {
	n, p := elliptic.P256().Params().N, elliptic.P256().Params().P
	one := big.NewInt(1)
	max := new(big.Int).Sub(new(big.Int).Lsh(one, 256), one)
	return []*big.Int{big.NewInt(0), one, new(big.Int).Sub(n, one), n, new(big.Int).Add(n, one), p, max}
}()

// FuzzP256TableVsECDSA: for a fuzzed key (its private scalar), digest and
// r‖s, with r or s optionally replaced by an edge value (edit: low three
// bits pick the value for r, the next three for s, 7 leaving it), the
// key's table, verifyES256 with that table forced, and the DER fallback
// all answer as crypto/ecdsa does.
func FuzzP256TableVsECDSA(f *testing.F) {
	for i := range 3 {
		d := sha256.Sum256([]byte{'k', byte(i)})
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
		if err != nil {
			f.Fatal(err)
		}
		digest := sha256.Sum256([]byte{'m', byte(i)})
		r, s, _ := ecdsa.Sign(rand.Reader, k, digest[:])
		var raw [64]byte
		r.FillBytes(raw[:32])
		s.FillBytes(raw[32:])
		for _, edit := range []byte{0x3f, 0x00, 0x38, 0x07, 0x1b, 0x24, 0x2e, 0x35} {
			f.Add(d[:], digest[:], raw[:], edit)
		}
		swapped := append(append([]byte(nil), raw[32:]...), raw[:32]...)
		f.Add(d[:], digest[:], swapped, byte(0x3f))
	}
	f.Fuzz(func(t *testing.T, d, dg, sig []byte, edit byte) {
		if len(d) != 32 || len(dg) != 32 || len(sig) != 64 {
			return
		}
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
		if err != nil {
			return // zero, or not below the order: no key
		}
		point, _ := k.PublicKey.Bytes()
		q, err := nistec.NewP256Point().SetBytes(point)
		if err != nil {
			t.Fatal(err)
		}
		raw := [64]byte(sig)
		for i, e := range []byte{edit & 7, edit >> 3 & 7} {
			if int(e) < len(p256Edges) && p256Edges[e].BitLen() <= 256 {
				p256Edges[e].FillBytes(raw[32*i : 32*(i+1)])
			}
		}
		digest := [32]byte(dg)
		want := ecdsa.Verify(&k.PublicKey, digest[:], new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:]))
		tab := newP256Table(q)
		if got := tab.verify(&digest, &raw); got != want {
			t.Fatalf("key %x digest %x sig %x: table %v, crypto/ecdsa %v", d, digest, raw, got, want)
		}
		if got := verifyES256With(tab, &k.PublicKey, &digest, &raw); got != want {
			t.Fatalf("key %x digest %x sig %x: verifyES256With(table) %v, crypto/ecdsa %v", d, digest, raw, got, want)
		}
		if got := verifyES256With(nil, &k.PublicKey, &digest, &raw); got != want {
			t.Fatalf("key %x digest %x sig %x: the DER fallback %v, crypto/ecdsa %v", d, digest, raw, got, want)
		}
	})
}

// TestForgetKeyTables: a key forgotten is counted again from nothing, and
// its table built again at its keyTableAfter-th use. Not parallel: the
// tables are the process's.
func TestForgetKeyTables(t *testing.T) {
	k, _ := p256Key(t)
	point, _ := k.PublicKey.Bytes()
	ForgetKeyTables() // whatever the tests before built
	for range keyTableAfter {
		tableForPoint(point)
	}
	if tableForPoint(point) == nil {
		t.Fatalf("no table after %d uses", keyTableAfter+1)
	}
	ForgetKeyTables()
	if n, held := trackedN.Load(), tablesHeld.Load(); n != 0 || held != 0 {
		t.Fatalf("after forgetting: %d keys counted, %d tables held", n, held)
	}
	for i := range keyTableAfter - 1 {
		if tableForPoint(point) != nil {
			t.Fatalf("a table at use %d after forgetting", i+1)
		}
	}
	if tableForPoint(point) == nil {
		t.Fatalf("no table again at use %d", keyTableAfter)
	}
}
