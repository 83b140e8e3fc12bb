package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// OfferInput is what the offeror's agent proposes.
//
// The jsonschema tags of this file's input types are what the MCP tools
// tell a model about each member (bindings/mcp derives the tools' input
// schemas from these types).
type OfferInput struct {
	MandateID string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	// Counterparty is the offeree organisation (org_...).
	Counterparty string `json:"counterparty_organization_id" jsonschema:"The offeree organisation (org_...), a peered counterparty."`
	// Terms is the complete terms object {profile, core, profile_terms}.
	Terms Terms `json:"terms" jsonschema:"The complete terms (new ones, for an amendment); amounts and quantities as strings."`
	// ValidUntil is when the offer lapses (YYYY-MM-DDTHH:MM:SSZ).
	ValidUntil string `json:"valid_until" jsonschema:"When the offer lapses, YYYY-MM-DDTHH:MM:SSZ, in the future."`
	// TransactionID continues a transaction (a counter-offer), or opens a
	// new one under an identifier agreed beforehand (a mandate scoped to
	// it); empty opens a new one under a fresh identifier.
	TransactionID string `json:"transaction_id,omitempty" jsonschema:"For a counter-offer: the transaction it continues."`
	// SupersedesOfferID names the offer this counter-offer answers: it must
	// be the immediately preceding offer of the session.
	SupersedesOfferID string `json:"supersedes_offer_id,omitempty" jsonschema:"For a counter-offer: the session's latest offer."`
	// EvidenceRefs are short-form evidence references (evd_...).
	EvidenceRefs []string `json:"evidence_refs,omitempty" jsonschema:"Short-form evidence references (evd_...)."`
	// Role is the side this organisation takes in the transaction: buyer
	// (a purchase order, a request for quote answered with terms) or
	// supplier. It is chosen by the offer that opens a transaction (empty:
	// supplier) and kept by every later offer of the session, whichever
	// party makes it; a later offer naming another side is refused with
	// A202-STREAM-MISMATCH. The offer states it in the act its decision
	// binds (authority.OfferRefs).
	Role protocol.Role `json:"role,omitempty" jsonschema:"Your side, when you open: buyer or supplier (default)."`
	// ApprovalID is an approval of exactly this offer, when the mandate
	// holds it for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
	// OffereeAgentID addresses the offer to one of the counterparty's
	// agents (it must accept it); empty: its primary agent.
	OffereeAgentID string `json:"offeree_agent_id,omitempty" jsonschema:"The counterparty's agent (agt_...) that alone may accept (default: its primary)."`
}

// Terms is a complete terms object {profile, core, profile_terms}
// (canonical model §7), as an agent proposes it.
type Terms map[string]any

