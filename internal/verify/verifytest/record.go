// Package verifytest builds synthetic bilateral records, correctly hashed
// and signed with fresh ES256 keys, for the tests, benchmarks and fuzz
// targets of the verifier and the command line.
//
// A record from New is the bilateral direct path of the pilot state
// machine, between a buyer and a supplier organisation, each with a
// principal key, an agent key, key_records for both and a mandate for the
// agent: an offer, its acceptance, agreement.direct, an agreement signed
// by both and its commitment, agreement.committed, an obligation and
// obligation.activated, evidence and a performance event,
// performance.declared, the obligee's response and acceptance.granted,
// then as many settlement.instructed self-loops as asked for. Every event
// carries the appender's and the other party's event_append signatures and
// names an allow policy decision by the acting party.
//
// With Config.Rejections the obligee rejects each assertion and the
// obligor asserts again, round after round, instead of the self-loops:
// Large is such a record, with acts, on which every check can be run.
//
// Keys are generated afresh for every record and ECDSA is randomised, so
// two records are never byte-identical: tests compare by verifying.
package verifytest

import (
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
)

// Base is the instant a synthetic record starts at; each object is created
// one second after the one before.
var Base = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// RulesVersion is the rules version a synthetic record states.
const RulesVersion = "1.3"

// Party is one organisation of a synthetic record.
type Party struct {
	Org, Agent, Principal      string
	AgentKeyID, PrincipalKeyID string
	MandateID                  string
	// AgentSigner and PrincipalSigner sign as the party's agent and
	// principal; tests use them to build objects of their own.
	AgentSigner, PrincipalSigner signature.Signer
	// AgentKey and PrincipalKey are the private keys.
	AgentKey, PrincipalKey *ecdsa.PrivateKey
}

// Actor is the party's agent acting under its mandate.
func (p *Party) Actor() envelope.Actor {
	return envelope.Actor{OrganizationID: p.Org, AgentID: p.Agent, MandateID: p.MandateID}
}

// Ref is the party as a partyRef {organization_id, agent_id}.
func (p *Party) Ref() map[string]any {
	return map[string]any{"organization_id": p.Org, "agent_id": p.Agent}
}

// Record is a synthetic record.
type Record struct {
	TransactionID   string
	Buyer, Supplier *Party
	// Objects are the envelope objects, key_records first, in creation
	// order.
	Objects []map[string]any
	// Mandates are the two agents' mandates.
	Mandates []map[string]any
	// Keys declares the four public keys.
	Keys *keys.KeySet
	// EventIDs are the ids of the events, in sequence order.
	EventIDs []string

	clock     int
	session   string
	lastEvent map[string]any
	cfg       Config
}

// Config shapes a synthetic record.
type Config struct {
	// Events is the number of events (at least 1).
	Events int
	// Acts makes every policy decision and event bind the action_hash of
	// the act document its party evaluated (decisions.md item 6), written
	// out here member by member, so a verifier can rebuild the act from
	// the record. Without it the hashes are opaque stand-ins. With it the
	// countersigning supplier's own agreement.sign decision is in the
	// record too.
	Acts bool
	// Categories, when set, are a categories axis added to both mandates'
	// scope; the acts then name the first of them.
	Categories []string
	// BuyerRules and SupplierRules are the two mandates' approval_rules.
	BuyerRules, SupplierRules []any
	// Rejections fills the record past the first performance.declared
	// with rounds of the obligee's acceptance.rejected (its response
	// rejecting the assertion for evidence_insufficient) and the
	// obligor's next performance.declared (fresh evidence, a fresh
	// assertion), instead of settlement.instructed self-loops, whose guard
	// no bundle establishes. Every check of such a record can be run: with
	// Acts, a verifier reports no gap. When one event is left after the
	// rounds, it is acceptance.granted of the last assertion.
	Rejections bool
}

// Contents returns the record as bundle contents, stating RulesVersion.
func (r *Record) Contents() bundle.Contents {
	return bundle.Contents{
		Manifest: bundle.Manifest{RulesVersion: RulesVersion, TransactionID: r.TransactionID},
		Objects:  r.Objects,
		Mandates: r.Mandates,
		Keys:     r.Keys,
	}
}

// Signatures counts the signature entries of the record's objects plus the
// mandate proofs: the number of signature verifications a full check of
// the record does.
func (r *Record) Signatures() int {
	n := len(r.Mandates)
	for _, o := range r.Objects {
		list, _ := o["signatures"].([]any)
		n += len(list)
	}
	return n
}

