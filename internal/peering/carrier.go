package peering

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/reason"
)

// CarrierSide is what each side of each carrier binding (A2A and plain
// HTTPS, sending and receiving) keeps for checking a peer's declaration
// before a message travels: the pinned clients, this party's own
// declaration, the passed checks it reuses, and its logger. The two
// bindings read the declaration from different documents (AgentCard,
// preflight); the rest is the same and is here once.
type CarrierSide struct {
	Clients *Clients
	Local   delivery.Versions
	Checks  *delivery.CapabilityCache
	Log     *slog.Logger
}

// defaultCheckTTL is how long a passed capability check is reused when a
// binding's configuration does not say.
const defaultCheckTTL = 5 * time.Minute

// NewCarrierSide applies the defaults the bindings' configurations
// document: versions nil is delivery.LocalVersions, a checkTTL not above
// zero is five minutes, and a nil logger discards.
func NewCarrierSide(clients *Clients, versions *delivery.Versions, checkTTL time.Duration, logger *slog.Logger) CarrierSide {
	if checkTTL <= 0 {
		checkTTL = defaultCheckTTL
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	local := delivery.LocalVersions
	if versions != nil {
		local = *versions
	}
	return CarrierSide{Clients: clients, Local: local, Checks: delivery.NewCapabilityCache(checkTTL), Log: logger}
}

// CheckSender runs check on the declaration of org, the sender of a
// request, through the pinned client to it; a pass is reused under key
// (org and the address its declaration is read from). A sender this
// instance cannot reach over pinned TLS fails condition 4.
func (c CarrierSide) CheckSender(ctx context.Context, org, key string, check func(context.Context, *http.Client, instance.PeerInfo) (string, error)) error {
	_, err := c.Checks.Check(ctx, key, func(ctx context.Context) (string, error) {
		hc, p, err := c.Clients.For(org)
		if err != nil {
			return "", delivery.Unsupported("condition 4: " + err.Error())
		}
		return check(ctx, hc, p)
	})
	return err
}

// Reached is a peer whose declaration passed the check of the sending
// side (CheckPeer): a message may now be sent to it.
type Reached struct {
	// Client is the pinned client to the peer, and Info what it pins.
	Client *http.Client
	Info   instance.PeerInfo
	// Address is where the declaration was read from (the AgentCard's
	// URL, the HTTPS base URL); Endpoint is what the check returned.
	Address, Endpoint string
	// Key is what the pass is reused under: forget it when the peer turns
	// out not to activate the extension after all.
	Key string
	// Log is the side's logger, with the peer and the transaction.
	Log *slog.Logger
}

// CheckPeer is how each binding's sending side starts a delivery to peer:
// the pinned client to it (a peer it cannot reach that way is
// delivery.ErrRejected), then check on its declaration, read from
// address(info), a pass reused under peer and that address. A failed
// check is logged and returned, and nothing may be sent.
func (c CarrierSide) CheckPeer(ctx context.Context, peer, transactionID string, address func(instance.PeerInfo) string, check func(context.Context, *http.Client, instance.PeerInfo) (string, error)) (Reached, error) {
	hc, info, err := c.Clients.For(peer)
	if err != nil {
		return Reached{}, fmt.Errorf("%w: %w", delivery.ErrRejected, err)
	}
	r := Reached{Client: hc, Info: info, Address: address(info)}
	r.Log = c.Log.With("peer", peer, "transaction_id", transactionID)
	r.Key = peer + "\x00" + r.Address
	r.Endpoint, err = c.Checks.Check(ctx, r.Key, func(ctx context.Context) (string, error) {
		return check(ctx, hc, info)
	})
	if err != nil {
		r.Log.Warn("capability check failed; nothing was sent", "code", reason.ExtensionUnsupported, "detail", err)
		return Reached{}, err
	}
	return r, nil
}

// FetchDeclaration GETs, with the pinned client hc, the document from
// which org's declaration is read (its AgentCard, its preflight) at u,
// which org's setting field gave; doc names the document in every
// failure. All of them are condition 4 of binding §3.2: a u that makes no
// request, and a document over limit bytes, are delivery.Unsupported; one
// that cannot be retrieved is delivery.Unreachable, which the outbox
// retries. What the document declares is for the binding to judge.
func FetchDeclaration(ctx context.Context, hc *http.Client, org, doc, field, u string, limit int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, delivery.Unsupported("condition 4: " + field + " " + u + ": " + err.Error())
	}
	req.Header.Set("Accept", "application/json")
	unretrievable := "condition 4: the " + doc + " of " + org + " cannot be retrieved"
	resp, err := hc.Do(req)
	if err != nil {
		return nil, delivery.Unreachable(unretrievable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, delivery.Unreachable(unretrievable, fmt.Errorf("HTTP %s", resp.Status))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, delivery.Unreachable(unretrievable, err)
	}
	if len(body) > limit {
		return nil, delivery.Unsupported(fmt.Sprintf("condition 4: the %s of %s is over %d bytes", doc, org, limit))
	}
	return body, nil
}