// AcceptInput is what the offeree's agent accepts.
type AcceptInput struct {
	MandateID  string `json:"mandate_id" jsonschema:"Your mandate (mnd_...) listing offer.accept and agreement.sign."`
	OfferID    string `json:"offer_id" jsonschema:"The offer (off_...) from list_inbox."`
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// peerAgent returns the agent of org an offer is addressed to: want, when
// a key record of org names it as the holder of one of its keys, else
// org's primary agent, the one that published the record of its pinned
// principal key (instance bootstrap).
func (e *Engine) peerAgent(ctx context.Context, org, want string) (string, error) {
	if err := e.trusted.EnsureKeys(ctx, org); err != nil {
		return "", fmt.Errorf("record: learning %s's agent: %w", org, err)
	}
	krs, err := e.keyRecords(ctx)
	if err != nil {
		return "", err
	}
	p, err := e.peers.Peer(org)
	if err != nil {
		return "", err
	}
	first := ""
	for _, o := range krs {
		if o.P("controller_organization_id") != org || o.Agent() == "" {
			continue
		}
		switch _, pinned := p.PrincipalKeys[o.ID()]; {
		case want != "" && o.Agent() == want:
			return want, nil
		case want == "" && pinned:
			return o.Agent(), nil
		case first == "":
			first = o.Agent()
		}
	}
	if want != "" {
		return "", refusef(reason.StreamMismatch, "no key record of %s names agent %s", org, want)
	}
	if first == "" {
		return "", fmt.Errorf("record: no key record of %s names its agent", org)
	}
	return first, nil
}

// latestOffer returns the session's latest offer of a transaction, or nil.
func (e *Engine) latestOffer(ctx context.Context, txn string) (*object.Offer, error) {
	offers, err := e.ofType(ctx, txn, protocol.Offer)
	if err != nil || len(offers) == 0 {
		return nil, err
	}
	return object.AsOffer(offers[len(offers)-1]), nil
}

// ProposeOffer signs an offer under the agent's mandate and delivers it to
// the counterparty. A new transaction is opened unless TransactionID
// continues one with a counter-offer.
func (e *Engine) ProposeOffer(ctx context.Context, a Actor, in OfferInput) (Outcome, error) {
	return offerSubmit.perform(ctx, e, a, in)
}

// offerSubmit is offer.submit: the offer and its decision, travelling
// without an event (receiveOffer is the offeree's side).
var offerSubmit = &act[OfferInput]{
	name: protocol.ActOfferSubmit,
	lines: []actLine{
		{recognise: twoWith(protocol.Offer), receive: (*Engine).receiveOffer},
	},
	spec: offerSpec,
}

func offerSpec(ctx context.Context, e *Engine, a Actor, in OfferInput) (actSpec, error) {
	now := e.clock().UTC().Truncate(time.Second)
	if _, err := e.peers.Peer(in.Counterparty); err != nil {
		return actSpec{}, refusef(reason.PolicyDenied, "%s is not a peered counterparty; pin its peer file with `party peer add`", in.Counterparty)
	}
	until, err := envelope.ParseTimestamp(in.ValidUntil)
	if err != nil {
		return actSpec{}, refusef(reason.TermsInvalid, "valid_until: %v", err)
	}
	if !until.After(now) {
		return actSpec{}, refusef(reason.OfferExpired, "valid_until %s is not after now (%s)", in.ValidUntil, envelope.Timestamp(now))
	}
	txn := in.TransactionID
	if txn == "" {
		if txn, err = envelope.NewID("txn"); err != nil {
			return actSpec{}, err
		}
	}
	session, err := envelope.NewID("ses")
	if err != nil {
		return actSpec{}, err
	}
	role := in.Role
	switch {
	case role == "":
		role = protocol.Supplier
	case !role.Valid():
		return actSpec{}, refusef(reason.TermsInvalid, "role %q is neither buyer nor supplier", in.Role)
	}
	var supersedes any
	return actSpec{
		txn: txn, mandateID: in.MandateID, approvalID: in.ApprovalID,
		open: &opening{counterparty: in.Counterparty, role: role, session: session},
		check: func(ctx context.Context, st *state) error {
			if !st.known {
				if in.SupersedesOfferID != "" {
					return refusef(reason.OfferStale, "transaction %s holds no offer to supersede", txn)
				}
				return nil
			}
			if st.t.Counterparty != in.Counterparty {
				return refusef(reason.StreamMismatch, "transaction %s is held with %s", txn, st.t.Counterparty)
			}
			if in.Role != "" && in.Role != st.Role() {
				return refusef(reason.StreamMismatch, "in transaction %s this organisation is the %s; an offer in it cannot make it the %s", txn, st.t.Role, in.Role)
			}
			role = st.Role()
			last, err := e.latestOffer(ctx, txn)
			if err != nil {
				return err
			}
			if st.State() != protocol.Draft {
				if !amending(st) {
					return refusef(reason.StateTransitionDenied, "transaction %s is %s; offers are made in draft, and amendment offers in committed or in_performance", txn, st.t.State)
				}
				// An amendment offer (amendment.go).
				agr, err := e.agreementOf(ctx, txn)
				if err != nil {
					return err
				}
				if agr == nil {
					return refusef(reason.StateTransitionDenied, "transaction %s has no agreement to amend", txn)
				}
				want := amendmentSupersedes(agr, last)
				if (want == nil && in.SupersedesOfferID != "") || (want != nil && in.SupersedesOfferID != want) {
					return refusef(reason.OfferStale, "an amendment offer supersedes %v (the session's latest open offer, or none when the last offer is the agreed one), not %q", orNoneAny(want), in.SupersedesOfferID)
				}
				supersedes = want
				return nil
			}
			if last != nil {
				if in.SupersedesOfferID != last.ID() {
					return refusef(reason.OfferStale, "a counter-offer supersedes the session's latest offer %s, not %q", last.ID(), in.SupersedesOfferID)
				}
				supersedes = last.ID()
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return in.Terms, authority.OfferRefs(role), nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			peerAgent, err := e.peerAgent(ctx, in.Counterparty, in.OffereeAgentID)
			if err != nil {
				return err
			}
			if st.known && st.t.SessionID != "" {
				session = st.t.SessionID
			}
			refs := []any{}
			for _, r := range in.EvidenceRefs {
				refs = append(refs, r)
			}
			cfg := e.org.Config()
			offer, err := b.add(protocol.Offer, map[string]any{
				"offeror":             party(cfg.OrganizationID, b.agent),
				"offeree":             party(in.Counterparty, peerAgent),
				"session_id":          session,
				"supersedes_offer_id": supersedes,
				"valid_until":         in.ValidUntil,
				"terms":               map[string]any(in.Terms),
				"evidence_refs":       refs,
			}, protocol.PurposeOfferSubmission)
			if err != nil {
				if isRefusal(err) {
					return err
				}
				return refusef(reason.TermsInvalid, "%v", err)
			}
			b.name("offer", offer.ID())
			b.name("session", session)
			b.also(func(tx *store.Txn) error { return tx.SetSession(txn, session) })
			return nil
		},
		finish: func(ctx context.Context, out Outcome, err error) (Outcome, error) {
			var r *reason.Refusal
			if in.TransactionID == "" && heldRequest(err) != "" && errors.As(err, &r) {
				// The act held is the offer in this transaction: only the same
				// act again is released by its approval.
				held := *r
				held.Detail += " Take it again with transaction_id " + txn + ": the approval binds the act in that transaction."
				return out, &held
			}
			return out, err
		},
	}, nil
}

// orNoneAny shows a value that may be nil.
func orNoneAny(v any) any {
	if v == nil {
		return "(none)"
	}
	return v
}

// receiveOffer is the offeree's side of an offer, in draft or, amending
// the agreement, in committed or in_performance.
func (e *Engine) receiveOffer(ctx context.Context, r *receipt) ([][]byte, error) {
	offer, pol := object.AsOffer(r.one(protocol.Offer)), r.one(protocol.PolicyDecision)
	cfg := e.org.Config()
	if offer.Offeror() != r.from || offer.Offeree() != cfg.OrganizationID {
		return nil, refusef(reason.StreamMismatch, "offer %s is not from %s to %s", offer.ID(), r.from, cfg.OrganizationID)
	}
	if to := offer.OffereeAgent(); !slices.Contains(cfg.AgentIDs(), to) {
		return nil, refusef(reason.StreamMismatch, "offer %s is addressed to agent %v, which does not act for %s", offer.ID(), to, cfg.OrganizationID)
	}
	if offer.Expired(r.now) {
		return nil, refusef(reason.OfferExpired, "offer %s lapsed at %s", offer.ID(), offer.P("valid_until"))
	}
	session := offer.SessionID()
	stated, err := e.statedOfferorRole(ctx, r, offer, pol)
	if err != nil {
		return nil, err
	}
	role := stated.Other()
	if r.st.known {
		if r.st.t.SessionID != session {
			return nil, refusef(reason.StreamMismatch, "transaction %s is held in session %s", r.txn, r.st.t.SessionID)
		}
		if role != r.st.Role() {
			return nil, refusef(reason.StreamMismatch, "offer %s states its offeror %s is the %s; in transaction %s %s is the %s", offer.ID(), r.from, stated, r.txn, r.from, r.st.Role().Other())
		}
		last, err := e.latestOffer(ctx, r.txn)
		if err != nil {
			return nil, err
		}
		switch {
		case r.st.State() == protocol.Draft:
			if last != nil && offer.Supersedes() != last.ID() {
				return nil, refusef(reason.OfferStale, "offer %s supersedes %v, but the session's latest offer is %s", offer.ID(), offer.Payload()["supersedes_offer_id"], last.ID())
			}
		case amending(r.st):
			// An amendment offer (amendment.go).
			agr, err := e.agreementOf(ctx, r.txn)
			if err != nil {
				return nil, err
			}
			if agr == nil {
				return nil, refusef(reason.StateTransitionDenied, "transaction %s has no agreement to amend", r.txn)
			}
			if want := amendmentSupersedes(agr, last); offer.Payload()["supersedes_offer_id"] != want {
				return nil, refusef(reason.OfferStale, "amendment offer %s supersedes %v, not %v", offer.ID(), offer.Payload()["supersedes_offer_id"], orNoneAny(want))
			}
		default:
			return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s; offers are made in draft, and amendment offers in committed or in_performance", r.txn, r.st.t.State)
		}
	} else if offer.Payload()["supersedes_offer_id"] != nil {
		return nil, refusef(reason.OfferStale, "offer %s supersedes %v, which this session does not hold", offer.ID(), offer.Payload()["supersedes_offer_id"])
	} else {
		r.st.t.ID, r.st.t.Counterparty = r.txn, r.from
	}
	if err := e.checkDecision(ctx, r.from, offer.View, pol, actDoc{name: protocol.ActOfferSubmit, terms: offer.Terms(), refs: authority.OfferRefs(stated)}, r.txn, r.one(protocol.Approval), false); err != nil {
		return nil, err
	}
	if err := e.extend(ctx, r.st, r.objs); err != nil {
		return nil, err
	}
	e.point("receive.before-store")
	err = e.update(ctx, r.txn, func(tx *store.Txn) error {
		if !r.st.known {
			if err := tx.CreateTransaction(r.txn, r.from, string(role), session, string(protocol.Draft)); err != nil {
				return err
			}
		}
		// What list_inbox reads (store migration 10).
		if err := tx.OfferReceived(r.txn); err != nil {
			return err
		}
		for _, o := range r.objs {
			if err := putReceived(tx, o, r.from); err != nil {
				return err
			}
		}
		return tx.PutInbox(r.from, r.key, r.txn, nil, r.now)
	})
	if err != nil {
		return nil, err
	}
	e.point("receive.after-store")
	e.log.Info("offer received", "transaction_id", r.txn, "offer_id", offer.ID(), "from", r.from)
	return [][]byte{}, nil
}

// statedOfferorRole reads the side an offer's offeror states it takes
// (authority.OfferRefs) off the action hash its policy decision binds: the
// offer.submit act rebuilt under the offeror's mandate with each side in
// turn, of which exactly one can hash to the decision's. A decision that
// binds neither is left for checkDecision to refuse; its side is taken to
// be the supplier's, the side of an offer that states none.
func (e *Engine) statedOfferorRole(ctx context.Context, r *receipt, offer *object.Offer, pol *Obj) (protocol.Role, error) {
	if pol == nil {
		return protocol.Supplier, nil
	}
	m, err := e.peerMandate(ctx, r.from, offer.Mandate())
	if err != nil {
		return "", err
	}
	for _, role := range []protocol.Role{protocol.Supplier, protocol.Buyer} {
		doc := authority.Document(string(protocol.ActOfferSubmit), r.txn, e.org.Config().OrganizationID, offer.Terms(), authority.OfferRefs(role), m)
		if h, err := authority.ActionHash(doc); err == nil && h == pol.P("action_hash") {
			return role, nil
		}
	}
	return protocol.Supplier, nil
}

// AcceptOffer accepts the counterparty's latest offer: the acceptance over
// its exact hash and event 1, agreement.direct (draft → agreement_pending),
// then the agreement and event 2, agreement.committed (→ committed). It
// returns the state reached, or pending with what it waits for.
func (e *Engine) AcceptOffer(ctx context.Context, a Actor, in AcceptInput) (Outcome, error) {
	// Formation continues by itself, within perform's delivery, as far as
	// the counterparty answered; perform's outcome, read after it, says
	// where it stands.
	return offerAccept.perform(ctx, e, a, in)
}

// offerAccept is offer.accept: agreement.direct with the acceptance (and
// the agreement it forms), which the offeror countersigns and signs.
var offerAccept = &act[AcceptInput]{
	name: protocol.ActOfferAccept,
	lines: []actLine{
		// Two decisions: the acceptance's, and the offeree's
		// agreement.sign when it rides with the agreement (riderSign).
		{event: protocol.EvAgreementDirect, offers: true,
			carries: counts{protocol.Acceptance: 1, protocol.Agreement: 1, protocol.PolicyDecision: 2},
			check:   checkAgreementDirect, cosign: cosignDirect, answer: directAnswer},
	},
	spec: acceptSpec,
}

func acceptSpec(ctx context.Context, e *Engine, a Actor, in AcceptInput) (actSpec, error) {
	offer := named(ctx, e, in.OfferID, object.AsOffer)
	if offer == nil {
		return actSpec{}, refusef(reason.OfferStale, "offer %s is not held here; call list_inbox", in.OfferID)
	}
	txn := offer.Txn()
	return actSpec{
		txn: txn, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvAgreementDirect,
		check: func(ctx context.Context, st *state) error {
			if offer.Offeree() != e.org.Config().OrganizationID {
				return refusef(reason.StreamMismatch, "offer %s was made by this organisation; only its offeree accepts it", in.OfferID)
			}
			if st.State() != protocol.Draft {
				return refusef(reason.StateTransitionDenied, "transaction %s is %s; an offer is accepted in draft", txn, st.t.State)
			}
			last, err := e.latestOffer(ctx, txn)
			if err != nil {
				return err
			}
			if last.ID() != in.OfferID {
				return refusef(reason.OfferStale, "offer %s was superseded by %s", in.OfferID, last.ID())
			}
			if offer.Expired(st.now) {
				return refusef(reason.OfferExpired, "offer %s lapsed at %s", in.OfferID, offer.P("valid_until"))
			}
			return e.withdrawn(ctx, offer)
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) { return offer.Terms(), nil, nil },
		build: func(ctx context.Context, st *state, b *builder) error {
			acc, err := b.acceptance(offer)
			if err != nil {
				return err
			}
			b.data = map[string]any{"offer_id": in.OfferID, "acceptance_id": acc.ID(), "session_id": offer.SessionID()}
			b.name("acceptance", acc.ID())
			if e.separateAgreement {
				return nil
			}
			// The agreement the acceptance forms travels with it, signed by
			// this party, so that the offeror signs it in its answer: one
			// exchange fewer (docs/record-protocol.md, "Formation in two
			// exchanges").
			payload, err := e.agreementPayload(st.t, offer, acc.ID(), b.agent, b.now)
			if err != nil {
				return err
			}
			agr, err := b.add(protocol.Agreement, payload, protocol.PurposeAgreementCommitment)
			if err != nil || e.offereeCommits {
				return err
			}
			// And this party's agreement.sign, decided now for the position
			// of agreement.committed when its policy allows it without a
			// hold: with it the offeror appends agreement.committed in its
			// answer (docs/record-protocol.md, "The commitment in the
			// answer"). Without it, this party appends it as before.
			_, err = b.rideIfAllowed(ctx, protocol.ActAgreementSign, agr.Terms(), agreementRefs(agr), b.seq+1)
			return err
		},
	}, nil
}

// advance continues a transaction by the steps that follow on their own
// from what this copy holds: after this instance's agreement.direct is
// recorded without an agreement, one is proposed for the counterparty's
// signature; once it is signed by both, agreement.committed is appended
// (both are usually taken in the write that stores a reply: settleDirect,
// proposedWith, settleCosigned; advance is for what a restart, a held
// decision or an older build left). Each step is
// idempotent, so a restart or a reply delivered late resumes it. The
// caller holds the transaction's lock.
func (e *Engine) advance(ctx context.Context, txn string) error {
	t, err := e.db.GetTransaction(ctx, txn)
	if err != nil || protocol.State(t.State) != protocol.AgreementPending || t.HeadSequence != 1 {
		return err
	}
	first, err := e.db.EventAt(ctx, txn, 1)
	if err != nil {
		return err
	}
	if protocol.EventType(first.EventType) != protocol.EvAgreementDirect || first.AppendedBy != e.org.Config().OrganizationID || first.Status != store.EventRecorded {
		return nil
	}
	if _, err := e.db.EventAt(ctx, txn, 2); err == nil {
		return nil // agreement.committed is pending
	}
	ev1, err := e.getEvent(ctx, txn, first.EventID)
	if err != nil {
		return err
	}
	agr, err := e.agreementOf(ctx, txn)
	if err != nil {
		return err
	}
	switch {
	case agr == nil:
		return e.proposeAgreement(ctx, t, ev1)
	case len(agr.Signatures()) < 2:
		return nil // proposed; its reply continues
	default:
		// Signed by both, not yet committed: the commit was held or
		// refused here before (a decision, a restart); try it again. Taken,
		// the notice that it waited is answered.
		_, err := e.appendCommitted(ctx, txn, ev1, agr.View, func(tx *store.Txn) error { return tx.SetNotice(txn, "") }, nil)
		return err
	}
}

// agreementOf returns the transaction's latest agreement, or nil.
func (e *Engine) agreementOf(ctx context.Context, txn string) (*object.Agreement, error) {
	list, err := e.ofType(ctx, txn, protocol.Agreement)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return object.AsAgreement(list[len(list)-1]), nil
}

// proposeAgreement drafts the agreement the acceptance formed and sends
// it for the offeror's signature, in one transaction with its message:
// the step advance takes when agreement.direct was recorded without it (a
// reply stored by an older build, a draft that failed, or an agreement
// removed by a refusal). The usual way is the agreement travelling with
// the acceptance; then proposedWith, in the transaction that records the
// event.
func (e *Engine) proposeAgreement(ctx context.Context, t store.Transaction, ev1 *Event) error {
	put, queued, err := e.draftAgreement(ctx, t, ev1)
	if err != nil {
		return err
	}
	e.point("agreement.before-commit")
	if err := e.update(ctx, t.ID, put); err != nil {
		return err
	}
	e.point("agreement.after-commit")
	return e.deliverNow(ctx, *queued)
}

// proposedWith is settle's follow-on for agreement.direct when the reply
// does not carry the agreement signed by the offeror: the agreement is
// sent on its own, in the write that stores the reply. An agreement that
// travelled with the acceptance (held here, signed by this party) is queued
// as it is: the offeror's policy held or refused its signature then, and
// asks again or says why in its answer. An acceptance that carried none (a
// message of an older build) has it drafted now. It returns nil for any
// other event.
func (e *Engine) proposedWith(ctx context.Context, m store.OutboxMessage, objs []*Obj) (func(tx *store.Txn) error, *store.OutboxMessage, error) {
	ours := messageEvent(objs)
	if ours == nil || ours.EventType() != protocol.EvAgreementDirect || ours.Seq() != 1 {
		return nil, nil, nil
	}
	t, err := e.db.GetTransaction(ctx, m.TransactionID)
	if err != nil {
		return nil, nil, err
	}
	if agr := travelling(objs); agr != nil {
		now := e.clock().UTC().Truncate(time.Second)
		queued := new(store.OutboxMessage)
		return func(tx *store.Txn) error {
			var err error
			*queued, err = e.enqueue(tx, t.Counterparty, t.ID, []*Obj{agr}, nil, now)
			return err
		}, queued, nil
	}
	if e.separateAgreement {
		// As a draft that fails: settle stores the reply without it.
		return nil, nil, errf("drafting the agreement with the reply is turned off (Options.TestingOnlySeparateAgreement)")
	}
	return e.draftAgreement(ctx, t, ours)
}

// travelling returns the agreement a message carries beside its event, or
// nil.
func travelling(objs []*Obj) *Obj {
	for _, o := range objs {
		if o.Type() == protocol.Agreement {
			return o
		}
	}
	return nil
}

// draftAgreement builds the agreement the acceptance ev1 formed (canonical
// model §10 steps 6–7): the accepted offer by its hash, the recorded
// acceptance, the offer's exact terms and their hash, the parties by their
// roles, and the commitment id the offeror will issue under; signed by this
// party. It returns what stores it with its message (run inside a write),
// and the message, filled in once that has run.
func (e *Engine) draftAgreement(ctx context.Context, t store.Transaction, ev1 *Event) (func(tx *store.Txn) error, *store.OutboxMessage, error) {
	now := e.clock().UTC().Truncate(time.Second)
	offer := held(ctx, e, t.ID, ev1.Data("offer_id"), object.AsOffer)
	if offer == nil {
		return nil, nil, errf("the accepted offer %s is not held", ev1.Data("offer_id"))
	}
	payload, err := e.agreementPayload(t, offer, ev1.Data("acceptance_id"), ev1.Agent(), now)
	if err != nil {
		return nil, nil, err
	}
	agr, err := e.newObject(protocol.Agreement, t.ID, ev1.Mandate(), payload, protocol.PurposeAgreementCommitment, now, "")
	if err != nil {
		return nil, nil, err
	}
	queued := new(store.OutboxMessage)
	put := func(tx *store.Txn) error {
		if err := tx.PutVerified(info(agr), agr.Raw(), originLocal); err != nil {
			return err
		}
		var err error
		*queued, err = e.enqueue(tx, t.Counterparty, t.ID, []*Obj{agr}, nil, now)
		return err
	}
	return put, queued, nil
}

// agreementPayload is the payload of the agreement accepting offer by
// acceptance accID forms (canonical model §10 steps 6–7), this party
// named by agent, which signs it for agreement_commitment.
func (e *Engine) agreementPayload(t store.Transaction, offer *object.Offer, accID, agent string, now time.Time) (map[string]any, error) {
	terms := offer.Terms()
	termsHash, err := canonical.Hash(terms)
	if err != nil {
		return nil, err
	}
	cfg := e.org.Config()
	me := party(cfg.OrganizationID, agent)
	them := offer.PSub("offeror")
	if str(them["organization_id"]) == cfg.OrganizationID {
		them = offer.PSub("offeree")
	}
	buyer, supplier := me, them
	if protocol.Role(t.Role) == protocol.Supplier {
		buyer, supplier = them, me
	}
	cmt, err := envelope.NewID("cmt")
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"accepted_offer_id":   offer.ID(),
		"accepted_offer_hash": offer.Hash(),
		"acceptance_id":       accID,
		"buyer":               buyer,
		"supplier":            supplier,
		"terms":               terms,
		"terms_hash":          termsHash,
		"effective_at":        envelope.Timestamp(now),
		"commitment_ids":      []any{cmt},
	}, nil
}

// settleCosigned stores the counterparty's answer to the agreement this
// instance proposed on its own (the agreement's exact bytes with the
// offeror's agreement_commitment signature added, its commitment and its
// decision) and appends agreement.committed, in one transaction with
// deleting the message.
func (e *Engine) settleCosigned(ctx context.Context, m store.OutboxMessage, ours *Obj, reply [][]byte) error {
	now := e.clock().UTC().Truncate(time.Second)
	e.learnKeys(ctx, m.Peer, reply)
	agr, supporting, err := e.checkSignedAgreement(ctx, m.Peer, ours, reply, "")
	if err != nil {
		return err
	}
	st, err := e.load(ctx, m.TransactionID, now)
	if err != nil {
		return err
	}
	if err := e.extend(ctx, st, append([]*Obj{agr}, supporting...)); err != nil {
		return err
	}
	store1 := func(tx *store.Txn) error {
		if err := storeSignedAgreement(tx, m, ours, agr, supporting); err != nil {
			return err
		}
		return tx.Delivered(m.ID)
	}
	ev1, err := e.eventAt(ctx, m.TransactionID, 1)
	if err != nil {
		return err
	}
	return e.commitAgreement(ctx, m.TransactionID, ev1, agr, store1, nil, now)
}

// settleDirect stores the offeror's answer to this instance's acceptance
// when the agreement travelled with it and comes back signed by both: the
// countersigned agreement.direct, the agreement, the offeror's commitment
// and decision (and the approval that released them), in the write that
// appends agreement.committed and queues its message. Every check
// settleEvent and settleCosigned make is made here, and the verifier's
// rules over the extended record before anything is stored.
func (e *Engine) settleDirect(ctx context.Context, m store.OutboxMessage, objs []*Obj, ours *Obj, reply [][]byte) error {
	now := e.clock().UTC().Truncate(time.Second)
	ev := messageEvent(objs)
	answer, got, ev2, err := e.committedIn(m.Peer, ev, reply)
	if err != nil {
		return err
	}
	st, err := e.load(ctx, m.TransactionID, now)
	if err != nil {
		return err
	}
	if ev2 != nil {
		return e.settleCommitted(ctx, m, objs, st, ours, reply, answer, got, ev2)
	}
	got, err = e.checkCountersigned(ctx, m.Peer, ev, reply)
	if err != nil {
		return err
	}
	agr, supporting, err := e.checkSignedAgreement(ctx, m.Peer, ours, answer, ev.ID())
	if err != nil {
		return err
	}
	if err := e.extend(ctx, st, append([]*Obj{got.View, agr}, supporting...)); err != nil {
		return err
	}
	stored := func(tx *store.Txn) error {
		if err := e.recordCountersigned(tx, objs, got); err != nil {
			return err
		}
		if err := storeSignedAgreement(tx, m, ours, agr, supporting); err != nil {
			return err
		}
		return tx.Delivered(m.ID)
	}
	// agreement.committed is decided on the record as the write leaves
	// it: agreement.direct recorded at its head.
	after := func(st *state) {
		st.t.HeadSequence, st.t.HeadHash, st.t.State = got.Seq(), got.Hash(), string(got.To())
	}
	return e.commitAgreement(ctx, m.TransactionID, got, agr, stored, after, now)
}

// committedIn splits peer's answer to agreement.direct (ev1) into the
// answer to the agreement, ev1 as it came back (got, nil when it did not),
// and the agreement.committed the offeror appended with it, if it did (one
// event besides ev1, last).
func (e *Engine) committedIn(peer string, ev1 *Event, reply [][]byte) (answer [][]byte, got, ev2 *Event, err error) {
	answer = make([][]byte, 0, len(reply))
	for i, b := range reply {
		o, err := e.parse(b)
		if err != nil {
			return nil, nil, nil, err
		}
		if o.ID() == ev1.ID() {
			if got, err = returnedEvent(peer, ev1, o); err != nil {
				return nil, nil, nil, err
			}
		}
		ev := object.AsEvent(o)
		if ev == nil || o.ID() == ev1.ID() {
			answer = append(answer, b)
			continue
		}
		if ev2 != nil || i != len(reply)-1 || ev.EventType() != protocol.EvAgreementCommitted {
			return nil, nil, nil, refusef(reason.StateTransitionDenied, "the answer to agreement.direct carries event %s (%s) besides it; only agreement.committed, last", ev.ID(), ev.EventType())
		}
		ev2 = ev
	}
	return answer, got, ev2, nil
}

// settleCommitted is settleDirect when the offeror appended
// agreement.committed in its answer (docs/record-protocol.md, "The
// commitment in the answer"): this instance countersigns it as it
// countersigns any event it receives (eventSigned, eventAllowed, the
// verifier's rules over the record extended by the whole answer), and
// stores the answer with it recorded, in one write that also queues the
// countersignature for the offeror. That message is sent by the outbox
// worker, not here: the transaction is committed in this copy now, and
// the offeror's copy follows when its countersignature arrives. The
// transaction's next message goes after it (deliverNow).
func (e *Engine) settleCommitted(ctx context.Context, m store.OutboxMessage, objs []*Obj, st *state, ours *Obj, reply, answer [][]byte, got, ev2 *Event) error {
	ev := messageEvent(objs)
	e.learnKeys(ctx, m.Peer, reply)
	// The answer's objects as they came (the checks below say whether they
	// are what they must be): the verifier's rules over the record they
	// extend run beside the checks (concurrently).
	agr, supporting, err := e.answerObjects(m.Peer, ours, answer, ev.ID())
	if err != nil {
		return err
	}
	if got == nil {
		return errf("%s's reply carries no countersigned %s", m.Peer, ev.ID())
	}
	// The state the stored answer leaves: agreement.direct recorded.
	after := *st
	after.t.HeadSequence, after.t.HeadHash, after.t.State = got.Seq(), got.Hash(), string(got.To())
	support := make([]*Obj, 0, 2)
	for _, o := range supporting {
		if o.Type() == protocol.PolicyDecision || o.Type() == protocol.Approval {
			support = append(support, o)
		}
	}
	// The offeror decided in answer to this instance's acceptance, which
	// the answer may reach late (a lost reply asked again): its decision
	// is judged made after agreement.direct, not 60 seconds before now.
	since, err := envelope.ParseTimestamp(ev.P("occurred_at"))
	if err != nil {
		return err
	}
	r := &receipt{from: m.Peer, txn: m.TransactionID, objs: append(support, ev2.View), st: &after, now: st.now, beside: []*Obj{agr}, answering: since}
	for _, o := range supporting {
		if o.Type() == protocol.Commitment {
			r.beside = append(r.beside, o)
		}
	}
	check := func() error {
		// Every check settleDirect makes of an answer without
		// agreement.committed, then the countersigner's of the event.
		if err := e.checkCountersignature(ctx, m.Peer, ev, got); err != nil {
			return err
		}
		if err := e.checkAnswer(ctx, m.Peer, ours, agr, supporting); err != nil {
			return err
		}
		if err := e.checkAuthors(ctx, m.Peer, []*Obj{ev2.View}); err != nil {
			return err
		}
		if err := e.eventSigned(ctx, r, ev2); err != nil {
			return err
		}
		if ev2.Seq() != got.Seq()+1 || ev2.Previous() != got.Hash() {
			return refusef(reason.EvidenceChainGap, "agreement.committed %s (position %d) does not extend agreement.direct %s", ev2.ID(), ev2.Seq(), got.ID())
		}
		return e.eventAllowed(ctx, r, ev2, e.acts.byEvent[protocol.EvAgreementCommitted])
	}
	if err := concurrently(check, func() error {
		return e.extend(ctx, st, append(append([]*Obj{got.View, agr}, supporting...), ev2.View))
	}); err != nil {
		return err
	}
	signed, err := e.countersignEvent(ev2, e.clock())
	if err != nil {
		return err
	}
	now := e.clock()
	var queued store.OutboxMessage
	err = e.update(ctx, m.TransactionID, func(tx *store.Txn) error {
		if err := e.recordCountersigned(tx, objs, got); err != nil {
			return err
		}
		if err := storeSignedAgreement(tx, m, ours, agr, supporting); err != nil {
			return err
		}
		if err := e.storeCountersigned(tx, signed, m.Peer, support); err != nil {
			return err
		}
		if err := tx.Delivered(m.ID); err != nil {
			return err
		}
		var err error
		queued, err = e.enqueue(tx, m.Peer, m.TransactionID, []*Obj{signed.View}, nil, now)
		return err
	})
	if err != nil {
		return err
	}
	e.point("reply.after-store")
	e.log.Info("event countersigned", "transaction_id", m.TransactionID, "sequence", ev2.Seq(), "event_type", ev2.EventType(), "from", m.Peer, "to_state", ev2.To())
	e.handOn(queued)
	return nil
}

// commitAgreement appends agreement.committed with stored, the write that
// stores the answer signing the agreement. When this instance's own policy
// holds or refuses the commitment now, the answer is stored anyway (the
// agreement signed by both is kept), the commitment waits, and the agent
// is told why in the transaction's notice.
func (e *Engine) commitAgreement(ctx context.Context, txn string, ev1 *Event, agr *Obj, stored func(tx *store.Txn) error, after func(*state), now time.Time) error {
	_, err := e.appendCommitted(ctx, txn, ev1, agr, stored, after)
	if err == nil || !isRefusal(err) {
		return err
	}
	e.log.Info("own policy does not allow committing the agreement now", "transaction_id", txn, "codes", reason.CodesOf(err))
	return e.update(ctx, txn, func(tx *store.Txn) error {
		if err := stored(tx); err != nil {
			return err
		}
		return tx.SetNotice(txn, notice(err, now))
	})
}

// checkSignedAgreement checks the counterparty's answer signing ours, the
// agreement this instance proposed: the same bytes with the offeror's
// agreement_commitment signature after ours, the commitment the agreement
// names, bound to it and issued by peer, the offeror's decision and the
// approval that released it, if any, and nothing else (but the object
// skip, the event the answer also countersigns).
func (e *Engine) checkSignedAgreement(ctx context.Context, peer string, ours *Obj, reply [][]byte, skip string) (*Obj, []*Obj, error) {
	agr, supporting, err := e.answerObjects(peer, ours, reply, skip)
	if err != nil {
		return nil, nil, err
	}
	if err := e.checkAnswer(ctx, peer, ours, agr, supporting); err != nil {
		return nil, nil, err
	}
	return agr, supporting, nil
}

// checkAnswer is checkSignedAgreement's check of the answer's objects,
// once answerObjects sorted them.
func (e *Engine) checkAnswer(ctx context.Context, peer string, ours, agr *Obj, supporting []*Obj) error {
	cmt, pol := supporting[0], supporting[1]
	if h, err := contentHash(agr); err != nil || h != ours.Hash() {
		return refusef(reason.AgreementHashMismatch, "%s returned agreement %s with other bytes", peer, ours.ID())
	}
	if len(supporting) > 2 {
		// The counterparty's principal released its signature: the
		// approval binds the decision's act.
		if apr := supporting[2]; apr.P("action_hash") != pol.P("action_hash") {
			return refusef(reason.ApprovalHashMismatch, "approval %s binds %s, the counterparty's decision %s", apr.ID(), apr.P("action_hash"), pol.P("action_hash"))
		}
	}
	if !verify.KeptAndCountersigned(ours.Value(), agr.Value(), protocol.PurposeAgreementCommitment) {
		return refusef(reason.EvidenceSignatureInvalid, "the agreement's signatures are not ours then %s's agreement_commitment", peer)
	}
	// The offeror signs by one of its agents' keys, as the countersigner of
	// an event does: the principal's key approves, it does not sign acts.
	if err := e.verifyEntry(ctx, agr, 1, peer, "agt_"); err != nil {
		return err
	}
	if err := e.checkAuthors(ctx, peer, supporting); err != nil {
		return err
	}
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	if len(ids) == 0 || cmt.ID() != str(ids[0]) || cmt.P("agreement_id") != agr.ID() ||
		str(cmt.PSub("subject")["terms_hash"]) != agr.P("terms_hash") || cmt.PartyOrg("committed_party") != peer {
		return refusef(reason.AgreementHashMismatch, "commitment %s does not bind agreement %s", cmt.ID(), agr.ID())
	}
	return nil
}

// answerObjects sorts the counterparty's answer signing ours, the
// agreement this instance proposed, into the agreement, and the
// commitment, the decision and the approval that released it if any
// (supporting, in that order); anything else (but the object skip, the
// event the answer also countersigns) refuses it. Nothing is verified
// here: checkSignedAgreement does that.
func (e *Engine) answerObjects(peer string, ours *Obj, reply [][]byte, skip string) (*Obj, []*Obj, error) {
	var agr, cmt, pol, apr *Obj
	for _, b := range reply {
		o, err := e.parse(b)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case o.ID() == skip:
		case o.Type() == protocol.Agreement && agr == nil:
			agr = o
		case o.Type() == protocol.Commitment && cmt == nil:
			cmt = o
		case o.Type() == protocol.PolicyDecision && pol == nil:
			pol = o
		case o.Type() == protocol.Approval && apr == nil:
			apr = o
		default:
			return nil, nil, refusef(reason.AgreementHashMismatch, "%s's answer to agreement %s carries %s %s", peer, ours.ID(), o.Type(), o.ID())
		}
	}
	if agr == nil || cmt == nil || pol == nil || agr.ID() != ours.ID() || agr.Hash() != ours.Hash() {
		return nil, nil, refusef(reason.AgreementHashMismatch, "%s's answer does not carry agreement %s as proposed, its commitment and its decision", peer, ours.ID())
	}
	supporting := []*Obj{cmt, pol}
	if apr != nil {
		supporting = append(supporting, apr)
	}
	return agr, supporting, nil
}

