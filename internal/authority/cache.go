package authority

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"sync/atomic"

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
// bytes. The returned document is shared: callers only read it. digest is
// the SHA-256 of those bytes, the key the proof cache takes too
// (proofKey), so that one encoding of the mandate serves both.
func readMandateCached(m map[string]any) (doc map[string]any, digest [32]byte, err error) {
	return readMandateCachedFrom(m, nil)
}

// readMandateCachedFrom is readMandateCached for a mandate whose canonical
// bytes the caller holds (Request.MandateBytes): they are hashed, not
// made again.
func readMandateCachedFrom(m map[string]any, b []byte) (doc map[string]any, digest [32]byte, err error) {
	if m == nil {
		doc, err = readMandate(m)
		return doc, digest, err
	}
	if b == nil {
		if b, err = canonical.Marshal(m); err != nil {
			doc, err = readMandate(m)
			return doc, digest, err
		}
	}
	digest = sha256.Sum256(b)
	mandateDocs.mu.Lock()
	c, ok := mandateDocs.m[digest]
	mandateDocs.mu.Unlock()
	if ok {
		return c.doc, digest, c.err
	}
	doc, err = readMandate(m)
	mandateDocs.mu.Lock()
	if len(mandateDocs.m) >= maxCached {
		mandateDocs.m = map[[32]byte]cachedDoc{}
	}
	mandateDocs.m[digest] = cachedDoc{doc: doc, err: err}
	mandateDocs.mu.Unlock()
	return doc, digest, err
}

// proofKey is the key under which the proof of the mandate whose
// canonical bytes hash to digest is remembered verified under pub.
func proofKey(digest [32]byte, pub crypto.PublicKey) ([32]byte, bool) {
	der, ok := publicDER(pub)
	if !ok {
		return [32]byte{}, false
	}
	h := sha256.New()
	h.Write(der)
	h.Write([]byte{0})
	h.Write(digest[:])
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k, true
}

// publicDER is pub's PKIX encoding, kept for the key values resolvers
// hand out again and again (a held key record's, a pinned principal's).
func publicDER(pub crypto.PublicKey) ([]byte, bool) {
	if d, ok := keyDERs.Load(pub); ok {
		return d.([]byte), true
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, false
	}
	if keyDERCount.Add(1) > maxCached {
		keyDERs.Clear()
		keyDERCount.Store(0)
	}
	keyDERs.Store(pub, der)
	return der, true
}

var (
	keyDERs     sync.Map // crypto.PublicKey → PKIX DER
	keyDERCount atomic.Int64
)

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
