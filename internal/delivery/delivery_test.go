package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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

// CheckDecoded judges decoded objects by the same member rules as
// CheckMessage: every case CheckMessage refuses for its members it
// refuses, with the same code.
func TestCheckDecoded(t *testing.T) {
	decoded := func(b []byte) map[string]any {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	good := decoded(object(t, "evd_aaaaaaaaaaaaaaaaaaaaaaaa", txn, nil))
	if err := delivery.CheckDecoded(txn, []map[string]any{good, decoded(object(t, "key_free_one", nil, nil))}); err != nil {
		t.Fatalf("good message refused: %v", err)
	}
	for _, c := range []struct {
		name    string
		txn     string
		objects []map[string]any
		code    reason.Code
	}{
		{"empty", txn, nil, ""},
		{"task id inside the object", txn, []map[string]any{decoded(object(t, "evd_b", txn, map[string]any{"task_id": "t-1"}))}, ""},
		{"other transaction", txn, []map[string]any{good, decoded(object(t, "evd_d", "txn_ffffffffffffffffffffffff", nil))}, reason.StreamMismatch},
		{"no correlation for a bound object", "", []map[string]any{good}, reason.StreamMismatch},
		{"transaction_id not a string", txn, []map[string]any{decoded(object(t, "evd_e", 7, nil))}, ""},
	} {
		err := delivery.CheckDecoded(c.txn, c.objects)
		var r *reason.Refusal
		if !errors.As(err, &r) || c.code == "" && len(r.Codes) != 0 || c.code != "" && !r.Has(c.code) {
			t.Errorf("%s: %v, want a refusal with %q", c.name, err, c.code)
		}
	}
	// A message a carrier checked carries what it decoded each object
	// to, with the bytes: the values CheckMessage reads. One of bytes
	// alone is not checked and carries none.
	raw := [][]byte{object(t, "evd_f", txn, nil)}
	values, err := delivery.CheckMessageDecoded(txn, raw)
	if err != nil || len(values) != 1 || !reflect.DeepEqual(values[0], decoded(raw[0])) {
		t.Fatalf("decoded %v (%v)", values, err)
	}
	msg, err := delivery.Check(txn, raw)
	if err != nil || !msg.Checked() || len(msg.Objects) != 1 || !bytes.Equal(msg.Objects[0], raw[0]) {
		t.Fatalf("checked message %+v (%v)", msg, err)
	}
	if got := msg.Value(0); !reflect.DeepEqual(got, values[0]) {
		t.Fatalf("handed on %v", got)
	}
	if msg.Value(1) != nil || msg.Value(-1) != nil {
		t.Fatal("a value for a position the message does not have")
	}
	if m := delivery.Raw(raw); m.Checked() || m.Value(0) != nil {
		t.Fatal("bytes no carrier checked carry values")
	}
	if _, err := delivery.Check("txn_other", raw); err == nil {
		t.Fatal("Check passed a message of another transaction")
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
	mu        sync.Mutex
	fail      []error // errors to return, in order, before succeeding
	calls     []string
	delivered int
}

func (f *fakeTransport) Deliver(ctx context.Context, peer, tx string, objects [][]byte) (delivery.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, _ := canonical.DecodeObject(objects[0])
	f.calls = append(f.calls, fmt.Sprint(obj["id"]))
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return delivery.Message{}, err
	}
	f.delivered++
	return delivery.Raw([][]byte{[]byte("reply to " + peer)}), nil
}

func (f *fakeTransport) failNext(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = append(f.fail, errs...)
}

// attempted returns the first object id of each message attempted, in
// order, and how many were delivered.
func (f *fakeTransport) attempted() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.calls), f.delivered
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

