package signature

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/partyd/party/internal/canonical"
)

// A signature a Memo accepted is accepted again from it, and nothing that
// differs from it by one bit of key, digest or signature is taken for it.
func TestMemoRemembersOnlyTheSame(t *testing.T) {
	t.Parallel()
	k, _ := p256Key(t)
	other, _ := p256Key(t)
	digest := sha256.Sum256([]byte("remembered"))
	r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	var good [64]byte
	r.FillBytes(good[:32])
	s.FillBytes(good[32:])
	memo := new(Memo)
	if !verifyES256(&k.PublicKey, &digest, &good, memo) {
		t.Fatal("a valid signature was refused")
	}
	key := memoKey{digest: digest, sig: good}
	point, _ := k.PublicKey.Bytes()
	copy(key.point[:], point)
	if !memo.has(&key) || len(memo.set) != 1 {
		t.Fatalf("the memo holds %d signatures, want the one accepted", len(memo.set))
	}
	if !verifyES256(&k.PublicKey, &digest, &good, memo) {
		t.Fatal("a remembered signature was refused")
	}
	for i := range 8 * 64 {
		bad := good
		bad[i/8] ^= 1 << (i % 8)
		if verifyES256(&k.PublicKey, &digest, &bad, memo) {
			t.Fatalf("signature bit %d flipped: accepted", i)
		}
	}
	for i := range 8 * 32 {
		d := digest
		d[i/8] ^= 1 << (i % 8)
		if verifyES256(&k.PublicKey, &d, &good, memo) {
			t.Fatalf("digest bit %d flipped: accepted", i)
		}
	}
	if verifyES256(&other.PublicKey, &digest, &good, memo) {
		t.Fatal("the signature was accepted under another key")
	}
	if len(memo.set) != 1 {
		t.Fatalf("refusals were remembered: the memo holds %d", len(memo.set))
	}
	// Another verifier's memo, or none, is not this one.
	if new(Memo).has(&key) || !verifyES256(&k.PublicKey, &digest, &good, nil) {
		t.Fatal("a memo is shared, or no memo changes the answer")
	}
}

// A Memo holds the last memoMax acceptances, the oldest out first.
func TestMemoForgetsTheOldest(t *testing.T) {
	t.Parallel()
	var m Memo
	key := func(i int) *memoKey {
		k := &memoKey{}
		k.digest[0], k.digest[1] = byte(i), byte(i>>8)
		return k
	}
	for i := range memoMax + 10 {
		m.add(key(i))
		m.add(key(i)) // twice: held once
	}
	if len(m.set) != memoMax || len(m.ring) != memoMax {
		t.Fatalf("holds %d (ring %d), want %d", len(m.set), len(m.ring), memoMax)
	}
	for i := range memoMax + 10 {
		if got, want := m.has(key(i)), i >= 10; got != want {
			t.Fatalf("key %d remembered: %v, want %v", i, got, want)
		}
	}
}

// VerifyEntryOver and VerifySignaturesOver with a Memo say what the
// package's functions say, for a valid object and for one altered after
// its signature was remembered.
func TestMemoVerifiesAsWithout(t *testing.T) {
	t.Parallel()
	obj, k := signedOffer(t, "key_memo_01")
	pub := &k.PublicKey
	content, err := canonical.HashInput(obj)
	if err != nil {
		t.Fatal(err)
	}
	memo := new(Memo)
	for range 2 { // the second time from memory
		if err := memo.VerifyEntryOver(obj, content, 0, pub); err != nil {
			t.Fatalf("memo: %v", err)
		}
		if err := memo.VerifySignaturesOver(obj, content, anyKeyID{pub}); err != nil {
			t.Fatalf("memo, all: %v", err)
		}
	}
	if len(memo.set) != 1 {
		t.Fatalf("the memo holds %d signatures, want 1", len(memo.set))
	}
	altered := append([]byte(nil), content...)
	altered[len(altered)/2] ^= 1
	got, want := memo.VerifyEntryOver(obj, altered, 0, pub), VerifyEntryOver(obj, altered, 0, pub)
	if got == nil || want == nil || got.Error() != want.Error() {
		t.Fatalf("altered content: memo says %v, without %v", got, want)
	}
}
