// Package envelope builds A202 envelope objects (canonical model §3).
//
// Every shared object wears the same envelope: spec_version, a type-prefixed
// id, object_type, version, created_at, created_by, transaction_id,
// previous_version_id, content_hash, signatures and a payload. This package
// makes the parts party mints itself and gets them byte-exact:
//
//   - NewID draws an identifier: a registered prefix and 24 lowercase hex
//     characters from crypto/rand (decisions.md item 4).
//   - Timestamp and ParseTimestamp write and strictly read the one
//     timestamp form party uses, YYYY-MM-DDTHH:MM:SSZ.
//   - New assembles a version-1 object as a decoded JSON value
//     (map[string]any), the form package canonical hashes and package
//     signature signs.
//   - Seal sets content_hash once the object is complete; signing comes
//     after (package signature), and neither touches the hashed bytes.
//   - NewKeyRecord builds the key_record that publishes a public key.
//
// The typical sequence is New, Seal, then signature.Sign once per signer.
// Validation of objects received from a peer is not here; it is the
// schema and gate packages' work.
package envelope

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
)

// SpecVersion is the envelope spec_version of A202 commercial objects.
const SpecVersion = "a202-commercial/0.1"

// prefixes are the registered identifier prefixes (canonical model §3
// table), plus chn_, which the kernel schema uses for a principal's
// contact_ref.
var prefixes = map[string]bool{
	"org": true, "agt": true, "prn": true, "mnd": true, "cap": true,
	"int": true, "inv": true, "ina": true, "txn": true, "ses": true,
	"act": true, "off": true, "acc": true, "agr": true, "cmt": true,
	"obl": true, "obr": true, "prf": true, "exc": true, "dsp": true,
	"det": true, "evd": true, "evt": true, "pol": true, "apr": true,
	"stl": true, "adp": true, "clr": true, "key": true, "rev": true,
	"req": true, "chn": true,
}

// typePrefixes maps an object type to its identifier prefix. The types the
// table gives no prefix (external_identity_assertion, delegation,
// qualification_requirement, evidence_manifest, audit_bundle) are absent:
// party does not mint them.
var typePrefixes = map[string]string{
	"organization": "org", "agent": "agt", "principal": "prn",
	"capability": "cap", "intent": "int", "counterparty_invitation": "inv",
	"invitation_acceptance": "ina", "action_envelope": "act",
	"offer": "off", "acceptance": "acc", "agreement": "agr",
	"commitment": "cmt", "obligation": "obl", "obligation_response": "obr",
	"performance_event": "prf", "exception": "exc", "dispute": "dsp",
	"determination": "det", "evidence": "evd", "transaction_event": "evt",
	"policy_decision": "pol", "approval": "apr",
	"settlement_instruction": "stl", "adapter_receipt": "adp",
	"clarification": "clr", "key_record": "key",
	"revocation_record": "rev", "commercial_request": "req",
}

// transactionFree are the object types whose transaction_id may be null
// (kernel schema allOf); every other type is transaction-bound.
var transactionFree = map[string]bool{
	"organization": true, "agent": true, "principal": true,
	"external_identity_assertion": true, "key_record": true,
	"delegation": true, "revocation_record": true, "capability": true,
	"intent": true,
}

// PrefixFor returns the registered prefix (without underscore) of
// objectType's identifiers, and false for a type the table gives none.
func PrefixFor(objectType string) (string, bool) {
	p, ok := typePrefixes[objectType]
	return p, ok
}

// TransactionBound reports whether objectType requires a non-null
// transaction_id (kernel schema allOf).
func TransactionBound(objectType string) bool {
	return !transactionFree[objectType]
}

// NewID returns a fresh identifier: the registered prefix, "_", and 24
// lowercase hex characters (96 bits) from crypto/rand. prefix may be given
// as "off" or "off_". The random part keeps identifiers opaque (canonical
// model §3: no names, emails or secrets) and unguessable.
func NewID(prefix string) (string, error) {
	p := strings.TrimSuffix(prefix, "_")
	if !prefixes[p] {
		return "", fmt.Errorf("envelope: %q is not a registered identifier prefix", prefix)
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("envelope: draw identifier: %w", err)
	}
	return p + "_" + hex.EncodeToString(b[:]), nil
}

// timestampLayout is the only timestamp form party writes and reads:
// UTC, whole seconds, upper-case T and Z (decisions.md item 4).
const timestampLayout = "2006-01-02T15:04:05Z"

// Timestamp formats t as YYYY-MM-DDTHH:MM:SSZ in UTC, dropping any
// fraction of a second (truncating, so a time is never moved forward).
func Timestamp(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(timestampLayout)
}

// ParseTimestamp reads a YYYY-MM-DDTHH:MM:SSZ timestamp. It refuses every
// other RFC 3339 spelling (fractional seconds, numeric offsets, lower-case
// t or z, a space separator) and impossible dates, so each instant has one
// accepted spelling and timestamps compare as strings.
func ParseTimestamp(s string) (time.Time, error) {
	if len(s) != len(timestampLayout) {
		return time.Time{}, fmt.Errorf("envelope: timestamp %q is not YYYY-MM-DDTHH:MM:SSZ", s)
	}
	for i := 0; i < len(s); i++ {
		c, l := s[i], timestampLayout[i]
		digit := c >= '0' && c <= '9'
		if (l >= '0' && l <= '9') != digit || !digit && c != l {
			return time.Time{}, fmt.Errorf("envelope: timestamp %q is not YYYY-MM-DDTHH:MM:SSZ", s)
		}
	}
	t, err := time.Parse(timestampLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("envelope: timestamp %q: %w", s, err)
	}
	return t, nil
}

