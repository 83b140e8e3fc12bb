package ledger

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAudit: whatever a record holds, the ledger reads it without a panic
// and every finding names a rule, a subject and a code.
func FuzzAudit(f *testing.F) {
	r := accepted8()
	r.instruct("stl_1", "obl_1", "0.01", "key-00000001")
	r.receipt("adp_1", "stl_1", "key-00000001", 1, "succeeded", "")
	r.event("transaction.completed", buyer, map[string]any{"agreement_id": "agr_1"})
	seed, _ := json.Marshal(map[string]any{"objects": r.objs, "events": r.events})
	f.Add(seed)
	f.Add([]byte(`{"objects":[{"id":"obl_1","object_type":"obligation","payload":{"quantity":"0","consideration":{"currency":"EUR","amount":"1"}}}],"events":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var in struct {
			Objects []map[string]any `json:"objects"`
			Events  []map[string]any `json:"events"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&in) != nil {
			return
		}
		rec := Record{Objects: in.Objects, Events: in.Events}
		l := Compute(rec)
		for _, b := range l.Obligations {
			_ = l.Completable("c")
			_, _, _ = l.AdjustmentRecord(b.ObligationID)
		}
		for _, fd := range Audit(rec) {
			if fd.Rule == "" || fd.Code == "" {
				t.Fatalf("finding without a rule or code: %+v", fd)
			}
		}
	})
}
