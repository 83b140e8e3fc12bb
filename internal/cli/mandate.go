package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

func init() {
	register("mandate", "issue, list, suspend, reinstate or revoke your agent's mandates (the principal's acts)", runMandate)
}

// dirEnv names the environment variable --dir defaults to, so that a
// principal working with one instance need not repeat the path.
const dirEnv = "PARTY_DIR"

// stringList is a flag that may be given more than once.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// cmdFlags is a subcommand's flag set with its help text. Flags may come
// before or after positional arguments ("party mandate revoke MND --dir D"
// works as well as "--dir D MND"); "--" ends the flags.
type cmdFlags struct {
	*flag.FlagSet
	usage string
}

func newFlags(name, usage string) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Parse reports a bad flag itself; help is printed by parse, on stdout
	// when asked for and on stderr after a mistake.
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, usage: usage}
}

func (c *cmdFlags) printUsage(w io.Writer) {
	c.SetOutput(w)
	fmt.Fprint(w, c.usage)
	fmt.Fprintln(w, "\nFlags:")
	c.PrintDefaults()
}

// parse parses args and returns the positional arguments. done is true
// when the command must stop and return code: 0 after -h, 2 after a usage
// mistake (reported on stderr with the help text).
func (c *cmdFlags) parse(args []string, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	c.SetOutput(stderr)
	for {
		if code, done := parseFlags(c.FlagSet, args, c.printUsage, stdout, stderr); done {
			return nil, code, true
		}
		rest := c.Args()
		if len(rest) == 0 {
			return pos, 0, false
		}
		// flag stops at "--" (consuming it) or at the first positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), 0, false
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseFlags parses args into fs, whose Usage prints nothing, and
// answers a request for help (usage on stdout, exit status 0) or a
// mistake (fs reported it; usage on stderr, exit status 2): done is true
// when the command must stop and return code.
func parseFlags(fs *flag.FlagSet, args []string, usage func(io.Writer), stdout, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0, true
		}
		usage(stderr)
		return 2, true
	}
	return 0, false
}

// usageError reports a mistake in the arguments and returns exit status 2.
func (c *cmdFlags) usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n\n", c.Name(), fmt.Sprintf(format, args...))
	c.printUsage(stderr)
	return 2
}

// parseDir is parse for a command that needs --dir and judges its
// positional arguments itself: a missing --dir is a usage mistake, the
// first one reported after parse's own.
func (c *cmdFlags) parseDir(args []string, dir *string, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	pos, code, done = c.parse(args, stdout, stderr)
	if !done && *dir == "" {
		return nil, c.usageError(stderr, "--dir is required"), true
	}
	return pos, code, done
}

// parseNoArgs parses the flags of a command that takes no positional
// argument and needs --dir; done is true when the command must stop and
// return code (parse), a positional argument, then a missing --dir, being
// usage mistakes.
func (c *cmdFlags) parseNoArgs(args []string, dir *string, stdout, stderr io.Writer) (code int, done bool) {
	pos, code, done := c.parse(args, stdout, stderr)
	switch {
	case done:
		return code, true
	case len(pos) > 0:
		return c.usageError(stderr, "unexpected argument %q", pos[0]), true
	case *dir == "":
		return c.usageError(stderr, "--dir is required"), true
	}
	return 0, false
}

// parseOneArg is parseNoArgs for a command that takes exactly one
// positional argument, what (its name in the mistake reported), and
// returns it.
func (c *cmdFlags) parseOneArg(args []string, what string, dir *string, stdout, stderr io.Writer) (arg string, code int, done bool) {
	pos, code, done := c.parse(args, stdout, stderr)
	switch {
	case done:
		return "", code, true
	case len(pos) != 1:
		return "", c.usageError(stderr, "give exactly one %s", what), true
	case *dir == "":
		return "", c.usageError(stderr, "--dir is required"), true
	}
	return pos[0], 0, false
}

