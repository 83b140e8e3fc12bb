package a2a

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
)

// MaxResponseBytes is the default limit on a JSON-RPC response body.
const MaxResponseBytes = 8 << 20

// ClientConfig configures a Client.
type ClientConfig struct {
	// Clients reach peers over pinned TLS. Required.
	Clients *peering.Clients
	// Versions is this party's declaration (default delivery.LocalVersions).
	Versions *delivery.Versions
	// CheckTTL is how long a passed check of a peer's card is reused
	// (default 5 minutes).
	CheckTTL time.Duration
	// MaxResponseBytes limits a response body (default MaxResponseBytes).
	MaxResponseBytes int64
	// Logger receives the detail of every failed check and refusal.
	Logger *slog.Logger
}

// Client is the sending side of the binding; it implements
// delivery.Transport.
type Client struct {
	cfg  ClientConfig
	side peering.CarrierSide
}

var _ delivery.Transport = (*Client)(nil)

// NewClient returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Clients == nil {
		return nil, errors.New("a2a: ClientConfig needs Clients")
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = MaxResponseBytes
	}
	return &Client{cfg: cfg, side: peering.NewCarrierSide(cfg.Clients, cfg.Versions, cfg.CheckTTL, cfg.Logger)}, nil
}

// Deliver sends one message to peer: the capability check on its card
// first (nothing is sent if it fails), then message/send with the
// extension activated, then the echo and the reply are checked. The reply
// objects are returned as received, after delivery.CheckMessage.
func (c *Client) Deliver(ctx context.Context, peer, transactionID string, objects [][]byte) (delivery.Message, error) {
	cardURL := func(info instance.PeerInfo) string { return info.AgentCardURL }
	reached, err := c.side.CheckPeer(ctx, peer, transactionID, cardURL, func(ctx context.Context, hc *http.Client, info instance.PeerInfo) (string, error) {
		return checkCard(ctx, hc, info, c.side.Local)
	})
	if err != nil {
		return delivery.Message{}, err
	}
	hc, endpoint, checkKey, log := reached.Client, reached.Endpoint, reached.Key, reached.Log

	// message/send as a2a-go's JSON-RPC client sends it, written and its
	// answer read in one pass (fast.go).
	ex := &exchange{limit: c.cfg.MaxResponseBytes}
	activated := &http.Client{
		Transport:     activation{base: hc.Transport},
		CheckRedirect: hc.CheckRedirect,
		Timeout:       hc.Timeout,
	}
	var sendErr error
	rpcID := a2a.NewMessageID()
	req, err := http.NewRequestWithContext(context.WithValue(ctx, exchangeKey{}, ex), http.MethodPost, endpoint, bytes.NewReader(encodeSendID(transactionID, objects, rpcID)))
	if err != nil {
		return delivery.Message{}, fmt.Errorf("%w: %w", delivery.ErrRejected, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := activated.Do(req); err != nil {
		sendErr = err
	} else {
		resp.Body.Close()
	}
	var reply [][]byte
	if ex.responded && ex.status == http.StatusOK && !ex.tooBig && ex.echoed {
		var rpcErr *rpcError
		rpcErr, reply, err = readResult(ex.body, transactionID, rpcID)
		switch {
		case rpcErr != nil:
			ex.rpcErr = rpcErr
		case err != nil:
			log.Warn("the peer's reply is malformed", "error", err)
			var refusal *reason.Refusal
			if errors.As(err, &refusal) {
				return delivery.Message{}, err
			}
			return delivery.Message{}, fmt.Errorf("%w: the reply of %s: %w", delivery.ErrRejected, peer, err)
		}
	}

	// The outcome is read from what the RoundTripper saw, in this order:
	// no response at all; a carrier-level failure (an HTTP status other
	// than 200: the request was turned away before activation could be
	// judged); a response without the echo (non-activation, binding
	// §2.3: silence is not acceptance); the error the peer sent; the
	// reply.
	if !ex.responded {
		return delivery.Message{}, fmt.Errorf("%w: %w", delivery.ErrUnavailable, sendErr)
	}
	if ex.status != http.StatusOK || ex.tooBig {
		err := ex.failure()
		log.Info("the peer turned the request away", "error", err)
		return delivery.Message{}, err
	}
	if !ex.echoed {
		c.side.Checks.Forget(checkKey)
		err := delivery.Unsupported(fmt.Sprintf("%s answered HTTP %d without echoing the activation of %s", peer, ex.status, delivery.ExtensionURI))
		log.Warn("the peer did not activate the extension", "code", reason.ExtensionUnsupported, "detail", err)
		return delivery.Message{}, err
	}
	if err := ex.failure(); err != nil {
		log.Info("the peer refused the message", "error", err)
		return delivery.Message{}, err
	}
	if sendErr != nil {
		return delivery.Message{}, fmt.Errorf("%w: %w", delivery.ErrUnavailable, sendErr)
	}
	if len(reply) == 0 {
		return delivery.Raw([][]byte{}), nil
	}
	return delivery.Check(transactionID, reply)
}

// readReply returns the objects of a reply and checks them as received.
// A Task's state is carrier bookkeeping and is not read (binding §6.2).
func readReply(result a2a.SendMessageResult, txn string) ([][]byte, error) {
	var messages []*a2a.Message
	var loose []a2a.Part
	switch r := result.(type) {
	case *a2a.Message:
		messages = append(messages, r)
	case *a2a.Task:
		for _, art := range r.Artifacts {
			if art != nil {
				loose = append(loose, art.Parts...)
			}
		}
	default:
		return nil, fmt.Errorf("result of type %T", result)
	}
	var objects [][]byte
	for _, m := range messages {
		t, objs, err := readMessage(m)
		if err != nil {
			return nil, err
		}
		if t != txn {
			return nil, reason.Refusef(reason.StreamMismatch, "reply correlated to %q, the message to %q", t, txn)
		}
		objects = append(objects, objs...)
	}
	if len(loose) > 0 {
		_, objs, err := readMessage(&a2a.Message{Parts: loose})
		if err != nil {
			return nil, err
		}
		objects = append(objects, objs...)
	}
	if len(objects) == 0 {
		return [][]byte{}, nil
	}
	if err := delivery.CheckMessage(txn, objects); err != nil {
		return nil, err
	}
	return objects, nil
}

type exchangeKey struct{}

// exchange is what the activation RoundTripper saw of one request's
// response.
type exchange struct {
	limit     int64
	responded bool
	status    int
	echoed    bool
	rpcErr    *rpcError
	tooBig    bool
	// body is the response body, which the caller reads, the error and
	// the result in one pass (readResult).
	body []byte
}

// failure maps the response to an error, or nil when it carried a result.
func (e *exchange) failure() error {
	switch {
	case e.tooBig:
		return fmt.Errorf("%w: response over %d bytes", delivery.ErrRejected, e.limit)
	case e.status == http.StatusTooManyRequests || e.status >= 500:
		return fmt.Errorf("%w: HTTP %d", delivery.ErrUnavailable, e.status)
	case e.status != http.StatusOK:
		return fmt.Errorf("%w: HTTP %d", delivery.ErrRejected, e.status)
	case e.rpcErr == nil:
		return nil
	}
	data := e.rpcErr.Data
	if conflict, _ := data["a202_conflict"].(bool); conflict {
		return fmt.Errorf("%w: reported by the peer", delivery.ErrConflict)
	}
	if list, ok := data["a202_reason_codes"].([]any); ok {
		var codes []reason.Code
		for _, v := range list {
			s, _ := v.(string)
			if !reason.Registered(reason.Code(s)) {
				// An unregistered code is never passed on as one.
				return fmt.Errorf("%w: the peer refused with unregistered code %q", delivery.ErrRejected, s)
			}
			codes = append(codes, reason.Code(s))
		}
		if retry, _ := data["a202_retry"].(bool); retry {
			// Held, not refused: the message is asked again.
			return fmt.Errorf("%w: %w", delivery.ErrUnavailable, reason.Refuse("held by the peer", codes...))
		}
		return reason.Refuse("refused by the peer", codes...)
	}
	if e.rpcErr.Code == -32603 || e.rpcErr.Code == -32000 {
		return fmt.Errorf("%w: JSON-RPC error %d", delivery.ErrUnavailable, e.rpcErr.Code)
	}
	return fmt.Errorf("%w: JSON-RPC error %d %s", delivery.ErrRejected, e.rpcErr.Code, e.rpcErr.Message)
}

// activation is the client-side half of binding §2.3: it names the
// extension under both header names on every request and records, for
// the request's exchange, whether the response echoed it, its status and
// any JSON-RPC error it carried.
type activation struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (a activation) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(HeaderExtensions, delivery.ExtensionURI)
	r.Header.Set(HeaderXExtensions, delivery.ExtensionURI)
	resp, err := a.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	ex, ok := r.Context().Value(exchangeKey{}).(*exchange)
	if !ok {
		return resp, nil
	}
	ex.responded = true
	ex.status = resp.StatusCode
	ex.echoed = requested(resp.Header)
	body, err := io.ReadAll(io.LimitReader(resp.Body, ex.limit+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > ex.limit {
		ex.tooBig = true
		body = nil
	}
	ex.body = body
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}
