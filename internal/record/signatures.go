package record

import (
	"context"
	"fmt"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// Signatures over records. A termination, a remediation, a transaction
// terminated through its exception and a settlement adjustment are each
// agreed by the parties signing a record's hash: evidence of type
// signed_document this organisation issues, whose artifact_hash is the
// hash and whose claim says which record it is. The functions here are
// that one form and the one way it is recognised, for every such record.

// issuedEvidence is the payload of an evidence object this organisation
// (org) issues: unverified until a verifier says otherwise (evidence
// verification §3).
func issuedEvidence(org, evidenceType, claim, hash string) map[string]any {
	return map[string]any{
		"evidence_type": evidenceType,
		"claim":         claim,
		"artifact_hash": hash,
		"issuer":        map[string]any{"organization_id": org},
		"verification":  map[string]any{"status": "unverified", "verified_at": nil, "verifier_organization_id": nil},
	}
}

// signRecord issues this organisation's signature over the record whose
// hash is hash: a signed_document whose claim names the kind of record.
func signRecord(b *builder, claim, hash string) (*Obj, error) {
	return b.add(protocol.Evidence, issuedEvidence(b.e.org.Config().OrganizationID, "signed_document", claim, hash), protocol.PurposeObjectIssuance)
}

// isSignature reports whether o is org's own signature (signRecord) over a
// record of the kind claim names (object.View.SignedDocument).
func isSignature(o *Obj, org, claim string) bool { return o.SignedDocument(org, claim) }

// heldSignature returns org's signature over the record hash of the kind
// claim names, held on txn, or nil.
func (e *Engine) heldSignature(ctx context.Context, txn, org, claim, hash string) (*Obj, error) {
	list, err := e.ofType(ctx, txn, protocol.Evidence)
	if err != nil {
		return nil, err
	}
	for _, o := range list {
		if isSignature(o, org, claim) && o.P("artifact_hash") == hash {
			return o, nil
		}
	}
	return nil, nil
}

// signature is the evidence a message recording an act by a signature
// alone carries (acts.go, signatureOver): it must be the sender's own
// signature over a record of the kind claim names; what says so in the
// refusal.
func (r *receipt) signature(claim, what string) (*Obj, error) {
	evd := r.one(protocol.Evidence)
	if !isSignature(evd, r.from, claim) {
		return nil, reason.Refuse(fmt.Sprintf("evidence %s travels alone only as %s's %s", evd.ID(), r.from, what))
	}
	return evd, nil
}
