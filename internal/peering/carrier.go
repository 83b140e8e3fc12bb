package peering

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
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