// Object returns the record's object with id, or nil.
func (r *Record) Object(id string) map[string]any {
	for _, o := range r.Objects {
		if o["id"] == id {
			return o
		}
	}
	return nil
}

// ObjectOfType returns the record's first object of type typ, or nil.
func (r *Record) ObjectOfType(typ string) map[string]any {
	for _, o := range r.Objects {
		if o["object_type"] == typ {
			return o
		}
	}
	return nil
}

// Now returns the next instant of the record's clock.
func (r *Record) Now() time.Time {
	r.clock++
	return Base.Add(time.Duration(r.clock) * time.Second)
}

func newParty(name, role string) (*Party, error) {
	p := &Party{
		Org:            "org_" + name,
		Agent:          "agt_" + name + "_" + role,
		Principal:      "prn_" + name + "_director",
		AgentKeyID:     "key_" + name + "_agent",
		PrincipalKeyID: "key_" + name + "_principal",
		MandateID:      "mnd_" + name + "_" + role,
	}
	var err error
	if p.AgentKey, err = keys.Generate(); err != nil {
		return nil, err
	}
	if p.PrincipalKey, err = keys.Generate(); err != nil {
		return nil, err
	}
	if p.AgentSigner, err = signature.NewES256(p.AgentKeyID, p.AgentKey); err != nil {
		return nil, err
	}
	if p.PrincipalSigner, err = signature.NewES256(p.PrincipalKeyID, p.PrincipalKey); err != nil {
		return nil, err
	}
	return p, nil
}

// New builds a record with the given number of events (at least 1).
func New(events int) (*Record, error) { return NewWith(Config{Events: events}) }

// Large is the record the end-to-end benchmarks verify: events events on
// the direct path with acts rebuilt (Config.Acts) and rounds of rejected
// and renewed assertions (Config.Rejections), so that every check of it
// can be run and a verifier reports no gap and no failure. Each event
// carries the appender's and the countersigner's signatures; every other
// object one, and each mandate its proof.
func Large(events int) (*Record, error) {
	return NewWith(Config{Events: events, Acts: true, Rejections: true})
}

// NewWith builds a record as cfg says.
func NewWith(cfg Config) (*Record, error) {
	events := cfg.Events
	if events < 1 {
		return nil, fmt.Errorf("verifytest: a record needs at least one event")
	}
	r := &Record{TransactionID: "txn_synthetic_0001", session: "ses_synthetic_0001", Keys: keys.NewKeySet(), cfg: cfg}
	var err error
	if r.Buyer, err = newParty("buyer", "procurement"); err != nil {
		return nil, err
	}
	if r.Supplier, err = newParty("supplier", "sales"); err != nil {
		return nil, err
	}
	for _, p := range []*Party{r.Buyer, r.Supplier} {
		if err := r.keyRecords(p); err != nil {
			return nil, err
		}
	}
	for _, p := range []*Party{r.Buyer, r.Supplier} {
		m, err := r.mandate(p)
		if err != nil {
			return nil, err
		}
		r.Mandates = append(r.Mandates, m)
	}
	if err := r.direct(events); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Record) keyRecords(p *Party) error {
	for _, k := range []struct {
		id  string
		pub *ecdsa.PublicKey
	}{{p.PrincipalKeyID, &p.PrincipalKey.PublicKey}, {p.AgentKeyID, &p.AgentKey.PublicKey}} {
		if err := r.Keys.Add(k.id, k.pub); err != nil {
			return err
		}
		kr, err := envelope.NewKeyRecord(envelope.KeyRecordSpec{
			KeyID: k.id, Controller: p.Org, PublicKey: k.pub,
			ValidFrom: Base.Add(-time.Hour), CreatedBy: p.Actor(), CreatedAt: Base,
		})
		if err != nil {
			return err
		}
		if err := r.seal(kr, p.PrincipalSigner, "object_issuance"); err != nil {
			return err
		}
	}
	return nil
}

