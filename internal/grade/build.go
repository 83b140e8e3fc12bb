package grade

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/store"
)

// MaxValidity is the longest a grade runs (conformance grades §4: 12
// months, or the next minor version if that comes first).
const MaxValidity = 365 * 24 * time.Hour

// Spec is what a grade is built from.
type Spec struct {
	// Implementation names the implementation assessed, as the assessor
	// knows it.
	Implementation string
	Assessment     Assessment
	IssuedAt       time.Time
	// ValidFor is how long the grade runs; at most twelve months.
	ValidFor time.Duration
}

// Build returns the unsigned grade document of an assessment (see the
// package documentation) and the assessment report its
// determination_hash is the hash of.
func Build(s Spec) (doc map[string]any, report []byte, err error) {
	a := s.Assessment
	if a.Scope != Scope || a.Subject == "" || len(a.Results) == 0 {
		return nil, nil, fmt.Errorf("grade: an assessment of %q under %q with %d results is not one to grade", a.Subject, a.Scope, len(a.Results))
	}
	if s.ValidFor <= 0 || s.IssuedAt.AddDate(0, 12, 0).Before(s.IssuedAt.Add(s.ValidFor)) {
		return nil, nil, fmt.Errorf("grade: a grade runs for more than nothing and at most 12 months, not %s", s.ValidFor)
	}
	if s.Implementation == "" {
		return nil, nil, fmt.Errorf("grade: name the implementation assessed")
	}
	report, err = a.Report()
	if err != nil {
		return nil, nil, err
	}
	id, err := envelope.NewID("det")
	if err != nil {
		return nil, nil, err
	}
	dims := map[string]any{}
	for _, d := range DimensionNames {
		band, assessed := a.Band(d)
		if !assessed {
			dims[d] = nil // unassessed, which is not a pass (conformance grades §4.1)
			continue
		}
		from := []any{}
		for _, f := range a.Established(d) {
			from = append(from, f)
		}
		dims[d] = map[string]any{"band": band, "established_from": from}
	}
	// The carriers the cases travelled over all activate the one A202
	// extension, whose URI is what a grade's transports name.
	transports := []any{}
	if len(a.Carriers) > 0 {
		transports = append(transports, delivery.ExtensionURI)
	}
	profiles := make([]any, 0, len(a.Profiles))
	for _, p := range a.Profiles {
		profiles = append(profiles, p)
	}
	issued := s.IssuedAt.UTC().Truncate(time.Second)
	doc = map[string]any{
		"spec_version":      "a202-commercial/0.1",
		"subject":           map[string]any{"organization_id": a.Subject, "implementation": s.Implementation},
		"level":             "peer_assessed",
		"dimensions":        dims,
		"scope":             map[string]any{"role_scopes": []any{Scope}, "profiles": profiles, "transports": transports},
		"held_out_coverage": nil,
		"issued_at":         envelope.Timestamp(issued),
		"expires_at":        envelope.Timestamp(issued.Add(s.ValidFor)),
		"status":            "active",
		"determination_ref": map[string]any{"determination_id": id, "determination_hash": canonical.SHA256Hex(report)},
	}
	return doc, report, nil
}

// Check judges a grade at now, its signature verified under the keys
// resolves (see the package documentation).
func Check(doc map[string]any, keys gate.GradeKeyResolver, now time.Time) gate.Judgment {
	return gate.Grade(doc, gate.Options{Now: now, GradeKeys: keys})
}

// PrincipalKeys is the key resolver Check takes over an organisation's key
// resolution (org.Org): a grade is relied on only when signed by a
// principal key, this organisation's own or one a pinned peer file
// carries, that is active.
func PrincipalKeys(ctx context.Context, r authority.KeyResolver) gate.GradeKeyResolver {
	return func(keyID string) (gate.GradeKey, bool) {
		k, err := r.ResolveKey(ctx, keyID)
		if err != nil || !strings.HasPrefix(k.HolderID, "prn_") || k.Status != envelope.KeyActive {
			return gate.GradeKey{}, false
		}
		return gate.GradeKey{Public: k.Public, OrganizationID: k.OrganizationID}, true
	}
}

// Import checks a grade received from its issuer (Check at now, under
// keys) and keeps it, so that a mandate's minimum-grade policy can read
// it. It returns the grade and its issuer's organisation.
func Import(ctx context.Context, st *store.Store, keys gate.GradeKeyResolver, body []byte, now time.Time) (map[string]any, string, error) {
	doc, err := canonical.DecodeObject(body)
	if err != nil {
		return nil, "", fmt.Errorf("grade: %w", err)
	}
	if j := Check(doc, keys, now); !j.Accepted() {
		return nil, "", j.Err()
	}
	sig, _ := doc["signature"].(map[string]any)
	kid, _ := sig["key_id"].(string)
	k, _ := keys(kid)
	subject, _ := doc["subject"].(map[string]any)
	ref, _ := doc["determination_ref"].(map[string]any)
	canon, err := canonical.Marshal(doc)
	if err != nil {
		return nil, "", err
	}
	g := store.Grade{DeterminationID: str(ref["determination_id"]), SubjectOrg: str(subject["organization_id"]), IssuerOrg: k.OrganizationID,
		IssuedAt: str(doc["issued_at"]), ExpiresAt: str(doc["expires_at"]), Body: canon}
	if err := st.PutGrade(ctx, g); err != nil {
		return nil, "", err
	}
	return doc, k.OrganizationID, nil
}

func str(v any) string { s, _ := v.(string); return s }