// clock is the simulated time of a test: it moves only when the test
// advances it, so back-off and leases are computed, not waited for.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// To moves the clock to t (never back).
func (c *clock) To(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

func simulated(c *clock) delivery.OutboxOptions {
	return delivery.OutboxOptions{InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, AttemptTimeout: 30 * time.Second, PollInterval: time.Minute, Clock: c.Now}
}

// outcome is what the handler made of one attempt.
type outcome struct {
	m     store.OutboxMessage
	reply [][]byte
	err   error
}

// handler is the application behind a test outbox, doing with each
// attempt what the record engine does: it calls Send, and settles the
// outcome in its own database transaction: a reply deletes the message
// (Txn.Delivered), a refusal marks it failed (Txn.Failed), a failure worth
// retrying leaves it to the outbox.
type handler struct {
	t  *testing.T
	st *store.Store
	ob *delivery.Outbox

	mu        sync.Mutex
	crashed   bool // the process died after leasing: Attempt does nothing
	delivered []outcome
	failed    []outcome
}

func newOutbox(t *testing.T, st *store.Store, tr delivery.Transport, opt delivery.OutboxOptions) (*delivery.Outbox, *handler) {
	h := &handler{t: t, st: st}
	h.ob = delivery.NewOutbox(st, tr, h, opt)
	return h.ob, h
}

// Attempt implements delivery.Handler.
func (h *handler) Attempt(ctx context.Context, m store.OutboxMessage) {
	h.mu.Lock()
	crashed := h.crashed
	h.mu.Unlock()
	if !crashed {
		h.attempt(ctx, m)
	}
}

func (h *handler) attempt(ctx context.Context, m store.OutboxMessage) ([][]byte, error) {
	msg, err := h.ob.Send(ctx, m)
	reply := msg.Objects
	switch {
	case err == nil:
		if uerr := h.st.Update(ctx, func(tx *store.Txn) error { return tx.Delivered(m.ID) }); uerr != nil {
			h.t.Errorf("storing the reply to message %d: %v", m.ID, uerr)
			return reply, err
		}
		h.mu.Lock()
		h.delivered = append(h.delivered, outcome{m, reply, nil})
		h.mu.Unlock()
	case errors.Is(err, delivery.ErrQueued):
	default:
		if uerr := h.st.Update(ctx, func(tx *store.Txn) error { return tx.Failed(m.ID, err.Error(), h.ob.Now()) }); uerr != nil {
			h.t.Errorf("settling the refusal of message %d: %v", m.ID, uerr)
			return reply, err
		}
		h.mu.Lock()
		h.failed = append(h.failed, outcome{m, nil, err})
		h.mu.Unlock()
	}
	return reply, err
}

func (h *handler) crash() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.crashed = true
}

func (h *handler) outcomes() (delivered, failed []outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]outcome(nil), h.delivered...), append([]outcome(nil), h.failed...)
}

