package signature

// purposes maps an object type to the signature purposes that may sign it.
// The published conformance runner's table is the source of truth for the
// fixtures (spec-map §2.5); evidence verification §4 step 2 refuses a
// signature whose purpose is not listed for its object's type, because a
// signature issued for one act is not a signature for another. The operated
// invitation types are kept so a bilateral verifier refuses them with the
// same rule rather than treating them as unlisted.
var purposes = map[string][]string{
	"offer":                   {"offer_submission", "object_issuance"},
	"acceptance":              {"offer_acceptance", "object_issuance"},
	"agreement":               {"agreement_commitment", "object_issuance"},
	"transaction_event":       {"event_append"},
	"policy_decision":         {"policy_decision"},
	"action_envelope":         {"action_submission"},
	"counterparty_invitation": {"invitation_issuance", "object_issuance"},
	"invitation_acceptance":   {"invitation_claim", "object_issuance"},
	"adapter_receipt":         {"adapter_receipt", "object_issuance"},
	"obligation":              {"object_issuance"},
	"performance_event":       {"object_issuance"},
	"obligation_response":     {"object_issuance"},
	"dispute":                 {"object_issuance"},
	"determination":           {"object_issuance"},
	"settlement_instruction":  {"object_issuance"},
	"approval":                {"object_issuance"},
	"commitment":              {"object_issuance"},
	"evidence":                {"object_issuance"},
	"revocation_record":       {"object_issuance"},
	"key_record":              {"object_issuance"},
	// The runner's table has no row for exception, whose payload the
	// kernel defers (spec-map C17); party signs its exceptions with the
	// issuance purpose every other act object takes
	// (docs/record-protocol.md, "Exceptions and disputes (issue 17, items
	// 1–8)").
	"exception": {"object_issuance"},
}

// minimums is the signatures minItems of the commercial kernel schema's
// allOf branches. A transaction_event needs one there; the bilateral record
// asks for a countersignature on top (decisions.md item 10), which is the
// record's rule, not the object's.
var minimums = map[string]int{
	"agreement":               2,
	"invitation_acceptance":   2,
	"action_envelope":         1,
	"counterparty_invitation": 1,
	"offer":                   1,
	"acceptance":              1,
	"transaction_event":       1,
	"policy_decision":         1,
	"obligation":              1,
	"performance_event":       1,
	"obligation_response":     1,
	"dispute":                 1,
	"determination":           1,
	"settlement_instruction":  1,
}

// partyMinimums are the minimums of the types whose payload the kernel
// defers and party defines: an exception (spec-map C17) is a signed
// statement like a dispute, so it needs its opener's signature
// (docs/record-protocol.md, "Exceptions and disputes (issue 17, items
// 1–8)"). They are kept apart from
// minimums, which mirrors the schema exactly.
var partyMinimums = map[string]int{
	"exception": 1,
}

// PurposeAllowed reports whether purpose may sign an object of objectType
// (spec-map §2.5 table). A type without a table row allows no purpose: an
// object the table does not name cannot be shown to be signed for its act.
func PurposeAllowed(objectType, purpose string) bool {
	for _, p := range purposes[objectType] {
		if p == purpose {
			return true
		}
	}
	return false
}

// AllowedPurposes returns the purposes allowed for objectType (nil if the
// type has no table row). The slice is a copy the caller may keep.
func AllowedPurposes(objectType string) []string {
	p, ok := purposes[objectType]
	if !ok {
		return nil
	}
	return append([]string(nil), p...)
}

// MinSignatures returns how many signatures an object of objectType must
// carry: 2 for agreement (both parties sign the same bytes), 1 for the
// payload-defined act types including a bare transaction_event, per the
// kernel schema's allOf, and 0 where none is required.
func MinSignatures(objectType string) int {
	if n, ok := partyMinimums[objectType]; ok {
		return n
	}
	return minimums[objectType]
}
