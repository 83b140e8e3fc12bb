// Package rails is the settlement handoff's outside end (settlement
// handoff §2–§7): the adapters that take a signed settlement instruction
// to a payment rail and bring its answer back as an adapter receipt.
//
// A rail is an outside system, never an operator: connecting to one
// confers no authority (settlement §4.2), and what it answers is evidence
// of what it answered, never proof that anything was authorised,
// performed or accepted. The record engine calls a rail only after the
// instruction is recorded, countersigned by the payee; the rail's answer
// becomes an adapter_receipt in both records.
//
// # Adapters
//
// An instance offers the rails named in its config.json (rails):
//
//	{"id": "rail_test_sandbox", "kind": "sandbox", "outcomes": ["succeeded"]}
//	{"id": "rail_acme_bank", "kind": "webhook", "url": "https://pay.example/a202",
//	 "secret_file": "rails/acme.secret", "ca_file": "rails/acme-ca.pem", "timeout_seconds": 10}
//
// The sandbox rail is deterministic: each new idempotency key takes the
// next outcome of its list (succeeded, failed, or pending, which answers
// pending once and succeeded when asked again), cycling; its ledger lives
// in the state directory, so an instance that restarts keeps its answers.
// The webhook rail posts the instruction to an HTTPS endpoint the
// organisation runs (its payment system or bank integration); the contract
// is in webhook.go. Its certificate is verified against the system roots,
// or, with ca_file, against the roots that PEM bundle holds only (a
// payment system often has a private CA).
//
// # Idempotency
//
// Every submission carries the instruction's idempotency key. A rail that
// is asked again with a key it has seen answers with its first result and
// moves no money a second time (settlement §5; canonical model §15 item
// 13): the sandbox by its ledger, a webhook endpoint by the contract it
// must honour. The engine asks again only when it does not know the
// answer (a crash between the call and the receipt).
package rails

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Status is what a rail says became of an instruction (kernel
// adapterReceiptPayload status).
type Status string

// The three statuses a receipt records.
const (
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Pending   Status = "pending"
)

// Reversed is a rail's answer, asked about a payment it reported
// succeeded, that the payment was reversed since (a chargeback, a
// recall). The kernel's receipt status has no such value: the engine
// records it as a failed receipt with error_code "reversed" (package
// ledger, ReversedCode).
const Reversed Status = "reversed"

// Instruction is what a rail is asked to do: the signed instruction's
// content, by reference and amount (the rail resolves nothing else).
type Instruction struct {
	InstructionID  string `json:"settlement_instruction_id"`
	IdempotencyKey string `json:"idempotency_key"`
	TransactionID  string `json:"transaction_id"`
	ObligationID   string `json:"obligation_id"`
	Currency       string `json:"currency"`
	Amount         string `json:"amount"`
	Payer          string `json:"payer_organization_id"`
	Payee          string `json:"payee_organization_id"`
	// Attempt counts the submissions of this instruction (1 first).
	Attempt int `json:"attempt"`
	// Body is the instruction's exact canonical bytes, for a rail that
	// verifies the signed object itself.
	Body []byte `json:"-"`
}

// Result is a rail's answer.
type Result struct {
	Status            Status
	ExternalReference string // the rail's reference, if it gave one
	ErrorCode         string // the rail's error code on failure
	CompletedAt       time.Time
	// SpecVersion is the external specification version the rail speaks
	// (adapter receipt external_spec_version).
	SpecVersion string
}

// Rail is one settlement rail's adapter.
type Rail interface {
	// ID is the rail's registered identifier (rail_...).
	ID() string
	// Submit asks the rail to settle in. A rail answers a key it has seen
	// with its first result.
	Submit(ctx context.Context, in Instruction) (Result, error)
	// Status asks a rail what became of an instruction: one it answered
	// pending, or one it answered succeeded, which it may answer Reversed
	// since.
	Status(ctx context.Context, in Instruction) (Result, error)
}

// ErrUnreachable marks a rail failure worth retrying (a timeout, a 5xx):
// nothing is known of what the rail did, so the same key is submitted
// again later.
var ErrUnreachable = errors.New("rails: rail unreachable")

var idPattern = regexp.MustCompile(`^rail_[a-z0-9][a-z0-9_]{2,63}$`)

// ValidID reports whether id is a rail identifier of the registered form
// (kernel settlementInstruction rail).
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Config configures one rail (config.json "rails").
type Config struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // sandbox | webhook
	// Outcomes (sandbox): the outcome of each new idempotency key in
	// turn, cycling; default ["succeeded"].
	Outcomes []Status `json:"outcomes,omitempty"`
	// URL, SecretFile, CAFile and TimeoutSeconds (webhook). SecretFile
	// and CAFile are relative to the state directory unless absolute;
	// CAFile is a PEM bundle of the root certificates the endpoint's
	// certificate is verified against (default: the system roots).
	URL            string `json:"url,omitempty"`
	SecretFile     string `json:"secret_file,omitempty"`
	CAFile         string `json:"ca_file,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// Registry is the set of rails an instance offers, by id.
type Registry struct {
	rails map[string]Rail
	order []string
}

// Add registers a rail.
func (r *Registry) Add(x Rail) error {
	if !ValidID(x.ID()) {
		return fmt.Errorf("rails: %q is not a rail identifier (rail_ and 3 to 64 lowercase letters, digits or underscores)", x.ID())
	}
	if _, dup := r.rails[x.ID()]; dup {
		return fmt.Errorf("rails: rail %s is configured twice", x.ID())
	}
	r.rails[x.ID()] = x
	r.order = append(r.order, x.ID())
	return nil
}

// Get returns the rail id names, or false: an unregistered rail is never
// replaced by a default (settlement §2.3).
func (r *Registry) Get(id string) (Rail, bool) {
	if r == nil {
		return nil, false
	}
	x, ok := r.rails[id]
	return x, ok
}

// Wrapped returns a registry of the same rails, in the same order, each
// as wrap returns it: how an operator's metrics count the calls without a
// rail knowing (package metrics).
func (r *Registry) Wrapped(wrap func(Rail) Rail) *Registry {
	if r == nil {
		return nil
	}
	w := &Registry{rails: make(map[string]Rail, len(r.rails)), order: append([]string{}, r.order...)}
	for id, x := range r.rails {
		w.rails[id] = wrap(x)
	}
	return w
}

// IDs lists the registered rails in configuration order.
func (r *Registry) IDs() []string {
	if r == nil {
		return []string{}
	}
	return append([]string{}, r.order...)
}
