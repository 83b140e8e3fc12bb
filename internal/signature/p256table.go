package signature

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/binary"
	"math/big"
	"sync"
	"sync/atomic"

	"filippo.io/nistec"
)

// ES256 verification with a table per signing key.
//
// A record is signed by a handful of keys, thousands of times each, and an
// ES256 verification is two scalar multiplications: u1·G and u2·Q, where
// G is the generator and Q the signer's public key. crypto/ecdsa computes
// u1·G from a table precomputed for G, and u2·Q from scratch (256 point
// doublings and about 50 additions), which is two thirds of a
// verification's time. Once a key has been used keyTableAfter times, this
// file precomputes the same kind of table for Q (the multiples 1..63 of
// 2^(6i)·Q for each six-bit window i), so u2·Q becomes 43 additions.
//
// Only acceptance is settled here. verifyES256 returns true exactly when
// the signature is valid under FIPS 186-5's ECDSA verification, the
// equation crypto/ecdsa checks (TestP256TableAgreesWithECDSA,
// FuzzP256Table and FuzzP256TableVsECDSA compare the two, and
// TestWycheproofES256 runs the Wycheproof P-256 vectors through both);
// it never refuses anything for good: a false sends the entry to the full
// check (checkEntry, verifyRaw), which verifies with crypto/ecdsa and says
// why it fails. Nothing here is secret (public
// keys, signatures, digests), so the arithmetic need not be constant
// time. The group arithmetic is filippo.io/nistec's, the standard
// library's own P-256 code, exported (crypto/ecdsa does not expose its
// points).

const (
	keyTableAfter  = 32   // uses of a key before its table is built (about 2 ms)
	maxKeyTables   = 16   // tables held, 255 KiB each
	maxTrackedKeys = 4096 // keys counted; beyond these, no more are
	windowBits     = 6
	windows        = (256 + windowBits - 1) / windowBits // 43
	windowSize     = 1<<windowBits - 1                   // 63 multiples each
)

// p256Table holds, for window i and j in 1..63, j·2^(6i)·Q at t[i][j-1].
type p256Table [windows][windowSize]nistec.P256Point

type keyUse struct {
	uses  atomic.Int32
	once  sync.Once
	table *p256Table // nil until built, or when no table may be built
}

var (
	keyUses    sync.Map // string(uncompressed point) → *keyUse
	trackedN   atomic.Int32
	tablesHeld atomic.Int32
	p256N      = elliptic.P256().Params().N
)

// tableForPoint returns the table for the P-256 key whose uncompressed
// encoding is point, building it at its keyTableAfter-th use, or nil while
// there is none.
func tableForPoint(point []byte) *p256Table {
	v, ok := keyUses.Load(string(point))
	if !ok {
		if trackedN.Load() >= maxTrackedKeys {
			return nil
		}
		var loaded bool
		if v, loaded = keyUses.LoadOrStore(string(point), new(keyUse)); !loaded {
			trackedN.Add(1)
		}
	}
	u := v.(*keyUse)
	// Counted up to the threshold only, so that a daemon's long life does
	// not wrap the count.
	if u.uses.Load() < keyTableAfter && u.uses.Add(1) < keyTableAfter {
		return nil
	}
	u.once.Do(func() {
		if tablesHeld.Add(1) > maxKeyTables {
			return
		}
		q, err := nistec.NewP256Point().SetBytes(point)
		if err != nil {
			return
		}
		u.table = newP256Table(q)
	})
	return u.table
}

// ForgetKeyTables forgets every key's uses and table, as a new process
// starts with none. For benchmarks that hold several instances in one
// process and measure what a run of `party verify` costs: tables are
// held for the first maxKeyTables keys used often enough, whichever those
// are, so the instances made first would verify with tables and those
// made later without (BenchmarkHistory, internal/bench). Tables are built
// again as keys are used.
func ForgetKeyTables() {
	keyUses.Clear()
	trackedN.Store(0)
	tablesHeld.Store(0)
}

