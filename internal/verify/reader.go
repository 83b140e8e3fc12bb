package verify

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/protocol"
)

// NewReader returns a Reader over objects and mandates held in memory,
// every event among them recorded: a record as a bundle gives it
// (DirReader), or as a test builds it. The values are only read.
func NewReader(objects, mandates []map[string]any) Reader {
	r := memReader{objects: objects, byID: map[string]map[string]any{}, mandates: map[string]map[string]any{}}
	for _, o := range objects {
		r.byID[str(o, "id")] = o
	}
	for _, m := range mandates {
		r.mandates[str(m, "id")] = m
	}
	return r
}

// DirReader returns a Reader over the bundle in directory dir
// (bundle.Read): what a third party holds when it asks whether a message
// extends a record it was handed.
func DirReader(dir string) (Reader, error) {
	b, err := bundle.Read(dir)
	if err != nil {
		return nil, err
	}
	return NewReader(b.ObjectValues(), b.MandateValues()), nil
}

type memReader struct {
	objects  []map[string]any
	byID     map[string]map[string]any
	mandates map[string]map[string]any
}

func (r memReader) Object(_ context.Context, id string) (map[string]any, error) {
	if o, ok := r.byID[id]; ok {
		return o, nil
	}
	return nil, fmt.Errorf("verify: %s is not held", id)
}

// events are txn's events, of types when any is given, in sequence order.
func (r memReader) events(txn string, types ...string) []EventRef {
	var out []EventRef
	for _, o := range r.objects {
		p, _ := objAt(o, "payload")
		if str(o, "object_type") != string(protocol.TransactionEvent) || str(o, "transaction_id") != txn ||
			(len(types) > 0 && !slices.Contains(types, str(p, "event_type"))) {
			continue
		}
		seq, _ := intAt(p, "sequence")
		out = append(out, EventRef{ID: str(o, "id"), Sequence: int(seq), Recorded: true})
	}
	slices.SortStableFunc(out, func(a, b EventRef) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out
}

func (r memReader) Events(_ context.Context, txn string, types ...string) ([]EventRef, error) {
	return r.events(txn, types...), nil
}

func (r memReader) LatestEvent(_ context.Context, txn, typ string) (EventRef, bool, error) {
	evs := r.events(txn, typ)
	if len(evs) == 0 {
		return EventRef{}, false, nil
	}
	return evs[len(evs)-1], true, nil
}

func (r memReader) EventAt(_ context.Context, txn string, seq int) (EventRef, bool, error) {
	for _, e := range r.events(txn) {
		if e.Sequence == seq {
			return e, true, nil
		}
	}
	return EventRef{}, false, nil
}

func (r memReader) Objects(_ context.Context, txn string, types ...string) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range r.objects {
		if str(o, "transaction_id") == txn && slices.Contains(types, str(o, "object_type")) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (r memReader) Responses(_ context.Context, txn string, types ...string) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range r.objects {
		p, _ := objAt(o, "payload")
		if str(o, "object_type") == string(protocol.ObligationResponse) && str(o, "transaction_id") == txn && slices.Contains(types, str(p, "response_type")) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (r memReader) KeyRecords(context.Context) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range r.objects {
		if str(o, "object_type") == string(protocol.KeyRecord) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (r memReader) Mandate(_ context.Context, id string) (map[string]any, bool, error) {
	m, ok := r.mandates[id]
	return m, ok, nil
}
