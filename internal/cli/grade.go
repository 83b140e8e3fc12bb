package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/grade"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/specdigest"
)

func init() {
	register("grade", "grade a counterparty's implementation on the published bilateral cases, or check a grade", runGrade)
}

const gradeUsage = `Usage: party grade <issue|verify|import|list> [flags]

Conformance grades between two organisations (conformance grades §2–§6;
role scopes §6–§8). A grade is a statement by its issuer about one
implementation, scoped to one specification version and one role scope;
it is not certification by any body.

  issue --about ORG          present the refused cases of the published
                             bilateral families to ORG's instance over A2A
                             and plain HTTPS, and sign a grade of what it
                             answered (the principal's act)
  verify FILE                check a grade: role scope and expiry first,
                             then its dimensions, then its signature under
                             the principal keys this instance pinned
  import FILE                verify a grade and keep it, so that a
                             mandate's minimum-grade policy reads it
  list [--about ORG]         the grades this instance holds

Run 'party grade <subcommand> -h' for each one's flags.

Exit status: 0 on success, 1 when a grade is refused or an act fails, 2 on
a usage error.
`

func runGrade(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runSubcommand("party grade", gradeUsage, map[string]func([]string) int{
		"issue":  func(args []string) int { return runGradeIssue(args, stdout, stderr) },
		"verify": func(args []string) int { return runGradeCheck("verify", args, stdin, stdout, stderr) },
		"import": func(args []string) int { return runGradeCheck("import", args, stdin, stdout, stderr) },
		"list":   func(args []string) int { return runGradeList(args, stdout, stderr) },
	}, args, stdout, stderr)
}

const gradeIssueUsage = `Usage: party grade issue --dir DIR --about ORG [--spec DIR] [--implementation NAME]
                         [--valid-days N] [--out FILE] [--json]

Presents each refused case of the sixteen bilateral fixture families of
the published set (conformance/manifest-v0.1.json and its fixtures under
--spec) to ORG's instance the way any A202 message travels: once over A2A
and once over plain HTTPS, with this instance's own clients of the two
bindings (the capability check first, pinned TLS, each object its
canonical bytes). It observes what comes back (role scopes §7.1 item 3):
a case passes when ORG refuses it over both bindings with the manifest's
code among those returned; it fails when ORG takes it, or refuses it
with a code the case does not call for, over either. Nothing ORG says
about itself is read.

A case travels under its objects' own transaction id (one this
instance's record holds is never used: such a case is not presented), or
under an id minted for it. Published objects carry synthetic signatures,
so a refusal with A202-EVIDENCE-SIGNATURE-INVALID alone, where the case
calls for another code, is inconclusive: neither passed nor failed.
Positive cases, mandates, delegation chains, grades, capability
declarations and bundles that state a context have no carrier form and
are not presented.

This instance must be serving (party serve): ORG checks its AgentCard and
capability preflight and fetches its key records before taking a
message. A case ORG cannot be reached for, or keeps asking to be sent
again, ends the run, as does a binding whose capability check fails
(A202-EXTENSION-UNSUPPORTED); nothing is issued.

The grade names the one role scope a202-scope/bilateral/0.1 and, as its
transport, the A202 extension the bindings activate. Each of the five
dimensions is established from the families it is read from (conformance
grades §2) whose refused cases all passed, or of which one failed: band 1
when none failed, band 0 when one did, and unassessed (null) when no
family was fully observed (a peer run of the published set never reaches
band 2). Level peer_assessed; it expires after --valid-days (at most 365).
Its determination_ref hashes the assessment report (every case, what it
travelled as, and each binding's observation), which is kept with the
grade. The principal's key signs it; it is stored and written to --out
(default standard output).

Output: each case failed with what each binding observed, then the
counts and the bands; with --json one line {"grade": {...},
"assessment": {...}}.
`

