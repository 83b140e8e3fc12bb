// Package canonical turns A202 documents into their canonical bytes and
// content hashes, and decodes untrusted JSON strictly.
//
// Two implementations agree on a record only if they agree, byte for byte,
// on the canonical form of every object (canonical model §4). The rules:
//
//   - Canonical bytes are RFC 8785 (JSON Canonicalization Scheme): members
//     sorted by their UTF-16 code units, no insignificant white space, the
//     shortest ECMAScript form for numbers, minimal string escaping.
//   - The hash input of an envelope object is its canonical form with the
//     top-level members content_hash, signatures and kernel_annotations left
//     out. The content hash is the SHA-256 of those bytes, as 64 lowercase
//     hexadecimal characters.
//
// Decoding is strict, because a parser that repairs its input lets two
// parties hash two different documents while believing they hold one. Decode
// refuses, each with a *DecodeError naming the offset and the reason:
// duplicate member names, invalid UTF-8, lone surrogates in \u escapes, a
// NUL character anywhere, numbers with a fraction or exponent (A202 carries
// amounts as strings, so a number in an A202 document is always an integer),
// integers outside ±(2^53−1), trailing data after the document, nesting
// deeper than MaxDepth, more than MaxMembers members or elements in one
// object or array, and documents larger than MaxDocumentSize. It never
// panics on any input; see the fuzz targets.
//
// Decoded values are the plain Go shapes: map[string]any, []any, string,
// bool, nil, and json.Number holding the literal as written. The same shapes
// are what Marshal accepts, together with ordinary Go values (which it passes
// through encoding/json first). Strings and WalkStrings read those shapes
// for the packages that look inside decoded documents.
package canonical

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits on what Decode accepts. A202 objects are small (the largest
// published fixture is a few KiB); these bounds leave room for large
// records while keeping a hostile document from costing more than a few
// milliseconds and a few MiB.
const (
	// MaxDocumentSize is the largest document, in bytes, Decode accepts.
	MaxDocumentSize = 1 << 20
	// MaxDepth is the deepest nesting of objects and arrays Decode accepts.
	MaxDepth = 64
	// MaxMembers is the most members one object, or elements one array, may have.
	MaxMembers = 10_000
	// MaxSafeInteger is the largest integer magnitude an A202 document may
	// carry: the I-JSON bound that every JSON implementation represents exactly.
	MaxSafeInteger = 1<<53 - 1
)

// ErrMalformed is matched by every *DecodeError (errors.Is).
var ErrMalformed = errors.New("malformed JSON document")

// DecodeError reports why a document was refused and where.
type DecodeError struct {
	Offset int    // byte offset into the input where the problem was found
	Reason string // what is wrong, in words
}

// Error says where and why.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// Options adjust Decode's limits. The zero value means the defaults above
// and the A202 integer-only number rule.
type Options struct {
	// AllowFloats accepts any finite I-JSON number, for general RFC 8785
	// use (Transform). A202 documents never need it.
	AllowFloats bool
	MaxSize     int // 0 means MaxDocumentSize
	MaxDepth    int // 0 means MaxDepth
	MaxMembers  int // 0 means MaxMembers
	// Shared lets the decoded value share its leaves, the objects and
	// arrays whose members are all strings, numbers, booleans or null,
	// with values decoded before it whose leaf had the same bytes: for a
	// caller that holds many documents and only reads them (a verifier of
	// a bundle, where every object repeats the same created_by and stream
	// objects). Nothing else changes: the value is equal to the one
	// decoded without it. A caller that modifies decoded values must not
	// set it, since a change to a shared leaf is a change to every
	// document holding it.
	Shared bool

	// canonical makes the decoder judge the order of member names for
	// DecodeCanonical (bent); other decodes, a bundle's thousands of files
	// among them, skip that work.
	canonical bool
}

// Decode parses one A202 document under the strict rules of the package.
func Decode(data []byte) (any, error) { return DecodeWith(data, Options{}) }

// DecodeObject is Decode for a document that must be a JSON object.
func DecodeObject(data []byte) (map[string]any, error) {
	return DecodeObjectWith(data, Options{})
}

// DecodeObjectWith is DecodeWith for a document that must be a JSON
// object.
func DecodeObjectWith(data []byte, opt Options) (map[string]any, error) {
	v, err := DecodeWith(data, opt)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &DecodeError{Offset: 0, Reason: "document is not a JSON object"}
	}
	return m, nil
}

