package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/protocol"
)

// Words for a person. Everything here reads a document generically: an act
// document (authority.ActDocument), an object's payload, an event's data.
// Members it has a phrase for are said in words; any other member is shown
// by its own name with underscores read as spaces, so an act, event or
// profile added later shows without a change here. What is signed is never
// these words: each summary is followed on the page by the exact canonical
// document and its hash.

// item is one labelled line of a summary. At is set when the value is a
// moment: it is then the RFC 3339 UTC form the page puts in a <time>
// element, which the console's script shows in the reader's own zone
// (Value, in UTC words, is what a page read without script shows).
type item struct{ Label, Value, At string }

// when is a moment as the pages show it (see item).
type when struct{ At, Text string }

// whenOf reads an A202 timestamp for a person: to the second, in UTC words,
// with its RFC 3339 form for the browser. Anything else is shown as it is.
func whenOf(s string) when {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return when{Text: s}
	}
	t = t.UTC()
	return when{At: t.Format(time.RFC3339), Text: t.Format("2 Jan 2006, 15:04:05 UTC")}
}

// moment is a labelled line holding a timestamp.
func moment(label, ts string) item {
	w := whenOf(ts)
	return item{Label: label, Value: w.Text, At: w.At}
}

// span says a duration in words: "1 hour 30 minutes".
func span(d time.Duration) string {
	var parts []string
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if n := d / u.d; n > 0 {
			d -= n * u.d
			w := fmt.Sprintf("%d %s", n, u.name)
			if n > 1 {
				w += "s"
			}
			parts = append(parts, w)
		}
	}
	if len(parts) == 0 {
		return "no time"
	}
	return strings.Join(parts, " ")
}

// actPhrases say what each act does.
var actPhrases = map[protocol.Act]string{
	protocol.ActOfferSubmit:          "Make an offer",
	protocol.ActOfferAccept:          "Accept an offer and form the agreement",
	protocol.ActOfferWithdraw:        "Withdraw an offer",
	protocol.ActAgreementSign:        "Sign the agreement",
	protocol.ActObligationActivated:  "Issue the counterparty's obligation",
	protocol.ActPerformanceDeclared:  "Declare performance",
	protocol.ActAcceptanceGranted:    "Accept the performance",
	protocol.ActAcceptanceRejected:   "Reject the performance",
	protocol.ActSettlementInstruct:   "Instruct payment",
	protocol.ActTransactionComplete:  "Close the transaction as completed",
	protocol.ActTransactionCancel:    "Cancel the transaction",
	protocol.ActTerminationAgree:     "Agree to terminate the agreement",
	protocol.ActSettlementAdjust:     "Settle an obligation short (accept what was paid as payment in full)",
	protocol.ActAgreementAmend:       "Amend the agreement",
	protocol.ActObligationWaive:      "Waive an obligation",
	protocol.ActDisputeRaise:         "Raise a dispute",
	protocol.ActDeterminationIssue:   "Determine a dispute raised against you",
	protocol.ActExceptionOpen:        "Open an exception",
	protocol.ActRemediationAccept:    "Accept a remediation",
	protocol.ActExceptionResolve:     "Resolve an exception",
	protocol.ActTransactionTerminate: "Terminate the transaction",
	protocol.ActTransactionExpire:    "Record that the offer lapsed unaccepted",
}

// ActPhrase says an act in words, with its registered name.
func ActPhrase(name string) string {
	if p, ok := actPhrases[protocol.Act(name)]; ok {
		return p + " (" + name + ")"
	}
	return humanize(strings.ReplaceAll(name, ".", " ")) + " (" + name + ")"
}

// unitNames are the UN/ECE Recommendation 20 unit codes a person meets
// most; any other code is shown as it is.
var unitNames = map[string]string{
	"H87": "piece", "C62": "unit", "EA": "each", "HUR": "hour", "DAY": "day", "MON": "month",
	"KGM": "kilogram", "GRM": "gram", "TNE": "tonne", "MTR": "metre", "KMT": "kilometre",
	"LTR": "litre", "MTQ": "cubic metre", "MTK": "square metre", "KWH": "kilowatt hour", "SET": "set",
}

