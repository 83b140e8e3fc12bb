package verify_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// Verify reads a record as a third party does, from its bytes alone, and
// answers each check verified, failed or not checkable. A record whose
// first event was edited after both parties signed it fails, and says
// why: its hash no longer matches, so neither do the signatures over it,
// the next event's link to it, or the transition it claimed.
func ExampleVerify() {
	rec, err := verifytest.New(3)
	if err != nil {
		panic(err)
	}
	in := verify.Input{Objects: rec.Objects, Mandates: rec.Mandates, Keys: rec.Keys, TransactionID: rec.TransactionID}
	opt := verify.Options{RulesVersion: verifytest.RulesVersion, Now: verifytest.Base.Add(48 * time.Hour)}

	rep := verify.Verify(in, opt)
	fmt.Println("failed:", rep.Results.Failed, "not checkable:", rep.Results.NotCheckable)

	// A copy of the record with its first event's occurred_at moved.
	edited := make([]map[string]any, len(rec.Objects))
	for i, o := range rec.Objects {
		if o["id"] == rec.EventIDs[0] {
			b, _ := canonical.Marshal(o)
			o, _ = canonical.DecodeObject(b)
			o["payload"].(map[string]any)["occurred_at"] = "2020-01-01T00:00:00Z"
		}
		edited[i] = o
	}
	in.Objects = edited
	rep = verify.Verify(in, opt)
	fmt.Println("failed:", rep.Results.Failed > 0, "codes:", rep.CodesRaised())
	// Output:
	// failed: 0 not checkable: 0
	// failed: true codes: [A202-EVIDENCE-CHAIN-GAP A202-EVIDENCE-HASH-MISMATCH A202-EVIDENCE-SIGNATURE-INVALID A202-EVIDENCE-TRANSITION-ILLEGAL]
}

// VerifyDir is what a third party runs on a bundle directory it was
// handed: here one written from a three-event record, under the rules
// version its bundle.json states. Then the middle event's file is
// removed: the stream's chain no longer holds (per-stream continuity,
// evidence verification §4 step 4), whatever the bundle says about why.
func ExampleVerifyDir() {
	rec, err := verifytest.New(3)
	if err != nil {
		panic(err)
	}
	tmp, err := os.MkdirTemp("", "bundle")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "b")
	if err := bundle.Write(dir, rec.Contents(), bundle.WriteOptions{}); err != nil {
		panic(err)
	}
	opt := verify.Options{Now: verifytest.Base.Add(48 * time.Hour)} // the rules version is bundle.json's

	rep, err := verify.VerifyDir(dir, opt)
	if err != nil {
		panic(err)
	}
	fmt.Println("rules:", rep.RulesVersion, "failed:", rep.Results.Failed, "not checkable:", rep.Results.NotCheckable)

	if err := os.Remove(filepath.Join(dir, bundle.ObjectsDir, rec.EventIDs[1]+".json")); err != nil {
		panic(err)
	}
	rep, err = verify.VerifyDir(dir, opt)
	if err != nil {
		panic(err)
	}
	fmt.Println("failed:", rep.Results.Failed, "codes:", rep.CodesRaised())
	// Output:
	// rules: 1.3 failed: 0 not checkable: 0
	// failed: 1 codes: [A202-EVIDENCE-CHAIN-GAP]
}