// dirFlag adds --dir, defaulting to $PARTY_DIR.
func (c *cmdFlags) dirFlag() *string {
	return c.String("dir", os.Getenv(dirEnv), "the instance's state directory (default $"+dirEnv+")")
}

// cliLogger is the logger of the principal's one-shot commands: warnings
// and errors on stderr, so that stdout carries only the command's output.
func cliLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openPrincipal opens the organisation in dir for one principal command,
// with the principal's key loaded beside it (principal.Open). It opens the
// record directly, so it works whether or not `party serve` is running:
// the database serialises the two processes' writes.
func openPrincipal(dir string, stderr io.Writer) (*org.Org, *principal.Surface, error) {
	o, err := org.Open(dir, org.Options{Logger: cliLogger(stderr)})
	if err != nil {
		return nil, nil, err
	}
	p, err := principal.Open(o)
	if err != nil {
		o.Close()
		return nil, nil, err
	}
	return o, p, nil
}

// withPrincipal runs a principal command's work, run, on the organisation
// in dir opened with openPrincipal, and closes it after. When dir cannot
// be opened, that is the command's failure (failure, under c's name).
func (c *cmdFlags) withPrincipal(dir string, asJSON bool, stdout, stderr io.Writer, run func(*org.Org, *principal.Surface) int) int {
	o, p, err := openPrincipal(dir, stderr)
	if err != nil {
		return failure(c.Name(), err, asJSON, stdout, stderr)
	}
	defer o.Close()
	return run(o, p)
}

// failure reports err and returns exit status 1. A refusal is printed with
// its A202 reason codes; with asJSON the refusal (or error) is also written
// to stdout as {"outcome", "reason_codes", "detail"} for scripts.
func failure(cmd string, err error, asJSON bool, stdout, stderr io.Writer) int {
	var r *reason.Refusal
	out := struct {
		Outcome     string        `json:"outcome"`
		ReasonCodes []reason.Code `json:"reason_codes"`
		Detail      string        `json:"detail"`
	}{Outcome: "error", ReasonCodes: []reason.Code{}, Detail: err.Error()}
	if errors.As(err, &r) {
		out.Outcome = "refused"
		out.Detail = r.Detail
		if r.Codes != nil {
			out.ReasonCodes = r.Codes
		}
	}
	if out.Outcome == "refused" {
		codes := make([]string, len(out.ReasonCodes))
		for i, c := range out.ReasonCodes {
			codes[i] = string(c)
		}
		label := "refused"
		if len(codes) > 0 {
			label += " " + strings.Join(codes, " ")
		}
		fmt.Fprintf(stderr, "%s: %s: %s\n", cmd, label, out.Detail)
	} else {
		fmt.Fprintf(stderr, "%s: %s\n", cmd, out.Detail)
	}
	if asJSON {
		writeJSONLine(stdout, out)
	}
	return 1
}

// writeJSONLine writes v as one line of JSON. HTML escaping is off: the
// output is read by programs, and "<" in an act's description must stay
// "<", not become "\u003c".
func writeJSONLine(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

const mandateUsage = `Usage: party mandate <issue|list|suspend|reinstate|revoke|policy> [flags] [MANDATE_ID]

The principal's acts on mandates, signed with the principal's key in the
state directory. They work whether or not 'party serve' is running; a
status change is visible at the mandate's status endpoint at once.

  issue --file REQUEST.json   sign and store a mandate for your agent
  list                        the mandates this instance issued
  suspend MANDATE_ID          suspend an active mandate (reversible)
  reinstate MANDATE_ID        make a suspended mandate active again
  revoke MANDATE_ID           revoke a mandate for good
  policy MANDATE_ID           set the local policy beside a mandate: a
                              minimum grade of the counterparty (deny-only)

Run 'party mandate <subcommand> -h' for each one's flags.

Exit status: 0 on success, 1 when the act is refused or fails, 2 on a
usage error.
`

func runMandate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runSubcommand("party mandate", mandateUsage, map[string]func([]string) int{
		"issue":     func(args []string) int { return runMandateIssue(args, stdin, stdout, stderr) },
		"list":      func(args []string) int { return runMandateList(args, stdout, stderr) },
		"suspend":   func(args []string) int { return runMandateStatus("suspend", args, stdout, stderr) },
		"reinstate": func(args []string) int { return runMandateStatus("reinstate", args, stdout, stderr) },
		"revoke":    func(args []string) int { return runMandateStatus("revoke", args, stdout, stderr) },
		"policy":    func(args []string) int { return runMandatePolicy(args, stdout, stderr) },
	}, args, stdout, stderr)
}

