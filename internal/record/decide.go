package record

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
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
	cfg := e.org.Config()
	agent, s, err := e.actorOf(context.Background(), mandateID)
	if err != nil {
		return nil, err
	}
	spec := envelope.Spec{
		ObjectType: string(t), ID: id, TransactionID: txn, CreatedAt: now, Payload: payload,
		CreatedBy: envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: agent, MandateID: mandateID},
	}
	if prev != nil {
		spec.PreviousVersionID, spec.Version = prev.ID(), object.Int(prev.Value()["version"])+1
	}
	m, err := envelope.New(spec)
	if err != nil {
		return nil, err
	}
	in, err := envelope.SealInput(m)
	if err != nil {
		return nil, err
	}
	if err := signature.SignOver(m, in, s, purpose, now); err != nil {
		return nil, err
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	// Work on the object as the counterparty will read it (viewOver: what
	// decoding its bytes gives), and pass it through the gate before it
	// leaves, so a bug here is caught here.
	o, err := e.viewOver(m, b)
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
	if _, annotated := o.Value()["kernel_annotations"]; annotated {
		// Bilaterally nothing may annotate an object (role scopes §4.4): an
		// annotation on a received object is a forgery whatever it says.
		// Refused, never stripped: what is stored is what was received.
		return refusef(reason.AnnotationForged, "%s %s carries kernel_annotations, which no bilateral object carries", o.Type(), o.ID())
	}
	return gate.Envelope(o.Value(), opt).Err()
}

// liveKey is the key status rule for a signature on a message this
// instance is asked to take into its record (canonical model §4 rules
// 6–7), judged by the functions the verifier judges with, over the key
// records held (refreshed from the counterparty at most KeyRefresh ago,
// and whenever it names a key not held): the key was active when it
// signed, at the entry's signed_at, by the version of its key record chain
// that governed then (else A202-EVIDENCE-SIGNATURE-INVALID); and it is
// active now (else A202-MANDATE-INACTIVE): a key revoked or expired since
// does not void what it signed before, which stays in both records and
// verifies, but it signs no new act.
func (e *Engine) liveKey(ctx context.Context, o *Obj, entry map[string]any, k authority.Key) error {
	kid := str(entry["key_id"])
	ks, err := e.org.KeyStanding(ctx, kid, str(entry["signed_at"]))
	if err != nil {
		return err
	}
	if ks.AtSigning == verify.NotCheckable && k.Status == envelope.KeyActive {
		// A pinned principal key of the counterparty, with no key record
		// here: the peer file vouches for it, active.
		return nil
	}
	if ks.AtSigning != verify.Verified {
		return refusef(reason.EvidenceSignatureInvalid, "%s is signed with key %s, which was not active when it signed: %s", o.ID(), kid, ks.AtSigningDetail)
	}
	if ks.Now != envelope.KeyActive {
		return refusef(reason.MandateInactive, "%s is signed with key %s, which is %s now and signs no new act: %s", o.ID(), kid, ks.Now, ks.NowDetail)
	}
	return nil
}

// countersignEvent is countersign for an event: the counterparty's event,
// with this instance's agent's event_append signature added.
func (e *Engine) countersignEvent(ev *Event, now time.Time) (*Event, error) {
	o, err := e.countersign(ev.View, protocol.PurposeEventAppend, now)
	if err != nil {
		return nil, err
	}
	return object.AsEvent(o), nil
}