// DecodeWith parses one JSON document with the given options.
func DecodeWith(data []byte, opt Options) (any, error) {
	v, _, err := decode(data, opt)
	return v, err
}

// WalkStrings calls f on every string value in v, a decoded document, at
// any depth (member names are not values). The verifier and the grader
// both look through documents for strings this way.
func WalkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, y := range x {
			WalkStrings(y, f)
		}
	case []any:
		for _, y := range x {
			WalkStrings(y, f)
		}
	}
}

// Strings returns the members of v, a decoded array of strings, and false
// when v is not an array or a member is not a string. Mandates' and
// payloads' lists of ids and names are read this way.
func Strings(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// ErrNotCanonical is DecodeCanonical's refusal of a well-formed document
// whose bytes are not its canonical form.
var ErrNotCanonical = errors.New("document is not in canonical form (RFC 8785)")

// DecodeCanonical is DecodeObject for bytes that must be the canonical
// form of the object they hold, as every A202 object on the wire and in
// the record is (what was signed is what is kept): it refuses other bytes
// with ErrNotCanonical. It is the same as comparing Marshal(DecodeObject(
// data)) with data, in one pass: the decoder notes anything canonical
// form would write otherwise (whitespace, an escape, a member name out of
// order or outside ASCII, a number not a plain integer), and only a
// document where it noted something is encoded again and compared.
func DecodeCanonical(data []byte) (map[string]any, error) {
	v, bent, err := decode(data, Options{canonical: true})
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &DecodeError{Offset: 0, Reason: "document is not a JSON object"}
	}
	if bent && !encodesTo(m, data) {
		return nil, ErrNotCanonical
	}
	return m, nil
}