const mandateIssueUsage = `Usage: party mandate issue --dir DIR --file REQUEST.json [--json]

Signs a commercial mandate with the principal's key and stores it.
REQUEST.json has the shape of the published reference's issue_mandate
arguments:

  {"subject": {"agent_id", "key_id"}, "valid_from", "valid_until",
   "actions": [...], "scope": {...}, "spending_limit": {"currency", "amount"},
   "constraints": [...], "approval_rules": [...], "delegation": {...},
   "issuer": {...}, "represented_organization_id", "status_endpoint",
   "evidence_refs": [...], "parent_mandate_id", "mandate_id"}

Members this instance can fill are optional: issuer and
represented_organization_id default to this organisation and its
principal key, subject to this instance's agent and agent key,
status_endpoint to this instance's own (https://<public URL>/v1/mandates/
<id>/status), and mandate_id to a fresh identifier. Unknown members are
refused. "-" reads the request from standard input.

Nothing is signed unless the whole mandate passes the A202 checks; a
refusal names its reason codes (for example A202-MANDATE-UNBOUNDED for a
mandate without constraints, A202-MANDATE-STATUS-INSECURE for a status
endpoint that is not https).

Output: the mandate id and a summary; with --json the whole signed
mandate as one line of canonical JSON (RFC 8785), or on a refusal
{"outcome": "refused", "reason_codes": [...], "detail": ...}.
`

func runMandateIssue(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party mandate issue", mandateIssueUsage)
	dir := c.dirFlag()
	file := c.String("file", "", "the issue request, REQUEST.json (\"-\" for standard input)")
	asJSON := c.Bool("json", false, "print the signed mandate as canonical JSON")
	if code, done := c.parseNoArgs(args, dir, stdout, stderr); done {
		return code
	}
	if *file == "" {
		return c.usageError(stderr, "--file is required")
	}
	var data []byte
	var err error
	if *file == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, canonical.MaxDocumentSize+1))
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	req, err := authority.ParseIssueRequest(data)
	if err != nil {
		return failure(c.Name(), reason.Refuse(*file+": "+err.Error()), *asJSON, stdout, stderr)
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		m, err := p.IssueMandate(context.Background(), req)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if *asJSON {
			b, err := canonical.Marshal(m)
			if err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
			fmt.Fprintf(stdout, "%s\n", b)
			return 0
		}
		printMandate(stdout, m)
		return 0
	})
}

