// Package reason holds the registered A202 reason codes and the one error
// type that carries them.
//
// A202 refuses input with registered codes (pilot state machine §10 and
// role scopes §8) and never with invented ones, so every code party emits is
// a constant here. Code that refuses something returns a *Refusal, wrapped
// with %w as it travels up; bindings unwrap it with errors.As and map it to
// their wire shape in one place each.
//
// A refusal whose Codes is empty is a refusal at the schema layer for which
// the specification defines no code (for example carrier metadata inside
// signed bytes, binding §5.4).
package reason

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Code is a registered A202 reason code such as "A202-OFFER-EXPIRED".
type Code string

// The registered codes used by the bilateral scope, plus the few operated
// codes a bilateral fixture expects (spec-map §14 C24).
const (
	AgreementAmendmentUnaccepted        Code = "A202-AGREEMENT-AMENDMENT-UNACCEPTED"
	AgreementHashMismatch               Code = "A202-AGREEMENT-HASH-MISMATCH"
	AnnotationForged                    Code = "A202-ANNOTATION-FORGED"
	ApprovalHashMismatch                Code = "A202-APPROVAL-HASH-MISMATCH"
	ApprovalRequired                    Code = "A202-APPROVAL-REQUIRED"
	AssuranceUnsupported                Code = "A202-ASSURANCE-UNSUPPORTED"
	AuctionFormatUnsupported            Code = "A202-AUCTION-FORMAT-UNSUPPORTED"
	DeterminationEffectOverclaim        Code = "A202-DETERMINATION-EFFECT-OVERCLAIM"
	DeterminationNotFollowing           Code = "A202-DETERMINATION-NOT-FOLLOWING"
	DeterminationSupersessionForked     Code = "A202-DETERMINATION-SUPERSESSION-FORKED"
	DeterminationSupersessionUnreasoned Code = "A202-DETERMINATION-SUPERSESSION-UNREASONED"
	DisclosureDenied                    Code = "A202-DISCLOSURE-DENIED"
	DisclosurePolicyViolation           Code = "A202-DISCLOSURE-POLICY-VIOLATION"
	DisputeGroundsUnknown               Code = "A202-DISPUTE-GROUNDS-UNKNOWN"
	DisputeOutOfWindow                  Code = "A202-DISPUTE-OUT-OF-WINDOW"
	DisputeSubjectUnreferenced          Code = "A202-DISPUTE-SUBJECT-UNREFERENCED"
	EndpointInsecure                    Code = "A202-ENDPOINT-INSECURE"
	EvidenceChainGap                    Code = "A202-EVIDENCE-CHAIN-GAP"
	EvidenceDisclosureIncomplete        Code = "A202-EVIDENCE-DISCLOSURE-INCOMPLETE"
	EvidenceHashMismatch                Code = "A202-EVIDENCE-HASH-MISMATCH"
	EvidenceReportInvalid               Code = "A202-EVIDENCE-REPORT-INVALID"
	EvidenceSignatureInvalid            Code = "A202-EVIDENCE-SIGNATURE-INVALID"
	EvidenceTransitionIllegal           Code = "A202-EVIDENCE-TRANSITION-ILLEGAL"
	EvidenceTypeUnknown                 Code = "A202-EVIDENCE-TYPE-UNKNOWN"
	EvidenceUnverified                  Code = "A202-EVIDENCE-UNVERIFIED"
	ExtensionUnsupported                Code = "A202-EXTENSION-UNSUPPORTED"
	GradeScopeInvalid                   Code = "A202-GRADE-SCOPE-INVALID"
	GradeScopeOverclaim                 Code = "A202-GRADE-SCOPE-OVERCLAIM"
	GradeScopeUnknown                   Code = "A202-GRADE-SCOPE-UNKNOWN"
	HashFormatInvalid                   Code = "A202-HASH-FORMAT-INVALID"
	MandateConstraintUnknown            Code = "A202-MANDATE-CONSTRAINT-UNKNOWN"
	MandateDelegationIncoherent         Code = "A202-MANDATE-DELEGATION-INCOHERENT"
	MandateDelegationWidening           Code = "A202-MANDATE-DELEGATION-WIDENING"
	MandateInactive                     Code = "A202-MANDATE-INACTIVE"
	MandateIntervalInvalid              Code = "A202-MANDATE-INTERVAL-INVALID"
	MandateScopeTooBroad                Code = "A202-MANDATE-SCOPE-TOO-BROAD"
	MandateStatusInsecure               Code = "A202-MANDATE-STATUS-INSECURE"
	MandateStatusUnresolved             Code = "A202-MANDATE-STATUS-UNRESOLVED"
	MandateSubjectAmbiguous             Code = "A202-MANDATE-SUBJECT-AMBIGUOUS"
	MandateUnbounded                    Code = "A202-MANDATE-UNBOUNDED"
	ObligationAssertionUnevidenced      Code = "A202-OBLIGATION-ASSERTION-UNEVIDENCED"
	ObligationConditionCyclic           Code = "A202-OBLIGATION-CONDITION-CYCLIC"
	ObligationConditionUnknown          Code = "A202-OBLIGATION-CONDITION-UNKNOWN"
	ObligationRejectionReasonUnknown    Code = "A202-OBLIGATION-REJECTION-REASON-UNKNOWN"
	ObligationRemainderMissing          Code = "A202-OBLIGATION-REMAINDER-MISSING"
	ObligationResponseHashMismatch      Code = "A202-OBLIGATION-RESPONSE-HASH-MISMATCH"
	ObligationResponseUnauthorized      Code = "A202-OBLIGATION-RESPONSE-UNAUTHORIZED"
	ObligationSubjectUnreferenced       Code = "A202-OBLIGATION-SUBJECT-UNREFERENCED"
	ObligationTermsMutated              Code = "A202-OBLIGATION-TERMS-MUTATED"
	OfferExpired                        Code = "A202-OFFER-EXPIRED"
	OfferStale                          Code = "A202-OFFER-STALE"
	PolicyDenied                        Code = "A202-POLICY-DENIED"
	ProfileTermsInvalid                 Code = "A202-PROFILE-TERMS-INVALID"
	ProfileUnknown                      Code = "A202-PROFILE-UNKNOWN"
	SequenceConflict                    Code = "A202-SEQUENCE-CONFLICT"
	SettlementCustodyRefused            Code = "A202-SETTLEMENT-CUSTODY-REFUSED"
	SettlementIdempotencyConflict       Code = "A202-SETTLEMENT-IDEMPOTENCY-CONFLICT"
	SettlementRailUnknown               Code = "A202-SETTLEMENT-RAIL-UNKNOWN"
	SettlementReceiptUnmatched          Code = "A202-SETTLEMENT-RECEIPT-UNMATCHED"
	SettlementTriggerAbsent             Code = "A202-SETTLEMENT-TRIGGER-ABSENT"
	StateTransitionDenied               Code = "A202-STATE-TRANSITION-DENIED"
	StreamMismatch                      Code = "A202-STREAM-MISMATCH"
	TermsInvalid                        Code = "A202-TERMS-INVALID"
)