func (r *Record) mandate(p *Party) (map[string]any, error) {
	other := r.Supplier
	actions := []any{"offer.accept", "agreement.sign", "obligation.activated", "acceptance.granted", "acceptance.rejected", "settlement.instruct"}
	rules := r.cfg.BuyerRules
	if p == r.Supplier {
		other = r.Buyer
		actions = []any{"offer.submit", "agreement.sign", "performance.declared"}
		rules = r.cfg.SupplierRules
	}
	if rules == nil {
		rules = []any{}
	}
	scope := map[string]any{
		"transaction_ids":               []any{r.TransactionID},
		"counterparty_organization_ids": []any{other.Org},
	}
	if len(r.cfg.Categories) > 0 {
		cs := make([]any, len(r.cfg.Categories))
		for i, c := range r.cfg.Categories {
			cs[i] = c
		}
		scope["categories"] = cs
	}
	m := map[string]any{
		"spec_version":                "a202-mandate/0.1",
		"id":                          p.MandateID,
		"issuer":                      map[string]any{"organization_id": p.Org, "principal_id": p.Principal, "key_id": p.PrincipalKeyID},
		"subject":                     map[string]any{"agent_id": p.Agent, "key_id": p.AgentKeyID},
		"represented_organization_id": p.Org,
		"parent_mandate_id":           nil,
		"actions":                     actions,
		"scope":                       scope,
		"constraints": []any{map[string]any{
			"id": "c_total_amount", "type": "commercial.decimal", "path": "$.proposed_terms.core.total.amount",
			"operator": "maximum", "value": "5000.00", "on_failure": "deny",
		}},
		"approval_rules":  rules,
		"delegation":      map[string]any{"allowed": false, "maximum_depth": json.Number("0")},
		"evidence_refs":   []any{},
		"status_endpoint": "https://status." + p.Org[4:] + ".invalid/mandates/" + p.MandateID,
		"valid_from":      envelope.Timestamp(Base.Add(-time.Hour)),
		"valid_until":     envelope.Timestamp(Base.Add(30 * 24 * time.Hour)),
	}
	if err := signature.SignMandate(m, p.PrincipalSigner, Base); err != nil {
		return nil, err
	}
	return m, nil
}

// seal sets obj's content hash, signs it once per signer at the record's
// current instant, and appends it to the record.
func (r *Record) seal(obj map[string]any, s signature.Signer, purpose string, more ...signature.Signer) error {
	if err := envelope.Seal(obj); err != nil {
		return err
	}
	at, err := envelope.ParseTimestamp(obj["created_at"].(string))
	if err != nil {
		return err
	}
	for _, signer := range append([]signature.Signer{s}, more...) {
		if err := signature.Sign(obj, signer, purpose, at); err != nil {
			return err
		}
	}
	r.Objects = append(r.Objects, obj)
	return nil
}

// object creates, seals, signs and appends one object by p's agent.
func (r *Record) object(typ, id string, p *Party, payload map[string]any, purpose string, more ...signature.Signer) (map[string]any, error) {
	obj, err := envelope.New(envelope.Spec{
		ObjectType: typ, ID: id, CreatedBy: p.Actor(), TransactionID: r.TransactionID,
		CreatedAt: r.Now(), Payload: payload,
	})
	if err != nil {
		return nil, err
	}
	return obj, r.seal(obj, p.AgentSigner, purpose, more...)
}

// decision is p's allow over an act, signed by p's agent. With Acts the
// act is the document p evaluated: the action, the transaction, the other
// party, the proposed terms and the references, and the first category
// when the mandates are scoped by category; otherwise a stand-in.
func (r *Record) decision(id string, p *Party, act string, seq int, terms, refs map[string]any) (map[string]any, string, error) {
	doc := map[string]any{"action_type": act, "transaction_id": r.TransactionID, "decision_ref": id}
	if r.cfg.Acts {
		other := r.Supplier
		if p == r.Supplier {
			other = r.Buyer
		}
		doc = map[string]any{"action_type": act, "transaction_id": r.TransactionID, "counterparty_organization_id": other.Org}
		if terms != nil {
			doc["proposed_terms"] = terms
		}
		for k, v := range refs {
			doc[k] = v
		}
		if len(r.cfg.Categories) > 0 {
			doc["category"] = r.cfg.Categories[0]
		}
	}
	hash, err := canonical.Hash(doc)
	if err != nil {
		return nil, "", err
	}
	d, err := r.object("policy_decision", id, p, map[string]any{
		"action_hash": hash, "decision": "allow", "reason_codes": []any{},
		"evaluated_at":    envelope.Timestamp(Base.Add(time.Duration(r.clock) * time.Second)),
		"mandate_ids":     []any{p.MandateID},
		"stream":          map[string]any{"kind": "transaction", "id": r.TransactionID},
		"stream_sequence": num(seq), "visibility": "transaction_parties",
	}, "policy_decision")
	return d, hash, err
}