// enqueue stores a message in its own database transaction, as an act
// does; leased, the act attempts it itself and no worker races it.
func (h *handler) enqueue(peer, tx string, leased bool, objects ...[]byte) store.OutboxMessage {
	h.t.Helper()
	ctx := context.Background()
	var lease store.Lease
	if leased {
		lease = h.ob.Lease()
	}
	var id int64
	if err := h.st.Update(ctx, func(x *store.Txn) error {
		m, err := x.Enqueue(peer, tx, delivery.MessageKey(tx, objects), objects, nil, h.ob.Now(), lease)
		id = m.ID
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	m, err := h.st.GetOutbox(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

// act enqueues a message leased and makes the first attempt at once.
func (h *handler) act(peer, tx string, objects ...[]byte) (store.OutboxMessage, [][]byte, error) {
	h.t.Helper()
	m := h.enqueue(peer, tx, true, objects...)
	reply, err := h.attempt(context.Background(), m)
	return m, reply, err
}

func pending(t *testing.T, ob *delivery.Outbox) []store.OutboxMessage {
	t.Helper()
	p, err := ob.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// within reports whether next lies in [now+lo, now+hi].
func within(next, now time.Time, lo, hi time.Duration) bool {
	d := next.Sub(now)
	return d >= lo && d <= hi
}

func TestOutboxSendDelivers(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{}
	clk := newClock()
	ob, h := newOutbox(t, st, ft, simulated(clk))
	ctx := context.Background()
	if ob.Now() != clk.Now() {
		t.Fatal("the outbox does not read its clock")
	}
	lease := ob.Lease()
	if lease.Owner == "" || !lease.Until.Equal(clk.Now().Add(30*time.Second)) {
		t.Fatalf("lease %+v", lease)
	}
	if other, _ := newOutbox(t, st, ft, simulated(clk)); other.Lease().Owner == lease.Owner {
		t.Fatal("two outboxes share an owner token")
	}
	// The act enqueues leased: until it attempts, the worker leaves the
	// message alone.
	m := h.enqueue("org_b", txn, true, object(t, "evd_1", txn, nil))
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("the worker took %d messages an act holds", n)
	}
	reply, err := h.attempt(ctx, m)
	if err != nil || len(reply) != 1 || string(reply[0]) != "reply to org_b" {
		t.Fatalf("%q %v", reply, err)
	}
	if p := pending(t, ob); len(p) != 0 {
		t.Fatalf("pending after delivery: %+v", p)
	}
	if _, err := st.GetOutbox(ctx, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a delivered message is kept: %v", err)
	}
	if d, f := h.outcomes(); len(d) != 1 || d[0].m.ID != m.ID || len(f) != 0 {
		t.Fatalf("outcomes %+v %+v", d, f)
	}
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("the worker found %d messages after delivery", n)
	}
	if calls, n := ft.attempted(); calls != "[evd_1]" || n != 1 {
		t.Fatalf("transport calls %s, %d delivered", calls, n)
	}
}

// TestOutboxHandedAttemptedWithoutLease: a message an act enqueued leased
// and handed to the worker (Hand) is attempted at the worker's next pass,
// with no commit of its own before the attempt; one the worker was not
// handed waits for its lease to end.
func TestOutboxHandedAttemptedWithoutLease(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{}
	clk := newClock()
	ob, h := newOutbox(t, st, ft, simulated(clk))
	ctx := context.Background()
	m := h.enqueue("org_b", txn, true, object(t, "evd_1", txn, nil))
	h.enqueue("org_b", "txn_00000000000000000000000b", true, object(t, "evd_2", "txn_00000000000000000000000b", nil))
	ob.Hand(m)
	before := st.Commits()
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("the worker attempted %d messages, want the one handed", n)
	}
	// One commit: the delivery's (Txn.Delivered), no lease written.
	if n := st.Commits() - before; n != 1 {
		t.Fatalf("attempting a handed message took %d commits, want 1", n)
	}
	if d, _ := h.outcomes(); len(d) != 1 || d[0].m.ID != m.ID {
		t.Fatalf("delivered %+v", d)
	}
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("the worker attempted %d more, want none before the other lease ends", n)
	}
	clk.Advance(31 * time.Second)
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("after the lease ended the worker attempted %d, want 1", n)
	}
}

func TestOutboxRetriesUntilDelivered(t *testing.T) {
	st, path := openStore(t)
	ft := &fakeTransport{fail: []error{
		fmt.Errorf("%w: connection refused", delivery.ErrUnavailable),
		errors.New("some unclassified failure"),
		delivery.Unreachable("card", errors.New("timeout")),
	}}
	clk := newClock()
	opt := simulated(clk)
	ob, h := newOutbox(t, st, ft, opt)
	ctx := context.Background()
	obj := object(t, "evd_1", txn, nil)
	m, _, err := h.act("org_b", txn, obj)
	if !errors.Is(err, delivery.ErrQueued) || !errors.Is(err, delivery.ErrUnavailable) {
		t.Fatalf("first attempt: %v", err)
	}
	p := pending(t, ob)
	if len(p) != 1 || p[0].ID != m.ID || p[0].Attempts != 1 || !strings.Contains(p[0].LastError, "connection refused") ||
		!within(p[0].NextAttempt, clk.Now(), 500*time.Millisecond, time.Second) {
		t.Fatalf("pending %+v", p)
	}
	if next, ok, _ := st.NextOutboxAttempt(ctx); !ok || !next.Equal(p[0].NextAttempt) {
		t.Fatalf("next attempt %v %v", next, ok)
	}
	// Not due during its back-off.
	clk.To(p[0].NextAttempt.Add(-time.Nanosecond))
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("attempted %d during back-off", n)
	}
	// Due when it ends: the worker fails again, and backs off longer.
	clk.To(p[0].NextAttempt)
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d at the end of the back-off", n)
	}
	p = pending(t, ob)
	if len(p) != 1 || p[0].Attempts != 2 || p[0].LastError != "some unclassified failure" || !within(p[0].NextAttempt, clk.Now(), time.Second, 2*time.Second) {
		t.Fatalf("after the second attempt %+v", p)
	}
	// The sending process leases the message for its third attempt and
	// dies before making it.
	clk.To(p[0].NextAttempt)
	h.crash()
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d", n)
	}
	if calls, _ := ft.attempted(); calls != "[evd_1 evd_1]" {
		t.Fatalf("the dead process attempted: %s", calls)
	}
	// It restarts: a new Outbox on the reopened database. Until Start,
	// the dead lease holds the message for the rest of AttemptTimeout.
	st.Close()
	st2, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ob2, h2 := newOutbox(t, st2, ft, opt)
	if n := ob2.RunDue(ctx); n != 0 {
		t.Fatalf("handed %d under a dead lease", n)
	}
	if next, ok, _ := st2.NextOutboxAttempt(ctx); !ok || !next.Equal(clk.Now().Add(opt.AttemptTimeout)) {
		t.Fatalf("next attempt %v %v, want the end of the dead lease", next, ok)
	}
	// Start voids the lease: the message is due at once.
	if err := ob2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ob2.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d after Start, want the message at once", n)
	}
	p = pending(t, ob2)
	if len(p) != 1 || p[0].Attempts != 3 || !within(p[0].NextAttempt, clk.Now(), 2*time.Second, 4*time.Second) {
		t.Fatalf("after the third attempt %+v", p)
	}
	clk.To(p[0].NextAttempt)
	if n := ob2.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d", n)
	}
	d, f := h2.outcomes()
	if len(d) != 1 || len(f) != 0 || d[0].m.ID != m.ID || d[0].m.Attempts != 3 || string(d[0].reply[0]) != "reply to org_b" {
		t.Fatalf("outcomes %+v %+v", d, f)
	}
	if calls, n := ft.attempted(); calls != "[evd_1 evd_1 evd_1 evd_1]" || n != 1 {
		t.Fatalf("transport calls %s, delivered %d times", calls, n)
	}
	if p := pending(t, ob2); len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
	if _, err := st2.GetOutbox(ctx, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the delivered message is kept: %v", err)
	}
}