// storeSignedAgreement stores the agreement as signed by both in place of
// ours, and what came with it.
func storeSignedAgreement(tx *store.Txn, m store.OutboxMessage, ours, agr *Obj, supporting []*Obj) error {
	if err := tx.ReplaceVerified(info(agr), ours.Raw(), agr.Raw()); err != nil {
		return err
	}
	for _, o := range supporting {
		if err := putReceived(tx, o, m.Peer); err != nil {
			return err
		}
	}
	// Signed: a notice that the signature waited is answered.
	return tx.SetNotice(m.TransactionID, "")
}

// agreementRefs are the references of the act agreement.sign of agr.
func agreementRefs(agr *Obj) map[string]any {
	return map[string]any{"agreement_id": agr.ID()}
}

// committedData is the data of the agreement.committed that commits agr:
// the agreement and the commitment it names.
func committedData(agr *Obj) map[string]any {
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	var cmt any
	if len(ids) > 0 {
		cmt = ids[0]
	}
	return map[string]any{"agreement_id": agr.ID(), "commitment_id": cmt}
}

// appendCommitted is the act agreement.sign, recorded by agreement.committed
// (canonical model §10 step 8), taken by this instance under the mandate
// of its agent's agreement.direct (ev1). inTx, when set, stores the
// cosigned reply in the same transaction.
func (e *Engine) appendCommitted(ctx context.Context, txn string, ev1 *Event, agr *Obj, inTx func(tx *store.Txn) error, after func(*state)) (Outcome, error) {
	return agreementSign.perform(ctx, e, instanceActor, commitCall{txn, ev1, agr, inTx, after})
}

