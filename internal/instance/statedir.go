// Package instance is one organisation's party instance: its state
// directory, its configuration, its keys at rest and its record.
//
// A state directory holds everything the instance needs and nothing of any
// other organisation's secrets:
//
//	DIR/
//	  config.json         settings (see Config); written by init, edited by hand
//	  party.db            the SQLite record (package store); never a private key
//	  keys/principal.pem  the principal's P-256 key, PKCS#8 PEM, mode 0600
//	  keys/agent.pem      the agent's P-256 key, PKCS#8 PEM, mode 0600
//	  keys/agents/        the further agents' keys (`party agent add`)
//	  tls/cert.pem        the instance's self-signed TLS certificate
//	  tls/key.pem         its private key, mode 0600
//	  tokens/agent        the agent's MCP bearer token, mode 0600
//	  tokens/agents/      the further agents' MCP tokens
//	  tokens/admin        the principal's admin token, mode 0600
//	  peer.json           this instance's peer file, to hand to counterparties
//	  peers/              counterparties' peer files, added by `party peer add`
//	  serve.lock          held by the one `party serve` of the directory (LockServe)
//
// The principal key signs mandates, approvals, revocation records and the
// key records of both keys; the agent key signs the agent's acts. The agent
// token opens the MCP surface only, the admin token the principal's surface
// only: an agent can ask, verify and act under a mandate, never approve or
// issue one (decisions.md 9).
//
// Roles in the types. Open, which every runtime of the instance builds on,
// loads the agent key and never reads keys/principal.pem: an opened
// Instance holds the principal's public key only, taken from the
// principal's own key record in the database (signed by that key, checked
// when the instance opens), which is what key resolution needs. The
// principal's private key is read by package principal alone
// (principal.LoadKey), for the principal's surface: `party mandate`,
// `party approve`/`reject`/`approvals` and the admin listener. Init is the
// one other place that holds it: it generates the key, signs the key
// records and the instance mandate with it, and writes it to its file.
package instance

