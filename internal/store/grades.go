package store

// Conformance grades and local mandate policies (migration 9).
//
//	CREATE TABLE grades (
//	  determination_id TEXT PRIMARY KEY,  -- the grade's determination_ref id
//	  subject_org      TEXT NOT NULL,     -- the organisation graded
//	  issuer_org       TEXT NOT NULL,     -- the organisation whose principal signed
//	  issued_at        TEXT NOT NULL,     -- RFC 3339, as the grade states it
//	  expires_at       TEXT NOT NULL,
//	  body             BLOB NOT NULL,     -- the grade document, canonical bytes
//	  assessment       BLOB,              -- the assessment it was issued on (grades this instance issued)
//	  stored_at        TEXT NOT NULL
//	);
//	CREATE TABLE mandate_policies (
//	  mandate_id    TEXT PRIMARY KEY,     -- one of this organisation's mandates
//	  minimum_grade TEXT NOT NULL,        -- JSON {dimension: band}
//	  set_at        TEXT NOT NULL
//	);
//
// A grade is stored only after its signature verified (package grade); a
// grade is never edited or removed: a later grade about the same
// organisation is a new row, and the record shows the sequence rather than
// the best result (conformance grades §4.2 item 4).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Grade is one grades row.
type Grade struct {
	DeterminationID string
	SubjectOrg      string
	IssuerOrg       string
	IssuedAt        string
	ExpiresAt       string
	Body            []byte
	Assessment      []byte
}

// PutGrade stores a grade. The same bytes again are a no-op; other bytes
// under the same determination id are ErrConflict.
func (s *Store) PutGrade(ctx context.Context, g Grade) error {
	var assessment any
	if len(g.Assessment) > 0 {
		assessment = g.Assessment
	}
	res, err := s.exec(ctx, `INSERT INTO grades(determination_id, subject_org, issuer_org, issued_at, expires_at, body, assessment, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, g.DeterminationID, g.SubjectOrg, g.IssuerOrg, g.IssuedAt, g.ExpiresAt, g.Body, assessment, now())
	if err != nil {
		return fmt.Errorf("store: put grade %s: %w", g.DeterminationID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var held []byte
	if err := s.queryRow(ctx, `SELECT body FROM grades WHERE determination_id = ?`, g.DeterminationID).Scan(&held); err != nil {
		return fmt.Errorf("store: grade %s: %w", g.DeterminationID, err)
	}
	if string(held) != string(g.Body) {
		return fmt.Errorf("%w: grade %s is held with other bytes", ErrConflict, g.DeterminationID)
	}
	return nil
}

// GradesAbout returns the grades held about an organisation ("" for every
// one), oldest issued first.
func (s *Store) GradesAbout(ctx context.Context, org string) ([]Grade, error) {
	rows, err := s.query(ctx, `SELECT determination_id, subject_org, issuer_org, issued_at, expires_at, body, assessment FROM grades
		WHERE ? = '' OR subject_org = ? ORDER BY issued_at, stored_at, determination_id`, org, org)
	if err != nil {
		return nil, fmt.Errorf("store: grades: %w", err)
	}
	return collect(rows, func(row rowScanner) (Grade, error) {
		var g Grade
		if err := row.Scan(&g.DeterminationID, &g.SubjectOrg, &g.IssuerOrg, &g.IssuedAt, &g.ExpiresAt, &g.Body, &g.Assessment); err != nil {
			return g, fmt.Errorf("store: grades: %w", err)
		}
		return g, nil
	})
}

// SetMinimumGrade sets the minimum grade a mandate's local policy requires
// of the counterparty, by dimension; an empty map clears it.
func (s *Store) SetMinimumGrade(ctx context.Context, mandateID string, min map[string]int) error {
	if len(min) == 0 {
		_, err := s.exec(ctx, `DELETE FROM mandate_policies WHERE mandate_id = ?`, mandateID)
		return err
	}
	b, err := json.Marshal(min)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO mandate_policies(mandate_id, minimum_grade, set_at) VALUES (?, ?, ?)
		ON CONFLICT(mandate_id) DO UPDATE SET minimum_grade = excluded.minimum_grade, set_at = excluded.set_at`, mandateID, string(b), now())
	return err
}

// MinimumGrade returns the minimum grade a mandate's local policy
// requires, or nil when it sets none. The map is shared with later
// callers: read it, never change it.
//
// Every act of a mandate reads its policy (grade.Policy), so what is read,
// a policy or none, is kept under the KeyObjectsVersion read before it,
// which any process's change to a policy moves (migration 15), as
// GetMandate keeps mandates.
func (s *Store) MinimumGrade(ctx context.Context, mandateID string) (map[string]int, error) {
	v, err := s.KeyObjectsVersion(ctx)
	if err != nil {
		return nil, err
	}
	if min, ok := s.minGrades.get(v, mandateID); ok {
		return min, nil
	}
	var raw string
	err = s.queryRow(ctx, `SELECT minimum_grade FROM mandate_policies WHERE mandate_id = ?`, mandateID).Scan(&raw)
	var min map[string]int
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("store: mandate policy %s: %w", mandateID, err)
	default:
		if err := json.Unmarshal([]byte(raw), &min); err != nil {
			return nil, fmt.Errorf("store: mandate policy %s: %w", mandateID, err)
		}
	}
	s.minGrades.put(v, mandateID, min)
	return min, nil
}
