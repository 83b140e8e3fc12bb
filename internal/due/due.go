// Package due evaluates an obligation's due condition (obligation §4): when
// the duty falls due, read from the record alone and the business
// calendars this instance knows. It is pure: the caller hands it the facts
// of the record ([Facts]) and gets back the instant the condition is met, or
// what it still waits on. Both parties evaluate the same record, so both
// find the same instant; nothing about it is appended (see
// docs/record-protocol.md, "Nothing waits forever (issue 39)": due and
// overdue are views,
// and obligation.due is not a transaction event).
//
// # The conditions
//
//   - due_at_time with at: met at that instant.
//   - due_at_time with business_days {days, calendar, after_ref}: met at
//     00:00 UTC of the days-th business day of the named calendar after
//     the UTC date of the reference, which is the act after_ref names (the
//     event with that content hash) or, with no after_ref, the
//     obligation's activation. A calendar this instance does not know
//     leaves the condition unevaluated (Result.Unknown), never guessed.
//   - due_on_event with act_ref: met when the event with that content hash
//     was appended (its occurred_at); with evidence_type: when evidence of
//     that registered type was first presented in the record (the
//     evidence's created_at; every object a record holds was verified as
//     it was received).
//   - due_on_discharge: met when the named obligation was discharged (its
//     acceptance recorded; a remainder it named carries the rest).
//   - all_of: met when every condition is, at the latest of their instants.
//
// An unknown type, a nested all_of, or a registered type with another's
// fields is A202-OBLIGATION-CONDITION-UNKNOWN at evaluation too, as the
// specification asks (§4: enforced at validation and independently at
// evaluation): such an obligation never becomes due.
package due

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Facts are what a record says, looked up by the evaluation. A nil
// function knows nothing.
type Facts struct {
	// Activated is when the obligation was activated (its
	// obligation.activated event's occurred_at).
	Activated time.Time
	// Act returns when the event with content hash h was appended.
	Act func(h string) (time.Time, bool)
	// Evidence returns when evidence of type t was first presented.
	Evidence func(t string) (time.Time, bool)
	// Discharged returns when obligation id was discharged.
	Discharged func(id string) (time.Time, bool)
	// Calendar returns the business calendar named name.
	Calendar func(name string) (Calendar, bool)
}

// Result is what the evaluation found.
type Result struct {
	// Known says At is the instant the condition is met (perhaps still in
	// the future: a time condition is known before it passes).
	Known bool
	At    time.Time
	// Waiting says, when not Known, what the condition waits on (an act,
	// evidence, a discharge).
	Waiting string
	// Unknown, when set, says why the condition cannot be evaluated here
	// (a condition type not registered, a calendar not configured); Code
	// is the registered refusal code when there is one.
	Unknown string
	Code    string
}

// MetBy reports whether the condition is met at now.
func (r Result) MetBy(now time.Time) bool { return r.Known && !now.Before(r.At) }

// ConditionUnknown is the registered code for an unevaluable condition.
const ConditionUnknown = "A202-OBLIGATION-CONDITION-UNKNOWN"

// fields are each leaf type's members (the registry is closed: §4).
var fields = map[string][]string{
	"due_at_time":      {"type", "at", "business_days"},
	"due_on_event":     {"type", "act_ref", "evidence_type"},
	"due_on_discharge": {"type", "obligation_id"},
}

// Evaluate evaluates cond against the record's facts.
func Evaluate(cond map[string]any, f Facts) Result {
	if s, _ := cond["type"].(string); s == "all_of" {
		if len(cond) != 2 {
			return unknown("all_of carries type and conditions only")
		}
		list, _ := cond["conditions"].([]any)
		if len(list) < 2 {
			return unknown("all_of lists at least two conditions")
		}
		out := Result{Known: true}
		var waiting []string
		for _, c := range list {
			m, ok := c.(map[string]any)
			if !ok {
				return unknown("an all_of condition is not an object")
			}
			if t, _ := m["type"].(string); t == "all_of" {
				return unknown("all_of does not nest")
			}
			r := leaf(m, f)
			switch {
			case r.Unknown != "":
				return r
			case !r.Known:
				waiting = append(waiting, r.Waiting)
			case r.At.After(out.At):
				out.At = r.At
			}
		}
		if len(waiting) > 0 {
			return Result{Waiting: strings.Join(waiting, "; ")}
		}
		return out
	}
	return leaf(cond, f)
}