func runGradeIssue(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party grade issue", gradeIssueUsage)
	dir := c.dirFlag()
	about := c.String("about", "", "the counterparty organisation to grade (org_...)")
	spec := c.String("spec", os.Getenv("A202_SPEC_DIR"), "the published specification data: the directory holding conformance/ (default $A202_SPEC_DIR)")
	impl := c.String("implementation", "", "the implementation assessed, as you know it (default: the counterparty's AgentCard URL)")
	days := c.Int("valid-days", 90, "days until the grade expires (1 to 365)")
	out := c.String("out", "", "write the signed grade to FILE (default standard output)")
	asJSON := c.Bool("json", false, "machine-readable output")
	if code, done := c.parseNoArgs(args, dir, stdout, stderr); done {
		return code
	}
	switch {
	case *about == "":
		return c.usageError(stderr, "--about is required")
	case *spec == "":
		return c.usageError(stderr, "--spec is required (or set A202_SPEC_DIR)")
	case *days < 1 || *days > 365:
		return c.usageError(stderr, "--valid-days is 1 to 365")
	}
	// The published data is this release's or none (threat model T23):
	// a substituted fixture set would grade against something else.
	if err := specdigest.Check(*spec); err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	cases, err := grade.Cases(*spec)
	if err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	return c.withPrincipal(*dir, *asJSON, stdout, stderr, func(o *org.Org, p *principal.Surface) int {
		_, peer, err := o.Clients.For(*about)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		name := *impl
		if name == "" {
			name = "the A202 instance at " + peer.AgentCardURL
		}
		ctx := context.Background()
		log := cliLogger(stderr)
		carriers, err := grade.Carriers(o.Clients, log)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		a, err := grade.Assess(ctx, grade.Run{Subject: *about, Carriers: carriers, Record: o.Store, Now: o.Clock(), Logger: log}, cases)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		doc, report, err := grade.Build(grade.Spec{Implementation: name, Assessment: a, IssuedAt: o.Clock(), ValidFor: time.Duration(*days) * 24 * time.Hour})
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		signed, err := p.IssueGrade(ctx, doc, report)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		body, err := canonical.Marshal(signed)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		if *out != "" {
			if err := os.WriteFile(*out, append(body, '\n'), 0o644); err != nil {
				return failure(c.Name(), err, *asJSON, stdout, stderr)
			}
		}
		if *asJSON {
			writeJSONLine(stdout, map[string]any{"grade": signed, "assessment": a})
			return 0
		}
		for _, r := range a.With(grade.Fail) {
			want := r.Expected
			if r.ExpectedCode != "" {
				want += " " + string(r.ExpectedCode)
			}
			var seen []string
			for _, ob := range r.Observations {
				seen = append(seen, strings.TrimSpace(ob.Carrier+" "+ob.Outcome+" "+joinCodes(ob.ReasonCodes)))
			}
			fmt.Fprintf(stdout, "failed %s (%s): expected %s; %s\n", r.Fixture, r.Family, want, strings.Join(seen, "; "))
		}
		var bands []string
		for _, d := range grade.DimensionNames {
			if band, assessed := a.Band(d); assessed {
				bands = append(bands, d+"="+strconv.Itoa(band))
			} else {
				bands = append(bands, d+"=unassessed")
			}
		}
		fmt.Fprintf(stdout, "graded %s over %s: %d passed, %d failed, %d inconclusive, %d not presented: %s, expires %v, determination %v\n",
			*about, strings.Join(a.Carriers, " and "), len(a.With(grade.Pass)), len(a.With(grade.Fail)), len(a.With(grade.Inconclusive)), len(a.With(grade.NotPresented)),
			strings.Join(bands, " "), signed["expires_at"], signed["determination_ref"].(map[string]any)["determination_id"])
		if *out == "" {
			fmt.Fprintf(stdout, "%s\n", body)
		}
		return 0
	})
}

func joinCodes(cs []reason.Code) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, " ")
}

