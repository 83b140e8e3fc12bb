package rails

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The webhook rail's contract: how an instance hands a settlement
// instruction to the organisation's own payment system, and what it must
// answer.
//
// Submission. POST <url>, HTTPS only, with
//
//	Content-Type: application/json
//	Idempotency-Key: <the instruction's idempotency_key>
//	X-Party-Timestamp: <unix seconds>
//	X-Party-Signature: sha256=<hex HMAC-SHA256 over "<timestamp>.<body>"
//	                   under the shared secret in secret_file>
//
// and the body
//
//	{"a202_settlement": "0.1", "settlement_instruction_id": "stl_...",
//	 "idempotency_key": "...", "transaction_id": "txn_...",
//	 "obligation_id": "obl_...", "amount": {"currency": "EUR", "amount": "3200.00"},
//	 "payer_organization_id": "org_...", "payee_organization_id": "org_...",
//	 "attempt": 1, "instruction": "<base64 of the signed instruction's canonical bytes>"}
//
// The endpoint verifies the signature and the timestamp (we send the time
// of sending; a receiver should refuse one more than five minutes off),
// may verify the signed instruction itself, and answers 200 with
//
//	{"status": "succeeded" | "failed" | "pending" | "reversed" (status only),
//	 "external_reference": "..." | null, "error_code": "..." | null}
//
// The same Idempotency-Key must always get the same answer and move money
// at most once; the same key for another instruction must be refused (409).
//
// Status. GET <url>/<idempotency_key>, signed the same way over an empty
// body, answers the same shape: what became of an instruction answered
// pending, or of one answered succeeded, which may since have been
// reversed ("status": "reversed": a chargeback, a recall). The instance
// asks about a payment it was told succeeded now and then until its
// transaction completes, so that a reversal reaches the record while
// something can still be done about it.
//
// Failures. A 4xx answer (other than 408 and 429) is the rail's refusal of
// the instruction and becomes a failed receipt (error_code
// "http_<status>"); a 5xx, 408, 429, a timeout or a broken connection
// tells nothing of what the rail did, so the same key is submitted again
// later (ErrUnreachable), with back-off. The answer is read up to 64 KiB.

// WebhookSpecVersion is the contract version the webhook rail states on
// its receipts.
const WebhookSpecVersion = "party-webhook/0.1"

// Webhook is a rail that posts instructions to an HTTPS endpoint.
type Webhook struct {
	id      string
	url     string
	secret  []byte
	client  *http.Client
	timeout time.Duration
	clock   func() time.Time
}

// NewWebhook returns the webhook rail id posting to rawURL, signing with
// secret. client may be nil (http.DefaultClient's transport); timeout 0
// means 10 seconds.
func NewWebhook(id, rawURL string, secret []byte, client *http.Client, timeout time.Duration, clock func() time.Time) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("rails: webhook %s: %q is not an https:// URL", id, rawURL)
	}
	if len(secret) < 16 {
		return nil, fmt.Errorf("rails: webhook %s: the shared secret is shorter than 16 bytes", id)
	}
	if client == nil {
		client = &http.Client{}
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if clock == nil {
		clock = time.Now
	}
	return &Webhook{id: id, url: rawURL, secret: secret, client: client, timeout: timeout, clock: clock}, nil
}

// ID implements Rail.
func (w *Webhook) ID() string { return w.id }

type webhookRequest struct {
	Version        string            `json:"a202_settlement"`
	InstructionID  string            `json:"settlement_instruction_id"`
	IdempotencyKey string            `json:"idempotency_key"`
	TransactionID  string            `json:"transaction_id"`
	ObligationID   string            `json:"obligation_id"`
	Amount         map[string]string `json:"amount"`
	Payer          string            `json:"payer_organization_id"`
	Payee          string            `json:"payee_organization_id"`
	Attempt        int               `json:"attempt"`
	Instruction    []byte            `json:"instruction"`
}

type webhookAnswer struct {
	Status            Status  `json:"status"`
	ExternalReference *string `json:"external_reference"`
	ErrorCode         *string `json:"error_code"`
}

// Sign returns the X-Party-Signature value for a body sent at ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Submit implements Rail.
func (w *Webhook) Submit(ctx context.Context, in Instruction) (Result, error) {
	body, err := json.Marshal(webhookRequest{
		Version: "0.1", InstructionID: in.InstructionID, IdempotencyKey: in.IdempotencyKey, TransactionID: in.TransactionID,
		ObligationID: in.ObligationID, Amount: map[string]string{"currency": in.Currency, "amount": in.Amount},
		Payer: in.Payer, Payee: in.Payee, Attempt: in.Attempt, Instruction: in.Body,
	})
	if err != nil {
		return Result{}, err
	}
	return w.do(ctx, http.MethodPost, w.url, body, in.IdempotencyKey)
}

