package instance

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

func TestInitCreatesStateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "northstar")
	sum, err := Init(dir, InitOptions{OrganizationID: "org_northstar"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.AgentID != "agt_northstar_agent" || !strings.HasPrefix(sum.AgentKeyID, "key_") || sum.PrincipalKeyID == sum.AgentKeyID {
		t.Fatalf("summary %+v", sum)
	}
	for _, f := range []string{PrincipalKeyFile, AgentKeyFile, TLSKeyFile, AgentTokenFile, AdminTokenFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	in, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Config.OrganizationID != "org_northstar" {
		t.Fatal(in.Config)
	}
	if _, err := in.TLSCertificate(); err != nil {
		t.Fatal(err)
	}
	agentTok, _ := LoadToken(dir, AgentTokenFile)
	adminTok, _ := LoadToken(dir, AdminTokenFile)
	if agentTok == adminTok || len(agentTok) < 40 {
		t.Fatal("tokens must be distinct and long")
	}
	if !TokenEqual(agentTok, agentTok) || TokenEqual(adminTok, agentTok) || TokenEqual("", "") {
		t.Fatal("TokenEqual")
	}
	// The database never holds private key material.
	db, _ := os.ReadFile(filepath.Join(dir, DatabaseFile))
	if strings.Contains(string(db), "PRIVATE KEY") {
		t.Fatal("private key in the database")
	}
	// The peer file validates and pins the principal key.
	data, _ := os.ReadFile(sum.PeerFile)
	p, err := ParsePeerFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if p.OrganizationID != "org_northstar" || len(p.PrincipalKeyThumbprints) != 1 {
		t.Fatalf("%+v", p)
	}
	if strings.Contains(string(data), `"d"`) {
		t.Fatal("peer file carries a private member")
	}
}

func TestInitRefusesExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "something"), []byte("x"), 0o600)
	if _, err := Init(dir, InitOptions{OrganizationID: "org_delta"}); !errors.Is(err, ErrExists) {
		t.Fatalf("init over a non-empty directory: %v", err)
	}
	dir2 := filepath.Join(t.TempDir(), "d")
	if _, err := Init(dir2, InitOptions{OrganizationID: "org_delta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(dir2, InitOptions{OrganizationID: "org_delta"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second init: %v", err)
	}
}

func TestInitRefusesBadInput(t *testing.T) {
	for _, o := range []InitOptions{
		{OrganizationID: "northstar"},
		{OrganizationID: "org_x"},
		{OrganizationID: "org_ok1", MCPAddr: "0.0.0.0:7401"},
		{OrganizationID: "org_ok1", PublicURL: "http://example.test:7402"},
		{OrganizationID: "org_ok1", AgentID: "prn_wrong"},
	} {
		if _, err := Init(filepath.Join(t.TempDir(), "s"), o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}

func TestPeers(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")
	if _, err := Init(a, InitOptions{OrganizationID: "org_alpha"}); err != nil {
		t.Fatal(err)
	}
	sb, err := Init(b, InitOptions{OrganizationID: "org_bravo", MCPAddr: "127.0.0.1:7501", PeerAddr: "127.0.0.1:7502", AdminAddr: "127.0.0.1:7503"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(sb.PeerFile)
	if _, err := AddPeer(a, data); err != nil {
		t.Fatal(err)
	}
	if _, err := AddPeer(a, data); err != nil {
		t.Fatalf("adding the same peer file twice: %v", err)
	}
	own, _ := os.ReadFile(filepath.Join(a, PeerFile))
	if _, err := AddPeer(a, own); err == nil {
		t.Fatal("pinned our own organisation as a peer")
	}
	changed := strings.Replace(string(data), "7502", "7999", 1)
	if _, err := AddPeer(a, []byte(changed)); err == nil {
		t.Fatal("silently re-pinned a peer")
	}
	bad := strings.Replace(string(data), "https://", "http://", 1)
	if _, err := ParsePeerFile([]byte(bad)); err == nil {
		t.Fatal("accepted a plain-http peer")
	}
	ps, err := Peers(a)
	if err != nil || len(ps) != 1 || ps[0].OrganizationID != "org_bravo" {
		t.Fatalf("%v %v", ps, err)
	}
}

func TestInitIssuesInstanceMandateAndKeyRecords(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	sum, err := Init(dir, InitOptions{OrganizationID: "org_delta"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	recs, err := in.Store.ObjectsOfType(ctx, "key_record")
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d key records, %v", len(recs), err)
	}
	ms, _ := in.Store.Mandates(ctx, "local")
	if len(ms) != 1 {
		t.Fatalf("%d mandates", len(ms))
	}
	m, _ := canonical.DecodeObject(ms[0].Body)
	if !IsInstanceMandate(m) {
		t.Fatal("the init mandate is not the instance mandate")
	}
	// The principal key is read from its file: the opened instance holds
	// its public half only, as the key record states it.
	principal, err := keys.ReadPrivateFile(filepath.Join(dir, PrincipalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !principal.Public().(*ecdsa.PublicKey).Equal(in.PrincipalPublicKey()) {
		t.Fatal("the instance's principal public key is not the key file's")
	}
	if err := signature.VerifyMandateProof(m, principal.Public()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, b := range recs {
		obj, _ := canonical.DecodeObject(b)
		if err := signature.VerifyEntry(obj, 0, principal.Public()); err != nil {
			t.Fatal(err)
		}
		if obj["created_by"].(map[string]any)["mandate_id"] != m["id"] {
			t.Fatal("key record does not name the instance mandate")
		}
		seen[obj["id"].(string)] = true
	}
	if !seen[sum.AgentKeyID] || !seen[sum.PrincipalKeyID] {
		t.Fatalf("key records %v", seen)
	}
}

// TestOpenNeverReadsThePrincipalKey: the instance every runtime builds on
// opens, with the principal's public key, when keys/principal.pem is
// gone; its public key comes from the principal's key record, which must
// be signed by that key and controlled by this organisation.
func TestOpenNeverReadsThePrincipalKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if _, err := Init(dir, InitOptions{OrganizationID: "org_delta"}); err != nil {
		t.Fatal(err)
	}
	principal, err := keys.ReadPrivateFile(filepath.Join(dir, PrincipalKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, PrincipalKeyFile), filepath.Join(t.TempDir(), "elsewhere.pem")); err != nil {
		t.Fatal(err)
	}
	in, err := Open(dir)
	if err != nil {
		t.Fatalf("Open without the principal key file: %v", err)
	}
	if !principal.Public().(*ecdsa.PublicKey).Equal(in.PrincipalPublicKey()) {
		t.Fatal("the principal's public key is not the one its key file held")
	}

	in.Close()

	// config.json naming a principal key id whose key record is missing,
	// is not signed by the key it describes (the agent's, signed by the
	// principal), or is another organisation's: the record is not this
	// state directory's, and the instance does not open.
	ctx := context.Background()
	other := filepath.Join(t.TempDir(), "o")
	osum, err := Init(other, InitOptions{OrganizationID: "org_bravo"})
	if err != nil {
		t.Fatal(err)
	}
	oin, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := oin.Store.GetObject(ctx, "", osum.PrincipalKeyID) // a key record: bound to no transaction
	oin.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, foreign, "peer"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, keyID := range []string{"key_0123456789abcdef01234567", cfg.AgentKeyID, osum.PrincipalKeyID} {
		c := cfg
		c.PrincipalKeyID = keyID
		if err := writeConfig(dir, c); err != nil {
			t.Fatal(err)
		}
		if in, err := Open(dir); err == nil {
			in.Close()
			t.Errorf("opened with principal_key_id %s", keyID)
		}
	}
}
