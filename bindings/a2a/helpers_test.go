package a2a_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/peering/peeringtest"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
)

const txn = "txn_5e1f0c2a9b8d7e6f5a4b3c2d"

// recorder is a Receiver that records what reached the application.
type recorder struct {
	mu    sync.Mutex
	got   []received
	reply func(objects [][]byte) ([][]byte, error)
}

type received struct {
	from, txn string
	objects   [][]byte
	// decoded is what the carrier handed on with them (Message.Value).
	decoded []map[string]any
}

func (r *recorder) Receive(ctx context.Context, from, txn string, msg delivery.Message) ([][]byte, error) {
	r.mu.Lock()
	objects := msg.Objects
	var decoded []map[string]any
	for i := range objects {
		decoded = append(decoded, msg.Value(i))
	}
	r.got = append(r.got, received{from, txn, objects, decoded})
	reply := r.reply
	r.mu.Unlock()
	if reply == nil {
		return nil, nil
	}
	return reply(objects)
}

func (r *recorder) calls() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// side is one instance with its binding mounted.
type side struct {
	node     *peeringtest.Node
	clients  *peering.Clients
	keys     *peering.TrustedKeys
	app      *recorder
	inbox    *delivery.Inbox
	server   *a2a.Server
	client   *a2a.Client
	posts    atomic.Int64 // requests that reached the JSON-RPC endpoint
	card     http.Handler // nil: the real card
	endpoint func(http.Handler) http.Handler
}

func newSide(t *testing.T, n *peeringtest.Node) *side {
	t.Helper()
	s := &side{node: n, app: &recorder{}}
	s.clients = peering.NewClients(n.Cert, n.Directory, 20*time.Second)
	s.keys = peering.NewTrustedKeys(n.Instance.Store, s.clients, nil)
	s.inbox = delivery.NewInbox(n.Instance.Store, s.app, delivery.InboxOptions{Keys: s.keys})
	var err error
	s.server, err = a2a.NewServer(a2a.ServerConfig{
		Card:     a2a.Card(a2a.CardOptions{OrganizationID: n.Org, PublicURL: n.Instance.Config.PublicURL}),
		Clients:  s.clients,
		Receiver: s.inbox,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.client, err = a2a.NewClient(a2a.ClientConfig{Clients: s.clients})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mux is what the daemon mounts, with the test's substitutions.
func (s *side) mux() http.Handler {
	mux := http.NewServeMux()
	card := s.card
	if card == nil {
		card = s.server.CardHandler()
	}
	mux.Handle(a2a.CardPath, card)
	var ep http.Handler = s.server.EndpointHandler()
	if s.endpoint != nil {
		ep = s.endpoint(ep)
	}
	mux.Handle(a2a.EndpointPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.posts.Add(1)
		ep.ServeHTTP(w, r)
	}))
	mux.Handle(peering.KeyRecordsPath, peering.KeyRecordsHandler(s.node.Directory, peering.OwnKeyRecords(s.node.Instance.Store, s.node.Org), nil))
	return mux
}

func (s *side) serve(t *testing.T) { s.node.Serve(t, s.mux()) }

// serveBehind serves s again behind a proxy that hands every response
// through wrap (one that drops headers, or rewrites the body).
func (s *side) serveBehind(t *testing.T, wrap func(http.ResponseWriter) http.ResponseWriter) {
	s.node.Stop()
	s.endpoint = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(wrap(w), r) })
	}
	s.serve(t)
}

// pair returns two pinned instances, both serving.
func pair(t *testing.T) (a, b *side) {
	t.Helper()
	na, nb := peeringtest.Pair(t)
	a, b = newSide(t, na), newSide(t, nb)
	a.serve(t)
	b.serve(t)
	return a, b
}

// evidence builds a signed evidence object of txn whose payload is about
// size bytes, as canonical bytes, with extra top-level members if given
// (inside the hashed and signed bytes).
func evidence(t *testing.T, n *peeringtest.Node, tx string, size int, extra map[string]any) []byte {
	t.Helper()
	cfg := n.Instance.Config
	now := time.Now().UTC()
	obj, err := envelope.New(envelope.Spec{
		ObjectType:    "evidence",
		CreatedBy:     envelope.Actor{OrganizationID: n.Org, AgentID: cfg.AgentID, MandateID: "mnd_0123456789abcdef01234567"},
		TransactionID: tx,
		CreatedAt:     now,
		Payload: map[string]any{
			"evidence_type": "document",
			"description":   strings.Repeat("Calibration certificate line; ", size/30),
			"note":          "héllo \u2028 \"quoted\" ✓",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		obj[k] = v
	}
	if err := envelope.Seal(obj); err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewSigner(cfg.AgentKeyID, n.Instance.AgentKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.Sign(obj, s, "object_issuance", now); err != nil {
		t.Fatal(err)
	}
	b, err := canonical.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onlyCode asserts err is a refusal carrying exactly code.
func onlyCode(t *testing.T, err error, code reason.Code) {
	t.Helper()
	c := reason.CodesOf(err)
	if len(c) != 1 || c[0] != code {
		t.Fatalf("want exactly %s, got %v (%v)", code, c, err)
	}
}

// cardWith serves n's card with its extension entries replaced.
func cardWith(n *peeringtest.Node, ext ...a2asdk.AgentExtension) http.Handler {
	card := a2a.Card(a2a.CardOptions{OrganizationID: n.Org, PublicURL: n.Instance.Config.PublicURL})
	card.Capabilities.Extensions = ext
	return a2asrv.NewStaticAgentCardHandler(card)
}

// rawCard serves literal bytes as the card.
func rawCard(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	})
}
