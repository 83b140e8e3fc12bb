package ledger

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/decimal"
)

// Reading the record. Input is hostile (a bundle from anywhere, a message
// from a counterparty that lies), so every member is read with a type
// check and a wrong shape reads as absent: the gate and the verifier's
// steps say what is malformed; the ledger only declines to count it.

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func sub(m map[string]any, k string) map[string]any {
	s, _ := m[k].(map[string]any)
	return s
}

func partyOrg(p map[string]any, member string) string { return str(sub(p, member), "organization_id") }

// timeAt reads a timestamp member (RFC 3339, as the kernel writes them).
func timeAt(m map[string]any, k string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, str(m, k))
	return t, err == nil
}

// readTypes are the objects a balance reads, and readEvents the events;
// a record's other objects (offers, decisions, key records...) and events
// are passed over unread.
var (
	readTypes = map[string]bool{"agreement": true, "obligation": true, "obligation_response": true, "performance_event": true,
		"determination": true, "settlement_instruction": true, "adapter_receipt": true, "evidence": true}
	readEvents = map[string]bool{"acceptance.granted": true, "acceptance.rejected": true, "settlement.instructed": true,
		"transaction.completed": true, "termination.agreed": true, "transaction.terminated": true}
)

// fact is one object of the record, read once.
type fact struct {
	id, typ string
	org     string // created_by.organization_id
	at      time.Time
	hasAt   bool
	hash    string // its content hash
	val     map[string]any
	p       map[string]any // payload
}

// event is one event of the transaction stream.
type event struct {
	fact
	seq  int
	kind string // event_type
	data map[string]any
}

// parsed is a record read once; views at a point of it (cut) are computed
// from it without reading again.
type parsed struct {
	txn      string
	facts    []*fact
	byID     map[string]*fact
	events   []*event // sequence order
	inFlight map[string]bool
}

func parse(rec Record) *parsed {
	p := &parsed{txn: rec.TransactionID, byID: map[string]*fact{}, inFlight: map[string]bool{}}
	for _, id := range rec.InFlight {
		p.inFlight[id] = true
	}
	hash := rec.Hash
	if hash == nil {
		hash = func(o map[string]any) string { return str(o, "content_hash") }
	}
	read := func(o map[string]any) *fact {
		f := &fact{id: str(o, "id"), typ: str(o, "object_type"), org: str(sub(o, "created_by"), "organization_id"), val: o, p: sub(o, "payload")}
		f.at, f.hasAt = timeAt(o, "created_at")
		f.hash = hash(o)
		return f
	}
	seenEv := map[int]bool{}
	for _, o := range rec.Events {
		if o == nil || str(o, "object_type") != "transaction_event" || !readEvents[str(sub(o, "payload"), "event_type")] {
			continue
		}
		f := read(o)
		if p.txn != "" && str(o, "transaction_id") != p.txn {
			continue
		}
		seq, ok := intOf(f.p["sequence"])
		if !ok || seq < 1 || seenEv[seq] {
			continue
		}
		seenEv[seq] = true
		e := &event{fact: *f, seq: seq, kind: str(f.p, "event_type"), data: sub(f.p, "data")}
		e.at, e.hasAt = timeAt(f.p, "occurred_at")
		p.events = append(p.events, e)
	}
	sort.Slice(p.events, func(i, j int) bool { return p.events[i].seq < p.events[j].seq })
	for _, o := range rec.Objects {
		if o == nil || !readTypes[str(o, "object_type")] {
			continue // nothing a balance reads: not parsed at all
		}
		f := read(o)
		if f.id == "" || p.byID[f.id] != nil {
			continue
		}
		if p.txn != "" && str(o, "transaction_id") != p.txn {
			continue
		}
		p.byID[f.id] = f
		p.facts = append(p.facts, f)
	}
	// Record order: by creation time, then id, so that a view is the same
	// whichever order the objects were handed in.
	sort.SliceStable(p.facts, func(i, j int) bool {
		a, b := p.facts[i], p.facts[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.id < b.id
	})
	return p
}

// cut is a point of the record: the events before sequence before (0: all)
// and the objects made no later than until (zero: all).
type cut struct {
	before int
	until  time.Time
}

func (c cut) hasEvent(e *event) bool {
	return (c.before == 0 || e.seq < c.before) && (c.until.IsZero() || (e.hasAt && !e.at.After(c.until)))
}

func (c cut) hasFact(f *fact) bool {
	return c.until.IsZero() || (f.hasAt && !f.at.After(c.until))
}

func (p *parsed) ofType(c cut, typ string) []*fact {
	var out []*fact
	for _, f := range p.facts {
		if f.typ == typ && c.hasFact(f) {
			out = append(out, f)
		}
	}
	return out
}

// quantity reads a quantity member (canonical model §7), ok false when it
// is not one.
func quantity(m map[string]any, k string) (amount, bool) {
	q, err := decimal.ParseQuantity(str(m, k))
	return q, err == nil
}

// moneyAt reads a money member: its currency and exact amount.
func moneyAt(m map[string]any, k string) (currency string, a amount, ok bool) {
	mm := sub(m, k)
	if len(mm) == 0 {
		return "", amount{}, false
	}
	cur := str(mm, "currency")
	a, err := decimal.Parse(str(mm, "amount"))
	if err != nil || len(cur) != 3 || strings.ToUpper(cur) != cur {
		return cur, amount{}, false
	}
	return cur, a, true
}

// intOf reads an integer member however it was decoded (json.Number from
// the strict decoder, int or float64 from elsewhere).
func intOf(v any) (int, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 32)
		return int(n), err == nil
	case int:
		return x, true
	case int64:
		return int(x), x == int64(int(x))
	case float64:
		return int(x), x == math.Trunc(x) && math.Abs(x) < 1<<31
	}
	return 0, false
}
