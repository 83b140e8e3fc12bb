package authority

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
)

// DecisionFreshness is how long a policy decision may be relied on to
// record the act it allowed: the status cache bound, since the mandate may
// have been revoked since (commercial mandate §6.1, append-time check).
const DecisionFreshness = 60 * time.Second

// Policy decision visibilities and stream kinds (kernel schema
// policyDecisionPayload).
const (
	VisibilityTransactionParties = "transaction_parties"
	VisibilityPrivateToActor     = "private_to_actor"
	StreamTransaction            = "transaction"
	StreamPrivate                = "private"
)

// NewPolicyDecision returns r as a signed policy_decision object (commercial
// mandate §6 steps 14–15; decisions.md 7), signed by signer, which must be
// the acting agent's key (r.Actor.KeyID), with purpose policy_decision.
//
// An allow is written on the transaction stream {kind: transaction, id:
// the act's transaction} at streamSequence (the sequence of the event it
// authorizes, from 1), visibility transaction_parties, and may travel with
// the act. A deny or a require_approval is written on the actor's private
// stream {kind: private, id: the actor's agent id}, sequence 0 (it consumes
// no shared sequence), visibility private_to_actor, and never leaves the
// instance: Shareable refuses it. created_at, signed_at and evaluated_at are
// all r.EvaluatedAt, so the object is a function of the result.
func NewPolicyDecision(r Result, signer signature.Signer, streamSequence int) (map[string]any, error) {
	if signer == nil {
		return nil, errors.New("authority: NewPolicyDecision needs a signer")
	}
	if signer.KeyID() != r.Actor.KeyID {
		return nil, reason.Refusef(reason.EvidenceSignatureInvalid,
			"a policy decision is signed by the acting agent's key %s, not %s", r.Actor.KeyID, signer.KeyID())
	}
	if r.Actor.AgentID == "" {
		return nil, reason.Refusef(reason.PolicyDenied, "a policy decision names an acting agent; the result has none")
	}
	if !sha256Hex(r.ActionHash) || len(r.MandateIDs) == 0 {
		return nil, reason.Refusef(reason.PolicyDenied, "the result binds no act or no mandate")
	}
	stream := map[string]any{"kind": StreamTransaction, "id": r.TransactionID}
	visibility := VisibilityTransactionParties
	switch r.Decision {
	case Allow:
		if streamSequence < 1 {
			return nil, reason.Refusef(reason.SequenceConflict, "an allow is bound to a transaction stream sequence from 1, not %d", streamSequence)
		}
	case Deny, RequireApproval:
		stream = map[string]any{"kind": StreamPrivate, "id": r.Actor.AgentID}
		visibility = VisibilityPrivateToActor
		streamSequence = 0
	default:
		return nil, reason.Refusef(reason.PolicyDenied, "decision %q is not allow, deny or require_approval", r.Decision)
	}
	codes := make([]any, 0, len(r.ReasonCodes))
	if r.Decision != Allow {
		for _, c := range r.ReasonCodes {
			codes = append(codes, string(c))
		}
	}
	ids := make([]any, 0, len(r.MandateIDs))
	for _, id := range r.MandateIDs {
		ids = append(ids, id)
	}
	at := r.EvaluatedAt.UTC().Truncate(time.Second)
	obj, err := envelope.New(envelope.Spec{
		ObjectType: "policy_decision",
		CreatedBy: envelope.Actor{
			OrganizationID: r.Actor.OrganizationID,
			AgentID:        r.Actor.AgentID,
			MandateID:      r.MandateIDs[0],
		},
		TransactionID: r.TransactionID,
		CreatedAt:     at,
		Payload: map[string]any{
			"action_hash":     r.ActionHash,
			"decision":        string(r.Decision),
			"reason_codes":    codes,
			"evaluated_at":    envelope.Timestamp(at),
			"mandate_ids":     ids,
			"stream":          stream,
			"stream_sequence": json.Number(strconv.Itoa(streamSequence)),
			"visibility":      visibility,
		},
	})
	if err != nil {
		return nil, err
	}
	// Built of decoded values (json.Number for the sequence), the object
	// is its own normal form; normalize would only encode and decode it
	// again. Seal encodes it, and refuses what has no canonical form.
	if !canonical.Decoded(obj) {
		if obj, err = normalize(obj); err != nil {
			return nil, err
		}
	}
	in, err := envelope.SealInput(obj)
	if err != nil {
		return nil, err
	}
	if err := signature.SignOver(obj, in, signer, "policy_decision", at); err != nil {
		return nil, err
	}
	if err := schema.ValidateEnvelope(obj); err != nil {
		return nil, reason.Refuse("policy decision: "+err.Error(), reason.PolicyDenied)
	}
	return obj, nil
}

