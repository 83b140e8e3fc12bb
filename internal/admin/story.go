package admin

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
)

// The timeline as a story: every step from the first offer to where the
// transaction stands, in the order it happened. The record's events are
// the spine (they move the state); around them come the steps no event
// records: each offer, each approval this organisation's agent asked for
// and the decision on it, each dispute and determination. A step leads
// with what a person asks (who, what, how much, with what outcome), and
// folds away the identifiers and hashes a verifier needs.

// step is one step of the story.
type step struct {
	Anchor string // the element id links reach it by
	When   when
	Title  string
	// Class marks a step that waits on someone ("pending"), went wrong or
	// was refused ("bad"), or ended the transaction well ("ok").
	Class string
	Facts []item
	Tech  []item
	Links []objectLink
	at    time.Time
	rank  int // orders steps of one moment: what led to an act first
}

// Ranks of the kinds of step, for steps of the same moment.
const (
	rankOffer = iota
	rankRequest
	rankDecision
	rankEvent
	rankDispute
	rankDetermination
)

func newStep(anchor, at string, rank int) step {
	w := whenOf(at)
	s := step{Anchor: anchor, When: w, rank: rank}
	if w.At != "" {
		s.at, _ = time.Parse(time.RFC3339, w.At)
	}
	return s
}

// storyInput is what a story is told from: the record's view, its objects
// decoded (and as held, for the approvals), and how organisations are
// said.
type storyInput struct {
	v     readmodel.TransactionView
	objs  map[string]map[string]any
	raws  map[string][]byte
	types map[string]string
	name  func(string) string
}

// story tells the transaction; deadlines are what it waits on by a date.
func (h *handler) story(ctx context.Context, in storyInput) (steps []step, deadlines []item) {
	v, name := in.v, in.name
	instructions := map[string]ledger.Instruction{}
	for _, b := range v.Ledger {
		for _, i := range b.Instructions {
			instructions[i.InstructionID] = i
		}
	}
	acts := map[string]string{} // action hash → the act requested, in words
	decided := map[string]bool{}
	var lastOffer map[string]any
	for _, o := range v.Objects {
		obj := in.objs[o.ID]
		p := sub(obj, "payload")
		switch o.ObjectType {
		case string(protocol.Offer):
			lastOffer = p
			steps = append(steps, offerStep(o, obj, h.org, name))
		case "approval":
			dec, err := principal.DecisionOf(in.raws[o.ID])
			if err != nil {
				continue
			}
			decided[dec.ApprovalID] = true
			steps = append(steps, decisionStep(dec, h.org, name))
		}
	}
	// This organisation's requests: its agent's asking, and decisions not
	// in the record's objects (a rejection releases nothing, so nothing
	// carries it to the record).
	list, err := h.p.ApprovalsOf(ctx, v.TransactionID)
	if err != nil {
		h.log.Error("admin: listing approval requests", "error", err)
	}
	for _, a := range list {
		act := ActPhrase(str(a.Act["action_type"]))
		acts[a.ActionHash] = act
		s := newStep("s-"+a.RequestID, a.RequestedAt, rankRequest)
		s.Title = "Your agent asked for your approval: " + act
		total := Money(sub(sub(a.Act, "proposed_terms"), "core")["total"])
		if total != "" {
			s.Facts = append(s.Facts, item{Label: "Total", Value: total})
		}
		for _, r := range a.Rules {
			s.Facts = append(s.Facts, item{Label: "Held by rule", Value: r.RuleID + ", for " + strings.TrimSpace(r.ApproverRole+" of "+name(r.ApproverOrganizationID))})
		}
		if a.HeldBy != "" {
			s.Facts = append(s.Facts, item{Label: "Held by budget", Value: a.HeldBy})
		}
		if a.Status == "pending" {
			s.Class = "pending"
			s.Facts = append(s.Facts, item{Label: "Waiting for", Value: "your decision, on the approvals page"})
		}
		s.Tech = append(s.Tech, item{Label: "Request", Value: a.RequestID}, item{Label: "Action hash", Value: a.ActionHash})
		steps = append(steps, s)
		if a.ApprovalID != "" && !decided[a.ApprovalID] {
			if dec, err := h.p.Decision(ctx, v.TransactionID, a.ApprovalID); err == nil {
				steps = append(steps, decisionStep(dec, h.org, name))
			}
		}
	}
	// Name the act each decision was on, where this organisation's
	// agent asked for it.
	for i := range steps {
		if act := acts[techValue(steps[i], "Action hash")]; steps[i].rank == rankDecision && act != "" {
			steps[i].Facts = append([]item{{Label: "Act", Value: act}}, steps[i].Facts...)
		}
	}
	for _, e := range v.Events {
		steps = append(steps, eventStep(e, in, instructions))
	}
	for _, d := range v.Disputes {
		s := newStep("s-"+d.DisputeID, d.RaisedAt, rankDispute)
		s.Title = "Dispute raised by " + name(d.RaisedBy) + " against " + name(d.Respondent)
		s.Facts = append(s.Facts, item{Label: "Grounds", Value: strings.Join(d.Grounds, ", ")})
		if d.Description != "" {
			s.Facts = append(s.Facts, item{Label: "Description", Value: d.Description})
		}
		s.Facts = append(s.Facts, item{Label: "Status", Value: d.Status})
		if d.Status == "open" {
			s.Class = "pending"
		}
		s.Links = append(s.Links, objectLink{Member: "Subject", ID: d.SubjectID, Type: d.SubjectType}, objectLink{Member: "Dispute", ID: d.DisputeID, Type: "dispute"})
		steps = append(steps, s)
	}
	for _, d := range v.Determinations {
		s := newStep("s-"+d.DeterminationID, d.DeterminedAt, rankDetermination)
		s.Title = "Dispute determined by " + name(d.Determiner) + " (" + d.Effect + ")"
		s.Facts = append(s.Facts, item{Label: "Finding", Value: d.Finding})
		if d.StateResult != "" {
			s.Facts = append(s.Facts, item{Label: "State result", Value: d.StateResult})
		}
		if d.SupersessionReason != "" {
			s.Facts = append(s.Facts, item{Label: "Supersedes an earlier determination, because", Value: d.SupersessionReason})
		}
		s.Links = append(s.Links, objectLink{Member: "Determination", ID: d.DeterminationID, Type: "determination"}, objectLink{Member: "Of dispute", ID: d.DisputeID, Type: "dispute"})
		steps = append(steps, s)
	}
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := steps[i], steps[j]
		if a.at.IsZero() || b.at.IsZero() {
			return !a.at.IsZero() && b.at.IsZero()
		}
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.rank < b.rank
	})

	if protocol.State(v.State) == protocol.Draft && lastOffer != nil {
		if u := str(lastOffer["valid_until"]); u != "" {
			deadlines = append(deadlines, moment("The offer is open until", u))
		}
	}
	for _, o := range v.Obligations {
		t := o.Timing
		if t == nil {
			continue
		}
		switch {
		case t.DueAt != "":
			deadlines = append(deadlines, moment("Obligation "+o.ObligationID+" due", t.DueAt))
		case t.WaitingOn != "":
			deadlines = append(deadlines, item{Label: "Obligation " + o.ObligationID + " due", Value: "once " + t.WaitingOn})
		}
		if t.OverdueAt != "" {
			label := "Overdue from"
			if t.Overdue {
				label = "Overdue since"
			}
			deadlines = append(deadlines, moment(label, t.OverdueAt))
		}
	}
	return steps, deadlines
}

