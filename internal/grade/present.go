package grade

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/partyd/party/bindings/a2a"
	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Carrier is one binding the cases are presented over: the name its
// observations are recorded under and this instance's own client for it,
// the one its record engine sends with (bindings/a2a, bindings/https).
type Carrier struct {
	Name      string
	Transport delivery.Transport
}

// Record is the assessor's own record, read to make sure no case is
// correlated to a transaction it holds (store.Store).
type Record interface {
	GetTransaction(ctx context.Context, id string) (store.Transaction, error)
}

// message is what a case becomes on a carrier: the objects of one message,
// each its canonical bytes, and the correlation id. When the case cannot
// be presented, why says so and objects is nil.
type message struct {
	objects [][]byte
	txn     string
	why     string
}

// Why a case is not presented (see the package documentation).
const (
	notPositive = "a positive case is established from the objects the counterparty emits (role scopes §7.1 items 1–2); presenting it asks the counterparty to take a published object into its record"
	notMandate  = "a mandate never travels in a message: the relying party fetches it from its issuer's instance (decisions.md item 8), so a mandate fixture has no carrier form"
	notGrade    = "a conformance grade is a standalone document handed over out of band (party grade import), not an envelope object a message carries"
	notDecl     = "a capability declaration is the counterparty's own card or preflight, read by the carrier before any message (binding §3.2, §4.2); the assessor cannot put the fixture's declaration in its place for one message"
	notContext  = "the case's rule is judged against a context the fixture states (%s), which no carrier message carries; the receiver judges with its own"
	notOneTxn   = "the fixture's objects belong to more than one transaction, and one message is correlated to one"
	notHeldWhy  = "the case's transaction %s is in this instance's record, and a grading run never sends into a transaction it holds"
)

// carried returns the message a case is presented as. A kernel fixture is
// one object; a bundle fixture with no context is its objects, in order,
// as one message (what one party sends the other at once); the other kinds
// have no carrier form. The correlation id is the objects' own
// transaction_id, because the envelope is authoritative (binding §6.3: a
// message correlated to another id is refused A202-STREAM-MISMATCH before
// any rule of the case is read); for objects of no transaction it is an id
// minted for the run.
func carried(c Case) message {
	if c.Valid {
		return message{why: notPositive}
	}
	var docs []any
	switch c.Kind {
	case "kernel":
		doc, err := canonical.DecodeWith(c.Body, canonical.Options{AllowFloats: true})
		if err != nil {
			return message{why: "the fixture does not decode: " + err.Error()}
		}
		docs = []any{doc}
	case "bundle":
		doc, err := canonical.DecodeObjectWith(c.Body, canonical.Options{AllowFloats: true})
		if err != nil {
			return message{why: "the fixture does not decode: " + err.Error()}
		}
		if ctx, _ := doc["context"].(map[string]any); len(ctx) > 0 {
			var names []string
			for k := range ctx {
				names = append(names, k)
			}
			return message{why: fmt.Sprintf(notContext, joinSorted(names))}
		}
		docs, _ = doc["objects"].([]any)
	case "mandate", "mandate_chain":
		return message{why: notMandate}
	case "grade":
		return message{why: notGrade}
	case "declaration":
		return message{why: notDecl}
	default:
		return message{why: "fixture kind " + c.Kind + " has no carrier form"}
	}
	if len(docs) == 0 {
		return message{why: "the fixture holds no object"}
	}
	var m message
	// Each object travels as its RFC 8785 bytes (decisions.md item 13); a
	// number no A202 object may hold is written as RFC 8785 writes it, so
	// that the receiver meets the defect rather than a repair.
	for _, d := range docs {
		obj, _ := d.(map[string]any)
		if _, ok := obj["kernel_annotations"]; ok && c.Code != reason.AnnotationForged {
			// Nothing annotates an object between two parties (role
			// scopes §4.4), and annotations lie outside its content hash
			// and every signature (canonical model §4): the object
			// travels as a counterparty would send it, so that the
			// receiver meets the case's defect, not a forged annotation.
			// The case whose defect is the annotation keeps it.
			obj = maps.Clone(obj)
			delete(obj, "kernel_annotations")
			d = obj
		}
		if t, ok := obj["transaction_id"].(string); ok {
			if m.txn != "" && m.txn != t {
				return message{why: notOneTxn}
			}
			m.txn = t
		}
		b, err := canonical.Marshal(d)
		if err != nil {
			return message{why: "the fixture has no canonical form: " + err.Error()}
		}
		m.objects = append(m.objects, b)
	}
	return m
}

// Observation is what one carrier's exchange of a case showed: the
// counterparty took the message (accepted) or refused it with the codes
// it returned, and the verdict on that (judge).
type Observation struct {
	Carrier     string        `json:"carrier"`
	Outcome     string        `json:"outcome"`
	ReasonCodes []reason.Code `json:"reason_codes"`
	Verdict     string        `json:"verdict"`
}

// The outcomes an observation records.
const (
	Accepted = "accepted"
	Refused  = "refused"
)