// commitCall is what the offeror's commitment is made of (appendCommitted).
type commitCall struct {
	txn   string
	ev1   *Event
	agr   *Obj
	inTx  func(tx *store.Txn) error
	after func(*state)
}

// agreementSign is agreement.sign: the offeror's signature on the
// agreement, and agreement.committed. The agreement travels alone when
// it did not ride with the acceptance (receiveAgreement signs it); the
// event is this instance's, under the lock its caller holds.
var agreementSign = &act[commitCall]{
	name: protocol.ActAgreementSign,
	lines: []actLine{
		{recognise: alone(protocol.Agreement), receive: (*Engine).receiveAgreement},
		{event: protocol.EvAgreementCommitted, check: checkAgreementCommitted},
	},
	spec: commitSpec,
}

func commitSpec(_ context.Context, e *Engine, _ Actor, c commitCall) (actSpec, error) {
	txn, ev1, agr := c.txn, c.ev1, c.agr
	return actSpec{
		txn: txn, mandateID: ev1.Mandate(), event: protocol.EvAgreementCommitted,
		locked: true, inTx: c.inTx, after: c.after,
		check: func(ctx context.Context, st *state) error {
			if st.State() != protocol.AgreementPending {
				return refusef(reason.StateTransitionDenied, "transaction %s is %s; an agreement is committed from agreement_pending", txn, st.t.State)
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return agr.Terms(), agreementRefs(agr), nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			b.data = committedData(agr)
			b.name("agreement", agr.ID())
			return nil
		},
	}, nil
}

// receiveAgreement is the offeror's side of an agreement proposed for its
// signature on its own (after agreement.direct, when its policy did not
// let it sign the agreement that travelled with the acceptance, or when the
// acceptance carried none): it signs only the exact terms it offered, only
// after its own policy check, and issues its commitment.
func (e *Engine) receiveAgreement(ctx context.Context, r *receipt) ([][]byte, error) {
	agr := r.one(protocol.Agreement)
	if !r.st.known {
		return nil, refusef(reason.StreamMismatch, "transaction %s is not held with %s", r.txn, r.from)
	}
	if held := held(ctx, e, r.txn, agr.ID(), object.AsAgreement); held != nil {
		// Asked again under another message key: answer with what was
		// signed the first time.
		if held.Hash() != agr.Hash() {
			return nil, refusef(reason.AgreementHashMismatch, "agreement %s is held with other content", agr.ID())
		}
		answer, err := e.cosignedAnswer(ctx, r.txn, held)
		if err != nil {
			return nil, err
		}
		return e.keepAnswer(ctx, r, answer)
	}
	if r.st.State() != protocol.AgreementPending || r.st.t.HeadSequence != 1 {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s; an agreement is signed in agreement_pending", r.txn, r.st.t.State)
	}
	first, err := e.db.EventAt(ctx, r.txn, 1)
	if err != nil || first.AppendedBy != r.from || first.Status != store.EventRecorded {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s has no recorded acceptance by %s to sign an agreement for", r.txn, r.from)
	}
	ev1, err := e.getEvent(ctx, r.txn, first.EventID)
	if err != nil {
		return nil, err
	}
	offer := held(ctx, e, r.txn, ev1.Data("offer_id"), object.AsOffer)
	if offer == nil {
		return nil, errf("the accepted offer %s is not held", ev1.Data("offer_id"))
	}
	acc, ok := e.getTyped(ctx, r.txn, ev1.Data("acceptance_id"), protocol.Acceptance)
	if !ok {
		return nil, errf("the recorded acceptance %s is not held", ev1.Data("acceptance_id"))
	}
	if err := e.checkProposed(ctx, r, agr, offer, acc); err != nil {
		return nil, err
	}
	if err := e.extend(ctx, r.st, r.objs, agr.ID()); err != nil {
		return nil, err
	}
	mandate, err := e.ownMandate(ctx, instanceActor, offer.Mandate())
	if err != nil {
		return nil, err
	}
	signed, err := e.signProposed(ctx, r, agr, offer, mandate, r.st.t.HeadSequence+1)
	if err != nil {
		if waits := e.signatureWaits(ctx, r, err, "agreement", agr); waits != nil {
			return nil, waits
		}
		if !isRefusal(err) {
			return nil, err
		}
		// This instance's agent is told (the transaction's notice), and so
		// is the counterparty's, by the refusal: formation cannot finish,
		// and either party cancels (cancel_transaction).
		return nil, e.ownDenial(ctx, r, err, "agreement",
			refusef(reason.PolicyDenied, "your own policy does not allow signing agreement %s (%v); the transaction stays agreement_pending until either party cancels it (cancel_transaction)",
				agr.ID(), reason.CodesOf(err)),
			refusef(reason.PolicyDenied, "the counterparty does not sign this agreement; the transaction cannot be committed, and either party may cancel it (cancel_transaction)"))
	}
	answerIDs := make([]string, len(signed))
	raws := make([][]byte, len(signed))
	for i, o := range signed {
		answerIDs[i], raws[i] = o.ID(), o.Raw()
	}
	e.point("cosign.before-store")
	err = e.update(ctx, r.txn, func(tx *store.Txn) error {
		if err := tx.PutVerified(info(signed[0]), signed[0].Raw(), r.from); err != nil {
			return err
		}
		for _, o := range signed[1:3] { // the commitment and the decision; an approval is held
			if err := tx.PutVerified(info(o), o.Raw(), originLocal); err != nil {
				return err
			}
		}
		return tx.PutInbox(r.from, r.key, r.txn, answerIDs, r.now)
	})
	if err != nil {
		return nil, err
	}
	e.point("cosign.after-store")
	e.log.Info("agreement signed", "transaction_id", r.txn, "agreement_id", agr.ID(), "commitment_id", signed[1].ID(), "decision", signed[2].ID())
	return raws, nil
}

// checkProposed is the offeror's check of an agreement proposed for its
// signature, before anything is decided: it names the accepted offer by
// its hash and the acceptance accID, carries exactly the offer's terms and
// their hash, names this instance's agent that offered and the proposer in
// their roles (the proposer as its acceptance names the accepting party),
// and exactly one commitment id, unused, for this instance to
// issue under.
func (e *Engine) checkProposed(ctx context.Context, r *receipt, agr *Obj, offer *object.Offer, acc *Obj) error {
	accID := acc.ID()
	terms := agr.Terms()
	offered, _ := canonical.Marshal(offer.Terms())
	proposed, _ := canonical.Marshal(terms)
	termsHash, _ := canonical.Hash(terms)
	me := offer.PSub("offeror") // this instance's agent that made the offer
	mine, theirs := protocol.Role(r.st.t.Role), protocol.Role(r.st.t.Role).Other()
	switch {
	case agr.P("accepted_offer_id") != offer.ID() || agr.P("accepted_offer_hash") != offer.Hash() || agr.P("acceptance_id") != accID:
		return refusef(reason.AgreementHashMismatch, "agreement %s does not name the accepted offer %s by its hash and the recorded acceptance", agr.ID(), offer.ID())
	case string(offered) != string(proposed) || agr.P("terms_hash") != termsHash:
		return refusef(reason.AgreementHashMismatch, "agreement %s does not carry exactly the terms of offer %s", agr.ID(), offer.ID())
	case !sameParty(agr.PSub(string(mine)), me) || agr.PartyOrg(string(theirs)) != r.from || !sameParty(agr.PSub(string(theirs)), acc.PSub("accepting_party")):
		return refusef(reason.AgreementHashMismatch, "agreement %s names the parties wrongly", agr.ID())
	}
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	if len(ids) != 1 {
		return refusef(reason.AgreementHashMismatch, "agreement %s must name exactly one commitment, this instance's", agr.ID())
	}
	if _, err := e.get(ctx, r.txn, str(ids[0])); err == nil {
		return refusef(reason.AgreementHashMismatch, "commitment id %v is already in use", ids[0])
	}
	return nil
}

// acceptance issues the acting party's acceptance of offer, over its
// exact hash. The acceptance is by the offeree agent the offer names
// (canonical model §10 step 3), a first offer's or an amendment's alike.
func (b *builder) acceptance(offer *object.Offer) (*Obj, error) {
	if to := offer.OffereeAgent(); to != b.agent {
		return nil, refusef(reason.StreamMismatch, "offer %s is addressed to agent %s; it is accepted under a mandate of that agent, not of %s", offer.ID(), to, b.agent)
	}
	return b.add(protocol.Acceptance, map[string]any{
		"offer_id":        offer.ID(),
		"offer_hash":      offer.Hash(),
		"session_id":      offer.SessionID(),
		"accepting_party": party(b.e.org.Config().OrganizationID, b.agent),
	}, protocol.PurposeOfferAcceptance)
}

// signatureWaits settles a decision to sign agr (what: an agreement or an
// amendment) that this instance's principal holds for approval (issue
// 16): nothing is stored but the request, the counterparty is told the
// signature waits, and its outbox asks again; the first attempt after the
// principal approved is signed. It returns nil when err is no such hold,
// or one the principal rejected.
func (e *Engine) signatureWaits(ctx context.Context, r *receipt, err error, what string, agr *Obj) error {
	req := heldRequest(err)
	if req == "" || e.rejected(ctx, req) {
		return nil
	}
	e.log.Info("signing the "+what+" waits for the principal's approval", "transaction_id", r.txn, "agreement_id", agr.ID(), "approval_request_id", req)
	return fmt.Errorf("%w: %w", delivery.ErrUnavailable,
		refusef(reason.ApprovalRequired, "the counterparty holds its signature on "+what+" %s for its principal's approval; ask again", agr.ID()))
}

// ownDenial settles this instance's own policy denying its signature of
// an agreement or amendment (what). The deny stays here: this instance's
// agent reads told in the transaction's notice, and the counterparty
// learns only answer, that it is not signed.
func (e *Engine) ownDenial(ctx context.Context, r *receipt, err error, what string, told, answer error) error {
	e.log.Info("own policy does not allow signing the "+what, "transaction_id", r.txn, "codes", reason.CodesOf(err))
	if nerr := e.update(ctx, r.txn, func(tx *store.Txn) error { return tx.SetNotice(r.txn, notice(told, r.now)) }); nerr != nil {
		e.log.Error("could not record the notice", "transaction_id", r.txn, "error", nerr)
	}
	return answer
}

// signProposed is the offeror's signature of a proposed agreement that
// checkProposed passed: its own policy decides agreement.sign (the offer's
// mandate, the agreement's terms, at position seq), then it signs the
// agreement and issues its commitment. It returns the answer: the
// agreement signed by both, the commitment, the decision, and the approval
// that released it if the mandate held it; nothing is stored here. The
// decision's refusal is returned as it is (held or denied), for the
// caller to settle.
func (e *Engine) signProposed(ctx context.Context, r *receipt, agr *Obj, offer *object.Offer, mandate map[string]any, seq int) ([]*Obj, error) {
	mandateID := offer.Mandate()
	terms := agr.Terms()
	d, err := e.ownDecision(ctx, mandate, protocol.ActAgreementSign, r.txn, r.from, terms, agreementRefs(agr), nil, seq)
	if err != nil {
		return nil, err
	}
	now := e.clock().UTC().Truncate(time.Second)
	signed, err := e.countersign(agr, protocol.PurposeAgreementCommitment, now)
	if err != nil {
		return nil, err
	}
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	cmt, err := e.newObject(protocol.Commitment, r.txn, mandateID, map[string]any{
		"agreement_id":    agr.ID(),
		"committed_party": offer.PSub("offeror"),
		"subject": map[string]any{
			"agreement_id": agr.ID(), "terms_hash": agr.P("terms_hash"), "profile": str(terms["profile"]), "term_path": "$.terms.core.quantity",
		},
	}, protocol.PurposeObjectIssuance, now, str(ids[0]))
	if err != nil {
		return nil, err
	}
	answer := []*Obj{signed, cmt, d.pol}
	if d.approval != nil {
		// The principal's approval that released the signature travels
		// with it: the counterparty's verifier asks for it at commit.
		answer = append(answer, d.approval)
	}
	return answer, nil
}

// cosignDirect is the offeror's own part of an acceptance whose agreement
// travels with it, once every check of agreement.direct passed (the
// agreement checked as receiveAgreement checks it, in
// checkAgreementDirect: a wrong one refuses the whole message, nothing of
// it is stored): the agreement signed with its commitment if this
// instance's policy allows agreement.sign now. When its policy
// holds the signature for the principal or refuses it, agreement.direct is
// countersigned alone and the agreement not stored: the proposer then
// sends it on its own, and receiveAgreement answers as it always has
// (asks again, or refuses with A202-POLICY-DENIED).
func cosignDirect(ctx context.Context, e *Engine, r *receipt, ev *Event) ([]*Obj, []*Obj, error) {
	agr := r.one(protocol.Agreement)
	if agr == nil {
		return nil, nil, nil // an acceptance of an older build: the agreement comes on its own
	}
	offer := held(ctx, e, r.txn, ev.Data("offer_id"), object.AsOffer)
	if offer == nil {
		return nil, nil, errf("the accepted offer %s is not held", ev.Data("offer_id"))
	}
	// checkAgreementDirect checked the agreement (checkProposed) and the
	// offeree's agreement.sign (checkRiderSign).
	mandate, err := e.ownMandate(ctx, instanceActor, offer.Mandate())
	var answer []*Obj
	if err == nil {
		answer, err = e.signProposed(ctx, r, agr, offer, mandate, ev.Seq()+1)
	}
	if err != nil {
		if !isRefusal(err) {
			return nil, nil, err
		}
		e.log.Info("the agreement is not signed with the acceptance; it is asked for on its own", "transaction_id", r.txn, "agreement_id", agr.ID(), "codes", reason.CodesOf(err))
		return nil, nil, nil
	}
	e.log.Info("agreement signed", "transaction_id", r.txn, "agreement_id", agr.ID(), "commitment_id", answer[1].ID(), "decision", answer[2].ID())
	if riderSign(r, ev) == nil {
		return answer[:1], answer[1:], nil
	}
	// The offeree's own agreement.sign travelled with its acceptance and
	// passed checkAgreementDirect: the agreement is signed by both and
	// allowed on both sides, so this instance appends agreement.committed
	// now, citing its own decision, and the offeree countersigns it in the
	// write that stores this answer (docs/record-protocol.md, "The
	// commitment in the answer").
	after := *r.st
	after.t.HeadSequence, after.t.HeadHash, after.t.State = ev.Seq(), ev.Hash(), string(ev.To())
	ev2, _, err := e.prepareEvent(&after, protocol.EvAgreementCommitted, committedData(answer[0]), answer[2], offer.Mandate(), r.now)
	if err != nil {
		return nil, nil, err
	}
	e.log.Info("agreement.committed appended in the answer", "transaction_id", r.txn, "event_id", ev2.ID())
	return answer[:1], append(answer[1:], ev2.View), nil
}

// riderSign returns the offeree's agreement.sign decision that travels
// with its acceptance ev beside the acceptance's own, or nil.
func riderSign(r *receipt, ev *Event) *Obj {
	for _, p := range r.byType(protocol.PolicyDecision) {
		if p.ID() != ev.P("policy_decision_id") {
			return p
		}
	}
	return nil
}

// directAnswer rebuilds, for agreement.direct asked for again, what
// cosignDirect answered beside it: the agreement signed by both, its
// commitment and this instance's decision, when it signed one.
func directAnswer(ctx context.Context, e *Engine, txn string, ev *Event) ([][]byte, error) {
	agr, err := e.agreementOf(ctx, txn)
	if err != nil || agr == nil || len(agr.Signatures()) < 2 {
		return nil, err
	}
	out, err := e.cosignedAnswer(ctx, txn, agr)
	if err != nil {
		return nil, err
	}
	// And the agreement.committed this instance appended with it.
	x, err := e.db.EventAt(ctx, txn, ev.Seq()+1)
	if errors.Is(err, store.ErrNotFound) || err == nil && (x.AppendedBy != e.org.Config().OrganizationID || protocol.EventType(x.EventType) != protocol.EvAgreementCommitted) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	raw, err := e.db.GetObject(ctx, txn, x.EventID)
	if err != nil {
		return nil, err
	}
	return append(out, raw), nil
}

// heldRequest returns the approval request a refusal says its act is held
// under, or "".
func heldRequest(err error) string {
	var r *reason.Refusal
	if errors.As(err, &r) && slices.Contains(r.Codes, reason.ApprovalRequired) {
		return r.ApprovalRequestID
	}
	return ""
}

// rejected reports whether the principal rejected the approval request id.
func (e *Engine) rejected(ctx context.Context, id string) bool {
	r, err := e.db.GetApprovalRequest(ctx, id)
	return err == nil && r.Status == store.ApprovalRejected
}

// cosignedAnswer rebuilds the answer to an agreement signed before: the
// agreement, its commitment, and this instance's decision to sign it.
func (e *Engine) cosignedAnswer(ctx context.Context, txn string, agr *object.Agreement) ([][]byte, error) {
	out := [][]byte{agr.Raw()}
	cmts, err := e.ofType(ctx, txn, protocol.Commitment)
	if err != nil {
		return nil, err
	}
	for _, c := range cmts {
		if c.P("agreement_id") == agr.ID() {
			out = append(out, c.Raw())
		}
	}
	pols, err := e.ofType(ctx, txn, protocol.PolicyDecision)
	if err != nil {
		return nil, err
	}
	cfg := e.org.Config()
	var hash string
	for _, p := range pols {
		if p.Org() == cfg.OrganizationID && object.Int(p.Payload()["stream_sequence"]) == 2 {
			out = append(out, p.Raw())
			hash = p.P("action_hash")
		}
	}
	aprs, err := e.ofType(ctx, txn, protocol.Approval)
	if err != nil {
		return nil, err
	}
	for _, a := range aprs {
		if hash != "" && a.Org() == cfg.OrganizationID && a.P("action_hash") == hash {
			out = append(out, a.Raw())
		}
	}
	return out, nil
}

// checkAgreementDirect is the live part of the countersigner's guard of
// agreement.direct (pilot state machine §5.3): the acceptance travels and
// is named by the event, and is of the session's latest offer, this
// instance's own, unexpired now and not withdrawn, in this session. That
// the acceptance signs the offer's exact hash, by the offeree, and the
// rest of the guard, are the verifier's rules (verify.Extend).
func checkAgreementDirect(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	acc := r.one(protocol.Acceptance)
	if acc == nil || acc.ID() != ev.Data("acceptance_id") {
		return refusef(reason.StateTransitionDenied, "agreement.direct names acceptance %s, which does not travel with it", ev.Data("acceptance_id"))
	}
	last, err := e.latestOffer(ctx, r.txn)
	if err != nil || last == nil {
		return refusef(reason.StateTransitionDenied, "transaction %s holds no offer", r.txn)
	}
	switch {
	case acc.P("offer_id") != last.ID() || ev.Data("offer_id") != last.ID():
		return refusef(reason.OfferStale, "the acceptance is of %s, the session's latest offer is %s", acc.P("offer_id"), last.ID())
	case acc.P("offer_hash") != last.Hash():
		return refusef(reason.EvidenceHashMismatch, "the acceptance signs offer hash %s, the offer's hash is %s", acc.P("offer_hash"), last.Hash())
	case acc.P("session_id") != r.st.t.SessionID || ev.Data("session_id") != r.st.t.SessionID:
		return refusef(reason.StreamMismatch, "the acceptance is for session %s, this transaction's is %s", acc.P("session_id"), r.st.t.SessionID)
	case acc.PartyOrg("accepting_party") != r.from:
		return refusef(reason.StreamMismatch, "the acceptance is not by %s", r.from)
	case last.Org() == r.from:
		return refusef(reason.StreamMismatch, "%s cannot accept its own offer", r.from)
	case last.Expired(e.clock()):
		return refusef(reason.OfferExpired, "offer %s lapsed at %s", last.ID(), last.P("valid_until"))
	}
	if err := e.withdrawn(ctx, last); err != nil {
		return err
	}
	// The agreement that travels, checked as receiveAgreement checks one
	// on its own, and the offeree's agreement.sign riding with it: a wrong
	// one refuses the whole message, whether or not this instance then
	// signs (cosignDirect).
	agr := r.one(protocol.Agreement)
	if agr != nil {
		if err := e.checkProposed(ctx, r, agr, last, acc); err != nil {
			return err
		}
	}
	return e.checkRiderSign(ctx, r, ev, agr)
}

// checkRiderSign checks the offeree's agreement.sign that travels with
// its acceptance ev beside the acceptance's own decision (rideIfAllowed),
// once the agreement it signs passed checkProposed: that act, rebuilt
// from the agreement and re-evaluated under the offeree's mandate, allowed
// by the decision, made for the position agreement.committed takes.
// Nothing rides unchecked, whether or not this instance then signs the
// agreement; a message with no second decision passes.
func (e *Engine) checkRiderSign(ctx context.Context, r *receipt, ev *Event, agr *Obj) error {
	sign := riderSign(r, ev)
	if sign == nil {
		return nil
	}
	if agr == nil {
		return refusef(reason.PolicyDenied, "decision %s travels with agreement.direct beside the acceptance's, with no agreement to sign", sign.ID())
	}
	if err := decidedAt(sign, r.txn, ev.Seq()+1); err != nil {
		return err
	}
	return e.checkRiderActs(ctx, r, ev, []riderAct{{obj: agr, act: actDoc{name: protocol.ActAgreementSign, terms: agr.Terms(), refs: agreementRefs(agr)}}})
}

// decidedAt refuses a decision not made on the stream of transaction txn
// for position seq: the verifier's binding of an event's decision to its
// stream and position (which refuses with A202-EVIDENCE-TRANSITION-ILLEGAL),
// for a decision no event names.
func decidedAt(pol *Obj, txn string, seq int) error {
	stream := pol.PSub("stream")
	if str(stream["kind"]) != protocol.TransactionStreamKind || str(stream["id"]) != txn || object.Int(pol.Payload()["stream_sequence"]) != seq {
		return refusef(reason.EvidenceTransitionIllegal, "decision %s is not made for position %d of %s", pol.ID(), seq, txn)
	}
	return nil
}

// checkAgreementCommitted is the live part of the countersigner's guard of
// agreement.committed: the agreement named is held here, and so is the
// commitment the event names, the agreement's. That both parties signed
// the same bytes and that it names the recorded acceptance are the
// verifier's rules (verify.Extend).
func checkAgreementCommitted(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	agr, ok := e.held(ctx, r, ev.Data("agreement_id"), protocol.Agreement)
	if !ok {
		return refusef(reason.StateTransitionDenied, "agreement %s is not held here", ev.Data("agreement_id"))
	}
	if len(agr.Signatures()) != 2 {
		return refusef(reason.EvidenceSignatureInvalid, "agreement %s is not signed by both parties", agr.ID())
	}
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	if len(ids) == 0 || ev.Data("commitment_id") != str(ids[0]) {
		return refusef(reason.AgreementHashMismatch, "agreement.committed names commitment %s, the agreement %v", ev.Data("commitment_id"), ids)
	}
	if _, ok := e.held(ctx, r, str(ids[0]), protocol.Commitment); !ok {
		return refusef(reason.AgreementHashMismatch, "commitment %v is not held", ids[0])
	}
	return nil
}

// AcceptanceAct returns the act document accepting offerID under
// mandateID is evaluated as: what an agent passes to verify_mandate and
// request_approval before accept_offer, so that an approval binds exactly
// the act that will be recorded.
func (e *Engine) AcceptanceAct(ctx context.Context, a Actor, mandateID, offerID string) (map[string]any, error) {
	offer := named(ctx, e, offerID, object.AsOffer)
	if offer == nil {
		return nil, refusef(reason.OfferStale, "offer %s is not held here", offerID)
	}
	m, err := e.ownMandate(ctx, a, mandateID)
	if err != nil {
		return nil, err
	}
	return acceptanceAct(offer, m), nil
}

// acceptanceAct is the act document of accepting offer under mandate m.
func acceptanceAct(offer *object.Offer, m map[string]any) map[string]any {
	return authority.Document(string(protocol.ActOfferAccept), offer.Txn(), offer.Org(), offer.Terms(), nil, m)
}
