package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// update is one notifications/resources/updated a client received, with
// when it arrived.
type update struct {
	uri string
	at  time.Time
}

// subscriber is an MCP client of one side's `party serve` MCP endpoint,
// over Streamable HTTP with the agent token, collecting the updates it is
// sent.
type subscriber struct {
	cs      *sdk.ClientSession
	updates chan update
}

func subscribeClient(t *testing.T, sd *recordtest.Side) *subscriber {
	t.Helper()
	srv := mcp.NewAgentServer(sd.Node.Org.Config().AgentID, mcp.RecordTools(sd.Engine), sd.Node.Org.Store, nil, mcp.WithResources(t.Context(), sd.Engine))
	agentTok, _ := instance.LoadToken(sd.Node.Dir, instance.AgentTokenFile)
	adminTok, _ := instance.LoadToken(sd.Node.Dir, instance.AdminTokenFile)
	hs := httptest.NewServer(mcp.Handler(srv, agentTok, adminTok))
	t.Cleanup(hs.Close)
	s := &subscriber{updates: make(chan update, 64)}
	c := sdk.NewClient(&sdk.Implementation{Name: "subscriber"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			s.updates <- update{uri: req.Params.URI, at: time.Now()}
		},
	})
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{agentTok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	s.cs = cs
	return s
}

func (s *subscriber) subscribe(t *testing.T, uri string) {
	t.Helper()
	if err := s.cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
}

// read reads a JSON resource.
func (s *subscriber) read(t *testing.T, uri string, v any) {
	t.Helper()
	res, err := s.cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), v); err != nil {
		t.Fatal(err)
	}
}

// countersigned returns a channel that receives the moment the side's
// engine first commits a transaction in state: the instant that side
// countersigned the event that brought the record there. Called before
// the side's MCP server subscribes, it is told of each commit first (the
// engine calls its subscribers in order), so the moment it takes is never
// later than the notification the client is sent.
func countersigned(t *testing.T, sd *recordtest.Side, state string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	cancel := sd.Engine.Subscribe(func(c record.Change) {
		if c.State == state {
			select {
			case ch <- time.Now():
			default:
			}
		}
	})
	t.Cleanup(cancel)
	return ch
}

// awaitWithin waits on the subscriber's notifications for uri until done
// reports the resource shows what it should, failing unless that happens
// within one second of since. Only notifications wake it.
func (s *subscriber) awaitWithin(t *testing.T, uri string, since time.Time, done func() bool) {
	t.Helper()
	deadline := time.NewTimer(time.Until(since.Add(time.Second)))
	defer deadline.Stop()
	for {
		select {
		case u := <-s.updates:
			if u.uri != uri || u.at.Before(since) {
				continue
			}
			if done() {
				t.Logf("%s updated %v after the act reached the record", uri, u.at.Sub(since))
				return
			}
		case <-deadline.C:
			t.Fatalf("no notifications/resources/updated for %s showing the change within one second of the countersignature", uri)
		}
	}
}

// waitSignal bounds a wait for the act under test to reach the peer.
func waitSignal(t *testing.T, ch <-chan time.Time) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(30 * time.Second):
		t.Fatal("the counterparty never countersigned")
	}
	return time.Time{}
}

// Two instances: each agent's MCP client subscribes to the transaction (and
// the buyer's to its inbox), and is sent notifications/resources/updated
// within one second when the counterparty countersigns its agent's event,
// and when the counterparty acts.
func TestSubscribedClientHearsTheCountersignature(t *testing.T) {
	t.Parallel()
	b, s, _ := recordtest.Pair(t)
	// Each side holds one transaction here. The buyer's client hears the
	// supplier's act once the supplier countersigned agreement.direct (and
	// appended its agreement.committed in its answer), the buyer's once the
	// buyer stored that answer with agreement.committed countersigned, the
	// supplier's again once that countersignature came back, and the
	// buyer's once the supplier countersigned obligation.activated.
	atSupplier := countersigned(t, s, "agreement_pending")
	atBuyer := countersigned(t, b, "committed")
	committed := countersigned(t, s, "committed")
	activated := countersigned(t, s, "in_performance")
	buyer, supplier := subscribeClient(t, b), subscribeClient(t, s)

	// The tools and resources are listed, the instructions say so.
	init := buyer.cs.InitializeResult()
	if init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
		t.Fatalf("resources capability %+v", init.Capabilities.Resources)
	}
	if want := "notifications/resources/updated"; !strings.Contains(init.Instructions, want) {
		t.Fatalf("the instructions do not mention %s", want)
	}
	if err := buyer.cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: mcp.TransactionURIPrefix + "txn_0123456789abcdef01234567"}); err == nil {
		t.Fatal("subscribed to a transaction this instance does not hold")
	}

	// An offer arrives: the buyer's inbox is updated.
	buyer.subscribe(t, mcp.InboxURI)
	sent := time.Now()
	o := recordtest.Offer(t, s, "3200.00")
	buyer.awaitWithin(t, mcp.InboxURI, sent, func() bool {
		var in mcp.InboxResult
		buyer.read(t, mcp.InboxURI, &in)
		return len(in.Offers) == 1 && in.Offers[0].OfferID == o.Objects["offer"]
	})
	txn := o.TransactionID
	txnURI := mcp.TransactionURIPrefix + txn
	buyer.subscribe(t, txnURI)
	supplier.subscribe(t, txnURI)

	// Formation: the buyer accepts.
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	errc := make(chan error, 1)
	go func() {
		_, err := b.Engine.AcceptOffer(context.Background(), b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
		errc <- err
	}()
	at := waitSignal(t, atSupplier)
	supplier.awaitWithin(t, txnURI, at, func() bool {
		var v readmodel.TransactionView
		supplier.read(t, txnURI, &v)
		return len(v.Events) >= 1 && v.Events[0].EventType == "agreement.direct" && len(v.Events[0].SignedBy) == 2
	})
	at = waitSignal(t, atBuyer)
	buyer.awaitWithin(t, txnURI, at, func() bool {
		var v readmodel.TransactionView
		buyer.read(t, txnURI, &v)
		return v.State == "committed" && len(v.Events) == 2 && v.Events[1].Status == "recorded" && len(v.Events[1].SignedBy) == 2
	})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// The buyer's countersignature goes back by its outbox worker, which a
	// served instance runs (here, one pass of it).
	recordtest.Flush(context.Background(), b, s)
	at = waitSignal(t, committed)
	supplier.awaitWithin(t, txnURI, at, func() bool {
		var v readmodel.TransactionView
		supplier.read(t, txnURI, &v)
		return v.State == "committed" && len(v.Events) == 2 && v.Events[1].Status == "recorded" && len(v.Events[1].SignedBy) == 2
	})

	// One more act after formation: the buyer issues the supplier's
	// obligation; the supplier countersigns obligation.activated and the
	// buyer's client hears it within one second.
	go func() {
		_, err := b.Engine.IssueObligation(context.Background(), b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
		errc <- err
	}()
	at = waitSignal(t, activated)
	buyer.awaitWithin(t, txnURI, at, func() bool {
		var v readmodel.TransactionView
		buyer.read(t, txnURI, &v)
		return v.State == "in_performance" && len(v.Events) == 3 && len(v.Events[2].SignedBy) == 2
	})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var list readmodel.TransactionPage
	buyer.read(t, mcp.TransactionsURI, &list)
	if len(list.Transactions) != 1 || list.Transactions[0].State != "in_performance" {
		t.Fatalf("transactions resource: %+v", list)
	}
}