func TestOutboxRefusalIsFinal(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{fail: []error{reason.Refuse("peer says", reason.ExtensionUnsupported)}}
	clk := newClock()
	ob, h := newOutbox(t, st, ft, simulated(clk))
	ctx := context.Background()
	m, _, err := h.act("org_b", txn, object(t, "evd_1", txn, nil))
	if errors.Is(err, delivery.ErrQueued) || !hasCode(err, reason.ExtensionUnsupported) {
		t.Fatalf("refusal: %v", err)
	}
	if p := pending(t, ob); len(p) != 0 {
		t.Fatalf("refused message still pending: %+v", p)
	}
	got, err := st.GetOutbox(ctx, m.ID)
	if err != nil || got.Status != store.OutboxFailed || got.Attempts != 1 || !strings.Contains(got.LastError, "peer says") {
		t.Fatalf("%+v %v", got, err)
	}
	// A refusal met by the worker is final as well, and so is a rejected
	// carrier request.
	for i, final := range []error{
		reason.Refuse("guard", reason.StateTransitionDenied),
		fmt.Errorf("%w: no pinned credential", delivery.ErrRejected),
	} {
		ft.failNext(delivery.ErrUnavailable, final)
		m, _, err := h.act("org_b", txn, object(t, fmt.Sprintf("evd_%d", i+2), txn, nil))
		if !errors.Is(err, delivery.ErrQueued) {
			t.Fatalf("first attempt: %v", err)
		}
		clk.Advance(time.Minute)
		if n := ob.RunDue(ctx); n != 1 {
			t.Fatalf("handed %d", n)
		}
		if got, _ := st.GetOutbox(ctx, m.ID); got.Status != store.OutboxFailed || got.Attempts != 2 || got.LastError != final.Error() {
			t.Fatalf("after %v: %+v", final, got)
		}
		clk.Advance(time.Hour)
		if n := ob.RunDue(ctx); n != 0 {
			t.Fatalf("a failed message was attempted again (%d)", n)
		}
	}
	if d, f := h.outcomes(); len(d) != 0 || len(f) != 3 {
		t.Fatalf("delivered %d, failed %d", len(d), len(f))
	}
	if calls, n := ft.attempted(); n != 0 || strings.Count(calls, "evd_") != 5 {
		t.Fatalf("transport calls %s, delivered %d", calls, n)
	}
}

