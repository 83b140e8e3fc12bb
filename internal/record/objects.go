package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

type object = map[string]any

func pl(o object) map[string]any {
	p, _ := o["payload"].(map[string]any)
	if p == nil {
		return map[string]any{}
	}
	return p
}

func str(v any) string { s, _ := v.(string); return s }

func sub(m map[string]any, k string) map[string]any {
	s, _ := m[k].(map[string]any)
	if s == nil {
		return map[string]any{}
	}
	return s
}

func idOf(o object) string { return str(o["id"]) }

func typeOf(o object) string { return str(o["object_type"]) }

func hashOf(o object) string { return str(o["content_hash"]) }

// party is an {organization_id, agent_id} reference.
func party(org, agent string) map[string]any {
	return map[string]any{"organization_id": org, "agent_id": agent}
}

// newObject builds, seals and signs an envelope object as this
// organisation's agent, under mandateID, and returns it with its bytes.
func (e *Engine) newObject(objectType, txn, mandateID string, payload map[string]any, purpose string, now time.Time, id string) (object, []byte, error) {
	cfg := e.o.Config()
	o, err := envelope.New(envelope.Spec{
		ObjectType: objectType, ID: id, TransactionID: txn, CreatedAt: now, Payload: payload,
		CreatedBy: envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, MandateID: mandateID},
	})
	if err != nil {
		return nil, nil, err
	}
	if err := envelope.Seal(o); err != nil {
		return nil, nil, err
	}
	s, err := e.o.AgentSigner()
	if err != nil {
		return nil, nil, err
	}
	if err := signature.Sign(o, s, purpose, now); err != nil {
		return nil, nil, err
	}
	b, err := canonical.Marshal(o)
	if err != nil {
		return nil, nil, err
	}
	// Work on the object as the counterparty will read it, and pass it
	// through our own gate before it leaves, so a bug here is caught here.
	o, err = canonical.DecodeObject(b)
	if err != nil {
		return nil, nil, err
	}
	if err := gateCheck(o); err != nil {
		return nil, nil, fmt.Errorf("record: own %s refused by the gate: %w", objectType, err)
	}
	return o, b, nil
}

// gateCheck runs the gate on one object. An agreement travels once with
// its first party's signature only, to be countersigned (canonical model
// §10 step 7); the formation protocol never records it before both
// parties signed.
func gateCheck(o object) error {
	sigs, _ := o["signatures"].([]any)
	opt := gate.Options{AwaitingSignatures: typeOf(o) == "agreement" && len(sigs) == 1}
	return gate.Envelope(o, opt).Err()
}

// sign adds this agent's signature to an object and returns its new bytes.
func (e *Engine) sign(o object, purpose string, now time.Time) ([]byte, error) {
	s, err := e.o.AgentSigner()
	if err != nil {
		return nil, err
	}
	if err := signature.Sign(o, s, purpose, now); err != nil {
		return nil, err
	}
	return canonical.Marshal(o)
}

// actDocument is the act document of an act (decisions.md 6), as both the
// actor and the counterparty build it: the acting mandate's scope decides
// whether category and geography are members (its first listed value),
// because the evaluator requires them on a mandate scoped on them and the
// counterparty must rebuild the same bytes from the mandate alone.
func actDocument(actionType, txn, counterparty string, terms map[string]any, refs map[string]any, mandate map[string]any) map[string]any {
	r := map[string]any{}
	for k, v := range refs {
		r[k] = v
	}
	scope := sub(mandate, "scope")
	if cs, ok := scope["categories"].([]any); ok && len(cs) > 0 {
		r["category"] = cs[0]
	}
	if gs, ok := scope["geographies"].([]any); ok && len(gs) > 0 {
		r["geography"] = gs[0]
	}
	return authority.ActDocument(actionType, txn, counterparty, terms, r)
}

// coreTerms is the proposed_terms of an obligation act: quantity, unit and
// the obligation's consideration as core (as the published reference
// builds them, so that a spending limit reads the same path in every act).
func coreTerms(quantity, unit string, total any) map[string]any {
	core := map[string]any{"quantity": quantity, "unit_code": unit}
	if total != nil {
		core["total"] = total
	}
	return map[string]any{"core": core}
}

