package record

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/pattern"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// The working set verify.Extend checks an extension over. It holds what
// the verifier's rules read about the message's objects, and nothing that
// grows with the transaction's history:
//
//   - every object the new objects name by id, and what those name, three
//     references deep (an event names its decision and the object it
//     concerns; a response names its obligation and assertion; an
//     obligation its agreement; an agreement its offer and acceptance);
//   - the event the new one extends (the head), and for agreement.committed
//     the agreement.direct event its guard looks back to;
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
//   - both organisations' key records (not those of the instance's other
//     counterparties), and the mandates the objects above name, with
//     the mandates they were delegated from (not every mandate held).

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

// workingSet returns the held objects and the mandates an extension of txn
// by news is checked with.
func (e *Engine) workingSet(ctx context.Context, st *state, news []*Obj) (held []map[string]any, mandates []map[string]any, err error) {
	seen := map[string]bool{}
	for id := range st.excluded {
		seen[id] = true // never read: not part of this record
	}
	for _, o := range news {
		seen[o.ID()] = true
	}
	var add func(o *Obj, depth int)
	addID := func(id string, depth int) {
		// The prefix first: most strings a payload holds are not
		// identifiers, and a map lookup costs less than the pattern.
		if seen[id] || len(id) < 4 || !followed[id[:3]] || !idPattern.MatchString(id) {
			return
		}
		seen[id] = true
		o, err := e.get(ctx, id)
		if err != nil || (o.Txn() != "" && o.Txn() != st.t.ID) {
			return // not held here: the check that needs it says so
		}
		add(o, depth)
	}
	add = func(o *Obj, depth int) {
		held = append(held, o.m)
		if depth >= 3 {
			return
		}
		walkStrings(o.Payload(), func(s string) { addID(s, depth+1) })
	}
	for _, o := range news {
		walkStrings(o.Payload(), func(s string) { addID(s, 1) })
	}
	addAll := func(list []*Obj) {
		for _, o := range list {
			if !seen[o.ID()] {
				seen[o.ID()] = true
				held = append(held, o.m)
			}
		}
	}
	var event *Obj
	for _, o := range news {
		if o.Type() == protocol.TransactionEvent {
			event = o
		}
	}
	txn := st.t.ID
	if st.known && st.t.HeadSequence > 0 {
		// The head, and the events a guard looks back to: those that
		// shape the transaction (formation, each obligation's issue and
		// acceptance, each instruction, the latest rejection), bounded by
		// what the transaction holds, not by how long it ran. Completion
		// seals the whole chain, so it reads the whole chain.
		var rows []store.Event
		var err error
		if event != nil && wholeChain(event.EventType()) {
			rows, err = e.o.Store.Events(ctx, txn)
		} else {
			rows, err = e.o.Store.EventsOfTypes(ctx, txn, string(protocol.EvAgreementDirect), string(protocol.EvAgreementCommitted),
				string(protocol.EvAgreementAmended), string(protocol.EvObligationActivated), string(protocol.EvAcceptanceGranted),
				string(protocol.EvSettlementInstructed), string(protocol.EvExceptionOpened), string(protocol.EvTransactionCompleted),
				string(protocol.EvTerminationAgreed), string(protocol.EvTransactionTerminated))
			if err == nil {
				rows, err = withLatestRejection(ctx, e.o.Store, txn, rows)
			}
		}
		if err != nil {
			return nil, nil, err
		}
		if head, err := e.o.Store.EventAt(ctx, txn, st.t.HeadSequence); err == nil {
			rows = append(rows, head)
		}
		for _, x := range rows {
			if x.Status != store.EventRecorded || seen[x.EventID] {
				continue
			}
			o, err := e.get(ctx, x.EventID)
			if err != nil {
				return nil, nil, err
			}
			seen[x.EventID] = true
			held = append(held, o.m)
			walkStrings(o.PSub("data"), func(s string) { addID(s, 2) })
		}
	}
	types := []protocol.ObjectType{protocol.Offer, protocol.Approval, protocol.Obligation, protocol.ObligationResponse}
	switch {
	case event != nil && event.EventType() == protocol.EvAgreementCommitted:
		types = append(types, protocol.PolicyDecision, protocol.Acceptance, protocol.Agreement, protocol.Commitment)
	case event != nil && event.EventType() == protocol.EvAgreementAmended:
		types = append(types, protocol.Agreement)
	case event != nil && event.EventType() == protocol.EvTerminationAgreed:
		types = append(types, protocol.Evidence)
	case event != nil && event.EventType() == protocol.EvTransactionCompleted:
		types = append(types, protocol.Settlement, protocol.AdapterReceipt) // every obligation's payment
	case event != nil && (event.EventType() == protocol.EvRemediationAccepted || event.EventType() == protocol.EvTransactionTerminated):
		types = append(types, protocol.Evidence) // the signatures over the record, which no id names
	case event != nil && event.EventType() == protocol.EvExceptionResolved:
		types = append(types, protocol.Determination)
	case event != nil && event.EventType() == protocol.EvDeadlineElapsed:
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
		if o.Type() != protocol.Dispute && o.Type() != protocol.Determination {
			continue
		}
		// Its agreements too: the act it is (verify's standaloneApproval)
		// is made over the terms in force.
		types = append(types, protocol.Dispute, protocol.Determination, protocol.Evidence, protocol.Agreement)
		dsp := o
		if o.Type() == protocol.Determination {
			if d, err := e.get(ctx, o.P("dispute_id")); err == nil {
				dsp = d
			}
		}
		if subj, err := e.get(ctx, dsp.P("subject_id")); err == nil && subj.Txn() == txn && !seen[subj.ID()] {
			seen[subj.ID()] = true
			held = append(held, subj.m)
		}
	}
	// The types in order, each run of them without the responses in one
	// read: the held list is what one read per type gave.
	for len(types) > 0 {
		var list []*Obj
		var err error
		if types[0] == protocol.ObligationResponse {
			// Not the reject responses (see withLatestRejection); a kept
			// event names the one it records. Accept and waive are the
			// others (the schema's enum, held by the gate).
			list, err = parseAll(e)(e.o.Store.ObligationResponsesOfTypes(ctx, txn, string(protocol.ResponseAccept), string(protocol.ResponseWaive)))
			types = types[1:]
		} else {
			var run []string
			for len(types) > 0 && types[0] != protocol.ObligationResponse {
				run = append(run, string(types[0]))
				types = types[1:]
			}
			list, err = parseAll(e)(e.o.Store.TransactionObjectsOfTypes(ctx, txn, run...))
		}
		if err != nil {
			return nil, nil, err
		}
		addAll(list)
	}
	krs, err := e.keyRecords(ctx)
	if err != nil {
		return nil, nil, err
	}
	own := e.o.Config().OrganizationID
	for _, k := range krs {
		if c := k.P("controller_organization_id"); c == own || c == st.t.Counterparty {
			addAll([]*Obj{k})
		}
	}
	named := map[string]bool{}
	for _, m := range held {
		mandatesNamed(m, named)
	}
	for _, o := range news {
		mandatesNamed(o.m, named)
	}
	ms, err := e.mandatesOf(ctx, st.t.Counterparty, named)
	return held, ms, err
}

