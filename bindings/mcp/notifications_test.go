package mcp_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// listener is an in-memory MCP client of one agent's server that counts
// the notifications/resources/updated it is sent, by URI. It speaks the
// latest protocol unless version names another: under 2026-07-28 a
// subscription is a subscriptions/listen stream the client does not wait
// on, so a refused one is seen only under an earlier version.
type listener struct {
	cs      *sdk.ClientSession
	updates chan string

	mu  sync.Mutex
	got map[string]int
}

func listen(t *testing.T, srv *sdk.Server, version ...string) *listener {
	t.Helper()
	l := &listener{updates: make(chan string, 256), got: map[string]int{}}
	ct, st := sdk.NewInMemoryTransports()
	if _, err := srv.Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "listener"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			l.mu.Lock()
			l.got[req.Params.URI]++
			l.mu.Unlock()
			l.updates <- req.Params.URI
		},
	})
	var opts *sdk.ClientSessionOptions
	if len(version) > 0 {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: version[0]}
	}
	cs, err := c.Connect(t.Context(), ct, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	l.cs = cs
	return l
}

// agentServer is the MCP server of the side's agent as `party serve`
// builds it: its tools, the record's resources and its approvals.
func agentServer(t *testing.T, sd *recordtest.Side) *sdk.Server {
	tools := append(mcp.AgentTools(sd.Agent), mcp.RecordTools(sd.Engine)...)
	return mcp.NewAgentServer(sd.Agent.AgentID(), tools, sd.Node.Org.Store, nil,
		mcp.WithResources(t.Context(), sd.Engine), mcp.WithApprovals(t.Context(), sd.Agent))
}

func (l *listener) subscribe(t *testing.T, uri string) {
	t.Helper()
	if err := l.cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
}

func (l *listener) read(t *testing.T, uri string, v any) {
	t.Helper()
	res, err := l.cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), v); err != nil {
		t.Fatal(err)
	}
}

func (l *listener) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.got)
}

// await waits for a notification of each of uris.
func (l *listener) await(t *testing.T, uris ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, u := range uris {
		want[u] = true
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case u := <-l.updates:
			delete(want, u)
		case <-deadline:
			t.Fatalf("no notifications/resources/updated for %v (have %v)", slices.Collect(maps.Keys(want)), l.counts())
		}
	}
}

// quiet waits until no notification has come for d: a notifier that
// announces a change twice does so within one pass or one approval poll.
func (l *listener) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-l.updates:
		case <-time.After(d):
			return
		case <-deadline:
			t.Fatalf("notifications never stopped: %v", l.counts())
		}
	}
}

