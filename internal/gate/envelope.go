package gate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
)

const (
	commercialSpecVersion = "a202-commercial/0.1"
	mandateSpecVersion    = "a202-mandate/0.1"
)

// objectTypes is the kernel's object_type registry (canonical model §3;
// commercial_mandate is deliberately absent, §3.1).
var objectTypes = setOf(
	"organization", "agent", "principal", "external_identity_assertion",
	"key_record", "delegation", "approval", "policy_decision",
	"revocation_record", "capability", "intent", "counterparty_invitation",
	"invitation_acceptance", "qualification_requirement", "evidence",
	"commercial_request", "clarification", "action_envelope", "offer",
	"acceptance", "agreement", "transaction_event", "commitment",
	"obligation", "obligation_response", "performance_event", "dispute",
	"determination", "exception", "settlement_instruction",
	"adapter_receipt", "evidence_manifest", "audit_bundle",
)

// envelopeMembers are the only top-level members an envelope object may
// carry. v0.1 registers no extension namespace (canonical model §14), so
// anything else, such as a carrier's task id, is refused at the schema
// layer with no code (binding §5.4).
var envelopeMembers = setOf(
	"spec_version", "id", "object_type", "version", "created_at",
	"created_by", "transaction_id", "previous_version_id", "content_hash",
	"signatures", "payload", "kernel_annotations",
)

// signaturePurposes is the kernel's registry of purposes a signature
// entry may name at all; which of them fit which type is package
// signature's table.
var signaturePurposes = setOf(
	"object_issuance", "action_submission", "invitation_issuance",
	"invitation_claim", "offer_submission", "offer_acceptance",
	"agreement_commitment", "event_append", "policy_decision",
	"adapter_receipt", "audit_seal",
)

// Envelope judges one envelope object on its own: the schema layer, the
// envelope invariants, and the normative checks of its object type. A
// single object's content_hash is checked for form, not recomputed (the
// published single-object fixtures carry synthetic hashes); Set recomputes.
func Envelope(o map[string]any, opt Options) Judgment {
	ps := envelopeChecks(o)
	if !opt.OwnObject {
		doc := o
		if opt.AwaitingSignatures {
			doc = awaitingView(o)
		}
		ps = append(ps, schemaLayer(schema.ValidateEnvelope, doc)...)
	}
	if opt.AwaitingSignatures {
		ps = withoutSignatureCount(ps)
	}
	return judge(KindEnvelope, ps)
}

// awaitingView is what the schema layer judges of an object that travels
// awaiting the other party's signature: the object with its last
// signature entry counted twice, so that the schema's minimum count (an
// agreement's two) is met and every other rule, each entry's shape among
// them, is judged on the entries as they are. No schema asks signatures to
// be unique; were one to, the view would be refused, never wrongly let
// through. Validating the object as it is and dropping the count problem
// afterwards (withoutSignatureCount, still applied) gives the same
// judgment, at the cost of the validator's full error report every time
// an agreement travels.
func awaitingView(o map[string]any) map[string]any {
	sigs, _ := o["signatures"].([]any)
	if len(sigs) == 0 {
		return o
	}
	v := make(map[string]any, len(o))
	for k, x := range o {
		v[k] = x
	}
	v["signatures"] = append(sigs[:len(sigs):len(sigs)], sigs[len(sigs)-1])
	return v
}