// decodeMessage decodes every object of a received message (the carrier
// already refused non-canonical bytes).
func decodeMessage(objects [][]byte) ([]object, error) {
	out := make([]object, 0, len(objects))
	for i, b := range objects {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			return nil, reason.Refuse(fmt.Sprintf("object %d: %v", i, err))
		}
		out = append(out, o)
	}
	return out, nil
}

// checkReceived runs the gate on every object, requires every object to be
// created by the sending organisation, and verifies every signature under
// the keys this instance trusts for that organisation.
func (e *Engine) checkReceived(ctx context.Context, from string, objs []object) error {
	if err := e.o.Trusted.EnsureKeys(ctx, from); err != nil {
		e.log.Warn("could not fetch the peer's key records", "organization_id", from, "error", err)
	}
	for _, o := range objs {
		if err := gateCheck(o); err != nil {
			return err
		}
		by := sub(o, "created_by")
		if str(by["organization_id"]) != from {
			return refusef(reason.EvidenceSignatureInvalid, "%s %s is created by %v, but it came from %s", typeOf(o), idOf(o), by["organization_id"], from)
		}
		if err := e.verifySignatures(ctx, from, o); err != nil {
			return err
		}
	}
	return nil
}

// verifySignatures checks every signature on o under keys of org, the
// organisation that signed it.
func (e *Engine) verifySignatures(ctx context.Context, org string, o object) error {
	entries, err := signature.Entries(o)
	if err != nil {
		return refusef(reason.EvidenceSignatureInvalid, "%s: %v", idOf(o), err)
	}
	if len(entries) == 0 {
		return refusef(reason.EvidenceSignatureInvalid, "%s %s is unsigned", typeOf(o), idOf(o))
	}
	for i, en := range entries {
		kid := str(en["key_id"])
		k, err := e.o.ResolveKey(ctx, kid)
		if err != nil || k.OrganizationID != org && org != "" {
			return refusef(reason.EvidenceSignatureInvalid, "%s is signed with key %s, which %s has not vouched for", idOf(o), kid, org)
		}
		if k.Status != envelope.KeyActive {
			return refusef(reason.EvidenceSignatureInvalid, "%s is signed with key %s, which is %s", idOf(o), kid, k.Status)
		}
		if err := signature.VerifyEntry(o, i, k.Public); err != nil {
			return err
		}
	}
	return nil
}

// peerMandate returns a counterparty's mandate: held, or fetched from its
// instance and stored once its proof verifies under the pinned principal
// key of that organisation. Its parents are fetched the same way.
func (e *Engine) peerMandate(ctx context.Context, from, id string) (map[string]any, error) {
	for depth := 0; ; depth++ {
		m, err := e.peerMandateOne(ctx, from, id)
		if err != nil || depth > 0 {
			return m, err
		}
		// Make sure the chain is held too, so the evaluator resolves it.
		parent := str(m["parent_mandate_id"])
		for p := parent; p != "" && depth < 9; depth++ {
			pm, err := e.peerMandateOne(ctx, from, p)
			if err != nil {
				return nil, err
			}
			p = str(pm["parent_mandate_id"])
		}
		return m, nil
	}
}

