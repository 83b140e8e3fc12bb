package history_test

import (
	"context"
	"flag"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/history"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/wiretest"
)

var updatePlans = flag.Bool("update", false, "rewrite testdata/plans.txtar from the plans SQLite makes now")

// wholeRead matches a step of a query plan that reads every row of a table
// or every entry of one of its indexes: SQLite's SCAN. The tables that hold
// a row or a few per setting rather than per transaction are left out.
var wholeRead = regexp.MustCompile(`(?m)^SCAN ([A-Za-z_]\w*)`) // not "SCAN 9-ROW VALUES CLAUSE", an INSERT's own rows

// pageSorted matches a plan that sorts every row it found (a temporary
// b-tree for the whole ORDER BY): in a statement that returns a page
// (LIMIT), every row of a range that grows with the history is read and
// sorted to keep a few.
var pageSorted = regexp.MustCompile(`(?m)USE TEMP B-TREE FOR ORDER BY$`)

// settings are the tables that hold the organisation's settings and
// counters, whose size does not follow the history, and the work lists a
// write empties before it commits (budget_dirty: the transactions whose
// budget counts it changed; budget_backlog, those held before migration
// 25, emptied by Open).
var settings = map[string]bool{"budgets": true, "meta": true, "schema_migrations": true, "key_objects_version": true,
	"approval_requests_version": true, "transaction_states": true, "mandate_policies": true,
	"budget_dirty": true, "budget_backlog": true}

// wholeReadsAllowed are the statements that walk a table or an index on
// purpose, each with why its cost is not the history's.
var wholeReadsAllowed = []struct{ contains, unless, why string }{
	{"FROM transactions WHERE 1=1", "counterparty = ?", "a list page: the transactions by their update time, newest first, until a page is filled (LIMIT); " +
		"filtered by a counterparty, the counterparty's own (transactions_by_counterparty, store migration 27)"},
	{"INDEXED BY objects_at_issue", "", "the transactions `party disputes` shows: the index of the disputes, determinations and exceptions alone (store migration 27)"},
	{"INDEXED BY approval_requests_by_act", "", "one act's requests, sorted: as many as that act was held for, not the history"},
	{"WHERE status = 'pending' AND next_attempt <= ? AND lease_until <= ?", "", "the messages due, sorted to be claimed in order: pending ones, which delivery empties, not the history"},
	{"FROM transactions ORDER BY created_at, rowid", "", "every transaction: the command line's list of them all, and the one rebuild of the obligations' states a database from before migration 7 needs (rebuildObligationStates)"},
}

// TestNoStatementReadsTheHistory: every statement the acts and the daily
// reads prepare, on both sides of a pair that traded every shape of
// transaction (formation, obligations, settlement, disputes, termination,
// an open offer), a formation through the principal's approval, the
// loops of a running instance and the store calls of the rare paths, is
// explained by SQLite, and none reads a
// whole table of the history, nor sorts all it finds to return a page:
// at a million transactions such a statement would read a million rows on
// the path of an act. Found this way: filing an approval request read
// every request ever filed, deleting a refused act's object listed every
// recorded event, an agent's approval resources sorted every request
// under its mandates for a page of 50 (store migration 28).
func TestNoStatementReadsTheHistory(t *testing.T) {
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	history.Trade(t, b, s, c)
	txn := recordtest.Form(t, b, s, "3200.00")
	recordtest.Complete(t, b, s, txn)
	recordtest.Offer(t, s, "3200.00")
	for _, sd := range []*recordtest.Side{b, s} {
		e, st := sd.Engine, sd.Node.Org.Store
		if _, err := e.ListTransactions(ctx, readmodel.ListFilter{Limit: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ListTransactions(ctx, readmodel.ListFilter{Limit: 10, State: "completed"}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []readmodel.ListFilter{{Limit: 1, Counterparty: "org_delta"}, {Limit: 1, Counterparty: "org_northstar"}, {Limit: 10, Counterparty: "org_delta", State: "completed"}} {
			page, err := e.ListTransactions(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if page.Next != "" {
				f.Cursor = page.Next
				if _, err := e.ListTransactions(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := st.TransactionsAtIssue(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := sd.Agent.Approvals(ctx); err != nil { // the agent's approval resources
			t.Fatal(err)
		}
		if _, err := e.Inbox(ctx, sd.Actor(), sd.Mandate, 10); err != nil {
			t.Fatal(err)
		}
		e.WorkDeadlines(ctx)
		e.WorkTiming(ctx)
		e.WorkSettlements(ctx)
		e.ReleaseHeld(ctx)
		e.Resume(ctx)
		if _, err := st.Gauges(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApprovalRequestsShown(ctx, principal.DecidedShown); err != nil {
			t.Fatal(err)
		}
		if _, err := export.Write(ctx, st, txn, t.TempDir(), export.Options{}); err != nil {
			t.Fatal(err)
		}
		// The rare paths, by their store calls: a refused act's objects
		// removed, a withdrawal's renewed decision, a fork's lookup.
		if err := st.Update(ctx, func(tx *store.Txn) error {
			if err := tx.DeleteObject(txn, "obj_none"); err != nil {
				return err
			}
			return tx.RenameWithdrawalDecision("pol_none", "pol_other")
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Forks(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	plans := map[string]string{} // statement, one line, to its plan
	for _, sd := range []*recordtest.Side{b, s} {
		st := sd.Node.Org.Store
		for _, q := range st.Prepared() {
			plan, err := st.Plan(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			n++
			plans[strings.Join(strings.Fields(q), " ")] = plan
			for _, m := range wholeRead.FindAllStringSubmatch(plan, -1) {
				if m[1] == "CONSTANT" || settings[m[1]] || allowed(q) { // SCAN CONSTANT ROW: a SELECT without FROM
					continue
				}
				t.Errorf("%s reads all of %s:\n%s\n%s", sd.Node.Org.Config().OrganizationID, m[1], strings.Join(strings.Fields(q), " "), plan)
			}
			if strings.Contains(q, "LIMIT") && pageSorted.MatchString(plan) && !allowed(q) {
				t.Errorf("%s sorts all it finds for a page:\n%s\n%s", sd.Node.Org.Config().OrganizationID, strings.Join(strings.Fields(q), " "), plan)
			}
		}
	}
	if n < 100 {
		t.Fatalf("explained %d statements: the round above prepares more", n)
	}
	// Every plan, pinned: an index added for one statement can change the
	// plan of another (migration 28's, by mandate, was taken for the look
	// for one act's requests, walking every request under the mandate), so
	// a change of plan is reviewed like a change of code.
	var ar txtar.Archive
	for _, q := range slices.Sorted(maps.Keys(plans)) {
		ar.Files = append(ar.Files, txtar.File{Name: q, Data: []byte(plans[q] + "\n")})
	}
	wiretest.Golden(t, filepath.Join("testdata", "plans.txtar"), txtar.Format(&ar), *updatePlans,
		"go test ./internal/history -run TestNoStatementReadsTheHistory -update")
}

func allowed(q string) bool {
	for _, a := range wholeReadsAllowed {
		if strings.Contains(q, a.contains) && (a.unless == "" || !strings.Contains(q, a.unless)) {
			return true
		}
	}
	return false
}
