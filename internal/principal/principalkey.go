package principal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/verify"
)

// Rotating the principal's own key (issue 16 item 4; docs/record-protocol.md,
// "Approvals, agents and keys (issue 16, items 2–5)" item 5).
//
// A counterparty trusts this organisation's keys because its peer file pins
// the principal key, so the successor has to reach it on that key's word:
//
//  1. the new key and its file, keys/principal-<key id>.pem, mode 0600;
//  2. the new key's key_record, signed first by the new key itself (a
//     principal's key record is self-signed: that is how every reader tells
//     a principal key from an agent's) and then by the current principal
//     key, which vouches for its successor;
//  3. config.json names the new key id and file, in one atomic rewrite:
//     from here on the principal signs with the new key;
//  4. Finish: every other principal key of this organisation still active
//     gets a later version of its record, expired from now, signed with
//     the new key; peer.json pins every principal key this organisation
//     has had (what a retired key signed, agent key records above all, must
//     stay trusted by a counterparty that pins the file afresh); every
//     active mandate a retired principal key issued is issued again under
//     the new one and the old revoked, naming its successor (a mandate
//     whose issuer key is no longer active authorises nothing: package
//     authority); the retired keys' private files are deleted.
//
// A counterparty learns of it from the key records it fetches (within
// peering.KeyRefresh, or at once on an unknown key): a self-signed key
// record that a pinned principal key, still active by the records held,
// also signed is a successor, and the counterparty pins it in its peer file
// (peering.TrustedKeys). Instance mandates stay as they are: they are never
// evaluated as authority, only named as the creator of key records.
//
// A crash before step 3 leaves the old key in use and an unused successor
// published; one after it leaves the rotation unfinished. Either way,
// running the rotation again rotates once more, and its step 4 retires
// every principal key but the new one, the unused successor and the
// interrupted rotation's included.
//
// A compromised principal key cannot be rotated this way: whoever holds it
// could vouch for a successor of their own. Its remedy is a new peer file
// handed to each counterparty out of band; RotatePrincipalKey refuses
// revoke for that reason.

// PrincipalRotation says what RotatePrincipalKey did.
type PrincipalRotation struct {
	OldKeyID string `json:"old_key_id"`
	NewKeyID string `json:"new_key_id"`
	// KeyFile is the new key's file in the state directory.
	KeyFile string `json:"key_file"`
	// Retired maps each principal key retired to the later version of its
	// key record that says so.
	Retired map[string]string `json:"retired_key_records"`
	// Mandates maps each mandate reissued under the new key to its successor.
	Mandates map[string]string `json:"mandates_reissued"`
}

// ErrCompromisedPrincipal refuses a revoking rotation of the principal key.
var ErrCompromisedPrincipal = errors.New("principal: a compromised principal key cannot vouch for its successor; make a new peer file and hand it to each counterparty out of band")

// testingOnlyStopRotation, when set, is called after each step of a
// principal key rotation; an error stops the rotation there, as a crash
// would.
var testingOnlyStopRotation func(step string) error

func stopAt(step string) error {
	if testingOnlyStopRotation == nil {
		return nil
	}
	return testingOnlyStopRotation(step)
}

// RotatePrincipalKey gives the principal a new key (see above). revoke is
// refused with ErrCompromisedPrincipal; why says why, in the records.
func (s *Surface) RotatePrincipalKey(ctx context.Context, revoke bool, why string) (PrincipalRotation, error) {
	if revoke {
		return PrincipalRotation{}, ErrCompromisedPrincipal
	}
	if why == "" {
		why = "principal key rotated by the principal"
	}
	cfg := s.o.Config()
	out := PrincipalRotation{OldKeyID: cfg.PrincipalKeyID, Retired: map[string]string{}, Mandates: map[string]string{}}
	k, kid, err := instance.NewKey()
	if err != nil {
		return out, err
	}
	next, err := signature.NewSigner(kid, k)
	if err != nil {
		return out, err
	}
	out.NewKeyID, out.KeyFile = kid, instance.PrincipalKeyFileFor(kid)
	if err := instance.WritePrivateKey(s.o.In.Dir, out.KeyFile, k); err != nil {
		return out, err
	}
	if err := stopAt("key-written"); err != nil {
		return out, err
	}
	actor, err := s.keyRecordActor(ctx)
	if err != nil {
		return out, err
	}
	now := s.o.Clock().UTC().Truncate(time.Second)
	// Self-signed first (instance.Open reads the first signature as the
	// key's own), then vouched for by the key it succeeds.
	spec := envelope.KeyRecordSpec{KeyID: kid, Controller: cfg.OrganizationID, PublicKey: k.Public(), ValidFrom: now, CreatedBy: actor, CreatedAt: now}
	if _, err := s.putKeyRecord(ctx, spec, nil, next, s.signer()); err != nil {
		return out, err
	}
	if err := stopAt("record-stored"); err != nil {
		return out, err
	}
	err = instance.UpdateConfig(s.o.In.Dir, func(c *instance.Config) error {
		c.PrincipalKeyID, c.PrincipalKeyFile = kid, out.KeyFile
		return nil
	})
	if err != nil {
		return out, err
	}
	if err := s.o.In.Reload(); err != nil {
		return out, err
	}
	s.mu.Lock()
	s.key = &Key{id: kid, public: k.Public(), signer: next}
	s.mu.Unlock()
	if err := stopAt("config-switched"); err != nil {
		return out, err
	}
	if err := s.finishRotation(ctx, why, &out); err != nil {
		return out, err
	}
	s.o.Log.Info("principal key rotated", "old_key_id", out.OldKeyID, "new_key_id", kid, "mandates_reissued", len(out.Mandates))
	return out, nil
}

