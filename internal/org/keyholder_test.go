package org

import (
	"testing"
	"time"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
)

// A key record is a principal's only when it carries a signature that
// verifies under the key it publishes. One whose entry merely names the
// record's own key, signed by another key (here the principal's), is the
// agent's who made it, so that the agent's revocation still reaches it.
func TestKeyHolderVerifiesTheSelfSignature(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	principal, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	record := func(keyID, agent string, signedBy func(keyID string) (signature.Signer, error)) map[string]any {
		t.Helper()
		k, err := keys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		spec := envelope.KeyRecordSpec{KeyID: keyID, Controller: "org_0123456789abcdef01234567", PublicKey: k.Public(), ValidFrom: now,
			CreatedBy: envelope.Actor{OrganizationID: "org_0123456789abcdef01234567", AgentID: agent, MandateID: "mnd_0123456789abcdef01234567"}, CreatedAt: now}
		rec, err := envelope.NewKeyRecord(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := envelope.Seal(rec); err != nil {
			t.Fatal(err)
		}
		by, err := signedBy(keyID)
		if err != nil {
			t.Fatal(err)
		}
		if by == nil {
			by, err = signature.NewSigner(keyID, k)
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := signature.Sign(rec, by, "object_issuance", now); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	own := func(string) (signature.Signer, error) { return nil, nil } // the key itself
	principalSigns := func(string) (signature.Signer, error) {
		return signature.NewSigner("key_00000000000000000000aaaa", principal)
	}
	claims := func(keyID string) (signature.Signer, error) { return signature.NewSigner(keyID, principal) }

	const agent = "agt_0123456789abcdef01234567"
	// The agent's revocation, as holderRevoked reads revocation records.
	revoked := []map[string]any{{"payload": map[string]any{"subject_type": "agent", "subject_id": agent, "status": "revoked", "effective_at": envelope.Timestamp(now)}}}
	for _, c := range []struct {
		name        string
		rec         map[string]any
		want        string
		revokedWith string // holderRevoked's answer under the agent's revocation
	}{
		{"self-signed", record("key_00000000000000000000bbbb", agent, own), "principal", ""},
		{"signed by the principal", record("key_00000000000000000000cccc", agent, principalSigns), agent, "revoked"},
		{"names itself, signed by another key", record("key_00000000000000000000dddd", agent, claims), agent, "revoked"},
	} {
		got := keyHolder(c.rec)
		if got != c.want {
			t.Errorf("%s: holder %q, want %q", c.name, got, c.want)
		}
		if st := holderRevoked(revoked, got, now.Add(time.Hour)); st != c.revokedWith {
			t.Errorf("%s: under the agent's revocation the key is %q, want %q", c.name, st, c.revokedWith)
		}
	}
}
