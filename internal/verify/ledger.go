package verify

import (
	"fmt"
	"sort"
	"strings"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
)

// The ledger: party's own rules, kept apart from the seven steps.
//
// After the steps, the verifier reads each transaction's money with
// package ledger (one balance per obligation: owed, paid, in flight,
// forgone, outstanding) and applies the ledger's rules (ledger.Audit:
// roles, a remainder's share, quantities, what an instruction may pay,
// what completion needs, receipts, settlement adjustments). They are
// reported in the report's ledger section, never as checks: no step
// fails for them, and `party verify` exits 0 on a record whose steps all
// verify, so a record another implementation made is judged by the
// specification alone. The countersigner is stricter: a finding about an
// object of the message it is asked to sign is a refusal (Extend).

// LedgerReport is the ledger section of a report.
type LedgerReport struct {
	// Transactions are the balances of each transaction the bundle holds
	// obligations of, by transaction id.
	Transactions []*ledger.Ledger `json:"transactions"`
	// Findings are the ledger's rules the record breaks.
	Findings []ledger.Finding `json:"findings"`
	// Unjudged are the transactions whose money the ledger does not judge,
	// each with why: their stream is not disclosed from its start, or the
	// bundle states it withheld objects the ledger reads (an instruction,
	// a receipt, a response). Their balances are as far as the bundle
	// shows them; a finding could come from what was left out, so none is
	// made.
	Unjudged []string `json:"unjudged"`
}

// moneyPrefixes are the identifier prefixes of the objects a balance
// reads.
var moneyPrefixes = []string{"obl_", "obr_", "prf_", "stl_", "adp_", "det_", "evd_", "agr_"}

// unjudged says why the ledger cannot judge txn's money from this bundle,
// or "".
func (r *run) unjudged(txn string) string {
	if s := r.streamBy["transaction:"+txn]; s == nil || !s.fromStart {
		return txn + ": its event stream is not disclosed from its start"
	}
	if r.in.Disclosure != nil {
		for _, id := range r.in.Disclosure.StatedGaps {
			for _, p := range moneyPrefixes {
				if strings.HasPrefix(id, p) {
					return txn + ": the bundle states it withheld " + id
				}
			}
		}
	}
	return ""
}

// ledgerRecord is the ledger's input for one transaction: its objects and
// its stream's events as the bundle holds them, hashed as recomputed.
func (r *run) ledgerRecord(txn string) ledger.Record {
	rec := ledger.Record{TransactionID: txn, Hash: func(v map[string]any) string {
		if o := r.byID[str(v, "id")]; o != nil && o.recomputed != "" {
			return o.recomputed
		}
		return str(v, "content_hash")
	}}
	for _, o := range r.objs {
		if o.typ != protocol.TransactionEvent && str(o.val, "transaction_id") == txn {
			rec.Objects = append(rec.Objects, o.val)
		}
	}
	if s := r.streamBy["transaction:"+txn]; s != nil {
		for _, e := range s.events {
			rec.Events = append(rec.Events, e.val)
		}
	}
	return rec
}

// ledgers fills the report's ledger section: every transaction of the
// bundle that issued an obligation.
func (r *run) ledgers() LedgerReport {
	out := LedgerReport{Transactions: []*ledger.Ledger{}, Findings: []ledger.Finding{}, Unjudged: []string{}}
	seen := map[string]bool{}
	var txns []string
	for _, o := range r.objs {
		if txn := str(o.val, "transaction_id"); txn != "" && !seen[txn] && o.typ == protocol.Obligation {
			seen[txn] = true
			txns = append(txns, txn)
		}
	}
	sort.Strings(txns)
	for _, txn := range txns {
		l, fs := ledger.Examine(r.ledgerRecord(txn))
		out.Transactions = append(out.Transactions, l)
		if why := r.unjudged(txn); why != "" {
			out.Unjudged = append(out.Unjudged, why)
			continue
		}
		out.Findings = append(out.Findings, fs...)
	}
	return out
}

// ledgerAt is the ledger of txn as it stood before the event at position
// i of stream s: what the guards of settlement.instructed and
// transaction.completed read of acceptances made by determination.
func (r *run) ledgerAt(s *stream, i int) *ledger.Ledger {
	rec := r.ledgerRecord(s.id)
	seq, _ := intAt(s.events[i].payload, "sequence")
	at, _ := timeAt(s.events[i].payload, "occurred_at")
	return ledger.ComputeBefore(rec, int(seq), at)
}

// adjustmentSignature reports adjustment_signature on a party's signature
// over a settlement adjustment record (party's form of a short payment
// both parties sign; ledger, adjust.go): verified when the ledger draws,
// at the signature's time, the record it signs for an obligation of its
// signer's, which is what makes it referenced. One that signs no record
// the ledger draws is left unreferenced (a gap of step 7), and the
// ledger's own finding says why.
func (r *run) adjustmentSignature(o *object) {
	if str(o.payload, "claim") != ledger.AdjustmentClaim || str(o.payload, "evidence_type") != "signed_document" {
		return
	}
	txn := str(o.val, "transaction_id")
	if obl, hash, ok := ledger.SignedRecord(r.ledgerRecord(txn), o.id); ok {
		r.referenced[o.id] = true
		r.add(5, "adjustment_signature", o.subject, Verified, "", fmt.Sprintf("%s signs the settlement adjustment record of %s (%s)", createdBy(o), obl, short(hash)))
	}
}
