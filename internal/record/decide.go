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
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// newObject builds, seals and signs an envelope object as this
// organisation's agent, under mandateID, and returns its view. id may name
// the object (a commitment whose id the agreement named); empty draws one.
func (e *Engine) newObject(t protocol.ObjectType, txn, mandateID string, payload map[string]any, purpose string, now time.Time, id string) (*Obj, error) {
	return e.newVersion(t, txn, mandateID, payload, purpose, now, id, nil)
}

// newVersion is newObject for a later version of prev (nil: a first
// version): version prev's + 1, previous_version_id prev's id.
func (e *Engine) newVersion(t protocol.ObjectType, txn, mandateID string, payload map[string]any, purpose string, now time.Time, id string, prev *Obj) (*Obj, error) {
	cfg := e.o.Config()
	spec := envelope.Spec{
		ObjectType: string(t), ID: id, TransactionID: txn, CreatedAt: now, Payload: payload,
		CreatedBy: envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, MandateID: mandateID},
	}
	if prev != nil {
		spec.PreviousVersionID, spec.Version = prev.ID(), intOf(prev.m["version"])+1
	}
	m, err := envelope.New(spec)
	if err != nil {
		return nil, err
	}
	if err := envelope.Seal(m); err != nil {
		return nil, err
	}
	s, err := e.o.AgentSigner()
	if err != nil {
		return nil, err
	}
	if err := signature.Sign(m, s, purpose, now); err != nil {
		return nil, err
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	// Work on the object as the counterparty will read it, and pass it
	// through the gate before it leaves, so a bug here is caught here.
	o, err := parse(b)
	if err != nil {
		return nil, err
	}
	if err := gateCheck(o, true); err != nil {
		return nil, fmt.Errorf("record: own %s refused by the gate: %w", t, err)
	}
	return o, nil
}

// gateCheck runs the gate on one object, as the bilateral scope reads it:
// no kernel_annotations (canonical model §9.1 rule 3). An agreement travels
// once with its first party's signature only, to be countersigned
// (canonical model §10 step 7); the protocol never records it before both
// signed.
// own says this instance built the object (gate.Options.OwnObject).
func gateCheck(o *Obj, own bool) error {
	opt := gate.Options{
		AwaitingSignatures: o.Type() == protocol.Agreement && len(o.Signatures()) == 1,
		OwnObject:          own,
	}
	if _, annotated := o.m["kernel_annotations"]; annotated {
		// Bilaterally nothing may annotate an object (role scopes §4.4): an
		// annotation on a received object is a forgery whatever it says.
		// Refused, never stripped: what is stored is what was received.
		return refusef(reason.AnnotationForged, "%s %s carries kernel_annotations, which no bilateral object carries", o.Type(), o.ID())
	}
	return gate.Envelope(o.m, opt).Err()
}

