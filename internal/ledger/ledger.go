package ledger

import (
	"sort"
	"strings"
	"time"

	"github.com/partyd/party/internal/decimal"
)

// Record is one transaction's record as the ledger reads it: its objects
// and its events, decoded from the bytes held. Nothing else is consulted.
type Record struct {
	// TransactionID is the transaction; objects and events of any other
	// are left out. Empty takes everything handed in.
	TransactionID string
	// Objects are the record's objects (events among them are ignored).
	Objects []map[string]any
	// Events are the transaction stream's events, in any order; the
	// ledger reads them in sequence order. A subset is fine (a working
	// set): an instruction counts once an event that records it is here.
	Events []map[string]any
	// InFlight names instructions the caller counts as instructed though
	// no event here records them yet: the acting instance's own
	// instruction, signed and sent, awaiting its countersignature. Money
	// on its way is money the payer may not instruct again.
	InFlight []string
	// Hash returns an object's content hash; nil reads its declared
	// content_hash (the verifier passes the hash it recomputed).
	Hash func(o map[string]any) string
}

// Ledger is the money of one transaction at one point of its record: one
// balance per obligation issued by then.
type Ledger struct {
	TransactionID string    `json:"transaction_id"`
	Obligations   []Balance `json:"obligations"`
	// Completed says transaction.completed is recorded; CompletedBy names
	// the event. (A report carries no boolean: a reader reads the event.)
	Completed   bool   `json:"-"`
	CompletedBy string `json:"completed_by,omitempty"`

	p           *parsed
	c           cut
	byID        map[string]int
	completedAt time.Time
}

// The statuses of a balance: where the duty stands, for the money.
const (
	// StatusOpen: issued, not yet accepted: nothing is payable yet.
	StatusOpen = "open"
	// StatusAccepted: accepted (by the obligee's response or a binding
	// determination): the accepted share is payable.
	StatusAccepted = "accepted"
	// StatusWaived: released by its obligee's signed waiver: nothing is
	// owed for it.
	StatusWaived = "waived"
	// StatusReleased: released by a termination both parties signed.
	StatusReleased = "released"
)

// Balance is one obligation's money: what is owed for it, what was paid,
// what is on its way, and what is left.
type Balance struct {
	ObligationID string `json:"obligation_id"`
	Obligor      string `json:"obligor_organization_id"`
	Obligee      string `json:"obligee_organization_id"`
	Quantity     string `json:"quantity"`
	UnitCode     string `json:"unit_code"`
	Status       string `json:"status"`
	// AcceptedQuantity and AcceptedBy are the quantity accepted and the
	// act that accepted it (a response obr_, or a determination det_).
	AcceptedQuantity string `json:"accepted_quantity,omitempty"`
	AcceptedBy       string `json:"accepted_by,omitempty"`
	// RemainderOf names the obligation whose partial acceptance issued
	// this one.
	RemainderOf string `json:"remainder_of,omitempty"`
	// Consideration is the obligation's own ("0" when it carries none).
	Consideration Money `json:"consideration"`
	// Owed is what is payable for it now: the accepted share of the
	// consideration (nothing before acceptance).
	Owed Money `json:"owed"`
	// Paid is the sum of instructions whose rail reported success, less
	// any it later reported reversed.
	Paid Money `json:"paid"`
	// InFlight is the sum of instructions recorded and not yet answered
	// for good (no receipt, or pending).
	InFlight Money `json:"in_flight"`
	Failed   Money `json:"failed"`
	Reversed Money `json:"reversed"`
	// Forgone is what the payee agreed, with the payer, not to be paid
	// (a settlement adjustment both signed).
	Forgone Money `json:"forgone"`
	// Outstanding is what may still be instructed: owed − forgone − paid −
	// in flight, never below zero.
	Outstanding Money `json:"outstanding"`
	// Settled says nothing more is to be paid or awaited for it: accepted
	// and paid (or forgone) in full with nothing in flight, or waived or
	// released. Settlement says the same in words: not_due (not accepted
	// yet), unpaid, in_flight, or settled.
	Settled      bool          `json:"-"`
	Settlement   string        `json:"settlement"`
	Instructions []Instruction `json:"instructions"`
	// Adjustments are the settlement adjustments in force, by record
	// hash.
	Adjustments []string `json:"adjustments"`

	currency                                         string
	places                                           int
	cons, owed, paid, inFlight, failed, rev, forgone amount
	hasCons                                          bool
	accHash                                          string // the accepting act's content hash
	agreement                                        string
}

