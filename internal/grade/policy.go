package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/store"
)

// Minimum is a minimum band per dimension.
type Minimum map[string]int

// ParseMinimum reads "A=1" items (a dimension letter and a band 0 to 3).
func ParseMinimum(items []string) (Minimum, error) {
	m := Minimum{}
	for _, it := range items {
		for _, part := range strings.Split(it, ",") {
			d, b, ok := strings.Cut(strings.TrimSpace(part), "=")
			n, err := strconv.Atoi(b)
			if !ok || err != nil || n < 0 || n > 3 || !validDimension(d) {
				return nil, fmt.Errorf("grade: %q is not DIMENSION=BAND (A to E, 0 to 3)", part)
			}
			m[d] = n
		}
	}
	return m, nil
}

func validDimension(d string) bool {
	for _, x := range DimensionNames {
		if d == x {
			return true
		}
	}
	return false
}

// String renders the minimum as "A=1,C=1".
func (m Minimum) String() string {
	parts := make([]string, 0, len(m))
	for d, b := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", d, b))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Policy is the minimum-grade policy of this organisation's mandates
// (authority.Policy; see the package documentation). Grades enter the
// store only once checked (issued here, or imported after Check).
type Policy struct {
	Store *store.Store
	Clock func() time.Time
}

// Deny implements authority.Policy.
func (p Policy) Deny(ctx context.Context, mandateID string, act map[string]any) []string {
	min, err := p.Store.MinimumGrade(ctx, mandateID)
	if err != nil {
		return []string{fmt.Sprintf("its minimum grade cannot be read: %v", err)}
	}
	if len(min) == 0 {
		return nil
	}
	cp, _ := act["counterparty_organization_id"].(string)
	why := p.meets(ctx, cp, Minimum(min))
	if why == "" {
		return nil
	}
	return []string{fmt.Sprintf("it requires a grade of at least %s of the counterparty: %s", Minimum(min), why)}
}

// meets says why org does not meet min ("" when it does), by the latest
// grade held about it.
func (p Policy) meets(ctx context.Context, org string, min Minimum) string {
	if org == "" {
		return "the act names no counterparty"
	}
	gs, err := p.Store.GradesAbout(ctx, org)
	if err != nil {
		return err.Error()
	}
	if len(gs) == 0 {
		return fmt.Sprintf("no grade about %s is held (unassessed is not a pass)", org)
	}
	latest := gs[len(gs)-1]
	doc, err := canonical.DecodeObject(latest.Body)
	if err != nil {
		return err.Error()
	}
	now := time.Now()
	if p.Clock != nil {
		now = p.Clock()
	}
	// The signature was verified when the grade was stored; scope, expiry
	// and coverage are read again at the moment of the act.
	if j := gate.Grade(doc, gate.Options{Now: now}); !j.Accepted() {
		return fmt.Sprintf("the latest grade about %s (%s) is not relied on: %s", org, latest.DeterminationID, j.Err())
	}
	if st, _ := doc["status"].(string); st != "active" {
		return fmt.Sprintf("the latest grade about %s (%s) is %s", org, latest.DeterminationID, st)
	}
	dims, _ := doc["dimensions"].(map[string]any)
	var short []string
	for _, d := range DimensionNames {
		want, ok := min[d]
		if !ok {
			continue
		}
		res, _ := dims[d].(map[string]any)
		if res == nil {
			short = append(short, d+" is unassessed")
			continue
		}
		band, ok := bandOf(res["band"])
		if !ok || band < want {
			short = append(short, fmt.Sprintf("%s is band %v", d, res["band"]))
		}
	}
	if len(short) > 0 {
		return fmt.Sprintf("in the latest grade about %s (%s), %s", org, latest.DeterminationID, strings.Join(short, ", "))
	}
	return ""
}

// bandOf reads a band as decoded (a JSON number, or an int as built).
func bandOf(v any) (int, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	case int:
		return n, true
	case int64:
		return int(n), true
	}
	return 0, false
}
