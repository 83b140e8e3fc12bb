package verify

import (
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
)

// The guards of settlement.instructed and transaction.completed (pilot
// state machine §5; settlement handoff §2–§6), as far as a bundle shows
// them; the record engine's countersigner applies the same rules live.
//
// settlement.instructed: the instruction it names is held; its trigger's
// accepting_act_hash is the content hash of an accepting response to the
// instruction's obligation, recorded by an acceptance.granted earlier on
// the stream, or of a binding determination in force that accepted it
// (the ledger's reading of the record before the event); it pays from the
// obligation's obligee (the appender) to its obligor; its amount is in the
// consideration's currency, positive and no more than it. Whether it is
// no more than is outstanding is the ledger's rule (instruction_owed),
// reported apart from the steps (ledger.go).
//
// transaction.completed: every obligation of the transaction the bundle
// holds was accepted by an acceptance.granted earlier on the stream (a
// remainder by the acceptance whose response named it) or by a binding
// determination, or waived, and every one with a consideration has an
// instruction recorded earlier on the stream with a succeeded receipt
// (whether they add up to what is owed is the ledger's completion_paid,
// reported apart); when the stream is disclosed from its start,
// audit_bundle_hash is the SHA-256 of the RFC 8785 bytes of
// {"transaction_id", "event_hashes": the content hashes of the events
// before it, in order}.

// accepted returns, for the events before position i of stream s, the
// obligations accepted (the remainders the acceptances issued pending)
// and the responses that accepted them. An acceptance event records the
// response its data names and, as riders, the obligee's other responses
// made with it (docs/record-protocol.md, "Several obligations and riders
// (issue 15, items 6–7)": one event
// answers every outstanding assertion); so an obligation counts as
// accepted by an obligee's accept response made no later than the last
// acceptance event before position i, and as issued when an obligation
// event named it, a response named it as remainder, or it is an
// obligation of the transaction made by then.
func (r *run) accepted(s *stream, i int) (accepted map[string]bool, responses map[string]string, issued map[string]bool) {
	accepted, responses, issued = map[string]bool{}, map[string]string{}, map[string]bool{}
	var lastResponse time.Time
	seenResponse := false
	for j := 0; j < i; j++ {
		p := s.events[j].payload
		data, _ := objAt(p, "data")
		switch eventType(p) {
		case protocol.EvObligationActivated:
			issued[str(data, "obligation_id")] = true
		case protocol.EvAcceptanceGranted, protocol.EvAcceptanceRejected:
			if at, ok := timeAt(p, "occurred_at"); ok {
				lastResponse, seenResponse = at, true
			}
			if eventType(p) != protocol.EvAcceptanceGranted {
				continue
			}
			obl := str(data, "obligation_id")
			accepted[obl] = true
			responses[obl] = str(data, "obligation_response_id")
			if resp, held := r.byID[str(data, "obligation_response_id")]; held {
				if rem := str(resp.payload, "remainder_obligation_id"); rem != "" {
					issued[rem] = true
				}
			}
		}
	}
	if i < len(s.events) {
		if at, ok := timeAt(s.events[i].payload, "occurred_at"); ok {
			txn := str(s.events[i].val, "transaction_id")
			for _, o := range r.obligationsAt(txn, at) {
				issued[o.id] = true
				if !seenResponse || accepted[o.id] {
					continue
				}
				if resp := r.responseOf(o, "accept", lastResponse); resp != nil {
					accepted[o.id], responses[o.id] = true, resp.id
					if rem := str(resp.payload, "remainder_obligation_id"); rem != "" {
						issued[rem] = true
					}
				}
			}
		}
	}
	return accepted, responses, issued
}

func (r *run) instructedGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	stl := r.held(v, data, "settlement_instruction_id", protocol.Settlement)
	if stl == nil {
		return
	}
	p := stl.payload
	oblID := str(p, "obligation_id")
	if named, ok := strAt(data, "obligation_id"); ok && named != oblID {
		v.fail("%s pays %s, the event names %s", stl.subject, oblID, named)
	}
	obl, held := r.byID[oblID]
	if !held || obl.typ != protocol.Obligation {
		v.unsure("the obligation %s is not in the bundle", oblID)
		r.missing(oblID)
		return
	}
	accepted, responses, _ := r.accepted(s, i)
	trigger, _ := objAt(p, "trigger")
	resp, held := r.byID[responses[oblID]]
	if !accepted[oblID] {
		// A binding determination that accepted it is the act its
		// trigger binds (obligation §6.1 determination.recorded).
		if id, hash, ok := r.ledgerAt(s, i).AcceptingAct(oblID); ok && strings.HasPrefix(id, "det_") {
			if str(trigger, "accepting_act_hash") == hash {
				v.pass("%s is triggered by determination %s, which accepted %s", stl.subject, id, oblID)
			} else {
				v.fail("the trigger of %s names %s, not the determination %s that accepted %s", stl.subject, short(str(trigger, "accepting_act_hash")), id, oblID)
			}
			accepted[oblID], held = true, false
		}
	}
	switch {
	case accepted[oblID] && !held && responses[oblID] == "":
		// accepted by determination, judged above
	case !accepted[oblID]:
		v.fail("%s was not accepted before %s: nothing made its consideration due", oblID, e.subject)
	case !held:
		v.unsure("the response that accepted %s is not in the bundle", oblID)
	case str(trigger, "accepting_act_hash") != resp.recomputed:
		v.fail("the trigger of %s names %s, not the response %s that accepted %s", stl.subject, short(str(trigger, "accepting_act_hash")), resp.subject, oblID)
	default:
		v.pass("%s is triggered by the acceptance of %s", stl.subject, oblID)
	}
	by, _ := objAt(e.val, "created_by")
	payer, payee := str(p, "payer_organization_id"), str(p, "payee_organization_id")
	switch {
	case payer != partyOrg(obl.payload, "obligee") || payee != partyOrg(obl.payload, "obligor"):
		v.fail("%s pays from %s to %s; the consideration of %s moves from its obligee to its obligor", stl.subject, payer, payee, oblID)
	case payer != str(by, "organization_id"):
		v.fail("%s is the payer, and %s appended the event", payer, str(by, "organization_id"))
	default:
		v.pass("%s pays from the obligee %s to the obligor %s", stl.subject, payer, payee)
	}
	amount, _ := objAt(p, "amount")
	cons, _ := objAt(obl.payload, "consideration")
	a, err1 := decimal.Parse(str(amount, "amount"))
	c, err2 := decimal.Parse(str(cons, "amount"))
	switch {
	case err1 != nil || err2 != nil || str(amount, "currency") != str(cons, "currency"):
		v.fail("%s pays %s %s against a consideration of %s %s", stl.subject, str(amount, "amount"), str(amount, "currency"), str(cons, "amount"), str(cons, "currency"))
	case a.Sign() <= 0 || a.Cmp(c) > 0:
		v.fail("%s pays %s, outside the consideration %s", stl.subject, str(amount, "amount"), str(cons, "amount"))
	}
}

