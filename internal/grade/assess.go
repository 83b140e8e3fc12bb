package grade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
)

// Case is one published fixture of a bilateral family, with what the
// manifest expects of it.
type Case struct {
	Fixture string // relative to conformance/fixtures/v0.1
	Family  string
	Kind    string // the manifest's fixture kind
	Valid   bool
	// Code is the code a negative case must be refused with; "" when the
	// manifest declares none (a schema-layer refusal).
	Code reason.Code
	Body []byte
}

type manifestEntry struct {
	Fixture    string  `json:"fixture"`
	Kind       string  `json:"kind"`
	Expect     string  `json:"expect"`
	ReasonCode *string `json:"reason_code"`
}

// Cases reads the published manifest and fixtures under specDir (the
// directory holding conformance/manifest-v0.1.json) and returns the cases
// of the bilateral families, in manifest order. Every family must have at
// least one case: a specification directory that lacks one cannot
// establish the dimensions it covers.
func Cases(specDir string) ([]Case, error) {
	conf := filepath.Join(specDir, "conformance")
	data, err := os.ReadFile(filepath.Join(conf, "manifest-v0.1.json"))
	if err != nil {
		return nil, fmt.Errorf("grade: the published manifest: %w", err)
	}
	var m struct {
		Positive []manifestEntry `json:"positive"`
		Negative []manifestEntry `json:"negative"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("grade: the published manifest: %w", err)
	}
	var out []Case
	seen := map[string]int{}
	add := func(e manifestEntry, valid bool) error {
		fam, ok := FamilyOf(e.Fixture)
		if !ok {
			return nil // another scope's fixture
		}
		body, err := os.ReadFile(filepath.Join(conf, "fixtures", "v0.1", filepath.FromSlash(e.Fixture)))
		if err != nil {
			return fmt.Errorf("grade: fixture %s: %w", e.Fixture, err)
		}
		c := Case{Fixture: e.Fixture, Family: fam, Kind: e.Kind, Valid: valid, Body: body}
		if !valid && e.ReasonCode != nil {
			c.Code = reason.Code(*e.ReasonCode)
		}
		seen[fam]++
		out = append(out, c)
		return nil
	}
	for _, e := range m.Positive {
		if err := add(e, true); err != nil {
			return nil, err
		}
	}
	for _, e := range m.Negative {
		if e.Expect != "invalid" {
			return nil, fmt.Errorf("grade: manifest negative %s expects %q", e.Fixture, e.Expect)
		}
		if err := add(e, false); err != nil {
			return nil, err
		}
	}
	for _, f := range Families {
		if seen[f.ID] == 0 {
			return nil, fmt.Errorf("grade: the manifest under %s holds no case of family %s", specDir, f.ID)
		}
	}
	return out, nil
}

// Result is one case: how it was presented over each carrier and what
// each showed, or why it could not be presented.
type Result struct {
	Fixture      string      `json:"fixture"`
	Family       string      `json:"family"`
	Kind         string      `json:"kind"`
	Expected     string      `json:"expected"` // "accepted", or "refused" with ExpectedCode
	ExpectedCode reason.Code `json:"expected_code,omitempty"`
	// Transaction is the correlation id the case travelled under, and
	// Objects how many objects its message carried.
	Transaction  string        `json:"transaction_id,omitempty"`
	Objects      int           `json:"objects,omitempty"`
	Observations []Observation `json:"observations"`
	// Verdict is Fail when any carrier's is, Pass when every carrier's
	// is, Inconclusive otherwise, or NotPresented.
	Verdict string `json:"verdict"`
	// Why says why a case was not presented.
	Why string `json:"why,omitempty"`
}

// Assessment is one run of the bilateral families against an instance,
// over its carriers.
type Assessment struct {
	Scope      string   `json:"scope"`
	Subject    string   `json:"subject_organization_id"`
	AssessedAt string   `json:"assessed_at"`
	Carriers   []string `json:"carriers"`
	Results    []Result `json:"results"`
	// Profiles are the registered transaction profiles the presented
	// cases exercised.
	Profiles []string `json:"profiles"`
}

// With returns the results whose verdict is v.
func (a Assessment) With(v string) []Result {
	var out []Result
	for _, r := range a.Results {
		if r.Verdict == v {
			out = append(out, r)
		}
	}
	return out
}

// Established returns the families of a dimension its band is established
// from: those with a failed case, and those every refused case of which
// passed. A family with a case not presented or inconclusive, or with no
// refused case (approval), is left out: what was not observed is not
// claimed.
func (a Assessment) Established(dim string) []string {
	var out []string
	for _, fam := range Dimensions[dim] {
		negatives, failed, unseen := 0, false, false
		for _, r := range a.Results {
			if r.Family != fam || r.Expected != Refused {
				continue
			}
			negatives++
			switch r.Verdict {
			case Fail:
				failed = true
			case Pass:
			default:
				unseen = true
			}
		}
		if failed || (negatives > 0 && !unseen) {
			out = append(out, fam)
		}
	}
	return out
}

// Band returns a dimension's band and whether it was assessed at all: 0
// when a case of a family it is established from failed, 1 when every one
// passed; not assessed when no family establishes it (Established).
func (a Assessment) Band(dim string) (band int, assessed bool) {
	fams := a.Established(dim)
	if len(fams) == 0 {
		return 0, false
	}
	for _, r := range a.Results {
		if slices.Contains(fams, r.Family) && r.Verdict == Fail {
			return 0, true
		}
	}
	return 1, true
}

// Report is the assessment's canonical bytes (RFC 8785), which a grade's
// determination_hash is the SHA-256 of.
func (a Assessment) Report() ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	v, err := canonical.Decode(b)
	if err != nil {
		return nil, err
	}
	return canonical.Marshal(v)
}

var profilePattern = regexp.MustCompile(`^a202-profile/[a-z0-9-]+/[0-9]+\.[0-9]+$`)

// Run is one assessment's setting.
type Run struct {
	// Subject is the counterparty organisation assessed.
	Subject string
	// Carriers are the bindings every case is presented over, each in
	// turn.
	Carriers []Carrier
	// Record is the assessor's record: no case travels under a
	// transaction it holds.
	Record Record
	Now    time.Time
	Logger *slog.Logger
}

// Assess presents every refused case to the subject over each carrier, in
// order, and judges each answer (see the package documentation). A case
// whose answer cannot be read (the instance unreachable, still busy after
// the retries, a binding's capability check failing, a carrier failure
// that is not a refusal) ends the run with an error: a grade is issued on
// a complete assessment or not at all.
func Assess(ctx context.Context, run Run, cases []Case) (Assessment, error) {
	if len(run.Carriers) == 0 || run.Record == nil {
		return Assessment{}, errors.New("grade: an assessment needs the carriers to present over and the assessor's record")
	}
	log := run.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := Assessment{Scope: Scope, Subject: run.Subject, AssessedAt: envelope.Timestamp(run.Now), Results: make([]Result, 0, len(cases)), Profiles: []string{}}
	for _, c := range run.Carriers {
		a.Carriers = append(a.Carriers, c.Name)
	}
	profiles := map[string]bool{}
	for _, c := range cases {
		if !isFamily(c.Family) {
			return Assessment{}, fmt.Errorf("grade: case %s names family %q, not a bilateral one", c.Fixture, c.Family)
		}
		r := Result{Fixture: c.Fixture, Family: c.Family, Kind: c.Kind, Expected: Accepted, Observations: []Observation{}, Verdict: NotPresented}
		if !c.Valid {
			r.Expected, r.ExpectedCode = Refused, c.Code
		}
		m := carried(c)
		if m.why == "" && m.txn == "" {
			id, err := freshTransaction(ctx, run.Record)
			if err != nil {
				return Assessment{}, err
			}
			m.txn = id
		} else if m.why == "" {
			h, err := held(ctx, run.Record, m.txn)
			if err != nil {
				return Assessment{}, err
			}
			if h {
				m.why = fmt.Sprintf(notHeldWhy, m.txn)
			}
		}
		if m.why != "" {
			r.Why = m.why
			a.Results = append(a.Results, r)
			continue
		}
		r.Transaction, r.Objects, r.Verdict = m.txn, len(m.objects), Pass
		for _, car := range run.Carriers {
			o, err := present(ctx, car, run.Subject, m, log)
			if err != nil {
				return Assessment{}, fmt.Errorf("grade: presenting %s over %s: %w", c.Fixture, car.Name, err)
			}
			o.Verdict = judge(c, o)
			switch {
			case o.Verdict == Fail:
				r.Verdict = Fail
			case o.Verdict == Inconclusive && r.Verdict == Pass:
				r.Verdict = Inconclusive
			}
			r.Observations = append(r.Observations, o)
		}
		log.Debug("case presented", "fixture", c.Fixture, "verdict", r.Verdict)
		a.Results = append(a.Results, r)
		if doc, err := canonical.DecodeWith(c.Body, canonical.Options{AllowFloats: true}); err == nil {
			canonical.WalkStrings(doc, func(s string) {
				if profilePattern.MatchString(s) && schema.ProfileKnown(s) {
					profiles[s] = true
				}
			})
		}
	}
	for p := range profiles {
		a.Profiles = append(a.Profiles, p)
	}
	sort.Strings(a.Profiles)
	return a, nil
}
