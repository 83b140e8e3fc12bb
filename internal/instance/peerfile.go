package instance

import (
	"bytes"
	"crypto"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/partyd/party/internal/keys"
)

// PeerFileVersion marks the peer file format.
const PeerFileVersion = "party-peer/1"

// PeerInfo is a peer file (decisions.md 14): what one organisation hands
// another out of band, like an SSH host key, before their instances talk.
// It holds nothing secret.
type PeerInfo struct {
	Format         string `json:"format"`
	OrganizationID string `json:"organization_id"`
	// DisplayName is the organisation's name as it states it (`party init
	// --name`), for people: pages show it beside the identifier, never
	// instead of it, since nothing vouches for it. Optional.
	DisplayName string `json:"display_name,omitempty"`
	// AgentCardURL is where the A2A AgentCard is served; the peer's base URL
	// is its scheme and host.
	AgentCardURL string `json:"agent_card_url"`
	// TLSCertificateSHA256 pins the peer's TLS certificate, used both as
	// its server certificate and as its client certificate when it calls
	// us: the per-peer credential is the certificate's private key.
	TLSCertificateSHA256 string `json:"tls_certificate_sha256"`
	// PrincipalKeyThumbprints are RFC 7638 thumbprints of the principal keys
	// whose signatures on key records make an agent key trusted.
	PrincipalKeyThumbprints []string `json:"principal_key_thumbprints"`
	// PrincipalKeys carries the same keys as public JWKs, keyed by key id,
	// so that key records can be verified without a further round trip.
	// A key here counts only if its thumbprint is listed above.
	PrincipalKeys map[string]map[string]any `json:"principal_keys"`
	// PrincipalIDs names the principal holding each key in PrincipalKeys,
	// so that an approval or a mandate proof made with one of them can be
	// tied to the principal it names.
	PrincipalIDs map[string]string `json:"principal_ids,omitempty"`
}

var fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// MaxDisplayName bounds a display name, in characters.
const MaxDisplayName = 128

// CheckDisplayName accepts "" (none) or a name of at most MaxDisplayName
// characters of UTF-8 without control characters or surrounding spaces: a
// line of text a page can show as it is.
func CheckDisplayName(name string) error {
	if name == "" {
		return nil
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxDisplayName || strings.TrimSpace(name) != name ||
		strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return fmt.Errorf("display name %q must be one line of at most %d characters", name, MaxDisplayName)
	}
	return nil
}

// BaseURL returns the scheme and host of the AgentCard URL.
func (p PeerInfo) BaseURL() string {
	u, err := url.Parse(p.AgentCardURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// Validate checks a peer file strictly.
func (p PeerInfo) Validate() error {
	if p.Format != PeerFileVersion {
		return fmt.Errorf("peer file: format %q, want %q", p.Format, PeerFileVersion)
	}
	if err := checkID("organization_id", p.OrganizationID, "org_"); err != nil {
		return fmt.Errorf("peer file: %w", err)
	}
	if err := CheckDisplayName(p.DisplayName); err != nil {
		return fmt.Errorf("peer file: %w", err)
	}
	u, err := url.Parse(p.AgentCardURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("peer file: agent_card_url %q must be an https URL", p.AgentCardURL)
	}
	if !fingerprintPattern.MatchString(p.TLSCertificateSHA256) {
		return fmt.Errorf("peer file: tls_certificate_sha256 must be 64 lowercase hex characters")
	}
	if len(p.PrincipalKeyThumbprints) == 0 {
		return fmt.Errorf("peer file: no principal key thumbprints")
	}
	pinned := map[string]bool{}
	for _, t := range p.PrincipalKeyThumbprints {
		pinned[t] = true
	}
	for kid, jwk := range p.PrincipalKeys {
		pub, err := keys.ParseJWK(jwk)
		if err != nil {
			return fmt.Errorf("peer file: principal key %s: %w", kid, err)
		}
		tp, err := keys.Thumbprint(pub)
		if err != nil || !pinned[tp] {
			return fmt.Errorf("peer file: principal key %s is not among the pinned thumbprints", kid)
		}
	}
	for kid, prn := range p.PrincipalIDs {
		if _, ok := p.PrincipalKeys[kid]; !ok {
			return fmt.Errorf("peer file: principal_ids names key %s, which principal_keys does not carry", kid)
		}
		if err := checkID("principal id", prn, "prn_"); err != nil {
			return fmt.Errorf("peer file: %w", err)
		}
	}
	return nil
}

// ParsePeerFile decodes and validates a peer file.
func ParsePeerFile(data []byte) (PeerInfo, error) {
	var p PeerInfo
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return PeerInfo{}, fmt.Errorf("peer file: %w", err)
	}
	if dec.More() {
		return PeerInfo{}, fmt.Errorf("peer file: trailing data")
	}
	return p, p.Validate()
}

func writePeerFile(dir string, cfg Config, principal crypto.Signer) error {
	return WriteOwnPeerFile(dir, cfg, []PrincipalKey{{KeyID: cfg.PrincipalKeyID, Public: principal.Public()}})
}

// PrincipalKey is one of this organisation's principal keys, as the peer
// file carries it.
type PrincipalKey struct {
	KeyID  string
	Public crypto.PublicKey
}

// WriteOwnPeerFile writes DIR/peer.json, the file handed to counterparties,
// pinning every key in principals (after a principal key rotation, the
// retired key too: what it signed, agent key records above all, must stay
// trusted by a counterparty that pins the file afresh).
func WriteOwnPeerFile(dir string, cfg Config, principals []PrincipalKey) error {
	cert, err := LoadCertificate(dir)
	if err != nil {
		return err
	}
	p := PeerInfo{
		Format:               PeerFileVersion,
		OrganizationID:       cfg.OrganizationID,
		DisplayName:          cfg.DisplayName,
		AgentCardURL:         strings.TrimSuffix(cfg.PublicURL, "/") + AgentCardPath,
		TLSCertificateSHA256: CertFingerprint(cert.Raw),
		PrincipalKeys:        map[string]map[string]any{},
		PrincipalIDs:         map[string]string{},
	}
	for _, k := range principals {
		if err := p.pin(k.KeyID, k.Public, cfg.PrincipalID); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, PeerFile), append(data, '\n'), 0o644)
}