var registered = map[Code]bool{}

func init() {
	for _, c := range []Code{
		AgreementAmendmentUnaccepted, AgreementHashMismatch, AnnotationForged,
		ApprovalHashMismatch, ApprovalRequired, AssuranceUnsupported,
		AuctionFormatUnsupported, DeterminationEffectOverclaim,
		DeterminationNotFollowing, DeterminationSupersessionForked,
		DeterminationSupersessionUnreasoned, DisclosureDenied,
		DisclosurePolicyViolation, DisputeGroundsUnknown, DisputeOutOfWindow,
		DisputeSubjectUnreferenced, EndpointInsecure, EvidenceChainGap,
		EvidenceDisclosureIncomplete, EvidenceHashMismatch, EvidenceReportInvalid,
		EvidenceSignatureInvalid, EvidenceTransitionIllegal, EvidenceTypeUnknown,
		EvidenceUnverified, ExtensionUnsupported, GradeScopeInvalid,
		GradeScopeOverclaim, GradeScopeUnknown, HashFormatInvalid,
		MandateConstraintUnknown, MandateDelegationIncoherent,
		MandateDelegationWidening, MandateInactive, MandateIntervalInvalid,
		MandateScopeTooBroad, MandateStatusInsecure, MandateStatusUnresolved,
		MandateSubjectAmbiguous, MandateUnbounded, ObligationAssertionUnevidenced,
		ObligationConditionCyclic, ObligationConditionUnknown,
		ObligationRejectionReasonUnknown, ObligationRemainderMissing,
		ObligationResponseHashMismatch, ObligationResponseUnauthorized,
		ObligationSubjectUnreferenced, ObligationTermsMutated, OfferExpired,
		OfferStale, PolicyDenied, ProfileTermsInvalid, ProfileUnknown,
		SequenceConflict, SettlementCustodyRefused, SettlementIdempotencyConflict,
		SettlementRailUnknown, SettlementReceiptUnmatched, SettlementTriggerAbsent,
		StateTransitionDenied, StreamMismatch, TermsInvalid,
	} {
		registered[c] = true
	}
}

