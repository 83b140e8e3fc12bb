package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
)

// approvalObject is a sealed approval object for request n, what
// decide stores.
func approvalObject(t *testing.T, n int) []byte {
	t.Helper()
	o := map[string]any{"id": fmt.Sprintf("apr_%024x", n), "object_type": "approval", "transaction_id": fmt.Sprintf("txn_%024x", n%3), "payload": map[string]any{}}
	if err := envelope.Seal(o); err != nil {
		t.Fatal(err)
	}
	b, err := canonical.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestApprovalRequestsShownAndOfTransaction: the approvals page gets every
// pending request, oldest first, then the latest DecidedShown decided ones,
// newest decision first; a transaction's timeline gets its own requests.
func TestApprovalRequestsShownAndOfTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	const n = 12
	for i := range n {
		if _, _, err := s.FileApprovalRequest(ctx, ApprovalRequest{ID: fmt.Sprintf("req_%02d", i), MandateID: "mnd_1", TransactionID: fmt.Sprintf("txn_%024x", i%3),
			ActionHash: fmt.Sprintf("%064x", i), Act: []byte(`{}`), Rules: `[]`}); err != nil {
			t.Fatal(err)
		}
	}
	// Decided in an order of their own: 5, 1, 9, 3, 7, 11, 0.
	order := []int{5, 1, 9, 3, 7, 11, 0}
	for _, i := range order {
		if err := decide(ctx, s, fmt.Sprintf("req_%02d", i), ApprovalApproved, approvalObject(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ApprovalRequestsShown(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	want := []string{"req_02", "req_04", "req_06", "req_08", "req_10", "req_00", "req_11", "req_07", "req_03"}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("shown %v, want the pending oldest first then the 4 latest decisions %v", ids, want)
	}
	of, err := s.ApprovalRequestsOfTransaction(ctx, fmt.Sprintf("txn_%024x", 1))
	if err != nil {
		t.Fatal(err)
	}
	ids = nil
	for _, r := range of {
		ids = append(ids, r.ID)
	}
	if want := []string{"req_01", "req_04", "req_07", "req_10"}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("of the transaction %v, want %v", ids, want)
	}
	// An act's requests are kept under its transaction (migration 30):
	// found there, not under another, and an act bound to none under none.
	if _, _, err := s.FileApprovalRequest(ctx, ApprovalRequest{ID: "req_none", MandateID: "mnd_1", ActionHash: fmt.Sprintf("%064x", 4), Act: []byte(`{}`), Rules: `[]`}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ txn, want string }{
		{fmt.Sprintf("txn_%024x", 1), "[req_04]"},
		{fmt.Sprintf("txn_%024x", 2), "[]"},
		{"txn_never_met", "[]"},
		{"", "[req_none]"},
	} {
		list, err := s.ApprovalRequestsFor(ctx, c.txn, "mnd_1", fmt.Sprintf("%064x", 4))
		if err != nil {
			t.Fatal(err)
		}
		ids = nil
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		if fmt.Sprint(ids) != c.want {
			t.Errorf("the act's requests under %q: %v, want %s", c.txn, ids, c.want)
		}
	}
}

// TestApprovalRequestsVersionCounts: the version the triggers keep is the
// requests filed plus the requests decided, as counted, after every
// filing and decision.
func TestApprovalRequestsVersionCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	check := func(when string) int64 {
		t.Helper()
		v, err := s.ApprovalRequestsVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var counted int64
		if err := s.db.QueryRow(`SELECT COUNT(*) + COUNT(decided_at) FROM approval_requests`).Scan(&counted); err != nil {
			t.Fatal(err)
		}
		if v != counted {
			t.Fatalf("%s: version %d, counted %d", when, v, counted)
		}
		return v
	}
	last := check("empty")
	for i := range 4 {
		if _, _, err := s.FileApprovalRequest(ctx, ApprovalRequest{ID: fmt.Sprintf("req_%02d", i), MandateID: "mnd_1", ActionHash: fmt.Sprintf("%064x", i), Act: []byte(`{}`), Rules: `[]`}); err != nil {
			t.Fatal(err)
		}
		if v := check("filed"); v != last+1 {
			t.Fatalf("filing moved the version from %d to %d", last, v)
		}
		last++
	}
	if err := decide(ctx, s, "req_02", ApprovalRejected, approvalObject(t, 2)); err != nil {
		t.Fatal(err)
	}
	if v := check("decided"); v != last+1 {
		t.Fatalf("a decision moved the version from %d to %d", last, v)
	}
	// Deciding again is refused and moves nothing.
	if err := decide(ctx, s, "req_02", ApprovalApproved, approvalObject(t, 3)); err == nil {
		t.Fatal("a request decided twice")
	}
	check("refused")
}

// TestAgentApprovalRequests: an agent's approval resources list the latest
// requests under the mandates this instance issued to it, newest first
// across its mandates (the row's order breaking a tie of times), and none
// of another agent's or under a mandate received from a counterparty;
// each mandate's are read by their index (migration 28), a page each.
func TestAgentApprovalRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	for _, m := range []struct{ id, agent, origin string }{
		{"mnd_a1", "agt_a", "local"}, {"mnd_a2", "agt_a", "local"}, {"mnd_b", "agt_b", "local"}, {"mnd_x", "agt_a", "org_peer"},
	} {
		body := fmt.Sprintf(`{"id":%q,"represented_organization_id":"org_a","subject":{"agent_id":%q,"key_id":"key_a"}}`, m.id, m.agent)
		if err := s.PutMandate(ctx, []byte(body), m.origin); err != nil {
			t.Fatal(err)
		}
	}
	// Filed in this order; r6 at the same instant as r4.
	for i, f := range []struct{ mandate, at string }{
		{"mnd_a1", "01"}, {"mnd_a2", "02"}, {"mnd_b", "03"}, {"mnd_a1", "04"}, {"mnd_x", "05"}, {"mnd_a2", "04"}, {"mnd_a1", "07"},
	} {
		id := fmt.Sprintf("req_r%d", i+1)
		if _, _, err := s.FileApprovalRequest(ctx, ApprovalRequest{ID: id, MandateID: f.mandate, ActionHash: fmt.Sprintf("%064x", i), Act: []byte(`{}`), Rules: `[]`}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE approval_requests SET requested_at = ? WHERE id = ?`, "2026-12-07T10:00:"+f.at+".000000000Z", id); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		agent string
		limit int
		want  string
	}{
		{"agt_a", 0, "[req_r7 req_r6 req_r4 req_r2 req_r1]"},
		{"agt_a", 3, "[req_r7 req_r6 req_r4]"},
		{"agt_b", 0, "[req_r3]"},
		{"agt_none", 0, "[]"},
	} {
		got, err := s.AgentApprovalRequests(ctx, c.agent, c.limit)
		if err != nil || got == nil {
			t.Fatalf("%s: %v %v", c.agent, got, err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if fmt.Sprint(ids) != c.want && !(len(ids) == 0 && c.want == "[]") {
			t.Errorf("%s, limit %d: %v, want %s", c.agent, c.limit, ids, c.want)
		}
	}
}

// TestDecideApprovalInOneTransaction: the request a decision is made on
// is the one the writer read; a request not pending is refused before
// decide runs, a decide that fails stores nothing, and a request never
// filed is ErrNotFound.
func TestDecideApprovalInOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "party.db"))
	if _, _, err := s.FileApprovalRequest(ctx, ApprovalRequest{ID: "req_01", MandateID: "mnd_1", TransactionID: fmt.Sprintf("txn_%024x", 1),
		ActionHash: fmt.Sprintf("%064x", 1), Act: []byte(`{}`), Rules: `[]`}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	failing := errors.New("the signer failed")
	if err := s.DecideApproval(ctx, "req_01", func(r ApprovalRequest) (string, []byte, error) {
		calls++
		return "", nil, failing
	}); !errors.Is(err, failing) {
		t.Fatalf("a failing decision: %v", err)
	}
	if r, err := s.GetApprovalRequest(ctx, "req_01"); err != nil || r.Status != ApprovalPending || r.ApprovalID != "" {
		t.Fatalf("after a failed decision: %+v %v", r, err)
	}
	if _, err := s.GetObject(ctx, fmt.Sprintf("txn_%024x", 1), fmt.Sprintf("apr_%024x", 1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed decision stored its approval: %v", err)
	}
	if err := s.DecideApproval(ctx, "req_01", func(r ApprovalRequest) (string, []byte, error) {
		calls++
		if r.ID != "req_01" || r.Status != ApprovalPending || r.ActionHash != fmt.Sprintf("%064x", 1) {
			t.Errorf("decide was handed %+v", r)
		}
		return ApprovalApproved, approvalObject(t, 1), nil
	}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetApprovalRequest(ctx, "req_01"); err != nil || r.Status != ApprovalApproved || r.ApprovalID != fmt.Sprintf("apr_%024x", 1) {
		t.Fatalf("after the decision: %+v %v", r, err)
	}
	if err := s.DecideApproval(ctx, "req_01", func(ApprovalRequest) (string, []byte, error) {
		calls++
		return ApprovalRejected, approvalObject(t, 2), nil
	}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second decision: %v", err)
	}
	if err := s.DecideApproval(ctx, "req_99", func(ApprovalRequest) (string, []byte, error) {
		calls++
		return ApprovalApproved, approvalObject(t, 3), nil
	}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a request never filed: %v", err)
	}
	if calls != 2 {
		t.Fatalf("decide ran %d times, want 2 (not for a decided request, nor for one never filed)", calls)
	}
}

// decide decides request id as status with the approval object given.
func decide(ctx context.Context, s *Store, id, status string, approval []byte) error {
	return s.DecideApproval(ctx, id, func(ApprovalRequest) (string, []byte, error) { return status, approval, nil })
}
