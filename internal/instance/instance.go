package instance

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// Instance is an opened state directory: configuration, the agent's key,
// the principal's public key, and the record. It is what the serve
// process, the agent's surfaces and the principal's command-line calls all
// build on. It never holds the principal's private key (see the package
// documentation, "Roles in the types").
type Instance struct {
	Dir string
	// Config is the configuration as Open read it; a running process reads
	// Current, which Refresh keeps up to date.
	Config Config
	Store  *store.Store

	mu              sync.RWMutex
	agents          map[string]agentKey
	principalPublic crypto.PublicKey
	stamp           os.FileInfo // config.json as last read
	checked         time.Time   // when Refresh last looked
}

// Open loads a state directory made by Init: config.json, keys/agent.pem
// and the record. keys/principal.pem is not read; the principal's public
// key comes from its key record in the record.
func Open(dir string) (*Instance, error) { return OpenWith(dir, store.Options{}) }

// OpenWith is Open with the record's store options (tests: store.Options).
func OpenWith(dir string, so store.Options) (*Instance, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	p := Paths{dir}
	stamp, err := os.Stat(p.Join(ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	agents, err := loadAgents(dir, cfg)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenWith(p.Join(DatabaseFile), so)
	if err != nil {
		return nil, err
	}
	pub, err := ownPrincipalKey(context.Background(), st, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Instance{Dir: dir, Config: cfg, Store: st, agents: agents, principalPublic: pub, stamp: stamp, checked: time.Now()}, nil
}

// ownPrincipalKey reads the public key of this organisation's principal
// from the key record bootstrap stored under its key id. The record must
// name this organisation as controller and carry a valid signature by the
// key it describes (bootstrap signs it so); anything else means the
// database is not this state directory's, and the instance does not open.
func ownPrincipalKey(ctx context.Context, st *store.Store, cfg Config) (crypto.PublicKey, error) {
	raw, err := st.GetObject(ctx, "", cfg.PrincipalKeyID) // a key record is bound to no transaction
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("instance: the record holds no key record for the principal key %s (was it made by `party init`?)", cfg.PrincipalKeyID)
	}
	if err != nil {
		return nil, err
	}
	obj, err := canonical.DecodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("instance: principal key record %s: %w", cfg.PrincipalKeyID, err)
	}
	payload, _ := obj["payload"].(map[string]any)
	if obj["object_type"] != "key_record" || payload == nil || payload["controller_organization_id"] != cfg.OrganizationID {
		return nil, fmt.Errorf("instance: object %s is not a key record of %s", cfg.PrincipalKeyID, cfg.OrganizationID)
	}
	pub, err := keys.ParseJWK(payload["public_key_jwk"])
	if err != nil {
		return nil, fmt.Errorf("instance: principal key record %s: %w", cfg.PrincipalKeyID, err)
	}
	if err := signature.VerifyEntry(obj, 0, pub); err != nil {
		return nil, fmt.Errorf("instance: principal key record %s is not signed by the key it describes: %w", cfg.PrincipalKeyID, err)
	}
	return pub, nil
}

// Close closes the record.
func (in *Instance) Close() error { return in.Store.Close() }

// PrincipalPublicKey returns the principal's public key, as its key record
// states it. The private key is not here: package principal loads it for
// the principal's surface only.
func (in *Instance) PrincipalPublicKey() crypto.PublicKey {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.principalPublic
}

// AgentKey returns the primary agent's signing key.
func (in *Instance) AgentKey() crypto.Signer {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.agents[in.Config.AgentID].key
}

// TLSCertificate loads the instance's TLS certificate and key.
func (in *Instance) TLSCertificate() (tls.Certificate, error) {
	p := Paths{in.Dir}
	if st, err := os.Stat(p.Join(TLSKeyFile)); err == nil && st.Mode().Perm()&0o077 != 0 {
		return tls.Certificate{}, fmt.Errorf("instance: %s is readable by others; chmod 600 it", TLSKeyFile)
	}
	return tls.LoadX509KeyPair(p.Join(TLSCertFile), p.Join(TLSKeyFile))
}

// CertificatePool returns a pool holding only the instance's own
// certificate, for clients on this machine that call its HTTPS listener.
func (in *Instance) CertificatePool() (*x509.CertPool, error) {
	cert, err := LoadCertificate(in.Dir)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}
