package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
)

// scrape serves m's handler once and parses what it answers.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value is name{labels}'s value, and whether the series is there.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
next:
	for _, s := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if len(have) != len(labels) {
			continue
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		if c := s.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		return s.GetGauge().GetValue(), true
	}
	return 0, false
}

// TestMetrics: the counters count what they are told with their label
// sets closed (an unregistered code, a rail's own word); the gauges read
// the database at the scrape, every pinned counterparty and every state
// with a series of its own.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "party.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	m := New(Options{Store: st, Clock: func() time.Time { return now }, Peers: func() []string { return []string{"org_delta", "org_echo"} }})

	m.Act(protocol.ActOfferAccept, "recorded", "")
	m.Act(protocol.ActOfferAccept, "recorded", "")
	m.Act(protocol.ActOfferAccept, "held", reason.ApprovalRequired)
	m.Act(protocol.ActSettlementInstruct, "refused", "A202-NOT-A-CODE")
	m.Received("refused", reason.ApprovalRequired)
	m.Alert(record.Alert{Kind: record.AlertObligationOverdue})
	reg, err := rails.Open(dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox", Outcomes: []rails.Status{rails.Succeeded}}}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	rail, _ := m.Rails(reg).Get("rail_test_sandbox")
	in := rails.Instruction{InstructionID: "stl_1", IdempotencyKey: "k1", Currency: "EUR", Amount: "1.00", Attempt: 1}
	if res, err := rail.Submit(ctx, in); err != nil || res.Status != rails.Succeeded {
		t.Fatalf("submit: %v %v", res, err)
	}
	in.Amount = "2.00" // the same key for another instruction
	if _, err := rail.Submit(ctx, in); err == nil {
		t.Fatal("the sandbox took a key again for another instruction")
	}

	// What stands: a message waiting for org_delta for a minute, an
	// approval request, an expired transaction.
	err = st.Update(ctx, func(tx *store.Txn) error {
		if _, err := tx.Enqueue("org_delta", "txn_1", "key-1", [][]byte{[]byte(`{}`)}, nil, now.Add(-time.Minute), store.Lease{}); err != nil {
			return err
		}
		return tx.CreateTransaction("txn_1", "org_delta", "buyer", "", string(protocol.Expired))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.FileApprovalRequest(ctx, store.ApprovalRequest{ID: "apr_1", MandateID: "mdt_1", ActionHash: "h", Act: []byte(`{}`), Rules: `[]`}); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"party_acts_total", map[string]string{"act": "offer.accept", "outcome": "recorded", "reason_code": ""}, 2},
		{"party_acts_total", map[string]string{"act": "offer.accept", "outcome": "held", "reason_code": string(reason.ApprovalRequired)}, 1},
		{"party_acts_total", map[string]string{"act": "settlement.instruct", "outcome": "refused", "reason_code": "unregistered"}, 1},
		{"party_received_messages_total", map[string]string{"outcome": "refused", "reason_code": string(reason.ApprovalRequired)}, 1},
		{"party_deadline_alerts_total", map[string]string{"kind": "obligation.overdue"}, 1},
		{"party_rail_calls_total", map[string]string{"rail": "rail_test_sandbox", "call": "submit", "outcome": "succeeded"}, 1},
		{"party_rail_calls_total", map[string]string{"rail": "rail_test_sandbox", "call": "submit", "outcome": "key_reused"}, 1},
		{"party_outbox_pending_messages", map[string]string{"peer": "org_delta"}, 1},
		{"party_outbox_oldest_pending_age_seconds", map[string]string{"peer": "org_delta"}, 60},
		{"party_outbox_pending_messages", map[string]string{"peer": "org_echo"}, 0},
		{"party_outbox_oldest_pending_age_seconds", map[string]string{"peer": "org_echo"}, 0},
		{"party_approval_requests_pending", nil, 1},
		{"party_transactions", map[string]string{"state": "expired"}, 1},
		{"party_transactions", map[string]string{"state": "completed"}, 0},
		{"party_obligations_due", nil, 0},
		{"party_obligations_overdue", nil, 0},
	} {
		got, ok := value(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The request was filed by the store's own clock, just now.
	if age, ok := value(fams, "party_approval_requests_oldest_pending_age_seconds", nil); !ok || age < 0 || age > 60 {
		t.Errorf("the pending request's age: %v (present %v)", age, ok)
	}
	if _, ok := value(fams, "go_goroutines", nil); !ok {
		t.Error("no Go runtime metrics")
	}
}

// TestCountingAllocatesNothing: counting an act, a message or a rail call
// adds no allocation to the act's path once its series exists.
func TestCountingAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "party.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := New(Options{Store: st})
	reg, err := rails.Open(dir, []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox"}}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	rail, _ := m.Rails(reg).Get("rail_test_sandbox")
	for name, count := range map[string]func(){
		"act":      func() { m.Act(protocol.ActOfferAccept, "recorded", "") },
		"refusal":  func() { m.Act(protocol.ActOfferAccept, "refused", reason.ApprovalRequired) },
		"received": func() { m.Received("accepted", "") },
		"rail":     func() { rail.(countedRail).count("submit", rails.Result{Status: rails.Succeeded}, nil) },
	} {
		if n := testing.AllocsPerRun(100, count); n != 0 {
			t.Errorf("%s: %v allocations a count", name, n)
		}
	}
}
