package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/partyd/party/internal/canonical"
)

// Mandate statuses (commercial mandate §9). Expiry is computed from the
// validity interval, never stored.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended"
	StatusRevoked   = "revoked"
)

// MandateRecord is a stored mandate with its local status.
type MandateRecord struct {
	ID             string
	OrganizationID string
	SubjectAgentID string
	Body           []byte
	Status         string
	StatusChanged  string
	Origin         string
}

// PutMandate stores a mandate document's canonical bytes with status active.
// Storing the same bytes again is a no-op; other bytes under the same id is
// ErrConflict: a mandate id is immutable (mandate §3).
func (s *Store) PutMandate(ctx context.Context, body []byte, origin string) error {
	doc, err := canonical.DecodeObject(body)
	if err != nil {
		return err
	}
	canon, err := canonical.Marshal(doc)
	if err != nil || string(canon) != string(body) {
		return fmt.Errorf("store: mandate bytes are not in canonical form")
	}
	id, _ := doc["id"].(string)
	org, _ := doc["represented_organization_id"].(string)
	var agent any
	if subj, ok := doc["subject"].(map[string]any); ok {
		if a, ok := subj["agent_id"].(string); ok {
			agent = a
		}
	}
	if id == "" || org == "" {
		return fmt.Errorf("store: mandate lacks id or represented_organization_id")
	}
	t := now()
	res, err := s.exec(ctx, `INSERT INTO mandates(id, organization_id, subject_agent_id, body, status, status_changed, origin, stored_at)
		VALUES (?, ?, ?, ?, 'active', ?, ?, ?) ON CONFLICT DO NOTHING`, id, org, agent, body, t, origin, t)
	if err != nil {
		return fmt.Errorf("store: put mandate %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var held []byte
	if err := s.queryRow(ctx, `SELECT body FROM mandates WHERE id = ?`, id).Scan(&held); err != nil {
		return err
	}
	if string(held) != string(body) {
		return fmt.Errorf("%w: mandate %s is held with other bytes", ErrConflict, id)
	}
	return nil
}

// GetMandate returns a stored mandate. Its Body is shared with later
// callers: read it, never change it.
//
// An act reads the same few mandates again and again (its creator's, the
// counterparty's, the chains they were delegated from: 37 reads a
// formation, both sides). A mandate read is therefore kept under the
// KeyObjectsVersion read before it, which any process's change to a
// mandate moves (migration 14): a kept row is the stored one for as long
// as the number stays. Under WithKeyVersionMemo the number itself is read
// once an operation, between its commits. The number is shared with the
// key records: a mandate stored also has the key-record caches read again
// (KeyObjectsCache), a few records' reads once per mandate, which an
// instance stores at most once a transaction.
//
// A mandate not held is kept too, as a record with no ID: a working set
// names the mandates its objects were made under, and one instance holds
// only some of them (three reads a formation found nothing). Storing a
// mandate moves the number, so the absence is read again after it.
func (s *Store) GetMandate(ctx context.Context, id string) (MandateRecord, error) {
	v, err := s.KeyObjectsVersion(ctx)
	if err != nil {
		return MandateRecord{}, err
	}
	if m, ok := s.mandates.get(v, id); ok {
		if m.ID == "" {
			return MandateRecord{}, fmt.Errorf("%w: mandate %s", ErrNotFound, id)
		}
		return m, nil
	}
	var m MandateRecord
	var agent sql.NullString
	err = s.queryRow(ctx, `SELECT id, organization_id, subject_agent_id, body, status, status_changed, origin FROM mandates WHERE id = ?`, id).
		Scan(&m.ID, &m.OrganizationID, &agent, &m.Body, &m.Status, &m.StatusChanged, &m.Origin)
	if errors.Is(err, sql.ErrNoRows) {
		s.mandates.put(v, id, MandateRecord{})
		return MandateRecord{}, fmt.Errorf("%w: mandate %s", ErrNotFound, id)
	}
	if err != nil {
		return MandateRecord{}, err
	}
	m.SubjectAgentID = agent.String
	s.mandates.put(v, m.ID, m)
	return m, nil
}

// versionCache holds rows read under one KeyObjectsVersion, by key: the
// mandates (GetMandate) and their local policies (MinimumGrade), which
// any process's change moves the number for (migrations 14 and 15).
type versionCache[T any] struct {
	mu      sync.Mutex
	version int64
	rows    map[string]T
}

// maxCachedRows bounds each cache; a full one starts again empty.
const maxCachedRows = 1024

func (c *versionCache[T]) get(version int64, key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.rows[key]
	return v, ok && c.version == version
}

func (c *versionCache[T]) put(version int64, key string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows != nil && version < c.version {
		return // read under a number already superseded (an operation's memo): keep the newer rows
	}
	if c.rows == nil || c.version != version || len(c.rows) >= maxCachedRows {
		c.rows, c.version = map[string]T{}, version
	}
	c.rows[key] = v
}

// Mandates returns every stored mandate, optionally only those of one origin.
func (s *Store) Mandates(ctx context.Context, origin string) ([]MandateRecord, error) {
	rows, err := s.query(ctx, `SELECT id, organization_id, subject_agent_id, body, status, status_changed, origin FROM mandates
		WHERE ? = '' OR origin = ? ORDER BY rowid`, origin, origin)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row rowScanner) (MandateRecord, error) {
		var m MandateRecord
		var agent sql.NullString
		err := row.Scan(&m.ID, &m.OrganizationID, &agent, &m.Body, &m.Status, &m.StatusChanged, &m.Origin)
		m.SubjectAgentID = agent.String
		return m, err
	})
}

