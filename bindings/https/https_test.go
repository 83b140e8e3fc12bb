package https_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/peering/peeringtest"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

const txn = "txn_2b7c9d0e1f2a3b4c5d6e7f80"

type recorder struct {
	mu    sync.Mutex
	got   [][][]byte
	from  []string
	reply func([][]byte) ([][]byte, error)
}

func (r *recorder) Receive(_ context.Context, from, _ string, msg delivery.Message) ([][]byte, error) {
	objects := msg.Objects
	r.mu.Lock()
	r.got = append(r.got, objects)
	r.from = append(r.from, from)
	reply := r.reply
	r.mu.Unlock()
	if reply == nil {
		return nil, nil
	}
	return reply(objects)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

type side struct {
	node      *peeringtest.Node
	clients   *peering.Clients
	keys      *peering.TrustedKeys
	app       *recorder
	inbox     *delivery.Inbox
	server    *https.Server
	client    *https.Client
	posts     atomic.Int64
	preflight http.Handler // nil: the real one
}

func newSide(t *testing.T, n *peeringtest.Node, maxBody int64) *side {
	t.Helper()
	s := &side{node: n, app: &recorder{}}
	s.clients = peering.NewClients(n.Cert, n.Directory, 20*time.Second)
	s.keys = peering.NewTrustedKeys(n.Instance.Store, s.clients, nil)
	s.inbox = delivery.NewInbox(n.Instance.Store, s.app, delivery.InboxOptions{Keys: s.keys})
	var err error
	if s.server, err = https.NewServer(https.ServerConfig{Clients: s.clients, Inbox: s.inbox, MaxBodyBytes: maxBody}); err != nil {
		t.Fatal(err)
	}
	if s.client, err = https.NewClient(https.ClientConfig{Clients: s.clients}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *side) serve(t *testing.T) {
	mux := http.NewServeMux()
	if s.preflight == nil {
		s.server.Mount(mux)
	} else {
		for p, h := range s.server.Routes() {
			if p == https.CapabilitiesPath {
				h = s.preflight
			}
			mux.Handle(p, h)
		}
	}
	mux.Handle(peering.KeyRecordsPath, peering.KeyRecordsHandler(s.node.Directory, peering.OwnKeyRecords(s.node.Instance.Store, s.node.Org), nil))
	s.node.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == https.ObjectsPath {
			s.posts.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
}

func pair(t *testing.T) (a, b *side) {
	t.Helper()
	na, nb := peeringtest.Pair(t)
	a, b = newSide(t, na, 0), newSide(t, nb, 0)
	a.serve(t)
	b.serve(t)
	return a, b
}

func evidence(t *testing.T, n *peeringtest.Node, tx string, size int, extra map[string]any) []byte {
	t.Helper()
	cfg := n.Instance.Config
	now := time.Now().UTC()
	obj, err := envelope.New(envelope.Spec{
		ObjectType:    "evidence",
		CreatedBy:     envelope.Actor{OrganizationID: n.Org, AgentID: cfg.AgentID, MandateID: "mnd_0123456789abcdef01234567"},
		TransactionID: tx,
		CreatedAt:     now,
		Payload:       map[string]any{"evidence_type": "document", "description": strings.Repeat("Delivery note line; ", size/20+1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		obj[k] = v
	}
	envelope.Seal(obj)
	s, _ := signature.NewSigner(cfg.AgentKeyID, n.Instance.AgentKey())
	if err := signature.Sign(obj, s, "object_issuance", now); err != nil {
		t.Fatal(err)
	}
	b, err := canonical.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func onlyCode(t *testing.T, err error, code reason.Code) {
	t.Helper()
	c := reason.CodesOf(err)
	if len(c) != 1 || c[0] != code {
		t.Fatalf("want exactly %s, got %v (%v)", code, c, err)
	}
}

func TestExchange(t *testing.T) {
	a, b := pair(t)
	ctx := context.Background()
	obj := evidence(t, a.node, txn, 4000, nil)
	replyObj := evidence(t, b.node, txn, 50, nil)
	b.app.reply = func([][]byte) ([][]byte, error) { return [][]byte{replyObj}, nil }

	msg, err := a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj})
	reply := msg.Objects
	if err != nil {
		t.Fatal(err)
	}
	if b.app.count() != 1 || !bytes.Equal(b.app.got[0][0], obj) || b.app.from[0] != a.node.Org {
		t.Fatal("the object did not arrive byte identical from A")
	}
	if len(reply) != 1 || !bytes.Equal(reply[0], replyObj) {
		t.Fatal("the reply did not come back byte identical")
	}
	// Several objects: the multipart form, order and bytes kept.
	second := evidence(t, a.node, txn, 300, nil)
	b.app.reply = func(objs [][]byte) ([][]byte, error) { return objs, nil }
	msg, err = a.client.Deliver(ctx, b.node.Org, txn, [][]byte{second, obj})
	reply = msg.Objects
	if err != nil || len(reply) != 2 || !bytes.Equal(reply[0], second) || !bytes.Equal(reply[1], obj) {
		t.Fatalf("multi-object: %v", err)
	}
	if !bytes.Equal(b.app.got[1][0], second) || !bytes.Equal(b.app.got[1][1], obj) {
		t.Fatal("multi-object message altered")
	}
	// An empty reply.
	b.app.reply = nil
	third := evidence(t, a.node, txn, 10, nil)
	if reply, err := a.client.Deliver(ctx, b.node.Org, txn, [][]byte{third}); err != nil || len(reply.Objects) != 0 {
		t.Fatalf("empty reply: %d %v", len(reply.Objects), err)
	}
}

// post sends body to B's objects endpoint with hc.
func post(t *testing.T, hc *http.Client, url, contentType string, body []byte, hdr map[string]string) (*http.Response, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb struct {
		ReasonCodes []string `json:"reason_codes"`
	}
	json.Unmarshal(raw, &eb)
	if resp.StatusCode == http.StatusAccepted && len(raw) != 0 {
		t.Fatalf("a 202 carried a body: %q", raw)
	}
	return resp, eb.ReasonCodes
}

func TestStatuses(t *testing.T) {
	a, b := pair(t)
	hc := peering.NewHTTPClient(a.node.Cert, b.node.Info, 10*time.Second)
	url := b.node.URL(https.ObjectsPath)
	obj := evidence(t, a.node, txn, 500, nil)
	activate := map[string]string{https.HeaderExtensions: "https://example.invalid/x, " + delivery.ExtensionURI, https.HeaderTransaction: txn}

	// 202, never 200 or 201, with the echo and a Location.
	resp, _ := post(t, hc, url, delivery.MediaType, obj, activate)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(https.HeaderExtensions) != delivery.ExtensionURI || !strings.HasPrefix(resp.Header.Get("Location"), https.RepliesPath) {
		t.Fatalf("submission: %d %v", resp.StatusCode, resp.Header)
	}
	// The same submission again: 202 again, the application not called twice.
	resp, _ = post(t, hc, url, delivery.MediaType, obj, activate)
	if resp.StatusCode != http.StatusAccepted || b.app.count() != 1 {
		t.Fatalf("redelivery: %d, application called %d times", resp.StatusCode, b.app.count())
	}
	// Its reply is A's to fetch, and nobody else's.
	loc := resp.Header.Get("Location")
	if r, err := hc.Get(b.node.URL(loc)); err != nil || r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/mixed") {
		t.Fatalf("reply fetch: %v %v", r, err)
	}
	c := peeringtest.NewNode(t, "org_eastmarch")
	b.node.Pin(t, c)
	if r, err := peering.NewHTTPClient(c.Cert, b.node.Info, 10*time.Second).Get(b.node.URL(loc)); err != nil || r.StatusCode != http.StatusNotFound {
		t.Fatalf("another peer fetched A's reply: %v %v", r, err)
	}
	if r, err := hc.Get(b.node.URL(https.RepliesPath + strings.Repeat("0", 64))); err != nil || r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown reply: %v %v", r, err)
	}

	// 412 without the activation header; nothing received; no echo.
	before := b.app.count()
	other := evidence(t, a.node, txn, 500, nil)
	resp, codes := post(t, hc, url, delivery.MediaType, other, map[string]string{https.HeaderTransaction: txn})
	if resp.StatusCode != http.StatusPreconditionFailed || len(codes) != 1 || codes[0] != string(reason.ExtensionUnsupported) || resp.Header.Get(https.HeaderExtensions) != "" {
		t.Fatalf("not activated: %d %v %v", resp.StatusCode, codes, resp.Header)
	}
	// 409 when the application reports a chain conflict.
	b.app.reply = func([][]byte) ([][]byte, error) {
		return nil, fmt.Errorf("event 2 has a successor: %w", delivery.ErrConflict)
	}
	resp, _ = post(t, hc, url, delivery.MediaType, other, activate)
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("conflict: %d", resp.StatusCode)
	}
	b.app.reply = nil
	// 400 with codes for a refused object.
	resp, codes = post(t, hc, url, delivery.MediaType, other, map[string]string{https.HeaderExtensions: delivery.ExtensionURI, https.HeaderTransaction: "txn_000000000000000000000000"})
	if resp.StatusCode != http.StatusBadRequest || len(codes) != 1 || codes[0] != string(reason.StreamMismatch) {
		t.Fatalf("stream mismatch: %d %v", resp.StatusCode, codes)
	}
	withTask := evidence(t, a.node, txn, 100, map[string]any{"task_id": "t-1"})
	resp, codes = post(t, hc, url, delivery.MediaType, withTask, activate)
	if resp.StatusCode != http.StatusBadRequest || len(codes) != 0 {
		t.Fatalf("carrier member in signed bytes: %d %v", resp.StatusCode, codes)
	}
	resp, _ = post(t, hc, url, delivery.MediaType, append(other, '\n'), activate)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("non-canonical bytes: %d", resp.StatusCode)
	}
	// 415 for another media type; 413 over the limit; 405 for other methods.
	if resp, _ := post(t, hc, url, "application/json", other, activate); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("media type: %d", resp.StatusCode)
	}
	big := bytes.Repeat([]byte("x"), https.MaxBodyBytes+1)
	if resp, _ := post(t, hc, url, delivery.MediaType, big, activate); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("over-size body: %d", resp.StatusCode)
	}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, url, nil)
		if r, err := hc.Do(req); err != nil || r.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s: %v %v", m, r, err)
		}
	}
	// 403 without a pinned client certificate.
	d := peeringtest.NewNode(t, "org_westfold")
	for name, cert := range map[string]tls.Certificate{"none": {}, "unpinned": d.Cert} {
		if resp, _ := post(t, peering.NewHTTPClient(cert, b.node.Info, 10*time.Second), url, delivery.MediaType, other, activate); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("client certificate %s: %d", name, resp.StatusCode)
		}
	}
	if b.app.count() != before+1 { // only the conflict reached the application
		t.Fatalf("application called %d times, want %d", b.app.count(), before+1)
	}
	// The preflight is public.
	r, err := peering.NewHTTPClient(tls.Certificate{}, b.node.Info, 10*time.Second).Get(b.node.URL(https.CapabilitiesPath))
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("preflight: %v %v", r, err)
	}
	raw, _ := io.ReadAll(r.Body)
	if string(raw) != `{"uri":"`+delivery.ExtensionURI+`","read_versions":["0.1"],"write_version":"0.1"}` {
		t.Fatalf("preflight document %s", raw)
	}
}