func TestOutboxConflictIsFinal(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{fail: []error{fmt.Errorf("%w: event 3 already has a successor", delivery.ErrConflict)}}
	clk := newClock()
	ob, h := newOutbox(t, st, ft, simulated(clk))
	ctx := context.Background()
	m, _, err := h.act("org_b", txn, object(t, "evd_1", txn, nil))
	if !errors.Is(err, delivery.ErrConflict) || errors.Is(err, delivery.ErrQueued) {
		t.Fatalf("conflict: %v", err)
	}
	if got, _ := st.GetOutbox(ctx, m.ID); got.Status != store.OutboxFailed || !strings.Contains(got.LastError, "already has a successor") {
		t.Fatalf("%+v", got)
	}
	// Settled, it no longer holds up its transaction.
	next := h.enqueue("org_b", txn, false, object(t, "evd_2", txn, nil))
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d", n)
	}
	if d, _ := h.outcomes(); len(d) != 1 || d[0].m.ID != next.ID {
		t.Fatalf("delivered %+v", d)
	}
	// A conflict that is also "unavailable" is retried.
	ft.failNext(fmt.Errorf("%w: %w", delivery.ErrConflict, delivery.ErrUnavailable))
	if _, _, err := h.act("org_b", txn, object(t, "evd_3", txn, nil)); !errors.Is(err, delivery.ErrQueued) {
		t.Fatalf("an unavailable conflict was final: %v", err)
	}
}

func TestOutboxKeepsOrderWithinTransaction(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{fail: []error{delivery.ErrUnavailable}}
	clk := newClock()
	ob, h := newOutbox(t, st, ft, simulated(clk))
	ctx := context.Background()
	const txn2 = "txn_ffffffffffffffffffffffff"
	first, _, err := h.act("org_b", txn, object(t, "evd_0001", txn, nil))
	if !errors.Is(err, delivery.ErrQueued) {
		t.Fatal(err)
	}
	// The successor waits for its predecessor rather than overtaking it:
	// nothing is sent, and it is not counted as an attempt.
	second, _, err := h.act("org_b", txn, object(t, "evd_0002", txn, nil))
	if !errors.Is(err, delivery.ErrQueued) || !strings.Contains(err.Error(), "still pending") {
		t.Fatalf("second overtook the first: %v", err)
	}
	if got, _ := st.GetOutbox(ctx, second.ID); got.Attempts != 0 {
		t.Fatalf("the waiting successor counted an attempt: %+v", got)
	}
	// Another transaction is not held up.
	if _, _, err := h.act("org_b", txn2, object(t, "evd_0003", txn2, nil)); err != nil {
		t.Fatalf("other transaction: %v", err)
	}
	// The successor is released, not due: its head is backing off.
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("handed %d while the head backs off", n)
	}
	p := pending(t, ob)
	if len(p) != 2 || p[0].ID != first.ID || p[1].ID != second.ID {
		t.Fatalf("pending %+v", p)
	}
	// One pass delivers the head, then its successor.
	clk.To(p[0].NextAttempt)
	if n := ob.RunDue(ctx); n != 2 {
		t.Fatalf("handed %d, want the head and its successor", n)
	}
	if p := pending(t, ob); len(p) != 0 {
		t.Fatalf("pending %+v", p)
	}
	want := "[evd_0001 evd_0003 evd_0001 evd_0002]"
	if calls, n := ft.attempted(); calls != want || n != 3 {
		t.Fatalf("attempts %s (%d delivered), want %s", calls, n, want)
	}
	d, _ := h.outcomes()
	if len(d) != 3 || d[1].m.ID != first.ID || d[2].m.ID != second.ID {
		t.Fatalf("delivered %+v", d)
	}
}

