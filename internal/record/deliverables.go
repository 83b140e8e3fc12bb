package record

// Several obligations per agreement (obligation §3: an agreement's
// commitment decomposes into obligations; "Several obligations and riders
// (issue 15, items 6–7)" in docs/record-protocol.md).
//
// An agreement may be performed as several deliverables, each its own
// obligation, with its own term path, quantity, consideration and due
// condition, performed by its own assertion and answered by its own
// response. Together they owe exactly what the agreement's terms owe: the
// quantities (in the terms' unit) sum to the core quantity, and the
// considerations they carry to the core total, in its currency (an
// obligation may carry none). The obligee issues them all at once:
// obligation.activated names the first, and the others ride with it.
//
// The aggregate machine knows one performance cycle (in_performance →
// acceptance_pending → settlement_pending), so the obligations move
// through it together (decided here; the pilot state machine has no rows
// for an obligation set):
//
//   - a performance.declared asserts every obligation still owed (pending
//     or rejected), each by its own assertion with its own evidence: the
//     declaration is what takes the transaction out of in_performance, and
//     an obligation left unasserted then could never be asserted;
//   - the obligee's response event answers every outstanding assertion,
//     each by its own response: acceptance.granted when every response
//     accepts (→ settlement_pending), acceptance.rejected when one rejects
//     (→ in_performance, where the rejected ones are asserted again while
//     the accepted ones stay accepted); the event names a response of its
//     own kind;
//   - settlement is instructed per accepted obligation, and completion
//     needs every obligation accepted, waived or released.
//
// Each further obligation, assertion or response is a rider (builder.ride):
// an act of its own, with its own policy decision over its own document
// (authority.ObjectAct), checked by the countersigner like the act the
// event names.

