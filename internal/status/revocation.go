package status

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
	"github.com/partyd/party/internal/signature"
)

// RevocationSpec describes one status change (commercial mandate §9;
// kernel schema revocationRecordPayload).
type RevocationSpec struct {
	// SubjectType is "mandate", "agent" or "key".
	SubjectType string
	// SubjectID is the mnd_, agt_ or key_ identifier, matching SubjectType.
	SubjectID string
	// Status is the new status: Active (reinstatement after a
	// suspension), Suspended or Revoked.
	Status string
	// EffectiveAt is when the change takes effect.
	EffectiveAt time.Time
	// Reason says why, in at most 512 characters of plain text. It is
	// rendered as data and travels to relying parties in the status
	// document, so it names no person and no private term.
	Reason string
	// CreatedBy is the envelope's actor. The envelope names an agent and a
	// mandate even for a principal's act (kernel schema actorRef): for a
	// mandate's change, the mandate's subject agent and the mandate itself.
	CreatedBy envelope.Actor
	// CreatedAt is the record's created_at and its signature's signed_at.
	CreatedAt time.Time
}

var subjectPrefix = map[string]string{"mandate": "mnd_", "agent": "agt_", "key": "key_"}

// NewRevocationRecord builds the signed revocation_record for spec, signed
// by signer (the issuing principal's key for a mandate, the controlling
// principal's for an agent or key) with purpose object_issuance. The record
// is the audit trail of the change; relying parties act on the status
// endpoint, which carries the latest record with the status it states.
func NewRevocationRecord(spec RevocationSpec, signer signature.Signer) (map[string]any, error) {
	if signer == nil {
		return nil, errors.New("status: NewRevocationRecord needs a signer")
	}
	prefix, ok := subjectPrefix[spec.SubjectType]
	if !ok {
		return nil, fmt.Errorf("status: subject_type %q is not mandate, agent or key", spec.SubjectType)
	}
	if !strings.HasPrefix(spec.SubjectID, prefix) {
		return nil, fmt.Errorf("status: subject %q is not a %s identifier", spec.SubjectID, spec.SubjectType)
	}
	switch spec.Status {
	case Active, Suspended, Revoked:
	default:
		return nil, fmt.Errorf("status: %q is not active, suspended or revoked", spec.Status)
	}
	if n := utf8.RuneCountInString(spec.Reason); n < 1 || n > 512 {
		return nil, fmt.Errorf("status: reason must be 1 to 512 characters, got %d", n)
	}
	created := spec.CreatedAt.UTC().Truncate(time.Second)
	obj, err := envelope.New(envelope.Spec{
		ObjectType: "revocation_record",
		CreatedBy:  spec.CreatedBy,
		CreatedAt:  created,
		Payload: map[string]any{
			"subject_type": spec.SubjectType,
			"subject_id":   spec.SubjectID,
			"status":       spec.Status,
			"effective_at": envelope.Timestamp(spec.EffectiveAt),
			"reason":       spec.Reason,
		},
	})
	if err != nil {
		return nil, err
	}
	if err := signature.Issue(obj, signer, created); err != nil {
		return nil, err
	}
	if err := schema.ValidateEnvelope(obj); err != nil {
		return nil, reason.Refuse("revocation_record: " + err.Error())
	}
	return obj, nil
}
