package authority

import (
	"fmt"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/pattern"
)

// Action names of the acts party evaluates (decisions.md 6). The first six
// are the names the published reference MCP server uses; the rest follow the
// same act-document shape and are listed in docs/authority.md.
const (
	ActOfferSubmit         = "offer.submit"
	ActOfferAccept         = "offer.accept"
	ActObligationActivated = "obligation.activated"
	ActPerformanceDeclared = "performance.declared"
	ActAcceptanceGranted   = "acceptance.granted"
	ActAcceptanceRejected  = "acceptance.rejected"
	ActAgreementSign       = "agreement.sign"
	ActSettlementInstruct  = "settlement.instruct"
	ActTerminationAgree    = "termination.agree"
	ActAgreementAmend      = "agreement.amend"
	ActDisputeRaise        = "dispute.raise"
)

// ActDocument builds the document one act is evaluated and hashed as
// (decisions.md 6): action_type, transaction_id, counterparty_organization_id,
// proposed_terms, and the act's references (agreement_id, obligation_id,
// assertion_id, and where a mandate's scope names categories or
// geographies, category and geography). A member with no value (an empty
// string, a nil map or a nil reference) is omitted, never written as null,
// so the same act always has the same bytes and the same action_hash.
//
// A reference named like one of the four fixed members is ignored: the
// fixed members come from the arguments alone.
func ActDocument(actionType, transactionID, counterpartyOrganizationID string, proposedTerms map[string]any, references map[string]any) map[string]any {
	doc := map[string]any{"action_type": actionType}
	for name, v := range references {
		if v != nil {
			doc[name] = v
		}
	}
	doc["action_type"] = actionType
	delete(doc, "transaction_id")
	delete(doc, "counterparty_organization_id")
	delete(doc, "proposed_terms")
	if transactionID != "" {
		doc["transaction_id"] = transactionID
	}
	if counterpartyOrganizationID != "" {
		doc["counterparty_organization_id"] = counterpartyOrganizationID
	}
	if proposedTerms != nil {
		doc["proposed_terms"] = proposedTerms
	}
	return doc
}

// ActionHash returns the action_hash of an act document: the SHA-256 of its
// RFC 8785 bytes, as 64 lowercase hexadecimal characters. Approvals and
// policy decisions bind this value, so one changed byte of the act releases
// nothing they granted.
func ActionHash(act map[string]any) (string, error) {
	return canonical.Hash(act)
}

var (
	actionPattern      = pattern.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	transactionPattern = pattern.MustCompile(`^txn_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)
)

// checkAct refuses an act document the evaluator cannot read: no
// action_type or transaction_id of the registered shapes, a counterparty
// that is not an organisation identifier, proposed_terms that is not an
// object, or a member carried as null.
func checkAct(act map[string]any) error {
	at, _ := act["action_type"].(string)
	if !actionPattern.MatchString(at) {
		return fmt.Errorf("act action_type %s is not a dotted action name", show(act["action_type"]))
	}
	txn, _ := act["transaction_id"].(string)
	if !transactionPattern.MatchString(txn) {
		return fmt.Errorf("act transaction_id %s is not a transaction identifier", show(act["transaction_id"]))
	}
	if v, ok := act["counterparty_organization_id"]; ok && !validOrganizationID(v) {
		return fmt.Errorf("act counterparty_organization_id %s is not an organization identifier", show(v))
	}
	if v, ok := act["proposed_terms"]; ok {
		if _, isObj := v.(map[string]any); !isObj {
			return fmt.Errorf("act proposed_terms is not an object")
		}
	}
	for name, v := range act {
		if v == nil {
			return fmt.Errorf("act member %q is null; a member without value is omitted", name)
		}
	}
	return nil
}
