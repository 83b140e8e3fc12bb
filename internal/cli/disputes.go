package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/partyd/party/internal/readmodel"
)

func init() {
	register("disputes", "list the disputes, determinations and exceptions of this instance's transactions", runDisputes)
}

const disputesUsage = `Usage: party disputes --dir DIR [--transaction TXN] [--open] [--json]

Lists, for the principal, what has gone wrong on this instance's
transactions: each exception (a failed payment, a disputed obligation) and
where it stands (open, remediated, resolved, terminated, with any
remediation offered), each dispute raised by or against this organisation
(its subject, grounds, whether it is determined) and each determination
(its determiner, effect, and what supersedes it). The agent raises,
determines, remediates and resolves through its tools (raise_dispute,
issue_determination, open_exception, propose_remediation,
accept_remediation, resolve_exception, terminate_transaction); the
principal holds them back with a mandate's actions and approval rules
('party mandate issue') and approves them with 'party approve'. It reads
the database only, so it works whether or not 'party serve' is running.

  --transaction TXN   only this transaction
  --open              only open exceptions and open disputes (undetermined,
                      in a transaction that has not ended)
                      (and the transactions holding them)
  --json              one JSON object per transaction with any

Exit status: 0 on success (also when there is nothing to list), 1 on
failure, 2 on a usage error.
`

func runDisputes(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party disputes", disputesUsage)
	dir := c.dirFlag()
	txn := c.String("transaction", "", "only this transaction (txn_...)")
	open := c.Bool("open", false, "only open exceptions and undetermined disputes")
	asJSON := c.Bool("json", false, "print JSON lines")
	pos, code, done := c.parseDir(args, dir, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		return c.usageError(stderr, "unexpected arguments %q", pos)
	}
	st := openRecord("party disputes", *dir, stderr)
	if st == nil {
		return 1
	}
	defer st.Close()
	ctx := context.Background()
	var ids []string
	if *txn != "" {
		if _, err := st.GetTransaction(ctx, *txn); err != nil {
			fmt.Fprintf(stderr, "party disputes: transaction %s is unknown to this instance\n", *txn)
			return 1
		}
		ids = []string{*txn}
	} else {
		var err error
		if ids, err = st.TransactionsAtIssue(ctx); err != nil {
			fmt.Fprintf(stderr, "party disputes: %v\n", err)
			return 1
		}
	}
	for _, id := range ids {
		d, err := readmodel.ReadDisputes(ctx, st, id)
		if err != nil {
			fmt.Fprintf(stderr, "party disputes: %s: %v\n", id, err)
			return 1
		}
		if *open {
			d = openOnly(d)
		}
		if len(d.Disputes)+len(d.Determinations)+len(d.Exceptions) == 0 {
			continue
		}
		if *asJSON {
			writeJSONLine(stdout, d)
			continue
		}
		writeDisputes(stdout, d)
	}
	return 0
}

// openOnly keeps the open exceptions and the undetermined disputes.
func openOnly(d readmodel.Disputes) readmodel.Disputes {
	out := readmodel.Disputes{TransactionID: d.TransactionID, Disputes: []readmodel.DisputeView{}, Determinations: []readmodel.DeterminationView{}, Exceptions: []readmodel.ExceptionView{}}
	for _, x := range d.Exceptions {
		if x.Status == "open" || x.Status == "pending" {
			out.Exceptions = append(out.Exceptions, x)
		}
	}
	for _, x := range d.Disputes {
		if x.Status == "open" {
			out.Disputes = append(out.Disputes, x)
		}
	}
	return out
}

func writeDisputes(w io.Writer, d readmodel.Disputes) {
	for _, x := range d.Exceptions {
		fmt.Fprintf(w, "%s exception %s %s %s: obligation %s, opened by %s", d.TransactionID, x.ExceptionID, x.ExceptionType, x.Status, x.ObligationID, x.OpenedBy)
		if x.EndedBy != "" {
			fmt.Fprintf(w, ", ended by %s", x.EndedBy)
		}
		if x.DisputeID != "" {
			fmt.Fprintf(w, ", dispute %s", x.DisputeID)
		}
		if x.SettlementInstructionID != "" {
			fmt.Fprintf(w, ", failed instruction %s", x.SettlementInstructionID)
		}
		if len(x.RemediationOffers) > 0 {
			fmt.Fprintf(w, ", remediation offered (%s)", strings.Join(x.RemediationOffers, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, x := range d.Disputes {
		state := "undetermined"
		switch x.Status {
		case "determined":
			state = "determined"
		case "closed":
			state = "closed undetermined, ended by " + x.EndedBy
		}
		fmt.Fprintf(w, "%s dispute %s %s: by %s against %s over %s %s, grounds %s\n", d.TransactionID, x.DisputeID, state, x.RaisedBy, x.Respondent,
			x.SubjectType, x.SubjectID, strings.Join(x.Grounds, ", "))
	}
	for _, x := range d.Determinations {
		fmt.Fprintf(w, "%s determination %s of %s: by %s, %s", d.TransactionID, x.DeterminationID, x.DisputeID, x.Determiner, x.Effect)
		if x.StateResult != "" {
			fmt.Fprintf(w, ", state result %s", x.StateResult)
		}
		if x.Supersedes != "" {
			fmt.Fprintf(w, ", supersedes %s (%s)", x.Supersedes, x.SupersessionReason)
		}
		if x.SupersededBy != "" {
			fmt.Fprintf(w, ", superseded by %s", x.SupersededBy)
		}
		fmt.Fprintln(w)
	}
}
