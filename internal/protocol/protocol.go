// Package protocol names the values of the A202 protocol that party's code
// compares against: object types (canonical model §3), transaction event
// types and aggregate states (pilot state machine §3, §5), obligation
// states (obligation §6), and the act names policy is evaluated under
// (decisions.md 6, docs/authority.md).
//
// The names are typed so that an event type cannot be passed where a state
// is expected, and so that every value the record engine acts on is one of
// a closed set written once, here. Code that reads hostile input (the gate,
// the verifier) still compares raw strings it took out of a document: the
// constants convert with string(...) where it needs them.
package protocol

// ObjectType is an envelope object_type (canonical model §3; kernel schema
// enum).
type ObjectType string

// Object types party creates or reads.
const (
	Acceptance         ObjectType = "acceptance"
	Agreement          ObjectType = "agreement"
	AdapterReceipt     ObjectType = "adapter_receipt"
	Approval           ObjectType = "approval"
	AuditBundle        ObjectType = "audit_bundle"
	Commitment         ObjectType = "commitment"
	Determination      ObjectType = "determination"
	Dispute            ObjectType = "dispute"
	Evidence           ObjectType = "evidence"
	Exception          ObjectType = "exception"
	KeyRecord          ObjectType = "key_record"
	Obligation         ObjectType = "obligation"
	ObligationResponse ObjectType = "obligation_response"
	Offer              ObjectType = "offer"
	PerformanceEvent   ObjectType = "performance_event"
	PolicyDecision     ObjectType = "policy_decision"
	RevocationRecord   ObjectType = "revocation_record"
	Settlement         ObjectType = "settlement_instruction"
	TransactionEvent   ObjectType = "transaction_event"
)

// EventType is a transaction event's event_type on the transaction stream
// (pilot state machine §5).
type EventType string

// The aggregate events of the bilateral scope.
const (
	EvAgreementDirect       EventType = "agreement.direct"
	EvAgreementCommitted    EventType = "agreement.committed"
	EvAgreementAmended      EventType = "agreement.amended"
	EvObligationActivated   EventType = "obligation.activated"
	EvPerformanceDeclared   EventType = "performance.declared"
	EvAcceptanceGranted     EventType = "acceptance.granted"
	EvAcceptanceRejected    EventType = "acceptance.rejected"
	EvSettlementInstructed  EventType = "settlement.instructed"
	EvTransactionCompleted  EventType = "transaction.completed"
	EvTransactionCancelled  EventType = "transaction.cancelled"
	EvTerminationAgreed     EventType = "termination.agreed"
	EvExceptionOpened       EventType = "exception.opened"
	EvRemediationAccepted   EventType = "remediation.accepted"
	EvExceptionResolved     EventType = "exception.resolved"
	EvTransactionTerminated EventType = "transaction.terminated"
	// EvDeadlineElapsed: the latest offer of a draft transaction lapsed or
	// was withdrawn, unaccepted (→ expired).
	EvDeadlineElapsed EventType = "deadline.elapsed"
)

// State is an aggregate (transaction) state (pilot state machine §3).
type State string

// The aggregate states of the bilateral scope. Completed, cancelled,
// expired and terminated are terminal.
const (
	Draft             State = "draft"
	AgreementPending  State = "agreement_pending"
	Committed         State = "committed"
	InPerformance     State = "in_performance"
	AcceptancePending State = "acceptance_pending"
	SettlementPending State = "settlement_pending"
	ExceptionOpen     State = "exception_open"
	Completed         State = "completed"
	Cancelled         State = "cancelled"
	Expired           State = "expired"
	Terminated        State = "terminated"
)

// Terminal reports whether s is a terminal aggregate state.
func (s State) Terminal() bool {
	switch s {
	case Completed, Cancelled, Expired, Terminated:
		return true
	}
	return false
}

// ObligationState is an obligation's state (obligation §6).
type ObligationState string

