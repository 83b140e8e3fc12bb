package gate

import (
	"regexp"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// The due condition registry (obligation §4) and the fields each type may
// carry. A registered type wearing another type's fields is not that type.
var dueConditionFields = map[string]map[string]bool{
	"due_at_time":      setOf("type", "at", "business_days"),
	"due_on_event":     setOf("type", "act_ref", "evidence_type"),
	"due_on_discharge": setOf("type", "obligation_id"),
	"all_of":           setOf("type", "conditions"),
}

// rejectionReasons is the closed list of obligation §5.5
// (protocol.RejectionReasons).
var rejectionReasons = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range protocol.RejectionReasons {
		m[string(r)] = true
	}
	return m
}()

var (
	subjectMembers  = setOf("agreement_id", "terms_hash", "profile", "term_path")
	termPathPattern = regexp.MustCompile(`^\$\.terms\.(core|profile_terms)(\.[A-Za-z0-9_]+)*$`)
	// mutatingMembers are the obligation terms no response may carry
	// (obligation §5.2 rule 4): changed terms are a new obligation.
	mutatingMembers = []string{"subject", "due_condition", "quantity", "unit_code", "consideration"}
)

func checkObligation(ps *problems, p map[string]any) {
	checkDueCondition(ps, "/payload/due_condition", p["due_condition"], 0)

	// The subject names the owed term by reference; a restated term could
	// drift from the agreement while both copies stay signed (obligation §3.1).
	subject, ok := objAt(p, "subject")
	if !ok {
		ps.add(reason.ObligationSubjectUnreferenced, "/payload/subject", "an obligation names its subject by reference to the agreement's terms")
	} else {
		for _, k := range membersOutside(subject, subjectMembers) {
			ps.add(reason.ObligationSubjectUnreferenced, pointer("/payload/subject", k), "the subject references the terms and never restates them (member %q)", k)
		}
		sa, _ := strAt(subject, "agreement_id")
		pa, _ := strAt(p, "agreement_id")
		if sa == "" || sa != pa {
			ps.add(reason.ObligationSubjectUnreferenced, "/payload/subject/agreement_id", "subject.agreement_id does not name the obligation's agreement")
		}
		if tp, _ := strAt(subject, "term_path"); !termPathPattern.MatchString(tp) {
			ps.add(reason.ObligationSubjectUnreferenced, "/payload/subject/term_path", "term_path does not address a term under $.terms.core or $.terms.profile_terms")
		}
	}
	checkQuantity(ps, "/payload/quantity", p["quantity"])
	if c, ok := member(p, "consideration"); ok && c != nil {
		checkMoney(ps, "/payload/consideration", c)
	}
}

// checkDueCondition enforces the closed registry at validation, as the
// evaluator must at evaluation (obligation §4): unknown type, another
// type's fields, or a nested conjunction are A202-OBLIGATION-CONDITION-UNKNOWN.
func checkDueCondition(ps *problems, path string, v any, depth int) {
	c, ok := obj(v)
	if !ok {
		ps.add(reason.ObligationConditionUnknown, path, "a due condition is an object with a registered type")
		return
	}
	typ, _ := strAt(c, "type")
	fields, registered := dueConditionFields[typ]
	if !registered {
		ps.add(reason.ObligationConditionUnknown, pointer(path, "type"), "due condition type %q is not registered", typ)
		return
	}
	for _, k := range membersOutside(c, fields) {
		ps.add(reason.ObligationConditionUnknown, pointer(path, k), "a %s condition carries no %q", typ, k)
	}
	switch typ {
	case "all_of":
		if depth > 0 {
			ps.add(reason.ObligationConditionUnknown, path, "all_of does not nest: a nested conjunction is a flat one written twice")
		}
		list, ok := arrAt(c, "conditions")
		if !ok || len(list) < 2 {
			ps.add(reason.ObligationConditionUnknown, pointer(path, "conditions"), "all_of joins at least two conditions")
		}
		for i, e := range list {
			checkDueCondition(ps, pointer(path, "conditions", i), e, depth+1)
		}
	case "due_at_time":
		at, hasAt := c["at"]
		bd, hasBD := c["business_days"]
		if hasAt == hasBD {
			ps.add(reason.ObligationConditionUnknown, path, "due_at_time carries exactly one of at or business_days")
		}
		if hasAt {
			// A date is a term only with a zone (canonical model §7).
			if s, ok := at.(string); !ok {
				ps.add(reason.TermsInvalid, pointer(path, "at"), "at is an RFC 3339 timestamp with a zone")
			} else if _, ok := parseTime(s); !ok {
				ps.add(reason.TermsInvalid, pointer(path, "at"), "at %q is not an RFC 3339 timestamp with a zone", s)
			}
		}
		if hasBD {
			checkBusinessDays(ps, pointer(path, "business_days"), bd)
		}
	case "due_on_event":
		_, hasAct := c["act_ref"]
		et, hasType := c["evidence_type"]
		if hasAct == hasType {
			ps.add(reason.ObligationConditionUnknown, path, "due_on_event carries exactly one of act_ref or evidence_type")
		}
		if hasType {
			if s, _ := et.(string); !evidenceTypes[s] {
				ps.add(reason.EvidenceTypeUnknown, pointer(path, "evidence_type"), "evidence type %q is not registered", s)
			}
		}
	case "due_on_discharge":
		if id, _ := strAt(c, "obligation_id"); !hasPrefixID(id, "obl") {
			ps.add(reason.ObligationConditionUnknown, pointer(path, "obligation_id"), "due_on_discharge names an obligation")
		}
	}
}

// checkBusinessDays: a duration in business days is a term only when it
// names its calendar (canonical model §7, obligation §4).
func checkBusinessDays(ps *problems, path string, v any) {
	bd, ok := obj(v)
	if !ok {
		ps.add(reason.TermsInvalid, path, "business_days is an object {days, calendar}")
		return
	}
	if cal, _ := strAt(bd, "calendar"); cal == "" {
		ps.add(reason.TermsInvalid, pointer(path, "calendar"), "business days without a named calendar are not a term")
	}
	if d, ok := intAt(bd, "days"); !ok || d < 1 {
		ps.add(reason.TermsInvalid, pointer(path, "days"), "days is an integer of at least 1")
	}
}

func checkPerformance(ps *problems, p map[string]any) {
	refs, _ := arrAt(p, "evidence_refs")
	if len(refs) == 0 {
		ps.add(reason.ObligationAssertionUnevidenced, "/payload/evidence_refs", "an assertion of performance carries at least one evidence reference (obligation §5.1)")
	}
	if v, ok := member(p, "evidence_refs"); ok {
		checkEvidenceRefs(ps, "/payload/evidence_refs", v, true)
	}
	checkQuantity(ps, "/payload/asserted_quantity", p["asserted_quantity"])
}

func checkResponse(ps *problems, p map[string]any) {
	for _, k := range mutatingMembers {
		if _, ok := p[k]; ok {
			ps.add(reason.ObligationTermsMutated, pointer("/payload", k), "a response never alters the obligation's %s; changed terms are a new obligation", k)
		}
	}
	if rt, _ := strAt(p, "response_type"); rt == "reject" {
		if rc, _ := strAt(p, "reason_code"); !rejectionReasons[rc] {
			ps.add(reason.ObligationRejectionReasonUnknown, "/payload/reason_code", "rejection reason %q is not in the closed list (obligation §5.5)", rc)
		}
	}
	if q, ok := member(p, "accepted_quantity"); ok {
		checkQuantity(ps, "/payload/accepted_quantity", q)
	}
}