// decode parses one document; bent reports that its bytes may not be the
// canonical form of its value (never false when they are not).
func decode(data []byte, opt Options) (v any, bent bool, err error) {
	if opt.MaxSize == 0 {
		opt.MaxSize = MaxDocumentSize
	}
	if opt.MaxDepth == 0 {
		opt.MaxDepth = MaxDepth
	}
	if opt.MaxMembers == 0 {
		opt.MaxMembers = MaxMembers
	}
	if len(data) > opt.MaxSize {
		return nil, false, &DecodeError{Offset: opt.MaxSize, Reason: fmt.Sprintf("document is %d bytes, over the limit of %d", len(data), opt.MaxSize)}
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	d.data, d.pos, d.opt, d.bent = data, 0, opt, false
	d.skipSpace()
	v, err = d.value(0)
	if err != nil {
		return nil, false, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, false, d.fail("trailing data after the document")
	}
	return v, d.bent, nil
}

type decoder struct {
	data []byte
	pos  int
	opt  Options
	// bent is set by anything read that canonical form writes otherwise
	// (DecodeCanonical): whitespace, an escape in a string, a member name
	// not after the one before it or not ASCII (canonical order is by
	// UTF-16 code units, which only ASCII names share with bytes), a
	// number other than a plain integer.
	bent bool

	// What a decoder keeps between documents (decoders): the strings it
	// interned, and the stacks of members and elements of the objects
	// and arrays it is inside, from which each is built at its exact size
	// once complete.
	strs    *[internSlots]interned
	nums    numbers          // the integers it decoded last, boxed
	leaves  *[leafSlots]leaf // made on the first decode with Options.Shared
	seed    maphash.Seed
	members []member
	elems   []any
}

type member struct {
	name  string
	value any
}

// interned is one slot of a decoder's table of strings: the string, and
// the same string in an interface.
type interned struct {
	s string
	v any
}

// decoders pools decoders, so that the strings they intern serve every
// document decoded after: a bundle's thousands of files repeat one
// vocabulary of member names and a few dozen values (types, states, key
// and party identifiers). The table is direct-mapped: a short string
// (maxInternLen) goes to the slot its hash names, replacing whatever was
// there, so the table never grows, whatever the input, and a frequent
// string is almost always found where it was left. Strings are
// immutable, so a value shared between documents is indistinguishable
// from a copy. The table keeps each string in an interface too, so that
// a member value read from it costs no allocation at all (a string put in
// an interface is otherwise boxed anew each time).
var decoders = sync.Pool{New: func() any {
	return &decoder{strs: new([internSlots]interned), seed: maphash.MakeSeed()}
}}

const (
	maxInternLen = 32
	internSlots  = 4096 // a power of two
)

// numbers are the short integers a decoder decoded last, each as the
// json.Number in an interface it returned (a record repeats "version": 1
// in every object), direct-mapped by their last digit and length.
type numbers [64]struct {
	lit string
	v   any
}

const maxNumberLen = 8

func numberSlot(b string) int { return (len(b)*10 + int(b[len(b)-1]-'0')) & 63 }

func (t *numbers) get(raw []byte) (any, bool) {
	if len(raw) == 0 || len(raw) > maxNumberLen || raw[len(raw)-1] < '0' || raw[len(raw)-1] > '9' {
		return nil, false
	}
	e := &t[numberSlot(string(raw))]
	return e.v, e.v != nil && e.lit == string(raw)
}

func (t *numbers) put(lit string) any {
	v := any(json.Number(lit))
	if len(lit) <= maxNumberLen {
		t[numberSlot(lit)] = struct {
			lit string
			v   any
		}{lit, v}
	}
	return v
}

// leaf is one slot of a decoder's table of shared leaves (Options.Shared):
// the hash of a leaf's bytes once they have been seen, and from their
// second sighting on the bytes themselves and the value decoded from
// them. Like the strings, the table is direct-mapped and never grows;
// a leaf seen once costs its hash only, so a record's unique leaves (an
// event's data, a signature entry) do not fill it with copies of
// themselves.
type leaf struct {
	hash uint64
	raw  string
	v    any
}

const (
	maxLeafLen = 256
	leafSlots  = 1024 // a power of two
)

// sharedLeaf returns the value of a leaf with the bytes raw, when the
// table holds one.
func (d *decoder) sharedLeaf(raw []byte) (any, uint64, bool) {
	if !d.opt.Shared || len(raw) > maxLeafLen {
		return nil, 0, false
	}
	if d.leaves == nil {
		d.leaves = new([leafSlots]leaf)
	}
	h := maphash.Bytes(d.seed, raw)
	e := &d.leaves[h&(leafSlots-1)]
	if e.v != nil && e.hash == h && e.raw == string(raw) {
		return e.v, h, true
	}
	return nil, h, false
}

// keepLeaf records the leaf raw, of hash h, decoded to v: its hash on the
// first sighting, the leaf itself on the second.
func (d *decoder) keepLeaf(raw []byte, h uint64, v any) {
	if !d.opt.Shared || len(raw) > maxLeafLen {
		return
	}
	e := &d.leaves[h&(leafSlots-1)]
	if e.v == nil && e.hash == h {
		*e = leaf{hash: h, raw: string(raw), v: v}
		return
	}
	*e = leaf{hash: h}
}

// scalar reports whether v is a string, number, boolean or null.
func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// release drops what the decoder still references of the last document
// and returns it to the pool.
func (d *decoder) release() {
	clear(d.members[:cap(d.members)])
	clear(d.elems[:cap(d.elems)])
	d.members, d.elems, d.data = d.members[:0], d.elems[:0], nil
	decoders.Put(d)
}

// intern returns b as a string in an interface, shared with every
// earlier occurrence, when it is in the table. Only valid UTF-8 is ever
// entered, so a hit needs no check.
func (d *decoder) intern(b []byte) (any, bool) {
	if len(b) > maxInternLen {
		return nil, false
	}
	e := &d.strs[maphash.Bytes(d.seed, b)&(internSlots-1)]
	if e.v != nil && e.s == string(b) {
		return e.v, true
	}
	return nil, false
}

// remember enters s in the table, in the slot its hash names, and
// returns it in an interface.
func (d *decoder) remember(s string) any {
	v := any(s)
	if len(s) <= maxInternLen {
		d.strs[maphash.String(d.seed, s)&(internSlots-1)] = interned{s, v}
	}
	return v
}

func (d *decoder) fail(format string, args ...any) error {
	return &DecodeError{Offset: d.pos, Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
			d.bent = true
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.fail("unexpected end of document")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.stringValue()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		return nil, d.fail("unexpected character %q", rune(c))
	}
}

func (d *decoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return d.fail("invalid literal, expected %s", word)
	}
	d.pos += len(word)
	return nil
}