import (
	"github.com/partyd/party/internal/rails"

	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// File names inside a state directory.
const (
	ConfigFile       = "config.json"
	DatabaseFile     = "party.db"
	PrincipalKeyFile = "keys/principal.pem"
	AgentKeyFile     = "keys/agent.pem"
	TLSCertFile      = "tls/cert.pem"
	TLSKeyFile       = "tls/key.pem"
	AgentTokenFile   = "tokens/agent"
	AdminTokenFile   = "tokens/admin"
	PeerFile         = "peer.json"
	PeersDir         = "peers"
	ServeLockFile    = "serve.lock"
)

// ErrExists is returned by Init when the directory already holds a state
// directory (or anything at all): init never overwrites.
var ErrExists = errors.New("instance: state directory already exists")

// Config is config.json. Every member has a default set by Init; the file
// is decoded strictly, so a misspelt member is an error rather than a
// silently ignored setting.
type Config struct {
	// OrganizationID is this organisation's A202 identifier (org_...).
	OrganizationID string `json:"organization_id"`
	// DisplayName is the organisation's name for people (`party init
	// --name`), written to peer.json for counterparties; optional.
	DisplayName string `json:"display_name,omitempty"`
	// PrincipalID is the principal whose key issues mandates and approvals.
	PrincipalID string `json:"principal_id"`
	// PrincipalRole is the principal's role, matched against approval rules.
	PrincipalRole string `json:"principal_role"`
	// AgentID is the agent that acts through the MCP surface.
	AgentID string `json:"agent_id"`
	// PrincipalKeyID and AgentKeyID name the two keys in A202 objects.
	PrincipalKeyID string `json:"principal_key_id"`
	AgentKeyID     string `json:"agent_key_id"`
	// PrincipalKeyFile is the file holding the principal's private key,
	// relative to the state directory; empty means keys/principal.pem.
	// A principal key rotation writes the new key to a file of its own and
	// switches this and PrincipalKeyID in one rewrite of config.json, so a
	// crash leaves the old pair or the new one, never a mix. Only package
	// principal reads it.
	PrincipalKeyFile string `json:"principal_key_file,omitempty"`
	// MCPAddr is the loopback address of the agent's MCP Streamable HTTP
	// endpoint (path /mcp).
	MCPAddr string `json:"mcp_addr"`
	// PeerAddr is the address of the HTTPS listener counterparties reach:
	// the A2A endpoint, the AgentCard, the plain HTTPS binding and the
	// mandate status endpoints.
	PeerAddr string `json:"peer_addr"`
	// PublicURL is PeerAddr as counterparties reach it (https://host:port).
	PublicURL string `json:"public_url"`
	// AdminAddr is the loopback address of the principal's approvals page.
	AdminAddr string `json:"admin_addr"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel string `json:"log_level"`
	// Rails are the settlement rails this instance offers and accepts
	// payment on (package rails): a sandbox rail by default; a webhook
	// rail reaches the organisation's own payment system.
	Rails []rails.Config `json:"rails,omitempty"`
	// Agents are the instance's further agents (`party agent add`), each
	// with its own key and MCP token (see AgentEntry).
	Agents []AgentEntry `json:"agents,omitempty"`
	// PrincipalWebhook, when set, is where the principal is told of
	// approval requests and of transactions reaching a final state
	// (package notify): an HTTPS URL and the file holding the HMAC secret
	// the deliveries are signed with.
	PrincipalWebhook *WebhookConfig `json:"principal_webhook,omitempty"`
	// Deadlines tunes when an obligation is overdue and a counterparty
	// unreachable, and names the business calendars due conditions may
	// count in (record engine, timing.go); omitted, the defaults.
	Deadlines *DeadlinesConfig `json:"deadlines,omitempty"`
}

// DeadlinesConfig is config.json's deadlines.
type DeadlinesConfig struct {
	// OverdueAfterSeconds is how long an obligation is due, unperformed,
	// before it is overdue (default a day).
	OverdueAfterSeconds int `json:"overdue_after_seconds,omitempty"`
	// PeerUnreachableAfterSeconds is how long a counterparty may leave
	// messages unanswered before the principal is told (default 900).
	PeerUnreachableAfterSeconds int `json:"peer_unreachable_after_seconds,omitempty"`
	// Calendars are the business calendars a due condition may name
	// (business_days.calendar), besides the built-in "weekdays" (Monday
	// to Friday): by name, the weekdays off and the holidays.
	Calendars map[string]CalendarConfig `json:"calendars,omitempty"`
}

// CalendarConfig is one business calendar.
type CalendarConfig struct {
	// Weekend are the weekdays that are not business days, by English
	// name ("saturday", "sunday").
	Weekend []string `json:"weekend"`
	// Holidays are the dates, YYYY-MM-DD (UTC), that are not business days.
	Holidays []string `json:"holidays,omitempty"`
}

// WebhookConfig is the principal's webhook (package notify).
type WebhookConfig struct {
	// URL is the https:// endpoint deliveries are posted to.
	URL string `json:"url"`
	// SecretFile holds the shared HMAC secret, relative to the state
	// directory unless absolute.
	SecretFile string `json:"secret_file"`
	// CAFile, when set, is a PEM bundle of the roots the endpoint's
	// certificate is verified against, instead of the system's (a private
	// CA), relative to the state directory unless absolute.
	CAFile string `json:"ca_file,omitempty"`
	// TimeoutSeconds bounds one delivery attempt (default 10).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// PrincipalKeyFileFor is the file a rotated principal key id is kept in.
func PrincipalKeyFileFor(keyID string) string { return "keys/principal-" + keyID + ".pem" }

// Paths resolves a state directory's files.
type Paths struct{ Dir string }

// Join returns the path of a file inside the state directory.
func (p Paths) Join(name string) string { return filepath.Join(p.Dir, filepath.FromSlash(name)) }

// LoadConfig reads and strictly decodes DIR/config.json.
func LoadConfig(dir string) (Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return Config{}, fmt.Errorf("instance: %w (is %s a state directory made by `party init`?)", err, dir)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("instance: %s: %w", ConfigFile, err)
	}
	if c.OrganizationID == "" || c.AgentID == "" || c.PrincipalID == "" {
		return Config{}, fmt.Errorf("instance: %s lacks organization_id, agent_id or principal_id", ConfigFile)
	}
	if c.PrincipalKeyFile != "" && c.PrincipalKeyFile != PrincipalKeyFileFor(c.PrincipalKeyID) {
		// Only ever the file a rotation names after the key: config.json
		// must not point the principal's signer at an arbitrary path.
		return Config{}, fmt.Errorf("instance: %s: principal_key_file %q is not %s", ConfigFile, c.PrincipalKeyFile, PrincipalKeyFileFor(c.PrincipalKeyID))
	}
	return c, nil
}

func writeConfig(dir string, c Config) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ConfigFile), append(data, '\n'), 0o644)
}

// writeFileAtomic writes through a temporary file and a rename, so a crash
// leaves either the old file or the new one, never half of one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// newToken returns 32 random bytes as base64url: a bearer token.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// LoadToken reads a token file (tokens/agent or tokens/admin).
func LoadToken(dir, name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return "", fmt.Errorf("instance: %w", err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", fmt.Errorf("instance: %s is empty", name)
	}
	return t, nil
}

// TokenEqual compares a presented token with the expected one in constant
// time, so response timing says nothing about how much of a guess matched.
func TokenEqual(presented, expected string) bool {
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256([]byte(expected))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && expected != ""
}

// CertFingerprint returns the SHA-256 of a certificate's DER bytes, as
// lowercase hex: the value a peer file pins.
func CertFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// LoadCertificate reads tls/cert.pem and returns the parsed certificate.
func LoadCertificate(dir string) (*x509.Certificate, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(TLSCertFile)))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("instance: %s holds no certificate", TLSCertFile)
	}
	return x509.ParseCertificate(block.Bytes)
}
