package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Marshal returns the RFC 8785 canonical bytes of v. v is a decoded value
// (map[string]any, []any, string, bool, nil, json.Number) or any value
// encoding/json can marshal, which is first turned into that form.
func Marshal(v any) ([]byte, error) {
	// Written to a pooled buffer and copied out once at its final size:
	// growing a fresh buffer by doubling allocated about three times the
	// bytes of an envelope object.
	buf := hashBufs.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.Reset()
	if err := encode(buf, v); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// encodesTo reports whether v's canonical bytes are data.
func encodesTo(v any, data []byte) bool {
	buf := hashBufs.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.Reset()
	return encode(buf, v) == nil && bytes.Equal(buf.Bytes(), data)
}

// Canonicalize decodes data strictly (see Decode) and returns its canonical
// bytes.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// Transform is general RFC 8785: it accepts any finite I-JSON number, not
// only integers. A202 code uses Canonicalize; Transform exists so that the
// number formatting can be tested against RFC 8785 Appendix B.
func Transform(data []byte) ([]byte, error) {
	v, err := DecodeWith(data, Options{AllowFloats: true})
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// Excluded lists the top-level members that are not part of an envelope
// object's hash input (canonical model §4 rule 2).
var Excluded = []string{"content_hash", "signatures", "kernel_annotations"}

// excluded reports whether a top-level member is left out of the hash
// input (Excluded).
func excluded(name string) bool {
	return name == "content_hash" || name == "signatures" || name == "kernel_annotations"
}

// HashInput returns the canonical bytes of obj without the top-level members
// content_hash, signatures and kernel_annotations: the bytes whose SHA-256 is
// the content hash, and the first part of every signing input.
func HashInput(obj map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(1024) // most envelope objects' hash input fits
	if err := encodeObject(&buf, obj, true); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// AppendHashInput appends HashInput(obj) to dst and returns the extended
// slice, for a caller that hashes many objects through one buffer of its
// own. On error dst is returned unextended.
func AppendHashInput(dst []byte, obj map[string]any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := encodeObject(buf, obj, true); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// AppendString appends the RFC 8785 form of s (quoted, minimally
// escaped) to dst. A string that is not valid UTF-8 has no canonical form
// and is refused.
func AppendString(dst []byte, s string) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := encodeString(buf, s); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// ContentHash returns the content hash of an envelope object: the SHA-256,
// as 64 lowercase hexadecimal characters, of HashInput(obj).
func ContentHash(obj map[string]any) (string, error) {
	b, err := HashInput(obj)
	if err != nil {
		return "", err
	}
	return SHA256Hex(b), nil
}

// Hash returns the SHA-256 of the canonical bytes of v as lowercase hex: the
// form of terms_hash, action_hash and every other hash of a whole value.
func Hash(v any) (string, error) {
	// The canonical bytes are only hashed, so they are written to a
	// pooled buffer rather than to a fresh one per call.
	buf := hashBufs.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.Reset()
	if err := encode(buf, v); err != nil {
		return "", err
	}
	return SHA256Hex(buf.Bytes()), nil
}

// hashBufs holds Hash's and Marshal's buffers; one grown past
// maxPooledBuf by a large value is dropped rather than kept for the rest
// of the process.
var hashBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putBuf(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuf {
		hashBufs.Put(buf)
	}
}

const maxPooledBuf = 64 << 10

// SHA256Hex returns the SHA-256 of b as 64 lowercase hexadecimal characters.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func encode(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		return encodeString(buf, x)
	case json.Number:
		return encodeNumber(buf, string(x))
	case int:
		return encodeInt(buf, int64(x))
	case int64:
		return encodeInt(buf, x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("canonical: %v is not a JSON number", x)
		}
		s, err := jcs.NumberToJSON(x)
		if err != nil {
			return fmt.Errorf("canonical: %w", err)
		}
		buf.WriteString(s)
	case map[string]any:
		return encodeObject(buf, x, false)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encode(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeString(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case json.RawMessage:
		w, err := DecodeWith(x, Options{AllowFloats: true})
		if err != nil {
			return err
		}
		return encode(buf, w)
	default:
		// Structs and other Go values: let encoding/json describe them, then
		// canonicalise what it wrote.
		raw, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("canonical: %w", err)
		}
		w, err := DecodeWith(raw, Options{AllowFloats: true})
		if err != nil {
			return err
		}
		return encode(buf, w)
	}
	return nil
}

// Decoded reports whether v is made only of the values DecodeObject makes
// (maps, slices, strings, booleans, nil, and json.Number holding an
// integer literal in the form Marshal writes it), so that decoding what
// Marshal writes of v gives v again: a caller that normalises a document
// by that round trip may skip the decoding half (the encoding half still
// refuses what has no canonical form).
func Decoded(v any) bool {
	switch x := v.(type) {
	case nil, bool, string:
		return true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return err == nil && n <= MaxSafeInteger && n >= -MaxSafeInteger && strconv.FormatInt(n, 10) == string(x)
	case map[string]any:
		for _, e := range x {
			if !Decoded(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !Decoded(e) {
				return false
			}
		}
		return true
	}
	return false
}

func encodeInt(buf *bytes.Buffer, n int64) error {
	if n > MaxSafeInteger || n < -MaxSafeInteger {
		return fmt.Errorf("canonical: integer %d is outside ±(2^53−1)", n)
	}
	buf.WriteString(strconv.FormatInt(n, 10))
	return nil
}

func encodeNumber(buf *bytes.Buffer, lit string) error {
	// An integer literal in the safe range is already in ECMAScript form
	// once a leading minus on zero is dropped.
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil && n <= MaxSafeInteger && n >= -MaxSafeInteger {
		buf.WriteString(strconv.FormatInt(n, 10))
		return nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("canonical: number %s is outside the I-JSON range", lit)
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return fmt.Errorf("canonical: %w", err)
	}
	buf.WriteString(s)
	return nil
}

const hexDigits = "0123456789abcdef"

func encodeString(buf *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("canonical: string is not valid UTF-8")
	}
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hexDigits[c>>4])
			buf.WriteByte(hexDigits[c&0xF])
		}
		start = i + 1
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
	return nil
}

// encodeObject writes m's canonical form; top leaves out the members
// excluded from an envelope object's hash input.
func encodeObject(buf *bytes.Buffer, m map[string]any, top bool) error {
	// The names are sorted in a buffer on the stack: A202 objects have a
	// dozen members or so, and a slice made per object was a third of the
	// allocations of hashing a record.
	var names [32]string
	keys := names[:0]
	ascii := true
	for k := range m {
		if top && excluded(k) {
			continue
		}
		keys = append(keys, k)
		if ascii {
			for i := 0; i < len(k); i++ {
				if k[i] >= 0x80 {
					ascii = false
					break
				}
			}
		}
	}
	if ascii {
		// For ASCII, byte order is UTF-16 code unit order.
		slices.Sort(keys)
	} else {
		slices.SortFunc(keys, compareUTF16)
	}
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := encodeString(buf, k); err != nil {
			return err
		}
		buf.WriteByte(':')
		if err := encode(buf, m[k]); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// compareUTF16 orders member names by their UTF-16 code units, as RFC 8785
// §3.2.3 requires. UTF-8 byte order differs from it only for characters
// above U+FFFF against those in U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	ua := utf16.Encode([]rune(a))
	ub := utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}
