package rules

// Groups of states several rows share (pilot state machine §5, the
// paragraph after the table).
var (
	preCommit       = []string{"draft", "published", "qualifying", "negotiating", "agreement_pending"}
	eligibleCommit  = []string{"committed", "in_performance", "acceptance_pending", "settlement_pending"}
	sessionOpenEnds = []string{"opened", "active", "paused_for_approval", "accepted"}
)

// table holds every row of every version. Rows are built by the helpers
// below so that a row shared by several source states is written once, as
// the specification writes it.
var table = build(
	// Aggregate, pilot state machine §5 (base set, 1.0).
	op(Aggregate, "1.0", "request.published", "published", "draft"),
	op(Aggregate, "1.0", "qualification.started", "qualifying", "published"),
	op(Aggregate, "1.0", "negotiation.opened", "negotiating", "qualifying"),
	op(Aggregate, "1.0", "offer.selected", "agreement_pending", "negotiating"),
	op(Aggregate, "1.0", "invitation.issued", "", "published", "qualifying"),
	op(Aggregate, "1.0", "invitation.claimed", "", "published", "qualifying"),
	op(Aggregate, "1.0", "invitation.declined", "", "published", "qualifying"),
	op(Aggregate, "1.0", "invitation.expired", "", "published", "qualifying"),
	op(Aggregate, "1.0", "invitation.revoked", "", "published", "qualifying"),
	row(Aggregate, "1.0", "approval.requested", "agreement_pending", "agreement_pending"),
	row(Aggregate, "1.0", "approval.rejected", "negotiating", "agreement_pending"),
	row(Aggregate, "1.0", "acceptance.withdrawn", "negotiating", "agreement_pending"),
	row(Aggregate, "1.0", "agreement.committed", "committed", "agreement_pending"),
	row(Aggregate, "1.0", "obligation.activated", "in_performance", "committed"),
	row(Aggregate, "1.0", "performance.declared", "acceptance_pending", "in_performance"),
	row(Aggregate, "1.0", "acceptance.rejected", "in_performance", "acceptance_pending"),
	row(Aggregate, "1.0", "acceptance.granted", "settlement_pending", "acceptance_pending"),
	row(Aggregate, "1.0", "settlement.instructed", "settlement_pending", "settlement_pending"),
	row(Aggregate, "1.0", "transaction.completed", "completed", "settlement_pending"),
	row(Aggregate, "1.0", "transaction.cancelled", "cancelled", preCommit...),
	row(Aggregate, "1.0", "deadline.elapsed", "expired", preCommit...),
	row(Aggregate, "1.0", "exception.opened", "exception_open", eligibleCommit...),
	row(Aggregate, "1.0", "remediation.accepted", "in_performance", "exception_open"),
	row(Aggregate, "1.0", "exception.resolved", "settlement_pending", "exception_open"),
	row(Aggregate, "1.0", "transaction.terminated", "terminated", "exception_open"),
	// 1.1: completion out of an open exception (runner only, C4).
	row(Aggregate, "1.1", "transaction.completed", "completed", "exception_open"),
	// 1.2: consensual termination and amendment (A202-0010).
	row(Aggregate, "1.2", "termination.agreed", "terminated", append(append([]string(nil), eligibleCommit...), "exception_open")...),
	row(Aggregate, "1.2", "agreement.amended", "", "committed", "in_performance"),
	// 1.3: direct bilateral formation (A202-0014).
	row(Aggregate, "1.3", "agreement.direct", "agreement_pending", "draft"),

	// Session, pilot state machine §6.1. Every row is operated: a
	// bilateral exchange has no session stream.
	op(Session, "1.0", "offer.submitted", "active", "opened", "active"),
	op(Session, "1.0", "clarification.sent", "active", "active"),
	op(Session, "1.0", "approval.requested", "paused_for_approval", "active"),
	op(Session, "1.0", "approval.granted", "active", "paused_for_approval"),
	op(Session, "1.0", "approval.rejected", "active", "paused_for_approval"),
	op(Session, "1.0", "offer.accepted", "accepted", "active"),
	op(Session, "1.0", "offer.withdrawn", "withdrawn", "active"),
	op(Session, "1.0", "deadline.elapsed", "expired", "active"),
	op(Session, "1.0", "session.closed", "closed", sessionOpenEnds...),

	// Obligation, obligation §6.1.
	row(Obligation, "1.0", "obligation.activated", "pending", ""),
	row(Obligation, "1.0", "obligation.due", "due", "pending"),
	row(Obligation, "1.0", "obligation.waived", "waived", "pending", "due", "asserted", "rejected"),
	row(Obligation, "1.0", "deadline.elapsed", "expired", "pending", "due"),
	row(Obligation, "1.0", "performance.declared", "asserted", "due", "rejected"),
	row(Obligation, "1.0", "acceptance.granted", "accepted", "asserted"),
	row(Obligation, "1.0", "acceptance.rejected", "rejected", "asserted"),
	row(Obligation, "1.0", "dispute.raised", "disputed", "asserted", "accepted", "rejected"),
	row(Obligation, "1.0", "obligation.discharged", "discharged", "accepted"),
	row(Obligation, "1.0", "determination.recorded", Determined, "disputed"),
	row(Obligation, "1.2", "obligation.released", "released", "pending", "due", "asserted", "rejected", "disputed"),
)

// row returns one Transition per source state. An empty to means a
// self-loop ("unchanged" in the specification's tables).
func row(m Machine, since, event, to string, from ...string) []Transition {
	out := make([]Transition, 0, len(from))
	for _, f := range from {
		dest := to
		if dest == "" {
			dest = f
		}
		out = append(out, Transition{Machine: m, From: f, Event: event, To: dest, Since: since})
	}
	return out
}

// op is row for transitions only an operator appends.
func op(m Machine, since, event, to string, from ...string) []Transition {
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
