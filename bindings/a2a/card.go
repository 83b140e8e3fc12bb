package a2a

import (
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/partyd/party/internal/delivery"
)

// Paths on the peer listener.
const (
	// CardPath is the well-known path of the public AgentCard.
	CardPath = "/.well-known/agent-card.json"
	// EndpointPath is the JSON-RPC endpoint the card's url names.
	EndpointPath = "/a2a"
)

// Activation header names (binding §2.3). A2A names the service parameter
// A2A-Extensions; a2a-go uses X-A2A-Extensions. Both are sent, either is
// accepted.
const (
	HeaderExtensions  = "A2A-Extensions"
	HeaderXExtensions = "X-A2A-Extensions"
)

// ProtocolVersion is the A2A protocol version a2a-go v0.3.3 speaks.
const ProtocolVersion = "0.3.0"

// CardOptions describe this instance's AgentCard.
type CardOptions struct {
	// OrganizationID names the organisation in the card's name.
	OrganizationID string
	// PublicURL is the peer listener as counterparties reach it
	// (https://host:port, instance.Config.PublicURL).
	PublicURL string
	// Version is the software version the card states (default "0.1").
	Version string
	// Versions is the version declaration (default delivery.LocalVersions).
	Versions *delivery.Versions
}

// ExtensionDescription is the extension entry's description.
const ExtensionDescription = "Exchanges A202 commercial objects (a202-commercial/0.1) as canonical bytes; requires the extension."

// Card returns the AgentCard with the A202 extension declared as
// required (binding §2.1, §3.1).
func Card(o CardOptions) *a2a.AgentCard {
	v := delivery.LocalVersions
	if o.Versions != nil {
		v = *o.Versions
	}
	if o.Version == "" {
		o.Version = "0.1"
	}
	modes := []string{delivery.MediaType}
	return &a2a.AgentCard{
		Name:               "party " + o.OrganizationID,
		Description:        "The A202 party instance of " + o.OrganizationID + ": it buys and sells with counterparties by exchanging signed A202 commercial objects.",
		URL:                strings.TrimSuffix(o.PublicURL, "/") + EndpointPath,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    ProtocolVersion,
		Version:            o.Version,
		Capabilities: a2a.AgentCapabilities{
			Extensions: []a2a.AgentExtension{{
				URI:         delivery.ExtensionURI,
				Description: ExtensionDescription,
				Required:    true,
				Params:      v.Params(),
			}},
		},
		DefaultInputModes:  modes,
		DefaultOutputModes: modes,
		Skills: []a2a.AgentSkill{{
			ID:          "a202-commercial-exchange",
			Name:        "A202 commercial exchange",
			Description: "Receives A202 commercial objects and answers with the objects they call for. Support is declared by the capabilities extension, not by this skill.",
			Tags:        []string{"a202", "commerce"},
			InputModes:  modes,
			OutputModes: modes,
		}},
	}
}

// requested reports whether the A202 extension URI is among those named
// in either activation header of h (each possibly repeated, each a
// comma-separated list).
func requested(h http.Header) bool {
	for _, name := range []string{HeaderExtensions, HeaderXExtensions} {
		for _, line := range h.Values(name) {
			for _, uri := range strings.Split(line, ",") {
				if strings.TrimSpace(uri) == delivery.ExtensionURI {
					return true
				}
			}
		}
	}
	return false
}
