package verifytest

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/asn1"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"

	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
)

// Floor is the bare cryptographic cost of checking a record: one ES256
// verification per signature of the record (mandate proofs included),
// over digests and DER signatures computed beforehand, by the cheapest
// call the standard library has for it (ecdsa.VerifyASN1; ecdsa.Verify
// with big.Int r and s encodes the DER first). A verifier of the record
// does at least this work, so the time Run takes is the floor its time is
// read against.
type Floor struct {
	jobs []floorJob
}

type floorJob struct {
	pub    *ecdsa.PublicKey
	digest [32]byte
	der    []byte
}

// NewFloor precomputes the record's signing inputs, digests and
// signature values.
func NewFloor(rec *Record) (*Floor, error) {
	f := &Floor{}
	add := func(in []byte, entry map[string]any) error {
		id, _ := entry["key_id"].(string)
		pub, err := rec.Keys.Lookup(id)
		if err != nil {
			return err
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("verifytest: key %s is not a P-256 key", id)
		}
		value, _ := entry["signature"].(string)
		raw, err := keys.DecodeBase64URL(value)
		if err != nil || len(raw) != 64 {
			return fmt.Errorf("verifytest: a signature by %s is not 64 bytes of base64url", id)
		}
		der, err := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])})
		if err != nil {
			return err
		}
		f.jobs = append(f.jobs, floorJob{pub: ec, digest: sha256.Sum256(in), der: der})
		return nil
	}
	for _, o := range rec.Objects {
		list, err := signature.Entries(o)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			in, err := signature.SigningInput(o, e)
			if err != nil {
				return nil, err
			}
			if err := add(in, e); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range rec.Mandates {
		in, err := signature.MandateSigningInput(m)
		if err != nil {
			return nil, err
		}
		proof, _ := m["proof"].(map[string]any)
		if err := add(in, proof); err != nil {
			return nil, err
		}
	}
	if len(f.jobs) != rec.Signatures() {
		return nil, fmt.Errorf("verifytest: %d verifications for %d signatures", len(f.jobs), rec.Signatures())
	}
	return f, nil
}

// Len is the number of verifications one Run does.
func (f *Floor) Len() int { return len(f.jobs) }

// Run verifies every signature once, across workers goroutines taking the
// next signature as they finish one (as the verifier schedules its
// work), and fails if any does not verify.
func (f *Floor) Run(workers int) error {
	if workers < 1 {
		workers = 1
	}
	var next atomic.Int64
	var bad atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(f.jobs) {
					return
				}
				j := &f.jobs[i]
				if !ecdsa.VerifyASN1(j.pub, j.digest[:], j.der) {
					bad.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() {
		return fmt.Errorf("verifytest: a signature of the record does not verify")
	}
	return nil
}
