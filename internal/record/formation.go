package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// OfferInput is what the offeror's agent proposes.
type OfferInput struct {
	MandateID string `json:"mandate_id"`
	// Counterparty is the offeree organisation (org_...).
	Counterparty string `json:"counterparty_organization_id"`
	// Terms is the complete terms object {profile, core, profile_terms}.
	Terms map[string]any `json:"terms"`
	// ValidUntil is when the offer lapses (YYYY-MM-DDTHH:MM:SSZ).
	ValidUntil string `json:"valid_until"`
	// TransactionID continues a transaction (a counter-offer), or opens a
	// new one under an identifier agreed beforehand (a mandate scoped to
	// it); empty opens a new one under a fresh identifier.
	TransactionID string `json:"transaction_id,omitempty"`
	// SupersedesOfferID names the offer this counter-offer answers: it must
	// be the immediately preceding offer of the session.
	SupersedesOfferID string `json:"supersedes_offer_id,omitempty"`
	// EvidenceRefs are short-form evidence references (evd_...).
	EvidenceRefs []string `json:"evidence_refs,omitempty"`
}

// AcceptInput is what the offeree's agent accepts.
type AcceptInput struct {
	MandateID  string `json:"mandate_id"`
	OfferID    string `json:"offer_id"`
	ApprovalID string `json:"approval_id,omitempty"`
}

// peerAgent returns the agent of org that acts in its key records.
func (e *Engine) peerAgent(ctx context.Context, org string) (string, error) {
	if err := e.o.Trusted.EnsureKeys(ctx, org); err != nil {
		return "", fmt.Errorf("record: learning %s's agent: %w", org, err)
	}
	recs, err := e.o.Store.ObjectsOfType(ctx, "key_record")
	if err != nil {
		return "", err
	}
	for _, b := range recs {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			continue
		}
		if str(pl(o)["controller_organization_id"]) == org {
			if a := str(sub(o, "created_by")["agent_id"]); a != "" {
				return a, nil
			}
		}
	}
	return "", fmt.Errorf("record: no key record of %s names its agent", org)
}

// offers returns the offers of a transaction in the order they were
// stored: the session's history.
func (e *Engine) offers(ctx context.Context, txn string) ([]object, error) {
	all, err := e.o.Store.TransactionObjects(ctx, txn)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, b := range all {
		o, err := canonical.DecodeObject(b)
		if err == nil && typeOf(o) == "offer" {
			out = append(out, o)
		}
	}
	return out, nil
}

func expired(o object, now time.Time) bool {
	t, err := envelope.ParseTimestamp(str(pl(o)["valid_until"]))
	return err != nil || !now.Before(t)
}