// Quantity says a quantity with its unit: "20 × H87 (piece)".
func Quantity(qty, unit, unitName string) string {
	if qty == "" {
		return ""
	}
	if unitName == "" {
		unitName = unitNames[unit]
	}
	s := qty
	if unit != "" {
		s += " × " + unit
	}
	if unitName != "" {
		s += " (" + unitName + ")"
	}
	return s
}

// Money says {currency, amount}: "3200.00 EUR".
func Money(v any) string {
	m, _ := v.(map[string]any)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(str(m["amount"]) + " " + str(m["currency"]))
}

// humanize reads a member name: "business_days_after_collection" →
// "Business days after collection".
func humanize(name string) string {
	s := strings.TrimSpace(strings.ReplaceAll(name, "_", " "))
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Words flattens a document member into labelled lines: nested objects
// become "Outer · inner" labels, lists are joined, booleans read yes/no,
// money {currency, amount} reads as money.
func Words(prefix string, v any) []item {
	var out []item
	var walk func(label string, v any)
	walk = func(label string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["currency"]; ok && len(x) == 2 {
				if _, ok := x["amount"]; ok {
					out = append(out, item{Label: label, Value: Money(x)})
					return
				}
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				l := humanize(k)
				if label != "" {
					l = label + " · " + strings.ToLower(l[:1]) + l[1:]
				}
				walk(l, x[k])
			}
		case []any:
			parts := make([]string, 0, len(x))
			simple := true
			for _, e := range x {
				switch e.(type) {
				case map[string]any, []any:
					simple = false
				}
				parts = append(parts, scalar(e))
			}
			if simple {
				out = append(out, item{Label: label, Value: strings.Join(parts, ", ")})
				return
			}
			for i, e := range x {
				walk(fmt.Sprintf("%s %d", label, i+1), e)
			}
		case string:
			if w := whenOf(x); w.At != "" {
				out = append(out, item{label, w.Text, w.At})
				return
			}
			out = append(out, item{Label: label, Value: x})
		default:
			out = append(out, item{Label: label, Value: scalar(x)})
		}
	}
	walk(prefix, v)
	return out
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "none"
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case string:
		return x
	case json.Number:
		return x.String()
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

func str(v any) string { s, _ := v.(string); return s }

func sub(m map[string]any, k string) map[string]any {
	s, _ := m[k].(map[string]any)
	return s
}

// Summary is an approval request in words.
type Summary struct {
	Act          string
	Counterparty string
	Transaction  string
	Item         string
	Quantity     string
	Total        string
	Profile      string
	Category     string
	Dates        []item
	Terms        []item
	Rules        []ruleWords
	Other        []item
}

// ruleWords says why a rule held the act and for how long an approval is
// good: GoodFor from when it is given, which if given now is until Until.
type ruleWords struct {
	ID        string
	Condition string
	Approver  string
	GoodFor   string
	Until     when
}

// conditionOperators read an approval rule's operator.
var conditionOperators = map[string]string{
	"equals": "is", "not_equals": "is not", "minimum": "is at least", "maximum": "is at most",
	"in": "is one of", "not_in": "is none of", "exists": "is present",
}

// pathWords read the act paths rules use most.
var pathWords = map[string]string{
	"$.action_type":                      "the act",
	"$.proposed_terms.core.total.amount": "the total amount",
	"$.proposed_terms.core.quantity":     "the quantity",
	"$.counterparty_organization_id":     "the counterparty",
	"$.category":                         "the category",
}

// Condition says an approval rule's when clause in words.
func Condition(when map[string]any) string {
	if when == nil {
		return "always"
	}
	path := str(when["path"])
	what := pathWords[path]
	if what == "" {
		what = path
	}
	op := conditionOperators[str(when["operator"])]
	if op == "" {
		op = str(when["operator"])
	}
	return strings.TrimSpace(what + " " + op + " " + scalar(when["value"]))
}

// Context is what the record and the mandate add to an act's summary:
// the rules of the mandate that held it, and the dates the record states.
type Context struct {
	// Rules returns the approval rules of a mandate, by rule id.
	Rules func(mandateID string) map[string]map[string]any
	// OfferValidUntil returns when a transaction's latest offer lapses.
	OfferValidUntil func(txn string) string
	// Name says an organisation for a person: its display name beside its
	// identifier, where its peer file states one.
	Name func(org string) string
	Now  time.Time
}

// Summarize says an approval request in words.
func Summarize(a principal.Approval, c Context) Summary {
	act := a.Act
	terms := sub(act, "proposed_terms")
	core := sub(terms, "core")
	s := Summary{
		Act:          ActPhrase(str(act["action_type"])),
		Counterparty: c.name(str(act["counterparty_organization_id"])),
		Transaction:  str(act["transaction_id"]),
		Item:         str(core["description"]),
		Quantity:     Quantity(str(core["quantity"]), str(core["unit_code"]), str(core["unit_name"])),
		Total:        Money(core["total"]),
		Profile:      str(terms["profile"]),
		Category:     str(act["category"]),
	}
	s.Dates = append(s.Dates, moment("Requested", a.RequestedAt))
	if c.OfferValidUntil != nil && s.Transaction != "" && strings.HasPrefix(str(act["action_type"]), "offer.") {
		if v := c.OfferValidUntil(s.Transaction); v != "" {
			s.Dates = append(s.Dates, moment("Offer open until", v))
		}
	}
	s.Terms = Words("", terms["profile_terms"])
	for k, v := range core {
		switch k {
		case "description", "quantity", "unit_code", "unit_name", "total":
		default:
			s.Terms = append(s.Terms, Words(humanize(k), v)...)
		}
	}
	for k, v := range act {
		switch k {
		case "action_type", "transaction_id", "counterparty_organization_id", "proposed_terms", "category":
		default:
			s.Other = append(s.Other, Words(humanize(k), v)...)
		}
	}
	sort.Slice(s.Other, func(i, j int) bool { return s.Other[i].Label < s.Other[j].Label })
	for _, r := range a.Rules {
		rw := ruleWords{ID: r.RuleID, Approver: strings.TrimSpace(r.ApproverRole + " of " + r.ApproverOrganizationID)}
		if c.Rules != nil {
			if rule, ok := c.Rules(r.MandateID)[r.RuleID]; ok {
				rw.Condition = Condition(sub(rule, "when"))
			}
		}
		if r.ExpiresAfterSeconds > 0 {
			d := time.Duration(r.ExpiresAfterSeconds) * time.Second
			rw.GoodFor, rw.Until = span(d), whenOf(envelope.Timestamp(c.Now.Add(d)))
		}
		s.Rules = append(s.Rules, rw)
	}
	return s
}

// name says an organisation as c.Name does, or by its identifier alone.
func (c Context) name(org string) string {
	if c.Name == nil || org == "" {
		return org
	}
	return c.Name(org)
}

// rulesOf indexes a mandate's approval rules by id.
func rulesOf(m map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	list, _ := m["approval_rules"].([]any)
	for _, x := range list {
		if r, ok := x.(map[string]any); ok {
			out[str(r["id"])] = r
		}
	}
	return out
}

// lookupContext builds the summary context from the record, when the
// admin listener has it.
func (h *handler) lookupContext(ctx context.Context) Context {
	c := Context{Now: time.Now().UTC().Truncate(time.Second), Name: h.names()}
	if h.rec == nil {
		return c
	}
	c.Now = h.rec.Now().UTC().Truncate(time.Second)
	c.Rules = func(id string) map[string]map[string]any {
		m, err := h.rec.Mandate(ctx, id)
		if err != nil {
			return nil
		}
		return rulesOf(m)
	}
	c.OfferValidUntil = func(txn string) string {
		raws, err := h.rec.Store().TransactionObjectsOfType(ctx, txn, string(protocol.Offer))
		if err != nil || len(raws) == 0 {
			return ""
		}
		last, err := canonical.DecodeObject(raws[len(raws)-1])
		if err != nil {
			return ""
		}
		return str(sub(last, "payload")["valid_until"])
	}
	return c
}
