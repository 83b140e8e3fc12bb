package gate

import (
	"github.com/partyd/party/internal/reason"
)

// reportResults are the three per-check values of evidence verification
// §5; a boolean has discarded the not-checkable set.
var reportResults = setOf("verified", "failed", "not_checkable")

// CheckReport judges a verification report (evidence verification §5,
// §6; the shape the published fixtures use, spec-map D18): it states its
// scope (the streams in scope), gives every check one of the three
// results, reports every undisclosed stream as a gap that is
// not_checkable and never verified or failed, and claims no pass over a
// failure or an unqualified pass over a gap. Each failure is
// A202-EVIDENCE-REPORT-INVALID.
func CheckReport(report any) []Problem {
	var ps problems
	r, ok := obj(report)
	if !ok {
		ps.add(reason.EvidenceReportInvalid, "", "a verification report is an object")
		return ps
	}
	scope, okScope := objAt(r, "scope")
	streams, _ := arrAt(scope, "streams_in_scope")
	if !okScope || len(streams) == 0 {
		// Silence about scope is indistinguishable from completeness.
		ps.add(reason.EvidenceReportInvalid, "/scope", "the report does not state the streams it covers")
	}
	undisclosed, _ := stringsAt(scope, "undisclosed_streams")

	checks, ok := arrAt(r, "checks")
	if !ok || len(checks) == 0 {
		ps.add(reason.EvidenceReportInvalid, "/checks", "the report lists its checks")
		return ps
	}
	failed, gaps := false, false
	named := map[string]bool{}
	for i, c := range checks {
		path := pointer("/checks", i)
		check, ok := obj(c)
		if !ok {
			ps.add(reason.EvidenceReportInvalid, path, "a check is an object")
			continue
		}
		stream, _ := strAt(check, "stream")
		named[stream] = true
		result, isString := check["result"].(string)
		if !isString || !reportResults[result] {
			ps.add(reason.EvidenceReportInvalid, pointer(path, "result"), "a check's result is verified, failed or not_checkable, never a boolean")
			continue
		}
		switch result {
		case "failed":
			failed = true
		case "not_checkable":
			gaps = true
		}
		if contains(undisclosed, stream) && result != "not_checkable" {
			ps.add(reason.EvidenceReportInvalid, pointer(path, "result"), "stream %s was not disclosed, so its check is not_checkable, not %s", stream, result)
		}
	}
	for _, s := range undisclosed {
		if !named[s] {
			ps.add(reason.EvidenceReportInvalid, "/scope/undisclosed_streams", "the undisclosed stream %s is not listed among the gaps", s)
		}
	}
	overall, isString := r["overall"].(string)
	switch {
	case !isString:
		ps.add(reason.EvidenceReportInvalid, "/overall", "the overall result is a statement, not a boolean")
	case failed && (overall == "passing" || overall == "passing_in_scope"):
		ps.add(reason.EvidenceReportInvalid, "/overall", "no report passes with a failed check")
	case gaps && overall == "passing":
		ps.add(reason.EvidenceReportInvalid, "/overall", "a report with gaps passes only in scope, never outright")
	}
	return ps
}
