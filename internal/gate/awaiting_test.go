package gate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
)

// An agreement with only its first party's signature is refused, unless it
// is judged as awaiting the other party's; and even then only the count is
// waived: a wrong purpose is still refused.
func TestAwaitingSignatures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(spectest.ReferenceVectors(t), "objects", "agr_*.json"))
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	agr, _ := canonical.DecodeObject(data)
	agr["signatures"] = agr["signatures"].([]any)[:1]
	if j := Envelope(agr, Options{}); !j.Has(reason.EvidenceSignatureInvalid) {
		t.Fatalf("a one-signature agreement: %+v", j)
	}
	if j := Envelope(agr, Options{AwaitingSignatures: true}); !j.Accepted() {
		t.Fatalf("awaiting the second signature: %+v", j)
	}
	// The schema still judges the one entry there is: one whose
	// signature is not base64url, or that carries a member no entry has,
	// is refused while awaiting too.
	for name, edit := range map[string]func(e map[string]any){
		"a signature that is not base64url": func(e map[string]any) { e["signature"] = "not base64url!" },
		"an extra member":                   func(e map[string]any) { e["extra"] = "x" },
	} {
		bad, _ := canonical.DecodeObject(data)
		bad["signatures"] = bad["signatures"].([]any)[:1]
		edit(bad["signatures"].([]any)[0].(map[string]any))
		if j := Envelope(bad, Options{AwaitingSignatures: true}); j.Accepted() {
			t.Fatalf("%s while awaiting: accepted", name)
		}
	}
	agr["signatures"].([]any)[0].(map[string]any)["purpose"] = "event_append"
	if j := Envelope(agr, Options{AwaitingSignatures: true}); !j.Has(reason.EvidenceSignatureInvalid) {
		t.Fatalf("a wrong purpose while awaiting: %+v", j)
	}
}
