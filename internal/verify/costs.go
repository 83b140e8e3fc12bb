package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/signature"
)

// What a large record costs, and the helpers that keep it down. The
// report is the same without them; they decide only how much is
// computed twice, allocated and held (docs/performance.md, "party verify
// end to end").
//
// Every object is canonicalised once: the bytes serve its content hash and
// then, unchanged, the signing input of each of its signatures
// ((*signature.Memo).VerifySignaturesOver), so the hash input is never built
// twice. The bytes live in a pooled buffer for as long as the object is
// examined and are not kept: the report needs the hash, not the bytes.

// hashBufs holds buffers for hash inputs.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooled bounds the buffers returned to the pool, so that one huge
// object does not keep a huge buffer alive for the rest of the process.
const maxPooled = 64 << 10

// hashInput sets o's recomputed content hash (or hashErr) and returns its
// hash input, valid until release is called.
func hashInput(o *object) (in []byte, release func()) {
	bp := hashBufs.Get().(*[]byte)
	in, err := canonical.AppendHashInput((*bp)[:0], o.val)
	if err != nil {
		o.hashErr = err
	} else {
		// The recomputed hash is almost always the declared one, whose
		// string the object already holds.
		sum := sha256.Sum256(in)
		var h [64]byte
		hex.Encode(h[:], sum[:])
		if o.declared == string(h[:]) {
			o.recomputed = o.declared
		} else {
			o.recomputed = string(h[:])
		}
	}
	return in, func() {
		if cap(in) <= maxPooled {
			*bp = in[:0]
			hashBufs.Put(bp)
		}
	}
}

// allVerify reports whether every signature of o verifies and o carries
// its type's minimum count, over in, o's hash input: what
// signature.VerifySignatures says, without encoding o again. An object
// with no canonical form has no hash input to reuse.
func (r *run) allVerify(o *object, in []byte) bool {
	if o.hashErr != nil {
		return signature.VerifySignatures(o.val, r.in.Keys) == nil
	}
	return r.opt.Memo.VerifySignaturesOver(o.val, in, r.in.Keys) == nil
}

// purposesRefusing returns the purposes allowed for objectType when
// purpose is not among them, and nil when the purpose is allowed or the
// type has no row in the table (signature.AllowedPurposes, whose copy is
// made only for a refusal).
func purposesRefusing(objectType, purpose string) []string {
	if signature.PurposeAllowed(objectType, purpose) {
		return nil
	}
	return signature.AllowedPurposes(objectType)
}

// refKeys returns, sorted, the members of m that evidenceRefs has to look
// into: those holding evidence references and those holding an object or
// an array, where references can sit. Every other member holds a scalar,
// in which the walk finds nothing, so leaving it out changes neither the
// checks nor their order, and spares sorting every member of every object.
func refKeys(m map[string]any) []string {
	var out []string
	for k, v := range m {
		switch v.(type) {
		case map[string]any, []any:
			out = append(out, k)
		default:
			if evidenceRefMembers[k] {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// detailTable remembers recent details, so that the report holds one
// string for each detail that many checks repeat word for word (a valid
// signature under a key for a purpose, a signature count, a transition):
// in a large record, half the bytes of all details. It is direct-mapped
// and never grows: a detail goes to the slot its hash names. Its size
// follows the record's (a countersigner's working set of tens of objects
// needs a few dozen slots, not detailSlots).
type detailTable struct {
	seed  maphash.Seed
	slots []string // a power of two long
}

const (
	detailSlots  = 4096 // at most; a power of two
	maxDedupeLen = 256
)

// dedupe returns detail, or an equal string this run or fork already put
// in a check.
func (r *run) dedupe(detail string) string {
	if detail == "" || len(detail) > maxDedupeLen {
		return detail
	}
	if r.details == nil {
		n := 64
		for n < detailSlots && n < 4*len(r.objs) {
			n *= 2
		}
		r.details = &detailTable{seed: maphash.MakeSeed(), slots: make([]string, n)}
	}
	e := &r.details.slots[maphash.String(r.details.seed, detail)&uint64(len(r.details.slots)-1)]
	if *e == detail {
		return *e
	}
	*e = detail
	return detail
}

// indexedNames are the names of the per-signature checks of an object's
// first signatures, made once instead of once per check.
var indexedNames = func() map[string][]string {
	m := map[string][]string{}
	for _, base := range []string{"signature", "key_status_at_signing"} {
		for i := range 4 {
			m[base] = append(m[base], fmt.Sprintf("%s[%d]", base, i))
		}
	}
	return m
}()

// indexed returns base[i], the name of the check of signature i.
func indexed(base string, i int) string {
	if names := indexedNames[base]; i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s[%d]", base, i)
}

// validDetails holds the detail of a valid signature, which says only
// under which key and for which purpose it is valid: one string for each
// pair, however many signatures share it. The examining workers share it.
type validDetails struct {
	mu sync.Mutex
	m  map[[2]string]string
}

func (v *validDetails) detail(sc sigCheck) string {
	k := [2]string{sc.keyID, sc.purpose}
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.m[k]
	if !ok {
		d = validDetail(sc)
		v.m[k] = d
	}
	return d
}
