package cli_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// party verify over the record the published reference produced, and over
// copies of it without keys and with one byte of the agreement's terms
// changed. The scripts in testdata/script/verify.txtar cover the same
// ground on a synthetic record; these runs are against another
// implementation's bytes.

const refAgreement = "agr_f3d6af902f16489fac9c9eb4"

func verifyJSON(t *testing.T, args ...string) (*verify.Report, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(append([]string{"verify", "--json"}, args...), nil, &out, &errOut)
	if errOut.Len() > 0 {
		t.Errorf("stderr: %s", errOut.String())
	}
	var rep verify.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, output is not a report: %v\n%s", code, err, out.String())
	}
	return &rep, code
}

type refKey struct {
	Step    int    `json:"step"`
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Result  string `json:"result"`
}

// sameAsReference checks that every (step, name, subject) of the reference
// verifier's report is among ours with the same result.
func sameAsReference(t *testing.T, rep *verify.Report, file string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.ReferenceVectors(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct{ Checks []refKey }
	if err := json.Unmarshal(data, &ref); err != nil || len(ref.Checks) == 0 {
		t.Fatalf("%s: %v", file, err)
	}
	ours := map[refKey]bool{}
	for _, c := range rep.Checks {
		ours[refKey{c.Step, c.Name, c.Subject, string(c.Result)}] = true
	}
	for _, k := range ref.Checks {
		if !ours[k] {
			t.Errorf("%s: the reference reported %+v; we did not", file, k)
		}
	}
}

func TestVerifyReferenceRecord(t *testing.T) {
	t.Parallel()
	dir := spectest.ReferenceVectors(t)
	rep, code := verifyJSON(t, dir)
	if code != 0 || rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
		t.Fatalf("exit %d, results %+v", code, rep.Results)
	}
	if rep.Results.Verified < 55 {
		t.Errorf("%d verified checks, fewer than the reference's 55", rep.Results.Verified)
	}
	sameAsReference(t, rep, "verify_evidence_report.json")

	var out bytes.Buffer
	if code := cli.Main([]string{"verify", dir}, nil, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{" 0 failed, 0 not checkable", "rules version 1.3 (bundle.json)", "No check failed, and every check could be run."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestVerifyReferenceUnderRules12(t *testing.T) {
	t.Parallel()
	rep, code := verifyJSON(t, "--rules-version", "1.2", spectest.ReferenceVectors(t))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	f := rep.Failures()
	if len(f) != 1 || f[0].Name != "transition_legality" || f[0].Subject != "evt_73ca039b6e9ebffcd6748873" || f[0].Code != reason.EvidenceTransitionIllegal {
		t.Fatalf("failures %+v", f)
	}
	if rep.RulesVersion != "1.2" {
		t.Errorf("rules version %q", rep.RulesVersion)
	}
	sameAsReference(t, rep, "verify_evidence_report.rules-1.2.json")
}

// copyRef copies the reference bundle, leaving out skip and passing every
// file through edit.
func copyRef(t *testing.T, skip string, edit func(rel string, data []byte) []byte) string {
	t.Helper()
	src, dst := spectest.ReferenceVectors(t), t.TempDir()
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
		if err == nil && edit != nil {
			data = edit(filepath.ToSlash(rel), data)
		}
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestVerifyReferenceWithoutKeys(t *testing.T) {
	t.Parallel()
	rep, code := verifyJSON(t, copyRef(t, "keys.json", nil))
	if code != 0 || rep.Results.Failed != 0 {
		t.Fatalf("exit %d, failures %+v", code, rep.Failures())
	}
	n := 0
	for _, c := range rep.Checks {
		if strings.HasPrefix(c.Name, "signature[") {
			n++
			if c.Result != verify.NotCheckable {
				t.Errorf("%s %s is %s without keys", c.Name, c.Subject, c.Result)
			}
		}
	}
	if n < 24 {
		t.Errorf("%d signature checks", n)
	}
	sameAsReference(t, rep, "verify_evidence_report.no-keys.json")
}

func TestVerifyReferenceTamperedTerms(t *testing.T) {
	t.Parallel()
	dir := copyRef(t, "", func(rel string, data []byte) []byte {
		if rel != "objects/"+refAgreement+".json" {
			return data
		}
		i := bytes.Index(data, []byte(`"description":"`)) + len(`"description":"`)
		out := append([]byte(nil), data...)
		out[i] ^= 0x20
		return out
	})
	rep, code := verifyJSON(t, dir)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	got := map[string]reason.Code{}
	for _, c := range rep.Failures() {
		if c.Subject == refAgreement {
			got[c.Name] = c.Code
		}
	}
	for name, code := range map[string]reason.Code{
		"content_hash": reason.EvidenceHashMismatch, "terms_hash": reason.AgreementHashMismatch,
		"signature[0]": reason.EvidenceSignatureInvalid, "signature[1]": reason.EvidenceSignatureInvalid,
	} {
		if got[name] != code {
			t.Errorf("%s: %q, want %s", name, got[name], code)
		}
	}
}

// bundle.json's disclosure statement reaches the verifier. A bundle that
// leaves an assertion out says nothing about it (a gap, exit 0), says it
// withheld nothing (then the absence is an incomplete disclosure, exit 1),
// or names it as withheld (a stated boundary, exit 0).
func TestVerifyStatedDisclosure(t *testing.T) {
	t.Parallel()
	rec, err := verifytest.New(5)
	if err != nil {
		t.Fatal(err)
	}
	prf := rec.ObjectOfType("performance_event")["id"].(string)
	obr := rec.ObjectOfType("obligation_response")["id"].(string)
	for name, c := range map[string]struct {
		gaps    []string
		code    int
		result  verify.Result
		summary string
	}{
		"unstated":         {nil, 0, verify.NotCheckable, "disclosure not stated in bundle.json"},
		"nothing withheld": {[]string{}, 1, verify.Failed, "disclosure stated in bundle.json: withheld none"},
		"withheld":         {[]string{prf}, 0, verify.NotCheckable, "disclosure stated in bundle.json: withheld " + prf},
	} {
		t.Run(name, func(t *testing.T) {
			contents := rec.Contents()
			contents.Manifest.StatedGaps = c.gaps
			dir := filepath.Join(t.TempDir(), "b")
			if err := bundle.Write(dir, contents, bundle.WriteOptions{OmitObjects: []string{prf}}); err != nil {
				t.Fatal(err)
			}
			rep, code := verifyJSON(t, "--at", "2026-12-04T10:00:00Z", dir)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			found := false
			for _, ch := range rep.Checks {
				if ch.Name == "disclosure_complete" && ch.Subject == obr {
					found = true
					if ch.Result != c.result || (c.result == verify.Failed && ch.Code != reason.EvidenceDisclosureIncomplete) {
						t.Errorf("disclosure_complete: %s %q %s", ch.Result, ch.Code, ch.Detail)
					}
				}
			}
			if !found {
				t.Error("no disclosure_complete check on the response")
			}
			var out bytes.Buffer
			cli.Main([]string{"verify", "--at", "2026-12-04T10:00:00Z", dir}, nil, &out, &out)
			if !strings.Contains(out.String(), c.summary) {
				t.Errorf("summary lacks %q:\n%s", c.summary, out.String())
			}
		})
	}
}