// The agent's approval requests are resources: listed, read as
// approval_status answers, subscribed to; another agent of the same
// instance sees none of them.
func TestApprovalResources(t *testing.T) {
	t.Parallel()
	n, _, mid := setup(t)
	a := agent.New(n.Org)
	srv := mcp.NewAgentServer(a.AgentID(), mcp.AgentTools(a), n.Org.Store, nil, mcp.WithApprovals(t.Context(), a))
	l := listen(t, srv, "2025-11-25")

	if !strings.Contains(l.cs.InitializeResult().Instructions, mcp.ApprovalURITemplate) {
		t.Fatal("the instructions do not name the approval resources")
	}
	rs, err := l.cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rs.Resources, func(r *sdk.Resource) bool { return r.URI == mcp.ApprovalsURI }) {
		t.Fatalf("resources/list lacks %s", mcp.ApprovalsURI)
	}
	ts, err := l.cs.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ts.ResourceTemplates, func(r *sdk.ResourceTemplate) bool { return r.URITemplate == mcp.ApprovalURITemplate }) {
		t.Fatalf("resources/templates/list lacks %s", mcp.ApprovalURITemplate)
	}

	var list mcp.ApprovalsResult
	l.read(t, mcp.ApprovalsURI, &list)
	if list.ApprovalRequests == nil || len(list.ApprovalRequests) != 0 {
		t.Fatalf("approvals before any request: %+v", list)
	}
	req, isErr := callJSON(t, l.cs, "request_approval", map[string]any{"mandate_id": mid, "proposed_action": act("3500.00")})
	if isErr {
		t.Fatalf("request_approval: %v", req)
	}
	id := req["approval_request_id"].(string)
	uri := mcp.ApprovalURIPrefix + id
	l.read(t, mcp.ApprovalsURI, &list)
	if len(list.ApprovalRequests) != 1 {
		t.Fatalf("approvals: %+v", list)
	}
	if got := list.ApprovalRequests[0]; got.ApprovalRequestID != id || got.Status != "pending" || got.MandateID != mid ||
		got.TransactionID != "txn_0123456789abcdef01234567" || got.RequestedAt == "" {
		t.Fatalf("approvals: %+v", got)
	}
	var one map[string]any
	l.read(t, uri, &one)
	status, _ := callJSON(t, l.cs, "approval_status", map[string]any{"approval_request_id": id})
	if a, b := mustJSON(one), mustJSON(status); a != b {
		t.Fatalf("the resource reads %s, approval_status answers %s", a, b)
	}
	l.subscribe(t, uri)
	l.subscribe(t, mcp.ApprovalsURI)
	for _, bad := range []string{mcp.ApprovalURIPrefix + "req_000000000000000000000000", "party://approvals/"} {
		if err := l.cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: bad}); err == nil {
			t.Fatalf("subscribed to %s", bad)
		}
		if _, err := l.cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: bad}); err == nil {
			t.Fatalf("read %s", bad)
		}
	}

	// Another agent of the instance: its list is empty, and the request is
	// not found, as approval_status refuses it.
	other := agent.NewFor(n.Org, "agt_other")
	lo := listen(t, mcp.NewAgentServer(other.AgentID(), mcp.AgentTools(other), n.Org.Store, nil, mcp.WithApprovals(t.Context(), other)), "2025-11-25")
	lo.read(t, mcp.ApprovalsURI, &list)
	if len(list.ApprovalRequests) != 0 {
		t.Fatalf("another agent sees %+v", list)
	}
	if _, err := lo.cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: uri}); err == nil {
		t.Fatal("another agent read the request")
	}
	if err := lo.cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err == nil {
		t.Fatal("another agent subscribed to the request")
	}
}

