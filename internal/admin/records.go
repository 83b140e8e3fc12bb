package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
)

// The transaction pages: the list, one transaction's timeline, and the
// verification of its record. They read the views of package readmodel
// (the same the agent's get_transaction_record and list_transactions return)
// and the exact objects behind them; they change nothing. Events and
// objects are rendered from their types and members (words.go), so an
// event type or object added by a later lifecycle act shows without a
// change here.

// txnRow is one line of the transactions list.
type txnRow struct {
	ID, State, Counterparty, Role, Item, Amount, UpdatedAt string
	Events                                                 int
}

// timelineView is one transaction as the timeline page shows it.
type timelineView struct {
	ID, State, Counterparty, Role, Session, ChainStatus, Pending string
	Notice                                                       string
	Terminal                                                     bool
	Item, Quantity, Amount                                       string
	Print                                                        bool
	Steps                                                        []step
	Deadlines                                                    []item
	Events                                                       []readmodel.EventView
	Objects                                                      []objectRow
	Obligations                                                  []readmodel.ObligationView
	Forks                                                        []readmodel.ForkView
	Disputes                                                     []readmodel.DisputeView
	Determinations                                               []readmodel.DeterminationView
	Exceptions                                                   []readmodel.ExceptionView
	Money                                                        []moneyView
}

// moneyView is one obligation's money as the timeline shows it: its
// balance as the ledger reads it from the record (package ledger, the
// same the agent's get_transaction_record returns), each amount said as
// money. Failed and Reversed are empty when nothing failed or was
// reversed, so that an ordinary payment reads in a few lines.
type moneyView struct {
	ObligationID, Status, AcceptedBy, RemainderOf         string
	Consideration, Owed, Paid, InFlight, Failed, Reversed string
	Forgone, Outstanding                                  string
	// Settlement is the ledger's word (not_due, unpaid, in_flight,
	// settled), Says what it means and Class how it is marked.
	Settlement, Says, Class string
	Instructions            []instructionView
	Adjustments             []string
}

// instructionView is one settlement instruction of an obligation with
// what its receipts made of it.
type instructionView struct {
	ID, Amount, Status      string
	Receipts, Contradicting []string
}

// objectLink names an object an event's data refers to.
type objectLink struct{ Member, ID, Type string }

// objectRow is one object of the record, in words and as held.
type objectRow struct {
	ID, Type, CreatedBy, CreatedAt, Hash string
	Words                                []item
	JSON                                 string
}

// eventPhrases say what each event records.
var eventPhrases = map[protocol.EventType]string{
	protocol.EvAgreementDirect:       "Offer accepted; agreement proposed",
	protocol.EvAgreementCommitted:    "Agreement signed by both; committed",
	protocol.EvAgreementAmended:      "Agreement amended",
	protocol.EvObligationActivated:   "Obligation issued",
	protocol.EvPerformanceDeclared:   "Performance declared",
	protocol.EvAcceptanceGranted:     "Performance accepted",
	protocol.EvAcceptanceRejected:    "Performance rejected",
	protocol.EvSettlementInstructed:  "Payment instructed",
	protocol.EvTransactionCompleted:  "Transaction completed",
	protocol.EvTransactionCancelled:  "Transaction cancelled",
	protocol.EvTerminationAgreed:     "Termination agreed",
	protocol.EvExceptionOpened:       "Exception opened",
	protocol.EvRemediationAccepted:   "Remediation accepted",
	protocol.EvExceptionResolved:     "Exception resolved",
	protocol.EvTransactionTerminated: "Transaction terminated",
	protocol.EvDeadlineElapsed:       "The offer's deadline passed; the transaction expired",
}

// EventPhrase says an event in words.
func EventPhrase(t string) string {
	if p, ok := eventPhrases[protocol.EventType(t)]; ok {
		return p
	}
	return humanize(strings.ReplaceAll(t, ".", " "))
}

// settlements say what each settlement of a balance means, and how it is
// marked: settled reads as done, money still owed or on its way as open.
var settlements = map[string]struct{ says, class string }{
	ledger.SettlementNotDue:   {"nothing is owed until the obligation is accepted", ""},
	ledger.SettlementUnpaid:   {"owed and not yet paid in full: the outstanding amount may be paid", "gap"},
	ledger.SettlementInFlight: {"a payment is on its way; the rail's answer is awaited", "gap"},
	ledger.SettlementSettled:  {"nothing more is to be paid or awaited", "ok"},
}

// moneyOf says an amount of the ledger as money: "3200.00 EUR".
func moneyOf(m ledger.Money) string { return strings.TrimSpace(m.Amount + " " + m.Currency) }