// The statuses of an instruction, read from its receipts.
const (
	// InstrInstructed: recorded, no answer from the rail yet.
	InstrInstructed = "instructed"
	// InstrPending: the rail answered pending.
	InstrPending = "pending"
	// InstrSucceeded, InstrFailed: the rail's first answer for good.
	InstrSucceeded = "succeeded"
	InstrFailed    = "failed"
	// InstrReversed: succeeded, then reported reversed by the rail.
	InstrReversed = "reversed"
)

// ReversedCode is the error_code of a receipt by which a rail reports
// that a payment it reported succeeded was reversed (a chargeback, a
// recall). The kernel's receipt status has no value for it (succeeded,
// failed, pending), so a reversal is a failed receipt with this code,
// after a succeeded one; any other failed receipt after a success
// contradicts it and changes nothing (docs/record-protocol.md).
const ReversedCode = "reversed"

// Instruction is one settlement instruction of an obligation.
type Instruction struct {
	InstructionID string `json:"settlement_instruction_id"`
	Amount        Money  `json:"amount"`
	Status        string `json:"status"`
	// Receipts are its receipts in order (attempt, then time).
	Receipts []string `json:"receipts"`
	// Contradicting are receipts that contradict the status an earlier
	// receipt settled: kept as evidence, they change nothing.
	Contradicting []string `json:"contradicting_receipts"`
	// SettledBy is the receipt that gave it its status for good (its
	// first succeeded or failed answer, or the reversal), "" while none.
	SettledBy string `json:"settled_by,omitempty"`

	amt      amount
	sameCurr bool
}

// Compute reads the ledger of the whole record.
func Compute(rec Record) *Ledger { return parse(rec).at(cut{}) }

// ComputeAt reads the ledger as the record stood at until: the events that
// occurred and the objects made no later (an act's own time, for a
// record it signs; a third party recomputes it at the signature's).
func ComputeAt(rec Record, until time.Time) *Ledger { return parse(rec).at(cut{until: until}) }

// ComputeBefore reads the ledger as it stood when the event at sequence
// seq was appended at time at: the events before it and the objects made
// no later. The record keeps every event, so that a response a later
// event records is not taken for one that rode an earlier event.
func ComputeBefore(rec Record, seq int, at time.Time) *Ledger {
	return parse(rec).at(cut{before: seq, until: at})
}

// Balance returns an obligation's balance, or nil when the record (at
// this point) issued none by that id.
func (l *Ledger) Balance(obligationID string) *Balance {
	if i, ok := l.byID[obligationID]; ok {
		return &l.Obligations[i]
	}
	return nil
}

// at computes the ledger at a point of the record.
func (p *parsed) at(c cut) *Ledger { return p.compute(c, true) }

