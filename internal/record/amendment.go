package record

// Amendment (canonical model §10.1; pilot state machine §5 row
// agreement.amended, test 24).
//
// A committed agreement's terms change by consent, through the mechanism
// that formed them: a fresh offer, a fresh acceptance over its exact hash,
// and a new agreement version signed by both, recorded by
// agreement.amended, a self-loop on committed and in_performance.
//
//	offeror: propose_offer (in committed or in_performance)  → offer + decision → stored by the other
//	         the amendment's first offer supersedes nothing (the session's
//	         last offer was accepted); a counter-offer within the amendment
//	         supersedes the one before it (A202-OFFER-STALE otherwise)
//	offeree: accept_amendment → acceptance (over the exact offer hash)
//	                          + agreement version n+1 (previous_version_id: the agreement in force,
//	                            new id, the offer's exact terms and terms_hash, the same parties
//	                            and commitment), signed by the offeree
//	                          + the obligations the offeree is owed under it, added (riders)
//	                          + its waivers of the duties it is owed that it drops (riders)
//	                          + decision (agreement.amend) + event agreement.amended
//	                            {agreement_id: the new version, offer_id, acceptance_id}
//	offeror's instance: checks it all, its own policy decides agreement.amend, and it
//	                    signs the new version and countersigns the event in one answer:
//	                    [event, the agreement signed by both, its decision]
//
// One message and one answer, so that the amendment is one act: either the
// new version stands signed by both with its event in both records, or
// nothing of it stands anywhere (decided here; formation needs two
// messages because its acceptance is an event of its own, agreement.direct,
// and an amendment's is not). The superseded version stays in the record
// unchanged (rule 1); obligations keep referencing the terms_hash of the
// version they derive from (rule 5); a duty the new version adds is a new
// obligation under it, issued with the event by the party it is owed to;
// a duty it drops is waived by its obligee's signed waive response, with
// the event too. The obligations in force afterwards (those not waived or
// released, remainders aside) owe together exactly the new version's terms
// (owesTerms), unless none was issued yet.
//
// Who adds and drops: the accepting party, for the duties it is owed; the
// other party's own duties change by an amendment the other party accepts
// (it proposes the counter-offer the first one accepts), or by its own
// waivers. A new version that names its predecessor's acceptance or
// accepted offer is a restatement, not an amendment:
// A202-AGREEMENT-AMENDMENT-UNACCEPTED at the countersigner, as at replay
// (gate.CheckBindings, the rule the verifier's agreement_amendment asks).

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// AmendInput accepts an amendment offer.
type AmendInput struct {
	MandateID string `json:"mandate_id" jsonschema:"Your mandate (mnd_...) listing agreement.amend (and obligation.activated / obligation.waive)."`
	// OfferID is the counterparty's amendment offer (list_inbox).
	OfferID string `json:"offer_id" jsonschema:"The amendment offer (off_...) from list_inbox."`
	// AddObligations are the duties this organisation is owed that the
	// new version adds, issued under it.
	AddObligations []DeliverableInput `json:"add_obligations,omitempty" jsonschema:"Duties owed to you that the new terms add."`
	// WaiveObligationIDs are the duties this organisation is owed that the
	// new version drops, waived.
	WaiveObligationIDs []string `json:"waive_obligation_ids,omitempty" jsonschema:"Obligations (obl_...) owed to you that they drop."`
	// ApprovalID is an approval of exactly this act, when the mandate
	// holds agreement.amend for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// amending reports whether an agreement may be amended in st's state.
func amending(st *state) bool {
	_, ok := rules.Next(RulesVersion, rules.Aggregate, st.t.State, protocol.EvAgreementAmended)
	return ok
}

// amendmentSupersedes is the rule an amendment offer's supersedes_offer_id
// follows: nothing, when the session's last offer is the one the agreement
// in force accepted (it is not superseded by changing the deal: it stays
// the agreed offer of its version); the last offer otherwise (a
// counter-offer within the amendment).
func amendmentSupersedes(agr *object.Agreement, last *object.Offer) any {
	if last == nil || last.ID() == agr.AcceptedOfferID() {
		return nil
	}
	return last.ID()
}

// openAmendment returns the counterparty's amendment offer a transaction
// holds, not yet accepted, or nil.
func (e *Engine) openAmendment(ctx context.Context, t store.Transaction) (*object.Offer, *object.Agreement, error) {
	agr, err := e.agreementOf(ctx, t.ID)
	if err != nil || agr == nil {
		return nil, nil, err
	}
	last, err := e.latestOffer(ctx, t.ID)
	if err != nil || last == nil || last.ID() == agr.AcceptedOfferID() {
		return nil, agr, err
	}
	return last, agr, nil
}

// AmendmentAct returns the act document accepting an amendment offer under
// mandateID is evaluated as (agreement.amend: the new version's terms, the
// version amended): what an agent passes to verify_mandate and
// request_approval before accept_amendment.
func (e *Engine) AmendmentAct(ctx context.Context, a Actor, mandateID, offerID string) (map[string]any, error) {
	offer := named(ctx, e, offerID, object.AsOffer)
	if offer == nil {
		return nil, refusef(reason.OfferStale, "offer %s is not held here", offerID)
	}
	agr, err := e.agreementOf(ctx, offer.Txn())
	if err != nil {
		return nil, err
	}
	if agr == nil {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s has no agreement to amend", offer.Txn())
	}
	m, err := e.ownMandate(ctx, a, mandateID)
	if err != nil {
		return nil, err
	}
	return amendmentAct(offer, agr, m), nil
}

// amendmentAct is the act document of accepting an amendment offer of agr
// under mandate m.
func amendmentAct(offer *object.Offer, agr *object.Agreement, m map[string]any) map[string]any {
	return authority.Document(string(protocol.ActAgreementAmend), offer.Txn(), offer.Org(), offer.Terms(), map[string]any{"agreement_id": agr.ID()}, m)
}

// AcceptAmendment accepts the counterparty's amendment offer and records
// the new agreement version (see the top of this file).
func (e *Engine) AcceptAmendment(ctx context.Context, a Actor, in AmendInput) (Outcome, error) {
	return agreementAmend.perform(ctx, e, a, in)
}

// agreementAmend is agreement.amend: agreement.amended, whose new version
// both parties sign (cosignAmendment).
var agreementAmend = &act[AmendInput]{
	name: protocol.ActAgreementAmend,
	lines: []actLine{
		{event: protocol.EvAgreementAmended, offers: true,
			carries: counts{protocol.Acceptance: 1, protocol.Agreement: 1, protocol.Obligation: -1, protocol.ObligationResponse: -1, protocol.PolicyDecision: -1},
			check:   checkAmended, cosign: cosignAmendment, answer: amendmentAnswer, settle: settleAmendment,
			apply: moves(carriedPending, responded)},
	},
	spec: amendSpec,
}

func amendSpec(ctx context.Context, e *Engine, a Actor, in AmendInput) (actSpec, error) {
	offer := named(ctx, e, in.OfferID, object.AsOffer)
	if offer == nil {
		return actSpec{}, refusef(reason.OfferStale, "offer %s is not held here; call list_inbox", in.OfferID)
	}
	txn := offer.Txn()
	var prev *object.Agreement
	var waived []*Obj
	v2ID, err := envelope.NewID("agr")
	if err != nil {
		return actSpec{}, err
	}
	return actSpec{
		txn: txn, mandateID: in.MandateID, approvalID: in.ApprovalID,
		event: protocol.EvAgreementAmended,
		check: func(ctx context.Context, st *state) error {
			if !amending(st) {
				return refusef(reason.StateTransitionDenied, "transaction %s is %s: an agreement is amended in committed or in_performance (rules %s)", txn, st.t.State, RulesVersion)
			}
			if offer.Offeree() != e.org.Config().OrganizationID {
				return refusef(reason.StreamMismatch, "offer %s was made by this organisation; only its offeree accepts it", in.OfferID)
			}
			var err error
			var last *object.Offer
			if last, prev, err = e.openAmendment(ctx, st.t); err != nil {
				return err
			}
			if prev == nil {
				return refusef(reason.StateTransitionDenied, "transaction %s has no agreement to amend", txn)
			}
			if in.OfferID == prev.AcceptedOfferID() {
				return refusef(reason.AgreementAmendmentUnaccepted, "offer %s is the one agreement %s was formed on: an amendment is reached through a fresh offer", in.OfferID, prev.ID())
			}
			if last == nil || last.ID() != in.OfferID {
				return refusef(reason.OfferStale, "offer %s is not the session's latest offer", in.OfferID)
			}
			if offer.Expired(st.now) {
				return refusef(reason.OfferExpired, "offer %s lapsed at %s", in.OfferID, offer.P("valid_until"))
			}
			if err := e.withdrawn(ctx, offer); err != nil {
				return err
			}
			cfg := e.org.Config()
			for _, id := range in.WaiveObligationIDs {
				obl, err := e.heldObligation(ctx, id)
				if err != nil {
					return err
				}
				if obl.Txn() != txn || obl.Obligee() != cfg.OrganizationID {
					return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s waives it (obligation §5.2 rule 1)", id)
				}
				os, err := e.obligationState(ctx, txn, id)
				if err != nil {
					return err
				}
				if err := waivable(st.State(), id, os); err != nil {
					return err
				}
				waived = append(waived, obl.View)
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return offer.Terms(), map[string]any{"agreement_id": prev.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			acc, err := b.acceptance(offer)
			if err != nil {
				return err
			}
			terms := offer.Terms()
			termsHash, err := canonical.Hash(terms)
			if err != nil {
				return err
			}
			pp := prev.Payload()
			v2, err := e.newVersion(protocol.Agreement, txn, b.mandateID, map[string]any{
				"accepted_offer_id":   offer.ID(),
				"accepted_offer_hash": offer.Hash(),
				"acceptance_id":       acc.ID(),
				"buyer":               pp["buyer"],
				"supplier":            pp["supplier"],
				"terms":               terms,
				"terms_hash":          termsHash,
				"effective_at":        envelope.Timestamp(b.now),
				"commitment_ids":      pp["commitment_ids"],
			}, protocol.PurposeAgreementCommitment, b.now, v2ID, prev.View)
			if err != nil {
				return asRefusal(err, reason.TermsInvalid)
			}
			b.created = append(b.created, v2)
			var added []*Obj
			if len(in.AddObligations) > 0 {
				if added, err = e.issueObligations(b, v2, in.AddObligations); err != nil {
					return err
				}
			}
			var responses []*Obj
			for _, obl := range waived {
				obr, err := b.add(protocol.ObligationResponse, map[string]any{"obligation_id": obl.ID(), "response_type": "waive"}, protocol.PurposeObjectIssuance)
				if err != nil {
					return asRefusal(err, reason.TermsInvalid)
				}
				responses = append(responses, obr)
			}
			if err := e.inForceOwesTerms(ctx, txn, v2, added, waived); err != nil {
				return err
			}
			for i, o := range added {
				if err := b.ride(ctx, o); err != nil {
					return err
				}
				b.name(obligationRole(i), o.ID())
			}
			for i, o := range responses {
				if err := b.ride(ctx, o); err != nil {
					return err
				}
				b.name(fmt.Sprintf("waiver_%d", i+1), o.ID())
			}
			b.data = map[string]any{"agreement_id": v2.ID(), "offer_id": offer.ID(), "acceptance_id": acc.ID()}
			b.name("acceptance", acc.ID())
			b.name("agreement", v2.ID())
			return nil
		},
	}, nil
}

// inForceOwesTerms applies owesTerms to the obligations in force once an
// amendment to agr adds added and waives waived: every obligation of the
// transaction not waived, released or a remainder, and the added ones.
// With none in force (nothing issued yet), there is nothing to check.
func (e *Engine) inForceOwesTerms(ctx context.Context, txn string, agr *Obj, added, waived []*Obj) error {
	rows, err := e.db.ObligationStates(ctx, txn)
	if err != nil {
		return err
	}
	remainders := map[string]bool{}
	responses, err := e.ofType(ctx, txn, protocol.ObligationResponse)
	if err != nil {
		return err
	}
	for _, r := range responses {
		if id := r.P("remainder_obligation_id"); id != "" {
			remainders[id] = true
		}
	}
	dropped := map[string]bool{}
	for _, o := range waived {
		dropped[o.ID()] = true
	}
	inForce := append([]*Obj(nil), added...)
	for _, os := range rows {
		switch protocol.ObligationState(os.State) {
		case protocol.OblWaived, protocol.OblReleased:
			continue
		}
		if remainders[os.ObligationID] || dropped[os.ObligationID] {
			continue
		}
		o := held(ctx, e, txn, os.ObligationID, object.AsObligation)
		if o == nil {
			return errf("obligation %s is not held", os.ObligationID)
		}
		inForce = append(inForce, o.View)
	}
	if len(inForce) == 0 {
		return nil
	}
	return owesTerms(agr, inForce)
}

// checkAmended is the offeror's live part of the guard of
// agreement.amended: the new version, its acceptance and the offer are
// the ones the event names; the version reuses neither its predecessor's
// offer nor its acceptance (gate.CheckBindings, first, so that a
// restatement is refused as what it is); it supersedes the agreement in
// force, by one version, on this instance's own latest offer, unexpired
// and not withdrawn, accepted over its exact hash by the sender; it
// carries exactly that offer's terms, the same parties and commitment,
// and only the sender's signature; the obligations it adds derive from it
// (checkIssued), the duties it drops are the sender's to waive, and the
// obligations in force owe its terms; each of those is an act of its own
// with its own decision. The verifier's rules (verify.Extend) follow.
func checkAmended(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	v2, acc := r.find(ev.Data("agreement_id")), r.find(ev.Data("acceptance_id"))
	if v2 == nil || v2.Type() != protocol.Agreement {
		return refusef(reason.StateTransitionDenied, "agreement.amended names agreement %s, which does not travel with it", ev.Data("agreement_id"))
	}
	prev, err := e.agreementOf(ctx, r.txn)
	if err != nil {
		return err
	}
	if prev == nil {
		return refusef(reason.StateTransitionDenied, "transaction %s has no agreement to amend", r.txn)
	}
	if ps := gate.CheckBindings([]map[string]any{v2.Value(), prev.Value()}, gate.SetContext{}); len(ps) > 0 {
		var codes []reason.Code
		for _, p := range ps {
			codes = append(codes, p.Code)
		}
		return reason.Refuse(fmt.Sprintf("agreement %s: %s", v2.ID(), ps[0].Detail), codes...)
	}
	if acc == nil || acc.Type() != protocol.Acceptance || v2.P("acceptance_id") != acc.ID() {
		return refusef(reason.AgreementAmendmentUnaccepted, "agreement %s is not formed on a fresh acceptance travelling with it", v2.ID())
	}
	last, err := e.latestOffer(ctx, r.txn)
	if err != nil {
		return err
	}
	cfg := e.org.Config()
	if last == nil || last.Org() != cfg.OrganizationID || last.ID() == prev.AcceptedOfferID() {
		return refusef(reason.OfferStale, "this organisation made no amendment offer that is the session's latest")
	}
	offered, _ := canonical.Marshal(last.Terms())
	proposed, _ := canonical.Marshal(v2.Terms())
	termsHash, _ := canonical.Hash(v2.Terms())
	prevIDs, _ := canonical.Marshal(prev.Payload()["commitment_ids"])
	ids, _ := canonical.Marshal(v2.Payload()["commitment_ids"])
	switch {
	case ev.Data("offer_id") != last.ID() || v2.P("accepted_offer_id") != last.ID() || v2.P("accepted_offer_hash") != last.Hash():
		return refusef(reason.OfferStale, "the amendment is formed on %s; this organisation's latest offer is %s", v2.P("accepted_offer_id"), last.ID())
	case last.Expired(e.clock()):
		return refusef(reason.OfferExpired, "offer %s lapsed at %s", last.ID(), last.P("valid_until"))
	case acc.P("offer_id") != last.ID() || acc.P("offer_hash") != last.Hash():
		return refusef(reason.EvidenceHashMismatch, "acceptance %s does not sign the exact hash of offer %s", acc.ID(), last.ID())
	case acc.PartyOrg("accepting_party") != r.from || acc.P("session_id") != r.st.t.SessionID:
		return refusef(reason.StreamMismatch, "acceptance %s is not %s's, in this session", acc.ID(), r.from)
	case str(v2.Value()["previous_version_id"]) != prev.ID() || object.Int(v2.Value()["version"]) != object.Int(prev.Value()["version"])+1:
		return refusef(reason.StateTransitionDenied, "agreement %s is not the next version of the agreement in force %s", v2.ID(), prev.ID())
	case string(offered) != string(proposed) || v2.P("terms_hash") != termsHash:
		return refusef(reason.AgreementHashMismatch, "agreement %s does not carry exactly the terms of offer %s", v2.ID(), last.ID())
	case !sameParty(v2.PSub("buyer"), prev.PSub("buyer")) || !sameParty(v2.PSub("supplier"), prev.PSub("supplier")) || string(ids) != string(prevIDs):
		return refusef(reason.AgreementHashMismatch, "agreement %s names other parties or commitments than %s", v2.ID(), prev.ID())
	case len(v2.Signatures()) != 1 || v2.Org() != r.from:
		return refusef(reason.EvidenceSignatureInvalid, "agreement %s comes for this organisation's signature signed by %s alone", v2.ID(), r.from)
	}
	if err := e.withdrawn(ctx, last); err != nil {
		return err
	}
	var added, waived, riders []*Obj
	for _, o := range r.byType(protocol.Obligation) {
		if err := e.checkIssued(r.from, v2, o, true); err != nil {
			return err
		}
		added = append(added, o)
		riders = append(riders, o)
	}
	for _, obr := range r.byType(protocol.ObligationResponse) {
		if obr.P("response_type") != "waive" {
			return refusef(reason.StateTransitionDenied, "an amendment carries waivers of the duties it drops, not a %s response", obr.P("response_type"))
		}
		obl := held(ctx, e, r.txn, obr.P("obligation_id"), object.AsObligation)
		if obl == nil {
			return refusef(reason.ObligationSubjectUnreferenced, "waiver %s names obligation %s, which is not held on this transaction", obr.ID(), obr.P("obligation_id"))
		}
		if obl.Obligee() != r.from || obl.ObligeeAgent() != obr.Agent() {
			return refusef(reason.ObligationResponseUnauthorized, "only the obligee of %s waives it (obligation §5.2 rule 1)", obl.ID())
		}
		os, err := e.obligationState(ctx, obl.Txn(), obl.ID())
		if err != nil {
			return err
		}
		if err := waivable(r.st.State(), obl.ID(), os); err != nil {
			return err
		}
		waived = append(waived, obl.View)
		riders = append(riders, obr)
	}
	if err := e.inForceOwesTerms(ctx, r.txn, v2, added, waived); err != nil {
		return err
	}
	return e.checkRiders(ctx, r, ev, riders)
}

// cosignAmendment is the offeror's own part, once every check passed: its
// own policy decides agreement.amend (the new version's terms, the
// version amended) under the mandate it offered under, and it signs the
// new version. Its own deny stays here: the counterparty learns only that
// the amendment is not signed, and this instance's agent reads it in the
// transaction's notice.
func cosignAmendment(ctx context.Context, e *Engine, r *receipt, ev *Event) ([]*Obj, []*Obj, error) {
	v2 := r.find(ev.Data("agreement_id"))
	mandate, err := e.amendmentMandate(ctx, v2)
	if err != nil {
		return nil, nil, err
	}
	prev := str(v2.Value()["previous_version_id"])
	d, err := e.ownDecision(ctx, mandate, protocol.ActAgreementAmend, r.txn, r.from, v2.Terms(), map[string]any{"agreement_id": prev}, nil, ev.Seq())
	if err != nil {
		// Held for this instance's principal, or denied, as its signature
		// of an agreement is; an approved one is signed with its approval.
		if waits := e.signatureWaits(ctx, r, err, "amendment", v2); waits != nil {
			return nil, nil, waits
		}
		return nil, nil, e.ownDenial(ctx, r, err, "amendment",
			refusef(reason.PolicyDenied, "your own policy does not allow signing amendment %s (%v)", v2.ID(), reason.CodesOf(err)),
			refusef(reason.PolicyDenied, "the counterparty does not sign this amendment"))
	}
	signed, err := e.countersign(v2, protocol.PurposeAgreementCommitment, r.now)
	if err != nil {
		return nil, nil, err
	}
	own := []*Obj{d.pol}
	if d.approval != nil {
		own = append(own, d.approval)
	}
	return []*Obj{signed}, own, nil
}

// amendmentMandate is the mandate the offeror's policy decides its
// signature of the new version v2 under, when it signs it and when it
// answers again: the one it offered the amendment under.
func (e *Engine) amendmentMandate(ctx context.Context, v2 *Obj) (map[string]any, error) {
	offer := held(ctx, e, v2.Txn(), v2.P("accepted_offer_id"), object.AsOffer)
	if offer == nil {
		return nil, errf("the amendment offer %s is not held", v2.P("accepted_offer_id"))
	}
	return e.ownMandate(ctx, instanceActor, offer.Mandate())
}

// amendmentAnswer rebuilds the offeror's answer to an amendment it
// countersigned before: the new version as signed by both, and its
// decision to sign it.
func amendmentAnswer(ctx context.Context, e *Engine, txn string, ev *Event) ([][]byte, error) {
	v2 := held(ctx, e, txn, ev.Data("agreement_id"), object.AsAgreement)
	if v2 == nil {
		return nil, errf("agreement %s is not held", ev.Data("agreement_id"))
	}
	mandate, err := e.amendmentMandate(ctx, v2.View)
	if err != nil {
		return nil, err
	}
	t, err := e.db.GetTransaction(ctx, txn)
	if err != nil {
		return nil, err
	}
	h, err := authority.ActionHash(authority.Document(string(protocol.ActAgreementAmend), txn, t.Counterparty, v2.Terms(),
		map[string]any{"agreement_id": str(v2.Value()["previous_version_id"])}, mandate))
	if err != nil {
		return nil, err
	}
	pols, err := e.ofType(ctx, txn, protocol.PolicyDecision)
	if err != nil {
		return nil, err
	}
	for _, p := range pols {
		if p.Org() == e.org.Config().OrganizationID && object.Int(p.Payload()["stream_sequence"]) == ev.Seq() && p.P("action_hash") == h {
			out := [][]byte{v2.Raw(), p.Raw()}
			aprs, err := e.ofType(ctx, txn, protocol.Approval)
			if err != nil {
				return nil, err
			}
			for _, a := range aprs {
				if a.Org() == e.org.Config().OrganizationID && a.P("action_hash") == h {
					out = append(out, a.Raw()) // the approval that released it
				}
			}
			return out, nil
		}
	}
	return nil, errf("this instance's decision to sign %s is not held", v2.ID())
}

// settleAmendment checks, on the appending side, what the offeror answered
// beside the countersigned event: the new version's exact bytes with its
// agreement_commitment signature added, and its allow decision for its own
// agreement.amend act; and returns how to store them with the event.
func settleAmendment(ctx context.Context, e *Engine, m store.OutboxMessage, objs []*Obj, reply [][]byte) (func(tx *store.Txn) error, error) {
	ev := messageEvent(objs)
	if ev == nil {
		return nil, errf("the amendment message carries no event")
	}
	var ours *Obj
	for _, o := range objs {
		if o.ID() == ev.Data("agreement_id") {
			ours = o
		}
	}
	if ours == nil {
		return nil, errf("the amendment message carries no agreement %s", ev.Data("agreement_id"))
	}
	var v2, pol, apr *Obj
	for _, b := range reply {
		o, err := e.parse(b)
		if err != nil {
			return nil, err
		}
		switch {
		case o.ID() == ours.ID():
			v2 = o
		case o.Type() == protocol.PolicyDecision:
			pol = o
		case o.Type() == protocol.Approval:
			apr = o
		}
	}
	if v2 == nil || pol == nil || v2.Hash() != ours.Hash() {
		return nil, refusef(reason.AgreementHashMismatch, "%s's answer does not carry agreement %s as proposed and its decision", m.Peer, ours.ID())
	}
	if h, err := contentHash(v2); err != nil || h != ours.Hash() {
		return nil, refusef(reason.AgreementHashMismatch, "%s returned agreement %s with other bytes", m.Peer, ours.ID())
	}
	if !verify.KeptAndCountersigned(ours.Value(), v2.Value(), protocol.PurposeAgreementCommitment) {
		return nil, refusef(reason.EvidenceSignatureInvalid, "the new version's signatures are not ours then %s's agreement_commitment", m.Peer)
	}
	if err := e.verifyEntry(ctx, v2, 1, m.Peer, "agt_"); err != nil {
		return nil, err
	}
	supporting := []*Obj{pol}
	if apr != nil {
		// The counterparty's principal released its signature.
		if apr.P("action_hash") != pol.P("action_hash") {
			return nil, refusef(reason.ApprovalHashMismatch, "approval %s binds %s, the counterparty's decision %s", apr.ID(), apr.P("action_hash"), pol.P("action_hash"))
		}
		supporting = append(supporting, apr)
	}
	if err := e.checkAuthors(ctx, m.Peer, supporting); err != nil {
		return nil, err
	}
	a := actDoc{name: protocol.ActAgreementAmend, terms: v2.Terms(), refs: map[string]any{"agreement_id": str(v2.Value()["previous_version_id"])}}
	// A decision made in answer to this instance's agreement.amended,
	// which the answer may reach late (a lost reply asked again).
	since, err := envelope.ParseTimestamp(ev.P("occurred_at"))
	if err != nil {
		return nil, err
	}
	if err := e.checkDecision(ctx, m.Peer, pol, pol, a, m.TransactionID, apr, false, since); err != nil {
		return nil, err
	}
	return func(tx *store.Txn) error {
		if err := tx.ReplaceVerified(info(v2), ours.Raw(), v2.Raw()); err != nil {
			return err
		}
		for _, o := range supporting {
			if err := putReceived(tx, o, m.Peer); err != nil {
				return err
			}
		}
		return nil
	}, nil
}