func TestOutboxRunDueFollowsTheClock(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{}
	clk := newClock()
	opt := simulated(clk)
	ob, h := newOutbox(t, st, ft, opt)
	ctx := context.Background()
	// More messages than one batch, each of its own transaction: one
	// pass hands over every one.
	for i := range 40 {
		tx := fmt.Sprintf("txn_%024d", i)
		h.enqueue("org_b", tx, false, object(t, fmt.Sprintf("evd_%d", i), tx, nil))
	}
	if n := ob.RunDue(ctx); n != 40 {
		t.Fatalf("handed %d of 40", n)
	}
	if _, n := ft.attempted(); n != 40 {
		t.Fatalf("delivered %d of 40", n)
	}
	// A message enqueued to be due later is handed over when the clock
	// reaches it, not before.
	var id int64
	later := clk.Now().Add(10 * time.Second)
	objs := [][]byte{object(t, "evd_later", txn, nil)}
	if err := st.Update(ctx, func(x *store.Txn) error {
		m, err := x.Enqueue("org_b", txn, delivery.MessageKey(txn, objs), objs, nil, later, store.Lease{})
		id = m.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("handed %d early", n)
	}
	// The attempt dies with its lease held in this process: the message
	// is due again when AttemptTimeout has passed, not before.
	h.crash()
	clk.Advance(time.Nanosecond)
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d when due", n)
	}
	h.mu.Lock()
	h.crashed = false
	h.mu.Unlock()
	clk.Advance(opt.AttemptTimeout - time.Nanosecond)
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("handed %d under its own lease", n)
	}
	// Start does not void this process's own lease.
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ob.RunDue(ctx); n != 0 {
		t.Fatalf("handed %d after Start voided the own lease", n)
	}
	clk.Advance(time.Nanosecond)
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d when the lease ended", n)
	}
	if _, err := st.GetOutbox(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("not delivered: %v", err)
	}
	// An ended context hands nothing over.
	h.enqueue("org_b", txn, false, object(t, "evd_last", txn, nil))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if n := ob.RunDue(cctx); n != 0 {
		t.Fatalf("handed %d with an ended context", n)
	}
	if n := ob.RunDue(ctx); n != 1 {
		t.Fatalf("handed %d", n)
	}
}

func TestOutboxBackoff(t *testing.T) {
	st, _ := openStore(t)
	ob, _ := newOutbox(t, st, &fakeTransport{}, delivery.OutboxOptions{InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute})
	cases := []struct {
		attempts int
		lo, hi   time.Duration
	}{
		{0, 500 * time.Millisecond, time.Second},
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{3, 2 * time.Second, 4 * time.Second},
		{9, 128 * time.Second, 256 * time.Second},
		{10, 150 * time.Second, 5 * time.Minute}, // 512s capped
		{1000, 150 * time.Second, 5 * time.Minute},
	}
	for _, c := range cases {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := ob.Backoff(c.attempts)
			if d < c.lo || d > c.hi {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", c.attempts, d, c.lo, c.hi)
			}
			seen[d] = true
		}
		// Jitter: two instances that failed together do not retry together.
		if len(seen) < 2 {
			t.Errorf("Backoff(%d) has no jitter", c.attempts)
		}
	}
	// The defaults are 1s and 5m; a maximum below the initial wait is
	// raised to it.
	def, _ := newOutbox(t, st, &fakeTransport{}, delivery.OutboxOptions{})
	if d := def.Backoff(1); d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("default Backoff(1) = %v", d)
	}
	if d := def.Backoff(64); d < 150*time.Second || d > 5*time.Minute {
		t.Fatalf("default Backoff(64) = %v", d)
	}
	odd, _ := newOutbox(t, st, &fakeTransport{}, delivery.OutboxOptions{InitialBackoff: 10 * time.Second, MaxBackoff: time.Second})
	if d := odd.Backoff(5); d < 5*time.Second || d > 10*time.Second {
		t.Fatalf("Backoff with the maximum below the initial wait = %v", d)
	}
}

func TestOutboxFetchesKeysFirst(t *testing.T) {
	st, _ := openStore(t)
	ft := &fakeTransport{}
	opt := simulated(newClock())
	opt.Keys = failingKeys{}
	ob, h := newOutbox(t, st, ft, opt)
	_, _, err := h.act("org_b", txn, object(t, "evd_1", txn, nil))
	if !errors.Is(err, delivery.ErrQueued) || !errors.Is(err, delivery.ErrUnavailable) {
		t.Fatalf("keys unavailable: %v", err)
	}
	if calls, _ := ft.attempted(); calls != "[]" {
		t.Fatalf("sent before the receiver's keys were known: %s", calls)
	}
	if p := pending(t, ob); len(p) != 1 || !strings.Contains(p[0].LastError, "peer down") {
		t.Fatalf("pending %+v", p)
	}
}