// moneyViews reads the ledger's balances for the page.
func moneyViews(bs []ledger.Balance) []moneyView {
	out := make([]moneyView, 0, len(bs))
	// nonzero says an amount, or nothing when it is zero.
	nonzero := func(m ledger.Money) string {
		if d, err := decimal.Parse(m.Amount); err == nil && d.Sign() == 0 {
			return ""
		}
		return moneyOf(m)
	}
	for _, b := range bs {
		v := moneyView{ObligationID: b.ObligationID, Status: b.Status, AcceptedBy: b.AcceptedBy, RemainderOf: b.RemainderOf,
			Consideration: moneyOf(b.Consideration), Owed: moneyOf(b.Owed), Paid: moneyOf(b.Paid), InFlight: moneyOf(b.InFlight),
			Failed: nonzero(b.Failed), Reversed: nonzero(b.Reversed), Forgone: moneyOf(b.Forgone), Outstanding: moneyOf(b.Outstanding),
			Settlement: b.Settlement, Adjustments: b.Adjustments}
		if s, ok := settlements[b.Settlement]; ok {
			v.Says, v.Class = s.says, s.class
		}
		for _, in := range b.Instructions {
			v.Instructions = append(v.Instructions, instructionView{ID: in.InstructionID, Amount: moneyOf(in.Amount), Status: in.Status,
				Receipts: in.Receipts, Contradicting: in.Contradicting})
		}
		out = append(out, v)
	}
	return out
}

// states are the aggregate states offered by the list's filter.
var states = []protocol.State{protocol.Draft, protocol.AgreementPending, protocol.Committed, protocol.InPerformance,
	protocol.AcceptancePending, protocol.SettlementPending, protocol.ExceptionOpen, protocol.Completed,
	protocol.Cancelled, protocol.Expired, protocol.Terminated}

func (h *handler) noRecord(w http.ResponseWriter, r *http.Request) bool {
	if h.rec != nil {
		return false
	}
	h.show(w, r, http.StatusServiceUnavailable, pageData{Title: "Transactions", Kind: "error",
		Error: "this admin listener has no record engine mounted, so it has no transactions to show"})
	return true
}

// terms returns the terms that stand for a transaction: the agreement's,
// or else the latest offer's.
func (h *handler) terms(r *http.Request, txn string) map[string]any {
	st := h.rec.Store()
	for _, t := range []protocol.ObjectType{protocol.Agreement, protocol.Offer} {
		raws, err := st.TransactionObjectsOfType(r.Context(), txn, string(t))
		if err != nil || len(raws) == 0 {
			continue
		}
		o, err := canonical.DecodeObject(raws[len(raws)-1])
		if err != nil {
			continue
		}
		if terms := sub(sub(o, "payload"), "terms"); terms != nil {
			return terms
		}
	}
	return nil
}

func (h *handler) transactions(w http.ResponseWriter, r *http.Request) {
	if h.noRecord(w, r) {
		return
	}
	state := r.URL.Query().Get("state")
	if state != "" && !slices.Contains(states, protocol.State(state)) {
		state = ""
	}
	page, err := h.rec.ListTransactions(r.Context(), readmodel.ListFilter{State: state, Limit: 100, Cursor: r.URL.Query().Get("before")})
	d := pageData{Title: "Transactions", Kind: "transactions", Filter: state, Rows: []txnRow{}, Next: page.Next}
	for _, s := range states {
		d.States = append(d.States, string(s))
	}
	if err != nil {
		_, d.Error = describeErr(err)
	}
	name := h.names()
	for _, t := range page.Transactions {
		core := sub(h.terms(r, t.TransactionID), "core")
		d.Rows = append(d.Rows, txnRow{ID: t.TransactionID, State: t.State, Counterparty: name(t.Counterparty), Role: t.Role,
			Item: str(core["description"]), Amount: Money(core["total"]), UpdatedAt: t.UpdatedAt, Events: t.Events})
	}
	h.show(w, r, http.StatusOK, d)
}

