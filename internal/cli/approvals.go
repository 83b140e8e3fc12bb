package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/partyd/party/internal/admin"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/store"
)

func init() {
	register("approvals", "list the acts your agent asked you to approve, with each exact act document", runApprovals)
	register("approve", "approve one pending approval request (the principal signs)", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return runDecide(true, args, stdout, stderr)
	})
	register("reject", "reject one pending approval request (the principal signs)", func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return runDecide(false, args, stdout, stderr)
	})
}

const approvalsUsage = `Usage: party approvals --dir DIR [--all] [--json]

Lists the approval requests your agent made: acts its mandate holds for a
principal's approval. Each shows the request id, the mandate, the
transaction, the action hash and the exact act document the agent will
take, pretty-printed from its canonical form (the action hash is the
SHA-256 of that canonical form). Approve or reject one with
'party approve REQUEST_ID' or 'party reject REQUEST_ID'.

Only pending requests are listed unless --all is given.

With --json: one JSON array of {"approval_request_id", "mandate_id",
"transaction_id", "action_hash", "act", "approval_rules_matched",
"status", "approval_id", "requested_at", "decided_at"}.
`

func runApprovals(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party approvals", approvalsUsage)
	dir := c.dirFlag()
	all := c.Bool("all", false, "include approved and rejected requests")
	asJSON := c.Bool("json", false, "print a JSON array")
	if code, done := c.parseNoArgs(args, dir, stdout, stderr); done {
		return code
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		list, err := p.Approvals(context.Background(), !*all)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if *asJSON {
			writeJSONLine(stdout, list)
			return 0
		}
		if len(list) == 0 {
			if *all {
				fmt.Fprintln(stdout, "no approval requests")
			} else {
				fmt.Fprintln(stdout, "no pending approval requests")
			}
			return 0
		}
		for i, a := range list {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			if err := printApproval(stdout, a); err != nil {
				return failure(c.Name(), err, false, stdout, stderr)
			}
		}
		return 0
	})
}

func printApproval(w io.Writer, a principal.Approval) error {
	act, ok, err := admin.ActText(a)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s  %s  requested %s\n", a.RequestID, a.Status, a.RequestedAt)
	fmt.Fprintf(w, "  mandate      %s\n", a.MandateID)
	if a.TransactionID != "" {
		fmt.Fprintf(w, "  transaction  %s\n", a.TransactionID)
	}
	fmt.Fprintf(w, "  action hash  %s", a.ActionHash)
	if !ok {
		fmt.Fprint(w, "  (DOES NOT MATCH the act below: do not approve)")
	}
	fmt.Fprintln(w)
	for _, r := range a.Rules {
		fmt.Fprintf(w, "  held by      rule %s: approver %s %s, approval good for %d s\n", r.RuleID, r.ApproverOrganizationID, r.ApproverRole, r.ExpiresAfterSeconds)
	}
	if a.ApprovalID != "" {
		fmt.Fprintf(w, "  decided      %s, approval %s\n", a.DecidedAt, a.ApprovalID)
	}
	fmt.Fprintln(w, "  act:")
	for _, line := range strings.Split(act, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
	return nil
}

const decideUsage = `Usage: party %[1]s --dir DIR%[2]s [--json] REQUEST_ID

%[3]s

The decision is an approval object signed with the principal's key,
bound to the request's exact action hash and transaction; an approval
is good for the shortest life the mandate's matched rules allow. Read
the act first with 'party approvals'.

Output: the request, the decision and the approval object's id and
expiry; with --json the signed approval object as one line of
canonical JSON.

Exit status: 0 when decided, 1 when refused (unknown request, already
decided, or the approval cannot be made), 2 on a usage error.
`

func runDecide(approve bool, args []string, stdout, stderr io.Writer) int {
	verb, extra, text := "approve", " [--condition TEXT]...",
		"Approves one pending approval request: your agent may then take exactly that act."
	if !approve {
		verb, extra, text = "reject", " [--reason TEXT]",
			"Rejects one pending approval request: your agent may not take the act.\n--reason says why; it is signed into the rejection (its conditions, one\nper line) and shown with it on the approvals page and the timeline."
	}
	c := newFlags("party "+verb, fmt.Sprintf(decideUsage, verb, extra, text))
	dir := c.dirFlag()
	var conditions stringList
	var why *string
	if approve {
		c.Var(&conditions, "condition", "a condition stated in the approval (repeatable)")
	} else {
		why = c.String("reason", "", "why the act is rejected (signed into the rejection)")
	}
	asJSON := c.Bool("json", false, "print the signed approval object")
	id, code, done := c.parseOneArg(args, "REQUEST_ID", dir, stdout, stderr)
	if done {
		return code
	}
	if why != nil {
		// As the approvals page signs a reason: one condition per line.
		for line := range strings.SplitSeq(*why, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				conditions = append(conditions, line)
			}
		}
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		obj, err := p.Decide(context.Background(), id, approve, conditions)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = fmt.Errorf("no approval request %s in this instance's record", id)
			}
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if *asJSON {
			b, err := canonical.Marshal(obj)
			if err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
			fmt.Fprintf(stdout, "%s\n", b)
			return 0
		}
		payload, _ := obj["payload"].(map[string]any)
		done2 := "approved"
		if !approve {
			done2 = "rejected"
		}
		fmt.Fprintf(stdout, "%s %s: approval %v, expires %v\n", id, done2, obj["id"], payload["expires_at"])
		return 0
	})
}
