package instance

import (
	"github.com/partyd/party/internal/rails"

	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/store"
)

// InitOptions are the arguments of `party init`.
type InitOptions struct {
	OrganizationID string // required, org_...
	Name           string // optional display name, in config.json and peer.json
	AgentID        string // default agt_<org suffix>_agent
	PrincipalID    string // default prn_<org suffix>_principal
	Role           string // default "procurement_lead"
	MCPAddr        string // default 127.0.0.1:7401
	PeerAddr       string // default 127.0.0.1:7402
	AdminAddr      string // default 127.0.0.1:7403
	PublicURL      string // default https://<PeerAddr>
	Hosts          []string
	// Container allows the MCP and admin addresses to be non-loopback
	// (0.0.0.0:port inside a container whose ports the host publishes on
	// 127.0.0.1 only). The tokens still guard both surfaces.
	Container bool
	Now       time.Time // default time.Now()
}

// idPattern is the kernel's identifier grammar (canonical model §3).
var idPattern = regexp.MustCompile(`^[a-z]{3}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)

func checkID(name, id, prefix string) error {
	if !idPattern.MatchString(id) || id[:4] != prefix {
		return fmt.Errorf("instance: %s %q is not an A202 identifier with prefix %s", name, id, prefix)
	}
	return nil
}

func (o *InitOptions) defaults() error {
	if err := checkID("organization id", o.OrganizationID, "org_"); err != nil {
		return err
	}
	if err := CheckDisplayName(o.Name); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	suffix := o.OrganizationID[4:]
	if o.AgentID == "" {
		o.AgentID = "agt_" + suffix + "_agent"
	}
	if o.PrincipalID == "" {
		o.PrincipalID = "prn_" + suffix + "_principal"
	}
	if o.Role == "" {
		o.Role = "procurement_lead"
	}
	if err := checkID("agent id", o.AgentID, "agt_"); err != nil {
		return err
	}
	if err := checkID("principal id", o.PrincipalID, "prn_"); err != nil {
		return err
	}
	if o.MCPAddr == "" {
		o.MCPAddr = "127.0.0.1:7401"
	}
	if o.PeerAddr == "" {
		o.PeerAddr = "127.0.0.1:7402"
	}
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:7403"
	}
	for _, a := range []string{o.MCPAddr, o.AdminAddr} {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("instance: address %q: %w", a, err)
		}
		if ip := net.ParseIP(host); !o.Container && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			// The agent's and the principal's surfaces are for this
			// machine only; exposing them is a deployment choice made by
			// a proxy in front, not by a default here.
			return fmt.Errorf("instance: %s is not a loopback address; the MCP and admin surfaces listen on loopback only", a)
		}
	}
	if o.PublicURL == "" {
		o.PublicURL = "https://" + o.PeerAddr
	}
	u, err := url.Parse(o.PublicURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("instance: public URL %q must be https://host:port", o.PublicURL)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	return nil
}

// Summary is what `party init --json` prints.
type Summary struct {
	OrganizationID string `json:"organization_id"`
	PrincipalID    string `json:"principal_id"`
	AgentID        string `json:"agent_id"`
	PrincipalKeyID string `json:"principal_key_id"`
	AgentKeyID     string `json:"agent_key_id"`
	PeerFile       string `json:"peer_file"`
	MCPURL         string `json:"mcp_url"`
	PeerURL        string `json:"peer_url"`
	AgentCardURL   string `json:"agent_card_url"`
	AdminURL       string `json:"admin_url"`
}

// Init creates a state directory at dir. It refuses a directory that exists
// and is not empty, so that it can never overwrite keys.
func Init(dir string, o InitOptions) (Summary, error) {
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Summary{}, fmt.Errorf("%w: %s is not empty", ErrExists, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Summary{}, fmt.Errorf("instance: %w", err)
	}
	p := Paths{dir}
	for _, sub := range []string{"keys", "tls", "tokens", PeersDir} {
		if err := os.MkdirAll(p.Join(sub), 0o700); err != nil {
			return Summary{}, err
		}
	}
	principal, pkid, err := NewKey()
	if err != nil {
		return Summary{}, err
	}
	agent, akid, err := NewKey()
	if err != nil {
		return Summary{}, err
	}
	for path, k := range map[string]*ecdsa.PrivateKey{PrincipalKeyFile: principal, AgentKeyFile: agent} {
		pemBytes, err := keys.MarshalPrivatePEM(k)
		if err != nil {
			return Summary{}, err
		}
		if err := writeFileAtomic(p.Join(path), pemBytes, 0o600); err != nil {
			return Summary{}, err
		}
	}
	if err := writeTLS(p, o); err != nil {
		return Summary{}, err
	}
	for _, name := range []string{AgentTokenFile, AdminTokenFile} {
		tok, err := newToken()
		if err != nil {
			return Summary{}, err
		}
		if err := writeFileAtomic(p.Join(name), []byte(tok+"\n"), 0o600); err != nil {
			return Summary{}, err
		}
	}
	cfg := Config{
		OrganizationID: o.OrganizationID,
		DisplayName:    o.Name,
		PrincipalID:    o.PrincipalID,
		PrincipalRole:  o.Role,
		AgentID:        o.AgentID,
		PrincipalKeyID: pkid,
		AgentKeyID:     akid,
		MCPAddr:        o.MCPAddr,
		PeerAddr:       o.PeerAddr,
		PublicURL:      o.PublicURL,
		AdminAddr:      o.AdminAddr,
		LogLevel:       "info",
		Rails:          []rails.Config{{ID: "rail_test_sandbox", Kind: "sandbox"}},
	}
	if err := writeConfig(dir, cfg); err != nil {
		return Summary{}, err
	}
	st, err := store.Open(p.Join(DatabaseFile))
	if err != nil {
		return Summary{}, err
	}
	err = bootstrap(context.Background(), st, cfg, principal, agent, o.Now)
	st.Close()
	if err != nil {
		return Summary{}, err
	}
	if err := writePeerFile(dir, cfg, principal); err != nil {
		return Summary{}, err
	}
	return Summary{
		OrganizationID: cfg.OrganizationID,
		PrincipalID:    cfg.PrincipalID,
		AgentID:        cfg.AgentID,
		PrincipalKeyID: pkid,
		AgentKeyID:     akid,
		PeerFile:       p.Join(PeerFile),
		MCPURL:         "http://" + cfg.MCPAddr + "/mcp",
		PeerURL:        cfg.PublicURL,
		AgentCardURL:   cfg.PublicURL + AgentCardPath,
		AdminURL:       "http://" + cfg.AdminAddr + "/",
	}, nil
}

// AgentCardPath is the well-known path of the A2A AgentCard.
const AgentCardPath = "/.well-known/agent-card.json"

func writeTLS(p Paths, o InitOptions) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: o.OrganizationID + " party instance"},
		NotBefore:             o.Now.Add(-time.Hour),
		NotAfter:              o.Now.AddDate(2, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: it is its own root in the peer's pinned pool
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	hosts := append([]string(nil), o.Hosts...)
	if u, err := url.Parse(o.PublicURL); err == nil {
		hosts = append(hosts, u.Hostname())
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		return err
	}
	keyPEM, err := keys.MarshalPrivatePEM(k)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(p.Join(TLSKeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(p.Join(TLSCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// Exists reports whether dir looks like a state directory.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ConfigFile))
	return err == nil
}