// The obligation states. Discharged, waived, expired and released are
// terminal; accepted ends the duty's performance (obligation §6.1).
const (
	OblPending  ObligationState = "pending"
	OblDue      ObligationState = "due"
	OblAsserted ObligationState = "asserted"
	OblAccepted ObligationState = "accepted"
	OblRejected ObligationState = "rejected"
	OblDisputed ObligationState = "disputed"
	OblWaived   ObligationState = "waived"
	OblReleased ObligationState = "released"
)

// Open reports whether an obligation in state s is not yet terminal and
// not accepted: the duties a termination must name and a completion must
// see ended.
func (s ObligationState) Open() bool {
	switch s {
	case OblPending, OblDue, OblAsserted, OblRejected, OblDisputed:
		return true
	}
	return false
}

// DisputeSubject is a dispute's subject_type (determination §3.2).
type DisputeSubject string

// The four subjects a dispute may be raised against, each by content hash.
const (
	SubjectAct             DisputeSubject = "act"
	SubjectDetermination   DisputeSubject = "determination"
	SubjectObligationState DisputeSubject = "obligation_state"
	SubjectRefusal         DisputeSubject = "refusal"
)

// DisputeGrounds are the nine grounds of determination §3.5, the closed
// list a bilateral dispute states from.
var DisputeGrounds = []string{"authority_absent", "authority_exceeded", "state_transition_invalid", "obligation_not_performed",
	"obligation_wrongly_rejected", "evidence_unverified", "disclosure_breach", "refusal_incorrect", "rule_misapplied"}

// ExceptionType is an exception's exception_type, in party's form of the
// kernel's deferred exception payload (docs/record-protocol.md).
type ExceptionType string

// The exceptions party opens.
const (
	ExceptionSettlementFailed   ExceptionType = "settlement_failed"
	ExceptionObligationDisputed ExceptionType = "obligation_disputed"
	// ExceptionObligationOutstanding: a partial acceptance's remainder is
	// still owed once the transaction is settlement_pending, where no
	// event performs it; the exception and its remediation return the
	// transaction to in_performance to perform it.
	ExceptionObligationOutstanding ExceptionType = "obligation_outstanding"
)

// ResponseType is an obligation response's response_type (obligation
// §5.2; kernel schema enum).
type ResponseType string

// The three responses to an assertion.
const (
	ResponseAccept ResponseType = "accept"
	ResponseReject ResponseType = "reject"
	ResponseWaive  ResponseType = "waive"
)

// RejectionReason is a rejecting response's reason_code (obligation §5.5).
type RejectionReason string

// The closed list of obligation §5.5.
const (
	RejectEvidenceInsufficient  RejectionReason = "evidence_insufficient"
	RejectEvidenceUnverified    RejectionReason = "evidence_unverified"
	RejectQuantityShort         RejectionReason = "quantity_short"
	RejectSubjectNotAsAgreed    RejectionReason = "subject_not_as_agreed"
	RejectDueConditionNotMet    RejectionReason = "due_condition_not_met"
	RejectAssertionUnauthorized RejectionReason = "assertion_unauthorized"
)

// RejectionReasons is the closed list of obligation §5.5, in its order:
// the gate judges a reason_code against it, and the MCP schema of
// respond_to_assertion offers exactly these values.
var RejectionReasons = []RejectionReason{
	RejectEvidenceInsufficient, RejectEvidenceUnverified, RejectQuantityShort,
	RejectSubjectNotAsAgreed, RejectDueConditionNotMet, RejectAssertionUnauthorized,
}

// Act is an act name, the action_type of an act document, which a mandate
// lists and policy is evaluated under (decisions.md 6).
type Act string

