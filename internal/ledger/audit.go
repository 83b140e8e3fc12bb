package ledger

// Audit applies every rule of the ledger to a whole record, each where it
// applies: a rule about an object to that object, the rule of an
// instruction at the point its event recorded it, completion's at the
// point of the completion, a receipt's against the record. What it
// returns is what party's acting side would have refused to build and
// its countersigner to sign; the verifier reports it beside the seven
// steps, and the countersigner refuses a message any finding is about.
func Audit(rec Record) []Finding {
	p := parse(rec)
	return p.audit(p.at(cut{}))
}

// audit applies the rules; all is the ledger of the whole record.
func (p *parsed) audit(all *Ledger) []Finding {
	out := []Finding{}
	add := func(f *Finding) {
		if f != nil {
			out = append(out, *f)
		}
	}
	typed := func(id, typ string) *fact {
		if f := p.byID[id]; f != nil && f.typ == typ {
			return f
		}
		return nil
	}
	for _, f := range p.facts {
		switch f.typ {
		case "obligation":
			if agr := typed(str(f.p, "agreement_id"), "agreement"); agr != nil {
				add(Roles(f.val, agr.val))
			}
		case "performance_event":
			if obl := typed(str(f.p, "obligation_id"), "obligation"); obl != nil {
				add(AssertionWithin(obl.val, f.val))
			}
		case "obligation_response":
			obl := typed(str(f.p, "obligation_id"), "obligation")
			if obl == nil || str(f.p, "response_type") != "accept" {
				continue
			}
			add(AcceptanceWithin(obl.val, f.val))
			if rem := typed(str(f.p, "remainder_obligation_id"), "obligation"); rem != nil {
				add(RemainderShare(obl.val, f.val, rem.val))
			}
		case "adapter_receipt":
			add(all.ReceiptAllowed(f.val))
		}
	}
	for _, e := range p.events {
		switch e.kind {
		case "settlement.instructed":
			stl := typed(str(e.data, "settlement_instruction_id"), "settlement_instruction")
			if stl == nil {
				continue // the verifier's guard says the instruction is not held
			}
			at := p.at(cut{before: e.seq, until: e.at})
			a := sub(stl.p, "amount")
			add(at.Instructable(stl.id, str(stl.p, "obligation_id"), Money{Currency: str(a, "currency"), Amount: str(a, "amount")},
				str(stl.p, "payer_organization_id"), str(stl.p, "payee_organization_id")))
		case "transaction.completed":
			add(p.at(cut{before: e.seq, until: e.at}).Completable(e.id))
		}
	}
	for _, s := range p.signatures(cut{}) {
		add(s.why)
	}
	return out
}

// Examine is Compute and Audit over one reading of the record: the
// balances of the whole record and every finding.
func Examine(rec Record) (*Ledger, []Finding) {
	p := parse(rec)
	all := p.at(cut{})
	return all, p.audit(all)
}
