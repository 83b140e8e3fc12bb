package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/store"
)

const txn = "txn_7d4f0a1b2c3d4e5f6a7b8c9d"

// object returns canonical bytes of a minimal envelope-shaped object of
// transaction t (nil for none) with the given extra top-level members.
func object(t *testing.T, id string, tx any, extra map[string]any) []byte {
	t.Helper()
	o := map[string]any{
		"spec_version": "a202-commercial/0.1", "id": id, "object_type": "evidence",
		"version": 1, "transaction_id": tx, "payload": map[string]any{"note": "x"},
		"signatures": []any{},
	}
	for k, v := range extra {
		o[k] = v
	}
	b, err := canonical.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func codes(err error) []reason.Code { return reason.CodesOf(err) }

func hasCode(err error, c reason.Code) bool {
	for _, x := range reason.CodesOf(err) {
		if x == c {
			return true
		}
	}
	return false
}

func TestCheckMessage(t *testing.T) {
	good := object(t, "evd_aaaaaaaaaaaaaaaaaaaaaaaa", txn, nil)
	free := object(t, "key_free_one", nil, nil)
	if err := delivery.CheckMessage(txn, [][]byte{good, free}); err != nil {
		t.Fatalf("good message refused: %v", err)
	}
	cases := []struct {
		name    string
		txn     string
		objects [][]byte
		code    reason.Code // "" = refusal without a code
	}{
		{"empty", txn, nil, ""},
		{"not JSON", txn, [][]byte{[]byte("{")}, ""},
		{"duplicate member", txn, [][]byte{[]byte(`{"id":"a","id":"b"}`)}, ""},
		{"not canonical (space)", txn, [][]byte{append([]byte(" "), good...)}, ""},
		{"not canonical (member order)", txn, [][]byte{[]byte(`{"transaction_id":null,"id":"x"}`)}, ""},
		{"task id inside the signed bytes", txn, [][]byte{object(t, "evd_b", txn, map[string]any{"task_id": "t-1"})}, ""},
		{"context id inside the signed bytes", txn, [][]byte{object(t, "evd_c", txn, map[string]any{"contextId": "c-1"})}, ""},
		{"other transaction", txn, [][]byte{good, object(t, "evd_d", "txn_ffffffffffffffffffffffff", nil)}, reason.StreamMismatch},
		{"no correlation for a bound object", "", [][]byte{good}, reason.StreamMismatch},
		{"transaction_id not a string", txn, [][]byte{object(t, "evd_e", 7, nil)}, ""},
	}
	for _, c := range cases {
		err := delivery.CheckMessage(c.txn, c.objects)
		var r *reason.Refusal
		if !errors.As(err, &r) {
			t.Errorf("%s: not refused (%v)", c.name, err)
			continue
		}
		if c.code == "" && len(r.Codes) != 0 || c.code != "" && !r.Has(c.code) {
			t.Errorf("%s: codes %v, want %q", c.name, r.Codes, c.code)
		}
	}
}

func TestMessageKeyCoversWholeBytes(t *testing.T) {
	a := object(t, "evd_aaaaaaaaaaaaaaaaaaaaaaaa", txn, map[string]any{"content_hash": "00"})
	// The same object with another signature: same content_hash, another message.
	b := object(t, "evd_aaaaaaaaaaaaaaaaaaaaaaaa", txn, map[string]any{"content_hash": "00", "signatures": []any{map[string]any{"key_id": "key_x"}}})
	k1 := delivery.MessageKey(txn, [][]byte{a})
	if k1 != delivery.MessageKey(txn, [][]byte{a}) {
		t.Fatal("key is not deterministic")
	}
	for name, k := range map[string]string{
		"countersigned":     delivery.MessageKey(txn, [][]byte{b}),
		"other transaction": delivery.MessageKey("txn_ffffffffffffffffffffffff", [][]byte{a}),
		"more objects":      delivery.MessageKey(txn, [][]byte{a, b}),
	} {
		if k == k1 {
			t.Errorf("%s: same key", name)
		}
	}
	if delivery.MessageKey(txn, [][]byte{a, b}) == delivery.MessageKey(txn, [][]byte{b, a}) {
		t.Error("object order does not change the key")
	}
}

// declarationFixture reads a published declaration fixture.
func declarationFixture(t *testing.T, name string) (local delivery.Versions, capabilities any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(spectest.FixturesDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		LocalParty              delivery.Versions `json:"local_party"`
		CounterpartyDeclaration any               `json:"counterparty_declaration"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.LocalParty, f.CounterpartyDeclaration
}

func TestJudgeDeclarationFixtures(t *testing.T) {
	local, decl := declarationFixture(t, "valid-extension-declaration.json")
	if err := delivery.JudgeDeclaration(local, decl); err != nil {
		t.Fatalf("valid declaration refused: %v", err)
	}
	for _, name := range []string{"negative/declaration-missing.json", "negative/declaration-version-mismatch.json"} {
		local, decl := declarationFixture(t, name)
		err := delivery.JudgeDeclaration(local, decl)
		if c := codes(err); len(c) != 1 || c[0] != reason.ExtensionUnsupported {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestJudgeDeclaration(t *testing.T) {
	caps := func(params any) map[string]any {
		return map[string]any{"extensions": []any{map[string]any{"uri": delivery.ExtensionURI, "required": true, "params": params}}}
	}
	read := func(v ...string) []any {
		out := []any{}
		for _, s := range v {
			out = append(out, s)
		}
		return out
	}
	if err := delivery.JudgeDeclaration(delivery.LocalVersions, caps(delivery.LocalVersions.Params())); err != nil {
		t.Fatalf("own declaration refused: %v", err)
	}
	// Reading more than it writes is fine.
	if err := delivery.JudgeDeclaration(delivery.LocalVersions, caps(map[string]any{"read_versions": read("0.1", "0.2"), "write_version": "0.1"})); err != nil {
		t.Fatalf("wider reader refused: %v", err)
	}
	twice := caps(delivery.LocalVersions.Params())
	twice["extensions"] = append(twice["extensions"].([]any), twice["extensions"].([]any)[0])
	bad := map[string]any{
		"card unretrievable":   nil,
		"no extensions":        map[string]any{},
		"other uri only":       map[string]any{"extensions": []any{map[string]any{"uri": "https://schemas.a202.org/a2a-ext/commercial/0.2", "required": true, "params": delivery.LocalVersions.Params()}}},
		"declared twice":       twice,
		"no params":            caps(nil),
		"params not object":    caps("0.1"),
		"missing write":        caps(map[string]any{"read_versions": read("0.1")}),
		"missing read":         caps(map[string]any{"write_version": "0.1"}),
		"empty read":           caps(map[string]any{"read_versions": read(), "write_version": "0.1"}),
		"three-part version":   caps(map[string]any{"read_versions": read("0.1.0"), "write_version": "0.1.0"}),
		"numeric version":      caps(map[string]any{"read_versions": []any{json.Number("1")}, "write_version": "0.1"}),
		"they write 0.2":       caps(map[string]any{"read_versions": read("0.1", "0.2"), "write_version": "0.2"}),
		"they do not read 0.1": caps(map[string]any{"read_versions": read("0.2"), "write_version": "0.2"}),
	}
	for name, c := range bad {
		err := delivery.JudgeDeclaration(delivery.LocalVersions, c)
		if c := codes(err); len(c) != 1 || c[0] != reason.ExtensionUnsupported {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Both directions of incompatibility, with this party the odd one out.
	newer := delivery.Versions{Read: []string{"0.2"}, Write: "0.2"}
	if err := delivery.JudgeDeclaration(newer, caps(delivery.LocalVersions.Params())); !errors.Is(err, reason.ErrRefused) {
		t.Fatalf("local newer than remote: %v", err)
	}
}

func TestJudgePreflight(t *testing.T) {
	doc := map[string]any{"uri": delivery.ExtensionURI, "read_versions": []any{"0.1"}, "write_version": "0.1"}
	if err := delivery.JudgePreflight(delivery.LocalVersions, doc); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]any{
		"not an object": []any{},
		"other uri":     map[string]any{"uri": "https://example.invalid/x", "read_versions": []any{"0.1"}, "write_version": "0.1"},
		"extra member":  map[string]any{"uri": delivery.ExtensionURI, "read_versions": []any{"0.1"}, "write_version": "0.1", "x": 1},
		"incompatible":  map[string]any{"uri": delivery.ExtensionURI, "read_versions": []any{"0.2"}, "write_version": "0.2"},
	} {
		if c := codes(delivery.JudgePreflight(delivery.LocalVersions, d)); len(c) != 1 || c[0] != reason.ExtensionUnsupported {
			t.Errorf("%s accepted", name)
		}
	}
	// An unreachable surface is the same refusal and is worth retrying.
	err := delivery.Unreachable("GET /a202/capabilities", errors.New("connection refused"))
	if c := codes(err); len(c) != 1 || c[0] != reason.ExtensionUnsupported || !errors.Is(err, delivery.ErrUnavailable) || delivery.Permanent(err) {
		t.Fatalf("unreachable: %v", err)
	}
	if !delivery.Permanent(delivery.Unsupported("condition 1")) {
		t.Fatal("a declaration failure is retried")
	}
}

// fakeTransport records deliveries and fails on demand.
type fakeTransport struct {
	mu    sync.Mutex
	fail  []error // errors to return, in order, before succeeding
	calls []string
	got   chan string
}

func (f *fakeTransport) Deliver(ctx context.Context, peer, tx string, objects [][]byte) ([][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, _ := canonical.DecodeObject(objects[0])
	f.calls = append(f.calls, fmt.Sprint(obj["id"]))
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return nil, err
	}
	if f.got != nil {
		f.got <- delivery.MessageKey(tx, objects)
	}
	return [][]byte{[]byte("reply to " + peer)}, nil
}

func openStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "party.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func fast() delivery.OutboxOptions {
	return delivery.OutboxOptions{InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, PollInterval: 50 * time.Millisecond, AttemptTimeout: 10 * time.Second}
}

// waitFor polls cond up to a generous bound; the bound only stops a
// broken test from hanging, it asserts nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

func TestOutboxSendDelivers(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{}
	ob := delivery.NewOutbox(st, ft, fast())
	ctx := context.Background()
	reply, err := ob.Send(ctx, "org_b", txn, [][]byte{object(t, "evd_1", txn, nil)})
	if err != nil || len(reply) != 1 || string(reply[0]) != "reply to org_b" {
		t.Fatalf("%q %v", reply, err)
	}
	if p, _ := ob.Pending(ctx); len(p) != 0 {
		t.Fatalf("pending after delivery: %+v", p)
	}
	// A message that breaks a carrier rule is never queued.
	if _, err := ob.Send(ctx, "org_b", txn, [][]byte{object(t, "evd_2", "txn_ffffffffffffffffffffffff", nil)}); !hasCode(err, reason.StreamMismatch) {
		t.Fatalf("mismatched message sent: %v", err)
	}
	if len(ft.calls) != 1 {
		t.Fatalf("transport calls %v", ft.calls)
	}
}

func TestOutboxRetriesUntilDelivered(t *testing.T) {
	st, path := openStore(t)
	ft := &fakeTransport{fail: []error{
		fmt.Errorf("%w: connection refused", delivery.ErrUnavailable),
		errors.New("some unclassified failure"),
		delivery.Unreachable("card", errors.New("timeout")),
	}, got: make(chan string, 4)}
	delivered := make(chan [][]byte, 4)
	opt := fast()
	opt.OnDelivered = func(_ context.Context, _ store.OutboxMessage, reply [][]byte) { delivered <- reply }
	ob := delivery.NewOutbox(st, ft, opt)
	ctx := context.Background()
	obj := object(t, "evd_1", txn, nil)
	_, err := ob.Send(ctx, "org_b", txn, [][]byte{obj})
	if !errors.Is(err, delivery.ErrQueued) || !errors.Is(err, delivery.ErrUnavailable) {
		t.Fatalf("first attempt: %v", err)
	}
	p, _ := ob.Pending(ctx)
	if len(p) != 1 || p[0].Attempts != 1 || p[0].LastError == "" {
		t.Fatalf("pending %+v", p)
	}
	// The sending process restarts: a new Outbox on the same database
	// picks the message up.
	st.Close()
	st2, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ob2 := delivery.NewOutbox(st2, ft, opt)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob2.Run(rctx) }()
	select {
	case reply := <-delivered:
		if string(reply[0]) != "reply to org_b" {
			t.Fatalf("reply %q", reply)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never delivered")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if len(ft.got) != 1 {
		t.Fatalf("delivered %d times", len(ft.got))
	}
	if p, _ := ob2.Pending(ctx); len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
	m, _ := ob2.Message(ctx, p[0].ID)
	if m.Status != store.OutboxDelivered || m.Attempts != 4 {
		t.Fatalf("message %+v", m)
	}
}

func TestOutboxRefusalIsFinal(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{fail: []error{reason.Refuse("peer says", reason.ExtensionUnsupported)}}
	var failed []error
	opt := fast()
	opt.OnFailed = func(_ context.Context, _ store.OutboxMessage, err error) { failed = append(failed, err) }
	ob := delivery.NewOutbox(st, ft, opt)
	ctx := context.Background()
	_, err := ob.Send(ctx, "org_b", txn, [][]byte{object(t, "evd_1", txn, nil)})
	if errors.Is(err, delivery.ErrQueued) || !hasCode(err, reason.ExtensionUnsupported) {
		t.Fatalf("refusal: %v", err)
	}
	if p, _ := ob.Pending(ctx); len(p) != 0 || len(failed) != 1 {
		t.Fatalf("refused message still pending (%d) or not reported (%d)", len(p), len(failed))
	}
	m, err := ob.Message(ctx, 1)
	if err != nil || m.Status != store.OutboxFailed {
		t.Fatalf("%+v %v", m, err)
	}
	// A conflict is final too.
	ft.fail = []error{fmt.Errorf("%w: event 3 already has a successor", delivery.ErrConflict)}
	if _, err := ob.Send(ctx, "org_b", txn, [][]byte{object(t, "evd_2", txn, nil)}); !errors.Is(err, delivery.ErrConflict) || errors.Is(err, delivery.ErrQueued) {
		t.Fatalf("conflict: %v", err)
	}
}

func TestOutboxMaxAttempts(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{fail: []error{delivery.ErrUnavailable, delivery.ErrUnavailable, delivery.ErrUnavailable}}
	opt := fast()
	opt.MaxAttempts = 2
	failed := make(chan error, 1)
	opt.OnFailed = func(_ context.Context, _ store.OutboxMessage, err error) { failed <- err }
	ob := delivery.NewOutbox(st, ft, opt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ob.Send(ctx, "org_b", txn, [][]byte{object(t, "evd_1", txn, nil)}); !errors.Is(err, delivery.ErrQueued) {
		t.Fatal(err)
	}
	go ob.Run(ctx)
	select {
	case <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("never gave up")
	}
	if m, _ := ob.Message(ctx, 1); m.Status != store.OutboxFailed || m.Attempts != 2 {
		t.Fatalf("%+v", m)
	}
}

func TestOutboxKeepsOrderWithinTransaction(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{fail: []error{delivery.ErrUnavailable}, got: make(chan string, 4)}
	ob := delivery.NewOutbox(st, ft, fast())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := object(t, "evd_0001", txn, nil)
	second := object(t, "evd_0002", txn, nil)
	other := object(t, "evd_0003", "txn_ffffffffffffffffffffffff", nil)
	if _, err := ob.Send(ctx, "org_b", txn, [][]byte{first}); !errors.Is(err, delivery.ErrQueued) {
		t.Fatal(err)
	}
	// The successor waits for its predecessor rather than overtaking it.
	if _, err := ob.Send(ctx, "org_b", txn, [][]byte{second}); !errors.Is(err, delivery.ErrQueued) {
		t.Fatalf("second overtook the first: %v", err)
	}
	// Another transaction is not held up.
	if _, err := ob.Send(ctx, "org_b", "txn_ffffffffffffffffffffffff", [][]byte{other}); err != nil {
		t.Fatalf("other transaction: %v", err)
	}
	go ob.Run(ctx)
	waitFor(t, "both delivered", func() bool { p, _ := ob.Pending(ctx); return len(p) == 0 })
	ft.mu.Lock()
	defer ft.mu.Unlock()
	want := []string{"evd_0001", "evd_0003", "evd_0001", "evd_0002"}
	if fmt.Sprint(ft.calls) != fmt.Sprint(want) {
		t.Fatalf("attempts %v, want %v", ft.calls, want)
	}
}

func TestInboxAnswersRedeliveryOnce(t *testing.T) {
	st, _ := openStore(t)
	var mu sync.Mutex
	calls := 0
	app := delivery.ReceiverFunc(func(ctx context.Context, from, tx string, objects [][]byte) ([][]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if string(objects[0]) == string(object(t, "evd_bad", txn, nil)) {
			return nil, reason.Refuse("guard", reason.StateTransitionDenied)
		}
		return [][]byte{[]byte(fmt.Sprintf("reply %d", calls))}, nil
	})
	in := delivery.NewInbox(st, app, delivery.InboxOptions{})
	ctx := context.Background()
	msg := [][]byte{object(t, "evd_1", txn, nil)}

	var wg sync.WaitGroup
	replies := make([]string, 8)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := in.Receive(ctx, "org_a", txn, msg)
			if err != nil {
				t.Error(err)
				return
			}
			replies[i] = string(r[0])
		}()
	}
	wg.Wait()
	for _, r := range replies {
		if r != "reply 1" {
			t.Fatalf("replies %q", replies)
		}
	}
	if calls != 1 {
		t.Fatalf("application called %d times", calls)
	}
	// The same bytes from another organisation are another message.
	if r, _ := in.Receive(ctx, "org_c", txn, msg); string(r[0]) != "reply 2" {
		t.Fatalf("other sender: %q", r)
	}
	// A refusal is not recorded: the message may be tried again.
	bad := [][]byte{object(t, "evd_bad", txn, nil)}
	for i := 0; i < 2; i++ {
		if _, err := in.Receive(ctx, "org_a", txn, bad); !hasCode(err, reason.StateTransitionDenied) {
			t.Fatalf("refusal: %v", err)
		}
	}
	if calls != 4 {
		t.Fatalf("calls %d", calls)
	}
	// A message breaking a carrier rule never reaches the application.
	if _, err := in.Receive(ctx, "org_a", "txn_ffffffffffffffffffffffff", msg); !hasCode(err, reason.StreamMismatch) || calls != 4 {
		t.Fatalf("mismatch: %v (calls %d)", err, calls)
	}
	if r, err := in.Reply(ctx, "org_a", delivery.MessageKey(txn, msg)); err != nil || string(r[0]) != "reply 1" {
		t.Fatalf("reply lookup %q %v", r, err)
	}
}

type failingKeys struct{}

func (failingKeys) EnsureKeys(context.Context, string) error { return errors.New("peer down") }

func TestInboxNeedsSenderKeys(t *testing.T) {
	st, _ := openStore(t)
	called := false
	in := delivery.NewInbox(st, delivery.ReceiverFunc(func(context.Context, string, string, [][]byte) ([][]byte, error) {
		called = true
		return nil, nil
	}), delivery.InboxOptions{Keys: failingKeys{}})
	_, err := in.Receive(context.Background(), "org_a", txn, [][]byte{object(t, "evd_1", txn, nil)})
	if !errors.Is(err, delivery.ErrUnavailable) || called {
		t.Fatalf("%v called=%v", err, called)
	}
}
