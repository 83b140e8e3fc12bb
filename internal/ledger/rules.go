package ledger

import (
	"errors"
	"fmt"
	"strings"

	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/reason"
)

// Finding is one of party's own rules broken by the record: not one of
// the specification's seven steps (a record another implementation made
// is judged by those alone), but what party's acting side refuses to
// build, its countersigner refuses to sign, and `party verify` reports
// beside the steps.
type Finding struct {
	// Rule names the rule (obligation_roles, instruction_owed, ...).
	Rule string `json:"rule"`
	// Subject is the object or event that breaks it.
	Subject string `json:"subject"`
	// Code is the registered refusal code the rule refuses with.
	Code   reason.Code `json:"code"`
	Detail string      `json:"detail"`
}

func finding(rule, subject string, code reason.Code, format string, args ...any) *Finding {
	return &Finding{Rule: rule, Subject: subject, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Err returns the finding as a refusal carrying its code (nil for nil):
// what the acting side answers its agent, and the countersigner its
// counterparty.
func (f *Finding) Err() error {
	if f == nil {
		return nil
	}
	return reason.Refuse(f.Detail, f.Code)
}

// OwedBy returns which party owes the duty of a term: the buyer owes the
// consideration (a term path at $.terms.core.total), the supplier
// everything else, the goods or the service.
func OwedBy(termPath string) string {
	if isTotal(termPath) {
		return "buyer"
	}
	return "supplier"
}

// Roles is the rule obligation_roles: an obligation's obligor is the
// party of its agreement that owes the term it is issued under, its
// obligee the other (OwedBy), and a duty the buyer owes, the consideration
// itself, carries none of its own (nothing is paid for paying). The
// specification asks only that both are the agreement's parties
// (obligation §3); which way round is party's rule, without which "who
// owes whom" could be swapped by whoever issues the duty.
func Roles(obligation, agreement map[string]any) *Finding {
	p, a := sub(obligation, "payload"), sub(agreement, "payload")
	id := str(obligation, "id")
	path := str(sub(p, "subject"), "term_path")
	owes := OwedBy(path)
	other := "buyer"
	if owes == "buyer" {
		other = "supplier"
	}
	obligor, obligee := partyOrg(p, "obligor"), partyOrg(p, "obligee")
	if want := partyOrg(a, owes); obligor != want || obligee != partyOrg(a, other) {
		return finding("obligation_roles", id, reason.ObligationSubjectUnreferenced,
			"obligation %s names %s as obligor and %s as obligee; under %s the %s (%s) owes %s to the %s (%s)",
			id, orNone(obligor), orNone(obligee), str(agreement, "id"), owes, orNone(want), orNone(path), other, orNone(partyOrg(a, other)))
	}
	if owes == "buyer" && len(sub(p, "consideration")) > 0 {
		return finding("obligation_roles", id, reason.ObligationTermsMutated,
			"obligation %s is the buyer's duty to pay (%s) and carries a consideration of its own", id, path)
	}
	return nil
}

// Share returns the consideration payable for an accepted quantity of an
// obligation: consideration × accepted ÷ quantity, rounded half up to the
// currency's minor unit (ISO 4217; a code without one keeps the
// consideration's own digits); all of it when all is accepted. ok is
// false when the obligation carries no consideration.
func Share(obligation map[string]any, accepted string) (m Money, ok bool, err error) {
	p := sub(obligation, "payload")
	cur, cons, has := moneyAt(p, "consideration")
	if !has {
		return Money{}, false, nil
	}
	qty, qok := quantity(p, "quantity")
	acc, err := decimal.ParseQuantity(accepted)
	if !qok || qty.Sign() <= 0 || err != nil {
		return Money{}, true, errors.New("ledger: the quantities are not quantities")
	}
	pl := places(cur, cons)
	if acc.Cmp(qty) >= 0 {
		return money(cur, cons, pl), true, nil
	}
	s, err := decimal.Share(cons, acc, qty, pl)
	return money(cur, s, pl), true, err
}

// RemainderConsideration returns the consideration of the remainder a
// partial acceptance of accepted units issues: what the obligation's
// consideration leaves once the accepted share is paid, so that the
// share and the remainder always add up to it exactly; nil when the
// obligation carries none. What the acting side builds and the rule
// remainder_share checks.
func RemainderConsideration(obligation map[string]any, accepted string) (map[string]any, error) {
	share, ok, err := Share(obligation, accepted)
	if err != nil || !ok {
		return nil, err
	}
	_, cons, _ := moneyAt(sub(obligation, "payload"), "consideration")
	s, _ := decimal.Parse(share.Amount)
	pl := places(share.Currency, cons)
	return map[string]any{"currency": share.Currency, "amount": cons.Sub(s).Fixed(pl)}, nil
}

// RemainderShare is the rule remainder_share: the remainder a partial
// acceptance names keeps the share of the consideration not yet payable
// (RemainderConsideration), neither nothing (the payee would lose it) nor
// the whole again (the payer would owe it twice).
func RemainderShare(obligation, response, remainder map[string]any) *Finding {
	rid := str(remainder, "id")
	want, err := RemainderConsideration(obligation, str(sub(response, "payload"), "accepted_quantity"))
	if err != nil {
		return nil // the quantities are judged by the verifier's steps
	}
	got := sub(sub(remainder, "payload"), "consideration")
	switch {
	case want == nil && len(got) == 0:
		return nil
	case want == nil:
		return finding("remainder_share", rid, reason.ObligationTermsMutated,
			"remainder %s carries a consideration, and %s, which it is the rest of, carries none", rid, str(obligation, "id"))
	case str(got, "currency") != str(want, "currency") || !sameAmount(str(got, "amount"), str(want, "amount")):
		return finding("remainder_share", rid, reason.ObligationTermsMutated,
			"remainder %s carries %s %s; the share of %s not accepted is %s %s (its consideration less the accepted share)",
			rid, orNone(str(got, "amount")), orNone(str(got, "currency")), str(obligation, "id"), want["amount"], want["currency"])
	}
	return nil
}

func sameAmount(a, b string) bool {
	x, err1 := decimal.Parse(a)
	y, err2 := decimal.Parse(b)
	return err1 == nil && err2 == nil && x.Cmp(y) == 0
}

// AssertionWithin is the rule assertion_quantity: an assertion claims no
// more than the obligation owes, in its unit (an assertion of 25 units
// of a duty of 20 is a claim to be paid for 5 nobody ordered).
func AssertionWithin(obligation, assertion map[string]any) *Finding {
	p, a := sub(obligation, "payload"), sub(assertion, "payload")
	id := str(assertion, "id")
	qty, ok1 := quantity(p, "quantity")
	got, ok2 := quantity(a, "asserted_quantity")
	switch {
	case !ok1 || !ok2:
		return nil // the gate refuses what is not a quantity
	case got.Cmp(qty) > 0:
		return finding("assertion_quantity", id, reason.ObligationTermsMutated,
			"assertion %s claims %s %s of obligation %s, which owes %s", id, str(a, "asserted_quantity"), str(a, "unit_code"), str(obligation, "id"), str(p, "quantity"))
	case str(a, "unit_code") != str(p, "unit_code"):
		return finding("assertion_quantity", id, reason.ObligationTermsMutated,
			"assertion %s is in %s; obligation %s is owed in %s", id, str(a, "unit_code"), str(obligation, "id"), str(p, "unit_code"))
	}
	return nil
}

// AcceptanceWithin is the rule acceptance_quantity: an acceptance accepts
// no more than the obligation owes (what it pays for is its share).
func AcceptanceWithin(obligation, response map[string]any) *Finding {
	p, r := sub(obligation, "payload"), sub(response, "payload")
	id := str(response, "id")
	qty, ok1 := quantity(p, "quantity")
	got, ok2 := quantity(r, "accepted_quantity")
	if ok1 && ok2 && got.Cmp(qty) > 0 {
		return finding("acceptance_quantity", id, reason.ObligationTermsMutated,
			"response %s accepts %s of obligation %s, which owes %s", id, str(r, "accepted_quantity"), str(obligation, "id"), str(p, "quantity"))
	}
	return nil
}

// Instructable is the rule instruction_owed, at this point of the record:
// an instruction of amount, from payer to payee, for an obligation, pays
// the obligation's obligee's money to its obligor, in its consideration's
// currency, after its acceptance, and no more than is outstanding
// (owed − forgone − paid − in flight), whatever its idempotency key. It
// returns nil when the ledger allows it; subject names the instruction
// in a finding.
func (l *Ledger) Instructable(subject, obligationID string, amount Money, payer, payee string) *Finding {
	b := l.Balance(obligationID)
	const rule = "instruction_owed"
	switch {
	case b == nil:
		return finding(rule, subject, reason.SettlementTriggerAbsent, "obligation %s is not issued in this record", obligationID)
	case payer != b.Obligee || payee != b.Obligor:
		return finding(rule, subject, reason.SettlementCustodyRefused,
			"%s pays from %s to %s; the consideration of %s moves from its obligee %s to its obligor %s, and no one else", subject, payer, payee, obligationID, b.Obligee, b.Obligor)
	case b.Status != StatusAccepted:
		return finding(rule, subject, reason.SettlementTriggerAbsent, "obligation %s is %s: nothing has made its consideration due", obligationID, b.Status)
	case !b.hasCons:
		return finding(rule, subject, reason.SettlementTriggerAbsent, "obligation %s carries no consideration: nothing is paid for it", obligationID)
	}
	a, err := decimal.Parse(amount.Amount)
	switch {
	case err != nil:
		return finding(rule, subject, reason.TermsInvalid, "amount %q is not a money amount", amount.Amount)
	case amount.Currency != b.currency:
		return finding(rule, subject, reason.TermsInvalid, "%s pays in %s; obligation %s is paid in %s", subject, orNone(amount.Currency), obligationID, b.currency)
	case a.Sign() <= 0:
		return finding(rule, subject, reason.TermsInvalid, "%s pays %s: an instruction pays a positive amount", subject, amount.Amount)
	case a.Cmp(b.outstanding()) > 0:
		return finding(rule, subject, reason.SettlementTriggerAbsent,
			"%s pays %s %s, and %s %s is outstanding on obligation %s (owed %s, paid %s, in flight %s, forgone %s): nothing has made more due",
			subject, amount.Amount, amount.Currency, b.Outstanding.Amount, b.currency, obligationID, b.Owed.Amount, b.Paid.Amount, b.InFlight.Amount, b.Forgone.Amount)
	}
	return nil
}

// Completable is the rule completion_paid, at this point of the record:
// the transaction completes once every obligation it issued is accepted
// and paid what is owed for it (or settled short by an adjustment both
// signed), with nothing in flight, or is waived or released by a signed
// act. The payee's countersignature on a completion means "we were paid
// what we are owed". It returns nil when the ledger allows completion;
// subject names the completion in a finding.
func (l *Ledger) Completable(subject string) *Finding {
	const rule = "completion_paid"
	if len(l.Obligations) == 0 {
		return finding(rule, subject, reason.StateTransitionDenied, "transaction %s has no obligation to complete", l.TransactionID)
	}
	var why []string
	for _, b := range l.Obligations {
		switch {
		case b.Settled:
		case b.Status == StatusOpen:
			why = append(why, fmt.Sprintf("obligation %s is neither accepted, waived nor released", b.ObligationID))
		case b.inFlight.Sign() > 0:
			why = append(why, fmt.Sprintf("%s %s of obligation %s is in flight", b.InFlight.Amount, b.currency, b.ObligationID))
		default:
			why = append(why, fmt.Sprintf("obligation %s is owed %s %s and was paid %s (forgone %s)", b.ObligationID, b.Owed.Amount, b.currency, b.Paid.Amount, b.Forgone.Amount))
		}
	}
	if len(why) > 0 {
		return finding(rule, subject, reason.StateTransitionDenied, "%s: a transaction completes once every obligation is accepted and paid in full, or settled short by an adjustment both parties signed, or waived or released", strings.Join(why, "; "))
	}
	return nil
}

// ReceiptAllowed is the rule receipt_recorded: a receipt answers an
// instruction this record recorded, under its idempotency key, and comes
// before the transaction completed (completion is terminal: after it no
// rail answer can change what the record says was settled).
func (l *Ledger) ReceiptAllowed(receipt map[string]any) *Finding {
	p := sub(receipt, "payload")
	id := str(receipt, "id")
	stl := str(p, "settlement_instruction_id")
	var in *Instruction
	for i := range l.Obligations {
		for j := range l.Obligations[i].Instructions {
			if l.Obligations[i].Instructions[j].InstructionID == stl {
				in = &l.Obligations[i].Instructions[j]
			}
		}
	}
	f := l.p.byID[stl]
	switch {
	case in == nil || f == nil:
		return finding("receipt_recorded", id, reason.SettlementReceiptUnmatched, "receipt %s answers %s, which this record never recorded as instructed", id, orNone(stl))
	case str(p, "idempotency_key") != str(f.p, "idempotency_key"):
		return finding("receipt_recorded", id, reason.SettlementReceiptUnmatched, "receipt %s answers %s under another idempotency key", id, stl)
	}
	if l.Completed {
		at, ok := timeAt(receipt, "created_at")
		if !ok || at.After(l.completedAt) {
			return finding("receipt_recorded", id, reason.SettlementReceiptUnmatched,
				"receipt %s comes after the transaction completed (%s): nothing is open for a rail to answer", id, l.completedAt.Format("2006-01-02T15:04:05Z"))
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
