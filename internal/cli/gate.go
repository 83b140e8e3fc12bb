package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/gate"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/verify"
)

func init() {
	register("gate", "judge A202 documents: accepted, or refused with reason codes", runGate)
}

const gateUsage = `Usage: party gate [--json] [--rules-version V] PATH...

Judges each file with the A202 gate: an envelope object, a mandate, a
conformance grade, or a published fixture (bundle, mandate_chain,
declaration). A bundle fixture's objects are judged as one record by the
seven-step verifier of party verify, under the fixture's context and
without keys: signature values are not checked, and what the verifier
cannot check is not a refusal. A directory means every *.json file under
it, recursively, in sorted order. Nothing is contacted: no daemon,
database or network.

Output is one line per file: the path, accepted or refused, the reason
codes, and the first problem. With --json each line is a JSON object
{"path", "kind", "outcome", "reason_codes", "problems"}.

Exit status: 0 if every file was accepted, 1 if any was refused, 2 on a
usage error or a file that could not be read.

Flags:
`

// gateLine is one --json output line.
type gateLine struct {
	Path        string        `json:"path"`
	Kind        string        `json:"kind"`
	Outcome     gate.Outcome  `json:"outcome"`
	ReasonCodes []reason.Code `json:"reason_codes"`
	Problems    []gateProblem `json:"problems"`
}

type gateProblem struct {
	Code   reason.Code `json:"code,omitempty"`
	Object string      `json:"object,omitempty"`
	Path   string      `json:"path"`
	Detail string      `json:"detail"`
}

func runGate(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("party gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write one JSON object per file")
	version := fs.String("rules-version", gate.DefaultRulesVersion,
		"rules version replayed against when a set states none ("+strings.Join(rules.Versions(), ", ")+")")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprint(w, gateUsage)
		fs.PrintDefaults()
	}
	// Parse reports a bad flag itself; help is printed here, on stdout
	// when asked for and on stderr after a mistake.
	fs.Usage = func() {}
	if code, done := parseFlags(fs, args, usage, stdout, stderr); done {
		return code
	}
	if !rules.Known(*version) {
		fmt.Fprintf(stderr, "party gate: rules version %q is not registered (%s)\n", *version, strings.Join(rules.Versions(), ", "))
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "party gate: no PATH given")
		usage(stderr)
		return 2
	}

	// A bundle is a set of objects judged as one record: the verifier's
	// judge, the one implementation of the set-level rules.
	opt := gate.Options{RulesVersion: *version, JudgeSet: verify.JudgeSet}
	status := 0
	worsen := func(s int) {
		if s > status {
			status = s
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, arg := range fs.Args() {
		files, err := gateFiles(arg)
		if err != nil {
			fmt.Fprintf(stderr, "party gate: %v\n", err)
			worsen(2)
			continue
		}
		for _, path := range files {
			data, err := readBounded(path)
			if err != nil {
				fmt.Fprintf(stderr, "party gate: %v\n", err)
				worsen(2)
				continue
			}
			j := gate.File(data, opt)
			if !j.Accepted() {
				worsen(1)
			}
			if *asJSON {
				if err := enc.Encode(jsonLine(path, j)); err != nil {
					fmt.Fprintf(stderr, "party gate: %v\n", err)
					return 2
				}
				continue
			}
			fmt.Fprintln(stdout, textLine(path, j))
		}
	}
	return status
}

// gateFiles expands one argument: a file is itself, a directory every
// *.json file under it, sorted.
func gateFiles(arg string) ([]string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{arg}, nil
	}
	var out []string
	err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".json") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no *.json files", arg)
	}
	sort.Strings(out)
	return out, nil
}

// readBounded reads at most one byte past the largest document the gate
// accepts, so a huge file is refused as too large without being loaded.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, canonical.MaxDocumentSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

func jsonLine(path string, j gate.Judgment) gateLine {
	l := gateLine{Path: path, Kind: j.Kind, Outcome: j.Outcome, ReasonCodes: j.Codes, Problems: []gateProblem{}}
	if l.ReasonCodes == nil {
		l.ReasonCodes = []reason.Code{}
	}
	for _, p := range j.Problems {
		l.Problems = append(l.Problems, gateProblem{Code: p.Code, Object: p.Object, Path: p.Path, Detail: p.Detail})
	}
	return l
}

func textLine(path string, j gate.Judgment) string {
	if j.Accepted() {
		return path + ": accepted"
	}
	var b strings.Builder
	b.WriteString(path)
	b.WriteString(": refused")
	for i, c := range j.Codes {
		if i == 0 {
			b.WriteString(" ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(string(c))
	}
	if len(j.Problems) > 0 {
		p := j.Problems[0]
		b.WriteString(" — ")
		if where := p.Object + p.Path; where != "" {
			b.WriteString(where)
			b.WriteString(": ")
		}
		b.WriteString(p.Detail)
		if n := len(j.Problems) - 1; n > 0 {
			fmt.Fprintf(&b, " (+%d more)", n)
		}
	}
	return b.String()
}
