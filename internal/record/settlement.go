package record

// Settlement and completion (settlement handoff §2–§7; pilot state
// machine §5, rows settlement.instructed and transaction.completed).
//
// Once the obligee has accepted an obligation (acceptance.granted, the
// transaction settlement_pending), the obligee, who owes the obligation's
// consideration, instructs its payment (act settlement.instruct): a
// settlement_instruction naming the obligation and agreement, the amount,
// the payer (this organisation, the obligee) and the payee (the obligor,
// the owed party: never an intermediary, A202-SETTLEMENT-CUSTODY-REFUSED
// otherwise, a reversed direction included), a registered rail
// (A202-SETTLEMENT-RAIL-UNKNOWN otherwise), an idempotency key, and a
// trigger bound to the exact accepting act: condition_ref
// "<commitment_id>#balance_on_acceptance" and accepting_act_hash, the
// content hash of the obligee's accepting response that acceptance.granted
// recorded (A202-SETTLEMENT-TRIGGER-ABSENT otherwise, before acceptance
// above all). The event settlement.instructed (a self-loop on
// settlement_pending) carries it. The payee countersigns only after its
// own checks, among them the payer's mandate's status fetched at that
// moment from the issuer, never from the cache (spec.uncached): a payment
// is irreversible, and authority that held when the decision was made may
// not hold now.
//
// Only once the instruction is recorded in both records does the payer's
// instance hand it to the rail (package rails): the number of attempts is
// committed before each call, the rail is asked under the instruction's
// idempotency key (so a call repeated after a crash is answered with the
// first result and moves no money twice), and each answer becomes an
// adapter_receipt signed by the payer's agent (purpose adapter_receipt,
// mapping_report_hash the hash of what was sent to the rail), stored and
// delivered to the payee in one transaction. A failure is a receipt too,
// never an edit; a pending answer is asked about again until it settles.
// The payee stores a receipt only when it answers an instruction it holds,
// under that instruction's idempotency key
// (A202-SETTLEMENT-RECEIPT-UNMATCHED otherwise), and refuses a second,
// different receipt for the same attempt
// (A202-SETTLEMENT-IDEMPOTENCY-CONFLICT). A receipt is evidence, never
// authority: it moves no state, and nothing is completed because a rail
// said so.
//
// An instruction under an idempotency key already used on the transaction
// returns the original instruction when its content is the same, and is
// A202-SETTLEMENT-IDEMPOTENCY-CONFLICT when it is not, at the payer and at
// the payee alike.
//
// How much: the ledger's (ledger.go, package ledger; docs/record-protocol.md,
// "Money that adds up (issue 38)"). An instruction pays at most what is
// outstanding on
// its obligation: the accepted share of its consideration, less what was
// paid, is in flight (this instance's own instruction awaiting its
// countersignature included) or was forgone, whatever its idempotency key
// (A202-SETTLEMENT-TRIGGER-ABSENT beyond it); by default all of it. The
// acting side refuses it before anything is signed, and the payee's
// countersigner by the same rule (ledger.Instructable). The trigger binds
// the act that accepted the obligation: the obligee's accepting response,
// or a binding determination.
//
// Completion (act transaction.complete, event transaction.completed,
// settlement_pending → completed) is appended by either party (decided
// here: the spec names no appender, and either may want the record
// closed) when the ledger's completion_paid holds: every obligation of the
// transaction accepted and paid what is owed for it (or settled short by
// an adjustment both parties signed, adjustment.go) with nothing in
// flight, or waived or released. The payee's countersignature on it means
// "we were paid what we are owed". Its data binds the agreement, the
// receipt that settled the last instruction paid, and audit_bundle_hash:
// the SHA-256 of the RFC 8785 bytes of {"transaction_id", "event_hashes":
// the content hashes of every event before it, in order} — the chain it
// seals, which both parties and any verifier recompute from the record.
//
// Receipts: an instruction's status is the ledger's reading of its
// receipts (ledger.Next): the first answer for good stays; a later one
// that contradicts it is kept as evidence and changes nothing, but for a
// reversal (a failed receipt with error_code "reversed" after a success);
// after completion a receipt is refused.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// InstructInput is the payer's instruction to settle an accepted
// obligation's consideration.
type InstructInput struct {
	MandateID    string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	ObligationID string `json:"obligation_id" jsonschema:"The accepted obligation (obl_...)."`
	// Rail is a rail this instance offers (rail_...).
	Rail string `json:"rail" jsonschema:"A rail your instance offers (default config: rail_test_sandbox)."`
	// IdempotencyKey identifies the payment to the rail (8 to 255
	// characters); the same key again returns the first instruction.
	// Empty draws a fresh one.
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"8 to 255 characters naming this payment (default: fresh)."`
	// Amount defaults to all that is outstanding on the obligation; it is
	// in the consideration's currency and no more than is outstanding.
	Amount *Money `json:"amount,omitempty" jsonschema:"The amount, at most what is outstanding (default: all of it)."`
	// ApprovalID is an approval of exactly this instruction, when the
	// mandate holds instructions for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// Money is a currency and a base-10 amount string.
type Money struct {
	Currency string `json:"currency" jsonschema:"ISO 4217 code."`
	Amount   string `json:"amount" jsonschema:"A base-10 string."`
}

// CompleteInput closes a transaction.
type CompleteInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...)."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
	ApprovalID    string `json:"approval_id,omitempty" jsonschema:"Approval (apr_...) if held."`
}

// conditionRef is the condition an instruction's trigger names: the
// balance of the commitment falls due on acceptance.
func conditionRef(obl *object.Obligation) string {
	return obl.P("commitment_id") + "#balance_on_acceptance"
}

// instructionFingerprint is what an idempotency key must keep meaning:
// the obligation, the amount, the parties and the rail.
func instructionFingerprint(p map[string]any) string {
	amount := object.Sub(p, "amount")
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s", str(p["obligation_id"]), str(amount["currency"]), str(amount["amount"]),
		str(p["payer_organization_id"]), str(p["payee_organization_id"]), str(p["rail"]))))
	return hex.EncodeToString(h[:])
}

// InstructSettlement instructs payment of an accepted obligation's
// consideration on a rail (see the top of this file).
func (e *Engine) InstructSettlement(ctx context.Context, a Actor, in InstructInput) (Outcome, error) {
	return settlementInstruct.perform(ctx, e, a, in)
}

// settlementInstruct is settlement.instruct: settlement.instructed with
// its instruction, which the payee checks against its own ledger.
var settlementInstruct = &act[InstructInput]{
	name: protocol.ActSettlementInstruct,
	lines: []actLine{
		{event: protocol.EvSettlementInstructed, uncached: true,
			carries: counts{protocol.Settlement: 1}, check: checkInstructed,
			apply: func(e *Engine, tx *store.Txn, ev *Event, objs []*Obj) error { return e.applySettlement(tx, ev, objs) }},
	},
	spec: instructSpec,
}

func instructSpec(ctx context.Context, e *Engine, a Actor, in InstructInput) (actSpec, error) {
	obl, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return actSpec{}, err
	}
	txn := obl.Txn()
	key := in.IdempotencyKey
	if key == "" {
		var b [16]byte
		if _, err := randRead(b[:]); err != nil {
			return actSpec{}, err
		}
		key = "idem-" + hex.EncodeToString(b[:])
	}
	var amount map[string]any
	var acceptingHash string
	payload := func() map[string]any {
		return map[string]any{
			"obligation_id":         obl.ID(),
			"agreement_id":          obl.AgreementID(),
			"amount":                amount,
			"payer_organization_id": e.org.Config().OrganizationID,
			"payee_organization_id": obl.Obligor(),
			"trigger":               map[string]any{"condition_ref": conditionRef(obl), "accepting_act_hash": acceptingHash},
			"rail":                  in.Rail,
			"idempotency_key":       key,
		}
	}
	var prior string
	return actSpec{
		txn: txn, mandateID: in.MandateID, event: protocol.EvSettlementInstructed, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			cfg := e.org.Config()
			if obl.Obligee() != cfg.OrganizationID {
				return refusef(reason.SettlementCustodyRefused, "the obligee of %s pays its consideration, to its obligor; this organisation is not its obligee", obl.ID())
			}
			if _, ok := e.rails.Get(in.Rail); !ok {
				return refusef(reason.SettlementRailUnknown, "rail %q is not one this instance offers (%v)", in.Rail, e.rails.IDs())
			}
			if len(key) < 8 || len(key) > 255 {
				return refusef(reason.TermsInvalid, "an idempotency key has 8 to 255 characters")
			}
			rec, err := e.ledgerRecord(ctx, txn)
			if err != nil {
				return err
			}
			// The same key again, recorded or on its way: the original
			// instruction, whatever the ledger says now (settlement §5).
			if id, same, err := e.instructionByKey(ctx, txn, key, rec.InFlight, in, obl); err != nil || id != "" {
				if err == nil && !same {
					err = refusef(reason.SettlementIdempotencyConflict, "idempotency key %s already names instruction %s, with other content", key, id)
				}
				if err == nil {
					prior, err = id, errSameInstruction
				}
				return err
			}
			if st.State() != protocol.SettlementPending {
				return refusef(reason.SettlementTriggerAbsent, "transaction %s is %s: settlement is instructed after acceptance, in settlement_pending", txn, st.t.State)
			}
			l := ledger.Compute(rec)
			var ok bool
			if _, acceptingHash, ok = l.AcceptingAct(obl.ID()); !ok {
				return refusef(reason.SettlementTriggerAbsent, "obligation %s is not accepted: nothing has made its consideration due", obl.ID())
			}
			b := l.Balance(obl.ID())
			if in.Amount != nil {
				amount = map[string]any{"currency": in.Amount.Currency, "amount": in.Amount.Amount}
			} else {
				// By default what is outstanding: the accepted share, less
				// what was paid, is in flight or was forgone.
				if d, _ := decimal.Parse(b.Outstanding.Amount); d.Sign() <= 0 {
					return refusef(reason.SettlementTriggerAbsent, "nothing is outstanding on obligation %s: owed %s %s, paid %s, in flight %s, forgone %s",
						obl.ID(), b.Owed.Amount, b.Owed.Currency, b.Paid.Amount, b.InFlight.Amount, b.Forgone.Amount)
				}
				amount = map[string]any{"currency": b.Outstanding.Currency, "amount": b.Outstanding.Amount}
			}
			m := ledger.Money{Currency: str(amount["currency"]), Amount: str(amount["amount"])}
			return l.Instructable("this instruction", obl.ID(), m, cfg.OrganizationID, obl.Obligor()).Err()
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return map[string]any{"core": map[string]any{"total": amount}}, map[string]any{"agreement_id": obl.AgreementID(), "obligation_id": obl.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			stl, err := b.add(protocol.Settlement, payload(), protocol.PurposeObjectIssuance)
			if err != nil {
				return asRefusal(err, reason.TermsInvalid)
			}
			b.data = map[string]any{"settlement_instruction_id": stl.ID(), "obligation_id": obl.ID()}
			b.name("settlement_instruction", stl.ID())
			b.name("idempotency_key", key)
			return nil
		},
		finish: func(ctx context.Context, out Outcome, err error) (Outcome, error) {
			if errors.Is(err, errSameInstruction) {
				// The same instruction again: its original outcome, nothing new.
				return e.outcome(ctx, txn, map[string]string{"settlement_instruction": prior, "idempotency_key": key})
			}
			if err != nil || out.Status != StatusRecorded {
				return out, err
			}
			// Recorded in both records: hand it to the rail now (the settlement
			// worker retries what does not settle here).
			unlock := e.lock(txn)
			werr := e.workSettlement(ctx, out.Objects["settlement_instruction"])
			unlock()
			if werr != nil {
				e.log.Warn("the rail did not answer yet; the settlement worker asks again", "transaction_id", txn, "error", werr)
			}
			return e.outcome(ctx, txn, out.Objects)
		},
	}, nil
}

// errSameInstruction stops an instruction already made under the same key
// with the same content; InstructSettlement answers with the original.
var errSameInstruction = errors.New("record: the same instruction again")

// instructionByKey finds the instruction txn holds under an idempotency
// key, recorded or this instance's own on its way (inFlight), and says
// whether the instruction asked for now is the same: the same obligation,
// payer, payee and rail, and the same amount, or no amount asked for (the
// default was taken then). It returns "" when the key names none.
func (e *Engine) instructionByKey(ctx context.Context, txn, key string, inFlight []string, in InstructInput, obl *object.Obligation) (id string, same bool, err error) {
	var held *Obj
	if s, err := e.db.SettlementByKey(ctx, txn, key); err == nil {
		var ok bool
		if held, ok = e.getTyped(ctx, txn, s.InstructionID, protocol.Settlement); !ok {
			return "", false, errf("instruction %s is not held", s.InstructionID)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", false, err
	}
	for _, x := range inFlight {
		if o, ok := e.getTyped(ctx, txn, x, protocol.Settlement); ok && o.P("idempotency_key") == key {
			held = o
		}
	}
	if held == nil {
		return "", false, nil
	}
	p := held.Payload()
	want := map[string]any{"obligation_id": obl.ID(), "amount": p["amount"], "payer_organization_id": e.org.Config().OrganizationID,
		"payee_organization_id": obl.Obligor(), "rail": in.Rail}
	if in.Amount != nil {
		want["amount"] = map[string]any{"currency": in.Amount.Currency, "amount": in.Amount.Amount}
	}
	return held.ID(), instructionFingerprint(want) == instructionFingerprint(p), nil
}

// applySettlement records an instruction as its event is recorded (both
// sides), in the same transaction.
func (e *Engine) applySettlement(tx *store.Txn, ev *Event, objs []*Obj) error {
	for _, o := range objs {
		if o.Type() != protocol.Settlement || o.ID() != ev.Data("settlement_instruction_id") {
			continue
		}
		err := tx.PutSettlement(store.Settlement{
			InstructionID: o.ID(), TransactionID: o.Txn(), ObligationID: o.P("obligation_id"), Rail: o.P("rail"),
			IdempotencyKey: o.P("idempotency_key"), Fingerprint: instructionFingerprint(o.Payload()),
			Ours: o.Org() == e.org.Config().OrganizationID,
		})
		if errors.Is(err, store.ErrConflict) {
			return refusef(reason.SettlementIdempotencyConflict, "%v", err)
		}
		if err == nil && o.Org() == e.org.Config().OrganizationID {
			// The rail work of an instruction this instance pays is due
			// once this commit is: the worker is woken after it.
			tx.AfterCommit(e.wakeRail)
		}
		return err
	}
	return nil
}

// checkInstructed is the payee's live guard of settlement.instructed: the
// instruction travels, pays the consideration of an obligation of this
// transaction that is accepted, from its obligee (the sender) to its
// obligor (this organisation), on a rail this instance registers, under a
// trigger bound to the exact accepting response, under an idempotency key
// that means no other instruction.
func checkInstructed(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	stl := object.AsSettlement(r.one(protocol.Settlement))
	if stl == nil || stl.ID() != ev.Data("settlement_instruction_id") {
		return refusef(reason.SettlementTriggerAbsent, "settlement.instructed names an instruction that does not travel with it")
	}
	p := stl.Payload()
	obl := held(ctx, e, r.txn, stl.ObligationID(), object.AsObligation)
	if obl == nil || ev.Data("obligation_id") != obl.ID() || stl.AgreementID() != obl.AgreementID() {
		return refusef(reason.SettlementTriggerAbsent, "instruction %s names an obligation of this transaction that is not held here", stl.ID())
	}
	if stl.Payer() != r.from || obl.Obligee() != r.from ||
		stl.Payee() != e.org.Config().OrganizationID || obl.Obligor() != e.org.Config().OrganizationID {
		return refusef(reason.SettlementCustodyRefused, "instruction %s pays from %s to %s; the consideration of %s moves from its obligee %s to its obligor %s, and no one else",
			stl.ID(), stl.Payer(), stl.Payee(), obl.ID(), obl.Obligee(), obl.Obligor())
	}
	if !rails.ValidID(stl.Rail()) || !railRegistered(stl.Rail()) {
		return refusef(reason.SettlementRailUnknown, "rail %s is not in this instance's registered set", stl.Rail())
	}
	// The ledger of this copy: what accepted the obligation (the act its
	// trigger binds) and what is outstanding on it (instruction_owed).
	l, err := e.ledgerOf(ctx, r.txn)
	if err != nil {
		return err
	}
	_, accepting, ok := l.AcceptingAct(obl.ID())
	trigger := object.Sub(p, "trigger")
	if !ok || str(trigger["accepting_act_hash"]) != accepting || str(trigger["condition_ref"]) != conditionRef(obl) {
		return refusef(reason.SettlementTriggerAbsent, "the trigger of %s is not bound to the act that accepted %s", stl.ID(), obl.ID())
	}
	a := object.Sub(p, "amount")
	if f := l.Instructable(stl.ID(), obl.ID(), ledger.Money{Currency: str(a["currency"]), Amount: str(a["amount"])},
		stl.Payer(), stl.Payee()); f != nil {
		return f.Err()
	}
	if held, err := e.db.SettlementByKey(ctx, r.txn, stl.IdempotencyKey()); err == nil && held.InstructionID != stl.ID() {
		return refusef(reason.SettlementIdempotencyConflict, "idempotency key %s already names instruction %s", stl.IdempotencyKey(), held.InstructionID)
	}
	return nil
}

// wakeRail wakes the settlement worker (package railwork).
func (e *Engine) wakeRail() {
	select {
	case e.railWake <- struct{}{}:
	default:
	}
}

// RailWake receives when an instruction this instance pays was recorded:
// its rail work is due at once. The settlement worker (package railwork)
// waits on it.
func (e *Engine) RailWake() <-chan struct{} { return e.railWake }

// NextSettlementAttempt is when the earliest rail work falls due, by the
// engine's clock (Now); ok is false when none waits. The settlement worker
// sleeps until then.
func (e *Engine) NextSettlementAttempt(ctx context.Context) (next time.Time, ok bool, err error) {
	return e.db.NextSettlementAttempt(ctx)
}

// Now is the engine's clock: the organisation's, simulated in tests.
func (e *Engine) Now() time.Time { return e.clock() }

// railRegistered reports whether the gate of this process registers rail.
func railRegistered(rail string) bool { return gate.RailRegistered(rail) }

// randRead draws random bytes (crypto/rand).
func randRead(b []byte) (int, error) { return rand.Read(b) }

// WorkSettlements does the rail work that is due: every instruction this
// instance pays that is recorded and not yet answered, or answered
// pending, is handed to its rail, and the answer becomes a receipt in both
// records. It returns how many instructions it worked on. The settlement
// worker (package railwork) calls it as work falls due; tests with a
// simulated clock call it directly.
func (e *Engine) WorkSettlements(ctx context.Context) int {
	due, err := e.db.DueSettlements(ctx, e.clock())
	if err != nil {
		e.log.Error("reading the settlement work failed", "error", err)
		return 0
	}
	for _, s := range due {
		unlock := e.lock(s.TransactionID)
		if err := e.workSettlement(ctx, s.InstructionID); err != nil {
			e.log.Warn("settlement work", "transaction_id", s.TransactionID, "settlement_instruction_id", s.InstructionID, "error", err)
		}
		unlock()
	}
	return len(due)
}

// workSettlement asks the rail about one instruction (the caller holds the
// transaction's lock).
func (e *Engine) workSettlement(ctx context.Context, id string) error {
	s, err := e.db.Settlement(ctx, id)
	// A succeeded payment is asked about again (a confirmation) while its
	// transaction is open to a reversal (store.DueSettlements).
	confirm := err == nil && s.State == store.SettlementSucceeded
	if err != nil || !s.Ours || (s.State != store.SettlementInstructed && s.State != store.SettlementPending && !confirm) {
		return err
	}
	rail, ok := e.rails.Get(s.Rail)
	if !ok {
		return refusef(reason.SettlementRailUnknown, "rail %s is not configured here any more", s.Rail)
	}
	stl := held(ctx, e, s.TransactionID, id, object.AsSettlement)
	if stl == nil {
		return errf("instruction %s is not held", id)
	}
	now := e.clock().UTC().Truncate(time.Second)
	attempt := s.Attempts + 1
	if !confirm {
		// The attempt is counted, durably, before the rail is called. (A
		// confirmation asks, it moves no money: it is counted only when
		// its answer becomes a receipt.)
		if attempt, err = e.db.SettlementAttempt(ctx, id, now.Add(e.out.Backoff(s.Attempts+1)), ""); err != nil {
			return err
		}
	}
	e.point("rail.before-call")
	amount := stl.PSub("amount")
	in := rails.Instruction{
		InstructionID: id, IdempotencyKey: s.IdempotencyKey, TransactionID: s.TransactionID, ObligationID: s.ObligationID,
		Currency: str(amount["currency"]), Amount: str(amount["amount"]), Payer: stl.Payer(), Payee: stl.Payee(),
		Attempt: attempt, Body: stl.Raw(),
	}
	var res rails.Result
	statusCall := s.State == store.SettlementPending || confirm
	if statusCall {
		res, err = rail.Status(ctx, in)
	} else {
		res, err = rail.Submit(ctx, in)
	}
	e.point("rail.after-call")
	switch {
	case errors.Is(err, rails.ErrUnreachable):
		return err // asked again when the back-off ends
	case errors.Is(err, rails.ErrKeyReused):
		res = rails.Result{Status: rails.Failed, ErrorCode: "idempotency_key_reused", CompletedAt: now}
	case err != nil:
		return err
	}
	if confirm && (res.Status == rails.Succeeded || res.Status == rails.Pending) {
		// It stands: nothing to record; ask again later.
		return e.db.SettlementConfirmed(ctx, id, now.Add(e.confirmEvery))
	}
	return e.receipt(ctx, stl, s, in, res, statusCall, now)
}

// receipt records a rail's answer as an adapter_receipt and delivers it to
// the payee, in one transaction with the instruction's new state.
func (e *Engine) receipt(ctx context.Context, stl *object.Settlement, s store.Settlement, in rails.Instruction, res rails.Result, statusCall bool, now time.Time) error {
	var completed, ref, code, mapping any
	if !res.CompletedAt.IsZero() {
		completed = envelope.Timestamp(res.CompletedAt)
	}
	if res.ExternalReference != "" {
		ref = res.ExternalReference
	}
	status := string(res.Status)
	if res.ErrorCode != "" {
		code = res.ErrorCode
	}
	if res.Status == rails.Reversed {
		// The kernel's receipt has no status for a reversal: it is a
		// failure the ledger reads as the reversal of the success before it.
		status, code = string(rails.Failed), ledger.ReversedCode
	}
	if !statusCall {
		// The mapping report is what this instance sent the rail.
		h, err := canonical.Hash(map[string]any{"settlement_instruction_id": in.InstructionID, "idempotency_key": in.IdempotencyKey,
			"currency": in.Currency, "amount": in.Amount, "payer_organization_id": in.Payer, "payee_organization_id": in.Payee, "attempt": in.Attempt})
		if err != nil {
			return err
		}
		mapping = h
	}
	spec := res.SpecVersion
	if spec == "" {
		spec = "unstated"
	}
	rcp, err := e.newObject(protocol.AdapterReceipt, s.TransactionID, stl.Mandate(), map[string]any{
		"settlement_instruction_id": stl.ID(),
		"adapter":                   s.Rail,
		"external_spec_version":     spec,
		"attempt":                   in.Attempt,
		"idempotency_key":           s.IdempotencyKey,
		"status":                    status,
		"requested_at":              envelope.Timestamp(now),
		"completed_at":              completed,
		"external_reference":        ref,
		"error_code":                code,
		"mapping_report_hash":       mapping,
	}, protocol.PurposeAdapterReceipt, now, "")
	if err != nil {
		return err
	}
	// The instruction's status as the ledger reads its receipts: the
	// first answer for good stays, a reversal reverses a success
	// (ledger.Next).
	state, _ := ledger.Next(s.State, status, str(code))
	next := time.Time{}
	switch state {
	case store.SettlementPending:
		next = now.Add(e.out.Backoff(1))
	case store.SettlementSucceeded:
		next = now.Add(e.confirmEvery) // asked again whether it stands
	}
	t, err := e.db.GetTransaction(ctx, s.TransactionID)
	if err != nil {
		return err
	}
	e.point("receipt.before-commit")
	var queued store.OutboxMessage
	err = e.update(ctx, s.TransactionID, func(tx *store.Txn) error {
		if err := tx.PutVerified(info(rcp), rcp.Raw(), originLocal); err != nil {
			return err
		}
		if err := tx.SetSettlementState(stl.ID(), state, next, ""); err != nil {
			return err
		}
		if err := tx.SetSettlementAttempts(stl.ID(), in.Attempt); err != nil {
			return err
		}
		var err error
		queued, err = e.enqueue(tx, t.Counterparty, s.TransactionID, []*Obj{rcp}, nil, now)
		return err
	})
	if err != nil {
		return err
	}
	e.point("receipt.after-commit")
	e.log.Info("rail answered", "transaction_id", s.TransactionID, "settlement_instruction_id", stl.ID(), "rail", s.Rail, "status", res.Status, "attempt", in.Attempt)
	return e.deliverNow(ctx, queued)
}

// receiveReceipt is the payee's side of an adapter receipt: it answers an
// instruction this instance holds, paid by the sender, under that
// instruction's idempotency key and rail; a second, different receipt for
// the same attempt is a conflict. It is stored as evidence and moves
// nothing.
func (e *Engine) receiveReceipt(ctx context.Context, r *receipt) ([][]byte, error) {
	rcp := r.one(protocol.AdapterReceipt)
	if !r.st.known {
		return nil, refusef(reason.SettlementReceiptUnmatched, "transaction %s is not held here", r.txn)
	}
	stl := held(ctx, e, r.txn, rcp.P("settlement_instruction_id"), object.AsSettlement)
	if stl == nil || stl.IdempotencyKey() != rcp.P("idempotency_key") || stl.Payer() != r.from {
		return nil, refusef(reason.SettlementReceiptUnmatched, "receipt %s answers instruction %s under key %s, which %s never issued here",
			rcp.ID(), rcp.P("settlement_instruction_id"), rcp.P("idempotency_key"), r.from)
	}
	held, err := e.db.Settlement(ctx, stl.ID())
	if err != nil {
		return nil, refusef(reason.SettlementReceiptUnmatched, "instruction %s is not recorded here", stl.ID())
	}
	if r.st.State() == protocol.Completed {
		// Completion is terminal: what it says was settled stays settled.
		return nil, refusef(reason.SettlementReceiptUnmatched, "transaction %s is completed: no instruction of it is open for receipt %s to answer", r.txn, rcp.ID())
	}
	if rcp.P("adapter") != stl.Rail() {
		return nil, refusef(reason.SettlementReceiptUnmatched, "receipt %s is from adapter %s; instruction %s went to %s", rcp.ID(), rcp.P("adapter"), stl.ID(), stl.Rail())
	}
	prior, err := e.ofType(ctx, r.txn, protocol.AdapterReceipt)
	if err != nil {
		return nil, err
	}
	for _, h := range prior {
		if h.P("settlement_instruction_id") == stl.ID() && object.Int(h.Payload()["attempt"]) == object.Int(rcp.Payload()["attempt"]) && h.Hash() != rcp.Hash() {
			return nil, refusef(reason.SettlementIdempotencyConflict, "receipt %s answers attempt %d of %s, which %s answered already, otherwise",
				rcp.ID(), object.Int(rcp.Payload()["attempt"]), stl.ID(), h.ID())
		}
	}
	if err := e.extend(ctx, r.st, r.objs); err != nil {
		return nil, err
	}
	e.point("receive.before-store")
	err = e.update(ctx, r.txn, func(tx *store.Txn) error {
		if err := putReceived(tx, rcp, r.from); err != nil {
			return err
		}
		// A receipt that contradicts the answer an earlier one gave for
		// good is kept as evidence and changes nothing (ledger.Next).
		state, _ := ledger.Next(held.State, rcp.P("status"), rcp.P("error_code"))
		if err := tx.SetSettlementState(stl.ID(), state, time.Time{}, ""); err != nil {
			return err
		}
		return tx.PutInbox(r.from, r.key, r.txn, nil, r.now)
	})
	if err != nil {
		return nil, err
	}
	e.point("receive.after-store")
	e.log.Info("receipt received", "transaction_id", r.txn, "settlement_instruction_id", stl.ID(), "status", rcp.P("status"))
	return [][]byte{}, nil
}

// completionGuard is the guard of transaction.completed both sides apply,
// the ledger's (completion_paid): every obligation accepted and paid what
// is owed for it, or settled short by an adjustment both signed, nothing
// in flight, or waived or released. It returns the receipt that settled
// the last instruction paid, which the completion names ("" when nothing
// was paid: every obligation waived, or owing nothing).
func (e *Engine) completionGuard(ctx context.Context, txn string) (string, error) {
	l, err := e.ledgerOf(ctx, txn)
	if err != nil {
		return "", err
	}
	if f := l.Completable("transaction.completed"); f != nil {
		return "", f.Err()
	}
	last := ""
	for _, b := range l.Obligations {
		for _, in := range b.Instructions {
			if in.Status == ledger.InstrSucceeded {
				last = in.SettledBy
			}
		}
	}
	return last, nil
}

// auditBundleHash is the hash completion binds: the SHA-256 of the RFC
// 8785 bytes of the transaction id and its events' content hashes, in
// order (the chain completion seals).
func (e *Engine) auditBundleHash(ctx context.Context, txn string) (string, error) {
	evs, err := e.db.Events(ctx, txn)
	if err != nil {
		return "", err
	}
	hashes := make([]any, 0, len(evs))
	for _, x := range evs {
		if x.Status != store.EventRecorded {
			break
		}
		hashes = append(hashes, x.ContentHash)
	}
	return canonical.Hash(map[string]any{"transaction_id": txn, "event_hashes": hashes})
}

// CompleteTransaction appends transaction.completed (settlement_pending →
// completed) when the completion guard holds.
func (e *Engine) CompleteTransaction(ctx context.Context, a Actor, in CompleteInput) (Outcome, error) {
	return transactionComplete.perform(ctx, e, a, in)
}

// transactionComplete is transaction.complete: transaction.completed,
// once every obligation is discharged and paid.
var transactionComplete = &act[CompleteInput]{
	name: protocol.ActTransactionComplete,
	lines: []actLine{
		{event: protocol.EvTransactionCompleted, offers: true, check: checkCompleted},
	},
	spec: completeSpec,
}

func completeSpec(ctx context.Context, e *Engine, a Actor, in CompleteInput) (actSpec, error) {
	var agr *object.Agreement
	var rcp string
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, event: protocol.EvTransactionCompleted, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			if st.State() != protocol.SettlementPending {
				return refusef(reason.StateTransitionDenied, "transaction.completed moves settlement_pending → completed; transaction %s is %s", in.TransactionID, st.t.State)
			}
			var err error
			if rcp, err = e.completionGuard(ctx, in.TransactionID); err != nil {
				return err
			}
			if agr, err = e.agreementOf(ctx, in.TransactionID); err != nil || agr == nil {
				return refusef(reason.StateTransitionDenied, "transaction %s has no agreement", in.TransactionID)
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return agr.Terms(), map[string]any{"agreement_id": agr.ID()}, nil
		},
		build: func(ctx context.Context, st *state, b *builder) error {
			h, err := e.auditBundleHash(ctx, in.TransactionID)
			if err != nil {
				return err
			}
			b.data = map[string]any{"agreement_id": agr.ID(), "audit_bundle_hash": h}
			if rcp != "" {
				b.data["adapter_receipt_id"] = rcp
			}
			b.name("audit_bundle_hash", h)
			return nil
		},
	}, nil
}

// checkCompleted is the countersigner's live guard of
// transaction.completed: the completion guard on this copy, the agreement
// named, and the audit bundle hash recomputed.
func checkCompleted(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	rcp, err := e.completionGuard(ctx, r.txn)
	if err != nil {
		return err
	}
	agr, err := e.agreementOf(ctx, r.txn)
	if err != nil || agr == nil || ev.Data("agreement_id") != agr.ID() {
		return refusef(reason.StateTransitionDenied, "transaction.completed names agreement %s, not this transaction's", ev.Data("agreement_id"))
	}
	if id := ev.Data("adapter_receipt_id"); id != "" && id != rcp {
		if held, ok := e.getTyped(ctx, r.txn, id, protocol.AdapterReceipt); !ok || held.P("status") != string(rails.Succeeded) {
			return refusef(reason.SettlementReceiptUnmatched, "transaction.completed names receipt %s, which is not a succeeded receipt held here", id)
		}
	}
	h, err := e.auditBundleHash(ctx, r.txn)
	if err != nil {
		return err
	}
	if ev.Data("audit_bundle_hash") != h {
		return refusef(reason.EvidenceHashMismatch, "audit_bundle_hash %s is not the hash of this record's chain (%s)", ev.Data("audit_bundle_hash"), h)
	}
	return nil
}

// SettlementView is where one instruction stands.
type SettlementView struct {
	InstructionID  string        `json:"settlement_instruction_id"`
	ObligationID   string        `json:"obligation_id"`
	Rail           string        `json:"rail"`
	IdempotencyKey string        `json:"idempotency_key"`
	Amount         Money         `json:"amount"`
	State          string        `json:"state"`
	Attempts       int           `json:"attempts"`
	Receipts       []ReceiptView `json:"receipts"`
}

// ReceiptView is one adapter receipt.
type ReceiptView struct {
	ReceiptID         string `json:"adapter_receipt_id"`
	Attempt           int    `json:"attempt"`
	Status            string `json:"status"`
	ExternalReference string `json:"external_reference,omitempty"`
	ErrorCode         string `json:"error_code,omitempty"`
	CompletedAt       string `json:"completed_at,omitempty"`
}

// SettlementStatus lists a transaction's instructions and their receipts.
func (e *Engine) SettlementStatus(ctx context.Context, txn string) ([]SettlementView, error) {
	if _, err := e.db.GetTransaction(ctx, txn); err != nil {
		return nil, reason.Refuse("transaction " + txn + " is unknown to this instance; call list_transactions")
	}
	rows, err := e.db.Settlements(ctx, txn)
	if err != nil {
		return nil, err
	}
	rcps, err := e.ofType(ctx, txn, protocol.AdapterReceipt)
	if err != nil {
		return nil, err
	}
	out := []SettlementView{}
	for _, s := range rows {
		v := SettlementView{InstructionID: s.InstructionID, ObligationID: s.ObligationID, Rail: s.Rail, IdempotencyKey: s.IdempotencyKey, State: s.State, Attempts: s.Attempts, Receipts: []ReceiptView{}}
		if stl, ok := e.getTyped(ctx, txn, s.InstructionID, protocol.Settlement); ok {
			a := stl.PSub("amount")
			v.Amount = Money{Currency: str(a["currency"]), Amount: str(a["amount"])}
		}
		for _, r := range rcps {
			if r.P("settlement_instruction_id") == s.InstructionID {
				v.Receipts = append(v.Receipts, ReceiptView{ReceiptID: r.ID(), Attempt: object.Int(r.Payload()["attempt"]), Status: r.P("status"),
					ExternalReference: r.P("external_reference"), ErrorCode: r.P("error_code"), CompletedAt: r.P("completed_at")})
			}
		}
		out = append(out, v)
	}
	return out, nil
}