func leaf(c map[string]any, f Facts) Result {
	typ, _ := c["type"].(string)
	allowed, ok := fields[typ]
	if !ok {
		return unknown(fmt.Sprintf("condition type %q is not registered", typ))
	}
	for k := range c {
		if !slices.Contains(allowed, k) {
			return unknown(fmt.Sprintf("%s carries %q, a member of another type", typ, k))
		}
	}
	switch typ {
	case "due_at_time":
		at, hasAt := c["at"].(string)
		bd, hasBD := c["business_days"].(map[string]any)
		switch {
		case hasAt == hasBD:
			return unknown("due_at_time carries exactly one of at or business_days")
		case hasAt:
			t, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				return unknown(fmt.Sprintf("due_at_time at %q is not a timestamp", at))
			}
			return Result{Known: true, At: t.UTC()}
		}
		return businessDays(bd, f)
	case "due_on_event":
		ref, hasRef := c["act_ref"].(string)
		et, hasET := c["evidence_type"].(string)
		switch {
		case hasRef == hasET:
			return unknown("due_on_event carries exactly one of act_ref or evidence_type")
		case hasRef:
			if f.Act != nil {
				if t, ok := f.Act(ref); ok {
					return Result{Known: true, At: t.UTC()}
				}
			}
			return Result{Waiting: "the act " + short(ref)}
		}
		if f.Evidence != nil {
			if t, ok := f.Evidence(et); ok {
				return Result{Known: true, At: t.UTC()}
			}
		}
		return Result{Waiting: "evidence of type " + et}
	default: // due_on_discharge
		id, _ := c["obligation_id"].(string)
		if id == "" {
			return unknown("due_on_discharge names no obligation")
		}
		if f.Discharged != nil {
			if t, ok := f.Discharged(id); ok {
				return Result{Known: true, At: t.UTC()}
			}
		}
		return Result{Waiting: "the discharge of " + id}
	}
}

func businessDays(bd map[string]any, f Facts) Result {
	days, ok := number(bd["days"])
	name, _ := bd["calendar"].(string)
	if !ok || days < 1 || days > 1e6 || days != float64(int(days)) || name == "" {
		return unknown("business_days is {days ≥ 1, calendar}")
	}
	var cal Calendar
	if f.Calendar != nil {
		cal, ok = f.Calendar(name)
	} else {
		ok = false
	}
	if !ok {
		return Result{Unknown: fmt.Sprintf("the business calendar %q is not configured on this instance", name)}
	}
	from := f.Activated
	if ref, has := bd["after_ref"].(string); has {
		t, found := time.Time{}, false
		if f.Act != nil {
			t, found = f.Act(ref)
		}
		if !found {
			return Result{Waiting: "the act " + short(ref)}
		}
		from = t
	}
	if from.IsZero() {
		return Result{Waiting: "the obligation's activation"}
	}
	at := cal.After(from, int(days))
	if at.IsZero() {
		return unknown(fmt.Sprintf("%v business days of %q fall more than twenty years ahead", days, name))
	}
	return Result{Known: true, At: at}
}

// number reads a JSON number however it was decoded.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func unknown(why string) Result { return Result{Unknown: why, Code: ConditionUnknown} }

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// Calendar is a business calendar: the weekdays that are not business
// days, and the dates (UTC) that are holidays.
type Calendar struct {
	Weekend  map[time.Weekday]bool
	Holidays map[string]bool // YYYY-MM-DD
}

// Weekdays is the built-in calendar "weekdays": Monday to Friday, no
// holidays.
var Weekdays = Calendar{Weekend: map[time.Weekday]bool{time.Saturday: true, time.Sunday: true}}

// Business reports whether the UTC date of t is a business day.
func (c Calendar) Business(t time.Time) bool {
	t = t.UTC()
	return !c.Weekend[t.Weekday()] && !c.Holidays[t.Format(time.DateOnly)]
}

// After returns 00:00 UTC of the n-th business day after the UTC date of
// from. A calendar with no business day at all returns the zero time.
func (c Calendar) After(from time.Time, n int) time.Time {
	from = from.UTC()
	d := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	for guard := 0; n > 0; guard++ {
		if guard > 366*20 {
			return time.Time{}
		}
		d = d.AddDate(0, 0, 1)
		if c.Business(d) {
			n--
		}
	}
	return d
}

// ParseCalendar builds a calendar from its configuration: the weekdays
// off by English name, and the holidays as YYYY-MM-DD.
func ParseCalendar(weekend, holidays []string) (Calendar, error) {
	c := Calendar{Weekend: map[time.Weekday]bool{}, Holidays: map[string]bool{}}
	for _, w := range weekend {
		found := false
		for d := time.Sunday; d <= time.Saturday; d++ {
			if strings.EqualFold(d.String(), w) {
				c.Weekend[d], found = true, true
			}
		}
		if !found {
			return Calendar{}, fmt.Errorf("%q is not a weekday", w)
		}
	}
	if len(c.Weekend) == 7 {
		return Calendar{}, fmt.Errorf("a calendar whose every day is off has no business day")
	}
	for _, h := range holidays {
		t, err := time.Parse(time.DateOnly, h)
		if err != nil {
			return Calendar{}, fmt.Errorf("holiday %q is not a date YYYY-MM-DD", h)
		}
		c.Holidays[t.Format(time.DateOnly)] = true
	}
	return c, nil
}
