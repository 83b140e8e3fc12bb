package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/protocol"
)

// Accessors over decoded JSON. A bundle is hostile input: every member may
// be missing or of the wrong type, and each accessor says so with its
// second result instead of panicking.

func objAt(m map[string]any, k string) (map[string]any, bool) {
	v, ok := m[k].(map[string]any)
	return v, ok
}

func strAt(m map[string]any, k string) (string, bool) {
	v, ok := m[k].(string)
	return v, ok
}

func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

// objectType and eventType read an object's type and an event's type as
// the protocol's named types, so that a comparison with one names a
// protocol constant; "" when absent or not a string.
func objectType(o map[string]any) protocol.ObjectType {
	return protocol.ObjectType(str(o, "object_type"))
}

func eventType(payload map[string]any) protocol.EventType {
	return protocol.EventType(str(payload, "event_type"))
}

func arrAt(m map[string]any, k string) ([]any, bool) {
	v, ok := m[k].([]any)
	return v, ok
}

func isNull(m map[string]any, k string) bool {
	v, present := m[k]
	return present && v == nil
}

// intAt reads an integer member: a json.Number holding an integer (the
// form canonical.Decode gives) or a Go integer (objects built in memory).
func intAt(m map[string]any, k string) (int64, bool) {
	return asInt(m[k])
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
}

// timeAt reads a timestamp member in party's one accepted form.
func timeAt(m map[string]any, k string) (time.Time, bool) {
	s, ok := strAt(m, k)
	if !ok {
		return time.Time{}, false
	}
	t, err := envelope.ParseTimestamp(s)
	return t, err == nil
}

// show renders a member value for a detail: strings quoted, absent as
// "absent", anything else by its JSON kind.
func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%v", v)
}

// short shortens a hash for a detail line.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
