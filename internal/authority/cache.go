package authority

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"sync"

	"github.com/partyd/party/internal/canonical"
)

// Work the evaluator does once per document rather than once per act. A
// mandate is immutable (commercial mandate §3: its id never names other
// bytes), so what is learnt from its exact bytes holds for as long as the
// bytes are the same: that it is a well-formed mandate document, and that
// its proof verifies under a given public key. Both are cached by the
// SHA-256 of the document's canonical bytes, never by its id, so other
// bytes under the same id are checked afresh. What depends on time or on
// the world (the live status, the key's status, the validity interval) is
// never cached here.

// docCache maps a canonical-bytes digest to what reading the document
// gave.
type docCache struct {
	mu sync.Mutex
	m  map[[32]byte]cachedDoc
}

type cachedDoc struct {
	doc map[string]any
	err error
}

// maxCached bounds each cache; a full cache starts again empty.
const maxCached = 4096

var (
	mandateDocs    = &docCache{m: map[[32]byte]cachedDoc{}}
	verifiedProofs = struct {
		mu sync.Mutex
		m  map[[32]byte]bool
	}{m: map[[32]byte]bool{}}
)

// readMandateCached is readMandate, cached by the document's canonical
// bytes. The returned document is shared: callers only read it.
func readMandateCached(m map[string]any) (map[string]any, error) {
	if m == nil {
		return readMandate(m)
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return readMandate(m)
	}
	key := sha256.Sum256(b)
	mandateDocs.mu.Lock()
	c, ok := mandateDocs.m[key]
	mandateDocs.mu.Unlock()
	if ok {
		return c.doc, c.err
	}
	doc, err := readMandate(m)
	mandateDocs.mu.Lock()
	if len(mandateDocs.m) >= maxCached {
		mandateDocs.m = map[[32]byte]cachedDoc{}
	}
	mandateDocs.m[key] = cachedDoc{doc: doc, err: err}
	mandateDocs.mu.Unlock()
	return doc, err
}

// proofVerified reports whether the proof of mandate m was verified under
// pub before; remember records that it was.
func proofKey(m map[string]any, pub crypto.PublicKey) ([32]byte, bool) {
	b, err := canonical.Marshal(m)
	if err != nil {
		return [32]byte{}, false
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, false
	}
	h := sha256.New()
	h.Write(der)
	h.Write([]byte{0})
	h.Write(b)
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k, true
}

func proofVerified(k [32]byte) bool {
	verifiedProofs.mu.Lock()
	defer verifiedProofs.mu.Unlock()
	return verifiedProofs.m[k]
}

func rememberProof(k [32]byte) {
	verifiedProofs.mu.Lock()
	defer verifiedProofs.mu.Unlock()
	if len(verifiedProofs.m) >= maxCached {
		verifiedProofs.m = map[[32]byte]bool{}
	}
	verifiedProofs.m[k] = true
}