// timeline builds a transaction's timeline.
func (h *handler) timeline(r *http.Request, id string) (timelineView, error) {
	v, err := h.rec.Transaction(r.Context(), id)
	if err != nil {
		return timelineView{}, err
	}
	tv := timelineView{ID: v.TransactionID, State: v.State, Counterparty: v.Counterparty, Role: v.Role, Session: v.SessionID,
		ChainStatus: v.ChainStatus, Pending: v.Pending, Terminal: protocol.State(v.State).Terminal(),
		Obligations: v.Obligations, Forks: v.Forks, Disputes: v.Disputes, Determinations: v.Determinations, Exceptions: v.Exceptions,
		Money: moneyViews(v.Ledger)}
	if v.Notice != nil {
		b, _ := json.Marshal(v.Notice)
		var n map[string]any
		_ = json.Unmarshal(b, &n)
		var parts []string
		for _, it := range Words("", n) {
			parts = append(parts, it.Label+": "+it.Value)
		}
		tv.Notice = strings.Join(parts, "; ")
	}
	core := sub(h.terms(r, id), "core")
	tv.Item, tv.Amount = str(core["description"]), Money(core["total"])
	tv.Quantity = Quantity(str(core["quantity"]), str(core["unit_code"]), str(core["unit_name"]))
	in := storyInput{v: v, objs: map[string]map[string]any{}, raws: map[string][]byte{}, types: map[string]string{}, name: h.names()}
	for _, o := range v.Objects {
		in.types[o.ID] = o.ObjectType
	}
	tv.Counterparty = in.name(v.Counterparty)
	st := h.rec.Store()
	for _, o := range v.Objects {
		row := objectRow{ID: o.ID, Type: o.ObjectType, CreatedBy: o.CreatedBy, CreatedAt: o.CreatedAt}
		if raw, err := st.GetObject(r.Context(), v.TransactionID, o.ID); err == nil {
			var buf bytes.Buffer
			if json.Indent(&buf, raw, "", "  ") == nil {
				row.JSON = buf.String()
			}
			if m, err := canonical.DecodeObject(raw); err == nil {
				row.Hash = str(m["content_hash"])
				row.Words = Words("", m["payload"])
				in.objs[o.ID], in.raws[o.ID] = m, raw
			}
		}
		tv.Objects = append(tv.Objects, row)
	}
	tv.Events = v.Events
	tv.Steps, tv.Deadlines = h.story(r.Context(), in)
	return tv, nil
}

func (h *handler) transaction(w http.ResponseWriter, r *http.Request) {
	if h.noRecord(w, r) {
		return
	}
	tv, err := h.timeline(r, r.PathValue("id"))
	if err != nil {
		h.txnError(w, r, err)
		return
	}
	// ?print=1 is the same story for paper: no navigation, every step's
	// identifiers and hashes open, the objects as held left out.
	tv.Print = r.URL.Query().Get("print") == "1"
	h.show(w, r, http.StatusOK, pageData{Title: "Transaction " + tv.ID, Kind: "timeline", Timeline: &tv, Print: tv.Print})
}

func (h *handler) txnError(w http.ResponseWriter, r *http.Request, err error) {
	code, detail := describeErr(err)
	var ref *reason.Refusal
	if errors.As(err, &ref) {
		code = http.StatusNotFound
	}
	h.show(w, r, code, pageData{Title: "Transaction", Kind: "error", Error: detail})
}

// reportView is a verification report as the page shows it.
type reportView struct {
	Verdict, Class, RulesVersion, VerifiedAt string
	Counts                                   verify.Counts
	Failed, Gaps, Verified                   []verify.Check
	Unresolved, Undisclosed, Unregistered    []string
	// Findings are the ledger's (the report's ledger section), shown
	// apart from the checks.
	Findings []ledger.Finding
	// Unjudged says why the ledger judged a transaction's money not at all
	// (a partial disclosure).
	Unjudged []string
}

// verifyRecord runs the seven steps of evidence verification over this
// instance's record of the transaction exactly as a third party would over
// its export (export.VerifyTransaction), and shows the report.
func (h *handler) verifyRecord(w http.ResponseWriter, r *http.Request) {
	if h.noRecord(w, r) {
		return
	}
	id := r.PathValue("id")
	tv, err := h.timeline(r, id)
	if err != nil {
		h.txnError(w, r, err)
		return
	}
	rep, err := export.VerifyTransaction(r.Context(), h.rec.Store(), id)
	if err != nil {
		h.txnError(w, r, err)
		return
	}
	rv := reportView{RulesVersion: rep.RulesVersion, VerifiedAt: rep.VerifiedAt, Counts: rep.Results,
		Failed: rep.Failures(), Gaps: rep.Gaps(), Unresolved: rep.UnresolvedReferences, Undisclosed: rep.UndisclosedStreams,
		Unregistered: rep.UnregisteredTypes, Findings: rep.Ledger.Findings, Unjudged: rep.Ledger.Unjudged}
	for _, c := range rep.Checks {
		if c.Result == verify.Verified {
			rv.Verified = append(rv.Verified, c)
		}
	}
	switch {
	case rep.Results.Failed > 0:
		rv.Verdict, rv.Class = "failed", "bad"
	case rep.Results.NotCheckable > 0:
		rv.Verdict, rv.Class = "verified, with checks that could not be made (not checkable)", "gap"
	default:
		rv.Verdict, rv.Class = "verified", "ok"
	}
	h.log.Info("admin: record verified", "transaction_id", id, "failed", rep.Results.Failed, "not_checkable", rep.Results.NotCheckable)
	h.show(w, r, http.StatusOK, pageData{Title: "Verify " + id, Kind: "verify", Timeline: &tv, Report: &rv})
}
