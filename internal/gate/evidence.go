package gate

import (
	"github.com/partyd/party/internal/reason"
)

// evidenceTypes is the closed registry of evidence verification §3.1.
var evidenceTypes = setOf("attestation", "third_party_certificate",
	"inspection_result", "delivery_confirmation", "measurement_record",
	"adapter_receipt", "verification_report", "signed_document")

var evidenceRefMembers = setOf("evidence_id", "content_hash", "evidence_type", "locator_hint", "signed_by")

// checkEvidenceRefs checks an array of evidence references. fullRequired
// marks the positions where only the full form is accepted (performance
// events, disputes, determinations; evidence verification §3.3 rule 1);
// elsewhere a bare evd_ identifier is also accepted.
func checkEvidenceRefs(ps *problems, path string, v any, fullRequired bool) {
	refs, ok := v.([]any)
	if !ok {
		ps.add("", path, "evidence references are an array")
		return
	}
	for i, r := range refs {
		checkEvidenceRef(ps, pointer(path, i), r, fullRequired)
	}
}

func checkEvidenceRef(ps *problems, path string, r any, fullRequired bool) {
	switch ref := r.(type) {
	case string:
		if fullRequired {
			ps.add("", path, "this position takes the full reference form {evidence_id, content_hash, evidence_type, signed_by}, not a bare identifier")
		} else if !hasPrefixID(ref, "evd") {
			ps.add("", path, "a short-form evidence reference is an evd_ identifier")
		}
	case map[string]any:
		for _, k := range sortedKeys(ref) {
			if !evidenceRefMembers[k] {
				ps.add("", pointer(path, k), "an evidence reference carries no %q", k)
			}
		}
		if id, _ := strAt(ref, "evidence_id"); !hasPrefixID(id, "evd") {
			ps.add("", pointer(path, "evidence_id"), "evidence_id is an evd_ identifier")
		}
		if _, ok := ref["content_hash"]; !ok {
			// Without a hash, retrieval through the locator would be the only
			// check, which hands the evidence to whoever controls the location.
			ps.add(reason.EvidenceHashMismatch, pointer(path, "content_hash"), "a full reference carries the evidence's content hash; the locator is never load-bearing")
		}
		if t, _ := strAt(ref, "evidence_type"); !evidenceTypes[t] {
			ps.add(reason.EvidenceTypeUnknown, pointer(path, "evidence_type"), "evidence type %q is not registered (evidence verification §3.1)", t)
		}
		if h, ok := strAt(ref, "locator_hint"); ok {
			if why := locatorSecret(h); why != "" {
				ps.add(reason.DisclosureDenied, pointer(path, "locator_hint"), "the locator hint %s", why)
			}
		}
		signer, ok := objAt(ref, "signed_by")
		if !ok {
			ps.add("", pointer(path, "signed_by"), "a full reference names who signed the evidence")
		} else {
			if s, _ := strAt(signer, "organization_id"); !hasPrefixID(s, "org") {
				ps.add("", pointer(path, "signed_by", "organization_id"), "signed_by.organization_id is an org_ identifier")
			}
			if s, _ := strAt(signer, "agent_id"); !hasPrefixID(s, "agt") {
				ps.add("", pointer(path, "signed_by", "agent_id"), "signed_by.agent_id is an agt_ identifier")
			}
		}
	default:
		ps.add("", path, "an evidence reference is an evd_ identifier or a reference object")
	}
}
