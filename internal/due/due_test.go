package due_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/partyd/party/internal/due"
)

func cond(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var (
	activated = time.Date(2026, 12, 4, 15, 30, 0, 0, time.UTC) // a Friday
	acted     = time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)   // a Tuesday
	facts     = due.Facts{
		Activated: activated,
		Act: func(h string) (time.Time, bool) {
			return acted, h == "aa11"
		},
		Evidence: func(typ string) (time.Time, bool) {
			return acted.Add(time.Hour), typ == "delivery_note"
		},
		Discharged: func(id string) (time.Time, bool) {
			return acted.Add(2 * time.Hour), id == "obl_done"
		},
		Calendar: func(name string) (due.Calendar, bool) {
			if name == "weekdays" {
				return due.Weekdays, true
			}
			if name == "DE" {
				c, _ := due.ParseCalendar([]string{"saturday", "sunday"}, []string{"2026-12-24", "2026-12-25"})
				return c, true
			}
			return due.Calendar{}, false
		},
	}
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 12, d, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name, cond string
		at         time.Time // zero: not known
		waiting    bool
		unknown    string // the code, or "-" for an unknown without a code
	}{
		{"at", `{"type":"due_at_time","at":"2026-12-20T12:00:00Z"}`, time.Date(2026, 12, 20, 12, 0, 0, 0, time.UTC), false, ""},
		// Friday 4 December: the first business day after is Monday 7.
		{"one business day after activation", `{"type":"due_at_time","business_days":{"days":1,"calendar":"weekdays"}}`, day(7), false, ""},
		{"five business days after activation", `{"type":"due_at_time","business_days":{"days":5,"calendar":"weekdays"}}`, day(11), false, ""},
		// Tuesday 8 December; 24 and 25 are holidays in "DE", 26 and 27 a weekend.
		{"business days after an act across holidays", `{"type":"due_at_time","business_days":{"days":12,"calendar":"DE","after_ref":"aa11"}}`, day(28), false, ""},
		{"business days after an act not yet appended", `{"type":"due_at_time","business_days":{"days":1,"calendar":"weekdays","after_ref":"bb22"}}`, time.Time{}, true, ""},
		{"a calendar not configured", `{"type":"due_at_time","business_days":{"days":1,"calendar":"NL"}}`, time.Time{}, false, "-"},
		{"on an act", `{"type":"due_on_event","act_ref":"aa11"}`, acted, false, ""},
		{"on an act not appended", `{"type":"due_on_event","act_ref":"cc33"}`, time.Time{}, true, ""},
		{"on evidence", `{"type":"due_on_event","evidence_type":"delivery_note"}`, acted.Add(time.Hour), false, ""},
		{"on evidence not presented", `{"type":"due_on_event","evidence_type":"inspection_report"}`, time.Time{}, true, ""},
		{"on discharge", `{"type":"due_on_discharge","obligation_id":"obl_done"}`, acted.Add(2 * time.Hour), false, ""},
		{"on a discharge to come", `{"type":"due_on_discharge","obligation_id":"obl_open"}`, time.Time{}, true, ""},
		{"all of: the latest", `{"type":"all_of","conditions":[{"type":"due_at_time","at":"2026-12-01T00:00:00Z"},{"type":"due_on_discharge","obligation_id":"obl_done"}]}`, acted.Add(2 * time.Hour), false, ""},
		{"all of: one waits", `{"type":"all_of","conditions":[{"type":"due_at_time","at":"2026-12-01T00:00:00Z"},{"type":"due_on_discharge","obligation_id":"obl_open"}]}`, time.Time{}, true, ""},
		{"an unknown type", `{"type":"due_whenever"}`, time.Time{}, false, due.ConditionUnknown},
		{"another type's fields", `{"type":"due_at_time","obligation_id":"obl_done"}`, time.Time{}, false, due.ConditionUnknown},
		{"both at and business days", `{"type":"due_at_time","at":"2026-12-20T12:00:00Z","business_days":{"days":1,"calendar":"weekdays"}}`, time.Time{}, false, due.ConditionUnknown},
		{"a nested all_of", `{"type":"all_of","conditions":[{"type":"all_of","conditions":[]},{"type":"due_at_time","at":"2026-12-01T00:00:00Z"}]}`, time.Time{}, false, due.ConditionUnknown},
		{"an all_of of one", `{"type":"all_of","conditions":[{"type":"due_at_time","at":"2026-12-01T00:00:00Z"}]}`, time.Time{}, false, due.ConditionUnknown},
		{"an unknown inside all_of", `{"type":"all_of","conditions":[{"type":"due_at_time","at":"2026-12-01T00:00:00Z"},{"type":"due_never"}]}`, time.Time{}, false, due.ConditionUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := due.Evaluate(cond(t, c.cond), facts)
			switch {
			case c.unknown != "":
				if r.Unknown == "" || r.Known || (c.unknown != "-" && r.Code != c.unknown) || (c.unknown == "-" && r.Code != "") {
					t.Fatalf("%+v, want unknown %s", r, c.unknown)
				}
			case c.waiting:
				if r.Known || r.Waiting == "" || r.Unknown != "" {
					t.Fatalf("%+v, want waiting", r)
				}
			default:
				if !r.Known || !r.At.Equal(c.at) {
					t.Fatalf("%+v, want met at %s", r, c.at)
				}
				if r.MetBy(c.at.Add(-time.Nanosecond)) || !r.MetBy(c.at) {
					t.Fatalf("MetBy around %s", c.at)
				}
			}
		})
	}
}

