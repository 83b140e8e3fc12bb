package ledger

import (
	"sort"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
)

// Settlement adjustments: a short payment both parties signed.
//
// The kernel has no object for an adjustment ("credits, refunds, and
// adjustments use a signed direction field on their own object", money's
// schema says, and names none), so an adjustment is a record both
// parties compute from the record and sign, as a termination or a
// remediation is (docs/record-protocol.md): the RFC 8785 document
//
//	{"record_type": "settlement_adjustment", "transaction_id",
//	 "agreement_id", "obligation_id",
//	 "owed": the accepted share payable, "paid": what succeeded,
//	 "forgone": owed − paid,
//	 "settlement_instruction_ids": the succeeded instructions counted}
//
// as the ledger stands when a party signs it, each party signing its
// SHA-256 by an evidence object of type signed_document (claim
// AdjustmentClaim, artifact_hash the hash, issuer itself). Both
// signatures over one hash are "the payee accepts these payments as
// settlement in full": the obligation's balance then counts forgone as
// settled. Every member is in the record, so a third party recomputes the
// record at each signature's time and recognises it; nothing a party
// states is taken on its word.
//
// A record is drawn only for an accepted obligation with nothing in
// flight (money on its way lands first) and something left unpaid, and
// at most one holds per obligation.

// AdjustmentClaim is the claim of the signed_document by which a party
// signs a settlement adjustment record (free text: only its equality is
// read).
const AdjustmentClaim = "Accepts the settlement adjustment whose record's SHA-256 is this artifact_hash as settlement in full"

// AdjustmentRecord returns the settlement adjustment record of an
// obligation at this point of the record, and its hash, or the finding
// that says why none can be drawn now.
func (l *Ledger) AdjustmentRecord(obligationID string) (map[string]any, string, *Finding) {
	b := l.Balance(obligationID)
	switch {
	case b == nil:
		return nil, "", finding("adjustment_record", obligationID, reason.ObligationSubjectUnreferenced, "obligation %s is not issued in this record", obligationID)
	case b.Status != StatusAccepted:
		return nil, "", finding("adjustment_record", obligationID, reason.SettlementTriggerAbsent,
			"obligation %s is %s: only the share of an accepted obligation is owed, and only what is owed can be settled short", obligationID, b.Status)
	case len(b.Adjustments) > 0:
		return nil, "", finding("adjustment_record", obligationID, reason.StateTransitionDenied,
			"obligation %s is settled by adjustment %s already", obligationID, b.Adjustments[0])
	case b.inFlight.Sign() > 0:
		return nil, "", finding("adjustment_record", obligationID, reason.StateTransitionDenied,
			"%s %s of obligation %s is in flight: the rail answers it before the rest is settled short", b.InFlight.Amount, b.currency, obligationID)
	case b.paid.Cmp(b.owed) >= 0:
		return nil, "", finding("adjustment_record", obligationID, reason.StateTransitionDenied,
			"obligation %s is paid in full (%s of %s %s): there is nothing to forgo", obligationID, b.Paid.Amount, b.Owed.Amount, b.currency)
	}
	ids := []any{}
	for _, in := range b.Instructions {
		if in.Status == InstrSucceeded && in.sameCurr {
			ids = append(ids, in.InstructionID)
		}
	}
	mon := func(a amount) map[string]any {
		m := money(b.currency, a, b.places)
		return map[string]any{"currency": m.Currency, "amount": m.Amount}
	}
	rec := map[string]any{
		"record_type":                "settlement_adjustment",
		"transaction_id":             l.TransactionID,
		"agreement_id":               b.agreement,
		"obligation_id":              b.ObligationID,
		"owed":                       mon(b.owed),
		"paid":                       mon(b.paid),
		"forgone":                    mon(b.owed.Sub(b.paid)),
		"settlement_instruction_ids": ids,
	}
	h, err := canonical.Hash(rec)
	if err != nil {
		return nil, "", finding("adjustment_record", obligationID, reason.TermsInvalid, "the adjustment record does not encode: %v", err)
	}
	return rec, h, nil
}

// signature is one party's signature over an adjustment record, as read
// from the record.
type signature struct {
	f          *fact
	obligation string // the obligation whose record it signs, "" when none
	forgone    amount
	why        *Finding // why it signs no record, when it does not
}

