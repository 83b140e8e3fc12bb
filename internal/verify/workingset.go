package verify

import (
	"cmp"
	"context"
	"slices"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/pattern"
	"github.com/partyd/party/internal/protocol"
)

// What the countersigner reads.
//
// Extend checks an extension over a working set, not the whole record:
// what the rules read about the message's objects, and nothing that grows
// with the transaction's history (issue 13). Which objects those are is a
// fact about the rules, so it is decided here, beside them, and read
// through a Reader: the record engine's store, a bundle directory, or a
// test's map implements it. Gather is that read; it writes nothing.
//
// The working set holds
//
//   - every object the new objects name by id, and what those name, three
//     references deep (an event names its decision and the object it
//     concerns; a response names its obligation and assertion; an
//     obligation its agreement; an agreement its offer and acceptance);
//   - the event the new one extends (the head), and the events a guard
//     looks back to: those that shape the transaction (formation, each
//     obligation's issue and acceptance, each instruction, the latest
//     rejection), or the whole chain for an event that seals it;
//   - the small sets a rule looks across: the session's offers (an offer
//     superseded is not current), the transaction's approvals (an approval
//     bound to another act), its obligations and their responses (due
//     conditions that wait on each other, what is accepted or waived), at
//     formation's commit its policy decisions (the offer's and the
//     countersigner's acts, which have no event), at an amendment its
//     agreements, and at a termination its evidence (the parties'
//     signatures over the termination record, which no id names); a
//     remediation's evidence likewise, and with a dispute or a
//     determination the transaction's disputes, determinations and
//     evidence, and the dispute's subject (an event, perhaps); at an
//     expiry its policy decisions (the offer's withdrawal, if any);
//   - both parties' key records (not those of other organisations), and
//     the mandates the objects above name, with the mandates they were
//     delegated from (not every mandate held).

// Reader is what Gather reads a record through. Every value it returns is
// decoded strictly from the bytes held and is only read.
type Reader interface {
	// Object returns the object with id; an error when it is not held.
	Object(ctx context.Context, id string) (map[string]any, error)
	// Events returns txn's events of the given event types, every event
	// when none is given, in sequence order.
	Events(ctx context.Context, txn string, types ...string) ([]EventRef, error)
	// LatestEvent returns txn's latest event of type typ; ok is false
	// when it has none.
	LatestEvent(ctx context.Context, txn, typ string) (ref EventRef, ok bool, err error)
	// EventAt returns txn's event at position seq; ok is false when it
	// has none there.
	EventAt(ctx context.Context, txn string, seq int) (ref EventRef, ok bool, err error)
	// Objects returns txn's objects of the given object types.
	Objects(ctx context.Context, txn string, types ...string) ([]map[string]any, error)
	// Responses returns txn's obligation responses of the given response
	// types.
	Responses(ctx context.Context, txn string, types ...string) ([]map[string]any, error)
	// KeyRecords returns every key record held, of any organisation.
	KeyRecords(ctx context.Context) ([]map[string]any, error)
	// Mandate returns the mandate with id; ok is false when none is held
	// that the record's parties could rely on.
	Mandate(ctx context.Context, id string) (m map[string]any, ok bool, err error)
}

// EventRef is an event's place in its transaction.
type EventRef struct {
	ID       string
	Sequence int
	// Recorded is false for an event still awaiting its countersignature,
	// which is not yet part of the record.
	Recorded bool
}

// Tip is the record an extension extends.
type Tip struct {
	// Transaction is the transaction's id.
	Transaction string
	// Head is the position of its latest event held, 0 when none is.
	Head int
	// Parties are the two organisations of the transaction, whose key
	// records the working set holds.
	Parties [2]string
	// Excluded are objects held that are not part of the record being
	// extended (this party's own act at the same position, giving way).
	Excluded map[string]bool
}