// pin adds a principal key to the peer file: its thumbprint, its JWK and
// the principal holding it.
func (p *PeerInfo) pin(keyID string, pub crypto.PublicKey, principalID string) error {
	jwk, err := keys.PublicJWK(pub)
	if err != nil {
		return err
	}
	tp, err := keys.Thumbprint(pub)
	if err != nil {
		return err
	}
	if !slices.Contains(p.PrincipalKeyThumbprints, tp) {
		p.PrincipalKeyThumbprints = append(p.PrincipalKeyThumbprints, tp)
	}
	if p.PrincipalKeys == nil {
		p.PrincipalKeys = map[string]map[string]any{}
	}
	if p.PrincipalIDs == nil {
		p.PrincipalIDs = map[string]string{}
	}
	p.PrincipalKeys[keyID] = jwk
	if principalID != "" {
		p.PrincipalIDs[keyID] = principalID
	}
	return nil
}

// PinPrincipalKey adds a principal key to the pinned peer file of org,
// in place, atomically: the counterparty's successor principal key, which
// a key record signed by one of its pinned principal keys vouched for
// (peering.TrustedKeys). The keys already pinned stay pinned. Pinning a
// key already pinned is a no-op.
func PinPrincipalKey(dir, org, keyID string, pub crypto.PublicKey, principalID string) (PeerInfo, error) {
	path := filepath.Join(dir, PeersDir, org+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		return PeerInfo{}, fmt.Errorf("instance: no pinned peer file of %s: %w", org, err)
	}
	p, err := ParsePeerFile(data)
	if err != nil {
		return PeerInfo{}, err
	}
	if err := p.pin(keyID, pub, principalID); err != nil {
		return PeerInfo{}, err
	}
	if err := p.Validate(); err != nil {
		return PeerInfo{}, err
	}
	canon, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return PeerInfo{}, err
	}
	canon = append(canon, '\n')
	if bytes.Equal(canon, data) {
		return p, nil
	}
	return p, writeFileAtomic(path, canon, 0o644)
}

// AddPeer validates a counterparty's peer file and stores it under peers/,
// named by organisation. Adding the same file again is a no-op; a different
// file for an organisation already added is refused: re-pinning is a
// deliberate act (remove the old file first), like a changed SSH host key.
func AddPeer(dir string, data []byte) (PeerInfo, error) {
	p, err := ParsePeerFile(data)
	if err != nil {
		return PeerInfo{}, err
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return PeerInfo{}, err
	}
	if p.OrganizationID == cfg.OrganizationID {
		return PeerInfo{}, fmt.Errorf("peer file names this instance's own organisation %s", p.OrganizationID)
	}
	canon, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return PeerInfo{}, err
	}
	canon = append(canon, '\n')
	path := filepath.Join(dir, PeersDir, p.OrganizationID+".json")
	if old, err := os.ReadFile(path); err == nil {
		if bytes.Equal(old, canon) {
			return p, nil
		}
		return PeerInfo{}, fmt.Errorf("a different peer file for %s is already pinned at %s; remove it first to re-pin", p.OrganizationID, path)
	}
	return p, writeFileAtomic(path, canon, 0o644)
}

// Peers returns the pinned counterparties, sorted by organisation.
func Peers(dir string) ([]PeerInfo, error) {
	files, err := filepath.Glob(filepath.Join(dir, PeersDir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []PeerInfo
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := ParsePeerFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, p)
	}
	return out, nil
}
