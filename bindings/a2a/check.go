package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
)

// maxCardBytes bounds a fetched AgentCard.
const maxCardBytes = 1 << 20

// checkCard fetches peer's AgentCard with the pinned client hc and runs
// the capability check of binding §3.2 on it. It returns the JSON-RPC
// endpoint the card names. Every failure is A202-EXTENSION-UNSUPPORTED;
// an unretrievable card (condition 4) also wraps delivery.ErrUnavailable.
func checkCard(ctx context.Context, hc *http.Client, peer instance.PeerInfo, local delivery.Versions) (string, error) {
	body, err := peering.FetchDeclaration(ctx, hc, peer.OrganizationID, "AgentCard", "agent_card_url", peer.AgentCardURL, maxCardBytes)
	if err != nil {
		return "", err
	}
	// Strict decoding first (a duplicated member would let two readers see
	// two declarations), then the SDK's own type, so a card this check
	// passes is one any a2a-go client reads too.
	raw, err := canonical.DecodeWith(body, canonical.Options{AllowFloats: true})
	if err != nil {
		return "", delivery.Unsupported("condition 4: the AgentCard of " + peer.OrganizationID + " does not parse: " + err.Error())
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return "", delivery.Unsupported("condition 4: the AgentCard of " + peer.OrganizationID + " is not an A2A AgentCard: " + err.Error())
	}
	top, _ := raw.(map[string]any)
	caps, _ := top["capabilities"].(map[string]any)
	if caps == nil {
		// A card without capabilities declares no extension (condition
		// 1); nil would read to the gate as an unretrievable card.
		caps = map[string]any{}
	}
	if err := delivery.JudgeDeclaration(local, caps); err != nil {
		return "", err
	}
	endpoint, err := jsonrpcEndpoint(&card)
	if err != nil {
		return "", delivery.Unsupported("the AgentCard of " + peer.OrganizationID + ": " + err.Error())
	}
	return endpoint, nil
}

// jsonrpcEndpoint returns the https JSON-RPC interface a card names.
func jsonrpcEndpoint(card *a2a.AgentCard) (string, error) {
	candidates := []a2a.AgentInterface{{Transport: card.PreferredTransport, URL: card.URL}}
	if card.PreferredTransport == "" {
		// A2A's default preferred transport is JSON-RPC.
		candidates[0].Transport = a2a.TransportProtocolJSONRPC
	}
	candidates = append(candidates, card.AdditionalInterfaces...)
	for _, c := range candidates {
		if c.Transport != a2a.TransportProtocolJSONRPC {
			continue
		}
		u, err := url.Parse(c.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return "", fmt.Errorf("JSON-RPC interface %q is not an https URL", c.URL)
		}
		return c.URL, nil
	}
	return "", fmt.Errorf("no JSON-RPC interface")
}
