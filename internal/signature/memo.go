package signature

import "sync"

// A verifier's memory of the ES256 signatures it accepted.
//
// An instance checks some signatures twice within one step: when it
// stores the answer to its acceptance (record's settleCommitted), the
// answer's countersignature and agreement are checked by the step's own
// checks and again by the verifier's rules over the record they extend,
// which run beside them. A Memo lets the second check find the first's
// answer. The engine holds one Memo for its life and hands it to both
// (VerifyEntryOver's and the verifier's Options.Memo); nothing else shares
// it. A process that runs two instances (the benchmarks and tests run
// both parties in one) gives each its own, so that no instance is spared
// work by what another checked (docs/performance.md, "Design facts behind the numbers").
//
// The key is the whole of what decides the answer: the public key (its
// uncompressed point), the digest of the signing input and r‖s, compared
// byte for byte, never a hash of them, so no input can be taken for
// another. Only acceptance is kept: a signature refused is checked in full
// each time (and then by checkEntry, which says why). ECDSA verification
// is a function of these three values, so an answer from memory is the
// answer the arithmetic gives. Nothing else is remembered: the key an
// entry names is resolved, and its algorithm and the entry's purpose
// checked, before the memory is asked, on every call; whether the key was
// live when it signed is the caller's check, made every time as well. The
// memory holds the last memoMax acceptances, first in first out: what it
// saves is repeats within a step, not a record's history.

// memoMax is how many accepted signatures a Memo holds (about 400 KiB
// when full).
const memoMax = 1024

// memoKey is an accepted signature: the key's uncompressed P-256 point,
// the SHA-256 digest of the signing input, and r‖s.
type memoKey struct {
	point  [65]byte
	digest [32]byte
	sig    [64]byte
}

// Memo remembers the ES256 signatures one verifier accepted. The zero
// value is empty and ready; a nil *Memo remembers nothing. It is safe for
// concurrent use.
type Memo struct {
	mu   sync.Mutex
	set  map[memoKey]struct{}
	ring []memoKey // insertion order; ring[next] is the oldest once full
	next int
}

func (m *Memo) has(k *memoKey) bool {
	m.mu.Lock()
	_, ok := m.set[*k]
	m.mu.Unlock()
	return ok
}

func (m *Memo) add(k *memoKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.set[*k]; ok {
		return
	}
	if m.set == nil {
		m.set = make(map[memoKey]struct{}, memoMax)
		m.ring = make([]memoKey, 0, memoMax)
	}
	if len(m.ring) < memoMax {
		m.ring = append(m.ring, *k)
	} else {
		delete(m.set, m.ring[m.next])
		m.ring[m.next] = *k
		m.next = (m.next + 1) % memoMax
	}
	m.set[*k] = struct{}{}
}
