package signature

import (
	"crypto"
	"fmt"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
)

// Purposes of the two standalone documents' single signatures (mandate
// schema proof.purpose, grade schema signature.purpose).
const (
	PurposeMandateIssuance = "mandate_issuance"
	PurposeGradeIssuance   = "grade_issuance"
)

// document describes a standalone document with one signature member: its
// name, what the member calls the signed time, and the fixed purpose.
type document struct {
	kind     string // for messages
	member   string // "proof" or "signature"
	timeName string // "created_at" or "signed_at"
	purpose  string
}

var (
	mandateDoc = document{"mandate", "proof", "created_at", PurposeMandateIssuance}
	gradeDoc   = document{"grade", "signature", "signed_at", PurposeGradeIssuance}
)

// content returns RFC 8785 of doc without d.member. Nothing else is
// removed: both documents are closed shapes with no content_hash or
// signatures array to exclude.
func (d document) content(doc map[string]any) ([]byte, error) {
	view := make(map[string]any, len(doc))
	for k, v := range doc {
		if k != d.member {
			view[k] = v
		}
	}
	b, err := canonical.Marshal(view)
	if err != nil {
		return nil, fmt.Errorf("signature: canonical form of %s %v: %w", d.kind, doc["id"], err)
	}
	return b, nil
}

// signed reads the signature member's protected values and returns the
// signing input and the encoded value. The purpose must be d.purpose: a
// proof made for another act is not this document's proof.
func (d document) signed(doc map[string]any) (input []byte, alg, value string, err error) {
	m, ok := doc[d.member].(map[string]any)
	if !ok {
		return nil, "", "", reason.Refuse(fmt.Sprintf("%s %v has no %s object", d.kind, doc["id"], d.member), reason.EvidenceSignatureInvalid)
	}
	for k := range m {
		switch k {
		case "key_id", "algorithm", "signature", "purpose", d.timeName:
		default:
			return nil, "", "", reason.Refuse(fmt.Sprintf("%s %s has member %q", d.kind, d.member, k), reason.EvidenceSignatureInvalid)
		}
	}
	v, err := stringMembers(m, d.kind+" "+d.member, "algorithm", "key_id", "purpose", d.timeName, "signature")
	if err != nil {
		return nil, "", "", err
	}
	if v[2] != d.purpose {
		return nil, "", "", reason.Refuse(fmt.Sprintf("%s %s purpose %q, want %q", d.kind, d.member, v[2], d.purpose), reason.EvidenceSignatureInvalid)
	}
	content, err := d.content(doc)
	if err != nil {
		return nil, "", "", err
	}
	header, err := protected(v[0], v[1], v[2], v[3])
	if err != nil {
		return nil, "", "", fmt.Errorf("signature: protected members: %w", err)
	}
	return join(content, header), v[0], v[4], nil
}

// sign sets doc[d.member], refusing to replace one already there: a
// document has exactly one signature, and overwriting it would silently
// change who issued it.
func (d document) sign(doc map[string]any, s Signer, at time.Time) error {
	if _, present := doc[d.member]; present {
		return fmt.Errorf("signature: %s %v already has a %s", d.kind, doc["id"], d.member)
	}
	content, err := d.content(doc)
	if err != nil {
		return err
	}
	stamp, err := timestamp(at)
	if err != nil {
		return err
	}
	e, err := makeEntry(content, s, d.purpose, stamp)
	if err != nil {
		return err
	}
	doc[d.member] = map[string]any{
		"key_id":    e["key_id"],
		"algorithm": e["algorithm"],
		d.timeName:  e["signed_at"],
		"purpose":   d.purpose,
		"signature": e["signature"],
	}
	return nil
}

func (d document) verify(doc map[string]any, pub crypto.PublicKey) error {
	input, alg, value, err := d.signed(doc)
	if err != nil {
		return err
	}
	if value == Placeholder {
		return fmt.Errorf("%s %v %s: %w: placeholder value", d.kind, doc["id"], d.member, ErrNotCheckable)
	}
	return verifyRaw(input, alg, value, pub, fmt.Sprintf("%s %v %s", d.kind, doc["id"], d.member))
}

// MandateSigningInput returns the bytes a mandate's proof covers: RFC 8785
// of the mandate without proof, ".", and RFC 8785 of {algorithm, key_id,
// purpose: "mandate_issuance", signed_at: proof.created_at} (decisions.md
// item 2; spec-map D5). A proof whose purpose is not mandate_issuance is
// refused.
func MandateSigningInput(mandate map[string]any) ([]byte, error) {
	input, _, _, err := mandateDoc.signed(mandate)
	return input, err
}

// SignMandate sets mandate's proof {key_id, algorithm, created_at, purpose:
// "mandate_issuance", signature}, signed by s at createdAt. The signer
// must be the key the mandate's issuer names (issuer.key_id): a proof by
// any other key is not the issuer's. A mandate that already has a proof is
// refused.
func SignMandate(mandate map[string]any, s Signer, createdAt time.Time) error {
	issuer, _ := mandate["issuer"].(map[string]any)
	if id, _ := issuer["key_id"].(string); id != s.KeyID() {
		return fmt.Errorf("signature: mandate %v names issuer key %q, signer is %q", mandate["id"], id, s.KeyID())
	}
	return mandateDoc.sign(mandate, s, createdAt)
}

// VerifyMandateProof verifies mandate's proof under pub, the key resolved
// for proof.key_id. It refuses a proof whose key_id differs from the
// issuer's key_id, a purpose other than mandate_issuance, and everything
// VerifyEntry refuses about the value. Failures are *reason.Refusal with
// A202-EVIDENCE-SIGNATURE-INVALID; the Placeholder value is
// ErrNotCheckable.
func VerifyMandateProof(mandate map[string]any, pub crypto.PublicKey) error {
	proof, _ := mandate["proof"].(map[string]any)
	issuer, _ := mandate["issuer"].(map[string]any)
	if proof != nil && issuer != nil && proof["key_id"] != issuer["key_id"] {
		return reason.Refuse(fmt.Sprintf("mandate %v proof key %v is not the issuer's key %v", mandate["id"], proof["key_id"], issuer["key_id"]), reason.EvidenceSignatureInvalid)
	}
	return mandateDoc.verify(mandate, pub)
}

// The grade's signing input is our choice. The conformance grade schema
// fixes the signature member's shape (key_id, algorithm, signature,
// signed_at, purpose "grade_issuance") but no text says which bytes it
// covers, as with the mandate proof (spec-map D5) and the value encoding
// (D6). We apply the envelope rule by analogy: the document without its
// signature member, ".", and the protected members. A verifier built on
// another reading will not accept our grades, and we will not accept its.

// GradeSigningInput returns the bytes a conformance grade's signature
// covers: RFC 8785 of the grade without signature, ".", and RFC 8785 of
// {algorithm, key_id, purpose: "grade_issuance", signed_at}.
func GradeSigningInput(grade map[string]any) ([]byte, error) {
	input, _, _, err := gradeDoc.signed(grade)
	return input, err
}

// SignGrade sets grade's signature {key_id, algorithm, signed_at, purpose:
// "grade_issuance", signature}, signed by s at signedAt. A grade that
// already has a signature is refused.
func SignGrade(grade map[string]any, s Signer, signedAt time.Time) error {
	return gradeDoc.sign(grade, s, signedAt)
}

// VerifyGradeSignature verifies grade's signature under pub, refusing a
// purpose other than grade_issuance, with the same refusals as
// VerifyMandateProof.
func VerifyGradeSignature(grade map[string]any, pub crypto.PublicKey) error {
	return gradeDoc.verify(grade, pub)
}
