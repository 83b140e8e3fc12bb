package a2a_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/peering/peeringtest"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

func TestExchangeDeliversExactBytes(t *testing.T) {
	a, b := pair(t)
	ctx := context.Background()
	obj := evidence(t, a.node, txn, 4096, nil)
	if len(obj) < 4096 {
		t.Fatalf("object is only %d bytes", len(obj))
	}
	replyObj := evidence(t, b.node, txn, 100, nil)
	b.app.reply = func([][]byte) ([][]byte, error) { return [][]byte{replyObj}, nil }

	msg, err := a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj})
	reply := msg.Objects
	if err != nil {
		t.Fatal(err)
	}
	got := b.app.calls()
	if len(got) != 1 || got[0].from != a.node.Org || got[0].txn != txn || len(got[0].objects) != 1 {
		t.Fatalf("received %+v", got)
	}
	if !bytes.Equal(got[0].objects[0], obj) {
		t.Fatal("the object did not arrive byte identical")
	}
	if len(reply) != 1 || !bytes.Equal(reply[0], replyObj) {
		t.Fatal("the reply did not come back byte identical")
	}
	// Each end's carrier hands on what it decoded the objects it checked
	// to: the receiver's and the sender's, as decoding the bytes gives.
	for what, c := range map[string]struct {
		values []map[string]any
		raw    []byte
	}{"received": {got[0].decoded, obj}, "reply": {[]map[string]any{msg.Value(0)}, replyObj}} {
		want, err := canonical.DecodeObject(c.raw)
		if err != nil || len(c.values) != 1 || !reflect.DeepEqual(c.values[0], want) {
			t.Fatalf("%s: handed on %v (%v)", what, c.values, err)
		}
	}
	// First contact made B fetch A's key records.
	if _, err := b.keys.Lookup(a.node.Org, a.node.Instance.Config.AgentKeyID); err != nil {
		t.Fatalf("B does not trust A's agent key after first contact: %v", err)
	}
	// A message of several objects, and one with no reply objects.
	b.app.reply = nil
	second := evidence(t, a.node, txn, 200, nil)
	msg, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{second, obj})
	if reply = msg.Objects; err != nil || len(reply) != 0 {
		t.Fatalf("%d reply objects, %v", len(reply), err)
	}
	got = b.app.calls()
	if len(got) != 2 || !bytes.Equal(got[1].objects[0], second) || !bytes.Equal(got[1].objects[1], obj) {
		t.Fatal("multi-object message reordered or altered")
	}
}

