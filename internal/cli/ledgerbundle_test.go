package cli_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/verify/verifytest"
)

// paidBundle writes to dir a signed synthetic record taken to completed:
// verifytest's record up to acceptance.granted (the buyer accepted all 20
// units of the supplier's obligation, 3000.00 EUR), then the buyer's
// instruction of amount with a succeeded receipt (settlement.instructed)
// and the supplier's transaction.completed. Every step of evidence
// verification holds whatever the amount, within the consideration: the
// specification asks that completion follow a succeeded payment, not that
// the payment add up. The ledger does (completion_paid), so a token amount
// is a bundle whose steps verify and whose ledger has a finding.
func paidBundle(dir, amount string) error {
	rec, err := verifytest.New(5)
	if err != nil {
		return err
	}
	b, s := rec.Buyer, rec.Supplier
	// The supplier's mandate lists the completion too.
	for _, m := range rec.Mandates {
		if m["id"] == s.MandateID {
			m["actions"] = append(m["actions"].([]any), "transaction.complete")
			delete(m, "proof")
			if err := signature.SignMandate(m, s.PrincipalSigner, verifytest.Base); err != nil {
				return err
			}
		}
	}
	obl, obr := rec.ObjectOfType("obligation"), rec.ObjectOfType("obligation_response")
	op := obl["payload"].(map[string]any)
	object := func(typ, id string, p *verifytest.Party, purpose string, payload map[string]any, more ...signature.Signer) (map[string]any, error) {
		at := rec.Now()
		o, err := envelope.New(envelope.Spec{ObjectType: typ, ID: id, CreatedBy: p.Actor(), TransactionID: rec.TransactionID, CreatedAt: at, Payload: payload})
		if err != nil {
			return nil, err
		}
		if err := envelope.Seal(o); err != nil {
			return nil, err
		}
		for _, sg := range append([]signature.Signer{p.AgentSigner}, more...) {
			if err := signature.Sign(o, sg, purpose, at); err != nil {
				return nil, err
			}
		}
		rec.Objects = append(rec.Objects, o)
		return o, nil
	}
	// event appends the next event by p under its allow decision for act,
	// countersigned by the other party.
	event := func(p, other *verifytest.Party, act, typ, from, to string, data map[string]any) (map[string]any, error) {
		seq := len(rec.EventIDs) + 1
		pol := fmt.Sprintf("pol_ledger_%04d", seq)
		hash, err := canonical.Hash(map[string]any{"action_type": act, "transaction_id": rec.TransactionID, "decision_ref": pol})
		if err != nil {
			return nil, err
		}
		if _, err := object("policy_decision", pol, p, "policy_decision", map[string]any{
			"action_hash": hash, "decision": "allow", "reason_codes": []any{},
			"evaluated_at": envelope.Timestamp(rec.Now()), "mandate_ids": []any{p.MandateID},
			"stream":          map[string]any{"kind": "transaction", "id": rec.TransactionID},
			"stream_sequence": json.Number(fmt.Sprint(seq)), "visibility": "transaction_parties",
		}); err != nil {
			return nil, err
		}
		prev := rec.Object(rec.EventIDs[len(rec.EventIDs)-1])["content_hash"]
		id := fmt.Sprintf("evt_synthetic_%06d", seq)
		at := rec.Now()
		e, err := object("transaction_event", id, p, "event_append", map[string]any{
			"stream":   map[string]any{"kind": "transaction", "id": rec.TransactionID},
			"sequence": json.Number(fmt.Sprint(seq)), "event_type": typ, "occurred_at": envelope.Timestamp(at),
			"previous_event_hash": prev, "action_hash": hash, "policy_decision_id": pol,
			"from_state": from, "to_state": to, "data": data,
		}, other.AgentSigner)
		if err != nil {
			return nil, err
		}
		rec.EventIDs = append(rec.EventIDs, id)
		return e, nil
	}
	const key = "pay-synthetic-0001"
	stl, err := object("settlement_instruction", "stl_synthetic_0001", b, "object_issuance", map[string]any{
		"obligation_id": obl["id"], "agreement_id": op["agreement_id"],
		"amount":                map[string]any{"currency": "EUR", "amount": amount},
		"payer_organization_id": b.Org, "payee_organization_id": s.Org,
		"trigger": map[string]any{"condition_ref": op["commitment_id"].(string) + "#balance_on_acceptance", "accepting_act_hash": obr["content_hash"]},
		"rail":    "rail_test_sandbox", "idempotency_key": key,
	})
	if err != nil {
		return err
	}
	if _, err := event(b, s, "settlement.instruct", "settlement.instructed", "settlement_pending", "settlement_pending",
		map[string]any{"settlement_instruction_id": stl["id"], "obligation_id": obl["id"]}); err != nil {
		return err
	}
	at := envelope.Timestamp(rec.Now())
	rcp, err := object("adapter_receipt", "adp_synthetic_0001", b, "adapter_receipt", map[string]any{
		"settlement_instruction_id": stl["id"], "adapter": "rail_test_sandbox", "external_spec_version": "unstated",
		"attempt": json.Number("1"), "idempotency_key": key, "status": "succeeded", "requested_at": at, "completed_at": at,
		"external_reference": "sandbox-0001", "error_code": nil, "mapping_report_hash": canonical.SHA256Hex([]byte(key)),
	})
	if err != nil {
		return err
	}
	hashes := []any{}
	for _, id := range rec.EventIDs {
		hashes = append(hashes, rec.Object(id)["content_hash"])
	}
	audit, err := canonical.Hash(map[string]any{"transaction_id": rec.TransactionID, "event_hashes": hashes})
	if err != nil {
		return err
	}
	if _, err := event(s, b, "transaction.complete", "transaction.completed", "settlement_pending", "completed",
		map[string]any{"agreement_id": op["agreement_id"], "adapter_receipt_id": rcp["id"], "audit_bundle_hash": audit}); err != nil {
		return err
	}
	return bundle.Write(dir, rec.Contents(), bundle.WriteOptions{})
}

// paidBundleCmd is the testscript command paid-bundle AMOUNT DIR.
func paidBundleCmd() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: paid-bundle AMOUNT DIR")
		os.Exit(2)
	}
	if err := paidBundle(os.Args[2], os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