// event appends an event by appender, countersigned by the other party.
func (r *Record) event(seq int, appender *Party, eventType, from, to string, data map[string]any, decisionID, actionHash string) error {
	other := r.Supplier
	if appender == r.Supplier {
		other = r.Buyer
	}
	var prev any
	if r.lastEvent != nil {
		prev = r.lastEvent["content_hash"]
	}
	id := fmt.Sprintf("evt_synthetic_%06d", seq)
	at := r.Now()
	obj, err := envelope.New(envelope.Spec{
		ObjectType: "transaction_event", ID: id, CreatedBy: appender.Actor(), TransactionID: r.TransactionID,
		CreatedAt: at,
		Payload: map[string]any{
			"stream":   map[string]any{"kind": "transaction", "id": r.TransactionID},
			"sequence": num(seq), "event_type": eventType, "occurred_at": envelope.Timestamp(at),
			"previous_event_hash": prev, "action_hash": actionHash, "policy_decision_id": decisionID,
			"from_state": from, "to_state": to, "data": data,
		},
	})
	if err != nil {
		return err
	}
	if err := r.seal(obj, appender.AgentSigner, "event_append", other.AgentSigner); err != nil {
		return err
	}
	r.EventIDs = append(r.EventIDs, id)
	r.lastEvent = obj
	return nil
}

