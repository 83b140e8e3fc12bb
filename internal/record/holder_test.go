package record

import (
	"encoding/json"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/object"
)

// A key's holder id comes from a counterparty's key record, so it may be
// anything, including shorter than the prefix it is compared with: the
// comparison says no, and never panics.
func TestIsHolderOnShortIDs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		holder, prefix string
		want           bool
	}{
		{"", "agt_", false}, {"a", "agt_", false}, {"ag", "agt_", false}, {"agt", "agt_", false},
		{"agt_", "agt_", true}, {"agt_1234", "agt_", true}, {"prn_1234", "agt_", false}, {"prn_x", "prn_", true},
	} {
		if got := isHolder(c.holder, c.prefix); got != c.want {
			t.Errorf("isHolder(%q, %q) = %v, want %v", c.holder, c.prefix, got, c.want)
		}
	}
}

// TestSignableLeavesTheViewAlone: a signature added to signable's copy
// (as signature.Sign adds one, by append) changes neither the view's
// value nor the array it holds, even when that array has room to spare.
func TestSignableLeavesTheViewAlone(t *testing.T) {
	t.Parallel()
	list := make([]any, 1, 4)
	list[0] = map[string]any{"key_id": "key_a"}
	o := object.Over(nil, map[string]any{"id": "evt_x", "signatures": list})
	m := signable(o)
	m["signatures"] = append(m["signatures"].([]any), map[string]any{"key_id": "key_b"})
	if got := o.Value()["signatures"].([]any); len(got) != 1 {
		t.Fatalf("the view's signatures: %v", got)
	}
	if spare := list[:2][1]; spare != nil {
		t.Fatalf("the view's array was written past its length: %v", spare)
	}
	if len(m["signatures"].([]any)) != 2 {
		t.Fatal("the copy did not take the signature")
	}
}

// TestViewOver: a value made only of what decoding gives is its own
// view's value, its bytes not decoded again; any other is decoded, so a
// view always holds what decoding its bytes gives.
func TestViewOver(t *testing.T) {
	t.Parallel()
	e := &Engine{}
	decoded := map[string]any{"id": "off_x", "n": json.Number("3"), "list": []any{"a", true, nil}}
	b, err := canonical.Marshal(decoded)
	if err != nil {
		t.Fatal(err)
	}
	o, err := e.viewOver(decoded, b)
	if err != nil || !sameMap(o.Value(), decoded) || string(o.Raw()) != string(b) {
		t.Fatalf("decoded form: view %v (%v)", o, err)
	}
	built := map[string]any{"id": "off_y", "n": 3}
	b, err = canonical.Marshal(built)
	if err != nil {
		t.Fatal(err)
	}
	o, err = e.viewOver(built, b)
	if err != nil || sameMap(o.Value(), built) || o.Value()["n"] != json.Number("3") {
		t.Fatalf("built form: view %v (%v)", o, err)
	}
}

// TestViewsPerEngine: an engine keeps the views it parsed, shared between
// its readers, and two engines never share one.
func TestViewsPerEngine(t *testing.T) {
	t.Parallel()
	b, err := canonical.Marshal(map[string]any{"id": "off_z"})
	if err != nil {
		t.Fatal(err)
	}
	one, two := &Engine{}, &Engine{}
	a, _ := one.parse(b)
	again, _ := one.parse(b)
	other, _ := two.parse(b)
	if a != again || a == other || !sameMap(a.Value(), again.Value()) || sameMap(a.Value(), other.Value()) {
		t.Fatal("views are not kept per engine")
	}
}
