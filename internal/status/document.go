package status

import (
	"fmt"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/pattern"
)

// Mandate status values (commercial mandate §9).
const (
	Active    = "active"
	Suspended = "suspended"
	Revoked   = "revoked"
	Expired   = "expired"
)

// MaxAge is the pilot bound on a status result's life (commercial mandate
// §3.3, §9): a document expires at most 60 s after as_of, and a cached one
// is never served more than 60 s after it was fetched.
const MaxAge = 60 * time.Second

// MaxSkew is how far in the future as_of may be before a document counts as
// future-dated. Timestamps are whole seconds and two hosts' clocks differ a
// little; 5 s absorbs both without letting a document live longer.
const MaxSkew = 5 * time.Second

// MaxDocumentSize bounds a status document. A document with a revocation
// record is well under 4 KiB.
const MaxDocumentSize = 64 << 10

// timestampLayout is the A202 timestamp form (decisions.md 4).
const timestampLayout = "2006-01-02T15:04:05Z"

var (
	timestampPattern = pattern.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	mandatePattern   = pattern.MustCompile(`^mnd_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
)

// Document is one status answer for one mandate.
type Document struct {
	// MandateID is the mandate the answer is about.
	MandateID string
	// Status is Active, Suspended, Revoked or Expired.
	Status string
	// AsOf is when the issuer read its store.
	AsOf time.Time
	// ExpiresAt is when the answer stops being usable.
	ExpiresAt time.Time
	// RevocationRecord is the latest signed revocation_record about the
	// mandate, or nil when it never changed status.
	RevocationRecord map[string]any
}

// Active reports whether the mandate may act under this answer.
func (d Document) Active() bool { return d.Status == Active }

// Usable returns nil when d may be relied on at instant now: as_of no more
// than MaxSkew in the future, now before expires_at, and expires_at no more
// than MaxAge after as_of. Otherwise it says why.
func (d Document) Usable(now time.Time) error {
	switch {
	case !d.ExpiresAt.After(d.AsOf):
		return fmt.Errorf("status for %s expires at %s, not after as_of %s", d.MandateID, stamp(d.ExpiresAt), stamp(d.AsOf))
	case d.ExpiresAt.Sub(d.AsOf) > MaxAge:
		return fmt.Errorf("status for %s lives %s, longer than %s", d.MandateID, d.ExpiresAt.Sub(d.AsOf), MaxAge)
	case d.AsOf.After(now.Add(MaxSkew)):
		return fmt.Errorf("status for %s is dated %s, in the future", d.MandateID, stamp(d.AsOf))
	case !now.Before(d.ExpiresAt):
		return fmt.Errorf("status for %s expired at %s", d.MandateID, stamp(d.ExpiresAt))
	}
	return nil
}

// Marshal returns the canonical (RFC 8785) bytes of d.
func (d Document) Marshal() ([]byte, error) {
	m := map[string]any{
		"mandate_id": d.MandateID,
		"status":     d.Status,
		"as_of":      stamp(d.AsOf),
		"expires_at": stamp(d.ExpiresAt),
	}
	if d.RevocationRecord != nil {
		m["revocation_record"] = d.RevocationRecord
	}
	return canonical.Marshal(m)
}

// Parse reads a status document strictly (see the package documentation
// for its shape) and checks that it is internally consistent: a known
// status, whole-second UTC timestamps, and a revocation_record, if any,
// that is about this mandate and states this status. It does not check
// freshness; that is Usable's job.
func Parse(data []byte) (Document, error) {
	obj, err := canonical.DecodeObject(data)
	if err != nil {
		return Document{}, fmt.Errorf("status document: %w", err)
	}
	var d Document
	for name, v := range obj {
		switch name {
		case "mandate_id":
			s, _ := v.(string)
			if !mandatePattern.MatchString(s) {
				return Document{}, fmt.Errorf("status document: mandate_id is not a mandate identifier")
			}
			d.MandateID = s
		case "status":
			s, _ := v.(string)
			switch s {
			case Active, Suspended, Revoked, Expired:
			default:
				return Document{}, fmt.Errorf("status document: status %q is not a mandate status", s)
			}
			d.Status = s
		case "as_of", "expires_at":
			t, err := parseStamp(v)
			if err != nil {
				return Document{}, fmt.Errorf("status document: %s: %w", name, err)
			}
			if name == "as_of" {
				d.AsOf = t
			} else {
				d.ExpiresAt = t
			}
		case "revocation_record":
			if v == nil {
				continue
			}
			rec, ok := v.(map[string]any)
			if !ok {
				return Document{}, fmt.Errorf("status document: revocation_record is not an object")
			}
			d.RevocationRecord = rec
		default:
			return Document{}, fmt.Errorf("status document: unexpected member %q", name)
		}
	}
	for _, req := range []string{"mandate_id", "status", "as_of", "expires_at"} {
		if _, ok := obj[req]; !ok {
			return Document{}, fmt.Errorf("status document: missing %s", req)
		}
	}
	if d.RevocationRecord != nil {
		if err := recordAgrees(d.RevocationRecord, d.MandateID, d.Status); err != nil {
			return Document{}, fmt.Errorf("status document: %w", err)
		}
	}
	return d, nil
}

// recordAgrees checks that a carried revocation_record is about mandateID
// and, unless the mandate has simply run out (expired), states status. A
// document saying "active" beside a record saying "revoked" is two answers,
// and two answers are none.
func recordAgrees(rec map[string]any, mandateID, status string) error {
	if t, _ := rec["object_type"].(string); t != "revocation_record" {
		return fmt.Errorf("revocation_record has object_type %q", rec["object_type"])
	}
	p, _ := rec["payload"].(map[string]any)
	if p == nil {
		return fmt.Errorf("revocation_record has no payload")
	}
	if st, _ := p["subject_type"].(string); st != "mandate" {
		return fmt.Errorf("revocation_record is about a %q, not a mandate", p["subject_type"])
	}
	if id, _ := p["subject_id"].(string); id != mandateID {
		return fmt.Errorf("revocation_record is about %q, not %s", p["subject_id"], mandateID)
	}
	if status == Expired {
		return nil
	}
	if s, _ := p["status"].(string); s != status {
		return fmt.Errorf("revocation_record states %q, the document %q", p["status"], status)
	}
	return nil
}

func parseStamp(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok || !timestampPattern.MatchString(s) {
		return time.Time{}, fmt.Errorf("not a YYYY-MM-DDTHH:MM:SSZ timestamp")
	}
	return time.Parse(timestampLayout, s)
}

func stamp(t time.Time) string { return t.UTC().Format(timestampLayout) }
