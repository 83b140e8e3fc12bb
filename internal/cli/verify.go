package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/verify"
)

func init() {
	register("verify", "verify a bundle directory: the seven-step report, exit 0 iff no check failed", runVerify)
}

const verifyUsage = `Usage: party verify [--json] [--rules-version V] [--ledger-strict] [flags] DIR

Runs the seven steps of A202 evidence verification over the bundle in DIR
(objects/, mandates/, keys.json, bundle.json; key_records/ too when
present) and reports every check as verified, failed or not checkable.
Nothing is contacted: no daemon, database or network. Any
implementation's bundle can be verified.

When bundle.json states what the exporter withheld (stated_gaps, and
resolvable_hashes for content hashes that resolve elsewhere), an object
the record needs that is neither in the bundle nor stated as withheld is
an incomplete disclosure and fails; without such a statement it is a gap.

The default output is a summary: the counts per outcome, every failed
check with its reason code and subject, every check that could not be
run, and the gaps (undisclosed streams, unresolved references,
unreferenced evidence, unregistered types). --json prints the whole
report.

After the checks, and apart from them, comes the ledger: party's own
rules, not the specification's. For each transaction, each obligation's
money (owed, paid, in flight, forgone, outstanding, and whether it is
settled), then the ledger's findings: a rule of party's broken by the
record, such as a transaction completed on a payment short of what is
owed. A finding fails no check: a record another implementation made is
judged by the seven steps alone.

Exit status: 0 if no check failed (checks that could not be run are gaps,
not failures, and are listed; ledger findings are listed and do not
count), 1 if any check failed or, with --ledger-strict, the ledger has a
finding, 2 on a usage error or a bundle that cannot be read.

Flags:
`

func runVerify(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("party verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the whole report as JSON")
	version := fs.String("rules-version", "",
		"replay every event under this rules version ("+strings.Join(rules.Versions(), ", ")+") instead of the one bundle.json states")
	single := fs.Bool("single-signed-events", false,
		"accept events carrying only the appender's signature, as the published fixtures' events do; by default an event needs the other party's countersignature")
	atFlag := fs.String("at", "", "verification time, YYYY-MM-DDTHH:MM:SSZ, that current key status is read at (default: now)")
	strict := fs.Bool("ledger-strict", false,
		"exit 1 also when the ledger has a finding (party's own rules: money instructed, paid and completed against what is owed)")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprint(w, verifyUsage)
		fs.PrintDefaults()
	}
	fs.Usage = func() {}
	// Flags may come before or after DIR.
	var dirs []string
	for {
		if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		dirs = append(dirs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(dirs) != 1 {
		fmt.Fprintf(stderr, "party verify: want exactly one bundle directory, got %d\n\n", len(dirs))
		usage(stderr)
		return 2
	}
	if *version != "" && !rules.Known(*version) {
		fmt.Fprintf(stderr, "party verify: rules version %q is not registered (%s)\n", *version, strings.Join(rules.Versions(), ", "))
		return 2
	}
	// The summary lists failures and gaps and counts the rest; --json
	// prints every check.
	opt := verify.Options{RulesVersion: *version, SingleSignedEvents: *single, CountVerified: !*asJSON}
	if *atFlag != "" {
		t, err := envelope.ParseTimestamp(*atFlag)
		if err != nil {
			fmt.Fprintf(stderr, "party verify: --at: %v\n", err)
			return 2
		}
		opt.Now = t
	} else {
		opt.Now = time.Now()
	}

	// The verifier reads decoded values only; the files' bytes are not
	// kept beside them (a 5 000-event bundle is some 20 MB of them).
	doneReading := setGCPercent(readingGCPercent) // verifymem.go
	b, err := bundle.Read(dirs[0])
	doneReading()
	if err != nil {
		fmt.Fprintf(stderr, "party verify: %v\n", err)
		return 2
	}
	defer limitVerifyMemory()() // verifymem.go
	source := "--rules-version"
	if opt.RulesVersion == "" {
		opt.RulesVersion = b.Manifest.RulesVersion
		source = "bundle.json"
	}
	// bundle.json's disclosure statement, when it makes one, goes to the
	// verifier: then an absence it did not state is a failure, not a gap.
	in := verify.BundleInput(b)
	// What the summary needs of the bundle past this point is its keys
	// and manifest; the documents (their paths) go, and the values live
	// on in the input.
	b.Objects, b.Mandates = nil, nil
	rep := verify.Verify(in, opt)

	if *asJSON {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "party verify: %v\n", err)
			return 2
		}
		stdout.Write(append(data, '\n'))
	} else {
		summary(stdout, dirs[0], source, b.Keys != nil, b.Manifest, rep)
		ledgerSummary(stdout, rep.Ledger, *strict)
	}
	if rep.Results.Failed > 0 || (*strict && len(rep.Ledger.Findings) > 0) {
		return 1
	}
	return 0
}