// ChangeMandateStatus moves a mandate from one status to another and stores
// the signed revocation record that announces it, in one transaction, so
// that the status endpoint never shows a status without its record.
func (s *Store) ChangeMandateStatus(ctx context.Context, id, from, to string, record []byte) error {
	if from == StatusRevoked {
		return fmt.Errorf("store: mandate %s is revoked; revocation is final", id)
	}
	return s.Update(ctx, func(tx *Txn) error {
		info, err := putObject(tx, record, "local")
		if err != nil {
			return err
		}
		res, err := tx.exec(`UPDATE mandates SET status = ?, status_changed = ?, revocation_id = ? WHERE id = ? AND status = ?`,
			to, now(), info.ID, id, from)
		if err != nil {
			return err
		}
		return s.mandateStatusMoved(ctx, res, id, from)
	})
}

// MandateRevocation returns the latest revocation record of a mandate, or
// ErrNotFound when its status never changed.
func (s *Store) MandateRevocation(ctx context.Context, id string) ([]byte, error) {
	var rid sql.NullString
	if err := s.queryRow(ctx, `SELECT revocation_id FROM mandates WHERE id = ?`, id).Scan(&rid); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: mandate %s", ErrNotFound, id)
		}
		return nil, err
	}
	if !rid.Valid {
		return nil, fmt.Errorf("%w: no revocation record for %s", ErrNotFound, id)
	}
	return s.GetObject(ctx, "", rid.String) // a revocation record is bound to no transaction
}

// SetMandateStatus moves a mandate from one status to another. Revoked is
// final (mandate §9): moving out of it is refused. It is a compare-and-swap
// on the current status, so two principals acting at once cannot both win.
func (s *Store) SetMandateStatus(ctx context.Context, id, from, to string) error {
	if from == StatusRevoked {
		return fmt.Errorf("store: mandate %s is revoked; revocation is final", id)
	}
	switch to {
	case StatusActive, StatusSuspended, StatusRevoked:
	default:
		return fmt.Errorf("store: unknown mandate status %q", to)
	}
	res, err := s.exec(ctx, `UPDATE mandates SET status = ?, status_changed = ? WHERE id = ? AND status = ?`, to, now(), id, from)
	if err != nil {
		return err
	}
	return s.mandateStatusMoved(ctx, res, id, from)
}

// mandateStatusMoved reports how the compare-and-swap of mandate id's
// status from from went (res is the UPDATE's result): a row not changed
// is a mandate unknown, or one no longer in status from.
func (s *Store) mandateStatusMoved(ctx context.Context, res sql.Result, id, from string) error {
	if n, _ := res.RowsAffected(); n != 1 {
		if _, err := s.GetMandate(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: mandate %s is not %s", ErrConflict, id, from)
	}
	return nil
}
