package readmodel

import (
	"context"

	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// What get_transaction_record shows of disputes, determinations and the
// exception path, beside the events and the
// objects: each dispute with its question and the determinations of it,
// each determination with its effect and what supersedes it, and each
// exception with where it stands and the remediation offered over it.

// DisputeView is one dispute of the record.
type DisputeView struct {
	DisputeID   string   `json:"dispute_id"`
	RaisedBy    string   `json:"raised_by"`
	Respondent  string   `json:"respondent"`
	SubjectType string   `json:"subject_type"`
	SubjectID   string   `json:"subject_id"`
	Grounds     []string `json:"grounds"`
	Description string   `json:"description,omitempty"`
	RaisedAt    string   `json:"raised_at"`
	// Determinations are the ids of the determinations of this dispute,
	// in the order held; the one in force is the one nothing supersedes.
	Determinations []string `json:"determinations"`
	// Determined is whether a determination of it is in force.
	Determined bool `json:"determined"`
	// Status is open, determined, or closed: the transaction ended
	// (EndedBy names the event) with no determination of it in force.
	Status  string `json:"status"`
	EndedBy string `json:"ended_by,omitempty"`
}

// DeterminationView is one determination of the record.
type DeterminationView struct {
	DeterminationID string `json:"determination_id"`
	DisputeID       string `json:"dispute_id"`
	Determiner      string `json:"determiner"`
	Effect          string `json:"effect"`
	Finding         string `json:"finding"`
	// StateResult is "subject_id → state", under a binding effect.
	StateResult        string `json:"state_result,omitempty"`
	Supersedes         string `json:"supersedes,omitempty"`
	SupersessionReason string `json:"supersession_reason,omitempty"`
	SupersededBy       string `json:"superseded_by,omitempty"`
	DeterminedAt       string `json:"determined_at"`
}

// ExceptionView is one exception of the record.
type ExceptionView struct {
	ExceptionID   string `json:"exception_id"`
	ExceptionType string `json:"exception_type"`
	ObligationID  string `json:"obligation_id"`
	DisputeID     string `json:"dispute_id,omitempty"`
	// SettlementInstructionID is the failed instruction (settlement_failed).
	SettlementInstructionID string `json:"settlement_instruction_id,omitempty"`
	OpenedBy                string `json:"opened_by"`
	OpenedAt                string `json:"opened_at"`
	// Status is open, remediated (remediation.accepted), resolved or
	// terminated, read from the events that name it; or closed, when the
	// transaction ended while it was open, by the event EndedBy names
	// (termination.agreed, transaction.completed, transaction.terminated
	// over another exception).
	Status  string `json:"status"`
	EndedBy string `json:"ended_by,omitempty"`
	// RemediationOffers are the obligor's signatures over a remediation
	// record (propose_remediation) held while it is open: the obligee
	// accepts the current one with accept_remediation.
	RemediationOffers []string `json:"remediation_offers"`
}

// Disputes is what one transaction's record holds of disputes,
// determinations and exceptions.
type Disputes struct {
	TransactionID  string              `json:"transaction_id"`
	Disputes       []DisputeView       `json:"disputes"`
	Determinations []DeterminationView `json:"determinations"`
	Exceptions     []ExceptionView     `json:"exceptions"`
}

// ofType reads the objects of one type of txn from st, in storage order.
func ofType(ctx context.Context, st *store.Store, txn string, t protocol.ObjectType) ([]*object.View, error) {
	return object.ParseAll(st.TransactionObjectsOfType(ctx, txn, string(t)))
}

func str(v any) string { s, _ := v.(string); return s }

// ReadDisputes reads txn's disputes, determinations and exceptions from
// the database alone (get_transaction_record, the admin timeline and
// party disputes show the same).
func ReadDisputes(ctx context.Context, st *store.Store, txn string) (Disputes, error) {
	v := Disputes{TransactionID: txn, Disputes: []DisputeView{}, Determinations: []DeterminationView{}, Exceptions: []ExceptionView{}}
	dets, err := ofType(ctx, st, txn, protocol.Determination)
	if err != nil {
		return v, err
	}
	supersededBy := map[string]string{}
	byDispute := map[string][]string{}
	for _, d := range dets {
		sup := d.PSub("supersedes")
		if id := str(sup["determination_id"]); id != "" {
			supersededBy[id] = d.ID()
		}
		byDispute[d.P("dispute_id")] = append(byDispute[d.P("dispute_id")], d.ID())
	}
	for _, d := range dets {
		sup := d.PSub("supersedes")
		dv := DeterminationView{DeterminationID: d.ID(), DisputeID: d.P("dispute_id"), Determiner: d.PartyOrg("determiner"), Effect: d.P("effect"),
			Finding: str(d.PSub("outcome")["finding"]), Supersedes: str(sup["determination_id"]), SupersessionReason: str(sup["reason"]),
			SupersededBy: supersededBy[d.ID()], DeterminedAt: d.P("determined_at")}
		if sr := object.Sub(d.PSub("outcome"), "state_result"); len(sr) > 0 {
			dv.StateResult = str(sr["subject_id"]) + " → " + str(sr["state"])
		}
		v.Determinations = append(v.Determinations, dv)
	}
	evs, err := st.Events(ctx, txn)
	if err != nil {
		return v, err
	}
	// The event that ended the transaction, if one did: whatever was open
	// then closed with it (issue 39, item 5).
	ended := ""
	for _, x := range evs {
		if x.Status == store.EventRecorded && protocol.State(x.ToState).Terminal() {
			ended = x.EventType
		}
	}
	dsps, err := ofType(ctx, st, txn, protocol.Dispute)
	if err != nil {
		return v, err
	}
	for _, d := range dsps {
		dv := DisputeView{DisputeID: d.ID(), RaisedBy: d.PartyOrg("raising_party"), Respondent: d.PartyOrg("respondent_party"),
			SubjectType: d.P("subject_type"), SubjectID: d.P("subject_id"), Grounds: []string{}, Description: d.P("description"),
			RaisedAt: str(d.Value()["created_at"]), Determinations: []string{}}
		grounds, _ := d.Payload()["grounds"].([]any)
		for _, g := range grounds {
			dv.Grounds = append(dv.Grounds, str(g))
		}
		for _, id := range byDispute[d.ID()] {
			dv.Determinations = append(dv.Determinations, id)
			if supersededBy[id] == "" {
				dv.Determined = true
			}
		}
		switch {
		case dv.Determined:
			dv.Status = "determined"
		case ended != "":
			dv.Status, dv.EndedBy = "closed", ended
		default:
			dv.Status = "open"
		}
		v.Disputes = append(v.Disputes, dv)
	}
	excs, err := ofType(ctx, st, txn, protocol.Exception)
	if err != nil || len(excs) == 0 {
		return v, err
	}
	status := map[string]string{}
	for _, x := range evs {
		if x.Status != store.EventRecorded {
			continue
		}
		switch protocol.EventType(x.EventType) {
		case protocol.EvExceptionOpened, protocol.EvRemediationAccepted, protocol.EvExceptionResolved, protocol.EvTransactionTerminated:
		default:
			continue
		}
		raw, err := st.GetObject(ctx, x.TransactionID, x.EventID)
		if err != nil {
			return v, err
		}
		ev, err := object.ParseEvent(raw)
		if err != nil {
			return v, err
		}
		id := ev.Data("exception_id")
		switch protocol.EventType(x.EventType) {
		case protocol.EvExceptionOpened:
			status[id] = "open"
		case protocol.EvRemediationAccepted:
			status[id] = "remediated"
		case protocol.EvExceptionResolved:
			status[id] = "resolved"
		case protocol.EvTransactionTerminated:
			status[id] = "terminated"
		}
	}
	evds, err := ofType(ctx, st, txn, protocol.Evidence)
	if err != nil {
		return v, err
	}
	for _, x := range excs {
		xv := ExceptionView{ExceptionID: x.ID(), ExceptionType: x.P("exception_type"), ObligationID: x.P("obligation_id"), DisputeID: x.P("dispute_id"),
			SettlementInstructionID: x.P("settlement_instruction_id"), OpenedBy: x.Org(), OpenedAt: str(x.Value()["created_at"]), Status: status[x.ID()],
			RemediationOffers: []string{}}
		if xv.Status == "" {
			xv.Status = "pending" // exception.opened waits for its countersignature
		}
		if (xv.Status == "open" || xv.Status == "pending") && ended != "" {
			xv.Status, xv.EndedBy = "closed", ended
		}
		if xv.Status == "open" {
			for _, o := range evds {
				if o.SignedDocument(o.Org(), verify.RemediationSignatureClaim) && str(o.Value()["created_at"]) >= xv.OpenedAt {
					xv.RemediationOffers = append(xv.RemediationOffers, o.ID())
				}
			}
		}
		v.Exceptions = append(v.Exceptions, xv)
	}
	return v, nil
}