// mandatesNamed adds to named the mandates object m names: the one its
// creator acted under, and any a payload names (a policy decision's
// mandate_ids, say).
func mandatesNamed(m map[string]any, named map[string]bool) {
	if id := str(sub(m, "created_by")["mandate_id"]); id != "" {
		named[id] = true
	}
	walkStrings(m["payload"], func(s string) {
		if len(s) > 4 && s[:4] == "mnd_" {
			named[s] = true
		}
	})
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
func ledgerReads(news []*Obj) int {
	level := ledgerNone
	for _, o := range news {
		switch o.Type() {
		case protocol.Settlement:
			return ledgerBalances
		case protocol.Evidence:
			if o.P("claim") == ledger.AdjustmentClaim {
				return ledgerBalances
			}
		case protocol.TransactionEvent:
			if t := o.EventType(); t == protocol.EvSettlementInstructed || t == protocol.EvTransactionCompleted {
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
// later guard reads but the time of the latest response (verify's
// accepted), and a transaction whose obligor asserts again and again
// would otherwise carry every round into each act's working set (growth
// with history, issue 13). It is read alone (store.LatestEventOfType), so
// the rounds before it are not even read. The rejected responses are left
// out of the working set likewise (workingSet), but for those a kept
// event names: no rule reads a reject response but the guard of the event
// that records it.
func withLatestRejection(ctx context.Context, st *store.Store, txn string, rows []store.Event) ([]store.Event, error) {
	x, err := st.LatestEventOfType(ctx, txn, string(protocol.EvAcceptanceRejected))
	if errors.Is(err, store.ErrNotFound) {
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(rows, x.Sequence, func(e store.Event, seq int) int { return cmp.Compare(e.Sequence, seq) })
	return slices.Insert(rows, i, x), nil
}

// wholeChain reports whether an event's guard reads the whole chain: a
// completion seals it, and a termination's record names every obligation
// the chain left open.
func wholeChain(t protocol.EventType) bool {
	return t == protocol.EvTransactionCompleted || t == protocol.EvTerminationAgreed || t == protocol.EvTransactionTerminated
}

// eventAt reads the event at a position of a transaction.
func (e *Engine) eventAt(ctx context.Context, txn string, seq int) (*Obj, error) {
	ev, err := e.o.Store.EventAt(ctx, txn, seq)
	if err != nil {
		return nil, err
	}
	return e.get(ctx, ev.EventID)
}

// keyRecords returns every key record held (of every organisation), by
// the object-type index, read again only once one was stored or changed,
// by any process (store.KeyObjectsCache). The list is shared: callers
// only read it.
func (e *Engine) keyRecords(ctx context.Context) ([]*Obj, error) {
	return e.kr.Get(ctx, e.o.Store, func(ctx context.Context) ([]*Obj, error) {
		return parseAll(e)(e.o.Store.ObjectsOfType(ctx, string(protocol.KeyRecord)))
	})
}

// mandatesOf returns the mandates of named held of this organisation and
// of peer, with the mandates they were delegated from, decoded, in id
// order. Only those the working set's objects name: the mandates an
// instance holds grow with its transactions (a mandate scoped to one
// transaction, as the demo issues them) and with its counterparties, and
// a verifier reads a mandate only where an object names it (the export
// carries the same ones).
func (e *Engine) mandatesOf(ctx context.Context, peer string, named map[string]bool) ([]map[string]any, error) {
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
			r, err := e.o.Store.GetMandate(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // not held: the check that needs it says so
			}
			if err != nil {
				return nil, err
			}
			if r.Origin != originLocal && r.Origin != peer {
				continue
			}
			m, err := e.parse(r.Body)
			if err != nil {
				return nil, err
			}
			out = append(out, m.m)
			if p := str(m.m["parent_mandate_id"]); p != "" {
				next = append(next, p)
			}
		}
		ids = next
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return cmp.Compare(str(a["id"]), str(b["id"])) })
	return out, nil
}

// walkStrings calls f on every string in v, at any depth.
func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, y := range x {
			walkStrings(y, f)
		}
	case []any:
		for _, y := range x {
			walkStrings(y, f)
		}
	}
}

// testingOnlyWorkingSet, when set, is told the size of every working set
// extend builds (objects held, mandates), with its transaction (a test
// that history does not grow it).
var testingOnlyWorkingSet atomic.Pointer[func(txn string, n, mandates int)]

// readWorkingSet reads the working set and the key set, a dozen reads or
// so, in one read transaction (store.Snapshot), ended before the rules
// run.
func (e *Engine) readWorkingSet(ctx context.Context, st *state, news []*Obj) (held, mandates []map[string]any, ks *keys.KeySet, err error) {
	ctx, done := e.o.Store.Snapshot(ctx)
	defer done()
	if held, mandates, err = e.workingSet(ctx, st, news); err != nil {
		return nil, nil, nil, err
	}
	ks, err = e.keySet(ctx, st.t.Counterparty)
	return held, mandates, ks, err
}

// extend runs the verifier's rules over the record of st extended by
// news (verify.Extend) and returns their refusal, if any. awaiting names
// new objects this instance is about to sign besides an event.
func (e *Engine) extend(ctx context.Context, st *state, news []*Obj, awaiting ...string) error {
	held, mandates, ks, err := e.readWorkingSet(ctx, st, news)
	if err != nil {
		return err
	}
	if f := testingOnlyWorkingSet.Load(); f != nil {
		(*f)(st.t.ID, len(held), len(mandates))
	}
	vals := make([]map[string]any, len(news))
	for i, o := range news {
		vals[i] = o.m
	}
	// Only a check that did not verify decides anything here (Err): the
	// verified ones are counted, not listed.
	out := verify.Extend(verify.Extension{Held: held, New: vals, Mandates: mandates, Keys: ks, Awaiting: awaiting},
		verify.Options{RulesVersion: RulesVersion, Now: e.o.Clock(), CountVerified: true, Memo: &e.sigs})
	if err := out.Err(); err != nil {
		return err
	}
	return nil
}
