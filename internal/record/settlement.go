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
// Completion (act transaction.complete, event transaction.completed,
// settlement_pending → completed) is appended by either party (decided
// here: the spec names no appender, and either may want the record
// closed) when every obligation of the transaction is accepted, or waived
// or released, and every obligation with a consideration has a settlement
// instruction with a succeeded receipt. Its data binds the agreement, the
// last succeeded receipt, and audit_bundle_hash: the SHA-256 of the RFC
// 8785 bytes of {"transaction_id", "event_hashes": the content hashes of
// every event before it, in order} — the chain it seals, which both
// parties and any verifier recompute from the record.

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
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/rails"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// InstructInput is the payer's instruction to settle an accepted
// obligation's consideration.
type InstructInput struct {
	MandateID    string `json:"mandate_id" jsonschema:"Your mandate (mnd_...) that lists settlement.instruct."`
	ObligationID string `json:"obligation_id" jsonschema:"The accepted obligation (obl_...)."`
	// Rail is a rail this instance offers (rail_...).
	Rail string `json:"rail" jsonschema:"A rail your instance offers (config.json rails; rail_test_sandbox by default). An unknown rail is refused with the list of those offered."`
	// IdempotencyKey identifies the payment to the rail (8 to 255
	// characters); the same key again returns the first instruction.
	// Empty draws a fresh one.
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"8 to 255 characters naming this payment to the rail; default a fresh one."`
	// Amount defaults to the obligation's consideration; it is in the
	// consideration's currency and no more than it.
	Amount *Money `json:"amount,omitempty" jsonschema:"The amount paid: ISO 4217 currency, the consideration's, and a positive base-10 amount, at most the consideration (default: the consideration)."`
	// ApprovalID is an approval of exactly this instruction, when the
	// mandate holds instructions for approval.
	ApprovalID string `json:"approval_id,omitempty" jsonschema:"The approval (apr_...) for exactly this instruction, when your mandate holds it for approval."`
}

// Money is a currency and a base-10 amount string.
type Money struct {
	Currency string `json:"currency" jsonschema:"ISO 4217 code."`
	Amount   string `json:"amount" jsonschema:"A base-10 string, never a number."`
}

// CompleteInput closes a transaction.
type CompleteInput struct {
	MandateID     string `json:"mandate_id" jsonschema:"Your mandate (mnd_...) that lists transaction.complete."`
	TransactionID string `json:"transaction_id" jsonschema:"The transaction (txn_...)."`
	ApprovalID    string `json:"approval_id,omitempty" jsonschema:"The approval (apr_...) for exactly this act, when your mandate holds it for approval."`
}

func init() {
	eventSpecs[protocol.EvSettlementInstructed] = receiveSpec{
		carries:  map[protocol.ObjectType]int{protocol.Settlement: 1},
		check:    checkInstructed,
		uncached: true,
	}
	eventSpecs[protocol.EvTransactionCompleted] = receiveSpec{check: checkCompleted}
}

// conditionRef is the condition an instruction's trigger names: the
// balance of the commitment falls due on acceptance.
func conditionRef(obl *Obj) string { return obl.P("commitment_id") + "#balance_on_acceptance" }

// instructionFingerprint is what an idempotency key must keep meaning:
// the obligation, the amount, the parties and the rail.
func instructionFingerprint(p map[string]any) string {
	amount := sub(p, "amount")
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s", str(p["obligation_id"]), str(amount["currency"]), str(amount["amount"]),
		str(p["payer_organization_id"]), str(p["payee_organization_id"]), str(p["rail"]))))
	return hex.EncodeToString(h[:])
}

// InstructSettlement instructs payment of an accepted obligation's
// consideration on a rail (see the top of this file).
func (e *Engine) InstructSettlement(ctx context.Context, in InstructInput) (Outcome, error) {
	obl, err := e.heldObligation(ctx, in.ObligationID)
	if err != nil {
		return Outcome{}, err
	}
	txn := obl.Txn()
	key := in.IdempotencyKey
	if key == "" {
		var b [16]byte
		if _, err := randRead(b[:]); err != nil {
			return Outcome{}, err
		}
		key = "idem-" + hex.EncodeToString(b[:])
	}
	var amount map[string]any
	var accepting *Obj
	payload := func() map[string]any {
		return map[string]any{
			"obligation_id":         obl.ID(),
			"agreement_id":          obl.P("agreement_id"),
			"amount":                amount,
			"payer_organization_id": e.o.Config().OrganizationID,
			"payee_organization_id": obl.PartyOrg("obligor"),
			"trigger":               map[string]any{"condition_ref": conditionRef(obl), "accepting_act_hash": accepting.Hash()},
			"rail":                  in.Rail,
			"idempotency_key":       key,
		}
	}
	var prior *store.Settlement
	out, err := e.perform(ctx, actSpec{
		name: protocol.ActSettlementInstruct, txn: txn, mandateID: in.MandateID, event: protocol.EvSettlementInstructed, approvalID: in.ApprovalID,
		check: func(ctx context.Context, st *state) error {
			cfg := e.o.Config()
			if obl.PartyOrg("obligee") != cfg.OrganizationID {
				return refusef(reason.SettlementCustodyRefused, "the obligee of %s pays its consideration, to its obligor; this organisation is not its obligee", obl.ID())
			}
			if _, ok := e.rails.Get(in.Rail); !ok {
				return refusef(reason.SettlementRailUnknown, "rail %q is not one this instance offers (%v)", in.Rail, e.rails.IDs())
			}
			if len(key) < 8 || len(key) > 255 {
				return refusef(reason.TermsInvalid, "an idempotency key has 8 to 255 characters")
			}
			if st.State() != protocol.SettlementPending {
				return refusef(reason.SettlementTriggerAbsent, "transaction %s is %s: settlement is instructed after acceptance, in settlement_pending", txn, st.t.State)
			}
			os, err := e.o.Store.ObligationState(ctx, obl.ID())
			if err != nil || protocol.ObligationState(os.State) != protocol.OblAccepted || os.AcceptedBy == "" {
				return refusef(reason.SettlementTriggerAbsent, "obligation %s is not accepted: nothing has made its consideration due", obl.ID())
			}
			var ok bool
			if accepting, ok = e.getTyped(ctx, os.AcceptedBy, protocol.ObligationResponse); !ok {
				return errf("the accepting response %s is not held", os.AcceptedBy)
			}
			cons := obl.PSub("consideration")
			if len(cons) == 0 {
				return refusef(reason.TermsInvalid, "obligation %s carries no consideration to pay", obl.ID())
			}
			amount = cons
			if in.Amount != nil {
				amount = map[string]any{"currency": in.Amount.Currency, "amount": in.Amount.Amount}
			}
			if err := withinConsideration(amount, cons); err != nil {
				return err
			}
			if held, err := e.o.Store.SettlementByKey(ctx, txn, key); err == nil {
				if held.Fingerprint != instructionFingerprint(payload()) {
					return refusef(reason.SettlementIdempotencyConflict, "idempotency key %s already names instruction %s, with other content", key, held.InstructionID)
				}
				prior = &held
				return errSameInstruction
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) {
			return map[string]any{"core": map[string]any{"total": amount}}, map[string]any{"agreement_id": obl.P("agreement_id"), "obligation_id": obl.ID()}, nil
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
	})
	if errors.Is(err, errSameInstruction) {
		// The same instruction again: its original outcome, nothing new.
		return e.outcome(ctx, txn, map[string]string{"settlement_instruction": prior.InstructionID, "idempotency_key": key})
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
}

// errSameInstruction stops an instruction already made under the same key
// with the same content; InstructSettlement answers with the original.
var errSameInstruction = errors.New("record: the same instruction again")

// withinConsideration refuses an amount in another currency than the
// consideration's, not positive, or above it.
func withinConsideration(amount, cons map[string]any) error {
	a, err1 := decimal.Parse(str(amount["amount"]))
	c, err2 := decimal.Parse(str(cons["amount"]))
	switch {
	case err1 != nil || err2 != nil:
		return refusef(reason.TermsInvalid, "amount %v is not a money amount", amount["amount"])
	case str(amount["currency"]) != str(cons["currency"]):
		return refusef(reason.TermsInvalid, "amount in %v; the consideration is in %v", amount["currency"], cons["currency"])
	case a.Sign() <= 0 || a.Cmp(c) > 0:
		return refusef(reason.TermsInvalid, "amount %v is not within the consideration %v", amount["amount"], cons["amount"])
	}
	return nil
}

// applySettlement records an instruction as its event is recorded (both
// sides), in the same transaction.
func (e *Engine) applySettlement(tx *store.Txn, ev *Obj, objs []*Obj) error {
	for _, o := range objs {
		if o.Type() != protocol.Settlement || o.ID() != ev.Data("settlement_instruction_id") {
			continue
		}
		err := tx.PutSettlement(store.Settlement{
			InstructionID: o.ID(), TransactionID: o.Txn(), ObligationID: o.P("obligation_id"), Rail: o.P("rail"),
			IdempotencyKey: o.P("idempotency_key"), Fingerprint: instructionFingerprint(o.Payload()),
			Ours: o.Org() == e.o.Config().OrganizationID,
		})
		if errors.Is(err, store.ErrConflict) {
			return refusef(reason.SettlementIdempotencyConflict, "%v", err)
		}
		if err == nil && o.Org() == e.o.Config().OrganizationID {
			select { // the rail work of an instruction this instance pays is due
			case e.railWake <- struct{}{}:
			default:
			}
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
func checkInstructed(ctx context.Context, e *Engine, r *receipt, ev *Obj) error {
	stl := r.one(protocol.Settlement)
	if stl == nil || stl.ID() != ev.Data("settlement_instruction_id") {
		return refusef(reason.SettlementTriggerAbsent, "settlement.instructed names an instruction that does not travel with it")
	}
	p := stl.Payload()
	obl, ok := e.getTyped(ctx, stl.P("obligation_id"), protocol.Obligation)
	if !ok || obl.Txn() != r.txn || ev.Data("obligation_id") != obl.ID() || stl.P("agreement_id") != obl.P("agreement_id") {
		return refusef(reason.SettlementTriggerAbsent, "instruction %s names an obligation of this transaction that is not held here", stl.ID())
	}
	if stl.P("payer_organization_id") != r.from || obl.PartyOrg("obligee") != r.from ||
		stl.P("payee_organization_id") != e.o.Config().OrganizationID || obl.PartyOrg("obligor") != e.o.Config().OrganizationID {
		return refusef(reason.SettlementCustodyRefused, "instruction %s pays from %s to %s; the consideration of %s moves from its obligee %s to its obligor %s, and no one else",
			stl.ID(), stl.P("payer_organization_id"), stl.P("payee_organization_id"), obl.ID(), obl.PartyOrg("obligee"), obl.PartyOrg("obligor"))
	}
	if !rails.ValidID(stl.P("rail")) || !railRegistered(stl.P("rail")) {
		return refusef(reason.SettlementRailUnknown, "rail %s is not in this instance's registered set", stl.P("rail"))
	}
	os, err := e.o.Store.ObligationState(ctx, obl.ID())
	if err != nil || protocol.ObligationState(os.State) != protocol.OblAccepted || os.AcceptedBy == "" {
		return refusef(reason.SettlementTriggerAbsent, "obligation %s is not accepted: nothing has made its consideration due", obl.ID())
	}
	accepting, ok := e.getTyped(ctx, os.AcceptedBy, protocol.ObligationResponse)
	trigger := sub(p, "trigger")
	if !ok || str(trigger["accepting_act_hash"]) != accepting.Hash() || str(trigger["condition_ref"]) != conditionRef(obl) {
		return refusef(reason.SettlementTriggerAbsent, "the trigger of %s is not bound to the response that accepted %s", stl.ID(), obl.ID())
	}
	if err := withinConsideration(sub(p, "amount"), obl.PSub("consideration")); err != nil {
		return err
	}
	if held, err := e.o.Store.SettlementByKey(ctx, r.txn, stl.P("idempotency_key")); err == nil && held.InstructionID != stl.ID() {
		return refusef(reason.SettlementIdempotencyConflict, "idempotency key %s already names instruction %s", stl.P("idempotency_key"), held.InstructionID)
	}
	return nil
}

// railRegistered reports whether the gate of this process registers rail.
func railRegistered(rail string) bool { return gate.RailRegistered(rail) }

// randRead draws random bytes (crypto/rand).
func randRead(b []byte) (int, error) { return rand.Read(b) }

// WorkSettlements does the rail work that is due: every instruction this
// instance pays that is recorded and not yet answered, or answered
// pending, is handed to its rail, and the answer becomes a receipt in both
// records. It returns how many instructions it worked on. Run calls it on
// a timer; tests with a simulated clock call it directly.
func (e *Engine) WorkSettlements(ctx context.Context) int {
	due, err := e.o.Store.DueSettlements(ctx, e.o.Clock())
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
	s, err := e.o.Store.Settlement(ctx, id)
	if err != nil || !s.Ours || (s.State != store.SettlementInstructed && s.State != store.SettlementPending) {
		return err
	}
	rail, ok := e.rails.Get(s.Rail)
	if !ok {
		return refusef(reason.SettlementRailUnknown, "rail %s is not configured here any more", s.Rail)
	}
	stl, ok := e.getTyped(ctx, id, protocol.Settlement)
	if !ok {
		return errf("instruction %s is not held", id)
	}
	now := e.o.Clock().UTC().Truncate(time.Second)
	// The attempt is counted, durably, before the rail is called.
	attempt, err := e.o.Store.SettlementAttempt(ctx, id, now.Add(e.out.Backoff(s.Attempts+1)), "")
	if err != nil {
		return err
	}
	e.point("rail.before-call")
	amount := stl.PSub("amount")
	in := rails.Instruction{
		InstructionID: id, IdempotencyKey: s.IdempotencyKey, TransactionID: s.TransactionID, ObligationID: s.ObligationID,
		Currency: str(amount["currency"]), Amount: str(amount["amount"]), Payer: stl.P("payer_organization_id"), Payee: stl.P("payee_organization_id"),
		Attempt: attempt, Body: stl.raw,
	}
	var res rails.Result
	statusCall := s.State == store.SettlementPending
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
	return e.receipt(ctx, stl, s, in, res, statusCall, now)
}

// receipt records a rail's answer as an adapter_receipt and delivers it to
// the payee, in one transaction with the instruction's new state.
func (e *Engine) receipt(ctx context.Context, stl *Obj, s store.Settlement, in rails.Instruction, res rails.Result, statusCall bool, now time.Time) error {
	var completed, ref, code, mapping any
	if !res.CompletedAt.IsZero() {
		completed = envelope.Timestamp(res.CompletedAt)
	}
	if res.ExternalReference != "" {
		ref = res.ExternalReference
	}
	if res.ErrorCode != "" {
		code = res.ErrorCode
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
		"status":                    string(res.Status),
		"requested_at":              envelope.Timestamp(now),
		"completed_at":              completed,
		"external_reference":        ref,
		"error_code":                code,
		"mapping_report_hash":       mapping,
	}, protocol.PurposeAdapterReceipt, now, "")
	if err != nil {
		return err
	}
	state, next := string(res.Status), time.Time{}
	if res.Status == rails.Pending {
		next = now.Add(e.out.Backoff(1))
	}
	t, err := e.o.Store.GetTransaction(ctx, s.TransactionID)
	if err != nil {
		return err
	}
	e.point("receipt.before-commit")
	var queued store.OutboxMessage
	err = e.update(ctx, s.TransactionID, func(tx *store.Txn) error {
		if err := tx.PutVerified(rcp.info(), rcp.raw, originLocal); err != nil {
			return err
		}
		if err := tx.SetSettlementState(stl.ID(), state, next, ""); err != nil {
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
	stl, ok := e.getTyped(ctx, rcp.P("settlement_instruction_id"), protocol.Settlement)
	if !ok || stl.Txn() != r.txn || stl.P("idempotency_key") != rcp.P("idempotency_key") || stl.P("payer_organization_id") != r.from {
		return nil, refusef(reason.SettlementReceiptUnmatched, "receipt %s answers instruction %s under key %s, which %s never issued here",
			rcp.ID(), rcp.P("settlement_instruction_id"), rcp.P("idempotency_key"), r.from)
	}
	if _, err := e.o.Store.Settlement(ctx, stl.ID()); err != nil {
		return nil, refusef(reason.SettlementReceiptUnmatched, "instruction %s is not recorded here", stl.ID())
	}
	if rcp.P("adapter") != stl.P("rail") {
		return nil, refusef(reason.SettlementReceiptUnmatched, "receipt %s is from adapter %s; instruction %s went to %s", rcp.ID(), rcp.P("adapter"), stl.ID(), stl.P("rail"))
	}
	held, err := e.ofType(ctx, r.txn, protocol.AdapterReceipt)
	if err != nil {
		return nil, err
	}
	for _, h := range held {
		if h.P("settlement_instruction_id") == stl.ID() && intOf(h.Payload()["attempt"]) == intOf(rcp.Payload()["attempt"]) && h.Hash() != rcp.Hash() {
			return nil, refusef(reason.SettlementIdempotencyConflict, "receipt %s answers attempt %d of %s, which %s answered already, otherwise",
				rcp.ID(), intOf(rcp.Payload()["attempt"]), stl.ID(), h.ID())
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
		if err := tx.SetSettlementState(stl.ID(), rcp.P("status"), time.Time{}, ""); err != nil {
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

// settledReceipt returns the latest succeeded receipt of an obligation's
// instructions, or nil.
func (e *Engine) settledReceipt(ctx context.Context, txn, obl string) (*Obj, error) {
	rcps, err := e.ofType(ctx, txn, protocol.AdapterReceipt)
	if err != nil {
		return nil, err
	}
	var last *Obj
	for _, r := range rcps {
		if r.P("status") != string(rails.Succeeded) {
			continue
		}
		s, err := e.o.Store.Settlement(ctx, r.P("settlement_instruction_id"))
		if err == nil && s.ObligationID == obl {
			last = r
		}
	}
	return last, nil
}

// completionGuard is the guard of transaction.completed both sides apply:
// every obligation is accepted, waived or released, and every one with a
// consideration has a succeeded receipt. It returns the last succeeded
// receipt.
func (e *Engine) completionGuard(ctx context.Context, txn string) (*Obj, error) {
	obls, err := e.o.Store.ObligationStates(ctx, txn)
	if err != nil {
		return nil, err
	}
	if len(obls) == 0 {
		return nil, refusef(reason.StateTransitionDenied, "transaction %s has no obligation to complete", txn)
	}
	var last *Obj
	for _, os := range obls {
		switch protocol.ObligationState(os.State) {
		case protocol.OblAccepted:
		case protocol.OblWaived, protocol.OblReleased:
			continue
		default:
			return nil, refusef(reason.StateTransitionDenied, "obligation %s is %s: every required obligation is accepted (or waived) before completion", os.ObligationID, os.State)
		}
		obl, ok := e.getTyped(ctx, os.ObligationID, protocol.Obligation)
		if !ok {
			return nil, errf("obligation %s is not held", os.ObligationID)
		}
		if len(obl.PSub("consideration")) == 0 {
			continue
		}
		rcp, err := e.settledReceipt(ctx, txn, obl.ID())
		if err != nil {
			return nil, err
		}
		if rcp == nil {
			return nil, refusef(reason.StateTransitionDenied, "obligation %s carries a consideration and no settlement of it has a succeeded receipt", obl.ID())
		}
		last = rcp
	}
	return last, nil
}

// auditBundleHash is the hash completion binds: the SHA-256 of the RFC
// 8785 bytes of the transaction id and its events' content hashes, in
// order (the chain completion seals).
func (e *Engine) auditBundleHash(ctx context.Context, txn string) (string, error) {
	evs, err := e.o.Store.Events(ctx, txn)
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
func (e *Engine) CompleteTransaction(ctx context.Context, in CompleteInput) (Outcome, error) {
	var agr, rcp *Obj
	return e.perform(ctx, actSpec{
		name: protocol.ActTransactionComplete, txn: in.TransactionID, mandateID: in.MandateID, event: protocol.EvTransactionCompleted, approvalID: in.ApprovalID,
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
			if rcp != nil {
				b.data["adapter_receipt_id"] = rcp.ID()
			}
			b.name("audit_bundle_hash", h)
			return nil
		},
	})
}

// checkCompleted is the countersigner's live guard of
// transaction.completed: the completion guard on this copy, the agreement
// named, and the audit bundle hash recomputed.
func checkCompleted(ctx context.Context, e *Engine, r *receipt, ev *Obj) error {
	rcp, err := e.completionGuard(ctx, r.txn)
	if err != nil {
		return err
	}
	agr, err := e.agreementOf(ctx, r.txn)
	if err != nil || agr == nil || ev.Data("agreement_id") != agr.ID() {
		return refusef(reason.StateTransitionDenied, "transaction.completed names agreement %s, not this transaction's", ev.Data("agreement_id"))
	}
	if id := ev.Data("adapter_receipt_id"); id != "" && (rcp == nil || id != rcp.ID()) {
		if held, ok := e.getTyped(ctx, id, protocol.AdapterReceipt); !ok || held.P("status") != string(rails.Succeeded) {
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
	if _, err := e.o.Store.GetTransaction(ctx, txn); err != nil {
		return nil, reason.Refuse("transaction " + txn + " is unknown to this instance; call list_transactions")
	}
	rows, err := e.o.Store.Settlements(ctx, txn)
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
		if stl, ok := e.getTyped(ctx, s.InstructionID, protocol.Settlement); ok {
			a := stl.PSub("amount")
			v.Amount = Money{Currency: str(a["currency"]), Amount: str(a["amount"])}
		}
		for _, r := range rcps {
			if r.P("settlement_instruction_id") == s.InstructionID {
				v.Receipts = append(v.Receipts, ReceiptView{ReceiptID: r.ID(), Attempt: intOf(r.Payload()["attempt"]), Status: r.P("status"),
					ExternalReference: r.P("external_reference"), ErrorCode: r.P("error_code"), CompletedAt: r.P("completed_at")})
			}
		}
		out = append(out, v)
	}
	return out, nil
}
