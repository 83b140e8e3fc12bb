package instance

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/partyd/party/internal/store"
)

// Instance is an opened state directory: configuration, keys and record.
// It is what the serve process, the stdio MCP server and the principal's
// command-line calls all build on.
type Instance struct {
	Dir    string
	Config Config
	Store  *store.Store

	principal crypto.Signer
	agent     crypto.Signer
}

// Open loads a state directory made by Init.
func Open(dir string) (*Instance, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	p := Paths{dir}
	principal, err := loadSigner(p.Join(PrincipalKeyFile))
	if err != nil {
		return nil, err
	}
	agent, err := loadSigner(p.Join(AgentKeyFile))
	if err != nil {
		return nil, err
	}
	st, err := store.Open(p.Join(DatabaseFile))
	if err != nil {
		return nil, err
	}
	return &Instance{Dir: dir, Config: cfg, Store: st, principal: principal, agent: agent}, nil
}

// Close closes the record.
func (in *Instance) Close() error { return in.Store.Close() }

// PrincipalKey returns the principal's signing key. Only the principal's
// surface (CLI and admin listener) may call it; the agent's tools never do.
func (in *Instance) PrincipalKey() crypto.Signer { return in.principal }

// AgentKey returns the agent's signing key.
func (in *Instance) AgentKey() crypto.Signer { return in.agent }

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