// Actor is the created_by of an object: the organisation, the agent acting
// for it, and the mandate the agent acted under.
type Actor struct {
	OrganizationID string
	AgentID        string
	MandateID      string
}

func (a Actor) value() (map[string]any, error) {
	for _, c := range []struct{ name, v, prefix string }{
		{"organization_id", a.OrganizationID, "org_"},
		{"agent_id", a.AgentID, "agt_"},
		{"mandate_id", a.MandateID, "mnd_"},
	} {
		if !strings.HasPrefix(c.v, c.prefix) {
			return nil, fmt.Errorf("envelope: created_by.%s %q does not start with %s", c.name, c.v, c.prefix)
		}
	}
	return map[string]any{
		"organization_id": a.OrganizationID,
		"agent_id":        a.AgentID,
		"mandate_id":      a.MandateID,
	}, nil
}

// Spec describes a version-1 object for New.
type Spec struct {
	// ObjectType is the kernel object_type, e.g. "offer".
	ObjectType string
	// ID is the object's identifier; empty draws a fresh one with the
	// type's prefix. It must carry the type's prefix when given.
	ID string
	// CreatedBy is the acting agent, its organisation and its mandate.
	CreatedBy Actor
	// TransactionID is the txn_ identifier; empty writes null, which only
	// the transaction-free types allow.
	TransactionID string
	// CreatedAt is written with Timestamp.
	CreatedAt time.Time
	// Payload is the object-specific content, already in decoded JSON
	// form. New does not copy it; the caller hands it over.
	Payload map[string]any
	// PreviousVersionID and Version make the object a later version of
	// another (canonical model §3: version rises by one and
	// previous_version_id names the version superseded). Empty and zero
	// make a first version.
	PreviousVersionID string
	Version           int
}

// New returns a version-1 envelope object: spec_version, id, object_type,
// version 1 (as json.Number, the form canonical.Decode gives, so built and
// received objects look alike to every consumer), created_at, created_by, transaction_id, previous_version_id
// null, payload, and an empty signatures array. content_hash is absent
// until Seal. The payload's shape is not checked here: the schema package
// does that for every object, ours included.
func New(s Spec) (map[string]any, error) {
	prefix, ok := PrefixFor(s.ObjectType)
	if !ok {
		return nil, fmt.Errorf("envelope: object type %q has no registered identifier prefix", s.ObjectType)
	}
	id := s.ID
	if id == "" {
		var err error
		if id, err = NewID(prefix); err != nil {
			return nil, err
		}
	} else if !strings.HasPrefix(id, prefix+"_") {
		return nil, fmt.Errorf("envelope: id %q of a %s must start with %s_", id, s.ObjectType, prefix)
	}
	by, err := s.CreatedBy.value()
	if err != nil {
		return nil, err
	}
	var txn any
	switch {
	case s.TransactionID != "":
		if !strings.HasPrefix(s.TransactionID, "txn_") {
			return nil, fmt.Errorf("envelope: transaction_id %q does not start with txn_", s.TransactionID)
		}
		txn = s.TransactionID
	case TransactionBound(s.ObjectType):
		return nil, fmt.Errorf("envelope: a %s is transaction-bound and needs a transaction_id", s.ObjectType)
	}
	if s.CreatedAt.IsZero() {
		return nil, errors.New("envelope: created_at is not set")
	}
	if s.Payload == nil {
		return nil, errors.New("envelope: payload is not set")
	}
	version, prev := json.Number("1"), any(nil)
	if s.PreviousVersionID != "" {
		if s.Version < 2 {
			return nil, fmt.Errorf("envelope: a later version of %s needs a version above 1", s.PreviousVersionID)
		}
		version, prev = json.Number(strconv.Itoa(s.Version)), s.PreviousVersionID
	}
	return map[string]any{
		"spec_version":        SpecVersion,
		"id":                  id,
		"object_type":         s.ObjectType,
		"version":             version,
		"created_at":          Timestamp(s.CreatedAt),
		"created_by":          by,
		"transaction_id":      txn,
		"previous_version_id": prev,
		"payload":             s.Payload,
		"signatures":          []any{},
	}, nil
}

// Seal sets obj's content_hash: the SHA-256 of its canonical bytes without
// content_hash, signatures and kernel_annotations (canonical model §4).
// Sealing twice gives the same hash; any later change to the hashed members
// needs a new Seal and invalidates the signatures made before it.
func Seal(obj map[string]any) error {
	_, err := SealInput(obj)
	return err
}

// SealInput is Seal, returning the bytes it hashed (canonical.HashInput of
// obj, which Seal does not change) for a signer to sign over without
// encoding obj again (signature.SignOver).
func SealInput(obj map[string]any) ([]byte, error) {
	in, err := canonical.HashInput(obj)
	if err != nil {
		return nil, fmt.Errorf("envelope: seal %v: %w", obj["id"], err)
	}
	obj["content_hash"] = canonical.SHA256Hex(in)
	return in, nil
}
