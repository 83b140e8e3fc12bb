package rules

import "github.com/partyd/party/internal/protocol"

// The vocabulary of the rows a bilateral record never carries, named here
// beside the protocol's own (package protocol names what party acts on):
// the operator's steps of the aggregate (role scopes §5), the session
// machine (pilot state machine §6.1), and the obligation rows party
// records by other means (a waiver, a determination) or not at all.
const (
	published   protocol.State = "published"
	qualifying  protocol.State = "qualifying"
	negotiating protocol.State = "negotiating"

	requestPublished     protocol.EventType = "request.published"
	qualificationStarted protocol.EventType = "qualification.started"
	negotiationOpened    protocol.EventType = "negotiation.opened"
	offerSelected        protocol.EventType = "offer.selected"
	invitationIssued     protocol.EventType = "invitation.issued"
	invitationClaimed    protocol.EventType = "invitation.claimed"
	invitationDeclined   protocol.EventType = "invitation.declined"
	invitationExpired    protocol.EventType = "invitation.expired"
	invitationRevoked    protocol.EventType = "invitation.revoked"
	approvalRequested    protocol.EventType = "approval.requested"
	approvalGranted      protocol.EventType = "approval.granted"
	approvalRejected     protocol.EventType = "approval.rejected"
	acceptanceWithdrawn  protocol.EventType = "acceptance.withdrawn"

	oblDischarged protocol.ObligationState = "discharged"
	oblExpired    protocol.ObligationState = "expired"

	obligationDue        protocol.EventType = "obligation.due"
	obligationWaived     protocol.EventType = "obligation.waived"
	disputeRaised        protocol.EventType = "dispute.raised"
	obligationDischarged protocol.EventType = "obligation.discharged"
	obligationReleased   protocol.EventType = "obligation.released"
)

// sessionState is a state of the session machine, which no bilateral
// record has (pilot state machine §6.1).
type sessionState string

const (
	sessionOpened            sessionState = "opened"
	sessionActive            sessionState = "active"
	sessionPausedForApproval sessionState = "paused_for_approval"
	sessionAccepted          sessionState = "accepted"
	sessionRejected          sessionState = "rejected"
	sessionWithdrawn         sessionState = "withdrawn"
	sessionExpired           sessionState = "expired"
	sessionClosed            sessionState = "closed"
)

// Groups of states several rows share (pilot state machine §5, the
// paragraph after the table).
var (
	preCommit       = []protocol.State{protocol.Draft, published, qualifying, negotiating, protocol.AgreementPending}
	eligibleCommit  = []protocol.State{protocol.Committed, protocol.InPerformance, protocol.AcceptancePending, protocol.SettlementPending}
	sessionOpenEnds = []sessionState{sessionOpened, sessionActive, sessionPausedForApproval, sessionAccepted}
)

// DeterminationRecorded is the obligation row a binding determination
// moves a disputed obligation by (dispute §6), to whichever registered
// state its state_result names (Determined): a bilateral record carries
// no such event, the countersigner of a determination checks the move.
const DeterminationRecorded protocol.EventType = "determination.recorded"

