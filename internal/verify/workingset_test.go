package verify_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// Gather reads a record's working set through any Reader: here a map of
// the record's objects and a bundle directory of them, each without the
// last event, which is then checked as an extension. The event extends
// the record; the same event with other content does not; and the working
// set is what the rules read about it, not the whole record.
func TestGatherExtends(t *testing.T) {
	rec, err := verifytest.New(3)
	if err != nil {
		t.Fatal(err)
	}
	last := rec.EventIDs[len(rec.EventIDs)-1]
	var held []map[string]any
	for _, o := range rec.Objects {
		if o["id"] != last {
			held = append(held, o)
		}
	}
	dir := filepath.Join(t.TempDir(), "b")
	if err := bundle.Write(dir, rec.Contents(), bundle.WriteOptions{OmitObjects: []string{last}}); err != nil {
		t.Fatal(err)
	}
	fromDir, err := verify.DirReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	tip := verify.Tip{Transaction: rec.TransactionID, Head: len(rec.EventIDs) - 1, Parties: [2]string{rec.Buyer.Org, rec.Supplier.Org}}
	opt := verify.Options{RulesVersion: verifytest.RulesVersion, Now: verifytest.Base.Add(48 * time.Hour)}
	for name, r := range map[string]verify.Reader{"map": verify.NewReader(held, rec.Mandates), "directory": fromDir} {
		t.Run(name, func(t *testing.T) {
			ev := rec.Object(last)
			x, err := verify.Gather(context.Background(), r, tip, []map[string]any{ev})
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Held) == 0 || len(x.Held) >= len(held) || len(x.Mandates) != len(rec.Mandates) {
				t.Fatalf("%d objects held of %d, %d mandates of %d", len(x.Held), len(held), len(x.Mandates), len(rec.Mandates))
			}
			x.Keys = rec.Keys
			if err := verify.Extend(x, opt).Err(); err != nil {
				t.Fatalf("the record's own last event: %v", err)
			}

			edited := clone(t, ev)
			edited["payload"].(map[string]any)["occurred_at"] = "2020-01-01T00:00:00Z"
			x, err = verify.Gather(context.Background(), r, tip, []map[string]any{edited})
			if err != nil {
				t.Fatal(err)
			}
			x.Keys = rec.Keys
			if verify.Extend(x, opt).Err() == nil {
				t.Fatal("an event edited after it was signed extends the record")
			}
		})
	}
}