func techValue(s step, label string) string {
	for _, t := range s.Tech {
		if t.Label == label {
			return t.Value
		}
	}
	return ""
}

// offerStep says an offer: from whom to whom, for what and how much,
// until when.
func offerStep(o readmodel.ObjectView, obj map[string]any, own string, name func(string) string) step {
	p := sub(obj, "payload")
	s := newStep("s-"+o.ID, o.CreatedAt, rankOffer)
	from, to := str(sub(p, "offeror")["organization_id"]), str(sub(p, "offeree")["organization_id"])
	kind := "Offer"
	if str(p["supersedes_offer_id"]) != "" {
		kind = "Counter-offer"
	}
	if from == own {
		s.Title = kind + " made to " + name(to)
	} else {
		s.Title = kind + " received from " + name(from)
	}
	terms := sub(p, "terms")
	core := sub(terms, "core")
	for _, f := range []item{
		{Label: "Item", Value: str(core["description"])},
		{Label: "Quantity", Value: Quantity(str(core["quantity"]), str(core["unit_code"]), str(core["unit_name"]))},
		{Label: "Total", Value: Money(core["total"])},
		{Label: "Profile", Value: str(terms["profile"])},
	} {
		if f.Value != "" {
			s.Facts = append(s.Facts, f)
		}
	}
	if u := str(p["valid_until"]); u != "" {
		s.Facts = append(s.Facts, moment("Open until", u))
	}
	s.Links = append(s.Links, objectLink{Member: "Offer", ID: o.ID, Type: o.ObjectType})
	s.Tech = append(s.Tech, item{Label: "Content hash", Value: str(obj["content_hash"])})
	return s
}

