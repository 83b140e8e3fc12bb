package envelope

import (
	"crypto"
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/keys"
)

// Key statuses a key_record may state (kernel schema keyRecordPayload).
const (
	KeyActive    = "active"
	KeySuspended = "suspended"
	KeyRevoked   = "revoked"
)

// KeyRecordSpec describes a key_record for NewKeyRecord.
type KeyRecordSpec struct {
	// KeyID is the key's key_id. It is also the key_record's id: the
	// record is the key's own entry, and signatures name it by this id.
	KeyID string
	// Controller is the organisation that controls the key
	// (payload.controller_organization_id).
	Controller string
	// PublicKey is a P-256 *ecdsa.PublicKey or an ed25519.PublicKey; its
	// JWK and algorithm are derived from it.
	PublicKey crypto.PublicKey
	// Status is active, suspended or revoked; empty means active.
	Status string
	// ValidFrom starts the key's validity interval.
	ValidFrom time.Time
	// ValidUntil ends it; the zero time writes null (no declared end).
	ValidUntil time.Time
	// CreatedBy is the agent that publishes the record for the controller,
	// under its mandate: the envelope's actor is always an agent, even for
	// a principal's key (the reference writes its key_records this way).
	CreatedBy Actor
	// CreatedAt is the record's created_at.
	CreatedAt time.Time
}

// NewKeyRecord returns an unsealed, unsigned version-1 key_record object
// whose payload is {controller_organization_id, algorithm, public_key_jwk,
// status, valid_from, valid_until}, with transaction_id null (keys outlive
// transactions). The controller's principal key signs it with purpose
// object_issuance (decisions.md item 14: an agent key is trusted when its
// key_record is signed by a pinned principal key of the same organisation).
func NewKeyRecord(s KeyRecordSpec) (map[string]any, error) {
	if !keys.ValidKeyID(s.KeyID) {
		return nil, fmt.Errorf("envelope: key_id %q is not a valid key_id", s.KeyID)
	}
	if !strings.HasPrefix(s.Controller, "org_") {
		return nil, fmt.Errorf("envelope: controller %q does not start with org_", s.Controller)
	}
	if s.Controller != s.CreatedBy.OrganizationID {
		return nil, fmt.Errorf("envelope: key_record for %s created by an agent of %s", s.Controller, s.CreatedBy.OrganizationID)
	}
	alg, err := keys.Algorithm(s.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("envelope: key_record %s: %w", s.KeyID, err)
	}
	jwk, err := keys.PublicJWK(s.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("envelope: key_record %s: %w", s.KeyID, err)
	}
	status := s.Status
	if status == "" {
		status = KeyActive
	}
	if status != KeyActive && status != KeySuspended && status != KeyRevoked {
		return nil, fmt.Errorf("envelope: key status %q is not active, suspended or revoked", status)
	}
	if s.ValidFrom.IsZero() {
		return nil, fmt.Errorf("envelope: key_record %s has no valid_from", s.KeyID)
	}
	var until any
	if !s.ValidUntil.IsZero() {
		if !s.ValidUntil.Truncate(time.Second).After(s.ValidFrom.Truncate(time.Second)) {
			return nil, fmt.Errorf("envelope: key_record %s valid_until is not after valid_from", s.KeyID)
		}
		until = Timestamp(s.ValidUntil)
	}
	return New(Spec{
		ObjectType: "key_record",
		ID:         s.KeyID,
		CreatedBy:  s.CreatedBy,
		CreatedAt:  s.CreatedAt,
		Payload: map[string]any{
			"controller_organization_id": s.Controller,
			"algorithm":                  alg,
			"public_key_jwk":             jwk,
			"status":                     status,
			"valid_from":                 Timestamp(s.ValidFrom),
			"valid_until":                until,
		},
	})
}