// printMandate writes a signed mandate's summary for a person.
func printMandate(w io.Writer, m map[string]any) {
	subj, _ := m["subject"].(map[string]any)
	who, _ := subj["agent_id"].(string)
	if p, ok := subj["principal_id"].(string); ok {
		who = p
	}
	fmt.Fprintf(w, "issued %v to %s (key %v)\n", m["id"], who, subj["key_id"])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  actions\t%s\n", joinAny(m["actions"]))
	fmt.Fprintf(tw, "  scope\t%s\n", describeScope(m["scope"]))
	fmt.Fprintf(tw, "  valid\t%v until %v\n", m["valid_from"], m["valid_until"])
	var ids []string
	for _, c := range anyList(m["constraints"]) {
		cm, _ := c.(map[string]any)
		ids = append(ids, fmt.Sprintf("%v (%v %v %v, %v)", cm["id"], cm["path"], cm["operator"], compact(cm["value"]), cm["on_failure"]))
	}
	fmt.Fprintf(tw, "  constraints\t%s\n", strings.Join(ids, "; "))
	var rules []string
	for _, r := range anyList(m["approval_rules"]) {
		rm, _ := r.(map[string]any)
		when, _ := rm["when"].(map[string]any)
		appr, _ := rm["approver"].(map[string]any)
		rules = append(rules, fmt.Sprintf("%v (%v %v %v → %v %v)", rm["id"], when["path"], when["operator"], compact(when["value"]), appr["organization_id"], appr["role"]))
	}
	if len(rules) == 0 {
		rules = []string{"none"}
	}
	fmt.Fprintf(tw, "  approval rules\t%s\n", strings.Join(rules, "; "))
	if d, ok := m["delegation"].(map[string]any); ok {
		fmt.Fprintf(tw, "  delegation\tallowed %v, maximum depth %v\n", d["allowed"], d["maximum_depth"])
	}
	fmt.Fprintf(tw, "  status endpoint\t%v\n", m["status_endpoint"])
	tw.Flush()
}

func anyList(v any) []any { l, _ := v.([]any); return l }

func joinAny(v any) string {
	var s []string
	for _, x := range anyList(v) {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}

// compact renders a JSON value on one line, as JSON (so strings keep their
// quotes and "4000.00" is visibly a string, not a number).
func compact(v any) string {
	b, err := canonical.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func describeScope(v any) string {
	s, _ := v.(map[string]any)
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+joinAny(s[k]))
	}
	return strings.Join(parts, "; ")
}

const mandateListUsage = `Usage: party mandate list --dir DIR [--json]

Lists the mandates this instance issued, newest last: id, status, subject,
validity and actions. The status is the one the instance's status endpoint
serves: active, suspended, revoked, or expired once valid_until has
passed. The instance mandate (it permits only publishing the
organisation's key records) is marked as such.

With --json: one JSON array of {"mandate_id", "subject", "status",
"actions", "valid_from", "valid_until", "instance_mandate"}.
`