// TestOutboxRun runs the worker loop itself in a synctest bubble, whose
// clock moves only when every goroutine waits: Run sleeps until the next
// attempt is due, a Poke wakes it, and it ends with its context.
func TestOutboxRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := openStore(t)
		ft := &fakeTransport{fail: []error{delivery.ErrUnavailable, delivery.ErrUnavailable}}
		ob, h := newOutbox(t, st, ft, delivery.OutboxOptions{InitialBackoff: time.Second, MaxBackoff: 4 * time.Second, PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := ob.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- ob.Run(ctx) }()
		synctest.Wait() // asleep: nothing to do
		start := time.Now()
		h.enqueue("org_b", txn, false, object(t, "evd_1", txn, nil))
		ob.Poke()
		synctest.Wait()
		if calls, _ := ft.attempted(); calls != "[evd_1]" {
			t.Fatalf("a poke did not wake the worker: %s", calls)
		}
		if time.Since(start) != 0 {
			t.Fatalf("the first attempt waited %v", time.Since(start))
		}
		for {
			if d, _ := h.outcomes(); len(d) == 1 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Two back-offs of at most 1s and 2s, not the poll interval.
		if waited := time.Since(start); waited < 1500*time.Millisecond || waited > 3*time.Second+20*time.Millisecond {
			t.Fatalf("delivered after %v", waited)
		}
		if calls, n := ft.attempted(); calls != "[evd_1 evd_1 evd_1]" || n != 1 {
			t.Fatalf("transport calls %s, delivered %d", calls, n)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v", err)
		}
	})
}

func TestInboxAnswersRedeliveryOnce(t *testing.T) {
	st, _ := openStore(t)
	var mu sync.Mutex
	calls := 0
	app := delivery.ReceiverFunc(func(ctx context.Context, from, tx string, msg delivery.Message) ([][]byte, error) {
		objects := msg.Objects
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
			r, err := in.Receive(ctx, "org_a", txn, delivery.Raw(msg))
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
	if r, _ := in.Receive(ctx, "org_c", txn, delivery.Raw(msg)); string(r[0]) != "reply 2" {
		t.Fatalf("other sender: %q", r)
	}
	// A refusal is not recorded: the message may be tried again.
	bad := [][]byte{object(t, "evd_bad", txn, nil)}
	for i := 0; i < 2; i++ {
		if _, err := in.Receive(ctx, "org_a", txn, delivery.Raw(bad)); !hasCode(err, reason.StateTransitionDenied) {
			t.Fatalf("refusal: %v", err)
		}
	}
	if calls != 4 {
		t.Fatalf("calls %d", calls)
	}
	// A message breaking a carrier rule never reaches the application.
	if _, err := in.Receive(ctx, "org_a", "txn_ffffffffffffffffffffffff", delivery.Raw(msg)); !hasCode(err, reason.StreamMismatch) || calls != 4 {
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
	in := delivery.NewInbox(st, delivery.ReceiverFunc(func(context.Context, string, string, delivery.Message) ([][]byte, error) {
		called = true
		return nil, nil
	}), delivery.InboxOptions{Keys: failingKeys{}})
	_, err := in.Receive(context.Background(), "org_a", txn, delivery.Raw([][]byte{object(t, "evd_1", txn, nil)}))
	if !errors.Is(err, delivery.ErrUnavailable) || called {
		t.Fatalf("%v called=%v", err, called)
	}
}

// TestHeldAskedAgainPromptly: a message the receiver holds for its
// principal's approval is asked again within HeldPoll, however many
// attempts it took; one the receiver did not answer waits out the
// back-off it earned.
func TestHeldAskedAgainPromptly(t *testing.T) {
	st, _ := openStore(t)
	ob, h := newOutbox(t, st, &fakeTransport{}, delivery.OutboxOptions{})
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		cause error
		max   time.Duration
	}{
		{"held", fmt.Errorf("%w: %w", delivery.ErrUnavailable, reason.Refuse("held by the peer", reason.ApprovalRequired)), 5 * time.Second},
		{"away", fmt.Errorf("%w: HTTP 503", delivery.ErrUnavailable), 5 * time.Minute},
	} {
		m := h.enqueue("org_b", "txn_"+c.name+"_0123456789", false, []byte(`{"x":1}`))
		m.Attempts = 20
		ob.Retry(ctx, m, c.cause)
		got, err := st.GetOutbox(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		wait := got.NextAttempt.Sub(ob.Now())
		if wait > c.max || (c.name == "away" && wait < 2*time.Minute) {
			t.Fatalf("%s: asked again in %s", c.name, wait)
		}
	}
}