// NewSharedDecision is NewPolicyDecision for a decision that is to travel
// to the counterparty: it refuses anything but an allow with
// A202-DISCLOSURE-DENIED before building anything.
func NewSharedDecision(r Result, signer signature.Signer, streamSequence int) (map[string]any, error) {
	if r.Decision != Allow {
		return nil, reason.Refusef(reason.DisclosureDenied, "a %s decision never leaves the actor's instance", r.Decision)
	}
	return NewPolicyDecision(r, signer, streamSequence)
}

// Shareable returns nil only for a policy_decision that may be disclosed to
// the counterparty: an allow on the transaction stream with visibility
// transaction_parties. Anything else, a deny above all, is refused with
// A202-DISCLOSURE-DENIED (canonical model §12; threat model T6). Every path
// that sends a decision to a peer calls it.
func Shareable(decision map[string]any) error {
	if t, _ := decision["object_type"].(string); t != "policy_decision" {
		return reason.Refusef(reason.DisclosureDenied, "not a policy_decision")
	}
	p, _ := decision["payload"].(map[string]any)
	stream, _ := p["stream"].(map[string]any)
	switch {
	case p["decision"] != string(Allow):
		return reason.Refusef(reason.DisclosureDenied, "a %s decision never leaves the actor's instance", show(p["decision"]))
	case p["visibility"] != VisibilityTransactionParties:
		return reason.Refusef(reason.DisclosureDenied, "decision visibility is %s", show(p["visibility"]))
	case stream["kind"] != StreamTransaction:
		return reason.Refusef(reason.DisclosureDenied, "decision is on a %s stream", show(stream["kind"]))
	}
	return nil
}

// DecidedSince returns nil when a policy decision's evaluated_at lies no
// earlier than since (less ClockSkew) and no later than now (plus it): a
// decision that comes in a counterparty's answer to a message of this
// instance's own act, made at since. FreshEnough judges a decision at the
// moment it is received; an answer may be received late (its message
// retried after a reply was lost, a restart), and a decision the
// counterparty made in answer to this act was made after it, so it
// cannot predate a revocation this instance's act did not (the mandate's
// status is judged live when the act is re-evaluated anyway). A decision
// made before the act it answers is refused with
// A202-MANDATE-STATUS-UNRESOLVED, as a stale one is.
func DecidedSince(decision map[string]any, since, now time.Time) error {
	p, _ := decision["payload"].(map[string]any)
	t, err := envelope.ParseTimestamp(str(p["evaluated_at"]))
	switch {
	case err != nil:
		return reason.Refusef(reason.MandateStatusUnresolved, "policy decision states no time it was made")
	case t.Before(since.Add(-ClockSkew)):
		return reason.Refusef(reason.MandateStatusUnresolved, "policy decision is dated %s, before the act it answers (%s)", envelope.Timestamp(t), envelope.Timestamp(since))
	case t.After(now.Add(ClockSkew)):
		return reason.Refusef(reason.MandateStatusUnresolved, "policy decision is dated %s, in the future", envelope.Timestamp(t))
	}
	return nil
}

// FreshEnough returns nil when a policy decision's evaluated_at lies within
// DecisionFreshness before now (and no more than ClockSkew after it). An
// older decision may predate a revocation and records nothing: refused with
// A202-MANDATE-STATUS-UNRESOLVED, as the reference refuses it. It checks
// freshness only; the caller also checks that the decision is an allow over
// the exact act being recorded.
func FreshEnough(decision map[string]any, now time.Time) error {
	p, _ := decision["payload"].(map[string]any)
	t, err := envelope.ParseTimestamp(str(p["evaluated_at"]))
	if err != nil {
		return reason.Refusef(reason.MandateStatusUnresolved, "policy decision states no time it was made")
	}
	age := now.Sub(t)
	switch {
	case age > DecisionFreshness:
		return reason.Refusef(reason.MandateStatusUnresolved, "policy decision is %s old, older than %s: the mandate may have been revoked since", age.Truncate(time.Second), DecisionFreshness)
	case age < -ClockSkew:
		return reason.Refusef(reason.MandateStatusUnresolved, "policy decision is dated %s, in the future", envelope.Timestamp(t))
	}
	return nil
}