// Status implements Rail.
func (w *Webhook) Status(ctx context.Context, in Instruction) (Result, error) {
	u, err := url.JoinPath(w.url, url.PathEscape(in.IdempotencyKey))
	if err != nil {
		return Result{}, err
	}
	return w.do(ctx, http.MethodGet, u, nil, in.IdempotencyKey)
}

func (w *Webhook) do(ctx context.Context, method, u string, body []byte, key string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	ts := strconv.FormatInt(w.clock().Unix(), 10)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Party-Timestamp", ts)
	req.Header.Set("X-Party-Signature", Sign(w.secret, ts, body))
	resp, err := w.client.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s: %v", ErrUnreachable, w.id, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s: %v", ErrUnreachable, w.id, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return Result{}, fmt.Errorf("%w: %s answered %s", ErrUnreachable, w.id, resp.Status)
	case resp.StatusCode == http.StatusConflict:
		return Result{}, ErrKeyReused
	default:
		code := "http_" + strconv.Itoa(resp.StatusCode)
		return Result{Status: Failed, ErrorCode: code, CompletedAt: w.clock().UTC().Truncate(time.Second), SpecVersion: WebhookSpecVersion}, nil
	}
	var a webhookAnswer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Result{}, fmt.Errorf("%w: %s answered a body that is not the contract's: %v", ErrUnreachable, w.id, err)
	}
	r := Result{Status: a.Status, SpecVersion: WebhookSpecVersion}
	switch a.Status {
	case Succeeded, Failed, Reversed:
		r.CompletedAt = w.clock().UTC().Truncate(time.Second)
	case Pending:
	default:
		return Result{}, fmt.Errorf("%w: %s answered status %q", ErrUnreachable, w.id, a.Status)
	}
	if a.ExternalReference != nil {
		r.ExternalReference = *a.ExternalReference
	}
	if a.ErrorCode != nil {
		r.ErrorCode = *a.ErrorCode
	}
	return r, nil
}

// Open builds the rails of cfgs. dir is the state directory (the sandbox
// ledger, webhook secrets and CA bundles are paths under it).
func Open(dir string, cfgs []Config, clock func() time.Time) (*Registry, error) {
	reg := &Registry{rails: map[string]Rail{}}
	for _, c := range cfgs {
		var r Rail
		var err error
		switch c.Kind {
		case "sandbox":
			r, err = NewSandbox(c.ID, c.Outcomes, joinUnder(dir, "rails", c.ID+".json"), clock)
		case "webhook":
			var secret []byte
			var client *http.Client
			if secret, err = readSecret(dir, c.SecretFile); err == nil {
				if client, err = webhookClient(dir, c.ID, c.CAFile); err == nil {
					r, err = NewWebhook(c.ID, c.URL, secret, client, time.Duration(c.TimeoutSeconds)*time.Second, clock)
				}
			}
		default:
			err = fmt.Errorf("rails: rail %s has kind %q; kinds are sandbox and webhook", c.ID, c.Kind)
		}
		if err != nil {
			return nil, err
		}
		if err := reg.Add(r); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func joinUnder(dir string, parts ...string) string {
	p := dir
	for _, x := range parts {
		p += "/" + x
	}
	return p
}

// statePath is file under the state directory dir, unless absolute.
func statePath(dir, file string) string {
	if file[0] == '/' {
		return file
	}
	return joinUnder(dir, file)
}

func readSecret(dir, file string) ([]byte, error) {
	if file == "" {
		return nil, errors.New("rails: a webhook rail names its secret_file")
	}
	b, err := readFile(statePath(dir, file))
	if err != nil {
		return nil, fmt.Errorf("rails: webhook secret: %w", err)
	}
	return bytes.TrimSpace(b), nil
}

// webhookClient is the HTTP client of webhook rail id: nil (the system
// roots) without caFile; else one that trusts only the roots caFile holds,
// so a payment system behind a private CA is reached, and nothing else is
// trusted for it.
func webhookClient(dir, id, caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	path := statePath(dir, caFile)
	b, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("rails: webhook %s: ca_file: %w", id, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("rails: webhook %s: ca_file %s holds no PEM certificate", id, path)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
