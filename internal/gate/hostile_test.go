package gate_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/partyd/party/internal/gate"
)

// minimalOrganization is a small, well-formed envelope the hostile cases
// mutate; its content hash is arbitrary (single objects are not
// recomputed).
const minimalOrganization = `{"spec_version":"a202-commercial/0.1","id":"org_hostile_01","object_type":"organization",
"version":%s,"created_at":"2026-07-01T00:00:00Z","created_by":{"organization_id":"org_hostile_01",
"agent_id":"agt_hostile_01","mandate_id":"mnd_hostile_01"},"transaction_id":null,"previous_version_id":null,
"content_hash":"0000000000000000000000000000000000000000000000000000000000000000",
"signatures":[{"key_id":"key_hostile_01","algorithm":"ES256","signature":"c2lnbmF0dXJlLXZhbHVlLXBsYWNlaG9sZGVy","signed_at":"2026-07-01T00:00:00Z","purpose":"object_issuance"}],
"payload":{"legal_name":"Hostile B.V.","jurisdiction":"NL","registry_identifiers":[],"status":"active","identity_evidence_refs":[]}}`

// TestHostileDocuments feeds documents built to break parsers through
// gate.File: each is refused with a problem that says why, and none
// panics.
func TestHostileDocuments(t *testing.T) {
	var members strings.Builder
	members.WriteString("{")
	for i := range 100000 {
		if i > 0 {
			members.WriteString(",")
		}
		// Short names keep the document under the size limit, so the
		// member limit is what refuses it.
		fmt.Fprintf(&members, `"%s":0`, strconv.FormatInt(int64(i), 36))
	}
	members.WriteString("}")

	cases := []struct {
		name, doc string
		mention   string // a fragment the problem detail must contain
		path      string // when set, a problem must sit at this path
	}{
		{"duplicate keys", `{"spec_version":"a202-commercial/0.1","spec_version":"a202-mandate/0.1"}`, "duplicate", ""},
		{"lone surrogate", `{"id":"\ud800"}`, "surrogate", ""},
		{"1e400", `{"version":1e400}`, "1e400", ""},
		{"nesting 10000 deep", `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, "nesting", ""},
		{"10 MB string", `{"a":"` + strings.Repeat("x", 10<<20) + `"}`, "bytes", ""},
		{"NUL in member name", `{"a\u0000b":1}`, "NUL", ""},
		{"raw NUL in member name", "{\"a\x00b\":1}", "control character", ""},
		{"version 1.0", fmt.Sprintf(minimalOrganization, "1.0"), "not an integer", "/version"},
		{"100000 members", members.String(), "members", ""},
		{"not an object", `[1,2,3]`, "not a JSON object", ""},
		{"empty input", ``, "end of document", ""},
		{"trailing data", `{} {}`, "trailing", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var j gate.Judgment
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("gate.File panicked: %v", r)
					}
				}()
				j = gate.File([]byte(c.doc), gate.Options{})
			}()
			if j.Accepted() || len(j.Problems) == 0 {
				t.Fatalf("accepted, want refused with a problem")
			}
			if err := j.Err(); err == nil {
				t.Fatal("Err() is nil for a refusal")
			}
			found := false
			for _, p := range j.Problems {
				if strings.Contains(p.Detail, c.mention) {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem mentions %q: %s", c.mention, firstProblems(j, 5))
			}
			if c.path != "" {
				atPath := false
				for _, p := range j.Problems {
					atPath = atPath || p.Path == c.path
				}
				if !atPath {
					t.Errorf("no problem at %s: %s", c.path, firstProblems(j, 5))
				}
			}
		})
	}
	// The mutated organization is accepted as written with an integer
	// version, so the refusal above is the number's doing.
	if j := gate.File([]byte(fmt.Sprintf(minimalOrganization, "1")), gate.Options{}); !j.Accepted() {
		t.Errorf("the base organization is refused: %s", firstProblems(j, 5))
	}
}
