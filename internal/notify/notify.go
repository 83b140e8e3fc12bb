// Package notify tells an organisation's principal, at a URL of its
// choosing, what needs a person or what has ended: an approval request an
// agent made, a transaction that reached a final state (completed,
// cancelled, expired, terminated), an obligation fallen due or overdue,
// and a counterparty that has not answered for long, or answers again. It
// is optional (config.json principal_webhook: url, secret_file, and
// ca_file for an endpoint whose certificate a private CA issued) and
// never in the way of an act.
//
// # The contract
//
// Each notice is POST <url>, HTTPS only, signed the way the webhook rail's
// submissions are (package rails):
//
//	Content-Type: application/json
//	Idempotency-Key: <notice_id>  (the same on every attempt of one notice)
//	X-Party-Timestamp: <unix seconds>
//	X-Party-Signature: sha256=<hex HMAC-SHA256 over "<timestamp>.<body>"
//	                   under the shared secret in secret_file>
//
// and the body
//
//	{"party_notice": "0.1", "notice_id": "ntc_...", "kind": "approval.requested",
//	 "organization_id": "org_...", "sent_at": "...",
//	 "approval_request_id": "req_...", "mandate_id": "mnd_...",
//	 "transaction_id": "txn_..." | omitted, "action_type": "offer.accept",
//	 "action_hash": "...", "counterparty_organization_id": "org_...",
//	 "total": {"currency": "EUR", "amount": "3200.00"} | omitted, "requested_at": "..."}
//
//	{"party_notice": "0.1", "notice_id": "ntc_...", "kind": "transaction.final",
//	 "organization_id": "org_...", "sent_at": "...",
//	 "transaction_id": "txn_...", "state": "completed"}
//
//	{"party_notice": "0.1", "notice_id": "ntc_...", "kind": "obligation.due" | "obligation.overdue",
//	 "organization_id": "org_...", "sent_at": "...", "transaction_id": "txn_...",
//	 "obligation_id": "obl_...", "counterparty_organization_id": "org_...",
//	 "due_at": "..."}
//
//	{"party_notice": "0.1", "notice_id": "ntc_...", "kind": "peer.unreachable" | "peer.reachable",
//	 "organization_id": "org_...", "sent_at": "...",
//	 "counterparty_organization_id": "org_...", "unreachable_since": "...",
//	 "messages_waiting": 2 (peer.unreachable only)}
//
// An obligation is due once its due condition is met, and overdue once it
// has been due, unperformed, for deadlines.overdue_after_seconds (a day
// by default); a counterparty is unreachable once it has left messages
// unanswered for deadlines.peer_unreachable_after_seconds (fifteen
// minutes by default), and reachable again when it next answers (record
// engine, timing.go). Each is told once.
//
// A notice says what happened and where to look; it is not the record and
// carries no signed object. The receiver verifies the signature and the
// timestamp (refusing one more than five minutes off), deduplicates by
// Idempotency-Key, and answers any 2xx.
//
// # Delivery
//
// Best effort, decided for this issue (docs/record-protocol.md): a notice
// is queued in memory when the act that causes it has committed, and a
// worker posts it, retrying a failed attempt (a non-2xx answer, a timeout,
// a broken connection) with back-off, at most Attempts times, then logs
// that it gave up. The act never waits for the webhook: queuing does not
// block (a full queue drops the notice, logged), and nothing of the act
// depends on the answer. A notice queued but not yet delivered when the
// process stops is lost; the approvals page and the transaction pages
// remain the source of truth, and a restarted instance does not resend.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
)

// Version is the contract version each notice states.
const Version = "0.1"

// Notice kinds. The alert kinds are the record engine's (record.Alert).
const (
	KindApprovalRequested = "approval.requested"
	KindTransactionFinal  = "transaction.final"
	KindObligationDue     = record.AlertObligationDue
	KindObligationOverdue = record.AlertObligationOverdue
	KindPeerUnreachable   = record.AlertPeerUnreachable
	KindPeerReachable     = record.AlertPeerReachable
)

// Options tune delivery; zero values take the defaults.
type Options struct {
	// Client posts the notices (default: a client with the configured
	// timeout).
	Client *http.Client
	// Attempts is how many times one notice is tried (default 6).
	Attempts int
	// Backoff is the wait after the first failed attempt, doubling after
	// each (default 2 s).
	Backoff time.Duration
	// Queue is how many notices may wait (default 256).
	Queue int
	// Clock reads the time (default time.Now).
	Clock  func() time.Time
	Logger *slog.Logger
}

// Webhook is the principal's webhook.
type Webhook struct {
	url    string
	secret []byte
	org    string
	opt    Options
	queue  chan notice

	mu    sync.Mutex
	final map[string]bool // transactions whose final state was queued
}

type notice struct {
	id   string
	body []byte
}

// Open returns the principal's webhook of the instance in dir, or nil when
// its configuration names none.
func Open(dir string, cfg instance.Config, opt Options) (*Webhook, error) {
	w := cfg.PrincipalWebhook
	if w == nil {
		return nil, nil
	}
	if w.SecretFile == "" {
		return nil, errors.New("notify: principal_webhook names no secret_file")
	}
	_, secret, err := readConfigured(dir, w.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("notify: principal_webhook secret: %w", err)
	}
	if opt.Client == nil {
		timeout := time.Duration(w.TimeoutSeconds) * time.Second
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		opt.Client = &http.Client{Timeout: timeout}
		if w.CAFile != "" {
			ca, pem, err := readConfigured(dir, w.CAFile)
			if err != nil {
				return nil, fmt.Errorf("notify: principal_webhook ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("notify: principal_webhook ca_file %s holds no PEM certificate", ca)
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			opt.Client.Transport = tr
		}
	}
	return New(w.URL, bytes.TrimSpace(secret), cfg.OrganizationID, opt)
}

// readConfigured reads a file the configuration names, at path (where
// it was read from); a relative name is relative to the state directory
// dir, for the secret and the CA file alike.
func readConfigured(dir, name string) (path string, data []byte, err error) {
	path = name
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, filepath.FromSlash(path))
	}
	data, err = os.ReadFile(path)
	return path, data, err
}

