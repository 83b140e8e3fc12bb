package principal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// Agents and keys (issue 16 items 3 and 4): acts of the principal, signed
// with the principal's key.
//
//   - AddAgent gives the instance a further agent: its own agent id and
//     key, an instance mandate to publish its key records under, its key
//     record signed by the principal, and its own MCP token. Mandates are
//     then issued to it (IssueMandate with its subject), delegated ones
//     included.
//   - RotateAgentKey gives an agent a new key: a new key id and key record,
//     and a later version of the old key's record, expired from now (or
//     revoked, with a revocation record, when the old key is compromised).
//     Every mandate issued to the agent under the old key is issued again
//     to the new one, the same in everything but its id, subject key and
//     status endpoint (children of a reissued parent follow it), and the
//     old mandate is revoked, its revocation record naming its successor.
//     Signatures the old key made stay valid: their status at signing is
//     the first version's.
//   - RevokeKey revokes a key without a successor; RevokeAgent revokes an
//     agent (revocation records for the key and the agent subject), its
//     mandates, and its MCP token.
//
// Counterparties learn of a change by pulling the key records (and the
// agent and key revocation records) at peering.KeyRecordsPath, at most
// peering.KeyRefresh after it, and at once when a message names a key
// they do not hold.

var agentIDPattern = regexp.MustCompile(`^agt_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)

// AgentAdded says what AddAgent made.
type AgentAdded struct {
	AgentID           string `json:"agent_id"`
	KeyID             string `json:"key_id"`
	InstanceMandateID string `json:"instance_mandate_id"`
	KeyFile           string `json:"key_file"`
	TokenFile         string `json:"token_file"`
}

// AddAgent adds the agent agentID to the instance (empty: a fresh id).
func (s *Surface) AddAgent(ctx context.Context, agentID string) (AgentAdded, error) {
	cfg := s.o.Config()
	if agentID == "" {
		id, err := envelope.NewID("agt")
		if err != nil {
			return AgentAdded{}, err
		}
		agentID = id
	}
	if !agentIDPattern.MatchString(agentID) {
		return AgentAdded{}, fmt.Errorf("principal: %q is not an agent identifier (agt_...)", agentID)
	}
	if cfg.HasAgent(agentID) {
		return AgentAdded{}, fmt.Errorf("principal: %s is already an agent of this instance", agentID)
	}
	k, kid, err := instance.NewKey()
	if err != nil {
		return AgentAdded{}, err
	}
	mid, err := envelope.NewID("mnd")
	if err != nil {
		return AgentAdded{}, err
	}
	now := s.o.Clock().UTC().Truncate(time.Second)
	// The files first and the configuration last: until config.json names
	// it, the agent does not exist, so a crash on the way leaves nothing
	// that acts.
	keyFile, tokenFile := cfg.AgentKeyPath(agentID), cfg.AgentTokenPath(agentID)
	if err := instance.WritePrivateKey(s.o.In.Dir, keyFile, k); err != nil {
		return AgentAdded{}, err
	}
	if err := instance.NewToken(s.o.In.Dir, tokenFile); err != nil {
		return AgentAdded{}, err
	}
	m, err := authority.Issue(instance.InstanceMandate(cfg, mid, agentID, kid, now), s.signer(), now)
	if err != nil {
		return AgentAdded{}, err
	}
	mb, err := canonical.Marshal(m)
	if err != nil {
		return AgentAdded{}, err
	}
	if err := s.o.Store.PutMandate(ctx, mb, "local"); err != nil {
		return AgentAdded{}, err
	}
	actor := envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: agentID, MandateID: mid}
	if _, err := s.putKeyRecord(ctx, envelope.KeyRecordSpec{KeyID: kid, Controller: cfg.OrganizationID, PublicKey: k.Public(), ValidFrom: now, CreatedBy: actor, CreatedAt: now}, nil); err != nil {
		return AgentAdded{}, err
	}
	err = instance.UpdateConfig(s.o.In.Dir, func(c *instance.Config) error {
		c.Agents = append(c.Agents, instance.AgentEntry{AgentID: agentID, KeyID: kid, InstanceMandateID: mid})
		return nil
	})
	if err != nil {
		return AgentAdded{}, err
	}
	if err := s.o.In.Reload(); err != nil {
		return AgentAdded{}, err
	}
	s.o.Log.Info("agent added", "agent_id", agentID, "key_id", kid)
	return AgentAdded{AgentID: agentID, KeyID: kid, InstanceMandateID: mid, KeyFile: keyFile, TokenFile: tokenFile}, nil
}

// putKeyRecord signs and stores the key record spec describes, as a later
// version of prev when prev is set (version prev's + 1, naming it), and
// returns its bytes. It is signed by the principal's key, or by signers,
// in their order, when any are given.
func (s *Surface) putKeyRecord(ctx context.Context, spec envelope.KeyRecordSpec, prev map[string]any, signers ...signature.Signer) ([]byte, error) {
	rec, err := envelope.NewKeyRecord(spec)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		v, _ := prev["version"].(json.Number).Int64()
		rec["version"] = json.Number(fmt.Sprint(v + 1))
		rec["previous_version_id"] = prev["id"]
	}
	if err := envelope.Seal(rec); err != nil {
		return nil, err
	}
	if len(signers) == 0 {
		signers = []signature.Signer{s.signer()}
	}
	for _, by := range signers {
		if err := signature.Sign(rec, by, "object_issuance", spec.CreatedAt); err != nil {
			return nil, err
		}
	}
	b, err := canonical.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if _, err := s.o.Store.PutObject(ctx, b, "local"); err != nil {
		return nil, err
	}
	return b, nil
}

// KeyRotation says what RotateAgentKey did.
type KeyRotation struct {
	AgentID  string `json:"agent_id"`
	OldKeyID string `json:"old_key_id"`
	NewKeyID string `json:"new_key_id"`
	// Retired is the later version of the old key's record: expired
	// from now, or revoked.
	Retired      string `json:"retired_key_record_id"`
	RevocationID string `json:"revocation_record_id,omitempty"`
	// Mandates maps each mandate reissued to the new key to its successor.
	Mandates map[string]string `json:"mandates_reissued"`
}

// RotateAgentKey gives agentID a new key (see the package section above).
// revoke marks the old key revoked rather than expired; why says why.
func (s *Surface) RotateAgentKey(ctx context.Context, agentID string, revoke bool, why string) (KeyRotation, error) {
	cfg := s.o.Config()
	oldKid, ok := cfg.KeyOf(agentID)
	if !ok {
		return KeyRotation{}, fmt.Errorf("principal: %s is not an active agent of this instance", agentID)
	}
	if why == "" {
		why = "key rotated by the principal"
	}
	instMandate, err := s.instanceMandateOf(ctx, agentID)
	if err != nil {
		return KeyRotation{}, err
	}
	k, kid, err := instance.NewKey()
	if err != nil {
		return KeyRotation{}, err
	}
	now := s.o.Clock().UTC().Truncate(time.Second)
	actor := envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: agentID, MandateID: instMandate}
	out := KeyRotation{AgentID: agentID, OldKeyID: oldKid, NewKeyID: kid, Mandates: map[string]string{}}
	if _, err := s.putKeyRecord(ctx, envelope.KeyRecordSpec{KeyID: kid, Controller: cfg.OrganizationID, PublicKey: k.Public(), ValidFrom: now, CreatedBy: actor, CreatedAt: now}, nil); err != nil {
		return KeyRotation{}, err
	}
	if out.Retired, out.RevocationID, err = s.retireKey(ctx, oldKid, actor, revoke, why, now); err != nil {
		return KeyRotation{}, err
	}
	// The new key signs from the moment config.json names it.
	if err := instance.WritePrivateKey(s.o.In.Dir, cfg.AgentKeyPath(agentID), k); err != nil {
		return KeyRotation{}, err
	}
	err = instance.UpdateConfig(s.o.In.Dir, func(c *instance.Config) error {
		if agentID == c.AgentID {
			c.AgentKeyID = kid
			return nil
		}
		for i := range c.Agents {
			if c.Agents[i].AgentID == agentID {
				c.Agents[i].KeyID = kid
			}
		}
		return nil
	})
	if err != nil {
		return KeyRotation{}, err
	}
	if err := s.o.In.Reload(); err != nil {
		return KeyRotation{}, err
	}
	if err := s.reissueTo(ctx, agentID, oldKid, kid, out.Mandates); err != nil {
		return out, err
	}
	s.o.Log.Info("agent key rotated", "agent_id", agentID, "old_key_id", oldKid, "new_key_id", kid, "revoked", revoke, "mandates_reissued", len(out.Mandates))
	return out, nil
}

// RevokeKey revokes one of this organisation's agent keys for good, with
// no successor (a compromised key whose agent stops): the key record's
// later version states revoked, and a revocation record says why.
func (s *Surface) RevokeKey(ctx context.Context, keyID, why string) (retired, revocation string, err error) {
	recs, err := s.ownKeyRecords(ctx)
	if err != nil {
		return "", "", err
	}
	var root map[string]any
	for _, r := range recs {
		if r["id"] == keyID {
			root = r
		}
	}
	if root == nil {
		return "", "", fmt.Errorf("principal: %s is not a key of this organisation", keyID)
	}
	by, _ := root["created_by"].(map[string]any)
	if why == "" {
		why = "key revoked by the principal"
	}
	actor := envelope.Actor{OrganizationID: s.o.Config().OrganizationID, AgentID: fmt.Sprint(by["agent_id"]), MandateID: fmt.Sprint(by["mandate_id"])}
	return s.retireKey(ctx, keyID, actor, true, why, s.o.Clock().UTC().Truncate(time.Second))
}

// RevokeAgent revokes a further agent of the instance: its current key,
// the agent itself (a revocation record with subject agent), every
// mandate issued to it, and its MCP token. The primary agent, which
// countersigns for the organisation, is rotated, never revoked.
func (s *Surface) RevokeAgent(ctx context.Context, agentID, why string) error {
	cfg := s.o.Config()
	if agentID == cfg.AgentID {
		return errors.New("principal: the primary agent countersigns for this organisation; rotate its key instead of revoking it")
	}
	kid, ok := cfg.KeyOf(agentID)
	if !ok {
		return fmt.Errorf("principal: %s is not an active agent of this instance", agentID)
	}
	if why == "" {
		why = "agent revoked by the principal"
	}
	if _, _, err := s.RevokeKey(ctx, kid, why); err != nil {
		return err
	}
	instMandate, err := s.instanceMandateOf(ctx, agentID)
	if err != nil {
		return err
	}
	now := s.o.Clock().UTC().Truncate(time.Second)
	_, b, err := s.statusRecord(status.RevocationSpec{
		SubjectType: "agent", SubjectID: agentID, Status: status.Revoked, EffectiveAt: now, Reason: why,
		CreatedBy: envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: agentID, MandateID: instMandate}, CreatedAt: now,
	})
	if err != nil {
		return err
	}
	if _, err := s.o.Store.PutObject(ctx, b, "local"); err != nil {
		return err
	}
	ms, err := s.o.Store.Mandates(ctx, "local")
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.SubjectAgentID == agentID && m.Status != store.StatusRevoked {
			if err := s.Revoke(ctx, m.ID, "its agent "+agentID+" is revoked"); err != nil {
				return err
			}
		}
	}
	err = instance.UpdateConfig(s.o.In.Dir, func(c *instance.Config) error {
		for i := range c.Agents {
			if c.Agents[i].AgentID == agentID {
				c.Agents[i].Revoked = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.o.Log.Info("agent revoked", "agent_id", agentID)
	return s.o.In.Reload()
}

// retireKey appends the later version of keyID's key record: revoked, or
// valid until now; when revoked, a revocation record too. It returns the
// new version's id and the revocation record's.
func (s *Surface) retireKey(ctx context.Context, keyID string, actor envelope.Actor, revoke bool, why string, now time.Time) (string, string, error) {
	recs, err := s.ownKeyRecords(ctx)
	if err != nil {
		return "", "", err
	}
	idx := verify.KeyChainOf(recs, keyID)
	if len(idx) == 0 {
		return "", "", fmt.Errorf("principal: no key record of %s is held", keyID)
	}
	vs := verify.KeyVersions(recs, keyID)
	latest := vs[len(vs)-1]
	var prev map[string]any
	for _, i := range idx {
		if recs[i]["id"] == latest.ID {
			prev = recs[i]
		}
	}
	if latest.Status == "revoked" || (!latest.Until.IsZero() && !now.Before(latest.Until) && !revoke) {
		return "", "", fmt.Errorf("principal: key %s is already %s", keyID, map[bool]string{true: "revoked", false: "expired"}[latest.Status == "revoked"])
	}
	id, err := envelope.NewID("key")
	if err != nil {
		return "", "", err
	}
	spec := envelope.KeyRecordSpec{KeyID: id, Controller: latest.Controller, PublicKey: latest.Public, ValidFrom: latest.From, ValidUntil: latest.Until, CreatedBy: actor, CreatedAt: now}
	if revoke {
		spec.Status = envelope.KeyRevoked
	} else {
		// Through the current second: what the old key signed in it, in
		// flight as the rotation happens, was signed in its interval.
		until := now.Add(time.Second)
		if !until.After(latest.From) {
			until = latest.From.Add(time.Second)
		}
		spec.ValidUntil = until
	}
	if _, err := s.putKeyRecord(ctx, spec, prev); err != nil {
		return "", "", err
	}
	if !revoke {
		return id, "", nil
	}
	rec, b, err := s.statusRecord(status.RevocationSpec{
		SubjectType: "key", SubjectID: keyID, Status: status.Revoked, EffectiveAt: now, Reason: why, CreatedBy: actor, CreatedAt: now,
	})
	if err != nil {
		return "", "", err
	}
	if _, err := s.o.Store.PutObject(ctx, b, "local"); err != nil {
		return "", "", err
	}
	return id, fmt.Sprint(rec["id"]), nil
}

// reissueTo issues again, to newKey, every active mandate of agentID under
// oldKey, and every active mandate whose parent is reissued, under the new
// parent; each old one is revoked, naming its successor. done maps old to
// new ids.
func (s *Surface) reissueTo(ctx context.Context, agentID, oldKey, newKey string, done map[string]string) error {
	return s.reissue(ctx, func(doc map[string]any) bool {
		subj, _ := doc["subject"].(map[string]any)
		return subj["agent_id"] == agentID && subj["key_id"] == oldKey
	}, func(req *authority.IssueRequest) { req.Subject.KeyID = newKey }, "a key rotation", done)
}

// reissue issues again every active trading mandate pick selects, with
// edit applied, and every active mandate whose parent it reissues, under
// the new parent (a parent before its children); each old one is revoked,
// its revocation naming its successor. The issuer is always this
// organisation's principal under its current key. done maps old to new
// ids.
func (s *Surface) reissue(ctx context.Context, pick func(map[string]any) bool, edit func(*authority.IssueRequest), after string, done map[string]string) error {
	for {
		ms, err := s.o.Store.Mandates(ctx, "local")
		if err != nil {
			return err
		}
		docs := map[string]map[string]any{}
		for _, rec := range ms {
			if rec.Status != store.StatusActive || done[rec.ID] != "" {
				continue
			}
			doc, err := canonical.DecodeObject(rec.Body)
			if err != nil {
				return err
			}
			if !instance.IsInstanceMandate(doc) {
				docs[rec.ID] = doc
			}
		}
		// pending: to be reissued and not yet done, so its children wait.
		pending := func(id string) bool { d, ok := docs[id]; return ok && pick(d) && done[id] == "" }
		progressed := false
		for _, rec := range ms {
			doc, ok := docs[rec.ID]
			if !ok {
				continue
			}
			parent, _ := doc["parent_mandate_id"].(string)
			mine := pick(doc)
			if (!mine && done[parent] == "") || pending(parent) {
				continue
			}
			req, err := issueRequestOf(doc)
			if err != nil {
				return err
			}
			if mine {
				edit(&req)
			}
			if p := done[parent]; p != "" {
				req.ParentMandateID = &p
			}
			req.MandateID, req.StatusEndpoint, req.Issuer = "", "", authority.Issuer{}
			m, err := s.IssueMandate(ctx, req)
			if err != nil {
				return fmt.Errorf("principal: reissuing %s after %s: %w", rec.ID, after, err)
			}
			done[rec.ID] = fmt.Sprint(m["id"])
			if err := s.Revoke(ctx, rec.ID, "reissued as "+done[rec.ID]+" after "+after); err != nil {
				return err
			}
			progressed = true
		}
		if !progressed {
			return nil
		}
	}
}

// issueRequestOf is the request a mandate document was issued from.
func issueRequestOf(doc map[string]any) (authority.IssueRequest, error) {
	m := map[string]any{}
	for k, v := range doc {
		switch k {
		case "spec_version", "id", "proof":
		default:
			m[k] = v
		}
	}
	if m["parent_mandate_id"] == nil {
		delete(m, "parent_mandate_id")
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return authority.IssueRequest{}, err
	}
	var req authority.IssueRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return authority.IssueRequest{}, err
	}
	return req, nil
}

// instanceMandateOf finds the instance mandate agentID publishes its key
// records under.
func (s *Surface) instanceMandateOf(ctx context.Context, agentID string) (string, error) {
	for _, a := range s.o.Config().Agents {
		if a.AgentID == agentID && a.InstanceMandateID != "" {
			return a.InstanceMandateID, nil
		}
	}
	ms, err := s.o.Store.Mandates(ctx, "local")
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		doc, err := canonical.DecodeObject(m.Body)
		if err != nil {
			return "", err
		}
		if instance.IsInstanceMandate(doc) && m.SubjectAgentID == agentID {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("principal: no instance mandate of %s is held", agentID)
}

// ownKeyRecords returns this organisation's key records, decoded.
func (s *Surface) ownKeyRecords(ctx context.Context) ([]map[string]any, error) {
	raws, err := s.o.Store.ObjectsOfType(ctx, "key_record")
	if err != nil {
		return nil, err
	}
	org := s.o.Config().OrganizationID
	var out []map[string]any
	for _, b := range raws {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			return nil, err
		}
		if p, _ := o["payload"].(map[string]any); p["controller_organization_id"] == org {
			out = append(out, o)
		}
	}
	return out, nil
}
