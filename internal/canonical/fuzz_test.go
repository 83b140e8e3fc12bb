package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/partyd/party/internal/spectest"
)

// FuzzCanonicalize checks that whatever Decode accepts canonicalises to the
// same bytes twice, and that canonical bytes re-parse to the same value (so
// canonicalising them again is the identity). Refusals must be errors, never
// panics.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[true,false,null],"c":"\u00e9\ud83d\ude00"}`,
		`{"b":1,"a":{"d":[],"c":{}}}`, `{"a":"\ud800"}`, `{"a":1,"a":2}`, `[1,2,3]`, `"x"`,
		`{"version":1.0}`, `{"n":-9007199254740991}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := Canonicalize(data)
		if err != nil {
			return
		}
		second, err := Canonicalize(data)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("canonicalising twice differs: %q vs %q (%v)", first, second, err)
		}
		again, err := Canonicalize(first)
		if err != nil {
			t.Fatalf("canonical bytes %q do not re-parse: %v", first, err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("canonical form is not a fixed point: %q -> %q", first, again)
		}
	})
}

// FuzzTransform does the same for the general RFC 8785 transform, floats
// included.
func FuzzTransform(f *testing.F) {
	f.Add([]byte(`{"numbers":[333333333.33333329,1E30,4.50,2e-3,1e-27]}`))
	f.Add([]byte(`[5e-324,1.7976931348623157e308,-0.0]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := Transform(data)
		if err != nil {
			return
		}
		again, err := Transform(first)
		if err != nil || !bytes.Equal(first, again) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", first, again, err)
		}
	})
}

func loadOffer(b *testing.B) map[string]any {
	dir := spectest.ReferenceVectors(b)
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "off_*.json"))
	data, err := os.ReadFile(files[0])
	if err != nil {
		b.Fatal(err)
	}
	obj, err := DecodeObject(data)
	if err != nil {
		b.Fatal(err)
	}
	return obj
}

func BenchmarkContentHashOffer(b *testing.B) {
	obj := loadOffer(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ContentHash(obj); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAndHashOffer(b *testing.B) {
	dir := spectest.ReferenceVectors(b)
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "off_*.json"))
	data, _ := os.ReadFile(files[0])
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		obj, err := DecodeObject(data)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ContentHash(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeCanonical holds DecodeCanonical to its definition: it accepts
// exactly the object documents that DecodeObject accepts and that Marshal
// writes back byte for byte, with the same value.
func FuzzDecodeCanonical(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[true,false,null],"c":"é😀"}`, `{"a":1,"b":[true,false,null],"c":"\u00e9"}`,
		`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{ "a":1}`, `{"a":"\/"}`, `{"a":"\u001f"}`, `{"a":"\n"}`,
		`{"é":1,"z":2}`, `{"z":1,"é":2}`, `{"\ud83d\ude00":1,"\uffff":2}`, `{"a":-0}`, `{"a":[]}`, `[1]`,
		`{"a":{"c":1,"b":2}}`, `{"aa":1,"a":2}`, `{"a":1,"aa":2}`, "{\"a\":1}\n",
		"{\"\U0001F600\":1,\"\uFFFF\":2}", "{\"\uFFFF\":1,\"\U0001F600\":2}", // canonical by UTF-16, not by bytes; and the reverse
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeCanonical(data)
		want, werr := DecodeObject(data)
		canonical := false
		if werr == nil {
			b, err := Marshal(want)
			canonical = err == nil && bytes.Equal(b, data)
		}
		if (err == nil) != canonical {
			t.Fatalf("DecodeCanonical(%q): %v; canonical by Marshal: %v", data, err, canonical)
		}
		if err == nil {
			a, _ := Marshal(got)
			if !bytes.Equal(a, data) {
				t.Fatalf("DecodeCanonical(%q) decoded a different value: %q", data, a)
			}
		}
		if werr == nil && !canonical && !errors.Is(err, ErrNotCanonical) {
			t.Fatalf("DecodeCanonical(%q) refused well-formed bytes with %v, not ErrNotCanonical", data, err)
		}
	})
}

// BenchmarkCanonicalCheckOffer compares the ways to take in an offer's
// bytes that must be canonical: decoding alone (what a reader of trusted
// bytes does), decoding and encoding again to compare (what the carrier
// and the store did), and DecodeCanonical.
func BenchmarkCanonicalCheckOffer(b *testing.B) {
	dir := spectest.ReferenceVectors(b)
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "off_*.json"))
	raw, _ := os.ReadFile(files[0])
	data, err := Canonicalize(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeObject(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode+marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj, err := DecodeObject(data)
			if err != nil {
				b.Fatal(err)
			}
			if c, err := Marshal(obj); err != nil || !bytes.Equal(c, data) {
				b.Fatal("not canonical")
			}
		}
	})
	b.Run("DecodeCanonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeCanonical(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzDecoded: whatever Decoded accepts decodes from its canonical bytes
// to itself (readAct skips that decoding for such a document), and a
// value it refuses is one whose round trip may change it.
func FuzzDecoded(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[true,false,null],"c":"\u00e9"}`, `{"n":-9007199254740991}`,
		`{"n":1.0}`, `{"n":1.5}`, `{"n":1e2}`, `{"n":-0}`, `{"n":9007199254740993}`, `{"a":{"b":[{"c":"d"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeObject(data)
		if err != nil || !Decoded(v) {
			return
		}
		b, err := Marshal(v)
		if err != nil {
			t.Fatalf("Decoded accepts %s, which has no canonical form: %v", data, err)
		}
		again, err := DecodeObject(b)
		if err != nil || !reflect.DeepEqual(again, v) {
			t.Fatalf("Decoded accepts %s, but its canonical bytes %s decode to %v", data, b, again)
		}
	})
}

// TestDecodedRefusesWhatTheRoundTripChanges: Go values a JSON library
// makes, and number literals not in canonical form, are not Decoded.
func TestDecodedRefusesWhatTheRoundTripChanges(t *testing.T) {
	for _, v := range []any{
		float64(1), 1, int64(2), json.Number("1.0"), json.Number("01"), json.Number("1e2"), json.Number("-0"),
		json.Number("9007199254740993"), map[string]any{"a": []any{float64(3)}}, []string{"a"}, map[string]string{},
	} {
		if Decoded(v) {
			t.Errorf("Decoded(%#v) = true", v)
		}
	}
	for _, v := range []any{nil, true, "x", json.Number("-12"), map[string]any{"a": []any{json.Number("3"), "b", nil}}} {
		if !Decoded(v) {
			t.Errorf("Decoded(%#v) = false", v)
		}
	}
}
