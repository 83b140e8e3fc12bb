package authority

import (
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
)

// resolveChain resolves every parent of leaf up to its root (step 6) and
// proves each link (step 7): the parent resolves, passes the static checks,
// is the one named, verifies under its own issuer's key, is live and inside
// its interval, and the child is narrower on every axis. It returns the
// chain leaf first, as far as it was proved; every failure is recorded.
func (r *run) resolveChain(leaf map[string]any) []map[string]any {
	chain := []map[string]any{leaf}
	leafID, _ := leaf["id"].(string)
	seen := map[string]bool{leafID: true}
	child, childID := leaf, leafID
	for child["parent_mandate_id"] != nil {
		pid, _ := child["parent_mandate_id"].(string)
		switch {
		case len(chain) >= maxChainLength:
			r.deny(StepChain, childID, reason.MandateDelegationWidening, "delegation chain longer than %d mandates", maxChainLength)
			return chain
		case seen[pid]:
			r.deny(StepChain, childID, reason.MandateDelegationWidening, "delegation chain returns to %s", pid)
			return chain
		case r.e.Mandates == nil:
			r.deny(StepChain, childID, reason.MandateDelegationWidening, "no mandate resolver: parent %s of %s cannot be resolved, so narrowing cannot be proved", pid, childID)
			return chain
		}
		raw, err := r.e.Mandates.ResolveMandate(r.ctx, pid)
		if err != nil {
			r.deny(StepChain, childID, reason.MandateDelegationWidening, "parent %s of %s does not resolve: %v", pid, childID, err)
			return chain
		}
		parent, digest, err := readMandateCached(raw)
		if err != nil {
			r.deny(StepChain, pid, reason.MandateDelegationWidening, "parent %s of %s is refused: %v", pid, childID, err)
			return chain
		}
		if got, _ := parent["id"].(string); got != pid {
			r.deny(StepChain, childID, reason.MandateDelegationWidening, "resolving parent %s gave mandate %s", pid, got)
			return chain
		}
		r.res.MandateIDs = append(r.res.MandateIDs, pid)
		for _, p := range chainProblems(parent, child) {
			r.deny(StepChain, childID, reason.MandateDelegationWidening, "%s is not narrower than its parent %s: %s", childID, pid, p)
		}
		if !r.checkProof(parent, digest) {
			return chain
		}
		r.checkLive(parent)
		chain = append(chain, parent)
		seen[pid] = true
		child, childID = parent, pid
	}
	return chain
}

// chainProblems lists why child is not a proper delegation of parent: the
// gate's monotonic-narrowing checks (commercial mandate §7: parent link,
// organisation, interval, actions, scope, retained constraints and approval
// rules, numeric limits, depth), plus the link the gate does not see: the
// child is issued by a principal of that organisation who holds the
// parent's authority, the parent's issuer or the principal the parent
// delegates to (spec-map C7/D25).
func chainProblems(parent, child map[string]any) []string {
	var out []string
	for _, p := range gate.Narrowing(parent, child) {
		out = append(out, p.String())
	}
	pOrg, _ := parent["represented_organization_id"].(string)
	ci, _ := child["issuer"].(map[string]any)
	pi, _ := parent["issuer"].(map[string]any)
	ps, _ := parent["subject"].(map[string]any)
	issuer, _ := ci["principal_id"].(string)
	if org, _ := ci["organization_id"].(string); org != pOrg {
		out = append(out, "child is issued by a principal of "+org+", not of "+pOrg)
	}
	parentIssuer, _ := pi["principal_id"].(string)
	delegate, _ := ps["principal_id"].(string)
	if issuer == "" || (issuer != parentIssuer && issuer != delegate) {
		out = append(out, "child issuer "+issuer+" holds no authority under the parent (neither its issuer nor its delegated principal)")
	}
	return out
}