// finishRotation is step 4: it retires every principal key of this
// organisation but the current one that is still active, pins them all in
// peer.json, reissues the mandates they issued, and deletes their files.
// With nothing left to do it changes nothing.
func (s *Surface) finishRotation(ctx context.Context, why string, out *PrincipalRotation) error {
	cfg := s.o.Config()
	recs, err := s.ownKeyRecords(ctx)
	if err != nil {
		return err
	}
	actor, err := s.keyRecordActor(ctx)
	if err != nil {
		return err
	}
	now := s.o.Clock().UTC().Truncate(time.Second)
	var pinned []instance.PrincipalKey
	var retired []string
	for _, r := range recs {
		id, _ := r["id"].(string)
		payload, _ := r["payload"].(map[string]any)
		pub, err := keys.ParseJWK(payload["public_key_jwk"])
		if err != nil {
			return fmt.Errorf("principal: own key record %s: %w", id, err)
		}
		if !signature.SelfSigned(r, pub) {
			continue // an agent's key
		}
		pinned = append(pinned, instance.PrincipalKey{KeyID: id, Public: pub})
		if id == cfg.PrincipalKeyID {
			continue
		}
		retired = append(retired, id)
		if st, _, _ := verify.KeyStatusNow(verify.KeyVersions(recs, id), id, now); st != envelope.KeyActive {
			continue
		}
		v, _, err := s.retireKey(ctx, id, actor, false, why, now)
		if err != nil {
			return err
		}
		out.Retired[id] = v
	}
	if err := stopAt("retired"); err != nil {
		return err
	}
	if err := instance.WriteOwnPeerFile(s.o.In.Dir, cfg, pinned); err != nil {
		return err
	}
	err = s.reissue(ctx, func(doc map[string]any) bool {
		iss, _ := doc["issuer"].(map[string]any)
		kid, _ := iss["key_id"].(string)
		return slices.Contains(retired, kid)
	}, func(*authority.IssueRequest) {}, "a principal key rotation", out.Mandates)
	if err != nil {
		return err
	}
	if err := stopAt("reissued"); err != nil {
		return err
	}
	// The retired keys' private halves: nothing they sign now is valid,
	// so nothing keeps them. Every principal key file but the current
	// one goes, also a successor's written by a rotation stopped before
	// its key record was (a key nobody knows of).
	files := []string{instance.PrincipalKeyFile}
	for _, id := range retired {
		files = append(files, instance.PrincipalKeyFileFor(id))
	}
	strays, err := filepath.Glob(instance.Paths{Dir: s.o.In.Dir}.Join(instance.PrincipalKeyFileFor("*")))
	if err != nil {
		return err
	}
	for _, f := range strays {
		rel, err := filepath.Rel(s.o.In.Dir, f)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	for _, f := range files {
		if f == keyFileOf(cfg) {
			continue
		}
		if err := os.Remove(instance.Paths{Dir: s.o.In.Dir}.Join(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// keyRecordActor is who creates this organisation's principal key records:
// the primary agent, under its instance mandate (as at bootstrap).
func (s *Surface) keyRecordActor(ctx context.Context) (envelope.Actor, error) {
	cfg := s.o.Config()
	m, err := s.instanceMandateOf(ctx, cfg.AgentID)
	if err != nil {
		return envelope.Actor{}, err
	}
	return envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, MandateID: m}, nil
}