// decisionStep says an approval object: who decided, how, on what, with
// what conditions or reason, good until when.
func decisionStep(dec principal.Decision, own string, name func(string) string) step {
	dv := decisionWords(dec, own, name)
	s := newStep("s-"+dec.ApprovalID, dec.DecidedAt, rankDecision)
	if dec.Decision == "rejected" {
		s.Title, s.Class = "Rejected by "+dv.By, "bad"
	} else {
		s.Title = "Approved by " + dv.By
	}
	s.Facts = append(s.Facts, dv.Notes...)
	if dv.Until.At != "" {
		s.Facts = append(s.Facts, moment("Good until", dec.ExpiresAt))
	}
	s.Tech = append(s.Tech, item{Label: "Approval", Value: dec.ApprovalID}, item{Label: "Action hash", Value: dec.ActionHash})
	return s
}

// eventStep says an event of the record: what it did to the state, who
// appended and countersigned it, and, for a payment, its amount, rail and
// outcome.
func eventStep(e readmodel.EventView, in storyInput, instructions map[string]ledger.Instruction) step {
	name := in.name
	s := newStep(e.EventID, e.OccurredAt, rankEvent)
	s.Title = EventPhrase(e.EventType)
	if e.Status != "recorded" {
		s.Class = "pending"
	}
	switch protocol.EventType(e.EventType) {
	case protocol.EvTransactionCompleted:
		s.Class = "ok"
	case protocol.EvTransactionCancelled, protocol.EvTransactionTerminated, protocol.EvExceptionOpened, protocol.EvAcceptanceRejected:
		s.Class = "bad"
	}
	if e.FromState == e.ToState {
		s.Facts = append(s.Facts, item{Label: "State", Value: e.ToState + " (unchanged)"})
	} else {
		s.Facts = append(s.Facts, item{Label: "State", Value: e.FromState + " → " + e.ToState})
	}
	by := name(e.AppendedBy)
	var others []string
	for _, o := range e.SignedBy {
		if o != e.AppendedBy {
			others = append(others, name(o))
		}
	}
	if len(others) > 0 {
		by += "; countersigned by " + strings.Join(others, ", ")
	} else {
		by += "; " + name(in.v.Counterparty) + "'s countersignature is awaited"
	}
	s.Facts = append(s.Facts, item{Label: "By", Value: by})
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		id, ok := e.Data[k].(string)
		if !ok || in.types[id] == "" {
			// Identifiers and hashes of what the record does not hold
			// (a session, an audit bundle) are for a verifier too.
			if strings.HasSuffix(k, "_id") || strings.HasSuffix(k, "hash") {
				s.Tech = append(s.Tech, Words(humanize(k), e.Data[k])...)
			} else {
				s.Facts = append(s.Facts, Words(humanize(k), e.Data[k])...)
			}
			continue
		}
		s.Links = append(s.Links, objectLink{Member: humanize(k), ID: id, Type: in.types[id]})
		if in.types[id] == "settlement_instruction" {
			s.Facts = append(s.Facts, paymentFacts(id, in, instructions)...)
			if i, ok := instructions[id]; ok {
				switch i.Status {
				case "failed", "reversed":
					s.Class = "bad"
				case "succeeded":
				default:
					s.Class = "pending"
				}
			}
		}
	}
	s.Tech = append(s.Tech, item{Label: "Event", Value: e.EventID + " (" + e.EventType + ", position " + strconv.Itoa(e.Sequence) + ")"},
		item{Label: "Content hash", Value: e.ContentHash})
	return s
}

// paymentFacts says a settlement instruction: the amount, the rail, who
// pays whom, and what the rail answered.
func paymentFacts(id string, in storyInput, instructions map[string]ledger.Instruction) []item {
	p := sub(in.objs[id], "payload")
	out := []item{{Label: "Amount", Value: Money(p["amount"])}, {Label: "Rail", Value: str(p["rail"])},
		{Label: "Paid by", Value: in.name(str(p["payer_organization_id"])) + " to " + in.name(str(p["payee_organization_id"]))}}
	i, ok := instructions[id]
	if !ok {
		return out
	}
	outcome := i.Status
	if outcome == "" || outcome == "pending" || outcome == "instructed" {
		outcome += " (the rail's answer is awaited)"
	}
	out = append(out, item{Label: "Outcome", Value: strings.TrimSpace(outcome)})
	if i.SettledBy != "" {
		rp := sub(in.objs[i.SettledBy], "payload")
		if at := str(rp["completed_at"]); at != "" {
			out = append(out, moment("Rail answered", at))
		}
		if ref := str(rp["external_reference"]); ref != "" {
			out = append(out, item{Label: "Rail reference", Value: ref})
		}
	}
	return out
}