// countersign adds this agent's signature to an object and returns its
// new view.
func (e *Engine) countersign(o *Obj, purpose string, now time.Time) (*Obj, error) {
	s, err := e.o.AgentSigner()
	if err != nil {
		return nil, err
	}
	m, err := canonical.DecodeObject(o.raw) // a copy: the view stays read-only
	if err != nil {
		return nil, err
	}
	if err := signature.Sign(m, s, purpose, now); err != nil {
		return nil, err
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &Obj{raw: b, m: m}, nil
}

// ownMandate returns one of this agent's mandates.
func (e *Engine) ownMandate(ctx context.Context, id string) (map[string]any, error) {
	return e.o.AgentMandate(ctx, id)
}

// decision is an act decided by this organisation's own evaluator.
type decision struct {
	pol *Obj
	res authority.Result
	doc map[string]any // the act document evaluated
}

// ownDecision evaluates this organisation's own act and, on allow, returns
// the shareable signed policy decision for it, made for position seq of
// the transaction stream. A deny or hold stays here: only its codes are
// returned, as a refusal, to the agent.
func (e *Engine) ownDecision(ctx context.Context, mandate map[string]any, act protocol.Act, txn, counterparty string, terms, refs map[string]any, approval *Obj, seq int) (decision, error) {
	doc := authority.Document(string(act), txn, counterparty, terms, refs, mandate)
	cfg := e.o.Config()
	req := authority.Request{
		Mandate: mandate, Act: doc,
		Actor: authority.Actor{OrganizationID: cfg.OrganizationID, AgentID: cfg.AgentID, KeyID: cfg.AgentKeyID},
	}
	if approval != nil {
		req.Approval = approval.m
	}
	res := e.o.Evaluator().Evaluate(ctx, req)
	d := decision{res: res, doc: doc}
	if res.Decision != authority.Allow {
		return d, res.Err()
	}
	s, err := e.o.AgentSigner()
	if err != nil {
		return d, err
	}
	pol, err := authority.NewSharedDecision(res, s, seq)
	if err != nil {
		return d, err
	}
	d.pol, err = viewOf(pol)
	return d, err
}

// actDoc is an act as the counterparty's instance rebuilds it.
type actDoc struct {
	name  protocol.Act
	terms map[string]any
	refs  map[string]any
}

// checkDecision re-evaluates a counterparty's act, rebuilt by this
// instance, under the counterparty's mandate with its live status, and
// checks the counterparty's policy decision against it: an allow, signed
// by the acting agent, under that mandate, bound to the rebuilt act's
// hash, at most 60 seconds old. approval, when the message carried one, is
// presented to the evaluator. actor is the object whose created_by names
// the acting agent and mandate (the event, or the act's own object).
// The decision's binding to the event (its action_hash, stream and
// position) is the verifier's rule, checked by verify.Extend.
func (e *Engine) checkDecision(ctx context.Context, from string, actor, pol *Obj, a actDoc, txn string, approval *Obj, uncached bool) error {
	mandateID := actor.Mandate()
	m, err := e.peerMandate(ctx, from, mandateID)
	if err != nil {
		return err
	}
	doc := authority.Document(string(a.name), txn, e.o.Config().OrganizationID, a.terms, a.refs, m)
	req := authority.Request{
		Mandate: m, Act: doc,
		Actor: authority.Actor{OrganizationID: from, AgentID: actor.Agent(), KeyID: actor.FirstSigner()},
	}
	if approval != nil {
		req.Approval = approval.m
	}
	ev := e.o.Evaluator()
	if uncached {
		ev = ev.Uncached()
	}
	res := ev.Evaluate(ctx, req)
	if res.Decision != authority.Allow {
		return res.Err()
	}
	if pol == nil {
		return refusef(reason.PolicyDenied, "no policy decision travels with the %s act", a.name)
	}
	p := pol.Payload()
	if str(p["decision"]) != string(authority.Allow) || str(p["action_hash"]) != res.ActionHash {
		return refusef(reason.PolicyDenied, "the policy decision %s is not an allow of this %s act (action hash %s)", pol.ID(), a.name, res.ActionHash)
	}
	ids, _ := p["mandate_ids"].([]any)
	if len(ids) == 0 || str(ids[0]) != mandateID {
		return refusef(reason.PolicyDenied, "the policy decision %s is not made under mandate %s", pol.ID(), mandateID)
	}
	if pol.FirstSigner() != actor.FirstSigner() || pol.Agent() != actor.Agent() {
		return refusef(reason.EvidenceSignatureInvalid, "the policy decision %s is not signed by the acting agent", pol.ID())
	}
	return authority.FreshEnough(pol.m, e.o.Clock())
}

// peerMandate returns a counterparty's mandate: held, or fetched from its
// instance and stored once its proof verifies under the pinned principal
// key of that organisation. Its parents are fetched the same way, so the
// evaluator and the verifier resolve the chain.
func (e *Engine) peerMandate(ctx context.Context, from, id string) (map[string]any, error) {
	m, err := e.peerMandateOne(ctx, from, id)
	if err != nil {
		return nil, err
	}
	for p, depth := str(m["parent_mandate_id"]), 0; p != "" && depth < 9; depth++ {
		pm, err := e.peerMandateOne(ctx, from, p)
		if err != nil {
			return nil, err
		}
		p = str(pm["parent_mandate_id"])
	}
	return m, nil
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
	if err != nil || k.OrganizationID != from || !isHolder(k.HolderID, "prn_") {
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

// isHolder reports whether a key's holder id has the given prefix (prn_
// for a principal, agt_ for an agent); a holder id shorter than its prefix
// is no holder.
func isHolder(holder, prefix string) bool {
	return len(holder) >= len(prefix) && holder[:len(prefix)] == prefix
}

// checkAuthors requires every object of a received message to be created
// by the sending organisation, under a mandate of that organisation issued
// to the creating agent and its signing key (authority.CheckCreator, with
// the mandate resolved over this instance's own channel), and to pass the
// gate. Their signatures are verified, with every other rule of the
// verifier, by verify.Extend.
func (e *Engine) checkAuthors(ctx context.Context, from string, objs []*Obj) error {
	for _, o := range objs {
		if err := gateCheck(o, false); err != nil {
			return err
		}
		if o.Org() != from {
			return refusef(reason.EvidenceSignatureInvalid, "%s %s is created by %s, but it came from %s", o.Type(), o.ID(), o.Org(), from)
		}
		if len(o.Signatures()) == 0 {
			return refusef(reason.EvidenceSignatureInvalid, "%s %s is unsigned", o.Type(), o.ID())
		}
		for _, s := range o.Signatures() {
			k, err := e.o.ResolveKey(ctx, str(s["key_id"]))
			switch {
			case err != nil || k.OrganizationID != from:
				return refusef(reason.EvidenceSignatureInvalid, "%s is signed with key %v, which %s has not vouched for", o.ID(), s["key_id"], from)
			case k.Status != envelope.KeyActive:
				return refusef(reason.EvidenceSignatureInvalid, "%s is signed with key %v, which is %s", o.ID(), s["key_id"], k.Status)
			}
		}
		m, err := e.peerMandate(ctx, from, o.Mandate())
		if err != nil {
			return err
		}
		if err := authority.CheckCreator(o.m, m); err != nil {
			return refusef(reason.EvidenceSignatureInvalid, "%v", err)
		}
	}
	return nil
}