import (
	"context"
	"strings"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// DeliverableInput is one obligation of an agreement performed as several.
type DeliverableInput struct {
	// TermPath is the term it discharges, under $.terms.core or
	// $.terms.profile_terms; default $.terms.core.quantity.
	TermPath string `json:"term_path,omitempty" jsonschema:"The term it discharges (default $.terms.core.quantity)."`
	// Quantity is what it owes, in the terms' unit.
	Quantity string `json:"quantity" jsonschema:"What it owes, in the terms' unit."`
	// Consideration is what is paid for it, in the terms' currency; none
	// when omitted.
	Consideration *Money `json:"consideration,omitempty" jsonschema:"What is paid for it (default: nothing)."`
	// DueCondition is a registered due condition; default due_at_time 21
	// days from now.
	DueCondition map[string]any `json:"due_condition,omitempty" jsonschema:"A registered due condition."`
}

// issueObligations builds the obligations of agr, one per deliverable (the
// whole terms when there is none), as new objects of b; the first is the
// one the event names. Each names its parties by the agreement's roles
// for its term (ledger.OwedBy: the supplier owes the goods or service, to
// the buyer), this organisation by the acting agent and the other by the
// agreement's party, whichever side issues it (an amendment is accepted by
// either).
func (e *Engine) issueObligations(b *builder, agr *Obj, deliverables []DeliverableInput) ([]*Obj, error) {
	terms := agr.Terms()
	core := object.Sub(terms, "core")
	if len(deliverables) == 0 {
		var total *Money
		if t := object.Sub(core, "total"); len(t) > 0 {
			total = &Money{Currency: str(t["currency"]), Amount: str(t["amount"])}
		}
		deliverables = []DeliverableInput{{Quantity: str(core["quantity"]), Consideration: total}}
	}
	cfg := e.org.Config()
	me := party(cfg.OrganizationID, b.agent)
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	if len(ids) == 0 {
		return nil, refusef(reason.ObligationSubjectUnreferenced, "agreement %s names no commitment for the obligation to decompose", agr.ID())
	}
	var out []*Obj
	for i, d := range deliverables {
		path := d.TermPath
		if path == "" {
			path = "$.terms.core.quantity"
		}
		if !resolvePath(agr, path) {
			return nil, refusef(reason.ObligationSubjectUnreferenced, "deliverable %d: term_path %s does not resolve in the agreement's terms", i+1, path)
		}
		due := d.DueCondition
		if due == nil {
			due = map[string]any{"type": "due_at_time", "at": envelope.Timestamp(b.now.Add(21 * 24 * time.Hour))}
		}
		var consideration any
		if d.Consideration != nil {
			consideration = map[string]any{"currency": d.Consideration.Currency, "amount": d.Consideration.Amount}
		}
		owes := protocol.Role(ledger.OwedBy(path))
		obligor, obligee := agr.PSub(string(owes)), agr.PSub(string(owes.Other()))
		if b.st.Role() == owes {
			obligor = me
		} else {
			obligee = me
		}
		payload := map[string]any{
			"agreement_id":  agr.ID(),
			"commitment_id": str(ids[0]),
			"obligor":       obligor,
			"obligee":       obligee,
			"subject": map[string]any{
				"agreement_id": agr.ID(), "terms_hash": agr.P("terms_hash"), "profile": str(terms["profile"]), "term_path": path,
			},
			"due_condition": due,
			"quantity":      d.Quantity,
			"unit_code":     str(core["unit_code"]),
			"consideration": consideration,
			"state":         string(protocol.OblPending),
		}
		if un := str(core["unit_name"]); un != "" {
			payload["unit_name"] = un
		}
		// The gate on the obligation decides its due condition (obligation
		// §4) and its amounts: an unknown condition type or another type's
		// fields are A202-OBLIGATION-CONDITION-UNKNOWN, business days
		// without a calendar or an amount that is not one A202-TERMS-INVALID,
		// as the counterparty's gate will say.
		obl, err := b.add(protocol.Obligation, payload, protocol.PurposeObjectIssuance)
		if err != nil {
			return nil, asRefusal(err, reason.ObligationConditionUnknown)
		}
		if err := ledger.Roles(obl.Value(), agr.Value()).Err(); err != nil {
			return nil, err
		}
		out = append(out, obl)
	}
	return out, nil
}

// owesTerms is the rule both parties apply to the obligations in force
// under an agreement version: together they owe exactly its terms, their
// quantities summing to the core quantity in its unit and the
// considerations they carry to the core total in its currency.
// A202-OBLIGATION-TERMS-MUTATED otherwise.
func owesTerms(agr *Obj, obls []*Obj) error {
	core := object.Sub(agr.Terms(), "core")
	total := object.Sub(core, "total")
	want, err1 := decimal.ParseQuantity(str(core["quantity"]))
	wantAmount, err2 := decimal.Parse(str(total["amount"]))
	if err1 != nil || err2 != nil {
		return refusef(reason.TermsInvalid, "agreement %s does not state a quantity and total", agr.ID())
	}
	qty, _ := decimal.Parse("0")
	amount := qty
	for _, o := range obls {
		q, err := decimal.ParseQuantity(o.P("quantity"))
		if err != nil || q.Sign() <= 0 {
			return refusef(reason.ObligationTermsMutated, "obligation %s owes %q: each obligation owes a positive quantity", o.ID(), o.P("quantity"))
		}
		if o.P("unit_code") != str(core["unit_code"]) {
			return refusef(reason.ObligationTermsMutated, "obligation %s is owed in %s, the agreement's terms in %v", o.ID(), o.P("unit_code"), core["unit_code"])
		}
		qty = qty.Add(q)
		c := o.PSub("consideration")
		if len(c) == 0 {
			continue
		}
		a, err := decimal.Parse(str(c["amount"]))
		if err != nil || str(c["currency"]) != str(total["currency"]) {
			return refusef(reason.ObligationTermsMutated, "obligation %s is paid %v %v; the agreement's total is in %v", o.ID(), c["amount"], c["currency"], total["currency"])
		}
		amount = amount.Add(a)
	}
	if qty.Cmp(want) != 0 {
		return refusef(reason.ObligationTermsMutated, "the obligations owe %s together, the agreement's terms %s (in %v)", qty, want, core["unit_code"])
	}
	if amount.Cmp(wantAmount) != 0 {
		return refusef(reason.ObligationTermsMutated, "the obligations' considerations sum to %s, the agreement's total is %s %v", amount, wantAmount, total["currency"])
	}
	return nil
}

// checkIssued is the countersigner's check of an obligation the sender
// issued under agr (obligation §3, §3.1): its roles the agreement's for
// its term (ledger.Roles: the supplier owes the goods or service, to the
// buyer), issued by the sender as its obligee, or, when issuerMayOwe (a
// duty an amendment adds, issued by whichever party accepts it), as its
// obligor, and naming this organisation as the agreement does; deriving
// from agr and its commitment, its subject bound to agr's terms_hash and
// profile at a term path that resolves, pending.
func (e *Engine) checkIssued(from string, agr, obl *Obj, issuerMayOwe bool) error {
	me := ownParty(e.org.Config().OrganizationID, agr) // this organisation's party to the agreement
	subj := obl.PSub("subject")
	ids, _ := agr.Payload()["commitment_ids"].([]any)
	// The issuer names itself by the agent that made the obligation, and
	// this organisation as the agreement names it; which of the two owes
	// the term is the agreement's (ledger.Roles).
	issuer, mine := "obligee", "obligor"
	if issuerMayOwe && obl.PartyOrg("obligor") == from {
		issuer, mine = "obligor", "obligee"
	}
	if f := ledger.Roles(obl.Value(), agr.Value()); f != nil {
		return f.Err()
	}
	switch {
	case obl.PartyOrg(issuer) != from || str(obl.PSub(issuer)["agent_id"]) != obl.Agent() || !sameParty(obl.PSub(mine), me):
		return refusef(reason.ObligationSubjectUnreferenced, "%s issues duties of this organisation only as their obligee", from)
	case obl.P("agreement_id") != agr.ID() || len(ids) == 0 || obl.P("commitment_id") != str(ids[0]):
		return refusef(reason.ObligationSubjectUnreferenced, "obligation %s does not derive from agreement %s and its commitment", obl.ID(), agr.ID())
	case str(subj["agreement_id"]) != agr.ID() || str(subj["terms_hash"]) != agr.P("terms_hash") || str(subj["profile"]) != str(agr.Terms()["profile"]):
		return refusef(reason.ObligationSubjectUnreferenced, "the subject of %s is not bound to the terms_hash and profile of %s", obl.ID(), agr.ID())
	case !resolvePath(agr, str(subj["term_path"])):
		return refusef(reason.ObligationSubjectUnreferenced, "term_path %v does not resolve in the agreement's terms", subj["term_path"])
	case obl.P("state") != string(protocol.OblPending):
		return refusef(reason.StateTransitionDenied, "an obligation is issued pending")
	}
	return nil
}

// obligationsIn returns the obligations of txn whose state is one of
// states, in the order they were issued.
func (e *Engine) obligationsIn(ctx context.Context, txn string, states ...protocol.ObligationState) ([]string, error) {
	rows, err := e.db.ObligationStates(ctx, txn)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, os := range rows {
		for _, s := range states {
			if protocol.ObligationState(os.State) == s {
				out = append(out, os.ObligationID)
			}
		}
	}
	return out, nil
}

// coverAll refuses a set of obligations acted on that leaves out one of
// want: what a declaration must assert, or a response event answer.
func coverAll(acted map[string]bool, want []string, what string) error {
	var missing []string
	for _, id := range want {
		if !acted[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return refusef(reason.StateTransitionDenied, "%s %s too: %s (docs/record-protocol.md, several obligations)", what, strings.Join(missing, ", "), "the transaction moves through one performance cycle for all its obligations")
	}
	return nil
}

// checkRiders checks the further acts an event carries besides the one
// its data names (builder.ride): each rider's act rebuilt from its object
// (authority.ObjectAct), re-evaluated under the sender's mandate, and
// allowed by a decision of its own that travels with it; every decision
// that travels is the event's or a rider's.
func (e *Engine) checkRiders(ctx context.Context, r *receipt, ev *Event, riders []*Obj) error {
	lookup := e.lookupWith(ctx, r)
	acts := make([]riderAct, 0, len(riders))
	for _, o := range riders {
		name, terms, refs, why := authority.ObjectAct(o.Value(), lookup)
		if why != "" {
			return refusef(reason.StateTransitionDenied, "%s", why)
		}
		acts = append(acts, riderAct{obj: o, act: actDoc{name: name, terms: terms, refs: refs}})
	}
	return e.checkRiderActs(ctx, r, ev, acts)
}

// riderAct is a rider and its act as the receiving instance rebuilt it.
type riderAct struct {
	obj *Obj
	act actDoc
}

// checkRiderActs is checkRiders over acts the caller rebuilt.
func (e *Engine) checkRiderActs(ctx context.Context, r *receipt, ev *Event, acts []riderAct) error {
	lead := ev.P("policy_decision_id")
	unused := map[string]*Obj{}
	for _, p := range r.byType(protocol.PolicyDecision) {
		if p.ID() != lead {
			unused[p.P("action_hash")] = p
		}
	}
	if len(unused) != len(acts) {
		return refusef(reason.PolicyDenied, "the %s message carries %d further decisions for %d further acts", ev.EventType(), len(unused), len(acts))
	}
	for _, ra := range acts {
		o, a := ra.obj, ra.act
		m, err := e.peerMandate(ctx, r.from, o.Mandate())
		if err != nil {
			return err
		}
		h, err := authority.ActionHash(authority.Document(string(a.name), r.txn, e.org.Config().OrganizationID, a.terms, a.refs, m))
		if err != nil {
			return err
		}
		pol, ok := unused[h]
		if !ok {
			return refusef(reason.PolicyDenied, "no decision travels for the %s act of %s", a.name, o.ID())
		}
		delete(unused, h)
		if err := e.checkDecision(ctx, r.from, o, pol, a, r.txn, nil, false); err != nil {
			return err
		}
	}
	return nil
}

// others returns objs without the one whose id is id.
func others(objs []*Obj, id string) []*Obj {
	var out []*Obj
	for _, o := range objs {
		if o.ID() != id {
			out = append(out, o)
		}
	}
	return out
}