// compute computes the ledger at c, with the settlement adjustments in
// force when adjust is set (without, the base an adjustment record is
// drawn from).
func (p *parsed) compute(c cut, adjust bool) *Ledger {
	l := &Ledger{TransactionID: p.txn, Obligations: []Balance{}, p: p, c: c, byID: map[string]int{}}
	agreements := map[string]*fact{}
	for _, f := range p.ofType(c, "agreement") {
		agreements[f.id] = f
	}
	// The acts that end or accept a duty.
	accepts := map[string]*fact{} // obligation → its obligee's first accept response
	waives := map[string]*fact{}
	recorded := p.responsesRecorded(c)
	for _, f := range p.ofType(c, "obligation_response") {
		o := p.byID[str(f.p, "obligation_id")]
		if o == nil || o.typ != "obligation" || f.org != partyOrg(o.p, "obligee") {
			continue // a response by anyone but the obligee ends nothing (obligation §5.2 rule 1)
		}
		switch str(f.p, "response_type") {
		case "accept":
			if accepts[o.id] == nil && recorded(f) {
				accepts[o.id] = f
			}
		case "waive":
			if waives[o.id] == nil {
				waives[o.id] = f
			}
		}
	}
	determined := p.determinedAccepted(c)
	latestAssertion := map[string]*fact{}
	for _, f := range p.ofType(c, "performance_event") {
		latestAssertion[str(f.p, "obligation_id")] = f // record order: the last is the latest
	}
	remainderOf := map[string]string{}
	for _, f := range accepts {
		if rem := str(f.p, "remainder_obligation_id"); rem != "" {
			remainderOf[rem] = str(f.p, "obligation_id")
		}
	}
	var releasedAt time.Time
	released := false
	for _, e := range p.events {
		if !c.hasEvent(e) {
			continue
		}
		switch e.kind {
		case "termination.agreed", "transaction.terminated":
			if !released {
				released, releasedAt = true, e.at
			}
		case "transaction.completed":
			if !l.Completed {
				l.Completed, l.completedAt, l.CompletedBy = true, e.at, e.id
			}
		}
	}
	for _, o := range p.ofType(c, "obligation") {
		b := Balance{
			ObligationID: o.id, Obligor: partyOrg(o.p, "obligor"), Obligee: partyOrg(o.p, "obligee"),
			Quantity: str(o.p, "quantity"), UnitCode: str(o.p, "unit_code"), Status: StatusOpen,
			RemainderOf: remainderOf[o.id], Instructions: []Instruction{}, Adjustments: []string{}, agreement: str(o.p, "agreement_id"),
		}
		if cur, a, ok := moneyAt(o.p, "consideration"); ok {
			b.currency, b.cons, b.hasCons = cur, a, true
		} else if agr := agreements[b.agreement]; agr != nil {
			b.currency, _, _ = moneyAt(sub(sub(agr.p, "terms"), "core"), "total")
		}
		b.places = places(b.currency, b.cons)
		qty, qtyOK := quantity(o.p, "quantity")
		switch {
		case accepts[o.id] != nil:
			r := accepts[o.id]
			b.Status, b.AcceptedBy, b.accHash, b.AcceptedQuantity = StatusAccepted, r.id, r.hash, str(r.p, "accepted_quantity")
		case determined[o.id] != nil:
			d := determined[o.id]
			b.Status, b.AcceptedBy, b.accHash = StatusAccepted, d.id, d.hash
			// A determination accepts what was asserted: the latest
			// assertion's quantity, at most the obligation's (the whole
			// quantity when nothing was asserted).
			b.AcceptedQuantity = b.Quantity
			if a := latestAssertion[o.id]; a != nil {
				if aq, ok := quantity(a.p, "asserted_quantity"); ok && qtyOK && aq.Cmp(qty) < 0 {
					b.AcceptedQuantity = str(a.p, "asserted_quantity")
				}
			}
		case waives[o.id] != nil:
			b.Status = StatusWaived
		case released && o.hasAt && !o.at.After(releasedAt):
			b.Status = StatusReleased
		}
		if b.Status == StatusAccepted && b.hasCons {
			acc, err := decimal.ParseQuantity(b.AcceptedQuantity)
			switch {
			case err != nil || !qtyOK || qty.Sign() <= 0:
				// An acceptance of no readable quantity makes nothing
				// payable (the gate and the verifier say why).
			case acc.Cmp(qty) >= 0:
				b.owed = b.cons
			default:
				b.owed, _ = decimal.Share(b.cons, acc, qty, b.places)
			}
		}
		l.byID[o.id] = len(l.Obligations)
		l.Obligations = append(l.Obligations, b)
	}
	p.instructions(c, l)
	if adjust {
		p.adjustments(c, l)
	}
	for i := range l.Obligations {
		l.Obligations[i].finish()
	}
	return l
}

