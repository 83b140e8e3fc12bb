// Package keys generates, stores and describes the signing keys party uses.
//
// A party signs with ECDSA P-256 keys ([ES256], decisions.md item 1) and
// verifies ES256 and Ed25519 (EdDSA). This package covers what surrounds a
// key, not signing itself (package signature does that):
//
//   - Generate makes a fresh P-256 key from crypto/rand.
//   - MarshalPrivatePEM and ParsePrivatePEM store a private key as a PKCS#8
//     PEM block. Whoever writes the file makes it mode 0600; this package
//     never writes files and never puts key material in an error.
//     ReadPrivateFile reads such a file, refusing one that others can read.
//   - PublicJWK and ParseJWK convert a public key to and from its JWK form
//     (RFC 7517), the form a key_record carries in public_key_jwk. Import
//     is strict: only EC P-256 and OKP Ed25519, only the public members,
//     coordinates of exactly the right length, points on the curve. A JWK
//     that carries a private member is refused with A202-DISCLOSURE-DENIED,
//     because a private key must never leave the instance that made it.
//   - Thumbprint is a key's RFC 7638 fingerprint, the one peers pin.
//   - KeySet maps key_id to public key, and loads a bundle's keys.json.
package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Algorithm names of the two registered signature suites (kernel schema
// signature.algorithm).
const (
	ES256 = "ES256"
	EdDSA = "EdDSA"
)

// pemType is the PEM block type of a PKCS#8 private key (RFC 7468 §10).
const pemType = "PRIVATE KEY"

// Generate returns a new ECDSA P-256 private key drawn from crypto/rand.
func Generate() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("keys: generate P-256 key: %w", err)
	}
	return k, nil
}

// MarshalPrivatePEM encodes a P-256 ECDSA or Ed25519 private key as one
// PKCS#8 "PRIVATE KEY" PEM block. The caller writes it with mode 0600.
func MarshalPrivatePEM(key crypto.Signer) ([]byte, error) {
	if _, err := Algorithm(key.Public()); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		// The x509 error names the key type only, never its value.
		return nil, fmt.Errorf("keys: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der}), nil
}

// ParsePrivatePEM decodes a PKCS#8 "PRIVATE KEY" PEM block holding a P-256
// ECDSA key (returned as *ecdsa.PrivateKey) or an Ed25519 key (returned as
// ed25519.PrivateKey). Anything after the block is refused, so a file that
// holds two keys is not silently read as its first.
func ParsePrivatePEM(data []byte) (crypto.Signer, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("keys: no PEM block in private key file")
	}
	if block.Type != pemType {
		return nil, fmt.Errorf("keys: PEM block is %q, want %q", block.Type, pemType)
	}
	if len(block.Headers) != 0 {
		return nil, errors.New("keys: PEM block has headers (encrypted keys are not supported)")
	}
	for _, b := range rest {
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return nil, errors.New("keys: data after the private key PEM block")
		}
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		// Deliberately not wrapping err: parse errors from x509 do not carry
		// key bytes today, but this is the one place a future change could
		// leak them, and the caller gains nothing from the detail.
		return nil, errors.New("keys: private key is not valid PKCS#8")
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("keys: ECDSA key on %s, want P-256", k.Curve.Params().Name)
		}
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	default:
		return nil, fmt.Errorf("keys: private key type %T is not P-256 ECDSA or Ed25519", k)
	}
}

// ReadPrivateFile reads a private key file written with MarshalPrivatePEM,
// refusing one whose mode lets anyone but its owner read or write it: a key
// others could read is no longer this instance's alone, so it is not used.
func ReadPrivateFile(path string) (crypto.Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("keys: %s is readable by others (mode %v); chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	k, err := ParsePrivatePEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Algorithm returns the signature algorithm a public key verifies: "ES256"
// for a P-256 *ecdsa.PublicKey, "EdDSA" for an ed25519.PublicKey.
func Algorithm(pub crypto.PublicKey) (string, error) {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		if p == nil || p.Curve != elliptic.P256() {
			return "", errors.New("keys: ECDSA key is not on P-256")
		}
		return ES256, nil
	case ed25519.PublicKey:
		if len(p) != ed25519.PublicKeySize {
			return "", fmt.Errorf("keys: Ed25519 key is %d bytes, want %d", len(p), ed25519.PublicKeySize)
		}
		return EdDSA, nil
	default:
		return "", fmt.Errorf("keys: public key type %T is not P-256 ECDSA or Ed25519", pub)
	}
}