// direct builds the direct-formation record up to n events.
func (r *Record) direct(n int) error {
	b, s := r.Buyer, r.Supplier
	terms := map[string]any{
		"profile": "a202-profile/calibration-service/0.1",
		"core": map[string]any{
			"description": "Synthetic calibration of 20 test instruments",
			"quantity":    "20", "unit_code": "H87", "unit_name": "piece",
			"total": map[string]any{"currency": "EUR", "amount": "3000.00"},
		},
		"profile_terms": map[string]any{},
	}
	termsHash, err := canonical.Hash(terms)
	if err != nil {
		return err
	}
	offer, err := r.object("offer", "off_synthetic_0001", s, map[string]any{
		"offeror": s.Ref(), "offeree": b.Ref(), "session_id": r.session, "supersedes_offer_id": nil,
		"valid_until": envelope.Timestamp(Base.Add(24 * time.Hour)), "terms": terms, "evidence_refs": []any{},
	}, "offer_submission")
	if err != nil {
		return err
	}
	if _, _, err := r.decision("pol_synthetic_offer", s, "offer.submit", 0, terms, nil); err != nil {
		return err
	}
	acc, err := r.object("acceptance", "acc_synthetic_0001", b, map[string]any{
		"offer_id": offer["id"], "offer_hash": offer["content_hash"], "session_id": r.session, "accepting_party": b.Ref(),
	}, "offer_acceptance")
	if err != nil {
		return err
	}
	_, accHash, err := r.decision("pol_synthetic_accept", b, "offer.accept", 1, terms, nil)
	if err != nil {
		return err
	}
	seq := 0
	next := func(appender *Party, typ, from, to string, data map[string]any, pol, hash string) (bool, error) {
		if seq >= n {
			return false, nil
		}
		seq++
		return seq < n, r.event(seq, appender, typ, from, to, data, pol, hash)
	}
	if more, err := next(b, "agreement.direct", "draft", "agreement_pending",
		map[string]any{"offer_id": offer["id"], "acceptance_id": acc["id"], "session_id": r.session}, "pol_synthetic_accept", accHash); !more {
		return err
	}
	agr, err := r.object("agreement", "agr_synthetic_0001", b, map[string]any{
		"accepted_offer_id": offer["id"], "accepted_offer_hash": offer["content_hash"], "acceptance_id": acc["id"],
		"buyer": b.Ref(), "supplier": s.Ref(), "terms": terms, "terms_hash": termsHash,
		"effective_at": envelope.Timestamp(Base.Add(time.Duration(r.clock) * time.Second)), "commitment_ids": []any{"cmt_synthetic_0001"},
	}, "agreement_commitment", s.AgentSigner)
	if err != nil {
		return err
	}
	subject := map[string]any{"agreement_id": agr["id"], "profile": terms["profile"], "term_path": "$.terms.core.quantity", "terms_hash": termsHash}
	cmt, err := r.object("commitment", "cmt_synthetic_0001", s, map[string]any{
		"agreement_id": agr["id"], "committed_party": s.Ref(), "subject": subject,
	}, "object_issuance")
	if err != nil {
		return err
	}
	if r.cfg.Acts {
		// The supplier's own agreement.sign, which has no event: the
		// buyer appends agreement.committed.
		if _, _, err := r.decision("pol_synthetic_countersign", s, "agreement.sign", 2, terms, map[string]any{"agreement_id": agr["id"]}); err != nil {
			return err
		}
	}
	_, signHash, err := r.decision("pol_synthetic_sign", b, "agreement.sign", 2, terms, map[string]any{"agreement_id": agr["id"]})
	if err != nil {
		return err
	}
	if more, err := next(b, "agreement.committed", "agreement_pending", "committed",
		map[string]any{"agreement_id": agr["id"], "commitment_id": cmt["id"]}, "pol_synthetic_sign", signHash); !more {
		return err
	}
	obl, err := r.object("obligation", "obl_synthetic_0001", b, map[string]any{
		"agreement_id": agr["id"], "commitment_id": cmt["id"], "obligor": s.Ref(), "obligee": b.Ref(),
		"subject":       subject,
		"due_condition": map[string]any{"type": "due_at_time", "at": envelope.Timestamp(Base.Add(20 * 24 * time.Hour))},
		"quantity":      "20", "unit_code": "H87", "consideration": map[string]any{"currency": "EUR", "amount": "3000.00"},
		"state": "pending",
	}, "object_issuance")
	if err != nil {
		return err
	}
	_, actHash, err := r.decision("pol_synthetic_activate", b, "obligation.activated", 3, core("20", obl), map[string]any{"agreement_id": agr["id"]})
	if err != nil {
		return err
	}
	if more, err := next(b, "obligation.activated", "committed", "in_performance",
		map[string]any{"obligation_id": obl["id"]}, "pol_synthetic_activate", actHash); !more {
		return err
	}
	prf, declPol, declHash, err := r.assertion(s, obl, 1, termsHash, seq+1)
	if err != nil {
		return err
	}
	if more, err := next(s, "performance.declared", "in_performance", "acceptance_pending",
		map[string]any{"obligation_id": obl["id"], "performance_event_id": prf["id"]}, declPol, declHash); !more {
		return err
	}
	// Rejections: the obligee rejects each assertion and the obligor
	// asserts again, while there is room for both events.
	for round := 2; r.cfg.Rejections && n-seq >= 2; round++ {
		obr, pol, hash, err := r.rejection(b, obl, prf, round-1, seq+1)
		if err != nil {
			return err
		}
		if _, err := next(b, "acceptance.rejected", "acceptance_pending", "in_performance",
			map[string]any{"obligation_id": obl["id"], "obligation_response_id": obr["id"]}, pol, hash); err != nil {
			return err
		}
		if prf, pol, hash, err = r.assertion(s, obl, round, termsHash, seq+1); err != nil {
			return err
		}
		if more, err := next(s, "performance.declared", "in_performance", "acceptance_pending",
			map[string]any{"obligation_id": obl["id"], "performance_event_id": prf["id"]}, pol, hash); !more {
			return err
		}
	}
	obr, err := r.object("obligation_response", "obr_synthetic_0001", b, map[string]any{
		"obligation_id": obl["id"], "response_type": "accept", "assertion_id": prf["id"],
		"assertion_hash": prf["content_hash"], "accepted_quantity": "20",
	}, "object_issuance")
	if err != nil {
		return err
	}
	_, grantHash, err := r.decision("pol_synthetic_grant", b, "acceptance.granted", seq+1, core("20", obl), map[string]any{"assertion_id": prf["id"]})
	if err != nil {
		return err
	}
	if more, err := next(b, "acceptance.granted", "acceptance_pending", "settlement_pending",
		map[string]any{"obligation_id": obl["id"], "obligation_response_id": obr["id"]}, "pol_synthetic_grant", grantHash); !more {
		return err
	}
	_, stlHash, err := r.decision("pol_synthetic_settle", b, "settlement.instruct", 6, nil, nil)
	if err != nil {
		return err
	}
	for {
		more, err := next(b, "settlement.instructed", "settlement_pending", "settlement_pending", map[string]any{}, "pol_synthetic_settle", stlHash)
		if err != nil || !more {
			return err
		}
	}
}