func (d *decoder) object(depth int) (any, error) {
	if depth > d.opt.MaxDepth {
		return nil, d.fail("nesting deeper than %d", d.opt.MaxDepth)
	}
	open := d.pos
	d.pos++ // '{'
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return map[string]any{}, nil
	}
	// The members are gathered on the decoder's stack and the map is made
	// at its final size when the object closes. Duplicates are found by
	// comparing with the members gathered so far, and past smallObject
	// members through a set, so that a hostile object of MaxMembers
	// members costs no more than a map would.
	start := len(d.members)
	var seen map[string]bool
	isLeaf := true
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.fail("expected a member name")
		}
		at := d.pos
		name, err := d.string()
		if err != nil {
			return nil, err
		}
		n := len(d.members) - start
		if d.opt.canonical && !d.bent && (!ascii(name) || n > 0 && name <= d.members[len(d.members)-1].name) {
			d.bent = true
		}
		if d.duplicate(start, name, &seen) {
			return nil, &DecodeError{Offset: at, Reason: fmt.Sprintf("duplicate member name %q", name)}
		}
		if n >= d.opt.MaxMembers {
			return nil, &DecodeError{Offset: at, Reason: fmt.Sprintf("object has more than %d members", d.opt.MaxMembers)}
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.fail("expected ':' after member name")
		}
		d.pos++
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		d.members = append(d.members, member{name, v})
		isLeaf = isLeaf && scalar(v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.fail("unexpected end of document in object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			ms := d.members[start:]
			raw := d.data[open:d.pos]
			var h uint64
			if isLeaf {
				var v any
				var ok bool
				if v, h, ok = d.sharedLeaf(raw); ok {
					clear(ms)
					d.members = d.members[:start]
					return v, nil
				}
			}
			m := make(map[string]any, len(ms))
			for _, e := range ms {
				m[e.name] = e.value
			}
			clear(ms)
			d.members = d.members[:start]
			if isLeaf {
				d.keepLeaf(raw, h, m)
			}
			return m, nil
		default:
			return nil, d.fail("expected ',' or '}' in object")
		}
	}
}

// smallObject is how many members an object may have before duplicates
// are looked up in a set rather than by comparing with each.
const smallObject = 16

// duplicate reports whether name is among the members of the object whose
// members start at start on the stack.
func (d *decoder) duplicate(start int, name string, seen *map[string]bool) bool {
	ms := d.members[start:]
	if len(ms) <= smallObject {
		for _, e := range ms {
			if e.name == name {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]bool, 2*len(ms))
		for _, e := range ms {
			(*seen)[e.name] = true
		}
	}
	if (*seen)[name] {
		return true
	}
	(*seen)[name] = true
	return false
}

func (d *decoder) array(depth int) (any, error) {
	if depth > d.opt.MaxDepth {
		return nil, d.fail("nesting deeper than %d", d.opt.MaxDepth)
	}
	open := d.pos
	d.pos++ // '['
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		raw := d.data[open:d.pos]
		v, h, ok := d.sharedLeaf(raw)
		if !ok {
			v = []any{}
			d.keepLeaf(raw, h, v)
		}
		return v, nil
	}
	start := len(d.elems) // gathered on the stack, as an object's members are
	isLeaf := true
	for {
		d.skipSpace()
		if len(d.elems)-start >= d.opt.MaxMembers {
			return nil, d.fail("array has more than %d elements", d.opt.MaxMembers)
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		d.elems = append(d.elems, v)
		isLeaf = isLeaf && scalar(v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.fail("unexpected end of document in array")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			es := d.elems[start:]
			raw := d.data[open:d.pos]
			var h uint64
			if isLeaf {
				var v any
				var ok bool
				if v, h, ok = d.sharedLeaf(raw); ok {
					clear(es)
					d.elems = d.elems[:start]
					return v, nil
				}
			}
			a := make([]any, len(es))
			copy(a, es)
			clear(es)
			d.elems = d.elems[:start]
			var v any = a
			if isLeaf {
				d.keepLeaf(raw, h, v)
			}
			return v, nil
		default:
			return nil, d.fail("expected ',' or ']' in array")
		}
	}
}

