package export_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/verify"
)

// walkthrough runs the published walkthrough across two instances.
func walkthrough(t *testing.T) (*recordtest.Side, *recordtest.Side, string) {
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)
	txn := recordtest.Form(t, b, s, "3200.00")
	out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: out.Objects["obligation"],
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: "certificates", ArtifactHash: canonical.SHA256Hex([]byte("a"))}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: out.Objects["obligation"], ResponseType: "accept"}); err != nil {
		t.Fatal(err)
	}
	return b, s, txn
}

func eventHashes(t *testing.T, dir string) []string {
	bd, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, o := range bd.ObjectValues() {
		if o["object_type"] == "transaction_event" {
			hs = append(hs, o["content_hash"].(string))
		}
	}
	sort.Strings(hs)
	return hs
}

func TestBothSidesExportVerifyingBundles(t *testing.T) {
	ctx := context.Background()
	b, s, txn := walkthrough(t)
	var dirs []string
	for _, sd := range []*recordtest.Side{b, s} {
		dir := filepath.Join(t.TempDir(), sd.Node.Org.Config().OrganizationID+"-bundle")
		sum, err := export.Write(ctx, sd.Node.Org.Store, txn, dir, export.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Events != 5 || sum.Mandates < 2 || sum.Keys != 4 {
			t.Fatalf("export summary %+v", sum)
		}
		bd, err := bundle.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		rep := verify.Verify(verify.Input{Objects: bd.ObjectValues(), Mandates: bd.MandateValues(), Keys: bd.Keys, TransactionID: txn},
			verify.Options{RulesVersion: bd.Manifest.RulesVersion})
		if rep.Results.Failed != 0 {
			for _, c := range rep.Checks {
				if c.Result == verify.Failed {
					t.Errorf("%s: failed %s %s %s: %s", sd.Node.Org.Config().OrganizationID, c.Name, c.Subject, c.Code, c.Detail)
				}
			}
			t.Fatalf("counts %+v", rep.Results)
		}
		if rep.Results.Verified < 40 {
			t.Fatalf("only %d checks verified", rep.Results.Verified)
		}
		dirs = append(dirs, dir)
	}
	if a, c := eventHashes(t, dirs[0]), eventHashes(t, dirs[1]); !slices.Equal(a, c) || len(a) != 5 {
		t.Fatalf("the two bundles hold different events: %v vs %v", a, c)
	}
	// No private key material in either bundle.
	for _, d := range dirs {
		filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if info != nil && !info.IsDir() {
				data, _ := os.ReadFile(p)
				if strings.Contains(string(data), `"d":`) || strings.Contains(string(data), "PRIVATE KEY") {
					t.Errorf("%s carries private key material", p)
				}
			}
			return nil
		})
	}
}

func TestPartialExportStatesWhatItWithheld(t *testing.T) {
	ctx := context.Background()
	b, s, txn := walkthrough(t)
	_ = s
	objs, _ := b.Node.Org.Store.TransactionObjects(ctx, txn)
	var evidence string
	for _, raw := range objs {
		o, _ := canonical.DecodeObject(raw)
		if o["object_type"] == "evidence" {
			evidence = o["id"].(string)
		}
	}
	dir := filepath.Join(t.TempDir(), "partial")
	if _, err := export.Write(ctx, b.Node.Org.Store, txn, dir, export.Options{OmitObjects: []string{evidence}}); err != nil {
		t.Fatal(err)
	}
	bd, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(bd.Manifest.StatedGaps) != 1 || bd.Manifest.StatedGaps[0] != evidence {
		t.Fatalf("stated gaps %v", bd.Manifest.StatedGaps)
	}
	for _, o := range bd.ObjectValues() {
		if o["id"] == evidence {
			t.Fatal("the withheld evidence was exported")
		}
	}
	rep, err := verify.VerifyDir(dir, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results.Failed != 0 {
		t.Fatalf("a stated boundary failed verification: %+v", rep.Failures())
	}
}
