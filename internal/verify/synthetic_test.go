package verify_test

import (
	"testing"
	"time"

	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// at is a verification time after every synthetic record's objects.
var at = verifytest.Base.Add(48 * time.Hour)

func newRecord(t testing.TB, events int) *verifytest.Record {
	t.Helper()
	rec, err := verifytest.New(events)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func inputOf(rec *verifytest.Record) verify.Input {
	return verify.Input{Objects: rec.Objects, Mandates: rec.Mandates, Keys: rec.Keys, TransactionID: rec.TransactionID}
}

func opts() verify.Options {
	return verify.Options{RulesVersion: verifytest.RulesVersion, Now: at}
}

func TestSyntheticRecordVerifies(t *testing.T) {
	rec := newRecord(t, 8)
	rep := verify.Verify(inputOf(rec), opts())
	for _, c := range rep.Checks {
		t.Logf("%d %s %s %s %s %s", c.Step, c.Name, c.Subject, c.Result, c.Code, c.Detail)
	}
	if rep.Results.Failed != 0 {
		t.Fatalf("failed checks on a correct record: %+v", rep.Failures())
	}
}
