package instance

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/status"
)

// Several agents (issue 16 item 3). An instance has its primary agent,
// made by init (config agent_id and agent_key_id, keys/agent.pem,
// tokens/agent), which countersigns the counterparty's events, and any
// number of further agents added by the principal (`party agent add`),
// each with its own agent id, its own key (keys/agents/<agent>.pem), its
// own key record signed by the principal, its own instance mandate, and
// its own MCP bearer token (tokens/agents/<agent>), listed in config.json
// under agents. Each acts only under the mandates issued to it.
//
// Keys rotate (`party key rotate`): a new key id and key file replace the
// old ones in config.json, whose key record gains a later version
// (expired or revoked) in the record; the old private key is deleted,
// since nothing signs with it again, and its signatures keep verifying
// under the public key its key record publishes. A serve process that is
// running notices the changed config.json (Refresh) and signs with the new
// key from then on.

// AgentEntry is one further agent of the instance in config.json.
type AgentEntry struct {
	AgentID string `json:"agent_id"`
	KeyID   string `json:"key_id"`
	// InstanceMandateID is the agent's own instance mandate, under which
	// its key records are published.
	InstanceMandateID string `json:"instance_mandate_id"`
	// Revoked is set when the principal revoked the agent: its token opens
	// nothing and it signs nothing.
	Revoked bool `json:"revoked,omitempty"`
}

// AgentKeyPath is the key file of agentID: keys/agent.pem for the primary
// agent, keys/agents/<agent>.pem for the others.
func (c Config) AgentKeyPath(agentID string) string {
	if agentID == c.AgentID {
		return AgentKeyFile
	}
	return "keys/agents/" + agentID + ".pem"
}

// AgentTokenPath is the MCP token file of agentID: tokens/agent for the
// primary agent, tokens/agents/<agent> for the others.
func (c Config) AgentTokenPath(agentID string) string {
	if agentID == c.AgentID {
		return AgentTokenFile
	}
	return "tokens/agents/" + agentID
}

// AgentKeyID returns the current key id of one of the instance's agents.
func (c Config) KeyOf(agentID string) (string, bool) {
	if agentID == c.AgentID {
		return c.AgentKeyID, true
	}
	for _, a := range c.Agents {
		if a.AgentID == agentID && !a.Revoked {
			return a.KeyID, true
		}
	}
	return "", false
}

// AgentIDs lists the instance's agents that may act, the primary first.
func (c Config) AgentIDs() []string {
	out := []string{c.AgentID}
	for _, a := range c.Agents {
		if !a.Revoked {
			out = append(out, a.AgentID)
		}
	}
	return out
}

// HasAgent reports whether agentID is one of the instance's agents (a
// revoked one included: it was, and its objects name it).
func (c Config) HasAgent(agentID string) bool {
	if agentID == c.AgentID {
		return true
	}
	return slices.ContainsFunc(c.Agents, func(a AgentEntry) bool { return a.AgentID == agentID })
}

// ErrUnknownAgent is returned for an agent this instance does not run.
var ErrUnknownAgent = errors.New("instance: not an agent of this instance")

// agentKey is one agent's current signing key.
type agentKey struct {
	keyID string
	key   crypto.Signer
}

// loadAgents reads every active agent's key file.
func loadAgents(dir string, cfg Config) (map[string]agentKey, error) {
	p := Paths{dir}
	out := map[string]agentKey{}
	for _, id := range cfg.AgentIDs() {
		kid, _ := cfg.KeyOf(id)
		k, err := keys.ReadPrivateFile(p.Join(cfg.AgentKeyPath(id)))
		if err != nil {
			return nil, fmt.Errorf("instance: agent %s: %w", id, err)
		}
		out[id] = agentKey{keyID: kid, key: k}
	}
	return out, nil
}

// AgentSigningKey returns the current key id and signing key of one of
// the instance's agents.
func (in *Instance) AgentSigningKey(agentID string) (string, crypto.Signer, error) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	k, ok := in.agents[agentID]
	if !ok {
		return "", nil, fmt.Errorf("%w: %s", ErrUnknownAgent, agentID)
	}
	return k.keyID, k.key, nil
}

