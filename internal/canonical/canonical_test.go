package canonical

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/partyd/party/internal/spectest"
)

// RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript forms.
func TestAppendixBNumbers(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		f := math.Float64frombits(tc.bits)
		got, err := Marshal(f)
		if err != nil {
			t.Errorf("%016x: %v", tc.bits, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%016x: got %s, want %s", tc.bits, got, tc.want)
		}
	}
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000} {
		if _, err := Marshal(math.Float64frombits(bits)); err == nil {
			t.Errorf("%016x: NaN and Infinity must be refused", bits)
		}
	}
}

// RFC 8785 §3.2.3: members sort by UTF-16 code units, not code points.
func TestUTF16MemberOrder(t *testing.T) {
	in := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := DecodeObject(got)
	_ = v
	order := []string{"Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign", "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh"}
	last := -1
	for _, name := range order {
		i := bytes.Index(got, []byte(name))
		if i <= last {
			t.Fatalf("member %q out of order in %s", name, got)
		}
		last = i
	}
}

// RFC 8785 §3.2.2 worked example, through the general transform.
func TestRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Transform([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// The strict A202 decoder refuses the same document: it has non-integer numbers.
	if _, err := Canonicalize([]byte(in)); err == nil {
		t.Fatal("strict decoding accepted non-integer numbers")
	}
}

func TestHostileDocuments(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"`)
			b.WriteString(strconv.FormatInt(int64(i), 36))
			b.WriteString(`":0`)
		}
		b.WriteString("}")
		return b.String()
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"duplicate keys", `{"a":1,"a":2}`, "duplicate member name"},
		{"duplicate keys after escape", `{"a":1,"\u0061":2}`, "duplicate member name"},
		{"lone high surrogate", `{"a":"\ud800"}`, "lone high surrogate"},
		{"lone low surrogate", `{"a":"\udc00x"}`, "lone low surrogate"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "invalid UTF-8"},
		{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", "invalid UTF-8"},
		{"1e400", `{"a":1e400}`, "not an integer"},
		{"float", `{"amount":3200.5}`, "not an integer"},
		{"version 1.0", `{"version":1.0}`, "not an integer"},
		{"integer over 2^53-1", `{"a":9007199254740992}`, "outside"},
		{"negative zero", `{"a":-0}`, "negative zero"},
		{"nesting 10000 deep", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), "nesting deeper"},
		{"10 MB string", `{"a":"` + strings.Repeat("x", 10<<20) + `"}`, "over the limit"},
		{"NUL in member name", `{"a\u0000b":1}`, "NUL"},
		{"raw NUL", "{\"a\x00\":1}", "control character"},
		{"100000 members", many(100000), "more than"},
		{"trailing data", `{"a":1} {"b":2}`, "trailing data"},
		{"trailing comma", `{"a":1,}`, "expected a member name"},
		{"leading zero", `{"a":01}`, "leading zero"},
		{"byte order mark", "\ufeff{}", "unexpected character"},
		{"single quotes", `{'a':1}`, "expected a member name"},
		{"unterminated", `{"a":"b`, "unterminated"},
		{"empty", ``, "unexpected end"},
		{"bad escape", `{"a":"\x"}`, "invalid escape"},
		{"NaN literal", `{"a":NaN}`, "unexpected character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestAcceptsOrdinaryDocuments(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `{"a":[1,-2,0,9007199254740991,-9007199254740991]}`,
		`{"s":"tab\there \"q\" \\ \/ \u00e9 \ud83d\ude00"}`, `  {"a" : true , "b":null}  `,
		`"just a string"`, `42`,
	} {
		if _, err := Canonicalize([]byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	got, _ := Canonicalize([]byte(`{"b":"\u001f\u007f","a":"\/"}`))
	if string(got) != `{"a":"/","b":"\u001f`+"\x7f"+`"}` {
		t.Fatalf("escaping: %s", got)
	}
}

func TestHashInputExcludesTopLevelOnly(t *testing.T) {
	obj, err := DecodeObject([]byte(`{"id":"x","content_hash":"h","signatures":[],"kernel_annotations":{},"payload":{"content_hash":"kept","signatures":"kept"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := HashInput(obj)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"id":"x","payload":{"content_hash":"kept","signatures":"kept"}}` {
		t.Fatalf("got %s", b)
	}
	if len(obj) != 5 {
		t.Fatal("HashInput modified its argument")
	}
}

// Byte equality with the record the published reference produced.
func TestReferenceVectors(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "*.json"))
	krs, _ := filepath.Glob(filepath.Join(dir, "key_records", "*.json"))
	files = append(files, krs...)
	if len(files) < 18 {
		t.Fatalf("found %d objects, want at least 18", len(files))
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := DecodeObject(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id, _ := obj["id"].(string)
		got, err := HashInput(obj)
		if err != nil {
			t.Fatal(err)
		}
		if want, err := os.ReadFile(filepath.Join(dir, "vectors", id+".hashed.bin")); err == nil {
			if !bytes.Equal(got, want) {
				t.Errorf("%s: hash input differs from the reference bytes\n got %s\nwant %s", id, got, want)
			}
			checked++
		}
		h, _ := ContentHash(obj)
		if h != obj["content_hash"] {
			t.Errorf("%s: content hash %s, object says %v", id, h, obj["content_hash"])
		}
		// Our bytes agree with an independent RFC 8785 implementation.
		ref, err := jcs.Transform(data)
		if err != nil {
			t.Fatal(err)
		}
		mine, _ := Canonicalize(data)
		if !bytes.Equal(ref, mine) {
			t.Errorf("%s: canonical bytes differ from gowebpki/jcs", id)
		}
	}
	if checked < 18 {
		t.Fatalf("compared %d hashed vectors, want 18", checked)
	}
}

// TestMarshalResultsAreOwn: Marshal writes through pooled buffers, and
// what it returns must not be one of them: a later call (or a Hash) must
// leave an earlier result as it was.
func TestMarshalResultsAreOwn(t *testing.T) {
	t.Parallel()
	first, err := Marshal(map[string]any{"a": "first", "b": []any{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := string(first)
	for i := range 100 {
		if _, err := Marshal(map[string]any{"z": strings.Repeat("y", i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := Hash(map[string]any{"z": i}); err != nil {
			t.Fatal(err)
		}
	}
	if string(first) != want {
		t.Fatalf("an earlier result changed to %s", first)
	}
}
