package gate_test

import (
	"encoding/json"
	"testing"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
)

// strs is a decoded JSON array of strings.
func strs(v ...string) []any {
	out := []any{}
	for _, s := range v {
		out = append(out, s)
	}
	return out
}

func TestParseVersions(t *testing.T) {
	decl := func(read any, write any) map[string]any {
		return map[string]any{"read_versions": read, "write_version": write}
	}
	good := map[string]struct {
		in    any
		read  []string
		write string
	}{
		"one version":                 {decl(strs("0.1"), "0.1"), []string{"0.1"}, "0.1"},
		"reads more than it writes":   {decl(strs("0.1", "0.2"), "0.2"), []string{"0.1", "0.2"}, "0.2"},
		"zero minor":                  {decl(strs("1.0"), "1.0"), []string{"1.0"}, "1.0"},
		"zero zero":                   {decl(strs("0.0"), "0.0"), []string{"0.0"}, "0.0"},
		"multi-digit parts":           {decl(strs("10.20", "0.1"), "10.20"), []string{"10.20", "0.1"}, "10.20"},
		"order kept as declared":      {decl(strs("0.2", "0.1"), "0.1"), []string{"0.2", "0.1"}, "0.1"},
		"decoded from the wire shape": {mustDecode(t, `{"write_version":"0.1","read_versions":["0.1"]}`), []string{"0.1"}, "0.1"},
	}
	for name, c := range good {
		d, ok := gate.ParseVersions(c.in)
		if !ok {
			t.Errorf("%s: does not parse", name)
			continue
		}
		if len(d.Read) != len(c.read) || d.Write != c.write {
			t.Errorf("%s: got %+v", name, d)
			continue
		}
		for i := range d.Read {
			if d.Read[i] != c.read[i] {
				t.Errorf("%s: got %+v", name, d)
			}
		}
	}
	bad := map[string]any{
		"nil":                        nil,
		"not an object":              "0.1",
		"array":                      []any{"0.1"},
		"empty object":               map[string]any{},
		"read only":                  map[string]any{"read_versions": strs("0.1")},
		"write only":                 map[string]any{"write_version": "0.1"},
		"extra member":               map[string]any{"read_versions": strs("0.1"), "write_version": "0.1", "min_version": "0.1"},
		"extra null member":          map[string]any{"read_versions": strs("0.1"), "write_version": "0.1", "x": nil},
		"read null":                  decl(nil, "0.1"),
		"read a string":              decl("0.1", "0.1"),
		"read empty":                 decl(strs(), "0.1"),
		"read duplicate":             decl(strs("0.1", "0.1"), "0.1"),
		"read number":                decl([]any{json.Number("0.1")}, "0.1"),
		"read float":                 decl([]any{0.1}, "0.1"),
		"read nested array":          decl([]any{strs("0.1")}, "0.1"),
		"write null":                 decl(strs("0.1"), nil),
		"write number":               decl(strs("0.1"), json.Number("0.1")),
		"write array":                decl(strs("0.1"), strs("0.1")),
		"write not read":             decl(strs("0.1"), "0.2"),
		"write not read, wider read": decl(strs("0.1", "0.2"), "0.3"),
	}
	for _, v := range []string{
		"0.1.0", "0", "1", "", "0.", ".1", "00.1", "0.01", "01.1", "1.00",
		"v0.1", "0.1 ", " 0.1", "0.1\n", "0,1", "0.-1", "-0.1", "+0.1",
		"0.1a", "0x1.1", "１.１", "0.1-rc1",
	} {
		bad["read holds "+v] = decl(strs("0.1", v), "0.1")
		bad["write is "+v] = decl(strs("0.1", v), v)
	}
	for name, v := range bad {
		if d, ok := gate.ParseVersions(v); ok {
			t.Errorf("%s: parses as %+v", name, d)
		}
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDeclarationTable runs gate.Declaration both ways: each accepted
// case, and each refusal as the one code of binding §4.3.
func TestDeclarationTable(t *testing.T) {
	local := map[string]any{"read_versions": strs("0.1"), "write_version": "0.1"}
	entry := func(mut func(e map[string]any)) map[string]any {
		e := map[string]any{
			"uri": gate.ExtensionURI, "description": "Exchanges A202 commercial objects.", "required": true,
			"params": map[string]any{"read_versions": strs("0.1"), "write_version": "0.1"},
		}
		if mut != nil {
			mut(e)
		}
		return map[string]any{"extensions": []any{e}}
	}
	params := func(read any, write any) func(map[string]any) {
		return func(e map[string]any) { e["params"] = map[string]any{"read_versions": read, "write_version": write} }
	}
	cases := []struct {
		name   string
		local  any
		card   any
		accept bool
	}{
		{"as declared", local, entry(nil), true},
		{"required false", local, entry(func(e map[string]any) { e["required"] = false }), true},
		{"required absent (a2a-go omitempty)", local, entry(func(e map[string]any) { delete(e, "required") }), true},
		{"no description", local, entry(func(e map[string]any) { delete(e, "description") }), true},
		{"peer reads more", local, entry(params(strs("0.2", "0.1"), "0.1")), true},
		{"we read more", map[string]any{"read_versions": strs("0.1", "0.2"), "write_version": "0.1"}, entry(nil), true},
		{"other extensions beside", local, map[string]any{"extensions": []any{
			map[string]any{"uri": "https://example.invalid/ext", "required": "yes", "params": "anything"},
			entry(nil)["extensions"].([]any)[0],
		}}, true},

		{"required a string", local, entry(func(e map[string]any) { e["required"] = "true" }), false},
		{"required null", local, entry(func(e map[string]any) { e["required"] = nil }), false},
		{"required a number", local, entry(func(e map[string]any) { e["required"] = json.Number("1") }), false},
		{"params absent", local, entry(func(e map[string]any) { delete(e, "params") }), false},
		{"params extra member", local, entry(func(e map[string]any) {
			e["params"] = map[string]any{"read_versions": strs("0.1"), "write_version": "0.1", "note": "x"}
		}), false},
		{"params read duplicated", local, entry(params(strs("0.1", "0.1"), "0.1")), false},
		{"params leading zero major", local, entry(params(strs("0.1", "00.1"), "0.1")), false},
		{"params leading zero minor", local, entry(params(strs("0.1", "0.01"), "0.1")), false},
		{"params three-part write", local, entry(params(strs("0.1"), "0.1.0")), false},
		{"peer writes what it does not read", map[string]any{"read_versions": strs("0.1", "0.2"), "write_version": "0.1"}, entry(params(strs("0.1"), "0.2")), false},
		{"peer writes what we do not read", local, entry(params(strs("0.1", "0.2"), "0.2")), false},
		{"peer does not read what we write", local, entry(params(strs("0.2"), "0.2")), false},
		{"local writes what it does not read", map[string]any{"read_versions": strs("0.1"), "write_version": "0.2"}, entry(params(strs("0.1", "0.2"), "0.1")), false},
		{"local extra member", map[string]any{"read_versions": strs("0.1"), "write_version": "0.1", "x": true}, entry(nil), false},
		{"local leading zero", map[string]any{"read_versions": strs("0.01"), "write_version": "0.01"}, entry(nil), false},
		{"card absent", local, nil, false},
		{"no extensions", local, map[string]any{}, false},
		{"extensions not an array", local, map[string]any{"extensions": entry(nil)}, false},
		{"uri differs", local, entry(func(e map[string]any) { e["uri"] = gate.ExtensionURI + "/" }), false},
	}
	for _, c := range cases {
		j := gate.Declaration(c.local, c.card)
		if c.accept {
			expectCodes(t, c.name, j)
			continue
		}
		expectCodes(t, c.name, j, reason.ExtensionUnsupported)
		if len(j.Problems) != 1 {
			t.Errorf("%s: %d problems, want the one refusal: %s", c.name, len(j.Problems), firstProblems(j, 4))
		}
	}
}
