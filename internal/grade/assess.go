package grade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/gate"
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

// Verdict is an instance's judgment of one presented case, as the probe
// route answers it.
type Verdict struct {
	Kind        string        `json:"kind"`
	Outcome     gate.Outcome  `json:"outcome"`
	ReasonCodes []reason.Code `json:"reason_codes"`
}

// Prober presents one case to the instance assessed.
type Prober interface {
	Probe(ctx context.Context, body []byte) (Verdict, error)
}

// HTTPProber presents cases at a peer's ProbePath over a pinned client.
type HTTPProber struct {
	Client  *http.Client
	BaseURL string // the peer's scheme and host
}

// Probe POSTs body to the peer's probe route and reads its verdict.
func (p HTTPProber) Probe(ctx context.Context, body []byte) (Verdict, error) {
	u, err := url.JoinPath(p.BaseURL, ProbePath)
	if err != nil {
		return Verdict{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return Verdict{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.Client.Do(req)
	if err != nil {
		return Verdict{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Verdict{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Verdict{}, fmt.Errorf("grade: probe answered %s", resp.Status)
	}
	var v Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		return Verdict{}, fmt.Errorf("grade: probe answer: %w", err)
	}
	if v.Outcome != gate.Accepted && v.Outcome != gate.Refused {
		return Verdict{}, fmt.Errorf("grade: probe answered outcome %q", v.Outcome)
	}
	return v, nil
}

// Result is one case presented and judged.
type Result struct {
	Fixture      string        `json:"fixture"`
	Family       string        `json:"family"`
	Expected     string        `json:"expected"` // "accepted", or "refused" with ExpectedCode
	ExpectedCode reason.Code   `json:"expected_code,omitempty"`
	Outcome      gate.Outcome  `json:"outcome"`
	ReasonCodes  []reason.Code `json:"reason_codes"`
	Pass         bool          `json:"pass"`
}

// Assessment is one run of the bilateral families against an instance.
type Assessment struct {
	Scope      string   `json:"scope"`
	Subject    string   `json:"subject_organization_id"`
	AssessedAt string   `json:"assessed_at"`
	Results    []Result `json:"results"`
	// Profiles are the registered transaction profiles the cases exercised.
	Profiles []string `json:"profiles"`
}

// Failed returns the results that did not pass.
func (a Assessment) Failed() []Result {
	var out []Result
	for _, r := range a.Results {
		if !r.Pass {
			out = append(out, r)
		}
	}
	return out
}

// Band returns a dimension's band: 1 when every case of its families
// passed, 0 when one failed.
func (a Assessment) Band(dim string) int {
	fams := Dimensions[dim]
	for _, r := range a.Results {
		if slices.Contains(fams, r.Family) && !r.Pass {
			return 0
		}
	}
	return 1
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

// judge says whether an answer meets a case's expectation, as the
// published runner judges: accepted for a positive case; refused for a
// negative one, with the declared code among those raised.
func judge(c Case, v Verdict) bool {
	if c.Valid {
		return v.Outcome == gate.Accepted
	}
	if v.Outcome != gate.Refused {
		return false
	}
	return c.Code == "" || slices.Contains(v.ReasonCodes, c.Code)
}

var profilePattern = regexp.MustCompile(`^a202-profile/[a-z0-9-]+/[0-9]+\.[0-9]+$`)

// Assess presents every case to p, in order, and judges each answer. A
// case that cannot be presented (the instance unreachable, an answer that
// does not read) ends the run with an error: a grade is issued on a
// complete assessment or not at all.
func Assess(ctx context.Context, p Prober, subject string, cases []Case, now time.Time) (Assessment, error) {
	a := Assessment{Scope: Scope, Subject: subject, AssessedAt: envelope.Timestamp(now), Results: make([]Result, 0, len(cases)), Profiles: []string{}}
	profiles := map[string]bool{}
	for _, c := range cases {
		if !isFamily(c.Family) {
			return Assessment{}, fmt.Errorf("grade: case %s names family %q, not a bilateral one", c.Fixture, c.Family)
		}
		v, err := p.Probe(ctx, c.Body)
		if err != nil {
			return Assessment{}, fmt.Errorf("grade: presenting %s: %w", c.Fixture, err)
		}
		codes := v.ReasonCodes
		if codes == nil {
			codes = []reason.Code{}
		}
		r := Result{Fixture: c.Fixture, Family: c.Family, Expected: string(gate.Accepted), Outcome: v.Outcome, ReasonCodes: codes, Pass: judge(c, v)}
		if !c.Valid {
			r.Expected, r.ExpectedCode = string(gate.Refused), c.Code
		}
		a.Results = append(a.Results, r)
		if doc, err := canonical.DecodeWith(c.Body, canonical.Options{AllowFloats: true}); err == nil {
			walkStrings(doc, func(s string) {
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

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, y := range x {
			walkStrings(y, f)
		}
	case []any:
		for _, y := range x {
			walkStrings(y, f)
		}
	}
}