// table holds every row of every version. Rows are built by the helpers
// below so that a row shared by several source states is written once, as
// the specification writes it.
var table = build(
	// Aggregate, pilot state machine §5 (base set, 1.0).
	op(Aggregate, "1.0", requestPublished, published, protocol.Draft),
	op(Aggregate, "1.0", qualificationStarted, qualifying, published),
	op(Aggregate, "1.0", negotiationOpened, negotiating, qualifying),
	op(Aggregate, "1.0", offerSelected, protocol.AgreementPending, negotiating),
	op(Aggregate, "1.0", invitationIssued, "", published, qualifying),
	op(Aggregate, "1.0", invitationClaimed, "", published, qualifying),
	op(Aggregate, "1.0", invitationDeclined, "", published, qualifying),
	op(Aggregate, "1.0", invitationExpired, "", published, qualifying),
	op(Aggregate, "1.0", invitationRevoked, "", published, qualifying),
	row(Aggregate, "1.0", approvalRequested, protocol.AgreementPending, protocol.AgreementPending),
	row(Aggregate, "1.0", approvalRejected, negotiating, protocol.AgreementPending),
	row(Aggregate, "1.0", acceptanceWithdrawn, negotiating, protocol.AgreementPending),
	row(Aggregate, "1.0", protocol.EvAgreementCommitted, protocol.Committed, protocol.AgreementPending),
	row(Aggregate, "1.0", protocol.EvObligationActivated, protocol.InPerformance, protocol.Committed),
	row(Aggregate, "1.0", protocol.EvPerformanceDeclared, protocol.AcceptancePending, protocol.InPerformance),
	row(Aggregate, "1.0", protocol.EvAcceptanceRejected, protocol.InPerformance, protocol.AcceptancePending),
	row(Aggregate, "1.0", protocol.EvAcceptanceGranted, protocol.SettlementPending, protocol.AcceptancePending),
	row(Aggregate, "1.0", protocol.EvSettlementInstructed, protocol.SettlementPending, protocol.SettlementPending),
	row(Aggregate, "1.0", protocol.EvTransactionCompleted, protocol.Completed, protocol.SettlementPending),
	row(Aggregate, "1.0", protocol.EvTransactionCancelled, protocol.Cancelled, preCommit...),
	row(Aggregate, "1.0", protocol.EvDeadlineElapsed, protocol.Expired, preCommit...),
	row(Aggregate, "1.0", protocol.EvExceptionOpened, protocol.ExceptionOpen, eligibleCommit...),
	row(Aggregate, "1.0", protocol.EvRemediationAccepted, protocol.InPerformance, protocol.ExceptionOpen),
	row(Aggregate, "1.0", protocol.EvExceptionResolved, protocol.SettlementPending, protocol.ExceptionOpen),
	row(Aggregate, "1.0", protocol.EvTransactionTerminated, protocol.Terminated, protocol.ExceptionOpen),
	// 1.1: completion out of an open exception (runner only, C4).
	row(Aggregate, "1.1", protocol.EvTransactionCompleted, protocol.Completed, protocol.ExceptionOpen),
	// 1.2: consensual termination and amendment (A202-0010).
	row(Aggregate, "1.2", protocol.EvTerminationAgreed, protocol.Terminated, append(append([]protocol.State(nil), eligibleCommit...), protocol.ExceptionOpen)...),
	row(Aggregate, "1.2", protocol.EvAgreementAmended, "", protocol.Committed, protocol.InPerformance),
	// 1.3: direct bilateral formation (A202-0014).
	row(Aggregate, "1.3", protocol.EvAgreementDirect, protocol.AgreementPending, protocol.Draft),

	// Session, pilot state machine §6.1. Every row is operated: a
	// bilateral exchange has no session stream.
	op(Session, "1.0", "offer.submitted", sessionActive, sessionOpened, sessionActive),
	op(Session, "1.0", "clarification.sent", sessionActive, sessionActive),
	op(Session, "1.0", approvalRequested, sessionPausedForApproval, sessionActive),
	op(Session, "1.0", approvalGranted, sessionActive, sessionPausedForApproval),
	op(Session, "1.0", approvalRejected, sessionActive, sessionPausedForApproval),
	op(Session, "1.0", "offer.accepted", sessionAccepted, sessionActive),
	op(Session, "1.0", "offer.withdrawn", sessionWithdrawn, sessionActive),
	op(Session, "1.0", protocol.EvDeadlineElapsed, sessionExpired, sessionActive),
	op(Session, "1.0", "session.closed", sessionClosed, sessionOpenEnds...),

	// Obligation, obligation §6.1.
	row(Obligation, "1.0", protocol.EvObligationActivated, protocol.OblPending, ""),
	row(Obligation, "1.0", obligationDue, protocol.OblDue, protocol.OblPending),
	row(Obligation, "1.0", obligationWaived, protocol.OblWaived, protocol.OblPending, protocol.OblDue, protocol.OblAsserted, protocol.OblRejected),
	row(Obligation, "1.0", protocol.EvDeadlineElapsed, oblExpired, protocol.OblPending, protocol.OblDue),
	row(Obligation, "1.0", protocol.EvPerformanceDeclared, protocol.OblAsserted, protocol.OblDue, protocol.OblRejected),
	row(Obligation, "1.0", protocol.EvAcceptanceGranted, protocol.OblAccepted, protocol.OblAsserted),
	row(Obligation, "1.0", protocol.EvAcceptanceRejected, protocol.OblRejected, protocol.OblAsserted),
	row(Obligation, "1.0", disputeRaised, protocol.OblDisputed, protocol.OblAsserted, protocol.OblAccepted, protocol.OblRejected),
	row(Obligation, "1.0", obligationDischarged, oblDischarged, protocol.OblAccepted),
	row(Obligation, "1.0", DeterminationRecorded, Determined, protocol.OblDisputed),
	row(Obligation, "1.2", obligationReleased, protocol.OblReleased, protocol.OblPending, protocol.OblDue, protocol.OblAsserted, protocol.OblRejected, protocol.OblDisputed),
)

// row returns one Transition per source state. An empty to means a
// self-loop ("unchanged" in the specification's tables).
func row[E, S ~string](m Machine, since string, event E, to S, from ...S) []Transition {
	out := make([]Transition, 0, len(from))
	for _, f := range from {
		dest := to
		if dest == "" {
			dest = f
		}
		out = append(out, Transition{Machine: m, From: string(f), Event: protocol.EventType(event), To: string(dest), Since: since})
	}
	return out
}

// op is row for transitions only an operator appends.
func op[E, S ~string](m Machine, since string, event E, to S, from ...S) []Transition {
	out := row(m, since, event, to, from...)
	for i := range out {
		out[i].Operated = true
	}
	return out
}

func build(groups ...[]Transition) []Transition {
	var out []Transition
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
