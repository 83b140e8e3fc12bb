package record

import (
	"fmt"
	"testing"

	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/verify"
)

// TestActTableRecognisesOnce: no two lines of the act table recognise one
// message, so the order of the lines decides nothing. Every message of up
// to four objects drawn from the kinds a message without an event may
// carry (with an evidence of each claim) is tried; the shapes the table
// names each find their line.
func TestActTableRecognisesOnce(t *testing.T) {
	t.Parallel()
	a := indexActs(actTable())
	type kind struct {
		t     protocol.ObjectType
		claim string
	}
	kinds := []kind{
		{t: protocol.Offer}, {t: protocol.PolicyDecision}, {t: protocol.ObligationResponse},
		{t: protocol.Dispute}, {t: protocol.Determination}, {t: protocol.Agreement},
		{t: protocol.AdapterReceipt}, {t: protocol.Approval},
		{t: protocol.Evidence, claim: verify.RemediationSignatureClaim},
		{t: protocol.Evidence, claim: ledger.AdjustmentClaim},
		{t: protocol.Evidence, claim: "termination"},
	}
	obj := func(k kind) *Obj {
		return object.Over(nil, map[string]any{"object_type": string(k.t), "payload": map[string]any{"claim": k.claim}})
	}
	recognised := map[string]protocol.Act{}
	var try func(start int, msg []kind)
	try = func(start int, msg []kind) {
		if len(msg) > 0 {
			r := &receipt{}
			for _, k := range msg {
				r.objs = append(r.objs, obj(k))
			}
			approvals := len(r.byType(protocol.Approval))
			var lines []*actLine
			for _, l := range a.messages {
				if l.recognise(r, len(r.objs)-approvals, approvals) {
					lines = append(lines, l)
				}
			}
			if len(lines) > 1 {
				t.Errorf("%v is recognised by %d lines (%q and %q)", msg, len(lines), lines[0].act, lines[1].act)
			}
			if len(lines) == 1 {
				recognised[fmt.Sprint(msg)] = lines[0].act
			}
		}
		if len(msg) == 4 {
			return
		}
		for i := start; i < len(kinds); i++ {
			try(i, append(append([]kind{}, msg...), kinds[i]))
		}
	}
	try(0, nil)
	for shape, want := range map[string]protocol.Act{
		fmt.Sprint([]kind{{t: protocol.Offer}, {t: protocol.PolicyDecision}}):                                             protocol.ActOfferSubmit,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}}):                                                                  protocol.ActOfferWithdraw,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}, {t: protocol.ObligationResponse}}):                                protocol.ActObligationWaive,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}, {t: protocol.Dispute}, {t: protocol.Determination}}):              protocol.ActDisputeRaise,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}, {t: protocol.Determination}}):                                     protocol.ActDeterminationIssue,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}, {t: protocol.Evidence, claim: ledger.AdjustmentClaim}}):           protocol.ActSettlementAdjust,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}, {t: protocol.Evidence, claim: "termination"}}):                    protocol.ActTerminationAgree,
		fmt.Sprint([]kind{{t: protocol.Agreement}}):                                                                       protocol.ActAgreementSign,
		fmt.Sprint([]kind{{t: protocol.PolicyDecision}, {t: protocol.Evidence, claim: verify.RemediationSignatureClaim}}): protocol.ActRemediationAccept,
	} {
		if got, ok := recognised[shape]; !ok || got != want {
			t.Errorf("%s: recognised as %q (%v), want %q", shape, got, ok, want)
		}
	}
}

// TestActTableLines: every event a bilateral record may carry under the
// rules this instance appends under (the aggregate rows no operator
// appends) has exactly one line with its live checks, so a rule row added
// without its act fails here; and no line names an event the rules do not.
func TestActTableLines(t *testing.T) {
	t.Parallel()
	a := indexActs(actTable()) // panics on a line that is neither
	// Rows of the pilot's approval and withdrawal steps, which a bilateral
	// record expresses otherwise (an approval object; an offer withdrawn):
	// no party appends them.
	never := map[protocol.EventType]bool{"approval.requested": true, "approval.rejected": true, "acceptance.withdrawn": true}
	legal := map[protocol.EventType]bool{}
	for _, row := range rules.Table(RulesVersion, rules.Aggregate) {
		if row.Operated || never[row.Event] {
			continue
		}
		ev := row.Event
		legal[ev] = true
		if l, ok := a.event(ev); !ok || l.check == nil {
			t.Errorf("event %s: no line with its live checks", ev)
		}
	}
	for ev := range a.byEvent {
		if !legal[ev] {
			t.Errorf("the table has a line for %s, which the rules do not let a bilateral record carry", ev)
		}
	}
}

// TestActsTravelOnlyInTheirLines: the acting side's guard (act.perform)
// lets an act travel in each of its own lines and in no other act's, so
// a spec that named another act's event, or an event for an act recorded
// by its objects alone, is refused before anything is decided.
func TestActsTravelOnlyInTheirLines(t *testing.T) {
	t.Parallel()
	a := indexActs(actTable())
	for _, l := range actTable() {
		if l.act == "" {
			continue // the receipt
		}
		if !a.travelsIn(l.act, l.event) {
			t.Errorf("%s does not travel in its own line %q", l.act, l.event)
		}
	}
	for _, c := range []struct {
		act   protocol.Act
		event protocol.EventType
		want  bool
	}{
		{protocol.ActTransactionCancel, protocol.EvTransactionCancelled, true},
		{protocol.ActTransactionCancel, protocol.EvTransactionCompleted, false}, // another act's event
		{protocol.ActTransactionCancel, "", false},                              // cancel is an event
		{protocol.ActOfferSubmit, "", true},
		{protocol.ActOfferSubmit, protocol.EvAgreementDirect, false},
		{protocol.ActAcceptanceRejected, protocol.EvAcceptanceGranted, false}, // a response names its own act
		{protocol.ActTerminationAgree, "", true},                              // the proposal
		{protocol.ActTerminationAgree, protocol.EvTerminationAgreed, true},
		{"", "", false}, // the receipt's line is no act's
		{"", protocol.EvAcceptanceGranted, false},
	} {
		if got := a.travelsIn(c.act, c.event); got != c.want {
			t.Errorf("travelsIn(%q, %q) = %v, want %v", c.act, c.event, got, c.want)
		}
	}
	// Every act of the table is listed once: one value per act entry point.
	seen := map[declared]bool{}
	for _, d := range tableActs() {
		if seen[d] {
			t.Errorf("%v is listed twice", d)
		}
		seen[d] = true
	}
}