func (e *Engine) peerMandateOne(ctx context.Context, from, id string) (map[string]any, error) {
	if rec, err := e.o.Store.GetMandate(ctx, id); err == nil {
		if rec.Origin != from {
			return nil, refusef(reason.PolicyDenied, "mandate %s is not %s's", id, from)
		}
		return canonical.DecodeObject(rec.Body)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if e.fetch == nil {
		return nil, refusef(reason.PolicyDenied, "mandate %s of %s is not held and cannot be fetched", id, from)
	}
	b, err := e.fetch.FetchMandate(ctx, from, id)
	if err != nil {
		return nil, refusef(reason.MandateStatusUnresolved, "mandate %s of %s could not be fetched: %v", id, from, err)
	}
	m, err := canonical.DecodeObject(b)
	if err != nil {
		return nil, refusef(reason.PolicyDenied, "mandate %s: %v", id, err)
	}
	if str(m["id"]) != id || str(m["represented_organization_id"]) != from || str(sub(m, "issuer")["organization_id"]) != from {
		return nil, refusef(reason.PolicyDenied, "the mandate fetched as %s is not %s's mandate %s", id, from, id)
	}
	if j := gate.Mandate(m); !j.Accepted() {
		return nil, j.Err()
	}
	k, err := e.o.ResolveKey(ctx, str(sub(m, "issuer")["key_id"]))
	if err != nil || k.OrganizationID != from || k.HolderID == "" || k.HolderID[:4] != "prn_" {
		return nil, refusef(reason.EvidenceSignatureInvalid, "mandate %s is issued under a key %s has not pinned as a principal key", id, from)
	}
	if err := signature.VerifyMandateProof(m, k.Public); err != nil {
		return nil, err
	}
	canon, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := e.o.Store.PutMandate(ctx, canon, from); err != nil {
		return nil, err
	}
	return m, nil
}

// checkDecision re-evaluates a counterparty's act from the act document
// this instance rebuilt, under the counterparty's mandate, and checks the
// counterparty's policy decision against it: an allow, signed by the
// acting agent, bound to the rebuilt act's hash, at most 60 seconds old.
// approval, when the message carried one, is presented to the evaluator.
func (e *Engine) checkDecision(ctx context.Context, from string, actor object, pol object, actionType, txn string, terms, refs map[string]any, approval object) error {
	by := sub(actor, "created_by")
	mandateID := str(by["mandate_id"])
	m, err := e.peerMandate(ctx, from, mandateID)
	if err != nil {
		return err
	}
	act := actDocument(actionType, txn, e.o.Config().OrganizationID, terms, refs, m)
	sig := firstSigner(actor)
	res := e.o.Evaluator().Evaluate(ctx, authority.Request{
		Mandate:  m,
		Act:      act,
		Actor:    authority.Actor{OrganizationID: from, AgentID: str(by["agent_id"]), KeyID: sig},
		Approval: approval,
	})
	if res.Decision != authority.Allow {
		return res.Err()
	}
	if pol == nil {
		return refusef(reason.PolicyDenied, "no policy decision travels with the %s act", actionType)
	}
	p := pl(pol)
	if str(p["decision"]) != string(authority.Allow) || str(p["action_hash"]) != res.ActionHash {
		return refusef(reason.PolicyDenied, "the policy decision %s is not an allow of this %s act (action hash %s)", idOf(pol), actionType, res.ActionHash)
	}
	ids, _ := p["mandate_ids"].([]any)
	if len(ids) == 0 || str(ids[0]) != mandateID {
		return refusef(reason.PolicyDenied, "the policy decision %s is not made under mandate %s", idOf(pol), mandateID)
	}
	if firstSigner(pol) != sig || str(sub(pol, "created_by")["agent_id"]) != str(by["agent_id"]) {
		return refusef(reason.EvidenceSignatureInvalid, "the policy decision %s is not signed by the acting agent", idOf(pol))
	}
	if err := authority.FreshEnough(pol, e.o.Clock()); err != nil {
		return err
	}
	return nil
}

func firstSigner(o object) string {
	sigs, _ := o["signatures"].([]any)
	if len(sigs) == 0 {
		return ""
	}
	s, _ := sigs[0].(map[string]any)
	return str(s["key_id"])
}

// ownDecision evaluates this organisation's own act and, on allow, returns
// the shareable signed policy decision for it. A deny or hold stays here:
// only its codes are returned, as a refusal, to the agent.
func (e *Engine) ownDecision(ctx context.Context, mandate map[string]any, actionType, txn, counterparty string, terms, refs map[string]any, approval object, seq int) (object, []byte, authority.Result, error) {
	act := actDocument(actionType, txn, counterparty, terms, refs, mandate)
	cfg := e.o.Config()
	res := e.o.Evaluator().Evaluate(ctx, authority.Request{
		Mandate: mandate, Act: act, Approval: approval,
		Actor: authority.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, KeyID: cfg.AgentKeyID},
	})
	if res.Decision != authority.Allow {
		return nil, nil, res, res.Err()
	}
	s, err := e.o.AgentSigner()
	if err != nil {
		return nil, nil, res, err
	}
	pol, err := authority.NewSharedDecision(res, s, seq)
	if err != nil {
		return nil, nil, res, err
	}
	b, err := canonical.Marshal(pol)
	if err != nil {
		return nil, nil, res, err
	}
	return pol, b, res, nil
}

// ownMandate returns one of this agent's mandates.
func (e *Engine) ownMandate(ctx context.Context, id string) (map[string]any, error) {
	return e.o.AgentMandate(ctx, id)
}

// load returns a stored object.
func (e *Engine) load(ctx context.Context, id string) (object, []byte, error) {
	b, err := e.o.Store.GetObject(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	o, err := canonical.DecodeObject(b)
	return o, b, err
}