// withoutSignatureCount drops the two problems that say an object carries
// too few signatures (the normative count and the schema's minItems), and
// nothing else.
func withoutSignatureCount(ps problems) problems {
	out := ps[:0:0]
	for _, p := range ps {
		if p.Path == "/signatures" && (strings.HasPrefix(p.Detail, "schema minItems") || strings.Contains(p.Detail, "needs signatures by at least")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// envelopeChecks are the normative checks of one envelope object, which
// Set reuses for each member of a set.
func envelopeChecks(o map[string]any) problems {
	var ps problems
	if o == nil {
		ps.add("", "", "no object")
		return ps
	}
	sv, _ := strAt(o, "spec_version")
	if sv != commercialSpecVersion {
		if sv == mandateSpecVersion {
			ps.add("", "/spec_version", "a mandate is a standalone document and is never wrapped in the common envelope (canonical model §3.1)")
		} else {
			ps.add("", "/spec_version", "spec_version is not %q", commercialSpecVersion)
		}
	}
	typ, _ := strAt(o, "object_type")
	switch {
	case typ == "commercial_mandate":
		ps.add("", "/object_type", "a mandate presented in envelope form is refused (canonical model §3.1)")
	case !objectTypes[typ]:
		ps.add("", "/object_type", "object_type %q is not a registered object type", typ)
	}
	checkIdentity(&ps, o, typ)
	checkMembers(&ps, o)
	checkSignatures(&ps, o, typ)

	if _, present := o["kernel_annotations"]; present && typ == "action_envelope" {
		// An action envelope precedes the minting step that writes
		// annotations, so annotations on one were written by someone other
		// than the control plane (canonical model §3).
		ps.add(reason.AnnotationForged, "/kernel_annotations", "an action_envelope must not carry kernel_annotations")
	}

	payload, ok := objAt(o, "payload")
	if !ok {
		ps.add("", "/payload", "payload is missing or not an object")
		return ps
	}
	checkHashForms(&ps, "/payload", payload)
	checkPayload(&ps, o, typ, payload)
	return ps
}

// checkIdentity covers id, version, previous_version_id, transaction_id,
// created_at and created_by.
func checkIdentity(ps *problems, o map[string]any, typ string) {
	id, ok := strAt(o, "id")
	if !ok || !idPattern.MatchString(id) {
		ps.add("", "/id", "id is not a type-prefixed identifier")
	} else if prefix, known := envelope.PrefixFor(typ); known && !strings.HasPrefix(id, prefix+"_") {
		ps.add("", "/id", "id prefix does not match object_type %q (expected %s_)", typ, prefix)
	}

	version, ok := intAt(o, "version")
	if !ok || version < 1 {
		ps.add("", "/version", "version is not an integer of at least 1")
	}
	prev, hasPrev := o["previous_version_id"]
	switch {
	case !hasPrev:
		ps.add("", "/previous_version_id", "previous_version_id is required (null on version 1)")
	case ok && version == 1 && prev != nil:
		ps.add("", "/previous_version_id", "version 1 has no predecessor")
	case ok && version > 1:
		if s, isStr := prev.(string); !isStr || !idPattern.MatchString(s) {
			ps.add("", "/previous_version_id", "a version after 1 names its predecessor")
		}
	}

	txn, hasTxn := o["transaction_id"]
	switch {
	case !hasTxn:
		ps.add("", "/transaction_id", "transaction_id is required (null only for party-level types)")
	case txn == nil:
		if objectTypes[typ] && envelope.TransactionBound(typ) {
			ps.add("", "/transaction_id", "%s is transaction-bound and needs a transaction_id", typ)
		}
	default:
		if s, isStr := txn.(string); !isStr || !hasPrefixID(s, "txn") {
			ps.add("", "/transaction_id", "transaction_id is not a txn_ identifier")
		}
	}

	if _, ok := timeAt(o, "created_at"); !ok {
		ps.add("", "/created_at", "created_at is not an RFC 3339 timestamp")
	}
	cb, ok := objAt(o, "created_by")
	if !ok {
		ps.add("", "/created_by", "created_by is missing")
		return
	}
	for _, m := range [][2]string{{"organization_id", "org"}, {"agent_id", "agt"}, {"mandate_id", "mnd"}} {
		if s, _ := strAt(cb, m[0]); !hasPrefixID(s, m[1]) {
			ps.add("", pointer("/created_by", m[0]), "created_by.%s is not a %s_ identifier", m[0], m[1])
		}
	}
}

// checkMembers refuses top-level members outside the envelope and
// requires the content hash in its one form.
func checkMembers(ps *problems, o map[string]any) {
	for _, k := range sortedKeys(o) {
		if envelopeMembers[k] {
			continue
		}
		ps.add("", pointer("", k), "member %q is not part of the envelope; carrier or other metadata never rides inside signed bytes", k)
	}
	h, present := o["content_hash"]
	if !present {
		ps.add("", "/content_hash", "content_hash is required")
	} else if s, ok := h.(string); !ok || !isHash(s) {
		ps.add(reason.HashFormatInvalid, "/content_hash", "content_hash is not 64 lowercase hexadecimal characters (multibase and uppercase are not accepted)")
	}
}

// checkSignatures checks each signature entry's shape and purpose and the
// type's minimum count. The values themselves are verified by package
// signature against keys; that is not a static check.
func checkSignatures(ps *problems, o map[string]any, typ string) {
	raw, present := o["signatures"]
	sigs, ok := raw.([]any)
	if !present || !ok {
		ps.add("", "/signatures", "signatures is missing or not an array")
		sigs = nil
	}
	allowed := signature.AllowedPurposes(typ)
	keys := map[string]bool{}
	for i, s := range sigs {
		path := pointer("/signatures", i)
		entry, ok := obj(s)
		if !ok {
			ps.add("", path, "a signature entry is not an object")
			continue
		}
		for _, m := range []string{"key_id", "algorithm", "signature", "signed_at", "purpose"} {
			if _, ok := strAt(entry, m); !ok {
				ps.add("", pointer(path, m), "signature entry lacks %s", m)
			}
		}
		for _, k := range sortedKeys(entry) {
			if !contains([]string{"key_id", "algorithm", "signature", "signed_at", "purpose"}, k) {
				ps.add("", pointer(path, k), "signature entry carries unknown member %q", k)
			}
		}
		if kid, ok := strAt(entry, "key_id"); ok {
			keys[kid] = true
		}
		purpose, _ := strAt(entry, "purpose")
		switch {
		case allowed != nil && !contains(allowed, purpose):
			ps.add(reason.EvidenceSignatureInvalid, pointer(path, "purpose"),
				"purpose %q does not sign a %s (allowed: %s)", purpose, typ, strings.Join(allowed, ", "))
		case allowed == nil && !signaturePurposes[purpose]:
			ps.add(reason.EvidenceSignatureInvalid, pointer(path, "purpose"), "purpose %q is not a registered signature purpose", purpose)
		}
	}
	// Counted by distinct key: two entries by one key are one party's
	// signature, and an agreement needs both parties' (canonical model §10
	// step 7).
	if min := signature.MinSignatures(typ); len(keys) < min {
		ps.add(reason.EvidenceSignatureInvalid, "/signatures",
			"a %s needs signatures by at least %d distinct keys, found %d", typ, min, len(keys))
	}
}

// checkPayload runs the normative checks of the object's type.
func checkPayload(ps *problems, o map[string]any, typ string, p map[string]any) {
	switch typ {
	case "offer":
		checkOffer(ps, o, p)
	case "acceptance":
		// offer_hash is bound to the offer in a set (Bindings).
	case "agreement":
		checkAgreement(ps, p)
	case "obligation":
		checkObligation(ps, p)
	case "performance_event":
		checkPerformance(ps, p)
	case "obligation_response":
		checkResponse(ps, p)
	case "dispute":
		checkDispute(ps, o, p)
	case "determination":
		checkDetermination(ps, p)
	case "settlement_instruction":
		checkSettlement(ps, p)
	case "policy_decision":
		checkPolicyDecision(ps, p)
	case "transaction_event":
		checkEvent(ps, o, p)
	case "agent":
		if ep, ok := strAt(p, "endpoint"); ok && !strings.HasPrefix(ep, "https://") {
			ps.add(reason.EndpointInsecure, "/payload/endpoint", "an agent endpoint must use HTTPS")
		}
	case "organization":
		checkOrganization(ps, p)
	case "principal":
		checkPrincipal(ps, p)
	case "key_record":
		checkKeyRecord(ps, p)
	case "evidence":
		if t, _ := strAt(p, "evidence_type"); !evidenceTypes[t] {
			ps.add(reason.EvidenceTypeUnknown, "/payload/evidence_type", "evidence type %q is not registered (evidence verification §3.1)", t)
		}
	}
}

// hashMembers are the member names the kernel types as a SHA-256 hash
// wherever they appear in a payload; nullable ones may be null.
var hashMembers = map[string]bool{
	"content_hash": false, "terms_hash": false, "accepted_offer_hash": false,
	"offer_hash": false, "action_hash": false, "assertion_hash": false,
	"subject_hash": false, "inputs_hash": false, "determination_hash": false,
	"accepting_act_hash": false, "artifact_hash": false, "act_ref": false,
	"after_ref": false, "rules_hash": false, "termination_record_hash": false,
	"remediation_hash": false, "audit_bundle_hash": false,
	"previous_event_hash": true, "mapping_report_hash": true,
}

// checkHashForms refuses, anywhere under v, a hash member that is not 64
// lowercase hexadecimal characters (pilot state machine §10,
// A202-HASH-FORMAT-INVALID). profile_terms is opaque to the kernel and
// skipped.
func checkHashForms(ps *problems, path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if k == "profile_terms" {
				continue
			}
			if nullable, isHashMember := hashMembers[k]; isHashMember {
				if x[k] == nil && nullable {
					continue
				}
				if s, ok := x[k].(string); !ok || !isHash(s) {
					ps.add(reason.HashFormatInvalid, pointer(path, k), "%s is not 64 lowercase hexadecimal characters", k)
				}
				continue
			}
			if container(x[k]) { // a scalar holds no hash member: no pointer to build
				checkHashForms(ps, pointer(path, k), x[k])
			}
		}
	case []any:
		for i, e := range x {
			if container(e) {
				checkHashForms(ps, pointer(path, i), e)
			}
		}
	}
}

// container reports whether v is a JSON object or array.
func container(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// schemaLayerOn is switched off only by the tests that show every
// declared code comes from a normative check.
var schemaLayerOn = true

// schemaLayer runs one schema validation and reports its failures.
func schemaLayer(validate func(any) error, doc any) []Problem {
	if !schemaLayerOn {
		return nil
	}
	return schemaProblems(validate(doc))
}

// schemaProblems turns a schema-layer error into code-less problems, one
// per failure. The schema layer refuses; it never names a code.
func schemaProblems(err error) []Problem {
	if err == nil {
		return nil
	}
	var ve *schema.ValidationError
	if errors.As(err, &ve) {
		out := make([]Problem, 0, len(ve.Failures))
		for _, f := range ve.Failures {
			out = append(out, Problem{Path: f.InstanceLocation, Detail: fmt.Sprintf("schema %s: %s", f.Keyword, f.Message)})
		}
		return out
	}
	return []Problem{{Detail: "schema: " + err.Error()}}
}