// New returns a webhook posting to rawURL, an https:// URL, signing with
// secret, for organisation org.
func New(rawURL string, secret []byte, org string, opt Options) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("notify: principal_webhook url %q is not an https:// URL", rawURL)
	}
	if len(secret) == 0 {
		return nil, errors.New("notify: the principal_webhook secret is empty")
	}
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opt.Attempts <= 0 {
		opt.Attempts = 6
	}
	if opt.Backoff <= 0 {
		opt.Backoff = 2 * time.Second
	}
	if opt.Queue <= 0 {
		opt.Queue = 256
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Webhook{url: rawURL, secret: secret, org: org, opt: opt, queue: make(chan notice, opt.Queue), final: map[string]bool{}}, nil
}

// ApprovalRequested queues the notice of an agent's approval request. It
// never blocks.
func (w *Webhook) ApprovalRequested(r store.ApprovalRequest) {
	m := map[string]any{
		"kind": KindApprovalRequested, "approval_request_id": r.ID, "mandate_id": r.MandateID,
		"action_hash": r.ActionHash, "requested_at": r.RequestedAt,
	}
	if r.TransactionID != "" {
		m["transaction_id"] = r.TransactionID
	}
	var act map[string]any
	if json.Unmarshal(r.Act, &act) == nil {
		m["action_type"] = act["action_type"]
		if c, ok := act["counterparty_organization_id"]; ok {
			m["counterparty_organization_id"] = c
		}
		terms, _ := act["proposed_terms"].(map[string]any)
		core, _ := terms["core"].(map[string]any)
		if t, ok := core["total"]; ok {
			m["total"] = t
		}
	}
	w.enqueue(m)
}

// Changed is a record.Engine subscriber: it queues the notice of a
// transaction that reached a final state, once per transaction and
// process. It never blocks.
func (w *Webhook) Changed(c record.Change) {
	if !protocol.State(c.State).Terminal() {
		return
	}
	w.mu.Lock()
	seen := w.final[c.TransactionID]
	w.final[c.TransactionID] = true
	w.mu.Unlock()
	if seen {
		return
	}
	w.enqueue(map[string]any{"kind": KindTransactionFinal, "transaction_id": c.TransactionID, "state": c.State})
}

// Alerted is a record.Engine alert subscriber: it queues the notice of an
// obligation fallen due or overdue, or of a counterparty unreachable or
// back (the engine raises each once). It never blocks.
func (w *Webhook) Alerted(a record.Alert) {
	m := map[string]any{"kind": a.Kind, "counterparty_organization_id": a.Counterparty}
	switch a.Kind {
	case record.AlertObligationDue, record.AlertObligationOverdue:
		m["transaction_id"], m["obligation_id"], m["due_at"] = a.TransactionID, a.ObligationID, envelope.Timestamp(a.At)
	case record.AlertPeerUnreachable:
		m["unreachable_since"], m["messages_waiting"] = envelope.Timestamp(a.At), a.Waiting
	case record.AlertPeerReachable:
		m["unreachable_since"] = envelope.Timestamp(a.At)
	default:
		return
	}
	w.enqueue(m)
}

func (w *Webhook) enqueue(m map[string]any) {
	// Not an A202 object: its id is the delivery's, in the same shape.
	var raw [12]byte
	if _, err := rand.Read(raw[:]); err != nil {
		w.opt.Logger.Warn("notify: no notice id", "error", err)
		return
	}
	id := "ntc_" + hex.EncodeToString(raw[:])
	m["party_notice"] = Version
	m["notice_id"] = id
	m["organization_id"] = w.org
	m["sent_at"] = envelope.Timestamp(w.opt.Clock())
	body, err := json.Marshal(m)
	if err != nil {
		w.opt.Logger.Warn("notify: encoding a notice", "error", err)
		return
	}
	select {
	case w.queue <- notice{id: id, body: body}:
	default:
		w.opt.Logger.Warn("notify: the webhook queue is full; notice dropped", "notice_id", id, "kind", m["kind"])
	}
}

// Run delivers queued notices until ctx ends.
func (w *Webhook) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-w.queue:
			w.deliver(ctx, n)
		}
	}
}

// deliver posts one notice, retrying with back-off.
func (w *Webhook) deliver(ctx context.Context, n notice) {
	wait := w.opt.Backoff
	for attempt := 1; ; attempt++ {
		err := w.post(ctx, n)
		if err == nil {
			w.opt.Logger.Info("notify: principal notified", "notice_id", n.id, "attempt", attempt)
			return
		}
		if attempt >= w.opt.Attempts || ctx.Err() != nil {
			w.opt.Logger.Warn("notify: giving up on a notice", "notice_id", n.id, "attempts", attempt, "error", err)
			return
		}
		w.opt.Logger.Info("notify: delivery failed; retrying", "notice_id", n.id, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// Sign returns the X-Party-Signature value for body sent at ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (w *Webhook) post(ctx context.Context, n notice) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(n.body))
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(w.opt.Clock().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.id)
	req.Header.Set("X-Party-Timestamp", ts)
	req.Header.Set("X-Party-Signature", Sign(w.secret, ts, n.body))
	resp, err := w.opt.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("notify: %s answered %s", strings.TrimSuffix(w.url, "/"), resp.Status)
	}
	return nil
}
