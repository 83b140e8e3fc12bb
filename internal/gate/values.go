package gate

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/pattern"
)

// Small readers over decoded JSON (map[string]any, []any, string, bool,
// nil, json.Number). Each returns the zero value and false when the member
// is absent or of another type, so checks can fail closed without panics.

func obj(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

func member(m map[string]any, key string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m[key]
	return v, ok
}

func objAt(m map[string]any, key string) (map[string]any, bool) {
	v, _ := member(m, key)
	return obj(v)
}

func strAt(m map[string]any, key string) (string, bool) {
	v, _ := member(m, key)
	s, ok := v.(string)
	return s, ok
}

func arrAt(m map[string]any, key string) ([]any, bool) {
	v, _ := member(m, key)
	a, ok := v.([]any)
	return a, ok
}

// intAt reads an integer member. A json.Number written with a fraction or
// exponent ("1.0", "1e0") is not an integer, whatever its value.
func intAt(m map[string]any, key string) (int64, bool) {
	v, _ := member(m, key)
	return asInt(v)
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(n), ".eE") {
			return 0, false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// strings of an array member; non-string elements are dropped and reported
// through the second result.
func stringsAt(m map[string]any, key string) ([]string, bool) {
	a, ok := arrAt(m, key)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(a))
	all := true
	for _, e := range a {
		s, ok := e.(string)
		if !ok {
			all = false
			continue
		}
		out = append(out, s)
	}
	return out, all
}

// parseTime reads an RFC 3339 timestamp. The A202 form is UTC with Z
// (canonical model §3); other offsets still denote an instant, and the
// schema layer refuses the spelling, so comparisons here stay total.
func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

func timeAt(m map[string]any, key string) (time.Time, bool) {
	s, ok := strAt(m, key)
	if !ok {
		return time.Time{}, false
	}
	return parseTime(s)
}

var (
	sha256Pattern = pattern.MustCompile(`^[a-f0-9]{64}$`)
	idPattern     = pattern.MustCompile(`^[a-z]{3}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
)

// isHash reports whether s is a content hash in the one accepted form:
// 64 lowercase hexadecimal characters (canonical model §4 rule 3).
func isHash(s string) bool { return sha256Pattern.MatchString(s) }

// hasPrefixID reports whether s is an identifier with the given prefix.
func hasPrefixID(s, prefix string) bool {
	return idPattern.MatchString(s) && strings.HasPrefix(s, prefix+"_")
}

// pointer joins JSON Pointer segments (RFC 6901), escaping ~ and /.
// pointerEscaper applies RFC 6901's two escapes (built once: a Replacer
// builds its tables on first use).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func pointer(base string, segs ...any) string {
	var b strings.Builder
	b.WriteString(base)
	for _, s := range segs {
		b.WriteByte('/')
		switch x := s.(type) {
		case int:
			b.WriteString(strconv.Itoa(x))
		case string:
			if strings.ContainsAny(x, "~/") {
				b.WriteString(pointerEscaper.Replace(x))
			} else {
				b.WriteString(x)
			}
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func setOf(list ...string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// sortedKeys returns m's member names in byte order, so that problems are
// reported in the same order on every run.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// membersOutside returns the names of m's members that allowed does not
// hold, in byte order (as sortedKeys, for the order of problems).
func membersOutside(m map[string]any, allowed map[string]bool) []string {
	var out []string
	for k := range m {
		if !allowed[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
