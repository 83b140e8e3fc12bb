package verify

import (
	"fmt"

	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Step 7, first: what the discloser stated (evidence verification §5,
// §6), before the gaps are listed.
//
//   - disclosure_complete, on an obligation response that names an
//     assertion and on a determination: the object it cannot be verified
//     without (the assertion whose hash it binds, the dispute it answers)
//     is disclosed (§6 rule 1). One the discloser stated as withheld is a
//     boundary, not_checkable; one it neither disclosed nor stated is
//     A202-EVIDENCE-DISCLOSURE-INCOMPLETE. A bundle that states nothing
//     about what it withheld (Input.Disclosure nil) leaves an absence
//     not_checkable.
//   - stated_report, when the record carries a verification report
//     (Input.StatedReport): it states its scope, gives every check one of
//     the three results, reports every undisclosed stream as a gap that
//     is not_checkable, and claims no pass over a failure nor an
//     unqualified pass over a gap (§5, §6 rule 2; gate.CheckReport),
//     A202-EVIDENCE-REPORT-INVALID. Its subject is "stated_report".
func (r *run) statements() {
	for _, o := range r.objs {
		switch o.typ {
		case protocol.ObligationResponse:
			if id := str(o.payload, "assertion_id"); id != "" {
				r.disclosed(o, "assertion", id, protocol.PerformanceEvent)
			}
		case protocol.Determination:
			if id := str(o.payload, "dispute_id"); id != "" {
				r.disclosed(o, "dispute", id, protocol.Dispute)
			}
		}
	}
	if r.in.StatedReport != nil {
		r.fromGate(7, "stated_report", StatedReportSubject, gate.CheckReport(r.in.StatedReport),
			"the report states its scope, gives every check verified, failed or not_checkable, reports every undisclosed stream as not_checkable, and claims no pass it does not have")
	}
}

// StatedReportSubject is the subject of the checks on a stated report,
// which has no identifier of its own.
const StatedReportSubject = "stated_report"

func (r *run) disclosed(o *object, what, id string, typ protocol.ObjectType) {
	if _, held := r.heldAs(id, typ); held {
		r.add(7, "disclosure_complete", o.subject, Verified, "", fmt.Sprintf("the %s %s it is verified against is disclosed", what, id))
		return
	}
	r.missing(id)
	if !r.stated() {
		r.add(7, "disclosure_complete", o.subject, NotCheckable, "",
			fmt.Sprintf("the %s %s is not in the bundle, and the bundle states nothing about what it withheld: whether the disclosure is complete is not established", what, orNone(id)))
		return
	}
	ps := r.bindings([]map[string]any{o.val}, o.id, reason.EvidenceDisclosureIncomplete)
	if len(ps) > 0 {
		r.fromGate(7, "disclosure_complete", o.subject, ps, "")
		return
	}
	r.add(7, "disclosure_complete", o.subject, NotCheckable, "", fmt.Sprintf("the %s %s is stated as withheld: a boundary of the disclosure", what, id))
}
