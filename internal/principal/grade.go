package principal

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

// IssueGrade signs a conformance grade about a counterparty's
// implementation as this organisation's principal (signature purpose
// grade_issuance; conformance grades §4) and keeps it, with the
// assessment report its determination_hash names. doc is an unsigned
// grade (grade.Build); it is signed only about another organisation, and
// kept only once grade.Check accepts it signed, as any relying party would
// read it. The signed grade is returned.
func (s *Surface) IssueGrade(ctx context.Context, doc map[string]any, report []byte) (map[string]any, error) {
	cfg := s.o.Config()
	subject, _ := doc["subject"].(map[string]any)
	about, _ := subject["organization_id"].(string)
	if about == "" || about == cfg.OrganizationID {
		return nil, fmt.Errorf("principal: a grade is issued about another organisation's implementation, not about %q (a self-run result is not a grade)", about)
	}
	ref, _ := doc["determination_ref"].(map[string]any)
	if ref["determination_hash"] != canonical.SHA256Hex(report) {
		return nil, fmt.Errorf("principal: the grade's determination_hash is not the hash of the assessment report it is issued on")
	}
	now := s.o.Clock()
	if err := signature.SignGrade(doc, s.signer(), now); err != nil {
		return nil, err
	}
	if j := grade.Check(doc, grade.PrincipalKeys(ctx, s.o), now); !j.Accepted() {
		return nil, fmt.Errorf("principal: the grade does not check once signed: %w", j.Err())
	}
	body, err := canonical.Marshal(doc)
	if err != nil {
		return nil, err
	}
	id, _ := ref["determination_id"].(string)
	issued, _ := doc["issued_at"].(string)
	expires, _ := doc["expires_at"].(string)
	if err := s.o.Store.PutGrade(ctx, store.Grade{DeterminationID: id, SubjectOrg: about, IssuerOrg: cfg.OrganizationID,
		IssuedAt: issued, ExpiresAt: expires, Body: body, Assessment: report}); err != nil {
		return nil, err
	}
	s.o.Log.Info("grade issued", "about", about, "determination_id", id)
	return doc, nil
}

// SetMinimumGrade sets (or, with an empty minimum, clears) the minimum
// grade one of this organisation's mandates requires of the counterparty
// it acts towards: a local, deny-only policy (package grade).
func (s *Surface) SetMinimumGrade(ctx context.Context, mandateID string, min grade.Minimum) error {
	rec, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return err
	}
	if rec.Origin != "local" {
		return fmt.Errorf("principal: mandate %s is not one of this organisation's", mandateID)
	}
	if err := s.o.Store.SetMinimumGrade(ctx, mandateID, min); err != nil {
		return err
	}
	s.o.Log.Info("mandate policy set", "mandate_id", mandateID, "minimum_grade", min.String())
	return nil
}