func runMandateList(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party mandate list", mandateListUsage)
	dir := c.dirFlag()
	asJSON := c.Bool("json", false, "print a JSON array")
	if code, done := c.parseNoArgs(args, dir, stdout, stderr); done {
		return code
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(o *org.Org, p *principal.Surface) int {
		list, err := p.Mandates(context.Background())
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		now := o.Clock()
		for i, m := range list {
			// The record stores active/suspended/revoked; expiry follows from
			// the interval, as the status endpoint reports it.
			if until, err := envelope.ParseTimestamp(m.ValidTo); err == nil && m.Status == store.StatusActive && !now.Before(until) {
				list[i].Status = "expired"
			}
		}
		if *asJSON {
			writeJSONLine(stdout, list)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MANDATE\tSTATUS\tSUBJECT\tVALID UNTIL\tACTIONS")
		for _, m := range list {
			acts := strings.Join(m.Actions, ", ")
			if m.Instance {
				acts += " (instance mandate)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.Status, m.Subject, m.ValidTo, acts)
		}
		tw.Flush()
		return 0
	})
}

const mandateStatusUsage = `Usage: party mandate %[1]s --dir DIR [--reason TEXT] MANDATE_ID

%[2]s

The change is signed as a revocation_record by the principal's key and is
served by the mandate's status endpoint at once; a counterparty sees it
within its 60-second cache bound. The record also travels, with this
organisation's key records, to the counterparties the mandate is disclosed
to (those its scope names, or every pinned peer when it names none): their
instances fetch it within 30 seconds while both serve, or as soon as both
serve again, keep it in their own record and exports, and deny under a
revocation at once. Revocation is final: a revoked mandate cannot be
suspended, reinstated or revoked again.

Exit status: 0 when the status changed, 1 when the change is refused (the
mandate is unknown, was issued elsewhere, or is not in a status the change
applies to), 2 on a usage error.
`

var statusChangeText = map[string]string{
	"suspend":   "Suspends an active mandate: every act under it is denied until it is reinstated.",
	"reinstate": "Makes a suspended mandate active again.",
	"revoke":    "Revokes a mandate, active or suspended, for good.",
}

var statusChangeDone = map[string]string{"suspend": "suspended", "reinstate": "reinstated", "revoke": "revoked"}

func runMandateStatus(verb string, args []string, stdout, stderr io.Writer) int {
	c := newFlags("party mandate "+verb, fmt.Sprintf(mandateStatusUsage, verb, statusChangeText[verb]))
	dir := c.dirFlag()
	why := c.String("reason", "", "the reason recorded in the signed revocation_record")
	id, code, done := c.parseOneArg(args, "MANDATE_ID", dir, stdout, stderr)
	if done {
		return code
	}
	return c.withPrincipal(*dir, false, stdout, stderr, func(_ *org.Org, p *principal.Surface) int {
		ctx := context.Background()
		var err error
		switch verb {
		case "suspend":
			err = p.Suspend(ctx, id, *why)
		case "reinstate":
			err = p.Reinstate(ctx, id, *why)
		default:
			err = p.Revoke(ctx, id, *why)
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = fmt.Errorf("no mandate %s in this instance's record", id)
			}
			return failure(c.Name(), err, false, stdout, stderr)
		}
		fmt.Fprintf(stdout, "%s %s\n", id, statusChangeDone[verb])
		return 0
	})
}

const mandatePolicyUsage = `Usage: party mandate policy --dir DIR [--min-grade DIM=BAND]... [--clear] [--json] MANDATE_ID

Sets the local policy beside one of this instance's mandates: the minimum
conformance grade the counterparty an act is towards must hold, per
dimension (A to E, band 0 to 3), e.g. --min-grade A=1 --min-grade C=1 or
--min-grade A=1,C=1. The policy is kept beside the mandate, not in its
signed document, and it can only deny: an act under the mandate is denied
(A202-POLICY-DENIED) when no grade about the counterparty is held, when
the latest one held (party grade list) has expired or is not active, or
when a required dimension is unassessed or below the band. --clear
removes the policy. Without either flag the current policy is printed.
`

func runMandatePolicy(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party mandate policy", mandatePolicyUsage)
	dir := c.dirFlag()
	var mins stringList
	c.Var(&mins, "min-grade", "a minimum band, DIM=BAND (repeatable, or comma-separated)")
	clear := c.Bool("clear", false, "remove the mandate's policy")
	asJSON := c.Bool("json", false, "machine-readable output")
	id, code, done := c.parseOneArg(args, "MANDATE_ID", dir, stdout, stderr)
	if done {
		return code
	}
	if *clear && len(mins) > 0 {
		return c.usageError(stderr, "--clear and --min-grade exclude each other")
	}
	min, err := grade.ParseMinimum(mins)
	if err != nil {
		return c.usageError(stderr, "%v", err)
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(o *org.Org, p *principal.Surface) int {
		ctx := context.Background()
		if *clear || len(min) > 0 {
			if err := p.SetMinimumGrade(ctx, id, min); err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
		}
		held, err := o.Store.MinimumGrade(ctx, id)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if held == nil {
			held = map[string]int{}
		}
		if *asJSON {
			writeJSONLine(stdout, map[string]any{"mandate_id": id, "minimum_grade": held})
			return 0
		}
		if len(held) == 0 {
			fmt.Fprintf(stdout, "%s: no local policy\n", id)
			return 0
		}
		fmt.Fprintf(stdout, "%s: the counterparty must hold a grade of at least %s\n", id, grade.Minimum(held))
		return 0
	})
}
