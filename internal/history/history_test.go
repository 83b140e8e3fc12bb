package history_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/history"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// outcome is what a verification report says, without its times.
type outcome struct {
	Results verify.Counts
	Checks  []string
}

func outcomeOf(r *verify.Report) outcome {
	o := outcome{Results: r.Results}
	for _, c := range r.Checks {
		o.Checks = append(o.Checks, fmt.Sprintf("%d %s %s %s", c.Step, c.Name, c.Result, c.Code))
	}
	sort.Strings(o.Checks)
	return o
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestGeneratedVerify generates a history of every shape on a pair and
// verifies every generated transaction on both sides, as its own export
// would be: no check fails, and the report is the template's. Each side's
// state of each is the template's, and each engine reads it as it reads
// the template; a generated open offer is in the buyer's inbox, and the
// engines accept and complete it; the pair still trades after.
func TestGeneratedVerify(t *testing.T) {
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	src := history.Trade(t, b, s, c)
	for _, k := range history.Kinds {
		objs, sigs, rows := size(t, b.Node.Org.Store, s.Node.Org.Store, src.Template(k))
		t.Logf("%s: %d objects, %d signatures, %d rows on both sides; hashes kept: %v", k, objs, sigs, rows, src.Stable(k))
	}
	sides := []*recordtest.Side{b, s}
	want := map[history.Kind][2]outcome{}
	states := map[history.Kind][2]string{}
	for _, k := range history.Kinds {
		var o [2]outcome
		var st [2]string
		for i, sd := range sides {
			r, err := export.VerifyTransaction(ctx, sd.Node.Org.Store, src.Template(k))
			if err != nil {
				t.Fatal(err)
			}
			if r.Results.Failed != 0 {
				t.Fatalf("the %s template fails on side %d: %+v", k, i, r.Raised)
			}
			o[i] = outcomeOf(r)
			x, err := sd.Node.Org.Store.GetTransaction(ctx, src.Template(k))
			if err != nil {
				t.Fatal(err)
			}
			st[i] = x.State
		}
		want[k], states[k] = o, st
	}
	const n = 30
	c0, w0 := cpuTime(), time.Now()
	txns, err := src.Generate(ctx, n, history.DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	cpu, wall := cpuTime()-c0, time.Since(w0)
	t.Logf("generated %d transactions in %v (%.0f/s), %.2f ms of CPU each", n, wall, float64(n)/wall.Seconds(), float64(cpu)/1e6/n)
	if len(txns) != n {
		t.Fatalf("generated %d, want %d", len(txns), n)
	}
	kinds := map[history.Kind]int{}
	for _, x := range txns {
		kinds[x.Kind]++
		for i, sd := range sides {
			r, err := export.VerifyTransaction(ctx, sd.Node.Org.Store, x.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Results.Failed != 0 {
				t.Fatalf("%s %s fails on side %d: %+v", x.Kind, x.ID, i, r.Raised)
			}
			if got := outcomeOf(r); !reflect.DeepEqual(got, want[x.Kind][i]) {
				t.Fatalf("%s %s on side %d: report %+v, the template's %+v", x.Kind, x.ID, i, got, want[x.Kind][i])
			}
			st, err := sd.Node.Org.Store.GetTransaction(ctx, x.ID)
			if err != nil || st.State != states[x.Kind][i] {
				t.Fatalf("%s %s on side %d is %s, the template %s (%v)", x.Kind, x.ID, i, st.State, states[x.Kind][i], err)
			}
		}
	}
	for _, k := range history.Kinds {
		if kinds[k] == 0 {
			t.Errorf("no %s transaction among %v", k, kinds)
		}
	}
	// Each engine reads every generated transaction as it reads its
	// template: the same state, as many events and objects.
	for _, x := range txns {
		for i, sd := range sides {
			got, err := sd.Engine.Transaction(ctx, x.ID)
			if err != nil {
				t.Fatal(err)
			}
			tv, err := sd.Engine.Transaction(ctx, src.Template(x.Kind))
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tv.State || len(got.Events) != len(tv.Events) || len(got.Objects) != len(tv.Objects) {
				t.Fatalf("%s %s on side %d reads as %s, %d events, %d objects; the template as %s, %d, %d", x.Kind, x.ID, i,
					got.State, len(got.Events), len(got.Objects), tv.State, len(tv.Events), len(tv.Objects))
			}
		}
	}
	// The buyer's inbox holds every generated open offer, and one of
	// them is accepted and the transaction completed by the engines.
	inbox, err := b.Engine.Inbox(ctx, b.Actor(), b.Mandate, 200)
	if err != nil {
		t.Fatal(err)
	}
	offers := map[string]string{}
	for _, it := range inbox {
		offers[it.TransactionID] = it.OfferID
	}
	var open string
	for _, x := range txns {
		if x.Kind == history.OpenOffer {
			if offers[x.ID] == "" {
				t.Fatalf("the buyer's inbox does not list the generated offer of %s", x.ID)
			}
			open = x.ID
		}
	}
	apr := recordtest.Approve(t, b, offers[open])
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: offers[open], ApprovalID: apr})
	if err != nil || out.State != "committed" {
		t.Fatalf("accepting the generated offer of %s: %+v %v", open, out, err)
	}
	recordtest.Flush(ctx, b, s)
	recordtest.Complete(t, b, s, open)
	recordtest.SameRecord(t, b, s, open, 7)
	for i, sd := range sides {
		r, err := export.VerifyTransaction(ctx, sd.Node.Org.Store, open)
		if err != nil || r.Results.Failed != 0 {
			t.Fatalf("the generated offer, accepted and completed, on side %d: %v %+v", i, err, r.Raised)
		}
	}
	// A bundle on disk, as `party export` then `party verify` read it.
	dir := filepath.Join(t.TempDir(), "bundle")
	if _, err := export.Write(ctx, s.Node.Org.Store, txns[0].ID, dir, export.Options{}); err != nil {
		t.Fatal(err)
	}
	r, err := verify.VerifyDir(dir, verify.Options{})
	if err != nil || r.Results.Failed != 0 {
		t.Fatalf("the exported bundle: %v %+v", err, r)
	}
	// The pair trades on over the history.
	txn := recordtest.Form(t, b, s, "3100.00")
	recordtest.Complete(t, b, s, txn)
	recordtest.SameRecord(t, b, s, txn, 7)
}

// TestGeneratedRowsAreTheTemplates: every generated transaction has as
// many rows in each table, on each side, as its template, and a time of
// its own (list_transactions orders by it).
func TestGeneratedRowsAreTheTemplates(t *testing.T) {
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	src := history.Trade(t, b, s, c)
	txns, err := src.Generate(ctx, len(history.Kinds)*25, history.DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	count := func(st *store.Store, txn string) map[string]int {
		rows, err := st.TransactionRows(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, r := range rows {
			m[r.Table] = len(r.Values)
		}
		return m
	}
	times := map[string]bool{}
	for _, x := range txns {
		for _, sd := range []*recordtest.Side{b, s} {
			st := sd.Node.Org.Store
			tx, err := st.GetTransaction(ctx, x.ID)
			if err != nil {
				t.Fatal(err)
			}
			at := sd.Node.Org.Config().OrganizationID + tx.UpdatedAt
			if times[at] {
				t.Fatalf("%s shares its updated_at %s with another generated transaction", x.ID, tx.UpdatedAt)
			}
			times[at] = true
			if got, want := count(st, x.ID), count(st, src.Template(x.Kind)); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s holds rows %v, the template %v", x.Kind, x.ID, got, want)
			}
		}
	}
}

// BenchmarkGenerate measures a history's cost per transaction in the
// default mix, both sides written (ns/op is per transaction; cpu-ms/txn
// the whole process's CPU).
//
//	go test -run '^$' -bench Generate -benchtime 2000x ./internal/history
func BenchmarkGenerate(b *testing.B) {
	ctx := context.Background()
	buyer, supplier, c := recordtest.Pair(b)
	src := history.Trade(b, buyer, supplier, c)
	b.ResetTimer()
	c0 := cpuTime()
	if _, err := src.Generate(ctx, b.N, history.DefaultMix); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/txn")
}

// size counts txn's objects (both sides' union), their signatures, and
// the rows both sides hold about it.
func size(t *testing.T, buyer, supplier *store.Store, txn string) (objs, sigs, rows int) {
	t.Helper()
	seen := map[string]bool{}
	for _, st := range []*store.Store{buyer, supplier} {
		rs, err := st.TransactionRows(context.Background(), txn)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			rows += len(r.Values)
		}
		raws, err := st.TransactionObjects(context.Background(), txn)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range raws {
			o, err := canonical.DecodeObject(raw)
			if err != nil {
				t.Fatal(err)
			}
			if id := o["id"].(string); !seen[id] {
				seen[id] = true
				list, _ := o["signatures"].([]any)
				objs, sigs = objs+1, sigs+len(list)
			}
		}
	}
	return objs, sigs, rows
}

// TestGenerateRefuses: a shape with no template, an empty mix and a
// cancelled context are refused, and nothing is written.
func TestGenerateRefuses(t *testing.T) {
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	src := history.Trade(t, b, s, c, history.Committed)
	if src.Template(history.OpenOffer) != "" {
		t.Fatal("an open offer template that was not traded")
	}
	if _, err := src.Generate(ctx, 10, history.Mix{{Kind: history.OpenOffer, Weight: 1}}); err == nil {
		t.Fatal("a shape with no template generated")
	}
	if _, err := src.Generate(ctx, 10, nil); err == nil {
		t.Fatal("an empty mix generated")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.Generate(cancelled, 600, history.Mix{{Kind: history.Committed, Weight: 1}}); err == nil {
		t.Fatal("generated under a cancelled context")
	}
	page, err := b.Engine.ListTransactions(ctx, readmodel.ListFilter{})
	if err != nil || len(page.Transactions) != 1 {
		t.Fatalf("the buyer holds %d transactions, want the template alone (%v)", len(page.Transactions), err)
	}
}

// TestBuyerOnly: a BuyerOnly source writes its copies into the buyer's
// store, each verifying there, and nothing into the supplier's.
func TestBuyerOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	src := history.Trade(t, b, s, c, history.Completed)
	count := func(sd *recordtest.Side) int {
		t.Helper()
		ts, err := sd.Node.Org.Store.Transactions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ts)
	}
	b0, s0 := count(b), count(s)
	txns, err := src.BuyerOnly().Generate(ctx, 3, history.Mix{{Kind: history.Completed, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(b) - b0; got != 3 {
		t.Fatalf("the buyer holds %d more transactions, want 3", got)
	}
	if got := count(s) - s0; got != 0 {
		t.Fatalf("the supplier holds %d more transactions, want none", got)
	}
	for _, x := range txns {
		r, err := export.VerifyTransaction(ctx, b.Node.Org.Store, x.ID)
		if err != nil || r.Results.Failed != 0 {
			t.Fatalf("%s: %v %+v", x.ID, err, r.Raised)
		}
	}
	// The source it came from still writes both.
	if _, err := src.Generate(ctx, 1, history.Mix{{Kind: history.Completed, Weight: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := count(s) - s0; got != 1 {
		t.Fatalf("the supplier holds %d more transactions after a Generate of both, want 1", got)
	}
}
