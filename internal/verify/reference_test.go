package verify_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
)

// The record produced by the published reference (../shared/
// reference-vectors) and the reports its verifier gave over it, read at
// test time. Every check the reference made must be among ours with the
// same result; ours make more.

const (
	refAgreement = "agr_f3d6af902f16489fac9c9eb4"
	refDirect    = "evt_73ca039b6e9ebffcd6748873"
)

type refCheck struct {
	Step    int     `json:"step"`
	Name    string  `json:"name"`
	Subject string  `json:"subject"`
	Result  string  `json:"result"`
	Code    *string `json:"code"`
}

type key struct {
	step          int
	name, subject string
}

// referenceReport reads one of the reference verifier's reports.
func referenceReport(t *testing.T, name string) []refCheck {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.ReferenceVectors(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Checks []refCheck `json:"checks"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Checks) == 0 {
		t.Fatalf("%s has no checks", name)
	}
	return r.Checks
}

// verifyDir reads and verifies the bundle in dir.
func verifyDir(t *testing.T, dir string, opt verify.Options) *verify.Report {
	t.Helper()
	b, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if opt.RulesVersion == "" {
		opt.RulesVersion = b.Manifest.RulesVersion
	}
	return verify.Verify(verify.Input{Objects: b.ObjectValues(), Mandates: b.MandateValues(), Keys: b.Keys, TransactionID: b.Manifest.TransactionID}, opt)
}

// agreesWithReference checks that every (step, name, subject) the
// reference reported is among ours with the same result, and for a
// failure the same code.
func agreesWithReference(t *testing.T, rep *verify.Report, ref []refCheck) {
	t.Helper()
	ours := map[key][]verify.Check{}
	for _, c := range rep.Checks {
		k := key{c.Step, c.Name, c.Subject}
		ours[k] = append(ours[k], c)
	}
	for _, rc := range ref {
		k := key{rc.Step, rc.Name, rc.Subject}
		cs := ours[k]
		if len(cs) == 0 {
			t.Errorf("the reference checked %v and we did not", k)
			continue
		}
		for _, c := range cs {
			if string(c.Result) != rc.Result {
				t.Errorf("%v: reference %s, ours %s (%s)", k, rc.Result, c.Result, c.Detail)
			}
			if rc.Code != nil && string(c.Code) != *rc.Code {
				t.Errorf("%v: reference code %s, ours %q", k, *rc.Code, c.Code)
			}
		}
	}
	if len(rep.Checks) < len(ref) {
		t.Errorf("%d checks, fewer than the reference's %d", len(rep.Checks), len(ref))
	}
}

func TestReferenceRecord(t *testing.T) {
	rep := verifyDir(t, spectest.ReferenceVectors(t), verify.Options{})
	if rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
		t.Errorf("results %+v; want nothing failed and nothing not checkable", rep.Results)
		for _, c := range append(rep.Failures(), rep.Gaps()...) {
			t.Logf("%d %s %s %s: %s", c.Step, c.Name, c.Subject, c.Result, c.Detail)
		}
	}
	agreesWithReference(t, rep, referenceReport(t, "verify_evidence_report.json"))

	// The checks the reference made, counted by kind: 18 content hashes,
	// 4 hash bindings, 24 signatures, 4 chain links, 5 transitions.
	count := map[string]int{}
	for _, c := range rep.Checks {
		if c.Result == verify.Verified {
			name := c.Name
			if strings.HasPrefix(name, "signature[") {
				name = "signature"
			}
			count[name]++
		}
	}
	for name, least := range map[string]int{"content_hash": 18, "signature": 24, "event_chain": 4, "transition_legality": 5,
		"offer_hash_binding": 1, "terms_hash": 1, "accepted_offer_hash": 1, "assertion_hash_binding": 1} {
		if count[name] < least {
			t.Errorf("%d verified %s checks, want at least %d", count[name], name, least)
		}
	}
	if got := rep.Scope.StreamsDisclosed; len(got) != 1 || got[0] != "transaction:txn_calibration_demo_01" {
		t.Errorf("streams disclosed %v", got)
	}
	if rep.RulesVersion != "1.3" || rep.Scope.TransactionID != "txn_calibration_demo_01" || rep.Scope.TimeRange == nil {
		t.Errorf("scope not stated: rules %q, %+v", rep.RulesVersion, rep.Scope)
	}
}

func TestReferenceUnderRules12(t *testing.T) {
	rep := verifyDir(t, spectest.ReferenceVectors(t), verify.Options{RulesVersion: "1.2"})
	f := rep.Failures()
	if len(f) != 1 || f[0].Name != "transition_legality" || f[0].Subject != refDirect || f[0].Code != reason.EvidenceTransitionIllegal {
		t.Fatalf("failures %+v; want exactly agreement.direct's transition, A202-EVIDENCE-TRANSITION-ILLEGAL", f)
	}
	if rep.Results.NotCheckable != 0 {
		t.Errorf("%d not checkable", rep.Results.NotCheckable)
	}
	agreesWithReference(t, rep, referenceReport(t, "verify_evidence_report.rules-1.2.json"))
}

// copyBundle copies the reference bundle to a temporary directory, leaving
// out the named files and passing each file's bytes through edit.
func copyBundle(t *testing.T, skip string, edit func(path string, data []byte) []byte) string {
	t.Helper()
	src := spectest.ReferenceVectors(t)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if rel == skip {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			data = edit(filepath.ToSlash(rel), data)
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestReferenceWithoutKeys(t *testing.T) {
	rep := verifyDir(t, copyBundle(t, "keys.json", nil), verify.Options{})
	if rep.Results.Failed != 0 {
		t.Errorf("failures without keys: %+v", rep.Failures())
	}
	signatures := 0
	for _, c := range rep.Checks {
		switch {
		case strings.HasPrefix(c.Name, "signature["):
			signatures++
			fallthrough
		case c.Name == "mandate_proof", c.Name == "signature_count", c.Name == "countersignature", c.Name == "signer_party",
			strings.HasPrefix(c.Name, "key_status"):
			if c.Result != verify.NotCheckable {
				t.Errorf("%s %s is %s without keys; it rests on signatures nobody could check", c.Name, c.Subject, c.Result)
			}
		case c.Name == "mandate_authority", c.Name == "policy_decision", c.Name == "transition_guard" && c.Subject != "evt_8fd91438cf924ea70a6f7df7":
			// Each of these leans on a signature (a mandate's proof, a
			// decision's, an act's); obligation.activated's guard alone
			// reads only hashes.
			if c.Result == verify.Verified {
				t.Errorf("%s %s verified on the strength of signatures nobody could check: %s", c.Name, c.Subject, c.Detail)
			}
		}
	}
	if signatures != 28 {
		t.Errorf("%d signature checks, want 28 (24 of the record, 4 of its key_records)", signatures)
	}
	for _, k := range []string{"key_delta_agent_01", "key_northstar_agent_01"} {
		if !contains(rep.UnresolvedReferences, k) {
			t.Errorf("unresolved references %v do not name %s", rep.UnresolvedReferences, k)
		}
	}
	agreesWithReference(t, rep, referenceReport(t, "verify_evidence_report.no-keys.json"))
}

func TestReferenceTamperedTerms(t *testing.T) {
	dir := copyBundle(t, "", func(p string, data []byte) []byte {
		if p != "objects/"+refAgreement+".json" {
			return data
		}
		// One byte of the terms' description, in the file's own bytes.
		i := bytes.Index(data, []byte(`"description":"`))
		if i < 0 {
			t.Fatal("no description in the agreement")
		}
		out := append([]byte(nil), data...)
		out[i+len(`"description":"`)] ^= 0x20 // flip the case of one letter
		return out
	})
	rep := verifyDir(t, dir, verify.Options{})
	want := map[key]reason.Code{
		{1, "content_hash", refAgreement}: reason.EvidenceHashMismatch,
		{1, "terms_hash", refAgreement}:   reason.AgreementHashMismatch,
		{2, "signature[0]", refAgreement}: reason.EvidenceSignatureInvalid,
		{2, "signature[1]", refAgreement}: reason.EvidenceSignatureInvalid,
	}
	got := map[key]reason.Code{}
	for _, c := range rep.Failures() {
		got[key{c.Step, c.Name, c.Subject}] = c.Code
		if strings.HasPrefix(c.Name, "signature[") && c.Subject != refAgreement {
			t.Errorf("a signature over unchanged bytes failed: %+v", c)
		}
	}
	for k, code := range want {
		if got[k] != code {
			t.Errorf("%v: got %q, want %s", k, got[k], code)
		}
	}
	for _, c := range rep.Checks {
		if c.Subject == refAgreement && (c.Name == "content_hash" || strings.HasPrefix(c.Name, "signature[")) && c.Result == verify.Verified {
			t.Errorf("%s over the changed bytes verified", c.Name)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
