package canonical

import (
	"bytes"
	"os"
	"path/filepath"
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