// ProposeOffer signs an offer under the agent's mandate and delivers it to
// the counterparty. A new transaction is opened unless TransactionID
// continues one with a counter-offer.
func (e *Engine) ProposeOffer(ctx context.Context, in OfferInput) (Outcome, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	cfg := e.o.Config()
	m, err := e.ownMandate(ctx, in.MandateID)
	if err != nil {
		return Outcome{}, err
	}
	if _, err := e.o.Peers.Peer(in.Counterparty); err != nil {
		return Outcome{}, refusef(reason.PolicyDenied, "%s is not a peered counterparty; pin its peer file with `party peer add`", in.Counterparty)
	}
	until, err := envelope.ParseTimestamp(in.ValidUntil)
	if err != nil {
		return Outcome{}, refusef(reason.TermsInvalid, "valid_until: %v", err)
	}
	if !until.After(now) {
		return Outcome{}, refusef(reason.OfferExpired, "valid_until %s is not after now (%s)", in.ValidUntil, envelope.Timestamp(now))
	}
	txn := in.TransactionID
	role := "supplier"
	if txn == "" {
		if txn, err = envelope.NewID("txn"); err != nil {
			return Outcome{}, err
		}
	}
	unlock := e.lock(txn)
	defer unlock()
	session := ""
	var supersedes any
	newTxn := true
	if t, err := e.o.Store.GetTransaction(ctx, txn); err == nil {
		newTxn = false
		if t.Counterparty != in.Counterparty {
			return Outcome{}, refusef(reason.StreamMismatch, "transaction %s is held with %s", txn, t.Counterparty)
		}
		if t.State != "draft" {
			return Outcome{}, refusef(reason.StateTransitionDenied, "transaction %s is %s; offers are made in draft", txn, t.State)
		}
		role, session = t.Role, t.SessionID
		offers, err := e.offers(ctx, txn)
		if err != nil {
			return Outcome{}, err
		}
		if len(offers) > 0 {
			last := offers[len(offers)-1]
			if in.SupersedesOfferID != idOf(last) {
				return Outcome{}, refusef(reason.OfferStale, "a counter-offer supersedes the session's latest offer %s, not %q", idOf(last), in.SupersedesOfferID)
			}
			supersedes = idOf(last)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return Outcome{}, err
	} else if in.SupersedesOfferID != "" {
		return Outcome{}, refusef(reason.OfferStale, "transaction %s holds no offer to supersede", txn)
	}
	if session == "" {
		if session, err = envelope.NewID("ses"); err != nil {
			return Outcome{}, err
		}
	}
	peerAgent, err := e.peerAgent(ctx, in.Counterparty)
	if err != nil {
		return Outcome{}, err
	}
	pol, polRaw, _, err := e.ownDecision(ctx, m, authority.ActOfferSubmit, txn, in.Counterparty, in.Terms, nil, nil, 1)
	if err != nil {
		return Outcome{}, err
	}
	refs := []any{}
	for _, r := range in.EvidenceRefs {
		refs = append(refs, r)
	}
	offer, offerRaw, err := e.newObject("offer", txn, in.MandateID, map[string]any{
		"offeror":             party(cfg.OrganizationID, cfg.AgentID),
		"offeree":             party(in.Counterparty, peerAgent),
		"session_id":          session,
		"supersedes_offer_id": supersedes,
		"valid_until":         in.ValidUntil,
		"terms":               in.Terms,
		"evidence_refs":       refs,
	}, "offer_submission", now, "")
	if err != nil {
		var r *reason.Refusal
		if errors.As(err, &r) {
			return Outcome{}, err
		}
		return Outcome{}, refusef(reason.TermsInvalid, "%v", err)
	}
	err = e.o.Store.Update(ctx, func(tx *store.Txn) error {
		if err := tx.CreateTransaction(txn, in.Counterparty, role, session, "draft"); err != nil {
			return err
		}
		if err := tx.SetSession(txn, session); err != nil {
			return err
		}
		if _, err := tx.PutObject(offerRaw, "local"); err != nil {
			return err
		}
		_, err := tx.PutObject(polRaw, "local")
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{TransactionID: txn, State: "draft", Objects: map[string]string{"offer": idOf(offer), "policy_decision": idOf(pol), "session": session}}
	_, err = e.send.Send(ctx, in.Counterparty, txn, [][]byte{offerRaw, polRaw})
	switch {
	case err == nil:
		out.Status = "delivered"
	case e.queued(err):
		out.Status = "pending"
		out.WaitingFor = in.Counterparty + " to receive the offer; delivery is retried until it answers"
	default:
		_ = e.o.Store.Update(ctx, func(tx *store.Txn) error {
			tx.DeleteObject(idOf(offer))
			tx.DeleteObject(idOf(pol))
			if newTxn {
				return tx.DeleteTransaction(txn)
			}
			return nil
		})
		return Outcome{}, err
	}
	return out, nil
}

// receiveOffer is the offeree's side of an offer.
func (e *Engine) receiveOffer(ctx context.Context, from, txn string, offer, pol object, raws [][]byte) ([][]byte, error) {
	now := e.o.Clock()
	cfg := e.o.Config()
	p := pl(offer)
	if str(sub(p, "offeror")["organization_id"]) != from || str(sub(p, "offeree")["organization_id"]) != cfg.OrganizationID {
		return nil, refusef(reason.StreamMismatch, "offer %s is not from %s to %s", idOf(offer), from, cfg.OrganizationID)
	}
	if str(sub(p, "offeree")["agent_id"]) != cfg.AgentID {
		return nil, refusef(reason.StreamMismatch, "offer %s is addressed to agent %v, not %s", idOf(offer), sub(p, "offeree")["agent_id"], cfg.AgentID)
	}
	if expired(offer, now) {
		return nil, refusef(reason.OfferExpired, "offer %s lapsed at %v", idOf(offer), p["valid_until"])
	}
	session := str(p["session_id"])
	role := "buyer"
	if t, err := e.o.Store.GetTransaction(ctx, txn); err == nil {
		if t.Counterparty != from || t.SessionID != session {
			return nil, refusef(reason.StreamMismatch, "transaction %s is held with %s in session %s", txn, t.Counterparty, t.SessionID)
		}
		if t.State != "draft" {
			return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s; offers are made in draft", txn, t.State)
		}
		role = t.Role
		offers, err := e.offers(ctx, txn)
		if err != nil {
			return nil, err
		}
		if len(offers) > 0 && str(p["supersedes_offer_id"]) != idOf(offers[len(offers)-1]) {
			return nil, refusef(reason.OfferStale, "offer %s supersedes %v, but the session's latest offer is %s", idOf(offer), p["supersedes_offer_id"], idOf(offers[len(offers)-1]))
		}
	} else if p["supersedes_offer_id"] != nil {
		return nil, refusef(reason.OfferStale, "offer %s supersedes %v, which this session does not hold", idOf(offer), p["supersedes_offer_id"])
	}
	terms, _ := p["terms"].(map[string]any)
	if err := e.checkDecision(ctx, from, offer, pol, authority.ActOfferSubmit, txn, terms, nil, nil); err != nil {
		return nil, err
	}
	err := e.o.Store.Update(ctx, func(tx *store.Txn) error {
		if err := tx.CreateTransaction(txn, from, role, session, "draft"); err != nil {
			return err
		}
		for _, b := range raws {
			if _, err := tx.PutObject(b, from); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("offer received", "transaction_id", txn, "offer_id", idOf(offer), "from", from)
	return [][]byte{}, nil
}

// AcceptOffer accepts the counterparty's latest offer: the acceptance over
// its exact hash and event 1, agreement.direct (draft → agreement_pending),
// then the agreement and event 2, agreement.committed (→ committed). It
// returns the state reached, or pending with what it waits for.
func (e *Engine) AcceptOffer(ctx context.Context, in AcceptInput) (Outcome, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	cfg := e.o.Config()
	offer, _, err := e.load(ctx, in.OfferID)
	if err != nil || typeOf(offer) != "offer" {
		return Outcome{}, refusef(reason.OfferStale, "offer %s is not held here; call list_inbox", in.OfferID)
	}
	txn := str(offer["transaction_id"])
	unlock := e.lock(txn)
	defer unlock()
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	p := pl(offer)
	if str(sub(p, "offeree")["organization_id"]) != cfg.OrganizationID {
		return Outcome{}, refusef(reason.StreamMismatch, "offer %s was made by this organisation; only its offeree accepts it", in.OfferID)
	}
	if t.State != "draft" {
		return Outcome{}, refusef(reason.StateTransitionDenied, "transaction %s is %s; an offer is accepted in draft", txn, t.State)
	}
	offers, err := e.offers(ctx, txn)
	if err != nil {
		return Outcome{}, err
	}
	if idOf(offers[len(offers)-1]) != in.OfferID {
		return Outcome{}, refusef(reason.OfferStale, "offer %s was superseded by %s", in.OfferID, idOf(offers[len(offers)-1]))
	}
	if expired(offer, now) {
		return Outcome{}, refusef(reason.OfferExpired, "offer %s lapsed at %v", in.OfferID, p["valid_until"])
	}
	if err := e.withdrawn(ctx, offer); err != nil {
		return Outcome{}, err
	}
	m, err := e.ownMandate(ctx, in.MandateID)
	if err != nil {
		return Outcome{}, err
	}
	var approval object
	var approvalRaw []byte
	if in.ApprovalID != "" {
		if approval, approvalRaw, err = e.load(ctx, in.ApprovalID); err != nil || typeOf(approval) != "approval" {
			return Outcome{}, refusef(reason.ApprovalRequired, "approval %s is not held here", in.ApprovalID)
		}
	}
	terms, _ := p["terms"].(map[string]any)
	pol, polRaw, _, err := e.ownDecision(ctx, m, authority.ActOfferAccept, txn, t.Counterparty, terms, nil, approval, t.HeadSequence+1)
	if err != nil {
		return Outcome{}, err
	}
	acc, accRaw, err := e.newObject("acceptance", txn, in.MandateID, map[string]any{
		"offer_id":        in.OfferID,
		"offer_hash":      hashOf(offer),
		"session_id":      str(p["session_id"]),
		"accepting_party": party(cfg.OrganizationID, cfg.AgentID),
	}, "offer_acceptance", now, "")
	if err != nil {
		return Outcome{}, err
	}
	ev, evRaw, row, err := e.prepareEvent(t, "agreement.direct", map[string]any{
		"offer_id": in.OfferID, "acceptance_id": idOf(acc), "session_id": str(p["session_id"]),
	}, pol, in.MandateID, now)
	if err != nil {
		return Outcome{}, err
	}
	a := &act{txn: txn, peer: t.Counterparty, created: [][]byte{accRaw, polRaw}, event: ev, eventRaw: evRaw, ev: row}
	if approvalRaw != nil {
		a.carried = [][]byte{approvalRaw}
	}
	if err := e.commitPending(ctx, a); err != nil {
		return Outcome{}, err
	}
	out, err := e.deliver(ctx, a)
	if err != nil || out.Status != "recorded" {
		return out, err
	}
	// Formation continues at once: the agreement and its commitment.
	return e.advance(ctx, txn)
}

// advance runs followUp and reports where the transaction stands.
func (e *Engine) advance(ctx context.Context, txn string) (Outcome, error) {
	err := e.followUp(ctx, txn)
	t, terr := e.o.Store.GetTransaction(ctx, txn)
	if terr != nil {
		return Outcome{}, terr
	}
	out := Outcome{TransactionID: txn, Status: "recorded", State: t.State}
	switch {
	case err == nil:
	case e.queued(err):
		out.Status = "pending"
		out.WaitingFor = t.Counterparty + " to answer; delivery is retried until it does"
	default:
		return out, err
	}
	if evs, _ := e.o.Store.Events(ctx, txn); len(evs) > 0 && evs[len(evs)-1].Status == store.EventPending {
		out.Status = "pending"
		out.WaitingFor = fmt.Sprintf("%s to countersign %s", t.Counterparty, evs[len(evs)-1].EventType)
	}
	return out, nil
}

// followUp continues formation from where this instance's copy stands.
// After this instance appended agreement.direct: propose the agreement for
// the counterparty's signature, then, once it is signed by both, append
// agreement.committed. Each step is idempotent, so a restart or a reply
// delivered late resumes it.
func (e *Engine) followUp(ctx context.Context, txn string) error {
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil || t.State != "agreement_pending" {
		return err
	}
	evs, err := e.o.Store.Events(ctx, txn)
	if err != nil || len(evs) == 0 {
		return err
	}
	first := evs[0]
	if first.EventType != "agreement.direct" || first.AppendedBy != e.o.Config().OrganizationID || first.Status != store.EventRecorded {
		return nil
	}
	if len(evs) > 1 {
		return nil // agreement.committed is pending or recorded
	}
	ev1, _, err := e.load(ctx, first.EventID)
	if err != nil {
		return err
	}
	agr, err := e.agreementOf(ctx, txn)
	if err != nil {
		return err
	}
	if agr == nil {
		return e.proposeAgreement(ctx, t, ev1)
	}
	entries, _ := signature.Entries(agr)
	if len(entries) < 2 {
		// Proposed before; the outbox delivers it and its reply continues.
		return nil
	}
	return e.appendCommitted(ctx, t, ev1, agr)
}

// agreementOf returns the transaction's agreement, or nil.
func (e *Engine) agreementOf(ctx context.Context, txn string) (object, error) {
	all, err := e.o.Store.TransactionObjects(ctx, txn)
	if err != nil {
		return nil, err
	}
	for _, b := range all {
		o, err := canonical.DecodeObject(b)
		if err == nil && typeOf(o) == "agreement" {
			return o, nil
		}
	}
	return nil, nil
}

func (e *Engine) proposeAgreement(ctx context.Context, t store.Transaction, ev1 object) error {
	now := e.o.Clock().UTC().Truncate(time.Second)
	data := sub(pl(ev1), "data")
	offer, _, err := e.load(ctx, str(data["offer_id"]))
	if err != nil {
		return err
	}
	terms, _ := pl(offer)["terms"].(map[string]any)
	termsHash, err := canonical.Hash(terms)
	if err != nil {
		return err
	}
	cfg := e.o.Config()
	me := party(cfg.OrganizationID, cfg.AgentID)
	them := sub(pl(offer), "offeror")
	if str(them["organization_id"]) == cfg.OrganizationID {
		them = sub(pl(offer), "offeree")
	}
	buyer, supplier := me, them
	if t.Role == "supplier" {
		buyer, supplier = them, me
	}
	cmt, err := envelope.NewID("cmt")
	if err != nil {
		return err
	}
	mandateID := str(sub(ev1, "created_by")["mandate_id"])
	agr, agrRaw, err := e.newObject("agreement", t.ID, mandateID, map[string]any{
		"accepted_offer_id":   idOf(offer),
		"accepted_offer_hash": hashOf(offer),
		"acceptance_id":       str(data["acceptance_id"]),
		"buyer":               buyer,
		"supplier":            supplier,
		"terms":               terms,
		"terms_hash":          termsHash,
		"effective_at":        envelope.Timestamp(now),
		"commitment_ids":      []any{cmt},
	}, "agreement_commitment", now, "")
	if err != nil {
		return err
	}
	if _, err := e.o.Store.PutObject(ctx, agrRaw, "local"); err != nil {
		return err
	}
	reply, err := e.send.Send(ctx, t.Counterparty, t.ID, [][]byte{agrRaw})
	if err != nil {
		if !e.queued(err) {
			_ = e.o.Store.Update(ctx, func(tx *store.Txn) error { return tx.DeleteObject(idOf(agr)) })
		}
		return err
	}
	if err := e.storeCosigned(ctx, t.Counterparty, t.ID, agr, reply); err != nil {
		return err
	}
	held, err := e.agreementOf(ctx, t.ID)
	if err != nil {
		return err
	}
	return e.appendCommitted(ctx, t, ev1, held)
}

// storeCosigned checks the counterparty's answer to an agreement this
// instance proposed: the agreement's exact bytes with the counterparty's
// agreement_commitment signature added, and its commitment object.
func (e *Engine) storeCosigned(ctx context.Context, peer, txn string, ours object, reply [][]byte) error {
	objs, err := decodeMessage(reply)
	if err != nil {
		return err
	}
	var agr, cmt, pol object
	var agrRaw []byte
	var others [][]byte
	for i, o := range objs {
		switch typeOf(o) {
		case "agreement":
			agr, agrRaw = o, reply[i]
		case "commitment":
			cmt = o
			others = append(others, reply[i])
		case "policy_decision":
			pol = o
			others = append(others, reply[i])
		}
	}
	if agr == nil || cmt == nil || idOf(agr) != idOf(ours) || hashOf(agr) != hashOf(ours) {
		return refusef(reason.AgreementHashMismatch, "%s's answer does not carry agreement %s as proposed and its commitment", peer, idOf(ours))
	}
	entries, _ := signature.Entries(agr)
	mine, _ := signature.Entries(ours)
	if len(entries) != 2 || len(mine) != 1 {
		return refusef(reason.EvidenceSignatureInvalid, "the agreement returns with %d signatures", len(entries))
	}
	a, _ := canonical.Marshal(mine[0])
	b, _ := canonical.Marshal(entries[0])
	if !bytes.Equal(a, b) || str(entries[1]["purpose"]) != "agreement_commitment" {
		return refusef(reason.EvidenceSignatureInvalid, "the agreement's signatures are not ours then %s's agreement_commitment", peer)
	}
	k, err := e.o.ResolveKey(ctx, str(entries[1]["key_id"]))
	if err != nil || k.OrganizationID != peer {
		return refusef(reason.EvidenceSignatureInvalid, "the agreement's second signature is not by a key %s vouched for", peer)
	}
	if err := signature.VerifyEntry(agr, 1, k.Public); err != nil {
		return err
	}
	if err := e.checkReceived(ctx, peer, []object{cmt}); err != nil {
		return err
	}
	ids, _ := pl(agr)["commitment_ids"].([]any)
	cp := pl(cmt)
	if len(ids) == 0 || idOf(cmt) != str(ids[0]) || str(cp["agreement_id"]) != idOf(agr) ||
		str(sub(cp, "subject")["terms_hash"]) != str(pl(agr)["terms_hash"]) || str(sub(cp, "committed_party")["organization_id"]) != peer {
		return refusef(reason.AgreementHashMismatch, "commitment %s does not bind agreement %s", idOf(cmt), idOf(agr))
	}
	if pol != nil {
		if err := e.checkReceived(ctx, peer, []object{pol}); err != nil {
			return err
		}
	}
	return e.o.Store.Update(ctx, func(tx *store.Txn) error {
		held, err := tx.GetObject(idOf(agr))
		if err != nil {
			return err
		}
		if !bytes.Equal(held, agrRaw) {
			if err := tx.ReplaceObject(idOf(agr), held, agrRaw); err != nil {
				return err
			}
		}
		for _, b := range others {
			if _, err := tx.PutObject(b, peer); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		return nil
	})
}

func (e *Engine) appendCommitted(ctx context.Context, t store.Transaction, ev1, agr object) error {
	now := e.o.Clock().UTC().Truncate(time.Second)
	mandateID := str(sub(ev1, "created_by")["mandate_id"])
	m, err := e.ownMandate(ctx, mandateID)
	if err != nil {
		return err
	}
	t, err = e.o.Store.GetTransaction(ctx, t.ID)
	if err != nil {
		return err
	}
	terms, _ := pl(agr)["terms"].(map[string]any)
	pol, polRaw, _, err := e.ownDecision(ctx, m, authority.ActAgreementSign, t.ID, t.Counterparty, terms, map[string]any{"agreement_id": idOf(agr)}, nil, t.HeadSequence+1)
	if err != nil {
		return err
	}
	ids, _ := pl(agr)["commitment_ids"].([]any)
	ev, evRaw, row, err := e.prepareEvent(t, "agreement.committed", map[string]any{
		"agreement_id": idOf(agr), "commitment_id": str(ids[0]),
	}, pol, mandateID, now)
	if err != nil {
		return err
	}
	a := &act{txn: t.ID, peer: t.Counterparty, created: [][]byte{polRaw}, event: ev, eventRaw: evRaw, ev: row}
	if err := e.commitPending(ctx, a); err != nil {
		return err
	}
	out, err := e.deliver(ctx, a)
	if err != nil {
		return err
	}
	if out.Status == "pending" {
		return fmt.Errorf("%w: %s", ErrQueued, out.WaitingFor)
	}
	return nil
}

// receiveAgreement is the offeror's side of an agreement proposed for its
// signature: it signs only the exact terms it offered, only after its own
// policy check, and issues its commitment.
func (e *Engine) receiveAgreement(ctx context.Context, from, txn string, agr object, agrRaw []byte) ([][]byte, error) {
	now := e.o.Clock().UTC().Truncate(time.Second)
	cfg := e.o.Config()
	t, err := e.o.Store.GetTransaction(ctx, txn)
	if err != nil || t.Counterparty != from {
		return nil, refusef(reason.StreamMismatch, "transaction %s is not held with %s", txn, from)
	}
	if held, _, err := e.load(ctx, idOf(agr)); err == nil {
		// Asked again: answer with what was signed the first time.
		if hashOf(held) != hashOf(agr) {
			return nil, refusef(reason.AgreementHashMismatch, "agreement %s is held with other content", idOf(agr))
		}
		return e.cosignedAnswer(ctx, txn, held)
	}
	if t.State != "agreement_pending" {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s is %s; an agreement is signed in agreement_pending", txn, t.State)
	}
	evs, err := e.o.Store.Events(ctx, txn)
	if err != nil || len(evs) != 1 || evs[0].AppendedBy != from || evs[0].Status != store.EventRecorded {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s has no recorded acceptance by %s to sign an agreement for", txn, from)
	}
	ev1, _, err := e.load(ctx, evs[0].EventID)
	if err != nil {
		return nil, err
	}
	data := sub(pl(ev1), "data")
	offer, _, err := e.load(ctx, str(data["offer_id"]))
	if err != nil {
		return nil, err
	}
	p := pl(agr)
	terms, _ := p["terms"].(map[string]any)
	offered, _ := canonical.Marshal(pl(offer)["terms"])
	proposed, _ := canonical.Marshal(terms)
	termsHash, _ := canonical.Hash(terms)
	me := party(cfg.OrganizationID, cfg.AgentID)
	wantSupplier, wantBuyer := "supplier", "buyer"
	if t.Role == "buyer" {
		wantSupplier, wantBuyer = "buyer", "supplier"
	}
	switch {
	case str(p["accepted_offer_id"]) != idOf(offer) || str(p["accepted_offer_hash"]) != hashOf(offer) || str(p["acceptance_id"]) != str(data["acceptance_id"]):
		return nil, refusef(reason.AgreementHashMismatch, "agreement %s does not name the accepted offer %s by its hash and the recorded acceptance", idOf(agr), idOf(offer))
	case !bytes.Equal(offered, proposed) || str(p["terms_hash"]) != termsHash:
		return nil, refusef(reason.AgreementHashMismatch, "agreement %s does not carry exactly the terms of offer %s", idOf(agr), idOf(offer))
	case !sameParty(sub(p, wantSupplier), me) || str(sub(p, wantBuyer)["organization_id"]) != from:
		return nil, refusef(reason.AgreementHashMismatch, "agreement %s names the parties wrongly", idOf(agr))
	}
	ids, _ := p["commitment_ids"].([]any)
	if len(ids) != 1 {
		return nil, refusef(reason.AgreementHashMismatch, "agreement %s must name exactly one commitment, this instance's", idOf(agr))
	}
	if _, _, err := e.load(ctx, str(ids[0])); err == nil {
		return nil, refusef(reason.AgreementHashMismatch, "commitment id %v is already in use", ids[0])
	}
	mandateID := str(sub(offer, "created_by")["mandate_id"])
	m, err := e.ownMandate(ctx, mandateID)
	if err != nil {
		return nil, err
	}
	pol, polRaw, _, err := e.ownDecision(ctx, m, authority.ActAgreementSign, txn, from, terms, map[string]any{"agreement_id": idOf(agr)}, nil, t.HeadSequence+1)
	if err != nil {
		// This instance's own deny stays here: the counterparty learns
		// only that the agreement is not signed.
		e.log.Info("own policy does not allow signing the agreement", "transaction_id", txn, "codes", reason.CodesOf(err))
		return nil, refusef(reason.PolicyDenied, "the counterparty does not sign this agreement")
	}
	signed, err := e.sign(agr, "agreement_commitment", now)
	if err != nil {
		return nil, err
	}
	cmt, cmtRaw, err := e.newObject("commitment", txn, mandateID, map[string]any{
		"agreement_id":    idOf(agr),
		"committed_party": me,
		"subject": map[string]any{
			"agreement_id": idOf(agr), "terms_hash": termsHash, "profile": str(terms["profile"]), "term_path": "$.terms.core.quantity",
		},
	}, "object_issuance", now, str(ids[0]))
	if err != nil {
		return nil, err
	}
	err = e.o.Store.Update(ctx, func(tx *store.Txn) error {
		if _, err := tx.PutObject(signed, from); err != nil {
			return err
		}
		if _, err := tx.PutObject(cmtRaw, "local"); err != nil {
			return err
		}
		_, err := tx.PutObject(polRaw, "local")
		return err
	})
	if err != nil {
		return nil, err
	}
	e.log.Info("agreement signed", "transaction_id", txn, "agreement_id", idOf(agr), "commitment_id", idOf(cmt), "decision", idOf(pol))
	return [][]byte{signed, cmtRaw, polRaw}, nil
}

// cosignedAnswer rebuilds the answer to an agreement signed before.
func (e *Engine) cosignedAnswer(ctx context.Context, txn string, agr object) ([][]byte, error) {
	out := [][]byte{}
	raw, _ := canonical.Marshal(agr)
	out = append(out, raw)
	all, err := e.o.Store.TransactionObjects(ctx, txn)
	if err != nil {
		return nil, err
	}
	for _, b := range all {
		o, err := canonical.DecodeObject(b)
		if err != nil {
			continue
		}
		if typeOf(o) == "commitment" && str(pl(o)["agreement_id"]) == idOf(agr) {
			out = append(out, b)
		}
	}
	return out, nil
}

func sameParty(a, b map[string]any) bool {
	return str(a["organization_id"]) == str(b["organization_id"]) && str(a["agent_id"]) == str(b["agent_id"])
}

// checkAgreementDirect is the countersigner's guard of agreement.direct
// (pilot state machine §5.3): no earlier event, the acceptance is over the
// exact hash of this instance's latest offer of the session, unexpired,
// and the acceptor's act is allowed under its mandate.
func (e *Engine) checkAgreementDirect(ctx context.Context, from, txn string, ev, acc, pol, approval object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		data := sub(pl(ev), "data")
		if acc == nil || idOf(acc) != str(data["acceptance_id"]) {
			return refusef(reason.StateTransitionDenied, "agreement.direct names acceptance %v, which does not travel with it", data["acceptance_id"])
		}
		ap := pl(acc)
		offers, err := e.offers(ctx, txn)
		if err != nil || len(offers) == 0 {
			return refusef(reason.StateTransitionDenied, "transaction %s holds no offer", txn)
		}
		last := offers[len(offers)-1]
		switch {
		case str(ap["offer_id"]) != idOf(last) || str(data["offer_id"]) != idOf(last):
			return refusef(reason.OfferStale, "the acceptance is of %v, the session's latest offer is %s", ap["offer_id"], idOf(last))
		case str(ap["offer_hash"]) != hashOf(last):
			return refusef(reason.EvidenceHashMismatch, "the acceptance signs offer hash %v, the offer's hash is %s", ap["offer_hash"], hashOf(last))
		case str(ap["session_id"]) != t.SessionID || str(data["session_id"]) != t.SessionID:
			return refusef(reason.StreamMismatch, "the acceptance is for session %v, this transaction's is %s", ap["session_id"], t.SessionID)
		case str(sub(ap, "accepting_party")["organization_id"]) != from:
			return refusef(reason.StreamMismatch, "the acceptance is not by %s", from)
		case str(sub(last, "created_by")["organization_id"]) == from:
			return refusef(reason.StreamMismatch, "%s cannot accept its own offer", from)
		case expired(last, e.o.Clock()):
			return refusef(reason.OfferExpired, "offer %s lapsed at %v", idOf(last), pl(last)["valid_until"])
		}
		if err := e.withdrawn(ctx, last); err != nil {
			return err
		}
		terms, _ := pl(last)["terms"].(map[string]any)
		return e.checkDecision(ctx, from, ev, pol, authority.ActOfferAccept, txn, terms, nil, approval)
	}
}

// checkAgreementCommitted is the countersigner's guard of
// agreement.committed: the agreement named is held with both parties'
// agreement_commitment signatures over the same bytes, names the recorded
// acceptance, its commitment is held, and the appender's agreement.sign
// act is allowed under its mandate.
func (e *Engine) checkAgreementCommitted(ctx context.Context, from, txn string, ev, pol object) func(store.Transaction) error {
	return func(t store.Transaction) error {
		data := sub(pl(ev), "data")
		agr, _, err := e.load(ctx, str(data["agreement_id"]))
		if err != nil || typeOf(agr) != "agreement" {
			return refusef(reason.StateTransitionDenied, "agreement %v is not held here", data["agreement_id"])
		}
		entries, _ := signature.Entries(agr)
		orgs := map[string]bool{}
		for _, en := range entries {
			if k, err := e.o.ResolveKey(ctx, str(en["key_id"])); err == nil && str(en["purpose"]) == "agreement_commitment" {
				orgs[k.OrganizationID] = true
			}
		}
		if len(entries) != 2 || !orgs[from] || !orgs[e.o.Config().OrganizationID] {
			return refusef(reason.EvidenceSignatureInvalid, "agreement %s is not signed by both parties", idOf(agr))
		}
		evs, _ := e.o.Store.Events(ctx, txn)
		ev1, _, err := e.load(ctx, evs[0].EventID)
		if err != nil || str(pl(agr)["acceptance_id"]) != str(sub(pl(ev1), "data")["acceptance_id"]) {
			return refusef(reason.AgreementHashMismatch, "agreement %s does not name the recorded acceptance", idOf(agr))
		}
		ids, _ := pl(agr)["commitment_ids"].([]any)
		if len(ids) == 0 || str(data["commitment_id"]) != str(ids[0]) {
			return refusef(reason.AgreementHashMismatch, "agreement.committed names commitment %v, the agreement %v", data["commitment_id"], ids)
		}
		if _, _, err := e.load(ctx, str(ids[0])); err != nil {
			return refusef(reason.AgreementHashMismatch, "commitment %v is not held", ids[0])
		}
		terms, _ := pl(agr)["terms"].(map[string]any)
		return e.checkDecision(ctx, from, ev, pol, authority.ActAgreementSign, txn, terms, map[string]any{"agreement_id": idOf(agr)}, nil)
	}
}

// AcceptanceAct returns the act document accepting offerID under
// mandateID is evaluated as: what an agent passes to verify_mandate and
// request_approval before accept_offer, so that an approval binds exactly
// the act that will be recorded.
func (e *Engine) AcceptanceAct(ctx context.Context, mandateID, offerID string) (map[string]any, error) {
	offer, _, err := e.load(ctx, offerID)
	if err != nil || typeOf(offer) != "offer" {
		return nil, refusef(reason.OfferStale, "offer %s is not held here", offerID)
	}
	m, err := e.ownMandate(ctx, mandateID)
	if err != nil {
		return nil, err
	}
	terms, _ := pl(offer)["terms"].(map[string]any)
	return actDocument(authority.ActOfferAccept, str(offer["transaction_id"]), str(sub(offer, "created_by")["organization_id"]), terms, nil, m), nil
}
