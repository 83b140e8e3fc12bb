package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
)

func init() {
	register("budget", "set, list or remove the principal's spending budgets", runBudget)
}

const budgetUsage = `Usage: party budget <set|list|remove> [flags]

Budgets are the principal's limits on what this organisation's agents may
commit it to pay: spend per period (day, week, month or quarter, in UTC;
one currency), optionally for one agent or towards one counterparty, and
exposure to a counterparty (committed but unpaid, plus paid in the
period). They only deny: an act that would bring a budget above its limit
is refused (A202-POLICY-DENIED) with the budget named and what is left;
one that would bring it above the approval threshold, when one is set, is
held for your approval instead (A202-APPROVAL-REQUIRED; see party
approvals). The counterparty is never told. Budgets are this instance's
policy, not part of any mandate (docs/authority.md, "Budgets").

  set     set (or replace) a budget
  list    every budget, with what is used and left now
  remove  remove a budget

Run 'party budget <subcommand> -h' for each one's flags.

Exit status: 0 on success, 1 when the act fails, 2 on a usage error.
`

func runBudget(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runSubcommand("party budget", budgetUsage, map[string]func([]string) int{
		"set":    func(args []string) int { return runBudgetSet(args, stdout, stderr) },
		"list":   func(args []string) int { return runBudgetList(args, stdout, stderr) },
		"remove": func(args []string) int { return runBudgetRemove(args, stdout, stderr) },
	}, args, stdout, stderr)
}

const budgetSetUsage = `Usage: party budget set --dir DIR --id ID --limit AMOUNT --currency CUR
                        [--kind spend|exposure] [--period day|week|month|quarter]
                        [--approve-above AMOUNT] [--agent AGENT_ID]
                        [--counterparty ORG_ID] [--json]

Sets a budget (replacing one of the same id). A spend budget counts what
the organisation committed to pay, as buyer, in the current period (the
totals of its offers, acceptances and amendments); an exposure budget
counts, towards one counterparty (--counterparty, or each one apart), what
is committed and not yet paid in open transactions plus what was paid in
the period. --approve-above holds for your approval, rather than allows,
an act that would bring the count above AMOUNT (below --limit).

Example: at most 10000.00 EUR a month, acts above 8000.00 held:
  party budget set --dir DIR --id monthly-eur --currency EUR \
    --limit 10000.00 --approve-above 8000.00
`

func runBudgetSet(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party budget set", budgetSetUsage)
	dir := c.dirFlag()
	id := c.String("id", "", "the budget's name: lower-case letters, digits, '.', '_', '-'")
	kind := c.String("kind", string(budget.Spend), "spend or exposure")
	period := c.String("period", string(budget.Month), "day, week, month or quarter (UTC)")
	currency := c.String("currency", "", "ISO 4217 currency code")
	limit := c.String("limit", "", "the most the budget allows, a decimal amount")
	above := c.String("approve-above", "", "hold for approval an act above this amount (below --limit)")
	agent := c.String("agent", "", "count only this agent's acts (spend budgets)")
	counterparty := c.String("counterparty", "", "count only acts towards this organisation")
	asJSON := c.Bool("json", false, "machine-readable output")
	pos, code, done := c.parse(args, stdout, stderr)
	if done {
		return code
	}
	switch {
	case len(pos) != 0:
		return c.usageError(stderr, "unexpected arguments %q", pos)
	case *dir == "":
		return c.usageError(stderr, "--dir is required")
	case *id == "" || *limit == "" || *currency == "":
		return c.usageError(stderr, "--id, --limit and --currency are required")
	}
	b, err := budget.New(*id, budget.Kind(*kind), budget.Period(*period), *currency, *limit, *above, *agent, *counterparty)
	if err != nil {
		return c.usageError(stderr, "%v", err)
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		ctx := context.Background()
		if err := p.SetBudget(ctx, b); err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		return printBudgets(ctx, c.Name(), p, *id, *asJSON, stdout, stderr)
	})
}

const budgetListUsage = `Usage: party budget list --dir DIR [--json]

Lists every budget with what is used and left in its current period (an
exposure budget that names no counterparty, once per pinned peer). With
--json, one line: {"budgets": [...]}.
`

func runBudgetList(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party budget list", budgetListUsage)
	dir := c.dirFlag()
	asJSON := c.Bool("json", false, "machine-readable output")
	pos, code, done := c.parse(args, stdout, stderr)
	if done {
		return code
	}
	switch {
	case len(pos) != 0:
		return c.usageError(stderr, "unexpected arguments %q", pos)
	case *dir == "":
		return c.usageError(stderr, "--dir is required")
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		return printBudgets(context.Background(), c.Name(), p, "", *asJSON, stdout, stderr)
	})
}

const budgetRemoveUsage = `Usage: party budget remove --dir DIR [--json] ID

Removes a budget. Acts taken from then on are not counted against it;
what it counted stays counted by any other budget.
`

func runBudgetRemove(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party budget remove", budgetRemoveUsage)
	dir := c.dirFlag()
	asJSON := c.Bool("json", false, "machine-readable output")
	id, code, done := c.parseOneArg(args, "budget ID", dir, stdout, stderr)
	if done {
		return code
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		if err := p.RemoveBudget(context.Background(), id); err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if *asJSON {
			writeJSONLine(stdout, map[string]any{"removed": id})
			return 0
		}
		fmt.Fprintf(stdout, "budget %s removed\n", id)
		return 0
	})
}

// printBudgets prints the budgets (only the one named only, when only is
// set) as they stand now.
func printBudgets(ctx context.Context, name string, p interface {
	Budgets(context.Context) ([]budget.Standing, error)
}, only string, asJSON bool, stdout, stderr io.Writer) int {
	all, err := p.Budgets(ctx)
	if err != nil {
		return failure(name, err, asJSON, stdout, stderr)
	}
	list := []budget.Standing{}
	for _, s := range all {
		if only == "" || s.ID == only {
			list = append(list, s)
		}
	}
	if asJSON {
		writeJSONLine(stdout, map[string]any{"budgets": list})
		return 0
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no budgets")
		return 0
	}
	for _, s := range list {
		fmt.Fprintln(stdout, describeStanding(s))
	}
	return 0
}

// describeStanding is one budget in a line.
func describeStanding(s budget.Standing) string {
	what := fmt.Sprintf("%s: %s %s per %s", s.ID, s.Currency, s.Kind, s.Period)
	if s.AgentID != "" {
		what += ", agent " + s.AgentID
	}
	if s.Counterparty != "" {
		what += ", towards " + s.Counterparty
	}
	out := fmt.Sprintf("%s: %s used of %s since %s, %s left", what, s.Used, s.Limit, s.PeriodStart, s.Left)
	if s.ApproveAbove != "" {
		out += " (held for approval above " + s.ApproveAbove + ")"
	}
	return out
}