// countersign adds this agent's signature to an object and returns its
// new view.
func (e *Engine) countersign(o *Obj, purpose string, now time.Time) (*Obj, error) {
	s, err := e.org.AgentSigner()
	if err != nil {
		return nil, err
	}
	m := signable(o)
	if err := signature.Sign(m, s, purpose, now); err != nil {
		return nil, err
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	return object.Over(b, m), nil
}

// signable is a copy of o's value for signature.Sign to add a signature
// to, so that the view stays read-only: Sign sets only the signatures
// member, so the top level is copied and that list clipped (its append
// then copies it); the rest is shared, and only read.
func signable(o *Obj) map[string]any {
	m := maps.Clone(o.Value())
	if list, ok := m["signatures"].([]any); ok {
		m["signatures"] = slices.Clip(list)
	}
	return m
}

// ownMandate returns one of this instance's agents' mandates that a may
// act under (Engine.mandateRecord).
func (e *Engine) ownMandate(ctx context.Context, a Actor, id string) (map[string]any, error) {
	rec, err := e.mandateRecord(ctx, a, id)
	if err != nil {
		return nil, err
	}
	// The stored mandate's view, shared like a peer's (peerMandateOne):
	// its readers only read it, and mandateBytes finds its bytes by it.
	o, err := e.parse(rec.Body)
	if err != nil {
		return nil, err
	}
	return o.Value(), nil
}

// mandateBytes returns the stored bytes m was decoded from, when m is the
// shared view of a stored mandate (ownMandate, peerMandateOne), so that
// the evaluator hashes them instead of encoding m again
// (authority.Request.MandateBytes); nil for any other map. The view is
// told by identity: the parsed view of the stored bytes must be m itself.
func (e *Engine) mandateBytes(ctx context.Context, m map[string]any) []byte {
	rec, err := e.db.GetMandate(ctx, str(m["id"]))
	if err != nil {
		return nil
	}
	o, err := e.parse(rec.Body)
	if err != nil || !sameMap(o.Value(), m) {
		return nil
	}
	return rec.Body
}

// sameMap reports whether a and b are one map (not two equal ones).
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// actorOf returns the agent that acts under one of this instance's
// mandates, its subject, and that agent's signer, whose key must be the
// one the mandate names: a mandate issued before its agent's key was
// rotated names the old key, and its successor is to be used instead
// (principal.RotateAgentKey).
func (e *Engine) actorOf(ctx context.Context, mandateID string) (string, signature.Signer, error) {
	subj, err := e.subjectOf(ctx, mandateID)
	if err != nil {
		return "", nil, err
	}
	s, err := e.org.SignerFor(subj.AgentID)
	if err != nil {
		return "", nil, refusef(reason.PolicyDenied, "mandate %s is issued to %s, which does not act on this instance", mandateID, subj.AgentID)
	}
	if s.KeyID() != subj.KeyID {
		return "", nil, refusef(reason.MandateInactive, "mandate %s binds key %s, but agent %s signs with %s now: its key was rotated; act under the mandate reissued to the new key (whoami)", mandateID, subj.KeyID, subj.AgentID, s.KeyID())
	}
	return subj.AgentID, s, nil
}

// subjectOf reads the subject of one of this instance's mandates (a
// mandate never changes, so it is read once).
func (e *Engine) subjectOf(ctx context.Context, mandateID string) (authority.Subject, error) {
	if v, ok := e.subjects.Load(mandateID); ok {
		return v.(authority.Subject), nil
	}
	rec, err := e.db.GetMandate(ctx, mandateID)
	if err != nil || rec.Origin != originLocal {
		return authority.Subject{}, refusef(reason.PolicyDenied, "mandate %s is not one this instance issued", mandateID)
	}
	m, err := canonical.DecodeObject(rec.Body)
	if err != nil {
		return authority.Subject{}, err
	}
	subj := authority.Subject{AgentID: str(object.Sub(m, "subject")["agent_id"]), KeyID: str(object.Sub(m, "subject")["key_id"])}
	if subj.AgentID == "" {
		return authority.Subject{}, refusef(reason.PolicyDenied, "mandate %s is issued to a principal; an agent acts only under its own", mandateID)
	}
	e.subjects.Store(mandateID, subj)
	return subj, nil
}

// decision is an act decided by this organisation's own evaluator.
type decision struct {
	pol *Obj
	res authority.Result
	doc map[string]any // the act document evaluated
	// approval is the approval that released a hold: the one presented,
	// or the one the principal gave for this exact act (found by its
	// action hash). It travels with the act.
	approval *Obj
}

// ownDecision evaluates this organisation's own act and, on allow, returns
// the shareable signed policy decision for it, made for position seq of
// the transaction stream. A deny or hold stays here: only its codes are
// returned, as a refusal, to the agent.
//
// Approvals on every act (issue 16): an act the mandate holds for approval
// goes through here whoever takes it, the agent through a tool or this
// instance in answer to the counterparty (the offeror's agreement.sign,
// the acceptor's commit). Without a presented approval, the latest request
// for this exact act decides: approved, its approval releases the hold
// (and travels with the act); pending or rejected, the act stays held; and
// with none, a pending request is filed for the principal's surfaces to
// show. The refusal names the request (reason.Refusal.ApprovalRequestID).
func (e *Engine) ownDecision(ctx context.Context, mandate map[string]any, act protocol.Act, txn, counterparty string, terms, refs map[string]any, approval *Obj, seq int) (decision, error) {
	d, s, refused, err := e.evaluateOwn(ctx, mandate, act, txn, counterparty, terms, refs, approval, true)
	if err != nil || refused != nil {
		return d, orErr(refused, err)
	}
	return e.signDecision(d, s, seq)
}

// mayDecide is ownDecision for an act taken only if it is allowed now (a
// rider the act can go without, rideIfAllowed): ok is false, and nothing
// is filed for the principal, when the evaluation denies the act or holds
// it without an approval already given for it.
func (e *Engine) mayDecide(ctx context.Context, mandate map[string]any, act protocol.Act, txn, counterparty string, terms, refs map[string]any, seq int) (decision, bool, error) {
	d, s, refused, err := e.evaluateOwn(ctx, mandate, act, txn, counterparty, terms, refs, nil, false)
	if err != nil || refused != nil {
		return d, false, err
	}
	d, err = e.signDecision(d, s, seq)
	return d, err == nil, err
}

// evaluateOwn evaluates this organisation's own act under mandate, by the
// agent the mandate names, with approval if one is presented. A hold
// without one is released by an approval already given for this exact act
// (releaseHold); failing that, a request is filed for the principal when
// file is set. refused is the refusal that keeps the act here (a deny, a
// hold), nil when it is allowed; s signs the decision.
func (e *Engine) evaluateOwn(ctx context.Context, mandate map[string]any, act protocol.Act, txn, counterparty string, terms, refs map[string]any, approval *Obj, file bool) (d decision, s signature.Signer, refused, err error) {
	doc := authority.Document(string(act), txn, counterparty, terms, refs, mandate)
	agent, s, err := e.actorOf(ctx, str(mandate["id"]))
	if err != nil {
		return decision{doc: doc}, nil, nil, err
	}
	req := authority.Request{
		Mandate: mandate, MandateBytes: e.mandateBytes(ctx, mandate), Act: doc,
		Actor: authority.Actor{OrganizationID: e.org.Config().OrganizationID, AgentID: agent, KeyID: s.KeyID()},
	}
	if approval != nil {
		req.Approval = approval.Value()
	}
	d = decision{res: e.org.Evaluator().Evaluate(ctx, req), doc: doc, approval: approval}
	if d.res.Decision == authority.RequireApproval && approval == nil {
		if refused, err := e.releaseHold(ctx, &d, req, file); err != nil || refused != nil {
			return d, s, refused, err
		}
	}
	if d.res.Decision != authority.Allow {
		return d, s, d.res.Err(), nil
	}
	return d, s, nil, nil
}

// signDecision signs d's evaluation, an allow, as the shareable decision
// for position seq.
func (e *Engine) signDecision(d decision, s signature.Signer, seq int) (decision, error) {
	pol, err := authority.NewSharedDecision(d.res, s, seq)
	if err != nil {
		return d, err
	}
	d.pol, err = e.viewOf(pol)
	return d, err
}

func orErr(a, b error) error {
	if b != nil {
		return b
	}
	return a
}

// releaseHold settles an act d's evaluation holds for approval, with no
// approval presented: the principal's approval of this exact act, if given,
// is presented now (d is re-evaluated with it); otherwise held returns the
// refusal naming the request the act waits under, filed here when there
// was none and file is set.
func (e *Engine) releaseHold(ctx context.Context, d *decision, req authority.Request, file bool) (held error, err error) {
	mandateID := str(req.Mandate["id"])
	prior, apr, found, err := e.org.LatestApproval(ctx, mandateID, d.doc, d.res.ActionHash)
	if err != nil {
		return nil, err
	}
	if apr != nil {
		req.Approval = apr
		res := e.org.Evaluator().Evaluate(ctx, req)
		if res.Decision == authority.Allow {
			o, err := e.viewOf(apr)
			if err != nil {
				return nil, err
			}
			d.res, d.approval = res, o
			return nil, nil
		}
	}
	if found && prior.Status != store.ApprovalApproved {
		return org.Held(d.res, prior), nil
	}
	if !file {
		return d.res.Err(), nil
	}
	// No request yet, or an approval that no longer releases the act (it
	// expired): the principal is asked again.
	e.point("approval.request.before-commit")
	filed, err := e.org.FileApproval(ctx, mandateID, d.doc, d.res)
	if err != nil {
		return nil, err
	}
	e.point("approval.request.after-commit")
	return org.Held(d.res, filed), nil
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
//
// answering, when set, is the time of this instance's own act the
// decision answers (one that comes in the answer to its message): the
// decision is judged made after it (authority.DecidedSince) rather than
// at most 60 seconds before now, since an answer may arrive late.
func (e *Engine) checkDecision(ctx context.Context, from string, actor, pol *Obj, a actDoc, txn string, approval *Obj, uncached bool, answering ...time.Time) error {
	mandateID := actor.Mandate()
	m, err := e.peerMandate(ctx, from, mandateID)
	if err != nil {
		return err
	}
	doc := authority.Document(string(a.name), txn, e.org.Config().OrganizationID, a.terms, a.refs, m)
	req := authority.Request{
		Mandate: m, MandateBytes: e.mandateBytes(ctx, m), Act: doc,
		Actor: authority.Actor{OrganizationID: from, AgentID: actor.Agent(), KeyID: actor.FirstSigner()},
	}
	if approval != nil {
		req.Approval = approval.Value()
	}
	ev := e.org.Evaluator()
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
	if len(answering) > 0 {
		return authority.DecidedSince(pol.Value(), answering[0], e.clock())
	}
	return authority.FreshEnough(pol.Value(), e.clock())
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
	if rec, err := e.db.GetMandate(ctx, id); err == nil {
		if rec.Origin != from {
			return nil, refusef(reason.PolicyDenied, "mandate %s is not %s's", id, from)
		}
		// The held mandate's view is shared (parse): its readers, the
		// authority evaluator and the creator check, only read it.
		o, err := e.parse(rec.Body)
		if err != nil {
			return nil, err
		}
		return o.Value(), nil
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
	if str(m["id"]) != id || str(m["represented_organization_id"]) != from || str(object.Sub(m, "issuer")["organization_id"]) != from {
		return nil, refusef(reason.PolicyDenied, "the mandate fetched as %s is not %s's mandate %s", id, from, id)
	}
	if j := gate.Mandate(m); !j.Accepted() {
		return nil, j.Err()
	}
	issuerKey := str(object.Sub(m, "issuer")["key_id"])
	k, err := e.org.ResolveKey(ctx, issuerKey)
	if (err != nil || !isHolder(k.HolderID, "prn_")) && e.trusted != nil {
		// A principal key not pinned yet may be the successor of a pinned
		// one (a rotation since the last fetch of from's key records):
		// fetch them now rather than wait out peering.KeyRefresh.
		if ferr := e.trusted.EnsureKnown(ctx, from, []string{issuerKey}); ferr == nil {
			k, err = e.org.ResolveKey(ctx, issuerKey)
		}
	}
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
	if err := e.db.PutMandate(ctx, canon, from); err != nil {
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
			k, err := e.org.ResolveKey(ctx, str(s["key_id"]))
			if err != nil || k.OrganizationID != from {
				return refusef(reason.EvidenceSignatureInvalid, "%s is signed with key %v, which %s has not vouched for", o.ID(), s["key_id"], from)
			}
			if err := e.liveKey(ctx, o, s, k); err != nil {
				return err
			}
		}
		m, err := e.peerMandate(ctx, from, o.Mandate())
		if err != nil {
			return err
		}
		if err := authority.CheckCreator(o.Value(), m); err != nil {
			return refusef(reason.EvidenceSignatureInvalid, "%v", err)
		}
	}
	return nil
}
