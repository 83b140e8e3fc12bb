package rails

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// SandboxSpecVersion is the external specification version sandbox
// receipts state.
const SandboxSpecVersion = "party-sandbox/1"

// Sandbox is the built-in synthetic rail (rail_test_sandbox, settlement
// §2.3's test rail): deterministic, no money anywhere. Each new
// idempotency key takes the next of its configured outcomes, cycling; a
// key seen before is answered with its first result. Its ledger is a file,
// so the answers survive a restart as a real rail's would.
type Sandbox struct {
	id       string
	outcomes []Status
	path     string
	clock    func() time.Time

	mu     sync.Mutex
	ledger sandboxLedger
}

type sandboxLedger struct {
	Next    int                     `json:"next"`
	Entries map[string]sandboxEntry `json:"entries"`
}

type sandboxEntry struct {
	InstructionID string `json:"settlement_instruction_id"`
	Outcome       Status `json:"outcome"`
	Settled       bool   `json:"settled"`
	Reference     string `json:"reference"`
	Submissions   int    `json:"submissions"`
	Executions    int    `json:"executions"`
	Reversed      bool   `json:"reversed,omitempty"`
	Fingerprint   string `json:"fingerprint"`
}

// NewSandbox returns the sandbox rail id whose ledger is the file path
// (created when missing). outcomes defaults to one outcome, "succeeded".
func NewSandbox(id string, outcomes []Status, path string, clock func() time.Time) (*Sandbox, error) {
	if len(outcomes) == 0 {
		outcomes = []Status{Succeeded}
	}
	for _, o := range outcomes {
		switch o {
		case Succeeded, Failed, Pending, Reversed:
		default:
			return nil, fmt.Errorf("rails: sandbox outcome %q is not succeeded, failed, pending or reversed", o)
		}
	}
	if clock == nil {
		clock = time.Now
	}
	s := &Sandbox{id: id, outcomes: outcomes, path: path, clock: clock, ledger: sandboxLedger{Entries: map[string]sandboxEntry{}}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &s.ledger); err != nil {
			return nil, fmt.Errorf("rails: sandbox ledger %s: %w", path, err)
		}
		if s.ledger.Entries == nil {
			s.ledger.Entries = map[string]sandboxEntry{}
		}
	}
	return s, nil
}

// ID implements Rail.
func (s *Sandbox) ID() string { return s.id }

// fingerprint is what an idempotency key must keep meaning.
func fingerprint(in Instruction) string {
	h := sha256.Sum256([]byte(in.InstructionID + "\x00" + in.Currency + "\x00" + in.Amount + "\x00" + in.Payer + "\x00" + in.Payee))
	return hex.EncodeToString(h[:])
}

// ErrKeyReused is a rail's refusal of an idempotency key presented again
// with another instruction.
var ErrKeyReused = errors.New("rails: idempotency key already used for another instruction")

// Submit implements Rail.
func (s *Sandbox) Submit(_ context.Context, in Instruction) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, seen := s.ledger.Entries[in.IdempotencyKey]
	if seen && e.Fingerprint != fingerprint(in) {
		return Result{}, ErrKeyReused
	}
	if !seen {
		e = sandboxEntry{InstructionID: in.InstructionID, Outcome: s.outcomes[s.ledger.Next%len(s.outcomes)], Fingerprint: fingerprint(in)}
		s.ledger.Next++
		sum := sha256.Sum256([]byte(s.id + in.IdempotencyKey))
		e.Reference = "sbx_" + hex.EncodeToString(sum[:8])
		if e.Outcome == Succeeded || e.Outcome == Reversed {
			e.Settled, e.Executions = true, 1
		}
	}
	e.Submissions++
	s.ledger.Entries[in.IdempotencyKey] = e
	if err := s.save(); err != nil {
		return Result{}, err
	}
	return s.result(e), nil
}

// Status implements Rail: a pending sandbox instruction settles when it is
// asked about; one whose outcome is reversed, reported succeeded when
// submitted, is reported reversed when asked about (its money returned).
func (s *Sandbox) Status(_ context.Context, in Instruction) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, seen := s.ledger.Entries[in.IdempotencyKey]
	if !seen {
		return Result{}, fmt.Errorf("rails: %s knows no instruction under key %s", s.id, in.IdempotencyKey)
	}
	if e.Outcome == Pending && !e.Settled {
		e.Settled, e.Executions = true, e.Executions+1
		s.ledger.Entries[in.IdempotencyKey] = e
		if err := s.save(); err != nil {
			return Result{}, err
		}
	}
	if e.Outcome == Reversed && !e.Reversed {
		e.Reversed = true
		s.ledger.Entries[in.IdempotencyKey] = e
		if err := s.save(); err != nil {
			return Result{}, err
		}
	}
	r := s.result(e)
	switch e.Outcome {
	case Pending:
		r.Status = Succeeded
	case Reversed:
		r.Status, r.ErrorCode = Reversed, "sandbox_recalled"
	}
	return r, nil
}

func (s *Sandbox) result(e sandboxEntry) Result {
	r := Result{Status: e.Outcome, ExternalReference: e.Reference, SpecVersion: SandboxSpecVersion}
	switch e.Outcome {
	case Reversed:
		// Submitted, it succeeds; reversed is what it says when asked later.
		r.Status, r.CompletedAt = Succeeded, s.clock().UTC().Truncate(time.Second)
	case Succeeded:
		r.CompletedAt = s.clock().UTC().Truncate(time.Second)
	case Failed:
		r.ErrorCode, r.CompletedAt = "sandbox_declined", s.clock().UTC().Truncate(time.Second)
	}
	return r
}

// Reversals reports whether the payment under a key was reversed.
func (s *Sandbox) Reversals(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Entries[key].Reversed
}

// Executions reports how many times money moved for a key (at most once).
func (s *Sandbox) Executions(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Entries[key].Executions
}

// Submissions reports how many times a key was submitted.
func (s *Sandbox) Submissions(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.Entries[key].Submissions
}

// save writes the ledger atomically (temporary file, fsync, rename).
func (s *Sandbox) save() error {
	b, err := json.MarshalIndent(s.ledger, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