func TestClientMapsStatuses(t *testing.T) {
	a, b := pair(t)
	ctx := context.Background()
	obj := evidence(t, a.node, txn, 100, nil)
	b.app.reply = func([][]byte) ([][]byte, error) { return nil, delivery.ErrConflict }
	if _, err := a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj}); !errors.Is(err, delivery.ErrConflict) || !delivery.Permanent(err) {
		t.Fatalf("409: %v", err)
	}
	b.app.reply = func([][]byte) ([][]byte, error) { return nil, reason.Refuse("secret", reason.OfferExpired) }
	_, err := a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj})
	onlyCode(t, err, reason.OfferExpired)
	b.app.reply = func([][]byte) ([][]byte, error) { return nil, errors.New("database locked") }
	if _, err := a.client.Deliver(ctx, b.node.Org, txn, [][]byte{obj}); !errors.Is(err, delivery.ErrUnavailable) {
		t.Fatalf("500: %v", err)
	}
	_, err = a.client.Deliver(ctx, b.node.Org, "txn_000000000000000000000000", [][]byte{obj})
	onlyCode(t, err, reason.StreamMismatch)
}

// fakePeer serves a valid preflight and answers submissions with status,
// echoing the activation if echo.
func fakePeer(t *testing.T, n *peeringtest.Node, status int, echo bool) *atomic.Int64 {
	var posts atomic.Int64
	pre, _ := json.Marshal(https.Preflight{URI: delivery.ExtensionURI, ReadVersions: []string{"0.1"}, WriteVersion: "0.1"})
	n.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case https.CapabilitiesPath:
			w.Write(pre)
		case https.ObjectsPath:
			posts.Add(1)
			if echo {
				w.Header().Set(https.HeaderExtensions, delivery.ExtensionURI)
			}
			w.Header().Set("Location", https.RepliesPath+strings.Repeat("a", 64))
			w.WriteHeader(status)
		default:
			w.Header().Set("Content-Type", "multipart/mixed; boundary=x")
			io.WriteString(w, "--x--\r\n")
		}
	}))
	return &posts
}