// Current returns the configuration as last loaded.
func (in *Instance) Current() Config {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.Config
}

// Refresh reloads config.json and the keys it names when the file changed
// since it was read (a principal's `party agent add` or `party key rotate`
// in another process), at most once a second. The database is not
// reopened.
func (in *Instance) Refresh() error {
	in.mu.RLock()
	checked, stamp := in.checked, in.stamp
	in.mu.RUnlock()
	now := time.Now()
	if now.Sub(checked) < time.Second {
		return nil
	}
	st, err := os.Stat(filepath.Join(in.Dir, ConfigFile))
	in.mu.Lock()
	in.checked = now
	in.mu.Unlock()
	if err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	if st.ModTime().Equal(stamp.ModTime()) && st.Size() == stamp.Size() {
		return nil
	}
	return in.Reload()
}

// Reload rereads config.json, the agents' keys and the principal's public
// key now.
func (in *Instance) Reload() error {
	st, err := os.Stat(filepath.Join(in.Dir, ConfigFile))
	if err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	cfg, err := LoadConfig(in.Dir)
	if err != nil {
		return err
	}
	agents, err := loadAgents(in.Dir, cfg)
	if err != nil {
		return err
	}
	pub, err := ownPrincipalKey(context.Background(), in.Store, cfg)
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.Config, in.agents, in.principalPublic, in.stamp, in.checked = cfg, agents, pub, st, time.Now()
	in.mu.Unlock()
	return nil
}

// UpdateConfig rewrites DIR/config.json with change applied, atomically.
func UpdateConfig(dir string, change func(*Config) error) error {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return err
	}
	if err := change(&cfg); err != nil {
		return err
	}
	return writeConfig(dir, cfg)
}

// NewKey generates a signing key with its id. Key ids are fresh random
// identifiers (decisions.md 4): a new key always gets a new id, so an old
// signature never names a key it was not made with.
func NewKey() (*ecdsa.PrivateKey, string, error) {
	k, err := keys.Generate()
	if err != nil {
		return nil, "", err
	}
	kid, err := envelope.NewID("key")
	if err != nil {
		return nil, "", err
	}
	return k, kid, nil
}

// WritePrivateKey writes a private key to the state directory file name,
// mode 0600, replacing what was there.
func WritePrivateKey(dir, name string, k crypto.Signer) error {
	pemBytes, err := keys.MarshalPrivatePEM(k)
	if err != nil {
		return err
	}
	return writeFileAtomic(Paths{dir}.Join(name), pemBytes, 0o600)
}

// NewToken writes a fresh bearer token to the state directory file name,
// mode 0600.
func NewToken(dir, name string) error {
	tok, err := newToken()
	if err != nil {
		return err
	}
	return writeFileAtomic(Paths{dir}.Join(name), []byte(tok+"\n"), 0o600)
}

// InstanceMandate is the request for an agent's instance mandate: from the
// organisation's principal to the agent and key, permitting nothing but
// KeyRecordAction, for ten years from now (package doc of bootstrap).
func InstanceMandate(cfg Config, mandateID, agentID, keyID string, now time.Time) authority.IssueRequest {
	now = now.UTC().Truncate(time.Second)
	return authority.IssueRequest{
		MandateID:                 mandateID,
		Issuer:                    authority.Issuer{OrganizationID: cfg.OrganizationID, PrincipalID: cfg.PrincipalID, KeyID: cfg.PrincipalKeyID},
		Subject:                   authority.Subject{AgentID: agentID, KeyID: keyID},
		RepresentedOrganizationID: cfg.OrganizationID,
		ValidFrom:                 envelope.Timestamp(now),
		ValidUntil:                envelope.Timestamp(now.AddDate(10, 0, 0)),
		StatusEndpoint:            status.EndpointFor(cfg.PublicURL, mandateID),
		Actions:                   []string{KeyRecordAction},
		Scope:                     map[string]any{"categories": []any{"a202.instance.keys"}},
		Constraints: []map[string]any{{
			"id": "c_key_records_only", "type": "commercial.string", "path": "$.action_type",
			"operator": "equals", "value": KeyRecordAction, "on_failure": "deny",
		}},
	}
}