func newP256Table(q *nistec.P256Point) *p256Table {
	t := new(p256Table)
	base := nistec.NewP256Point().Set(q)
	for i := range windows {
		t[i][0].Set(base)
		for j := 1; j < windowSize; j++ {
			t[i][j].Add(&t[i][j-1], base)
		}
		base.Add(&t[i][windowSize-1], base) // 64·base: the next window's
	}
	return t
}

// mul returns k·Q for the 32-byte big-endian scalar k.
func (t *p256Table) mul(k *[32]byte) *nistec.P256Point {
	var limbs [5]uint64 // little-endian, one spare for the last window
	for j := range 4 {
		limbs[j] = binary.BigEndian.Uint64(k[32-8*(j+1):])
	}
	acc := nistec.NewP256Point() // the point at infinity
	for i := range windows {
		off := i * windowBits
		v := limbs[off/64] >> (off % 64)
		if off%64 > 64-windowBits {
			v |= limbs[off/64+1] << (64 - off%64)
		}
		if v &= windowSize; v != 0 {
			acc.Add(acc, &t[i][v-1])
		}
	}
	return acc
}

// verifyES256 reports whether raw (r‖s) is a valid ECDSA P-256 signature
// of digest by pub: with the key's table once it has one, else with
// crypto/ecdsa. false means "not accepted here" (see above).
// With a memo, a signature it holds is accepted without the curve
// arithmetic, and one accepted here is added to it (memo.go).
func verifyES256(pub *ecdsa.PublicKey, digest *[32]byte, raw *[64]byte, memo *Memo) bool {
	point, err := pub.Bytes()
	if err != nil || pub.Curve != elliptic.P256() || len(point) != len(memoKey{}.point) {
		return verifyES256With(nil, pub, digest, raw)
	}
	k := memoKey{digest: *digest, sig: *raw}
	copy(k.point[:], point)
	if memo != nil && memo.has(&k) {
		return true
	}
	ok := verifyES256With(tableForPoint(point), pub, digest, raw)
	if ok && memo != nil {
		memo.add(&k)
	}
	return ok
}

// verifyES256With verifies with t, or with crypto/ecdsa when t is nil.
func verifyES256With(t *p256Table, pub *ecdsa.PublicKey, digest *[32]byte, raw *[64]byte) bool {
	if t == nil {
		var buf [72]byte
		der, ok := derSignature(buf[:0], raw)
		return ok && ecdsa.VerifyASN1(pub, digest[:], der)
	}
	return t.verify(digest, raw)
}

// verify is ECDSA verification (FIPS 186-5, 6.4.2) with u2·Q from the
// table: r and s in [1, n-1]; e the digest (256 bits, the order's length:
// nothing to truncate); w = s⁻¹, u1 = e·w, u2 = r·w mod n; R = u1·G + u2·Q
// not the point at infinity; valid when R's x mod n is r.
func (t *p256Table) verify(digest *[32]byte, raw *[64]byte) bool {
	sc := scratchPool.Get().(*verifyScratch)
	defer scratchPool.Put(sc)
	r, s, w, u1, u2, v := &sc.r, &sc.s, &sc.w, &sc.u1, &sc.u2, &sc.v
	r.SetBytes(raw[:32])
	s.SetBytes(raw[32:])
	if r.Sign() == 0 || s.Sign() == 0 || r.Cmp(p256N) >= 0 || s.Cmp(p256N) >= 0 {
		return false
	}
	if w.ModInverse(s, p256N) == nil {
		return false
	}
	u1.SetBytes(digest[:])
	u1.Mod(v.Mul(u1, w), p256N)
	u2.Mod(v.Mul(r, w), p256N)
	var b1, b2 [32]byte
	u1.FillBytes(b1[:])
	u2.FillBytes(b2[:])
	p, err := nistec.NewP256Point().ScalarBaseMult(b1[:])
	if err != nil {
		return false
	}
	p.Add(p, t.mul(&b2))
	x, err := p.BytesX() // an error for the point at infinity
	if err != nil {
		return false
	}
	v.SetBytes(x)
	return v.Mod(v, p256N).Cmp(r) == 0
}

// verifyScratch holds one verification's integers, reused.
type verifyScratch struct{ r, s, w, u1, u2, v big.Int }

var scratchPool = sync.Pool{New: func() any { return new(verifyScratch) }}
