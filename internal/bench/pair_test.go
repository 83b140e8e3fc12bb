package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
)

// pair is the demo's two organisations, served in process by daemon.Run,
// with trading mandates scoped by category and counterparty (not by one
// transaction id), so that one mandate covers every formation of a batch.
type pair struct {
	buyer, supplier *demo.Party
	// supplierMandate lists offer.submit and agreement.sign.
	supplierMandate string
	// buyerApproval holds every offer.accept for the procurement lead, as
	// the demo's buyer mandate does; buyerDirect has no approval rule.
	buyerApproval, buyerDirect string
}

// listen binds n loopback listeners on port 0; they are handed to the
// daemons, so no address is probed and released before use.
func listen(b *testing.B, n int) ([]net.Listener, []string) {
	var addrs []string
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return ls, addrs
}

// issue has p's principal issue a trading mandate to its agent for the
// calibration category with one counterparty, before its daemon starts.
func issue(ctx context.Context, p *demo.Party, actions []string, counterparty string, rules []map[string]any) (string, error) {
	o, err := org.Open(p.Dir, org.Options{})
	if err != nil {
		return "", err
	}
	defer o.Close()
	now := time.Now().UTC()
	ps, err := principal.Open(o)
	if err != nil {
		return "", err
	}
	m, err := ps.IssueMandate(ctx, authority.IssueRequest{
		ValidFrom:     envelope.Timestamp(now.Add(-time.Minute)),
		ValidUntil:    envelope.Timestamp(now.Add(30 * 24 * time.Hour)),
		Actions:       actions,
		Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{counterparty}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		ApprovalRules: rules,
	})
	if err != nil {
		return "", err
	}
	return m["id"].(string), nil
}

// startPair initialises both state directories under b.TempDir with
// demo.Setup, issues the category-scoped mandates, and serves both
// instances with the record engine over A2A (as examples/two-party does)
// until the benchmark ends.
func startPair(b *testing.B) *pair {
	b.Helper()
	// The scripted agents' MCP clients and demo.Approve share
	// http.DefaultTransport, whose two idle connections per host would
	// make eight concurrent agents reconnect on most calls: that is the
	// client's cost, not the instance's.
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = 32
	}
	// The runtime as party serve sets it (the collector, the processors);
	// the agents share this process and so the settings.
	b.Cleanup(cli.ServeRuntime())
	ctx := context.Background()
	out := b.TempDir()
	lns, ports := listen(b, 6)
	buyer, supplier, err := demo.Setup(ctx, out,
		demo.Ports{MCP: ports[0], Peer: ports[1], Admin: ports[2]},
		demo.Ports{MCP: ports[3], Peer: ports[4], Admin: ports[5]})
	if err != nil {
		b.Fatal(err)
	}
	p := &pair{buyer: buyer, supplier: supplier}
	buyerActions := []string{"offer.accept", "agreement.sign"}
	if p.buyerApproval, err = issue(ctx, buyer, buyerActions, supplier.Org, []map[string]any{{
		"id":                    "r_acceptance_needs_procurement_lead",
		"when":                  map[string]any{"path": "$.action_type", "operator": "equals", "value": "offer.accept"},
		"approver":              map[string]any{"organization_id": buyer.Org, "role": "procurement_lead"},
		"expires_after_seconds": 3600,
	}}); err != nil {
		b.Fatal(err)
	}
	if p.buyerDirect, err = issue(ctx, buyer, buyerActions, supplier.Org, nil); err != nil {
		b.Fatal(err)
	}
	if p.supplierMandate, err = issue(ctx, supplier, []string{"offer.submit", "agreement.sign"}, buyer.Org, nil); err != nil {
		b.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	started := 0
	b.Cleanup(func() {
		stop()
		for i := 0; i < started; i++ {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				b.Error(err)
			}
		}
	})
	for i, party := range []*demo.Party{buyer, supplier} {
		logf, err := os.OpenFile(filepath.Join(party.Dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { logf.Close() })
		ready := make(chan struct{})
		started++
		go func() {
			done <- daemon.Run(runCtx, party.Dir, daemon.Options{
				Logger:    slog.New(slog.NewJSONHandler(logf, nil)),
				Ready:     func(daemon.Addrs) { close(ready) },
				Mount:     []daemon.Mounter{daemon.Record(daemon.PeerOptions{})},
				Listeners: daemon.Listeners{MCP: lns[3*i], Peer: lns[3*i+1], Admin: lns[3*i+2]},
			})
		}()
		select {
		case <-ready:
		case err := <-done:
			started--
			b.Fatalf("%s did not start: %v", party.Name, err)
		case <-time.After(30 * time.Second):
			b.Fatalf("%s did not start within 30s", party.Name)
		}
	}
	return p
}