func TestClientRefusesWhatTheBindingForbids(t *testing.T) {
	for _, c := range []struct {
		status int
		echo   bool
		code   reason.Code
	}{
		{http.StatusOK, true, ""},
		{http.StatusCreated, true, ""},
		{http.StatusAccepted, false, reason.ExtensionUnsupported},
	} {
		t.Run(fmt.Sprintf("%d echo=%v", c.status, c.echo), func(t *testing.T) {
			na, nb := peeringtest.Pair(t)
			a := newSide(t, na, 0)
			fakePeer(t, nb, c.status, c.echo)
			_, err := a.client.Deliver(context.Background(), nb.Org, txn, [][]byte{evidence(t, na, txn, 100, nil)})
			if c.code != "" {
				onlyCode(t, err, c.code)
			} else if !errors.Is(err, delivery.ErrRejected) {
				t.Fatalf("HTTP %d accepted as a submission answer: %v", c.status, err)
			}
		})
	}
	// With the echo and 202, the same fake is a success (the allow direction).
	na, nb := peeringtest.Pair(t)
	a := newSide(t, na, 0)
	fakePeer(t, nb, http.StatusAccepted, true)
	if reply, err := a.client.Deliver(context.Background(), nb.Org, txn, [][]byte{evidence(t, na, txn, 100, nil)}); err != nil || len(reply.Objects) != 0 {
		t.Fatalf("202 with echo: %v", err)
	}
}