func TestParseCalendar(t *testing.T) {
	t.Parallel()
	if _, err := due.ParseCalendar([]string{"caturday"}, nil); err == nil {
		t.Fatal("an unknown weekday taken")
	}
	if _, err := due.ParseCalendar(nil, []string{"25/12/2026"}); err == nil {
		t.Fatal("a holiday in another format taken")
	}
	all := []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
	if _, err := due.ParseCalendar(all, nil); err == nil {
		t.Fatal("a calendar without business days taken")
	}
	c, err := due.ParseCalendar([]string{"Friday", "saturday"}, []string{"2026-12-06"})
	if err != nil {
		t.Fatal(err)
	}
	// Thursday 3 December: Friday and Saturday off, Sunday 6 a holiday.
	if got := c.After(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC), 1); !got.Equal(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("after %s", got)
	}
}

// FuzzEvaluate: any condition evaluates to exactly one of known, waiting
// or unknown, and never panics.
func FuzzEvaluate(f *testing.F) {
	f.Add(`{"type":"due_at_time","at":"2026-12-20T12:00:00Z"}`)
	f.Add(`{"type":"all_of","conditions":[{"type":"due_on_event","act_ref":"aa11"},{"type":"due_at_time","business_days":{"days":3,"calendar":"DE","after_ref":"aa11"}}]}`)
	f.Add(`{"type":"due_at_time","business_days":{"days":1e9,"calendar":"weekdays"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil {
			return
		}
		r := due.Evaluate(m, facts)
		n := 0
		for _, b := range []bool{r.Known, r.Waiting != "", r.Unknown != ""} {
			if b {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s: %+v", s, r)
		}
	})
}

func ExampleEvaluate() {
	// Due five business days after the obligation's activation, on a
	// Friday afternoon: the following Friday, at midnight UTC.
	r := due.Evaluate(map[string]any{
		"type":          "due_at_time",
		"business_days": map[string]any{"days": 5, "calendar": "weekdays"},
	}, due.Facts{
		Activated: time.Date(2026, 12, 4, 15, 30, 0, 0, time.UTC),
		Calendar: func(name string) (due.Calendar, bool) {
			return due.Weekdays, name == "weekdays"
		},
	})
	fmt.Println(r.Known, r.At.Format(time.RFC3339))
	// Output: true 2026-12-11T00:00:00Z
}

func TestBusinessDaysBeyondReach(t *testing.T) {
	t.Parallel()
	r := due.Evaluate(cond(t, `{"type":"due_at_time","business_days":{"days":100000,"calendar":"weekdays"}}`), facts)
	if r.Known || r.Code != due.ConditionUnknown {
		t.Fatalf("%+v", r)
	}
}
