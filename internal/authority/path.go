package authority

import (
	"fmt"
	"strings"
)

// maxPathSegments bounds a constraint path. The decoder already bounds
// nesting at 64, so a longer path can never resolve.
const maxPathSegments = 64

// parsePath splits a constraint path "$.a.b.c" into its member names.
//
// The grammar (spec-map D1) is "$" followed by one or more ".name" steps,
// each name non-empty. Steps address object members only: there is no array
// indexing, no wildcard, no quoting, and so a member whose name contains a
// dot cannot be addressed. A path outside this grammar is a constraint
// nobody can evaluate, which denies.
func parsePath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "$.") {
		return nil, fmt.Errorf("path %q does not start with \"$.\"", p)
	}
	segs := strings.Split(p[2:], ".")
	if len(segs) > maxPathSegments {
		return nil, fmt.Errorf("path %q has more than %d steps", p, maxPathSegments)
	}
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("path %q has an empty step", p)
		}
	}
	return segs, nil
}

// resolve walks segs through doc and returns the value found, or ok=false
// when any step is missing or passes through something that is not an
// object. A member present with a null value resolves (ok=true, nil).
func resolve(doc map[string]any, segs []string) (any, bool) {
	var cur any = doc
	for _, s := range segs {
		m, isObj := cur.(map[string]any)
		if !isObj {
			return nil, false
		}
		v, found := m[s]
		if !found {
			return nil, false
		}
		cur = v
	}
	return cur, true
}