// summary writes the readable report. Failures and the checks that could
// not be run are listed alike, one per line, so that a gap is never
// quieter than a failure (evidence verification §5 rule 4).
func summary(w io.Writer, dir, source string, haveKeys bool, m bundle.Manifest, rep *verify.Report) {
	fmt.Fprintf(w, "Bundle %s\n", dir)
	txn := rep.Scope.TransactionID
	if txn == "" {
		txn = "(not stated)"
	}
	rv := rep.RulesVersion
	if rv == "" {
		rv, source = "(not stated)", "bundle.json"
	}
	fmt.Fprintf(w, "  transaction %s, rules version %s (%s), role scope %s\n", txn, rv, source, rep.RoleScope)
	if !haveKeys {
		fmt.Fprintln(w, "  no keys.json: no signature can be checked")
	}
	tr := "no readable times"
	if rep.Scope.TimeRange != nil {
		tr = rep.Scope.TimeRange.From + " to " + rep.Scope.TimeRange.To
	}
	fmt.Fprintf(w, "  scope: %d objects, %d mandates, streams %s, %s\n",
		len(rep.Scope.Objects), len(rep.Scope.Mandates), list(rep.Scope.StreamsDisclosed), tr)
	if m.StatesDisclosure() {
		fmt.Fprintf(w, "  disclosure stated in bundle.json: withheld %s; resolvable elsewhere %s\n", list(m.StatedGaps), list(m.ResolvableHashes))
	} else {
		fmt.Fprintln(w, "  disclosure not stated in bundle.json: an absent object is a gap, not a failure")
	}
	fmt.Fprintf(w, "  verified at %s\n\n", rep.VerifiedAt)
	fmt.Fprintf(w, "Checks: %d verified, %d failed, %d not checkable\n",
		rep.Results.Verified, rep.Results.Failed, rep.Results.NotCheckable)

	if f := rep.Failures(); len(f) > 0 {
		fmt.Fprintf(w, "\nFailed (%d):\n", len(f))
		for _, c := range f {
			fmt.Fprintf(w, "  %s  step %d %s  %s\n      %s\n", c.Code, c.Step, c.Name, c.Subject, c.Detail)
		}
	}
	if g := rep.Gaps(); len(g) > 0 {
		fmt.Fprintf(w, "\nNot checkable (%d):\n", len(g))
		for _, c := range g {
			fmt.Fprintf(w, "  step %d %s  %s\n      %s\n", c.Step, c.Name, c.Subject, c.Detail)
		}
	}
	fmt.Fprintln(w, "\nGaps:")
	fmt.Fprintf(w, "  undisclosed streams: %s\n", list(rep.UndisclosedStreams))
	fmt.Fprintf(w, "  unresolved references: %s\n", list(rep.UnresolvedReferences))
	fmt.Fprintf(w, "  unreferenced evidence: %s\n", list(rep.UnreferencedEvidence))
	fmt.Fprintf(w, "  unregistered types: %s\n", list(rep.UnregisteredTypes))

	fmt.Fprintln(w)
	switch {
	case rep.Results.Failed > 0:
		fmt.Fprintf(w, "%d check(s) failed.\n", rep.Results.Failed)
	case rep.Results.NotCheckable > 0:
		fmt.Fprintf(w, "No check failed; %d could not be run and are listed above: they are gaps, not passes.\n", rep.Results.NotCheckable)
	default:
		fmt.Fprintln(w, "No check failed, and every check could be run.")
	}
}

// ledgerSummary writes the report's ledger section after the checks'
// summary and apart from it, under a heading that says whose rules they
// are: a finding is one of party's own rules broken, never a failed
// check, and the closing line says whether it counts for the exit status
// (--ledger-strict).
func ledgerSummary(w io.Writer, l verify.LedgerReport, strict bool) {
	fmt.Fprintln(w, "\nLedger (party's own rules, not the specification's):")
	if len(l.Transactions) == 0 {
		fmt.Fprintln(w, "  no obligation issued: nothing is owed")
	}
	for _, t := range l.Transactions {
		fmt.Fprintf(w, "  transaction %s", t.TransactionID)
		if t.CompletedBy != "" {
			fmt.Fprintf(w, ", completed by %s", t.CompletedBy)
		}
		fmt.Fprintln(w)
		for _, b := range t.Obligations {
			// Amounts in the obligation's currency, said once.
			fmt.Fprintf(w, "    %s (%s): owed %s, paid %s, in flight %s, forgone %s, outstanding %s",
				b.ObligationID, b.Status, money(b.Owed), b.Paid.Amount, b.InFlight.Amount, b.Forgone.Amount, b.Outstanding.Amount)
			// What failed or was reversed is said only when there is any.
			for _, x := range []struct {
				what string
				m    ledger.Money
			}{{"failed", b.Failed}, {"reversed", b.Reversed}} {
				if d, err := decimal.Parse(x.m.Amount); err == nil && d.Sign() != 0 {
					fmt.Fprintf(w, ", %s %s", x.what, x.m.Amount)
				}
			}
			fmt.Fprintf(w, ", settlement %s\n", b.Settlement)
		}
	}
	for _, why := range l.Unjudged {
		// A partial disclosure: a finding could come from what was left out.
		fmt.Fprintf(w, "  not judged: %s\n", why)
	}
	if len(l.Findings) == 0 {
		fmt.Fprintln(w, "  no finding")
		return
	}
	fmt.Fprintf(w, "\nLedger findings (%d):\n", len(l.Findings))
	for _, f := range l.Findings {
		fmt.Fprintf(w, "  %s  %s  %s\n      %s\n", f.Rule, f.Subject, f.Code, f.Detail)
	}
	fmt.Fprintln(w)
	if strict {
		fmt.Fprintf(w, "%d ledger finding(s), and --ledger-strict: exit 1.\n", len(l.Findings))
	} else {
		fmt.Fprintf(w, "%d ledger finding(s): party's own rules, not checks; the exit status is the checks' (--ledger-strict counts them).\n", len(l.Findings))
	}
}

// money says an amount of the ledger with its currency.
func money(m ledger.Money) string { return strings.TrimSpace(m.Amount + " " + m.Currency) }

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