// responsesRecorded returns whether an answer to an assertion is recorded
// at c: a response event before c names it (acceptance.granted or
// acceptance.rejected), or it rode one (a response no event names, made
// no later than a response event before c: one event answers every
// outstanding assertion, each by its own response, and the objects of one
// act share its time). A response a later event names is not recorded
// yet, whatever its time.
func (p *parsed) responsesRecorded(c cut) func(f *fact) bool {
	named, inCut := map[string]bool{}, map[string]bool{}
	var last time.Time
	seen := false
	for _, e := range p.events {
		if e.kind != "acceptance.granted" && e.kind != "acceptance.rejected" {
			continue
		}
		id := str(e.data, "obligation_response_id")
		named[id] = true
		if c.hasEvent(e) {
			inCut[id] = true
			if !seen || e.at.After(last) {
				last, seen = e.at, true
			}
		}
	}
	return func(f *fact) bool {
		return inCut[f.id] || (!named[f.id] && seen && f.hasAt && !f.at.After(last))
	}
}

// determinedAccepted returns, by obligation, the binding determination in
// force whose state_result takes it to accepted (determination §6;
// obligation §6.1, determination.recorded): the accepting act of an
// obligation whose acceptance was disputed and determined.
func (p *parsed) determinedAccepted(c cut) map[string]*fact {
	dets := p.ofType(c, "determination")
	superseded := map[string]bool{}
	for _, d := range dets {
		if id := str(sub(d.p, "supersedes"), "determination_id"); id != "" {
			superseded[id] = true
		}
	}
	out := map[string]*fact{}
	for _, d := range dets {
		sr := sub(sub(d.p, "outcome"), "state_result")
		if superseded[d.id] || str(d.p, "effect") != "binding" || str(sr, "state") != "accepted" {
			continue
		}
		o := p.byID[str(sr, "subject_id")]
		if o == nil || o.typ != "obligation" || (d.org != partyOrg(o.p, "obligor") && d.org != partyOrg(o.p, "obligee")) {
			continue
		}
		if out[o.id] == nil {
			out[o.id] = d
		}
	}
	return out
}

// recorded returns the instructions the record has recorded at c (named
// by a settlement.instructed event before it) and the caller's own in
// flight, in record order.
func (p *parsed) recorded(c cut) []*fact {
	var out []*fact
	seen := map[string]bool{}
	for _, e := range p.events {
		if !c.hasEvent(e) || e.kind != "settlement.instructed" {
			continue
		}
		id := str(e.data, "settlement_instruction_id")
		if f := p.byID[id]; f != nil && f.typ == "settlement_instruction" && !seen[id] {
			seen[id] = true
			out = append(out, f)
		}
	}
	ids := make([]string, 0, len(p.inFlight))
	for id := range p.inFlight {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if f := p.byID[id]; f != nil && f.typ == "settlement_instruction" && !seen[id] && c.hasFact(f) {
			seen[id] = true
			out = append(out, f)
		}
	}
	return out
}

// instructions adds each recorded instruction, with its status from its
// receipts, to its obligation's balance.
func (p *parsed) instructions(c cut, l *Ledger) {
	receipts := map[string][]*fact{}
	for _, f := range p.ofType(c, "adapter_receipt") {
		id := str(f.p, "settlement_instruction_id")
		receipts[id] = append(receipts[id], f)
	}
	for _, stl := range p.recorded(c) {
		b := l.Balance(str(stl.p, "obligation_id"))
		if b == nil {
			continue
		}
		cur, a, ok := moneyAt(stl.p, "amount")
		in := Instruction{InstructionID: stl.id, Status: InstrInstructed, Receipts: []string{}, Contradicting: []string{}, amt: a,
			sameCurr: ok && cur == b.currency}
		in.Amount = Money{Currency: cur, Amount: str(sub(stl.p, "amount"), "amount")}
		if in.sameCurr {
			in.Amount = money(cur, a, b.places)
		}
		rs := receipts[stl.id]
		sort.SliceStable(rs, func(i, j int) bool {
			ai, _ := intOf(rs[i].p["attempt"])
			aj, _ := intOf(rs[j].p["attempt"])
			if ai != aj {
				return ai < aj
			}
			return rs[i].at.Before(rs[j].at)
		})
		for _, r := range rs {
			if str(r.p, "idempotency_key") != str(stl.p, "idempotency_key") {
				continue // an answer to another question (settlement §4)
			}
			in.Receipts = append(in.Receipts, r.id)
			before := in.Status
			in.Status, ok = Next(in.Status, str(r.p, "status"), str(r.p, "error_code"))
			switch {
			case !ok:
				in.Contradicting = append(in.Contradicting, r.id)
			case in.Status != before && in.Status != InstrPending:
				in.SettledBy = r.id
			}
		}
		if in.sameCurr {
			switch in.Status {
			case InstrInstructed, InstrPending:
				b.inFlight = b.inFlight.Add(a)
			case InstrSucceeded:
				b.paid = b.paid.Add(a)
			case InstrFailed:
				b.failed = b.failed.Add(a)
			case InstrReversed:
				b.rev = b.rev.Add(a)
			}
		}
		b.Instructions = append(b.Instructions, in)
	}
}

