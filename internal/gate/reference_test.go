package gate_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
)

// referenceFiles lists the *.json files of one directory of the reference
// record, sorted.
func referenceFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(spectest.ReferenceVectors(t), dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no files in reference-vectors/%s", dir)
	}
	sort.Strings(paths)
	return paths
}

// TestReferenceObjectsPass judges every object the published reference
// produced, one at a time.
func TestReferenceObjectsPass(t *testing.T) {
	for _, dir := range []string{"objects", "key_records", "mandates"} {
		for _, p := range referenceFiles(t, dir) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			j := gate.File(data, gate.Options{})
			if !j.Accepted() {
				t.Errorf("%s/%s refused %v: %s", dir, filepath.Base(p), j.Codes, firstProblems(j, 5))
			}
			want := gate.KindEnvelope
			if dir == "mandates" {
				want = gate.KindMandate
			}
			if j.Kind != want {
				t.Errorf("%s/%s judged as %s, want %s", dir, filepath.Base(p), j.Kind, want)
			}
		}
	}
}

// referenceRecord loads objects/ and key_records/ as one set.
func referenceRecord(t *testing.T) []map[string]any {
	t.Helper()
	var objects []map[string]any
	for _, dir := range []string{"objects", "key_records"} {
		for _, p := range referenceFiles(t, dir) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			o, err := canonical.DecodeObject(data)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			objects = append(objects, o)
		}
	}
	return objects
}

func bundleContext(t *testing.T, opt gate.Options) gate.SetContext {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.ReferenceVectors(t), "bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := canonical.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return gate.ContextFromFixture(v, opt)
}

// TestReferenceRecordAsSet judges the whole reference record as one set,
// with the verifier as the set judge under the context its bundle.json
// gives (ContextFromFixture): it passes under the rules version the
// bundle states (1.3), and under 1.2 exactly one event is illegal, the
// agreement.direct that 1.3 registered.
func TestReferenceRecordAsSet(t *testing.T) {
	objects := referenceRecord(t)
	ctx := bundleContext(t, gate.Options{})
	if ctx.RulesVersion != "1.3" {
		t.Fatalf("bundle.json states rules %q, expected 1.3", ctx.RulesVersion)
	}
	if j := verify.JudgeSet(objects, ctx); !j.Accepted() {
		t.Fatalf("reference record refused under 1.3 %v:\n%s", j.Codes, firstProblems(j, 20))
	}

	ctx.RulesVersion = "1.2"
	j := verify.JudgeSet(objects, ctx)
	if j.Accepted() || len(j.Codes) != 1 || j.Codes[0] != reason.EvidenceTransitionIllegal {
		t.Fatalf("under 1.2: %s %v, want refused with exactly A202-EVIDENCE-TRANSITION-ILLEGAL:\n%s", j.Outcome, j.Codes, firstProblems(j, 20))
	}
	var flagged []string
	for _, p := range j.Problems {
		flagged = append(flagged, p.Object)
	}
	if len(flagged) != 1 {
		t.Fatalf("under 1.2 %d problems, want 1: %s", len(flagged), firstProblems(j, 10))
	}
	event := eventByID(objects, flagged[0])
	if event == nil {
		t.Fatalf("problem names %q, which is not an object of the record", flagged[0])
	}
	payload := event["payload"].(map[string]any)
	if payload["event_type"] != "agreement.direct" {
		t.Errorf("under 1.2 the flagged event is %v, want the agreement.direct event", payload["event_type"])
	}
	// It is the verifier's replay that refuses it.
	if d := j.Problems[0].Detail; !strings.HasPrefix(d, "transition_legality ") {
		t.Errorf("under 1.2 the problem is not the replay's: %s", d)
	}
}

func eventByID(objects []map[string]any, id string) map[string]any {
	for _, o := range objects {
		if o["id"] == id && o["object_type"] == "transaction_event" {
			return o
		}
	}
	return nil
}

// TestReferenceRecordTamperedTerms edits one signed byte of the record,
// the agreement's total, and expects the recomputation to catch it.
func TestReferenceRecordTamperedTerms(t *testing.T) {
	objects := referenceRecord(t)
	tampered := false
	for _, o := range objects {
		if o["object_type"] != "agreement" {
			continue
		}
		terms := o["payload"].(map[string]any)["terms"].(map[string]any)
		total := terms["core"].(map[string]any)["total"].(map[string]any)
		total["amount"] = strings.Replace(total["amount"].(string), "0", "1", 1)
		tampered = true
	}
	if !tampered {
		t.Fatal("the reference record holds no agreement")
	}
	j := verify.JudgeSet(objects, bundleContext(t, gate.Options{}))
	for _, c := range []reason.Code{reason.EvidenceHashMismatch, reason.AgreementHashMismatch} {
		if !j.Has(c) {
			t.Errorf("tampered terms: codes %v lack %s", j.Codes, c)
		}
	}
}