// idPattern matches a value that names an object by id: a registered
// prefix, an underscore, an identifier body (canonical model §3).
var idPattern = pattern.MustCompile(`^[a-z]{3}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)

// followed are the prefixes of objects a working set follows references
// to: transaction objects, never events (only the head) and never a
// mandate (mandates are collected separately).
var followed = map[string]bool{
	"off": true, "acc": true, "agr": true, "cmt": true, "obl": true, "obr": true,
	"prf": true, "evd": true, "pol": true, "apr": true, "stl": true, "adp": true,
	"dsp": true, "det": true, "exc": true,
}

// Gather reads through r the working set an extension of the record at
// tip by news is checked over, and returns it as an Extension for Extend
// (Keys and Awaiting left to the caller).
func Gather(ctx context.Context, r Reader, tip Tip, news []map[string]any) (Extension, error) {
	x := Extension{New: news}
	txn := tip.Transaction
	seen := map[string]bool{}
	for id := range tip.Excluded {
		seen[id] = true // never read: not part of this record
	}
	for _, o := range news {
		seen[str(o, "id")] = true
	}
	var add func(o map[string]any, depth int)
	addID := func(id string, depth int) {
		// The prefix first: most strings a payload holds are not
		// identifiers, and a map lookup costs less than the pattern.
		if seen[id] || len(id) < 4 || !followed[id[:3]] || !idPattern.MatchString(id) {
			return
		}
		seen[id] = true
		o, err := r.Object(ctx, id)
		if err != nil || (str(o, "transaction_id") != "" && str(o, "transaction_id") != txn) {
			return // not held here: the check that needs it says so
		}
		add(o, depth)
	}
	add = func(o map[string]any, depth int) {
		x.Held = append(x.Held, o)
		if depth >= 3 {
			return
		}
		canonical.WalkStrings(o["payload"], func(s string) { addID(s, depth+1) })
	}
	for _, o := range news {
		canonical.WalkStrings(o["payload"], func(s string) { addID(s, 1) })
	}
	addAll := func(list []map[string]any) {
		for _, o := range list {
			if id := str(o, "id"); !seen[id] {
				seen[id] = true
				x.Held = append(x.Held, o)
			}
		}
	}
	event := ""
	for _, o := range news {
		if objectType(o) == protocol.TransactionEvent {
			p, _ := objAt(o, "payload")
			event = str(p, "event_type")
		}
	}
	if tip.Head > 0 {
		// The head, and the events a guard looks back to: those that
		// shape the transaction, bounded by what the transaction holds,
		// not by how long it ran. Completion seals the whole chain, so
		// it reads the whole chain.
		var rows []EventRef
		var err error
		if wholeChain(event) {
			rows, err = r.Events(ctx, txn)
		} else {
			rows, err = r.Events(ctx, txn, string(protocol.EvAgreementDirect), string(protocol.EvAgreementCommitted),
				string(protocol.EvAgreementAmended), string(protocol.EvObligationActivated), string(protocol.EvAcceptanceGranted),
				string(protocol.EvSettlementInstructed), string(protocol.EvExceptionOpened), string(protocol.EvTransactionCompleted),
				string(protocol.EvTerminationAgreed), string(protocol.EvTransactionTerminated))
			if err == nil {
				rows, err = withLatestRejection(ctx, r, txn, rows)
			}
		}
		if err != nil {
			return x, err
		}
		if head, ok, err := r.EventAt(ctx, txn, tip.Head); err == nil && ok {
			rows = append(rows, head)
		}
		for _, ev := range rows {
			if !ev.Recorded || seen[ev.ID] {
				continue
			}
			o, err := r.Object(ctx, ev.ID)
			if err != nil {
				return x, err
			}
			seen[ev.ID] = true
			x.Held = append(x.Held, o)
			p, _ := objAt(o, "payload")
			canonical.WalkStrings(p["data"], func(s string) { addID(s, 2) })
		}
	}
	types := []protocol.ObjectType{protocol.Offer, protocol.Approval, protocol.Obligation, protocol.ObligationResponse}
	switch protocol.EventType(event) {
	case protocol.EvAgreementCommitted:
		types = append(types, protocol.PolicyDecision, protocol.Acceptance, protocol.Agreement, protocol.Commitment)
	case protocol.EvAgreementAmended:
		types = append(types, protocol.Agreement)
	case protocol.EvTerminationAgreed:
		types = append(types, protocol.Evidence)
	case protocol.EvTransactionCompleted:
		types = append(types, protocol.Settlement, protocol.AdapterReceipt) // every obligation's payment
	case protocol.EvRemediationAccepted, protocol.EvTransactionTerminated:
		types = append(types, protocol.Evidence) // the signatures over the record, which no id names
	case protocol.EvExceptionResolved:
		types = append(types, protocol.Determination)
	case protocol.EvDeadlineElapsed:
		types = append(types, protocol.PolicyDecision) // an offer's withdrawal, which no id names
	}
	switch ledgerReads(news) {
	case ledgerBalances:
		// The ledger's rules (ledger.Audit, in the verifier's run) weigh
		// an instruction, a completion or an adjustment against the
		// transaction's money whole: every instruction and receipt, the
		// determinations that accept and the assertions they accept, the
		// adjustment signatures. Read for those few acts only, so that an
		// obligor asserting again and again does not carry every round
		// into each act's working set.
		types = append(types, protocol.Settlement, protocol.AdapterReceipt, protocol.Determination, protocol.PerformanceEvent, protocol.Evidence)
	case ledgerInstructions:
		// A receipt is judged against the instructions recorded.
		types = append(types, protocol.Settlement, protocol.AdapterReceipt)
	}
	// A dispute or determination is read with the transaction's others
	// (a supersession fork is seen across them) and with its subject,
	// which may be an event.
	for _, o := range news {
		t := protocol.ObjectType(objectType(o))
		if t != protocol.Dispute && t != protocol.Determination {
			continue
		}
		// Its agreements too: the act it is (standaloneApproval) is made
		// over the terms in force.
		types = append(types, protocol.Dispute, protocol.Determination, protocol.Evidence, protocol.Agreement)
		dsp := o
		if t == protocol.Determination {
			p, _ := objAt(o, "payload")
			if d, err := r.Object(ctx, str(p, "dispute_id")); err == nil {
				dsp = d
			}
		}
		p, _ := objAt(dsp, "payload")
		if subj, err := r.Object(ctx, str(p, "subject_id")); err == nil && str(subj, "transaction_id") == txn && !seen[str(subj, "id")] {
			seen[str(subj, "id")] = true
			x.Held = append(x.Held, subj)
		}
	}
	// The types in order, each run of them without the responses in one
	// read.
	for len(types) > 0 {
		var list []map[string]any
		var err error
		if types[0] == protocol.ObligationResponse {
			// Not the reject responses (see withLatestRejection); a kept
			// event names the one it records. Accept and waive are the
			// others (the schema's enum, held by the gate).
			list, err = r.Responses(ctx, txn, string(protocol.ResponseAccept), string(protocol.ResponseWaive))
			types = types[1:]
		} else {
			var run []string
			for len(types) > 0 && types[0] != protocol.ObligationResponse {
				run = append(run, string(types[0]))
				types = types[1:]
			}
			list, err = r.Objects(ctx, txn, run...)
		}
		if err != nil {
			return x, err
		}
		addAll(list)
	}
	krs, err := r.KeyRecords(ctx)
	if err != nil {
		return x, err
	}
	for _, k := range krs {
		p, _ := objAt(k, "payload")
		if c := str(p, "controller_organization_id"); c == tip.Parties[0] || c == tip.Parties[1] {
			addAll([]map[string]any{k})
		}
	}
	named := map[string]bool{}
	for _, m := range x.Held {
		mandatesNamed(m, named)
	}
	for _, o := range news {
		mandatesNamed(o, named)
	}
	x.Mandates, err = mandatesOf(ctx, r, named)
	return x, err
}

// mandatesNamed adds to named the mandates object m names: the one its
// creator acted under, and any a payload names (a policy decision's
// mandate_ids, say).
func mandatesNamed(m map[string]any, named map[string]bool) {
	by, _ := objAt(m, "created_by")
	if id := str(by, "mandate_id"); id != "" {
		named[id] = true
	}
	canonical.WalkStrings(m["payload"], func(s string) {
		if len(s) > 4 && s[:4] == "mnd_" {
			named[s] = true
		}
	})
}

// mandatesOf returns the mandates of named that r holds, with the
// mandates they were delegated from, in id order. Only those the working
// set's objects name: the mandates an instance holds grow with its
// transactions and its counterparties, and a verifier reads a mandate
// only where an object names it (the export carries the same ones).
func mandatesOf(ctx context.Context, r Reader, named map[string]bool) ([]map[string]any, error) {
	ids := make([]string, 0, len(named))
	for id := range named {
		ids = append(ids, id)
	}
	var out []map[string]any
	seen := map[string]bool{}
	for len(ids) > 0 {
		next := ids[:0:0]
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			m, ok, err := r.Mandate(ctx, id)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // not held: the check that needs it says so
			}
			out = append(out, m)
			if p := str(m, "parent_mandate_id"); p != "" {
				next = append(next, p)
			}
		}
		ids = next
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return cmp.Compare(str(a, "id"), str(b, "id")) })
	return out, nil
}

// What of the transaction's money a message's ledger rules read.
const (
	ledgerNone         = iota
	ledgerInstructions // the instructions and their receipts
	ledgerBalances     // every balance, whole
)

// ledgerReads says what the ledger's rules read about a message: every
// balance for an instruction, a completion or an adjustment signature;
// the instructions for a receipt; for anything else only what its own
// objects name (an obligation's agreement, an assertion's or a
// response's obligation), which references bring in.
func ledgerReads(news []map[string]any) int {
	level := ledgerNone
	for _, o := range news {
		p, _ := objAt(o, "payload")
		switch protocol.ObjectType(objectType(o)) {
		case protocol.Settlement:
			return ledgerBalances
		case protocol.Evidence:
			if str(p, "claim") == ledger.AdjustmentClaim {
				return ledgerBalances
			}
		case protocol.TransactionEvent:
			if t := protocol.EventType(eventType(p)); t == protocol.EvSettlementInstructed || t == protocol.EvTransactionCompleted {
				return ledgerBalances
			}
		case protocol.AdapterReceipt:
			level = ledgerInstructions
		}
	}
	return level
}

// withLatestRejection adds to rows, events in sequence order, the
// transaction's latest acceptance.rejected: a rejection shapes nothing a
// later guard reads but the time of the latest response (accepted), and
// a transaction whose obligor asserts again and again would otherwise
// carry every round into each act's working set (growth with history,
// issue 13). It is read alone, so the rounds before it are not even
// read. The rejected responses are left out of the working set likewise,
// but for those a kept event names: no rule reads a reject response but
// the guard of the event that records it.
func withLatestRejection(ctx context.Context, r Reader, txn string, rows []EventRef) ([]EventRef, error) {
	x, ok, err := r.LatestEvent(ctx, txn, string(protocol.EvAcceptanceRejected))
	if err != nil || !ok {
		return rows, err
	}
	i, _ := slices.BinarySearchFunc(rows, x.Sequence, func(e EventRef, seq int) int { return cmp.Compare(e.Sequence, seq) })
	return slices.Insert(rows, i, x), nil
}

// wholeChain reports whether an event's guard reads the whole chain: a
// completion seals it, and a termination's record names every obligation
// the chain left open.
func wholeChain(t string) bool {
	switch protocol.EventType(t) {
	case protocol.EvTransactionCompleted, protocol.EvTerminationAgreed, protocol.EvTransactionTerminated:
		return true
	}
	return false
}