// Next is an instruction's status after one more receipt, and false when
// the receipt contradicts a status already settled: succeeded and failed
// are answers for good, which a later receipt never silently changes
// (settlement §4: failures add receipts, never edits); only a reversal,
// reported as such, turns a success into a reversal.
func Next(cur, status, errorCode string) (string, bool) {
	switch cur {
	case InstrInstructed, InstrPending:
		switch status {
		case "succeeded", "failed", "pending":
			return status, true
		}
		return cur, false
	case InstrSucceeded:
		switch {
		case status == "succeeded":
			return cur, true // the same answer again
		case status == "failed" && errorCode == ReversedCode:
			return InstrReversed, true
		}
		return cur, false
	case InstrFailed:
		return cur, status == "failed"
	}
	return cur, false // a reversal is final
}

// finish derives what follows from the sums.
func (b *Balance) finish() {
	fmtm := func(a amount) Money { return money(b.currency, a, b.places) }
	b.Consideration = fmtm(b.cons)
	b.Owed, b.Paid, b.InFlight, b.Failed, b.Reversed, b.Forgone = fmtm(b.owed), fmtm(b.paid), fmtm(b.inFlight), fmtm(b.failed), fmtm(b.rev), fmtm(b.forgone)
	out := b.owed.Sub(b.forgone).Sub(b.paid).Sub(b.inFlight)
	b.Outstanding = fmtm(decimal.Max(out, decimal.Zero()))
	switch b.Status {
	case StatusAccepted:
		b.Settled = b.inFlight.Sign() == 0 && b.paid.Add(b.forgone).Cmp(b.owed) >= 0
	case StatusWaived, StatusReleased:
		b.Settled = true
	}
	switch {
	case b.Settled:
		b.Settlement = SettlementSettled
	case b.Status == StatusOpen:
		b.Settlement = SettlementNotDue
	case b.inFlight.Sign() > 0:
		b.Settlement = SettlementInFlight
	default:
		b.Settlement = SettlementUnpaid
	}
}

// The settlement of a balance, in words.
const (
	SettlementNotDue   = "not_due"
	SettlementUnpaid   = "unpaid"
	SettlementInFlight = "in_flight"
	SettlementSettled  = "settled"
)

// outstanding is what may still be instructed, exactly.
func (b *Balance) outstanding() amount {
	return decimal.Max(b.owed.Sub(b.forgone).Sub(b.paid).Sub(b.inFlight), decimal.Zero())
}

// AcceptingAct returns the act that accepted an obligation (a response or
// a determination) and its content hash: what an instruction's trigger
// binds (settlement §3.2).
func (l *Ledger) AcceptingAct(obligationID string) (id, hash string, ok bool) {
	b := l.Balance(obligationID)
	if b == nil || b.Status != StatusAccepted {
		return "", "", false
	}
	return b.AcceptedBy, b.accHash, true
}

// isTotal reports whether a term path names the agreement's total, the
// consideration (the buyer's to pay) rather than the goods or service.
func isTotal(path string) bool {
	return path == "$.terms.core.total" || strings.HasPrefix(path, "$.terms.core.total.")
}