// isAdjustmentSignature reports whether an evidence object is a party's
// signature over an adjustment record.
func isAdjustmentSignature(f *fact) bool {
	return f.typ == "evidence" && str(f.p, "evidence_type") == "signed_document" && str(f.p, "claim") == AdjustmentClaim
}

// signatures recognises every adjustment signature at c: the record of
// which obligation, drawn at the signature's time, it signs.
func (p *parsed) signatures(c cut) []signature {
	var out []signature
	for _, f := range p.ofType(c, "evidence") {
		if !isAdjustmentSignature(f) {
			continue
		}
		s := signature{f: f}
		if str(sub(f.p, "issuer"), "organization_id") != f.org || !f.hasAt {
			s.why = finding("adjustment_signature", f.id, reason.EvidenceSignatureInvalid, "%s is not its issuer's own signature over a record", f.id)
			out = append(out, s)
			continue
		}
		// The record as the ledger stood when it was signed, without
		// adjustments (one holds per obligation at most).
		base := p.compute(cut{until: f.at}, false)
		hash := str(f.p, "artifact_hash")
		for _, b := range base.Obligations {
			if f.org != b.Obligor && f.org != b.Obligee {
				continue
			}
			rec, h, why := base.AdjustmentRecord(b.ObligationID)
			if why != nil || h != hash {
				continue
			}
			s.obligation = b.ObligationID
			_, s.forgone, _ = moneyAt(rec, "forgone")
			break
		}
		if s.obligation == "" {
			s.why = finding("adjustment_signature", f.id, reason.EvidenceHashMismatch,
				"%s signs %s, which is no settlement adjustment record this record draws at %s (one is drawn for an accepted obligation of the signer's, nothing in flight, something unpaid)",
				f.id, hash, f.at.Format(time.RFC3339))
		}
		out = append(out, s)
	}
	return out
}

// adjustments applies the adjustments in force at c: both parties of an
// obligation signed one record of it.
func (p *parsed) adjustments(c cut, l *Ledger) {
	sigs := p.signatures(c)
	type key struct{ obl, hash string }
	by := map[key]map[string]*fact{}
	var order []key
	for _, s := range sigs {
		if s.obligation == "" {
			continue
		}
		k := key{s.obligation, str(s.f.p, "artifact_hash")}
		if by[k] == nil {
			by[k] = map[string]*fact{}
			order = append(order, k)
		}
		if by[k][s.f.org] == nil {
			by[k][s.f.org] = s.f
		}
	}
	forgone := map[key]amount{}
	for _, s := range sigs {
		if s.obligation != "" {
			forgone[key{s.obligation, str(s.f.p, "artifact_hash")}] = s.forgone
		}
	}
	// Earliest agreed first: the first adjustment both signed holds.
	agreedAt := func(k key) time.Time {
		var t time.Time
		for _, f := range by[k] {
			if f.at.After(t) {
				t = f.at
			}
		}
		return t
	}
	sort.SliceStable(order, func(i, j int) bool { return agreedAt(order[i]).Before(agreedAt(order[j])) })
	for _, k := range order {
		b := l.Balance(k.obl)
		if b == nil || by[k][b.Obligor] == nil || by[k][b.Obligee] == nil || len(b.Adjustments) > 0 {
			continue
		}
		b.forgone = forgone[k]
		b.Adjustments = append(b.Adjustments, k.hash)
	}
}

// SignedRecord says which obligation's adjustment record an adjustment
// signature of the record signs, as the record stood at the signature's
// time, and the record's hash: what a verifier recognises the signature by
// (it is not otherwise referenced). ok is false when the evidence is no
// adjustment signature, or signs no record the ledger draws.
func SignedRecord(rec Record, evidenceID string) (obligationID, hash string, ok bool) {
	p := parse(rec)
	f := p.byID[evidenceID]
	if f == nil || !isAdjustmentSignature(f) || !f.hasAt {
		return "", "", false
	}
	for _, s := range p.signatures(cut{until: f.at}) {
		if s.f.id == evidenceID && s.obligation != "" {
			return s.obligation, str(f.p, "artifact_hash"), true
		}
	}
	return "", "", false
}