// agents is one scripted agent per organisation, each with its own MCP
// session.
type agents struct{ buyer, supplier *demo.Agent }

func (p *pair) connect(b *testing.B) agents {
	b.Helper()
	ctx := context.Background()
	ba, err := demo.Connect(ctx, p.buyer, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ba.Close)
	sa, err := demo.Connect(ctx, p.supplier, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sa.Close)
	return agents{ba, sa}
}

// offers numbers the offers' request ids.
var offers atomic.Int64

// form runs one formation: the supplier's agent offers (propose_offer);
// with approval, the buyer's agent finds the offer's acceptance act
// (list_inbox), asks for approval (request_approval), its principal
// approves on the admin API (demo.Approve) and the agent reads the
// approval's id (approval_status); then the buyer's agent calls
// accept_offer, which returns once the transaction is committed. It returns
// the wall time of the accept_offer call alone. Every write carries a
// request_id, as the demo's agent sends.
func (p *pair) form(ctx context.Context, a agents, approval bool) (time.Duration, error) {
	off, err := a.supplier.Call(ctx, "propose_offer", map[string]any{
		"mandate_id": p.supplierMandate, "counterparty_organization_id": p.buyer.Org,
		"terms": demo.Terms("3200.00"), "valid_until": envelope.Timestamp(time.Now().UTC().Add(24 * time.Hour)),
		"request_id": fmt.Sprintf("offer-%d", offers.Add(1)),
	})
	if err != nil {
		return 0, err
	}
	if off["status"] != "delivered" {
		return 0, fmt.Errorf("offer %v: %v", off["status"], off["waiting_for"])
	}
	offerID, _ := off["objects"].(map[string]any)["offer"].(string)
	mandate := p.buyerDirect
	if approval {
		mandate = p.buyerApproval
	}
	args := map[string]any{"mandate_id": mandate, "offer_id": offerID, "request_id": "accept-" + offerID}
	if approval {
		inbox, err := a.buyer.Call(ctx, "list_inbox", map[string]any{"mandate_id": mandate})
		if err != nil {
			return 0, err
		}
		var act any
		items, _ := inbox["offers"].([]any)
		for _, o := range items {
			if item, _ := o.(map[string]any); item["offer_id"] == offerID {
				act = item["acceptance_act"]
			}
		}
		if act == nil {
			return 0, fmt.Errorf("offer %s is not in the buyer's inbox", offerID)
		}
		req, err := a.buyer.Call(ctx, "request_approval", map[string]any{"mandate_id": mandate, "proposed_action": act, "request_id": "approval-" + offerID})
		if err != nil {
			return 0, err
		}
		rid := fmt.Sprint(req["approval_request_id"])
		if err := demo.Approve(ctx, p.buyer, rid); err != nil {
			return 0, err
		}
		st, err := a.buyer.Call(ctx, "approval_status", map[string]any{"approval_request_id": rid})
		if err != nil {
			return 0, err
		}
		if st["status"] != "approved" {
			return 0, fmt.Errorf("approval %s is %v", rid, st["status"])
		}
		args["approval_id"] = st["approval_id"]
	}
	start := time.Now()
	acc, err := a.buyer.Call(ctx, "accept_offer", args)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if acc["state"] != "committed" || acc["status"] != "recorded" {
		return 0, fmt.Errorf("after accept_offer the transaction is %v, %v (%v)", acc["state"], acc["status"], acc["waiting_for"])
	}
	return took, nil
}

// quantile is the nearest-rank quantile q of sorted durations: the
// smallest sample at or above which a fraction q of samples fall. For 100
// samples the p50 is the 50th and the p99 the 99th smallest.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportAccepts reports the accept_offer latencies as custom metrics.
func reportAccepts(b *testing.B, accepts []time.Duration) {
	s := append([]time.Duration(nil), accepts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	b.ReportMetric(ms(quantile(s, 0.50)), "ms/accept-p50")
	b.ReportMetric(ms(quantile(s, 0.99)), "ms/accept-p99")
	b.ReportMetric(ms(s[len(s)-1]), "ms/accept-max")
}

// processCPU is the user and system time this process has used: both
// instances, their agents and the benchmark, since all run in it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