// A principal's decision reaches the subscribed agent as one notification
// of the request and one of the list: made in the same process, and made
// through another handle on the same database (the CLI's). So does an
// approval's expiry.
func TestApprovalDecisionReachesTheAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, clock := recordtest.Pair(t)
	l := listen(t, agentServer(t, b))
	// Two held acceptances, two requests, as an act held for approval or
	// request_approval files them.
	var reqs []string
	for _, amount := range []string{"3200.00", "3300.00"} {
		o := recordtest.Offer(t, s, amount)
		act, err := b.Engine.AcceptanceAct(ctx, b.Actor(), b.Mandate, o.Objects["offer"])
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.Agent.RequestApproval(ctx, agent.VerifyInput{MandateID: b.Mandate, ProposedAction: act})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r.ApprovalRequestID)
	}
	first, second := mcp.ApprovalURIPrefix+reqs[0], mcp.ApprovalURIPrefix+reqs[1]
	for _, u := range []string{mcp.ApprovalsURI, first, second} {
		l.subscribe(t, u)
	}
	quiet := mcp.ApprovalPoll + mcp.ApprovalPoll/2
	l.quiet(t, quiet)
	if c := l.counts(); len(c) != 0 {
		t.Fatalf("notified with nothing decided: %v", c)
	}
	var st agent.ApprovalStatusResult

	// The admin page's decision: the same process, the same store.
	if _, err := b.Princ.Decide(ctx, reqs[0], true, nil); err != nil {
		t.Fatal(err)
	}
	l.await(t, first, mcp.ApprovalsURI)
	l.quiet(t, quiet)
	if c := l.counts(); c[first] != 1 || c[mcp.ApprovalsURI] != 1 || c[second] != 0 {
		t.Fatalf("after one approval: %v", c)
	}
	l.read(t, first, &st)
	if st.Status != "approved" || st.ApprovalID == "" || st.ExpiresAt == "" {
		t.Fatalf("approved request reads %+v", st)
	}

	// The CLI's: another process's handle on the same database file.
	o2, err := org.Open(b.Node.Dir, org.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	p2, err := principal.Open(o2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Decide(ctx, reqs[1], false, nil); err != nil {
		t.Fatal(err)
	}
	l.await(t, second, mcp.ApprovalsURI)
	l.quiet(t, quiet)
	if c := l.counts(); c[first] != 1 || c[mcp.ApprovalsURI] != 2 || c[second] != 1 {
		t.Fatalf("after a rejection by another handle: %v", c)
	}
	l.read(t, second, &st)
	if st.Status != "rejected" {
		t.Fatalf("rejected request reads %+v", st)
	}

	// The approval's life runs out (3600 s under the buyer's rule): no
	// write, the clock alone.
	clock.Add(2 * time.Hour)
	l.await(t, first, mcp.ApprovalsURI)
	l.quiet(t, quiet)
	if c := l.counts(); c[first] != 2 || c[mcp.ApprovalsURI] != 3 || c[second] != 1 {
		t.Fatalf("after the approval expired: %v", c)
	}
	l.read(t, first, &st)
	if st.Status != "expired" {
		t.Fatalf("expired approval reads %+v", st)
	}
}

// One notification per resource per change over a whole trade, formation
// to completed between two instances: each subscribed resource is
// announced at most as many times as its content took a new value. The
// notifier used to announce the transaction list and the inbox with every
// commit: 40 notifications of the record to the buyer's agent (14
// commits; the list took 7 values, the inbox 2) and 34 to the supplier's
// (12 commits), where it now sends about 22 and 18.
func TestOneNotificationPerChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, _ := recordtest.Pair(t)

	// What each resource reads after every commit, on the committing
	// goroutine (the acts here run one after another): the number of
	// distinct values each took, in order, bounds what may be announced.
	var mu sync.Mutex
	values := map[string]int{}
	last := map[string]string{}
	commits := map[string]int{}
	watch := func(name string, sd *recordtest.Side) {
		cancel := sd.Engine.Subscribe(func(c record.Change) {
			v, _ := sd.Engine.Transaction(ctx, c.TransactionID)
			page, _ := sd.Engine.ListTransactions(ctx, readmodel.ListFilter{})
			in, _ := sd.Engine.Inbox(ctx, sd.Actor(), "", 0)
			mu.Lock()
			defer mu.Unlock()
			commits[name]++
			for uri, x := range map[string]any{
				mcp.TransactionURIPrefix + c.TransactionID: v,
				mcp.TransactionsURI:                        page,
				mcp.InboxURI:                               mcp.InboxResult{Offers: in},
			} {
				j, _ := json.Marshal(x)
				if k := name + " " + uri; last[k] != string(j) {
					values[k]++
					last[k] = string(j)
				}
			}
		})
		t.Cleanup(cancel)
	}
	watch("buyer", b)
	watch("supplier", s)

	buyer, supplier := listen(t, agentServer(t, b)), listen(t, agentServer(t, s))
	for _, l := range []*listener{buyer, supplier} {
		l.subscribe(t, mcp.InboxURI)
		l.subscribe(t, mcp.TransactionsURI)
	}
	buyer.subscribe(t, mcp.ApprovalsURI)

	o := recordtest.Offer(t, s, "3200.00")
	txn := mcp.TransactionURIPrefix + o.TransactionID
	buyer.subscribe(t, txn)
	supplier.subscribe(t, txn)
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	if _, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr}); err != nil {
		t.Fatal(err)
	}
	recordtest.Flush(ctx, b, s)
	recordtest.Complete(t, b, s, o.TransactionID)
	recordtest.Flush(ctx, b, s)
	for _, l := range []*listener{buyer, supplier} {
		var v readmodel.TransactionView
		l.read(t, txn, &v)
		if v.State != "completed" {
			t.Fatalf("the trade ended in %s", v.State)
		}
		l.quiet(t, mcp.ApprovalPoll+mcp.ApprovalPoll/2)
	}

	mu.Lock()
	defer mu.Unlock()
	for name, l := range map[string]*listener{"buyer": buyer, "supplier": supplier} {
		got := l.counts()
		total, bound := 0, 0
		for _, uri := range []string{txn, mcp.TransactionsURI, mcp.InboxURI} {
			total += got[uri]
			bound += values[name+" "+uri]
			if got[uri] > values[name+" "+uri] {
				t.Errorf("%s: %s announced %d times for %d values", name, uri, got[uri], values[name+" "+uri])
			}
		}
		if got[txn] == 0 || got[mcp.TransactionsURI] == 0 {
			t.Errorf("%s: the trade was not announced: %v", name, got)
		}
		t.Logf("%s: %d commits, %d notifications of the record for %d values (%v)", name, commits[name], total, bound, got)
	}
	// Filed, then approved: at most two values, one poll may see both.
	if n := buyer.counts()[mcp.ApprovalsURI]; n < 1 || n > 2 {
		t.Errorf("the buyer's approvals were announced %d times", n)
	}
}
