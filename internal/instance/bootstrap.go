package instance

import (
	"context"
	"crypto"
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// KeyRecordAction is the one act the instance mandate permits: publishing
// the organisation's own key records.
const KeyRecordAction = "key_record.issue"

// bootstrap issues what a new instance must hold before it can talk to
// anyone: an instance mandate from the principal to the agent that permits
// nothing but publishing key records, and the key_record objects of the
// principal and agent keys, signed by the principal.
//
// Why a mandate at all: every envelope names its creator's mandate
// (created_by.mandate_id), and a key record must exist before any trading
// mandate does, because a counterparty needs it to trust the agent key.
// Pointing at an identifier no mandate carries would leave a dangling
// reference in every record; a real, narrow, signed mandate keeps every
// reference resolvable and verifiable. It authorises no commercial act.
func bootstrap(ctx context.Context, st *store.Store, cfg Config, principal, agent crypto.Signer, now time.Time) error {
	now = now.UTC().Truncate(time.Second)
	ps, err := signature.NewSigner(cfg.PrincipalKeyID, principal)
	if err != nil {
		return err
	}
	id, err := envelope.NewID("mnd")
	if err != nil {
		return err
	}
	req := InstanceMandate(cfg, id, cfg.AgentID, cfg.AgentKeyID, now)
	m, err := authority.Issue(req, ps, now)
	if err != nil {
		return fmt.Errorf("instance: issue the instance mandate: %w", err)
	}
	mb, err := canonical.Marshal(m)
	if err != nil {
		return err
	}
	if err := st.PutMandate(ctx, mb, "local"); err != nil {
		return err
	}
	actor := envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, MandateID: id}
	for _, k := range []struct {
		id  string
		key crypto.Signer
	}{{cfg.PrincipalKeyID, principal}, {cfg.AgentKeyID, agent}} {
		rec, err := envelope.NewKeyRecord(envelope.KeyRecordSpec{
			KeyID: k.id, Controller: cfg.OrganizationID, PublicKey: k.key.Public(),
			ValidFrom: now, CreatedBy: actor, CreatedAt: now,
		})
		if err != nil {
			return err
		}
		if err := signature.Issue(rec, ps, now); err != nil {
			return err
		}
		b, err := canonical.Marshal(rec)
		if err != nil {
			return err
		}
		if _, err := st.PutObject(ctx, b, "local"); err != nil {
			return err
		}
	}
	return nil
}

// IsInstanceMandate reports whether a mandate is an instance mandate (it
// permits only KeyRecordAction), so that tools listing trading mandates can
// leave it out.
func IsInstanceMandate(m map[string]any) bool {
	acts, _ := m["actions"].([]any)
	return len(acts) == 1 && acts[0] == KeyRecordAction && strings.HasPrefix(fmt.Sprint(m["id"]), "mnd_")
}
