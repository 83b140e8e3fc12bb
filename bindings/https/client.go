package https

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
)

// maxPreflightBytes bounds a preflight document.
const maxPreflightBytes = 64 << 10

// checkPreflight GETs peer's capability preflight with the pinned client
// hc and judges it (binding §7.2, §3.2). An unreachable preflight is
// condition 4 and also wraps delivery.ErrUnavailable.
func checkPreflight(ctx context.Context, hc *http.Client, peer instance.PeerInfo, local delivery.Versions) error {
	body, err := peering.FetchDeclaration(ctx, hc, peer.OrganizationID, "preflight", "preflight URL", preflightURL(peer.BaseURL()), maxPreflightBytes)
	if err != nil {
		return err
	}
	doc, err := canonical.Decode(body)
	if err != nil {
		return delivery.Unsupported("condition 2: the preflight of " + peer.OrganizationID + " does not parse: " + err.Error())
	}
	return delivery.JudgePreflight(local, doc)
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Clients reach peers over pinned TLS. Required.
	Clients *peering.Clients
	// Versions is this party's declaration (default delivery.LocalVersions).
	Versions *delivery.Versions
	// CheckTTL is how long a passed preflight is reused (default 5 minutes).
	CheckTTL time.Duration
	// MaxReplyBytes limits a reply body (default MaxBodyBytes).
	MaxReplyBytes int64
	// Logger receives the detail of every failed check and refusal.
	Logger *slog.Logger
}

// Client is the sending side of the plain HTTPS binding; it implements
// delivery.Transport.
type Client struct {
	cfg  ClientConfig
	side peering.CarrierSide
}

var _ delivery.Transport = (*Client)(nil)

// NewClient returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Clients == nil {
		return nil, errors.New("https: ClientConfig needs Clients")
	}
	if cfg.MaxReplyBytes <= 0 {
		cfg.MaxReplyBytes = MaxBodyBytes
	}
	return &Client{cfg: cfg, side: peering.NewCarrierSide(cfg.Clients, cfg.Versions, cfg.CheckTTL, cfg.Logger)}, nil
}

// Deliver sends one message to peer: the preflight check first (nothing
// is sent if it fails), then the POST with the activation header, then
// the echo is checked and the reply fetched from the 202's Location.
func (c *Client) Deliver(ctx context.Context, peer, transactionID string, objects [][]byte) (delivery.Message, error) {
	reached, err := c.side.CheckPeer(ctx, peer, transactionID, instance.PeerInfo.BaseURL, func(ctx context.Context, hc *http.Client, info instance.PeerInfo) (string, error) {
		return "", checkPreflight(ctx, hc, info, c.side.Local)
	})
	if err != nil {
		return delivery.Message{}, err
	}
	hc, base, checkKey, log := reached.Client, reached.Address, reached.Key, reached.Log
	ct, body, err := encodeObjects(objects, false)
	if err != nil {
		return delivery.Message{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+ObjectsPath, bytes.NewReader(body))
	if err != nil {
		return delivery.Message{}, fmt.Errorf("%w: %w", delivery.ErrRejected, err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set(HeaderExtensions, delivery.ExtensionURI)
	if transactionID != "" {
		req.Header.Set(HeaderTransaction, transactionID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return delivery.Message{}, fmt.Errorf("%w: %w", delivery.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if err := c.submissionOutcome(resp); err != nil {
		log.Info("the peer did not accept the submission", "status", resp.StatusCode, "error", err)
		if reason.CodesOf(err) != nil && !activated(resp.Header) {
			c.side.Checks.Forget(checkKey)
		}
		return delivery.Message{}, err
	}
	reply, err := c.fetchReply(ctx, hc, base, resp.Header.Get("Location"))
	if err != nil {
		log.Warn("the reply could not be fetched; the message will be sent again and answered from the peer's inbox", "error", err)
		return delivery.Message{}, err
	}
	if len(reply) == 0 {
		return delivery.Raw(reply), nil
	}
	msg, err := delivery.Check(transactionID, reply)
	if err != nil {
		return delivery.Message{}, fmt.Errorf("%w: the reply of %s: %w", delivery.ErrRejected, peer, err)
	}
	return msg, nil
}

// submissionOutcome maps the answer to a POST to nil (202 with the echo)
// or an error.
func (c *Client) submissionOutcome(resp *http.Response) error {
	codes := func() []reason.Code {
		var b errorBody
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &b) != nil {
			return nil
		}
		var out []reason.Code
		for _, s := range b.ReasonCodes {
			if reason.Registered(reason.Code(s)) {
				out = append(out, reason.Code(s))
			}
		}
		return out
	}
	switch s := resp.StatusCode; {
	case s == http.StatusAccepted:
		if !activated(resp.Header) {
			return delivery.Unsupported("202 without echoing " + delivery.ExtensionURI + " in " + HeaderExtensions)
		}
		return nil
	case s == http.StatusPreconditionFailed:
		return delivery.Unsupported("the peer answered 412")
	case s == http.StatusConflict:
		return fmt.Errorf("%w: reported by the peer", delivery.ErrConflict)
	case s == http.StatusBadRequest:
		return reason.Refuse("refused by the peer", codes()...)
	case s == http.StatusOK || s == http.StatusCreated:
		// Binding §7.4: a submission is never answered 200 or 201.
		return fmt.Errorf("%w: the peer answered %d to a submission, which the binding forbids", delivery.ErrRejected, s)
	case s == http.StatusServiceUnavailable:
		// Possibly held, with the codes saying why: asked again.
		if cs := codes(); len(cs) > 0 {
			return fmt.Errorf("%w: HTTP %d: %w", delivery.ErrUnavailable, s, reason.Refuse("held by the peer", cs...))
		}
		return fmt.Errorf("%w: HTTP %d", delivery.ErrUnavailable, s)
	case s == http.StatusTooManyRequests || s >= 500:
		return fmt.Errorf("%w: HTTP %d", delivery.ErrUnavailable, s)
	default:
		return fmt.Errorf("%w: HTTP %d", delivery.ErrRejected, s)
	}
}

// fetchReply GETs the reply a 202's Location names, which must be a reply
// path on the same peer.
func (c *Client) fetchReply(ctx context.Context, hc *http.Client, base, location string) ([][]byte, error) {
	if !strings.HasPrefix(location, RepliesPath) || strings.ContainsAny(location, "?#") {
		return nil, fmt.Errorf("%w: 202 Location %q is not a reply path", delivery.ErrRejected, location)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+location, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", delivery.ErrRejected, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: fetching the reply: %w", delivery.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The message was received; fetching again after a resend is the
		// way to its reply.
		return nil, fmt.Errorf("%w: fetching the reply: HTTP %d", delivery.ErrUnavailable, resp.StatusCode)
	}
	lr := &limitReader{r: resp.Body, n: c.cfg.MaxReplyBytes}
	objects, err := decodeObjects(resp.Header.Get("Content-Type"), lr)
	if lr.exceeded {
		return nil, fmt.Errorf("%w: reply over %d bytes", delivery.ErrRejected, c.cfg.MaxReplyBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reply: %w", delivery.ErrRejected, err)
	}
	return objects, nil
}