func TestPreflightFailsClosed(t *testing.T) {
	doc := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, s) })
	}
	cases := map[string]http.Handler{
		"other uri":        doc(`{"uri":"https://schemas.a202.org/a2a-ext/commercial/0.2","read_versions":["0.2"],"write_version":"0.2"}`),
		"unparseable":      doc(`{"uri":"` + delivery.ExtensionURI + `","read_versions":"0.1","write_version":"0.1"}`),
		"incompatible":     doc(`{"uri":"` + delivery.ExtensionURI + `","read_versions":["0.1","0.2"],"write_version":"0.2"}`),
		"duplicate member": doc(`{"uri":"` + delivery.ExtensionURI + `","read_versions":["0.1"],"write_version":"0.1","write_version":"0.2"}`),
		"unretrievable":    http.NotFoundHandler(),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			na, nb := peeringtest.Pair(t)
			a, b := newSide(t, na, 0), newSide(t, nb, 0)
			b.preflight = h
			a.serve(t)
			b.serve(t)
			_, err := a.client.Deliver(context.Background(), nb.Org, txn, [][]byte{evidence(t, na, txn, 100, nil)})
			onlyCode(t, err, reason.ExtensionUnsupported)
			if b.posts.Load() != 0 || b.app.count() != 0 {
				t.Fatal("an object was transmitted before the check passed")
			}
		})
	}
	// The receiver checks the sender's preflight too: 412 before anything is received.
	na, nb := peeringtest.Pair(t)
	a, b := newSide(t, na, 0), newSide(t, nb, 0)
	a.preflight = cases["incompatible"]
	a.serve(t)
	b.serve(t)
	_, err := a.client.Deliver(context.Background(), nb.Org, txn, [][]byte{evidence(t, na, txn, 100, nil)})
	onlyCode(t, err, reason.ExtensionUnsupported)
	if b.app.count() != 0 {
		t.Fatal("received from a sender that fails the check")
	}
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

func TestOutboxOverHTTPSSurvivesRestart(t *testing.T) {
	a, b := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obj := evidence(t, a.node, txn, 2000, nil)
	replyObj := evidence(t, b.node, txn, 50, nil)
	b.app.reply = func([][]byte) ([][]byte, error) { return [][]byte{replyObj}, nil }
	f := newForward(a.node.Instance.Store, a.client, delivery.OutboxOptions{
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PollInterval: time.Second, Keys: a.keys,
	})
	ob := f.ob
	b.node.Stop()
	if err := f.send(ctx, b.node.Org, txn, [][]byte{obj}); !errors.Is(err, delivery.ErrQueued) {
		t.Fatalf("send to a stopped peer: %v", err)
	}
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
	if b.app.count() != 1 || !bytes.Equal(b.app.got[0][0], obj) {
		t.Fatalf("the application saw the message %d times", b.app.count())
	}
	if p, _ := ob.Pending(ctx); len(p) != 0 {
		t.Fatalf("still pending: %d", len(p))
	}
}

// TestHeldAnswerIsRetried: a held message (an act waiting for the
// receiver's principal) is answered 503 with its codes; the client reports
// it as unavailable with the codes, so the outbox asks again.
func TestHeldAnswerIsRetried(t *testing.T) {
	a, b := pair(t)
	b.app.reply = func([][]byte) ([][]byte, error) {
		return nil, fmt.Errorf("%w: %w", delivery.ErrUnavailable, reason.Refuse("held", reason.ApprovalRequired))
	}
	_, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{evidence(t, a.node, txn, 10, nil)})
	if !errors.Is(err, delivery.ErrUnavailable) || delivery.Permanent(err) || !slices.Contains(reason.CodesOf(err), reason.ApprovalRequired) {
		t.Fatalf("a held answer: %v", err)
	}
}