func (r *run) completedGuard(v *verdict, s *stream, i int, e *object, data map[string]any) {
	txn := str(e.val, "transaction_id")
	accepted, _, issued := r.accepted(s, i)
	instructed := map[string][]string{} // obligation → instructions recorded before
	for j := 0; j < i; j++ {
		p := s.events[j].payload
		if eventType(p) != protocol.EvSettlementInstructed {
			continue
		}
		d, _ := objAt(p, "data")
		if stl, held := r.byID[str(d, "settlement_instruction_id")]; held {
			obl := str(stl.payload, "obligation_id")
			instructed[obl] = append(instructed[obl], stl.id)
		}
	}
	n := 0
	var determined *ledger.Ledger // read once, only when an acceptance was determined
	for _, o := range r.objs {
		if o.typ != protocol.Obligation || str(o.val, "transaction_id") != txn {
			continue
		}
		if !issued[o.id] {
			continue // not an obligation of this record's chain (a newer version, say)
		}
		n++
		if !accepted[o.id] && !r.waived(o.id, e) {
			if determined == nil {
				determined = r.ledgerAt(s, i)
			}
			if id, _, ok := determined.AcceptingAct(o.id); ok && strings.HasPrefix(id, "det_") {
				accepted[o.id] = true
			}
		}
		if !accepted[o.id] && !r.waived(o.id, e) {
			v.fail("%s was neither accepted nor waived before %s", o.subject, e.subject)
			continue
		}
		if c, ok := objAt(o.payload, "consideration"); !ok || len(c) == 0 {
			continue
		}
		paid := false
		for _, stl := range instructed[o.id] {
			for _, rc := range r.objs {
				if rc.typ == protocol.AdapterReceipt && str(rc.payload, "settlement_instruction_id") == stl && str(rc.payload, "status") == "succeeded" {
					paid = true
				}
			}
		}
		if paid {
			v.pass("the consideration of %s was settled (a succeeded receipt)", o.subject)
		} else if !accepted[o.id] {
			continue // waived: nothing to pay
		} else if r.statesWithheld("adp_", "stl_") {
			v.unsure("no instruction of %s with a succeeded receipt is in the bundle, which states it withheld instructions or receipts", o.subject)
		} else {
			v.fail("%s carries a consideration, and no instruction of it recorded before %s has a succeeded receipt", o.subject, e.subject)
		}
	}
	if n == 0 {
		v.fail("no obligation was issued on %s before %s", txn, e.subject)
	}
	if want, ok := strAt(data, "audit_bundle_hash"); ok {
		if !s.fromStart {
			v.unsure("the stream is not disclosed from its start, so the audit bundle hash cannot be recomputed")
		} else {
			hashes := make([]any, 0, i)
			for j := 0; j < i; j++ {
				hashes = append(hashes, s.events[j].recomputed)
			}
			got, err := canonical.Hash(map[string]any{"transaction_id": txn, "event_hashes": hashes})
			if err != nil || got != want {
				v.fail("audit_bundle_hash %s is not the hash of the %d events it seals (%s)", short(want), i, short(got))
			} else {
				v.pass("audit_bundle_hash seals the %d events before it", i)
			}
		}
	}
	if id, ok := strAt(data, "adapter_receipt_id"); ok {
		if rc, held := r.byID[id]; !held || rc.typ != protocol.AdapterReceipt || str(rc.payload, "status") != "succeeded" {
			v.fail("%s names %s, which is not a succeeded receipt of the bundle", e.subject, id)
		}
	}
}

// waived reports whether the bundle holds the obligee's waiver of an
// obligation (obligation §5.2), a waive response by its obligee, made no
// later than event e.
func (r *run) waived(oblID string, e *object) bool {
	obl, held := r.byID[oblID]
	if !held {
		return false
	}
	at, ok := timeAt(e.payload, "occurred_at")
	return ok && r.responseOf(obl, "waive", at) != nil
}

// statesWithheld reports whether the discloser states it withheld an
// object whose identifier has one of prefixes: an absence of such an
// object may be the withholding, which is a gap, never a failure.
func (r *run) statesWithheld(prefixes ...string) bool {
	if r.in.Disclosure == nil {
		return false
	}
	for _, id := range r.in.Disclosure.StatedGaps {
		for _, p := range prefixes {
			if strings.HasPrefix(id, p) {
				return true
			}
		}
	}
	return false
}
