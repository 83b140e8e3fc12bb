package verify_test

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify"
)

// Every bundle fixture of the bilateral scope, judged by the verifier,
// agrees with the manifest: a valid fixture has no failed check, an
// invalid one a failed check carrying the declared code.

type fixtureRow struct {
	path, outcome string
	code          reason.Code
}

// bundleRows reads the bundle rows of fixtures-bilateral.txt:
// "fixture | kind | valid/invalid | code | family | layer".
func bundleRows(t *testing.T) []fixtureRow {
	t.Helper()
	f, err := os.Open(spectest.SharedFile(t, "fixtures-bilateral.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []fixtureRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), " | ")
		if len(cols) < 4 || cols[1] != "bundle" {
			continue
		}
		row := fixtureRow{path: cols[0], outcome: cols[2]}
		if cols[3] != "-" {
			row.code = reason.Code(cols[3])
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// fixtureInput reads a bundle fixture {fixture_kind, note, context,
// objects} and what its context states, read as the gate reads it
// (gate.ContextFromFixture): the rules version in force, for the record
// or per event; the disclosure (stated gaps and resolvable hashes: a
// context is the fixture's statement about itself, so one that names no
// gap says nothing was withheld); and a verification report it carries.
// The fixtures' events carry one signature (spec-map §14 C5).
func fixtureInput(t *testing.T, path string) (verify.Input, verify.Options) {
	t.Helper()
	doc := fixtureDoc(t, path)
	opt := verify.Options{SingleSignedEvents: true}
	ctx, _ := doc["context"].(map[string]any)
	opt.RulesVersion, _ = ctx["rules_version_in_force"].(string)
	if m, ok := ctx["event_rules_in_force"].(map[string]any); ok {
		opt.EventRules = map[string]string{}
		for id, v := range m {
			opt.EventRules[id], _ = v.(string)
		}
	}
	stated := gate.ContextFromFixture(doc["context"], gate.Options{})
	in := verify.Input{
		Objects:      fixtureObjects(doc),
		Disclosure:   &verify.Disclosure{StatedGaps: stated.StatedGaps, ResolvableHashes: stated.ResolvableHashes},
		StatedReport: stated.Report,
	}
	return in, opt
}

func fixtureDoc(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.FixturesDir(t), path))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := canonical.DecodeObject(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if doc["fixture_kind"] != "bundle" {
		t.Fatalf("%s is a %v fixture", path, doc["fixture_kind"])
	}
	return doc
}

func fixtureObjects(doc map[string]any) []map[string]any {
	var out []map[string]any
	list, _ := doc["objects"].([]any)
	for _, o := range list {
		if m, ok := o.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func TestBundleFixtures(t *testing.T) {
	rows := bundleRows(t)
	if len(rows) != 35 {
		t.Fatalf("%d bundle rows in fixtures-bilateral.txt, want 35", len(rows))
	}
	for _, row := range rows {
		t.Run(row.path, func(t *testing.T) {
			in, opt := fixtureInput(t, row.path)
			rep := verify.Verify(in, opt)
			failed := rep.Failures()
			if row.outcome == "valid" {
				if len(failed) > 0 {
					t.Errorf("valid fixture, failed checks: %+v", failed)
				}
				return
			}
			for _, c := range failed {
				if c.Code == row.code {
					return
				}
			}
			t.Errorf("invalid fixture declaring %s: failed checks %+v", row.code, failed)
		})
	}
}

// The verifier reports the gate's set rules rather than restating them:
// on every bundle fixture, each problem the gate's cross-object checks
// find (CheckBindings, CheckConditionCycles, CheckReport on a stated
// report, under the fixture's context) is a failed check of the verifier
// with the same code on the same subject. SubjectActAt, which the
// verifier does not take, is left out of the context: the verifier reads
// the subject act's time from the subject it holds.
func TestBundleFixturesAgreeWithGate(t *testing.T) {
	for _, row := range bundleRows(t) {
		doc := fixtureDoc(t, row.path)
		in, opt := fixtureInput(t, row.path)
		ctx := gate.ContextFromFixture(doc["context"], gate.Options{})
		ctx.SubjectActAt = time.Time{}
		ps := gate.CheckBindings(in.Objects, ctx)
		ps = append(ps, gate.CheckConditionCycles(in.Objects)...)
		if ctx.Report != nil {
			for _, p := range gate.CheckReport(ctx.Report) {
				p.Object = verify.StatedReportSubject
				ps = append(ps, p)
			}
		}
		rep := verify.Verify(in, opt)
		failed := map[verify.Raised]bool{}
		for _, r := range rep.Raised {
			failed[r] = true
		}
		for _, p := range ps {
			if p.Code != "" && !failed[verify.Raised{Code: p.Code, Subject: p.Object}] {
				t.Errorf("%s: the gate finds %s; the verifier raises %v", row.path, p, rep.Raised)
			}
		}
	}
}

// TestCountVerifiedListsTheRest: on every bundle fixture, a run that
// counts what verified (Options.CountVerified, as a countersigner runs)
// lists exactly the checks a full run lists as failed or not checkable,
// in the same order, and counts the verified ones it leaves out.
func TestCountVerifiedListsTheRest(t *testing.T) {
	for _, row := range bundleRows(t) {
		t.Run(row.path, func(t *testing.T) {
			in, opt := fixtureInput(t, row.path)
			full := verify.Verify(in, opt)
			opt.CountVerified = true
			counted := verify.Verify(in, opt)
			var rest []verify.Check
			for _, c := range full.Checks {
				if c.Result != verify.Verified {
					rest = append(rest, c)
				}
			}
			if !reflect.DeepEqual(counted.Checks, rest) {
				t.Fatalf("counting, listed\n%+v\nwant\n%+v", counted.Checks, rest)
			}
			if counted.Results != full.Results {
				t.Fatalf("counts %+v, want %+v", counted.Results, full.Results)
			}
		})
	}
}