// assertion is the obligor's round-th assertion of obl: its evidence over
// artifact, the performance_event referencing it, and the obligor's
// decision for performance.declared at stream sequence seq. It returns the
// assertion, the decision's id and the act's hash. The first round's
// objects keep the names a record without rejections has.
func (r *Record) assertion(p *Party, obl map[string]any, round int, artifact string, seq int) (map[string]any, string, string, error) {
	pol := "pol_synthetic_declare"
	if round > 1 {
		pol = fmt.Sprintf("pol_synthetic_declare_%04d", round)
	}
	evd, err := r.object("evidence", fmt.Sprintf("evd_synthetic_%04d", round), p, map[string]any{
		"evidence_type": "measurement_record", "claim": "Synthetic measurements for 20 instruments",
		"artifact_hash": artifact, "issuer": map[string]any{"organization_id": p.Org},
		"verification": map[string]any{"status": "unverified", "verified_at": nil, "verifier_organization_id": nil},
	}, "object_issuance")
	if err != nil {
		return nil, "", "", err
	}
	prf, err := r.object("performance_event", fmt.Sprintf("prf_synthetic_%04d", round), p, map[string]any{
		"obligation_id": obl["id"], "asserted_quantity": "20", "unit_code": "H87",
		"evidence_refs": []any{map[string]any{
			"evidence_id": evd["id"], "content_hash": evd["content_hash"], "evidence_type": "measurement_record",
			"signed_by": p.Ref(),
		}},
	}, "object_issuance")
	if err != nil {
		return nil, "", "", err
	}
	_, hash, err := r.decision(pol, p, "performance.declared", seq, core("20", obl), map[string]any{"obligation_id": obl["id"]})
	return prf, pol, hash, err
}

// rejection is the obligee's round-th rejection, of assertion prf of obl,
// with a reason from the closed list (obligation §5.5), and its decision
// for acceptance.rejected at stream sequence seq. It returns the
// response, the decision's id and the act's hash.
func (r *Record) rejection(p *Party, obl, prf map[string]any, round, seq int) (map[string]any, string, string, error) {
	obr, err := r.object("obligation_response", fmt.Sprintf("obr_synthetic_reject_%04d", round), p, map[string]any{
		"obligation_id": obl["id"], "response_type": "reject", "assertion_id": prf["id"],
		"assertion_hash": prf["content_hash"], "reason_code": "evidence_insufficient",
	}, "object_issuance")
	if err != nil {
		return nil, "", "", err
	}
	pol := fmt.Sprintf("pol_synthetic_reject_%04d", round)
	_, hash, err := r.decision(pol, p, "acceptance.rejected", seq, core("20", obl), map[string]any{"assertion_id": prf["id"]})
	return obr, pol, hash, err
}

// core is the proposed_terms of an obligation act over quantity, with the
// obligation's unit and consideration.
func core(quantity string, obl map[string]any) map[string]any {
	p := obl["payload"].(map[string]any)
	return map[string]any{"core": map[string]any{"quantity": quantity, "unit_code": p["unit_code"], "total": p["consideration"]}}
}

// Approve appends an approval by p's principal, in role, of the act whose
// action_hash is actionHash: decided "approved", created at created and
// expiring life later, signed for object_issuance with p's principal key.
// Tests change and re-sign it to make the approvals that must not count.
func (r *Record) Approve(p *Party, actionHash, role string, created time.Time, life time.Duration) (map[string]any, error) {
	obj, err := envelope.New(envelope.Spec{
		ObjectType: "approval", CreatedBy: p.Actor(), TransactionID: r.TransactionID, CreatedAt: created,
		Payload: map[string]any{
			"action_hash": actionHash,
			"approver":    map[string]any{"organization_id": p.Org, "principal_id": p.Principal, "role": role},
			"decision":    "approved",
			"expires_at":  envelope.Timestamp(created.Add(life)),
			"conditions":  []any{},
		},
	})
	if err != nil {
		return nil, err
	}
	return obj, r.seal(obj, p.PrincipalSigner, "object_issuance")
}

// num is an integer in the form canonical.Decode gives, so a built record
// and a read one look alike to every consumer.
func num(n int) json.Number { return json.Number(strconv.Itoa(n)) }
