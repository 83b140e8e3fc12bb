package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/pattern"
)

// ErrUnknownKey is wrapped by KeySet.Lookup when no key has the key_id.
var ErrUnknownKey = errors.New("keys: unknown key_id")

// keyIDPattern is the kernel and mandate schemas' keyId pattern.
var keyIDPattern = pattern.MustCompile(`^key_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)

// ValidKeyID reports whether id has the registered key_id form
// (key_ followed by 3 to 128 identifier characters).
func ValidKeyID(id string) bool { return keyIDPattern.MatchString(id) }

// KeySet maps key_id to public key. It is what a verifier resolves a
// signature's key_id against; which keys belong in it, and whether a key
// was active when it signed, is decided elsewhere (key_record chains). A
// KeySet is safe for concurrent use.
type KeySet struct {
	mu   sync.RWMutex
	keys map[string]crypto.PublicKey
}

// NewKeySet returns an empty KeySet.
func NewKeySet() *KeySet {
	return &KeySet{keys: map[string]crypto.PublicKey{}}
}

// Add records pub under keyID. It refuses a malformed key_id, a key that is
// neither P-256 ECDSA nor Ed25519, and a second, different key under a
// key_id already present: a key_id names one key for good, so a silent
// replacement would let a later entry re-attribute earlier signatures.
// Adding the same key again is a no-op.
func (s *KeySet) Add(keyID string, pub crypto.PublicKey) error {
	if !ValidKeyID(keyID) {
		return fmt.Errorf("keys: key_id %q does not match key_[A-Za-z0-9][A-Za-z0-9_-]{2,127}", keyID)
	}
	if _, err := Algorithm(pub); err != nil {
		return fmt.Errorf("keys: key %s: %w", keyID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.keys[keyID]; ok {
		if !SamePublic(old, pub) {
			return fmt.Errorf("keys: key_id %s already names a different key", keyID)
		}
		return nil
	}
	s.keys[keyID] = pub
	return nil
}

// SamePublic reports whether a and b are the same public key (ECDSA or
// Ed25519; any other type is never the same).
func SamePublic(a, b crypto.PublicKey) bool {
	switch a := a.(type) {
	case *ecdsa.PublicKey:
		return a.Equal(b)
	case ed25519.PublicKey:
		return a.Equal(b)
	}
	return false
}

// Lookup returns the key recorded under keyID, or an error wrapping
// ErrUnknownKey.
func (s *KeySet) Lookup(keyID string) (crypto.PublicKey, error) {
	s.mu.RLock()
	pub, ok := s.keys[keyID]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKey, keyID)
	}
	return pub, nil
}

// IDs returns the key_ids in the set, sorted.
func (s *KeySet) IDs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.keys))
	for id := range s.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Len returns the number of keys in the set.
func (s *KeySet) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.keys)
}

// MarshalJSON returns the set in keys.json form, {key_id: public JWK}, as
// RFC 8785 canonical bytes so that two exports of one set are identical.
func (s *KeySet) MarshalJSON() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]any, len(s.keys))
	for id, pub := range s.keys {
		jwk, err := PublicJWK(pub)
		if err != nil {
			return nil, fmt.Errorf("keys: key %s: %w", id, err)
		}
		out[id] = jwk
	}
	return canonical.Marshal(out)
}

// ParseKeySet reads a bundle's keys.json, {key_id: public JWK}
// (decisions.md item 15), decoding strictly and importing each JWK with
// ParseJWK. One bad entry refuses the whole file: a partly loaded key set
// would make some signatures look unverifiable rather than the file wrong.
func ParseKeySet(data []byte) (*KeySet, error) {
	m, err := canonical.DecodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("keys: keys.json: %w", err)
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids) // deterministic: the first bad entry reported is always the same
	set := NewKeySet()
	for _, id := range ids {
		pub, err := ParseJWK(m[id])
		if err != nil {
			return nil, fmt.Errorf("keys: keys.json entry %q: %w", id, err)
		}
		if err := set.Add(id, pub); err != nil {
			return nil, fmt.Errorf("keys: keys.json: %w", err)
		}
	}
	return set, nil
}

// LoadKeySet reads and parses the keys.json file at path.
func LoadKeySet(path string) (*KeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return ParseKeySet(data)
}