// Registered reports whether c is a code party knows. Code that builds a
// Refusal from outside input (a peer's reply, say) checks this so that an
// unregistered code is never passed on as if it were one.
func Registered(c Code) bool { return registered[c] }

// ErrRefused is the sentinel every *Refusal matches with errors.Is.
var ErrRefused = errors.New("refused")

// Refusal is an input refused with zero or more registered reason codes.
// Detail is for the local operator and for the caller who sent the input;
// it never carries private keys or another party's private data.
type Refusal struct {
	Codes  []Code
	Detail string
	// ApprovalRequestID names the approval request an act held for a
	// principal's approval (A202-APPROVAL-REQUIRED) stands under, when the
	// instance filed or found one: the caller polls it and, once it is
	// approved, takes the act again.
	ApprovalRequestID string
	// Budget, on a refusal by one of this organisation's budgets (package
	// budget), names the budget and what is left under it. Budgets are
	// the acting instance's own policy: such a refusal is only ever
	// answered to its own agent or principal, never to a counterparty.
	Budget *BudgetStanding
}

// BudgetStanding is one budget as a refusal reports it.
type BudgetStanding struct {
	ID       string `json:"budget_id"`
	Kind     string `json:"kind"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	Limit    string `json:"limit"`
	// ApproveAbove is the approval threshold, "" when none is set.
	ApproveAbove string `json:"approve_above,omitempty"`
	// Used is the count before the act, since PeriodStart; Left what
	// remains under the limit; Requested what the act would add.
	Used        string `json:"used"`
	Left        string `json:"left"`
	Requested   string `json:"requested"`
	PeriodStart string `json:"period_start"`
	PeriodEnd   string `json:"period_end"`
}

// Refuse returns a *Refusal with the given detail and codes.
func Refuse(detail string, codes ...Code) *Refusal {
	return &Refusal{Codes: Normalize(codes), Detail: detail}
}

// Refusef is Refuse with a formatted detail and a single code.
func Refusef(code Code, format string, args ...any) *Refusal {
	return &Refusal{Codes: []Code{code}, Detail: fmt.Sprintf(format, args...)}
}

// Error renders the codes and the detail.
func (r *Refusal) Error() string {
	if len(r.Codes) == 0 {
		return "refused: " + r.Detail
	}
	cs := make([]string, len(r.Codes))
	for i, c := range r.Codes {
		cs[i] = string(c)
	}
	return "refused (" + strings.Join(cs, ", ") + "): " + r.Detail
}

// Is makes errors.Is(err, ErrRefused) true for every refusal.
func (r *Refusal) Is(target error) bool { return target == ErrRefused }

// Has reports whether the refusal carries code c.
func (r *Refusal) Has(c Code) bool {
	for _, x := range r.Codes {
		if x == c {
			return true
		}
	}
	return false
}

// CodesOf returns the codes carried by err if it wraps a *Refusal, else nil.
func CodesOf(err error) []Code {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Codes
	}
	return nil
}

// Normalize sorts codes and removes duplicates, so that a set of codes has
// one spelling whatever order the checks ran in.
func Normalize(codes []Code) []Code {
	if len(codes) == 0 {
		return nil
	}
	out := append([]Code(nil), codes...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	n := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[n-1] {
			out[n] = out[i]
			n++
		}
	}
	return out[:n]
}