const gradeCheckUsage = `Usage: party grade verify --dir DIR [--json] FILE
       party grade import --dir DIR [--json] FILE

Checks a conformance grade as a relying party must: its one role scope
(A202-GRADE-SCOPE-UNKNOWN, A202-GRADE-SCOPE-INVALID) and its expiry first,
then the families its bands and held-out coverage are established from
(A202-GRADE-SCOPE-OVERCLAIM; a band above 1 with no held-out coverage of
its dimension is refused), then its signature (grade_issuance) under a
principal key this instance trusts: its own, or one a pinned peer file
carries (A202-EVIDENCE-SIGNATURE-INVALID for an untrusted key or a grade
changed after signing). An expired grade is refused with no code, none
being registered. A grade signed by the organisation it grades is
refused: a self-run result is not a grade.

import keeps a grade that checks, so that a mandate's minimum-grade
policy (party mandate policy) reads it. "-" reads standard input.

Output: accepted or refused with the reason codes and problems; with
--json {"outcome", "reason_codes", "problems"}.
`

func runGradeCheck(sub string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party grade "+sub, gradeCheckUsage)
	dir := c.dirFlag()
	asJSON := c.Bool("json", false, "machine-readable output")
	file, code, done := c.parseOneArg(args, "FILE", dir, stdout, stderr)
	if done {
		return code
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, canonical.MaxDocumentSize+1))
	} else {
		data, err = readBounded(file)
	}
	if err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	o, err := org.Open(*dir, org.Options{Logger: cliLogger(stderr)})
	if err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	defer o.Close()
	ctx := context.Background()
	keys := grade.PrincipalKeys(ctx, o)
	if sub == "import" {
		doc, issuer, err := grade.Import(ctx, o.Store, keys, data, o.Clock())
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		subject, _ := doc["subject"].(map[string]any)
		if *asJSON {
			writeJSONLine(stdout, map[string]any{"outcome": "imported", "issuer_organization_id": issuer, "subject": subject})
			return 0
		}
		fmt.Fprintf(stdout, "imported the grade %s issued about %v\n", issuer, subject["organization_id"])
		return 0
	}
	doc, err := canonical.DecodeObject(data)
	var j gate.Judgment
	if err != nil {
		j = gate.File(data, gate.Options{})
	} else {
		j = grade.Check(doc, keys, o.Clock())
	}
	if *asJSON {
		writeJSONLine(stdout, jsonLine(file, j))
	} else {
		fmt.Fprintln(stdout, textLine(file, j))
	}
	if !j.Accepted() {
		return 1
	}
	return 0
}

const gradeListUsage = `Usage: party grade list --dir DIR [--about ORG] [--json]

The grades this instance holds (issued here or imported), oldest first:
who issued each, about whom, when it expires, and its bands. A mandate's
minimum-grade policy reads the latest about a counterparty.
`

func runGradeList(args []string, stdout, stderr io.Writer) int {
	c := newFlags("party grade list", gradeListUsage)
	dir := c.dirFlag()
	about := c.String("about", "", "only the grades about this organisation")
	asJSON := c.Bool("json", false, "print a JSON array of grade documents")
	if code, done := c.parseNoArgs(args, dir, stdout, stderr); done {
		return code
	}
	o, err := org.Open(*dir, org.Options{Logger: cliLogger(stderr)})
	if err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	defer o.Close()
	gs, err := o.Store.GradesAbout(context.Background(), *about)
	if err != nil {
		return failure(c.Name(), err, *asJSON, stdout, stderr)
	}
	docs := make([]map[string]any, 0, len(gs))
	for _, g := range gs {
		doc, err := canonical.DecodeObject(g.Body)
		if err != nil {
			return failure(c.Name(), err, *asJSON, stdout, stderr)
		}
		docs = append(docs, doc)
		if !*asJSON {
			dims, _ := doc["dimensions"].(map[string]any)
			var bands []string
			for _, d := range grade.DimensionNames {
				if r, ok := dims[d].(map[string]any); ok {
					bands = append(bands, fmt.Sprintf("%s=%v", d, r["band"]))
				} else {
					bands = append(bands, d+"=unassessed")
				}
			}
			fmt.Fprintf(stdout, "%s about %s by %s, issued %s, expires %s, %v: %s\n", g.DeterminationID, g.SubjectOrg, g.IssuerOrg, g.IssuedAt, g.ExpiresAt, doc["status"], strings.Join(bands, " "))
		}
	}
	if *asJSON {
		writeJSONLine(stdout, docs)
	}
	return 0
}
