// Package ledger is the money of a transaction: one balance per
// obligation, derived from the record alone, and the rules that keep it
// adding up. It is party's own rule set, beside the specification's: the
// seven steps of evidence verification judge a record as the
// specification does (settlement handoff §3 asks for a trigger, not for
// a sum), and a record another implementation made is judged by them
// alone; the ledger says whether the money in it adds up.
//
// One implementation, three callers (one rule, one place):
//
//   - the acting instance, before it builds an act: instruct_settlement
//     pays at most what is outstanding, complete_transaction completes
//     only what is paid, issue_obligation names the roles the agreement
//     gives, a partial acceptance's remainder keeps its share;
//   - the countersigner, through the verifier's run over the extended
//     record (verify.Extend): a finding about a message's object is a
//     refusal with the finding's code, so the payee's countersignature on
//     transaction.completed means "we were paid what we are owed";
//   - the verifier (`party verify`), which reports every balance and
//     every finding in the report's ledger section, apart from the steps.
//
// # The balance of an obligation
//
// Read from the record (Compute; ComputeAt for the record as it stood at
// a time):
//
//   - owed: nothing until the obligation is accepted; then the accepted
//     share of its consideration, consideration × accepted ÷ quantity,
//     rounded half up to the currency's minor unit (ISO 4217; a code
//     without one, such as XAU, keeps the digits the consideration is
//     written with), all of it when all is accepted. An obligation is
//     accepted by its obligee's accept response, or by a binding
//     determination in force whose state_result is accepted (then the
//     latest assertion's quantity is what is accepted, the determination
//     being the act a settlement trigger binds). A partial acceptance's
//     remainder carries the rest of the consideration
//     ([RemainderConsideration]), so the share and the remainder add up to
//     the consideration exactly, and is owed once it is accepted in turn.
//   - paid, in flight, failed, reversed: the instructions recorded (a
//     settlement.instructed event names them; the acting side adds its
//     own instruction awaiting countersignature as in flight), each with
//     the status its receipts give it, in attempt order: none or pending
//     is in flight; the first succeeded or failed is the answer for good;
//     a later receipt that contradicts it is kept and listed, and changes
//     nothing, except a failed receipt with error_code "reversed" after a
//     success ([ReversedCode]), which reverses it.
//   - forgone: a settlement adjustment both parties signed (adjust.go).
//   - outstanding: owed − forgone − paid − in flight, never below zero:
//     what may still be instructed, whatever the idempotency key.
//
// # The rules
//
//	obligation_roles     an obligation's obligor owes its term under the agreement's roles:
//	                     the supplier the goods or service, the buyer the consideration (Roles)
//	remainder_share      a partial acceptance's remainder carries the rest of the consideration
//	assertion_quantity   an assertion claims no more than the obligation owes, in its unit
//	acceptance_quantity  an acceptance accepts no more than the obligation owes
//	instruction_owed     an instruction pays the obligee's money to the obligor, in its
//	                     currency, after acceptance, no more than is outstanding (Instructable)
//	completion_paid      completion needs every obligation accepted and paid (or settled
//	                     short), nothing in flight, or waived or released (Completable)
//	receipt_recorded     a receipt answers a recorded instruction under its key, before
//	                     completion (ReceiptAllowed)
//	adjustment_signature a settlement adjustment signature signs a record the ledger draws
//
// Audit applies them all over a whole record; each rule is also a
// function the acting side and the countersigner call on their own.
//
// Input is hostile: every member is read with its type checked, and what
// does not read is not counted (the gate and the steps say what is
// malformed). Amounts are exact decimals (package decimal), never
// floating point.
package ledger