func (d *decoder) string() (string, error) {
	v, err := d.stringValue()
	s, _ := v.(string)
	return s, err
}

// stringValue reads a string, as an interface holding it.
func (d *decoder) stringValue() (any, error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			b := d.data[start:d.pos]
			if v, ok := d.intern(b); ok {
				d.pos++
				return v, nil
			}
			if !utf8.Valid(b) {
				return nil, d.invalidUTF8(start)
			}
			d.pos++
			return d.remember(string(b)), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, d.fail("control character %#02x in string", c)
		}
		d.pos++
	}
	d.bent = true // an escape; canonical form writes only some, and only so
	buf := append([]byte(nil), d.data[start:d.pos]...)
	for {
		if d.pos >= len(d.data) {
			return nil, d.fail("unterminated string")
		}
		c := d.data[d.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return nil, d.invalidUTF8(start)
			}
			d.pos++
			return string(buf), nil
		case c == '\\':
			d.pos++
			if d.pos >= len(d.data) {
				return nil, d.fail("unterminated escape")
			}
			e := d.data[d.pos]
			d.pos++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := d.hex4()
				if err != nil {
					return nil, err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 {
						return nil, d.fail("lone low surrogate \\u%04x", r)
					}
					if d.pos+1 >= len(d.data) || d.data[d.pos] != '\\' || d.data[d.pos+1] != 'u' {
						return nil, d.fail("lone high surrogate \\u%04x", r)
					}
					d.pos += 2
					r2, err := d.hex4()
					if err != nil {
						return nil, err
					}
					if r2 < 0xDC00 || r2 > 0xDFFF {
						return nil, d.fail("high surrogate \\u%04x not followed by a low surrogate", r)
					}
					r = utf16.DecodeRune(r, r2)
				}
				if r == 0 {
					return nil, d.fail("NUL character in string")
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return nil, d.fail("invalid escape \\%c", e)
			}
		case c < 0x20:
			return nil, d.fail("control character %#02x in string", c)
		default:
			buf = append(buf, c)
			d.pos++
		}
	}
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (d *decoder) invalidUTF8(start int) error {
	s := d.data[start:]
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			return &DecodeError{Offset: start + i, Reason: "invalid UTF-8 in string"}
		}
		i += n
	}
	return &DecodeError{Offset: start, Reason: "invalid UTF-8 in string"}
}

func (d *decoder) hex4() (rune, error) {
	if len(d.data)-d.pos < 4 {
		return 0, d.fail("short \\u escape")
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := d.data[d.pos+i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, d.fail("invalid hex digit %q in \\u escape", rune(c))
		}
		r = r<<4 | rune(v)
	}
	d.pos += 4
	return r, nil
}

func (d *decoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.pos >= len(d.data) {
		return nil, d.fail("truncated number")
	}
	if d.data[d.pos] == '0' {
		d.pos++
		if d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			return nil, d.fail("number with a leading zero")
		}
	} else if digits() == 0 {
		return nil, d.fail("invalid number")
	}
	integer := true
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		integer = false
		d.pos++
		if digits() == 0 {
			return nil, d.fail("number with an empty fraction")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		integer = false
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, d.fail("number with an empty exponent")
		}
	}
	raw := d.data[start:d.pos]
	if v, ok := d.nums.get(raw); ok && integer && !d.opt.AllowFloats {
		return v, nil // an integer accepted before, with the same digits
	}
	lit := string(raw)
	if !d.opt.AllowFloats {
		if !integer {
			return nil, &DecodeError{Offset: start, Reason: fmt.Sprintf("number %s is not an integer (A202 carries amounts and decimals as strings)", lit)}
		}
		if lit == "-0" {
			return nil, &DecodeError{Offset: start, Reason: "negative zero"}
		}
		n, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || n > MaxSafeInteger || n < -MaxSafeInteger {
			return nil, &DecodeError{Offset: start, Reason: fmt.Sprintf("integer %s is outside ±(2^53−1)", lit)}
		}
		return d.nums.put(lit), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return nil, &DecodeError{Offset: start, Reason: fmt.Sprintf("number %s is outside the I-JSON range", lit)}
	}
	_ = f
	d.bent = true // a float, or an integer canonical form may write otherwise (-0, 1e3)
	return json.Number(lit), nil
}