// The acts party performs. The first six are the published reference's
// names; the others follow the same act-document shape and are written
// down in docs/authority.md.
const (
	ActOfferSubmit          Act = "offer.submit"
	ActOfferAccept          Act = "offer.accept"
	ActOfferWithdraw        Act = "offer.withdraw"
	ActObligationActivated  Act = "obligation.activated"
	ActPerformanceDeclared  Act = "performance.declared"
	ActAcceptanceGranted    Act = "acceptance.granted"
	ActAcceptanceRejected   Act = "acceptance.rejected"
	ActAgreementSign        Act = "agreement.sign"
	ActSettlementInstruct   Act = "settlement.instruct"
	ActTransactionComplete  Act = "transaction.complete"
	ActTransactionCancel    Act = "transaction.cancel"
	ActTerminationAgree     Act = "termination.agree"
	ActObligationWaive      Act = "obligation.waive"
	ActAgreementAmend       Act = "agreement.amend"
	ActDisputeRaise         Act = "dispute.raise"
	ActDeterminationIssue   Act = "determination.issue"
	ActExceptionOpen        Act = "exception.open"
	ActRemediationAccept    Act = "remediation.accept"
	ActExceptionResolve     Act = "exception.resolve"
	ActTransactionTerminate Act = "transaction.terminate"
	ActSettlementAdjust     Act = "settlement.adjust"
	ActTransactionExpire    Act = "transaction.expire"
)

// Acts lists the acts party performs, in the order above.
var Acts = []Act{
	ActOfferSubmit, ActOfferAccept, ActOfferWithdraw, ActObligationActivated, ActPerformanceDeclared,
	ActAcceptanceGranted, ActAcceptanceRejected, ActAgreementSign, ActSettlementInstruct, ActTransactionComplete,
	ActTransactionCancel, ActTerminationAgree, ActObligationWaive, ActAgreementAmend, ActDisputeRaise,
	ActDeterminationIssue, ActExceptionOpen, ActRemediationAccept, ActExceptionResolve, ActTransactionTerminate,
	ActSettlementAdjust, ActTransactionExpire,
}

// eventActs names the act a party performs by appending each event (the
// act its action_hash is the document of). agreement.direct is not here:
// its act is the offeree's offer.accept, or would be the offeror's
// offer.submit, so it depends on who appends it
// (authority.EventActName).
var eventActs = map[EventType]Act{
	EvAgreementCommitted:    ActAgreementSign,
	EvObligationActivated:   ActObligationActivated,
	EvPerformanceDeclared:   ActPerformanceDeclared,
	EvAcceptanceGranted:     ActAcceptanceGranted,
	EvAcceptanceRejected:    ActAcceptanceRejected,
	EvSettlementInstructed:  ActSettlementInstruct,
	EvTransactionCompleted:  ActTransactionComplete,
	EvTransactionCancelled:  ActTransactionCancel,
	EvDeadlineElapsed:       ActTransactionExpire,
	EvTerminationAgreed:     ActTerminationAgree,
	EvAgreementAmended:      ActAgreementAmend,
	EvExceptionOpened:       ActExceptionOpen,
	EvRemediationAccepted:   ActRemediationAccept,
	EvExceptionResolved:     ActExceptionResolve,
	EvTransactionTerminated: ActTransactionTerminate,
}

// Act returns the act a party performs by appending an event of type t,
// or false when t records none on its own (agreement.direct, whose act
// depends on its appender, and the events party does not append).
func (t EventType) Act() (Act, bool) {
	a, ok := eventActs[t]
	return a, ok
}

// Role is a party's role in a transaction's agreement.
type Role string

// Roles are the two roles, the values an offer's side takes.
var Roles = []Role{Buyer, Supplier}

// The two roles of an agreement (canonical model §10: buyer and supplier).
const (
	Buyer    Role = "buyer"
	Supplier Role = "supplier"
)

// Other returns the other role.
func (r Role) Other() Role {
	if r == Buyer {
		return Supplier
	}
	return Buyer
}

// Valid reports whether r is buyer or supplier.
func (r Role) Valid() bool { return r == Buyer || r == Supplier }

// Signature purposes party signs with (canonical model §4; spec-map §2.5).
const (
	PurposeOfferSubmission      = "offer_submission"
	PurposeOfferAcceptance      = "offer_acceptance"
	PurposeAgreementCommitment  = "agreement_commitment"
	PurposeEventAppend          = "event_append"
	PurposeObjectIssuance       = "object_issuance"
	PurposePolicyDecision       = "policy_decision"
	PurposeAdapterReceipt       = "adapter_receipt"
	TransactionStreamKind       = "transaction"
	RulesVersionDirectFormation = "1.3"
)