func TestAgentCardInterop(t *testing.T) {
	a, b := pair(t)
	// A plain a2a-go resolver over the pinned client reads the card.
	hc := peering.NewHTTPClient(a.node.Cert, b.node.Info, 10*time.Second)
	card, err := agentcard.NewResolver(hc).Resolve(context.Background(), "https://"+b.node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if card.URL != b.node.Instance.Config.PublicURL+a2a.EndpointPath || card.PreferredTransport != a2asdk.TransportProtocolJSONRPC {
		t.Fatalf("card %+v", card)
	}
	if len(card.Capabilities.Extensions) != 1 {
		t.Fatalf("extensions %+v", card.Capabilities.Extensions)
	}
	ext := card.Capabilities.Extensions[0]
	if ext.URI != delivery.ExtensionURI || !ext.Required || ext.Description == "" {
		t.Fatalf("extension %+v", ext)
	}
	params, _ := json.Marshal(ext.Params)
	if string(params) != `{"read_versions":["0.1"],"write_version":"0.1"}` {
		t.Fatalf("params %s", params)
	}
	// And the raw document carries required: true literally (omitempty
	// would drop false, never true).
	resp, err := hc.Get(b.node.URL(a2a.CardPath))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"required":true`) {
		t.Fatalf("card JSON %s", raw)
	}
	// The card is public: no client certificate needed.
	anon := peering.NewHTTPClient(tls.Certificate{}, b.node.Info, 10*time.Second)
	if _, err := agentcard.NewResolver(anon).Resolve(context.Background(), "https://"+b.node.Addr); err != nil {
		t.Fatalf("anonymous card fetch: %v", err)
	}
}

// failureCase is one way the capability check fails.
type failureCase struct {
	name  string
	setup func(a, b *side)
	local *delivery.Versions // A's declaration, if not the default
}

func TestCapabilityCheckFailsClosed(t *testing.T) {
	v := func(write string, read ...string) *delivery.Versions {
		return &delivery.Versions{Read: read, Write: write}
	}
	entry := func(params map[string]any) a2asdk.AgentExtension {
		return a2asdk.AgentExtension{URI: delivery.ExtensionURI, Description: "x", Required: true, Params: params}
	}
	cases := []failureCase{
		{"condition 1: no entry for the URI", func(a, b *side) {
			b.card = cardWith(b.node, a2asdk.AgentExtension{URI: "https://schemas.example.invalid/unrelated-ext/1.0", Params: map[string]any{}})
		}, nil},
		{"condition 1: no extensions at all", func(a, b *side) { b.card = cardWith(b.node) }, nil},
		{"condition 2: params missing write_version", func(a, b *side) {
			b.card = cardWith(b.node, entry(map[string]any{"read_versions": []any{"0.1"}}))
		}, nil},
		{"condition 2: three-part version", func(a, b *side) {
			b.card = cardWith(b.node, entry(map[string]any{"read_versions": []any{"0.1.0"}, "write_version": "0.1.0"}))
		}, nil},
		{"condition 2: empty read_versions", func(a, b *side) {
			b.card = cardWith(b.node, entry(map[string]any{"read_versions": []any{}, "write_version": "0.1"}))
		}, nil},
		{"condition 3: the peer writes a version A does not read", func(a, b *side) {
			b.card = cardWith(b.node, entry(delivery.Versions{Read: []string{"0.1", "0.2"}, Write: "0.2"}.Params()))
		}, nil},
		{"condition 3: A writes a version the peer does not read", nil, v("0.2", "0.1", "0.2")},
		{"condition 4: card not found", func(a, b *side) {
			b.card = http.NotFoundHandler()
		}, nil},
		{"condition 4: card is not JSON", func(a, b *side) { b.card = rawCard("<html>") }, nil},
		{"condition 4: card declares the extension twice", func(a, b *side) {
			b.card = cardWith(b.node, entry(delivery.LocalVersions.Params()), entry(delivery.LocalVersions.Params()))
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			na, nb := peeringtest.Pair(t)
			a, b := newSide(t, na), newSide(t, nb)
			if c.setup != nil {
				c.setup(a, b)
			}
			if c.local != nil {
				var err error
				a.client, err = a2a.NewClient(a2a.ClientConfig{Clients: a.clients, Versions: c.local})
				if err != nil {
					t.Fatal(err)
				}
			}
			a.serve(t)
			b.serve(t)
			_, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 500, nil)})
			onlyCode(t, err, reason.ExtensionUnsupported)
			if n := b.posts.Load(); n != 0 {
				t.Fatalf("%d requests reached the JSON-RPC endpoint before the refusal", n)
			}
			if len(b.app.calls()) != 0 {
				t.Fatal("an object reached the application")
			}
		})
	}
	t.Run("condition 4: peer down", func(t *testing.T) {
		na, nb := peeringtest.Pair(t)
		a, b := newSide(t, na), newSide(t, nb)
		a.serve(t)
		nb.Stop()
		_, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 500, nil)})
		onlyCode(t, err, reason.ExtensionUnsupported)
		if !errors.Is(err, delivery.ErrUnavailable) {
			t.Fatal("an unreachable card is not marked for retry")
		}
		if len(b.app.calls()) != 0 {
			t.Fatal("an object reached the application")
		}
	})
}

func TestServerChecksSenderDeclaration(t *testing.T) {
	na, nb := peeringtest.Pair(t)
	a, b := newSide(t, na), newSide(t, nb)
	a.card = cardWith(a.node) // A declares nothing
	a.serve(t)
	b.serve(t)
	_, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 500, nil)})
	onlyCode(t, err, reason.ExtensionUnsupported)
	if len(b.app.calls()) != 0 {
		t.Fatal("B accepted objects from a sender whose card declares no support")
	}
}

func TestAbsentEchoIsNotActivation(t *testing.T) {
	a, b := pair(t)
	// B's endpoint, behind a proxy that drops the echo headers.
	b.serveBehind(t, func(w http.ResponseWriter) http.ResponseWriter { return dropEcho{w} })
	_, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 500, nil)})
	onlyCode(t, err, reason.ExtensionUnsupported)
	if delivery.Permanent(err) != true {
		t.Fatal("non-activation is retried")
	}
}

type dropEcho struct{ http.ResponseWriter }

func (d dropEcho) WriteHeader(code int) {
	d.Header().Del(a2a.HeaderExtensions)
	d.Header().Del(a2a.HeaderXExtensions)
	d.ResponseWriter.WriteHeader(code)
}

func (d dropEcho) Write(b []byte) (int, error) {
	d.Header().Del(a2a.HeaderExtensions)
	d.Header().Del(a2a.HeaderXExtensions)
	return d.ResponseWriter.Write(b)
}

func TestObjectRefusals(t *testing.T) {
	a, b := pair(t)
	ctx := context.Background()
	obj := evidence(t, a.node, txn, 500, nil)

	// The correlation id disagrees with the envelope.
	_, err := a.client.Deliver(ctx, b.node.Org, "txn_000000000000000000000000", [][]byte{obj})
	onlyCode(t, err, reason.StreamMismatch)

	// A task id inside the signed bytes (hashed and signed with them).
	withTask := evidence(t, a.node, txn, 500, map[string]any{"task_id": "3f1c2d4e-0000-4000-8000-000000000000"})
	_, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{withTask})
	var r *reason.Refusal
	if !errors.As(err, &r) || len(r.Codes) != 0 || !delivery.Permanent(err) {
		t.Fatalf("carrier member inside signed bytes: %v", err)
	}
	// Bytes that are not canonical, though the same JSON.
	var pretty bytes.Buffer
	json.Indent(&pretty, obj, "", " ")
	_, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{pretty.Bytes()})
	if !errors.As(err, &r) || len(r.Codes) != 0 {
		t.Fatalf("non-canonical bytes: %v", err)
	}
	if n := len(b.app.calls()); n != 0 {
		t.Fatalf("%d refused messages reached the application", n)
	}
	// A refusal by the application travels back with its code.
	b.app.reply = func([][]byte) ([][]byte, error) {
		return nil, reason.Refuse("guard failed: secret detail", reason.StateTransitionDenied)
	}
	_, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj})
	onlyCode(t, err, reason.StateTransitionDenied)
	if strings.Contains(err.Error(), "secret detail") {
		t.Fatal("a refusal's detail went on the wire")
	}
	// A conflict too.
	b.app.reply = func([][]byte) ([][]byte, error) {
		return nil, delivery.ErrConflict
	}
	if _, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj}); !errors.Is(err, delivery.ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	// Any other failure is worth a retry.
	b.app.reply = func([][]byte) ([][]byte, error) { return nil, errors.New("disk full") }
	if _, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj}); !errors.Is(err, delivery.ErrUnavailable) {
		t.Fatalf("internal failure: %v", err)
	}
}

// rawPost sends a JSON-RPC body to B's endpoint with the given client.
func rawPost(t *testing.T, hc *http.Client, url string, body []byte, activate bool) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if activate {
		req.Header.Add(a2a.HeaderXExtensions, "https://example.invalid/other, "+delivery.ExtensionURI)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &out)
	return resp, out
}

func sendBody(t *testing.T, objects ...[]byte) []byte {
	t.Helper()
	parts := []map[string]any{}
	for _, o := range objects {
		parts = append(parts, map[string]any{"kind": "file", "file": map[string]any{"mimeType": delivery.MediaType, "bytes": base64.StdEncoding.EncodeToString(o)}})
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "req-1", "method": "message/send", "params": map[string]any{"message": map[string]any{
		"kind": "message", "messageId": "m-1", "role": "user", "parts": parts,
		"metadata": map[string]any{delivery.ExtensionURI: map[string]any{"transaction_id": txn}},
	}}})
	return b
}

func TestEndpointCarrierRules(t *testing.T) {
	a, b := pair(t)
	obj := evidence(t, a.node, txn, 500, nil)
	hc := peering.NewHTTPClient(a.node.Cert, b.node.Info, 10*time.Second)
	url := b.node.URL(a2a.EndpointPath)

	// Activation under X-A2A-Extensions in a list is accepted and echoed under both names.
	resp, out := rawPost(t, hc, url, sendBody(t, obj), true)
	if resp.StatusCode != 200 || out["error"] != nil || resp.Header.Get(a2a.HeaderExtensions) != delivery.ExtensionURI || resp.Header.Get(a2a.HeaderXExtensions) != delivery.ExtensionURI {
		t.Fatalf("activated request: %d %v %v", resp.StatusCode, resp.Header, out)
	}
	if len(b.app.calls()) != 1 {
		t.Fatal("activated request not received")
	}

	// Without activation: a JSON-RPC error with the code, no echo, nothing received.
	resp, out = rawPost(t, hc, url, sendBody(t, obj), false)
	e, _ := out["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	codes, _ := data["a202_reason_codes"].([]any)
	if resp.StatusCode != 200 || len(codes) != 1 || codes[0] != string(reason.ExtensionUnsupported) || out["id"] != "req-1" {
		t.Fatalf("non-activated request: %d %v", resp.StatusCode, out)
	}
	if resp.Header.Get(a2a.HeaderExtensions) != "" || resp.Header.Get(a2a.HeaderXExtensions) != "" {
		t.Fatal("non-activation echoed")
	}

	// No client certificate, or one B does not pin: 403 before the body is read.
	c := peeringtest.NewNode(t, "org_eastmarch")
	for name, cert := range map[string]tls.Certificate{"none": {}, "unpinned": c.Cert} {
		resp, _ := rawPost(t, peering.NewHTTPClient(cert, b.node.Info, 10*time.Second), url, sendBody(t, obj), true)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("client certificate %s: %d", name, resp.StatusCode)
		}
	}

	// A body over the limit: 413.
	big := evidence(t, a.node, txn, 600_000, nil)
	resp, _ = rawPost(t, hc, url, sendBody(t, big, big, big, big, big, big), true)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("over-size body: %d", resp.StatusCode)
	}
	// GET is not the endpoint's method.
	if resp, err := hc.Get(url); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v", resp, err)
	}
	// A file part by URI is not an object's bytes.
	byURI, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": map[string]any{"message": map[string]any{
		"kind": "message", "messageId": "m-2", "role": "user",
		"parts": []any{map[string]any{"kind": "file", "file": map[string]any{"mimeType": delivery.MediaType, "uri": "https://example.invalid/o.json"}}},
	}}})
	_, out = rawPost(t, hc, url, byURI, true)
	if e, _ := out["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("file by URI: %v", out)
	}
	// Streaming is not offered.
	stream := bytes.Replace(sendBody(t, obj), []byte("message/send"), []byte("message/stream"), 1)
	_, out = rawPost(t, hc, url, stream, true)
	if e, _ := out["error"].(map[string]any); e == nil || e["code"] != float64(-32004) {
		t.Fatalf("message/stream: %v", out)
	}
	if n := len(b.app.calls()); n != 1 {
		t.Fatalf("%d messages reached the application, want 1", n)
	}
}

func TestClientBodyLimit(t *testing.T) {
	na, nb := peeringtest.Pair(t)
	a, b := newSide(t, na), newSide(t, nb)
	var err error
	b.server, err = a2a.NewServer(a2a.ServerConfig{
		Card:         a2a.Card(a2a.CardOptions{OrganizationID: nb.Org, PublicURL: nb.Instance.Config.PublicURL}),
		Clients:      b.clients,
		Receiver:     b.inbox,
		MaxBodyBytes: 4096,
	})
	if err != nil {
		t.Fatal(err)
	}
	a.serve(t)
	b.serve(t)
	_, err = a.client.Deliver(context.Background(), nb.Org, txn, [][]byte{evidence(t, na, txn, 8000, nil)})
	if !errors.Is(err, delivery.ErrRejected) || !delivery.Permanent(err) {
		t.Fatalf("over-size message: %v", err)
	}
	if len(b.app.calls()) != 0 {
		t.Fatal("over-size message received")
	}
}

func TestUnpinnedSenderIsRefused(t *testing.T) {
	_, b := pair(t)
	c := newSide(t, peeringtest.NewNode(t, "org_eastmarch"))
	c.node.Pin(t, b.node) // C pins B; B does not pin C
	c.serve(t)
	_, err := c.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, c.node, txn, 500, nil)})
	if !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("unpinned sender: %v", err)
	}
	if len(b.app.calls()) != 0 {
		t.Fatal("an unpinned sender's message was received")
	}
}

func TestPlainA2AClientIsRefused(t *testing.T) {
	a, b := pair(t)
	ctx := context.Background()
	// Nothing of party's: a2a-go's resolver and client, holding A's
	// pinned certificate as its credential, not activating the extension.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates:       []tls.Certificate{a.node.Cert},
		InsecureSkipVerify: true, // the test trusts its own loopback server
	}}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, "https://"+b.node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	obj := evidence(t, a.node, txn, 500, nil)
	msg := a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.FilePart{File: a2asdk.FileBytes{
		FileMeta: a2asdk.FileMeta{MimeType: delivery.MediaType}, Bytes: base64.StdEncoding.EncodeToString(obj),
	}})
	msg.Metadata = map[string]any{delivery.ExtensionURI: map[string]any{"transaction_id": txn}}
	_, err = client.SendMessage(ctx, &a2asdk.MessageSendParams{Message: msg})
	if err == nil || !strings.Contains(err.Error(), string(reason.ExtensionUnsupported)) {
		t.Fatalf("plain A2A client: %v", err)
	}
	if len(b.app.calls()) != 0 {
		t.Fatal("an object from a client that did not activate the extension was accepted")
	}
}

// dropFirstReply delivers, then pretends the first successful response
// was lost on the way back, as a cut connection would.
type dropFirstReply struct {
	next    delivery.Transport
	dropped bool
}

func (d *dropFirstReply) Deliver(ctx context.Context, peer, tx string, objects [][]byte) (delivery.Message, error) {
	reply, err := d.next.Deliver(ctx, peer, tx, objects)
	if err == nil && !d.dropped {
		d.dropped = true
		return delivery.Message{}, delivery.ErrUnavailable
	}
	return reply, err
}

// forward is the application behind a test outbox, doing what the record
// engine does with an attempt: a reply deletes the message in the
// database transaction that takes it (and is forwarded to replies), a
// refusal marks it failed (and is forwarded to refused), a failure worth
// retrying leaves it to the outbox.
type forward struct {
	st      *store.Store
	ob      *delivery.Outbox
	replies chan [][]byte
	refused chan error
}

func newForward(st *store.Store, t delivery.Transport, opt delivery.OutboxOptions) *forward {
	f := &forward{st: st, replies: make(chan [][]byte, 4), refused: make(chan error, 4)}
	f.ob = delivery.NewOutbox(st, t, f, opt)
	return f
}

// Attempt implements delivery.Handler.
func (f *forward) Attempt(ctx context.Context, m store.OutboxMessage) { f.attempt(ctx, m) }

func (f *forward) attempt(ctx context.Context, m store.OutboxMessage) error {
	msg, err := f.ob.Send(ctx, m)
	reply := msg.Objects
	switch {
	case err == nil:
		if err := f.st.Update(ctx, func(tx *store.Txn) error { return tx.Delivered(m.ID) }); err != nil {
			f.refused <- err
			return err
		}
		f.replies <- reply
	case errors.Is(err, delivery.ErrQueued):
	default:
		if uerr := f.st.Update(ctx, func(tx *store.Txn) error { return tx.Failed(m.ID, err.Error(), f.ob.Now()) }); uerr != nil {
			err = errors.Join(err, uerr)
		}
		f.refused <- err
	}
	return err
}

// send is an act: it enqueues the message leased in its own database
// transaction and makes the first attempt at once.
func (f *forward) send(ctx context.Context, peer, tx string, objects [][]byte) error {
	var id int64
	if err := f.st.Update(ctx, func(x *store.Txn) error {
		m, err := x.Enqueue(peer, tx, delivery.MessageKey(tx, objects), objects, nil, f.ob.Now(), f.ob.Lease())
		id = m.ID
		return err
	}); err != nil {
		return err
	}
	m, err := f.st.GetOutbox(ctx, id)
	if err != nil {
		return err
	}
	return f.attempt(ctx, m)
}

func TestOutboxSurvivesReceiverRestart(t *testing.T) {
	a, b := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obj := evidence(t, a.node, txn, 3000, nil)
	replyObj := evidence(t, b.node, txn, 100, nil)
	b.app.reply = func([][]byte) ([][]byte, error) { return [][]byte{replyObj}, nil }

	transport := &dropFirstReply{next: a.client}
	f := newForward(a.node.Instance.Store, transport, delivery.OutboxOptions{
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PollInterval: time.Second,
		Keys: a.keys,
	})
	ob := f.ob

	// The receiving instance is down: the message waits in the outbox.
	b.node.Stop()
	if err := f.send(ctx, b.node.Org, txn, [][]byte{obj}); !errors.Is(err, delivery.ErrQueued) {
		t.Fatalf("send to a stopped peer: %v", err)
	}
	if p, _ := ob.Pending(ctx); len(p) != 1 {
		t.Fatalf("pending %d", len(p))
	}
	// It comes back; the worker delivers. The first reply is lost on the
	// way back, so the worker sends again and B answers from its inbox.
	b.serve(t)
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case reply := <-f.replies:
		if len(reply) != 1 || !bytes.Equal(reply[0], replyObj) {
			t.Fatal("reply differs")
		}
	case err := <-f.refused:
		t.Fatalf("refused: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("never delivered")
	}
	if !transport.dropped {
		t.Fatal("the redelivery path was not exercised")
	}
	got := b.app.calls()
	if len(got) != 1 || !bytes.Equal(got[0].objects[0], obj) {
		t.Fatalf("the application saw the message %d times", len(got))
	}
	if p, _ := ob.Pending(ctx); len(p) != 0 {
		t.Fatalf("still pending: %d", len(p))
	}
	// A's outbox fetched B's keys on first contact, to verify replies.
	if _, err := a.keys.Lookup(b.node.Org, b.node.Instance.Config.AgentKeyID); err != nil {
		t.Fatalf("A does not trust B's agent key: %v", err)
	}
	// The object B holds for the message is canonical and unchanged.
	if _, err := canonical.DecodeObject(got[0].objects[0]); err != nil {
		t.Fatal(err)
	}
}

// TestHeldAnswerIsRetried: an application that holds a message (an act
// waiting for its principal's approval) answers a retryable error with
// codes; the sender's client reports it as unavailable, carrying the
// codes, so the outbox asks again instead of removing the act.
func TestHeldAnswerIsRetried(t *testing.T) {
	a, b := pair(t)
	b.app.reply = func([][]byte) ([][]byte, error) {
		return nil, fmt.Errorf("%w: %w", delivery.ErrUnavailable, reason.Refuse("held", reason.ApprovalRequired))
	}
	_, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 10, nil)})
	if !errors.Is(err, delivery.ErrUnavailable) || delivery.Permanent(err) || !slices.Contains(reason.CodesOf(err), reason.ApprovalRequired) {
		t.Fatalf("a held answer: %v", err)
	}
	// A refusal is still final.
	b.app.reply = func([][]byte) ([][]byte, error) { return nil, reason.Refuse("no", reason.PolicyDenied) }
	_, err = a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 11, nil)})
	if errors.Is(err, delivery.ErrUnavailable) || !delivery.Permanent(err) {
		t.Fatalf("a refusal: %v", err)
	}
}

// TestReplyToAnotherRequestRejected: a response whose JSON-RPC id is not
// the request's answers another request: the client does not take its
// objects as the reply (JSON-RPC 2.0 §5), and the delivery is rejected.
func TestReplyToAnotherRequestRejected(t *testing.T) {
	a, b := pair(t)
	b.serveBehind(t, func(w http.ResponseWriter) http.ResponseWriter { return otherID{w} })
	replyObj := evidence(t, b.node, txn, 100, nil)
	b.app.reply = func([][]byte) ([][]byte, error) { return [][]byte{replyObj}, nil }
	msg, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 500, nil)})
	if !errors.Is(err, delivery.ErrRejected) || len(msg.Objects) != 0 {
		t.Fatalf("a reply to another request: %d objects, %v", len(msg.Objects), err)
	}
}

// otherID changes the JSON-RPC id of the response written through it, one
// character, the length kept.
type otherID struct{ http.ResponseWriter }

func (o otherID) Write(b []byte) (int, error) {
	if i := bytes.Index(b, []byte(`"id":"`)); i >= 0 {
		if j := bytes.IndexByte(b[i+6:], '"'); j > 0 {
			b = bytes.Clone(b)
			b[i+6+j-1] ^= 1
		}
	}
	return o.ResponseWriter.Write(b)
}
