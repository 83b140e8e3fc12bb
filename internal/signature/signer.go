package signature

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	"github.com/partyd/party/internal/keys"
)

// Algorithm names (kernel schema signature.algorithm).
const (
	ES256 = keys.ES256
	EdDSA = keys.EdDSA
)

// Signer makes raw signature values. Implementations keep the private key
// to themselves; nothing in this package reads it.
type Signer interface {
	// KeyID is the key_id the signature entries will name.
	KeyID() string
	// Algorithm is "ES256" or "EdDSA".
	Algorithm() string
	// Sign signs input (the whole signing input, not a digest) and returns
	// the raw signature value: r‖s for ES256, the 64-byte value for EdDSA.
	Sign(input []byte) ([]byte, error)
}

type es256Signer struct {
	keyID string
	key   *ecdsa.PrivateKey
}

// NewES256 returns an ES256 Signer over a P-256 private key.
func NewES256(keyID string, key *ecdsa.PrivateKey) (Signer, error) {
	if !keys.ValidKeyID(keyID) {
		return nil, fmt.Errorf("signature: key_id %q is not a valid key_id", keyID)
	}
	if key == nil || key.Curve != elliptic.P256() {
		return nil, errors.New("signature: ES256 needs a P-256 private key")
	}
	return &es256Signer{keyID: keyID, key: key}, nil
}

// NewSigner returns a Signer for a private key as keys.ParsePrivatePEM
// returns it: ES256 for a P-256 *ecdsa.PrivateKey, EdDSA for an
// ed25519.PrivateKey. party emits ES256 (decisions.md item 1); the EdDSA
// signer exists so tests and peers' tools can produce what we verify.
func NewSigner(keyID string, key crypto.Signer) (Signer, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return NewES256(keyID, k)
	case ed25519.PrivateKey:
		if !keys.ValidKeyID(keyID) {
			return nil, fmt.Errorf("signature: key_id %q is not a valid key_id", keyID)
		}
		if len(k) != ed25519.PrivateKeySize {
			return nil, errors.New("signature: malformed Ed25519 private key")
		}
		return ed25519Signer{keyID: keyID, key: k}, nil
	default:
		return nil, fmt.Errorf("signature: private key type %T is not P-256 ECDSA or Ed25519", key)
	}
}

func (s *es256Signer) KeyID() string     { return s.keyID }
func (s *es256Signer) Algorithm() string { return ES256 }

// Sign hashes input with SHA-256, signs with a fresh random nonce (Go's
// hedged ECDSA), and converts the DER that ecdsa.SignASN1 returns into the
// JOSE raw form: r and s as 32-byte big-endian integers, left-padded.
func (s *es256Signer) Sign(input []byte) ([]byte, error) {
	digest := sha256.Sum256(input)
	der, err := ecdsa.SignASN1(rand.Reader, s.key, digest[:])
	if err != nil {
		return nil, fmt.Errorf("signature: ES256 sign with %s: %w", s.keyID, err)
	}
	r, sv, err := parseDER(der)
	if err != nil {
		return nil, fmt.Errorf("signature: ES256 sign with %s: %w", s.keyID, err)
	}
	raw := make([]byte, 64)
	r.FillBytes(raw[:32])
	sv.FillBytes(raw[32:])
	return raw, nil
}

// parseDER reads an ECDSA-Sig-Value SEQUENCE { r INTEGER, s INTEGER } and
// requires r and s to fit in 32 bytes, which P-256 guarantees.
func parseDER(der []byte) (*big.Int, *big.Int, error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) != 0 {
		return nil, nil, errors.New("malformed DER ECDSA signature")
	}
	r, s := sig.R, sig.S
	if r.Sign() <= 0 || s.Sign() <= 0 || r.BitLen() > 256 || s.BitLen() > 256 {
		return nil, nil, errors.New("ECDSA signature integers out of range")
	}
	return r, s, nil
}

type ed25519Signer struct {
	keyID string
	key   ed25519.PrivateKey
}

func (s ed25519Signer) KeyID() string     { return s.keyID }
func (s ed25519Signer) Algorithm() string { return EdDSA }

// Sign signs input with pure Ed25519 (RFC 8032), which hashes internally.
func (s ed25519Signer) Sign(input []byte) ([]byte, error) {
	return ed25519.Sign(s.key, input), nil
}