// The verdicts on an observation and on a case (see the package
// documentation).
const (
	Pass         = "pass"
	Fail         = "fail"
	Inconclusive = "inconclusive"
	// NotPresented is a case with no carrier form; Result.Why says why.
	NotPresented = "not_presented"
)

// presentationCodes are the codes a correct receiver may refuse a
// presented case with before it reaches the case's own rule, because of
// how the case has to travel rather than what it is: the published
// objects carry synthetic signatures by keys of organisations the
// receiver has not vouched for, created by an organisation that need not
// be the sender (A202-EVIDENCE-SIGNATURE-INVALID); they act under the
// fixture organisations' mandates, whose status no endpoint serves
// (A202-MANDATE-STATUS-UNRESOLVED); and they travel under their own
// transaction id, which the receiver may hold with another party
// (A202-STREAM-MISMATCH).
var presentationCodes = []reason.Code{reason.EvidenceSignatureInvalid, reason.MandateStatusUnresolved, reason.StreamMismatch}

// judge gives the verdict on one carrier's answer to a refused case. Pass
// is the published runner's: refused, with the declared code among those
// returned when one is declared. Inconclusive is a refusal with only
// presentation codes (presentationCodes) where another was declared: the
// receiver refused, and said why truthfully, without the case's rule
// being observed. Anything else fails: the case accepted (guessed), or
// refused with a code the case does not call for.
func judge(c Case, o Observation) string {
	switch {
	case o.Outcome != Refused:
		return Fail
	case c.Code == "" || slices.Contains(o.ReasonCodes, c.Code):
		return Pass
	case len(o.ReasonCodes) > 0 && !slices.ContainsFunc(o.ReasonCodes, func(rc reason.Code) bool { return !slices.Contains(presentationCodes, rc) }):
		return Inconclusive
	}
	return Fail
}

// attempts bounds how often a case is sent again while the counterparty
// answers "try again" (busy, fetching the assessor's key records).
const attempts = 3

// present sends a case's message over one carrier and reads the answer.
// A refusal (with its codes, or none) and a reported chain conflict are
// refusals; a reply is an acceptance. Anything else ends the run, once the
// retries are spent where the counterparty asked to be tried again,
// because a case not observed is not a case passed: that includes
// A202-EXTENSION-UNSUPPORTED, the binding's own capability check or
// activation failing before the case reached anything that judges it.
func present(ctx context.Context, car Carrier, peer string, m message, log *slog.Logger) (Observation, error) {
	o := Observation{Carrier: car.Name, ReasonCodes: []reason.Code{}}
	var err error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return o, ctx.Err()
			case <-time.After(time.Duration(i) * 500 * time.Millisecond):
			}
		}
		_, err = car.Transport.Deliver(ctx, peer, m.txn, m.objects)
		var refusal *reason.Refusal
		switch {
		case err == nil:
			o.Outcome = Accepted
			return o, nil
		case errors.Is(err, delivery.ErrUnavailable):
			log.Info("the counterparty asks for the case again", "carrier", car.Name, "transaction_id", m.txn, "error", err)
			continue
		case errors.As(err, &refusal) && refusal.Has(reason.ExtensionUnsupported):
			// The capability check or the activation failed: nothing
			// reached the counterparty's application over this binding,
			// so nothing about the case was observed.
			return o, err
		case errors.As(err, &refusal):
			o.Outcome = Refused
			o.ReasonCodes = append(o.ReasonCodes, refusal.Codes...)
			return o, nil
		case errors.Is(err, delivery.ErrConflict):
			// The receiver would not extend its record with the
			// message; a conflict carries no code on the wire.
			o.Outcome = Refused
			return o, nil
		default:
			return o, err
		}
	}
	return o, err
}

// freshTransaction mints a correlation id for a case of no transaction,
// one the assessor's record does not hold.
func freshTransaction(ctx context.Context, rec Record) (string, error) {
	id, err := envelope.NewID("txn")
	if err != nil {
		return "", err
	}
	if h, err := held(ctx, rec, id); err != nil || h {
		return "", fmt.Errorf("grade: minting a correlation id: %v held, %w", h, err)
	}
	return id, nil
}

// held reports whether the assessor's record holds a transaction: one
// between the two organisations is in both records, and a grading run
// never sends into it.
func held(ctx context.Context, rec Record, txn string) (bool, error) {
	_, err := rec.GetTransaction(ctx, txn)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// joinSorted lists names sorted, comma-separated.
func joinSorted(names []string) string {
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Carriers are this instance's clients of both bindings, as its record
// engine has them (bindings/peer), A2A first: a case is presented over
// each.
func Carriers(clients *peering.Clients, log *slog.Logger) ([]Carrier, error) {
	ac, err := a2a.NewClient(a2a.ClientConfig{Clients: clients, Logger: log})
	if err != nil {
		return nil, err
	}
	hc, err := https.NewClient(https.ClientConfig{Clients: clients, Logger: log})
	if err != nil {
		return nil, err
	}
	return []Carrier{{Name: "a2a", Transport: ac}, {Name: "https", Transport: hc}}, nil
}
