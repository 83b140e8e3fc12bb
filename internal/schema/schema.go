// Package schema validates decoded A202 documents against party's own JSON
// Schemas (package schemas) and reports failures in a form the gate can map
// to A202 reason codes.
//
// It answers one question: does this document have the shape A202 v0.1
// requires? It never assigns reason codes. Schema-valid is not conformant
// (CCM §2): hashes, signatures, cross-object references and the CCM §12
// invariants are checked elsewhere, after this.
//
// Documents are the values jsonschema.UnmarshalJSON produces (map[string]any,
// []any, string, bool, nil, json.Number). All schemas are compiled once, on
// first use (the envelope's reduction for one object type on the first
// object of that type, dispatch.go); a schema that does not compile is a
// bug in party's embedded files and panics rather than failing open.
package schema

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/partyd/party/internal/pattern"
	"github.com/partyd/party/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Kind names a kind of document party validates. It travels in
// ValidationError so that a caller handling several kinds knows which
// schema refused.
type Kind string

// The document kinds. Envelope covers every object_type of the kernel
// (the payload is chosen by object_type); mandates and grades are
// standalone documents outside the envelope (CCM §3.1, GRD §4); profile
// terms are the opaque terms.profile_terms of an offer or agreement, which
// only the named profile's schema interprets (CCM §8).
const (
	KindEnvelope     Kind = "envelope"
	KindMandate      Kind = "mandate"
	KindGrade        Kind = "grade"
	KindProfileTerms Kind = "profile_terms"
)

// ErrUnknownKind is returned by Validate for a Kind this package does not
// define, so that a typo cannot silently skip validation.
var ErrUnknownKind = errors.New("schema: unknown document kind")

// ErrUnknownProfile is wrapped by the error ValidateProfileTerms and
// ValidateTerms return when the profile identifier resolves to no
// registered profile. It is kept apart from *ValidationError because the
// specification gives the two cases different codes (A202-PROFILE-UNKNOWN
// against A202-PROFILE-TERMS-INVALID, CCM §8 rule 5 and §12).
var ErrUnknownProfile = errors.New("schema: transaction profile not registered")

// Failure is one leaf failure of a validation: the smallest statement of
// what was wrong and where.
type Failure struct {
	// InstanceLocation is the JSON Pointer (RFC 6901) of the failing value
	// inside the validated document, "" for the document itself. For
	// profile terms it is relative to the profile_terms object.
	InstanceLocation string
	// Keyword is the JSON Schema keyword that failed, such as "pattern",
	// "required", "additionalProperties", "enum", "minItems" or "not".
	Keyword string
	// SchemaLocation is the absolute location of the failing keyword in
	// party's schemas, for example
	// "https://party.invalid/schemas/common.schema.json#/$defs/money/properties/amount/pattern".
	// The $defs names in it are stable so that callers may match on them.
	SchemaLocation string
	// Message is a human-readable explanation in English.
	Message string
}

// String renders the failure as "location: keyword: message".
func (f Failure) String() string {
	loc := f.InstanceLocation
	if loc == "" {
		loc = "(root)"
	}
	return fmt.Sprintf("%s: %s: %s", loc, f.Keyword, f.Message)
}

// ValidationError reports that a document does not have the required
// shape. Failures is never empty and is sorted by instance location, then
// keyword, so the same document always yields the same error.
type ValidationError struct {
	// Kind is the kind of document that was refused.
	Kind Kind
	// Profile is the profile identifier for KindProfileTerms, else "".
	Profile string
	// Failures lists every leaf failure.
	Failures []Failure
}

// Error lists every failure on one line, so logs show the whole story.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("schema: invalid ")
	b.WriteString(string(e.Kind))
	if e.Profile != "" {
		fmt.Fprintf(&b, " %q", e.Profile)
	}
	for i, f := range e.Failures {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// InstanceLocations returns the distinct JSON Pointers of all failing
// values, sorted. The gate uses these to decide which reason code a
// refusal carries.
func (e *ValidationError) InstanceLocations() []string {
	seen := make(map[string]bool, len(e.Failures))
	var out []string
	for _, f := range e.Failures {
		if !seen[f.InstanceLocation] {
			seen[f.InstanceLocation] = true
			out = append(out, f.InstanceLocation)
		}
	}
	sort.Strings(out)
	return out
}

// Under returns the failures whose instance location is pointer itself or
// lies below it ("/payload" matches "/payload/terms" but not "/payloads").
// An empty pointer returns every failure.
func (e *ValidationError) Under(pointer string) []Failure {
	var out []Failure
	for _, f := range e.Failures {
		if pointer == "" || f.InstanceLocation == pointer || strings.HasPrefix(f.InstanceLocation, pointer+"/") {
			out = append(out, f)
		}
	}
	return out
}

// Validate validates doc as a document of the given kind. KindProfileTerms
// is not accepted here because it needs a profile identifier; use
// ValidateProfileTerms.
func Validate(k Kind, doc any) error {
	s := compiled()
	var sch *jsonschema.Schema
	switch k {
	case KindEnvelope:
		// The envelope decided for the object's type first (dispatch.go);
		// what it refuses, the whole envelope refuses with its own report.
		if m, ok := doc.(map[string]any); ok {
			if t, ok := m["object_type"].(string); ok {
				// A document quick refuses under a schema it interprets
				// goes straight to the envelope as written, which decides
				// and reports (it would refuse it too, TestQuickAgreesWithLibrary).
				if d := s.dispatched.schema(t); d != nil && (accepts(d, doc) || !interprets(d) && d.Validate(doc) == nil) {
					return nil
				}
			}
		}
		sch = s.envelope
	case KindMandate:
		sch = s.mandate
	case KindGrade:
		sch = s.grade
	default:
		return fmt.Errorf("%w: %q", ErrUnknownKind, k)
	}
	return check(sch, k, "", doc)
}

// ValidateEnvelope validates one envelope object (CCM §3), including the
// payload selected by its object_type. terms.profile_terms is left opaque
// here, as the kernel leaves it (CCM §8 rule 3); validate it with
// ValidateTerms.
func ValidateEnvelope(doc any) error { return Validate(KindEnvelope, doc) }

// ValidateMandate validates one standalone a202-mandate/0.1 document
// (MAN §3). An envelope-wrapped mandate fails here, as CCM §3.1 requires.
func ValidateMandate(doc any) error { return Validate(KindMandate, doc) }

// ValidateGrade validates one conformance grade document (GRD §4). The
// role-scope rules with their own codes (RSC §3.2, §6.3) are not schema
// rules and pass through to the caller.
func ValidateGrade(doc any) error { return Validate(KindGrade, doc) }

// ValidateProfileTerms validates terms, the profile_terms object of an
// offer or agreement, against the registered profile named profile (for
// example "a202-profile/calibration-service/0.1"). An unregistered profile
// yields an error wrapping ErrUnknownProfile; invalid terms yield a
// *ValidationError of kind KindProfileTerms.
func ValidateProfileTerms(profile string, terms any) error {
	sch, ok := compiled().profiles[profile]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProfile, profile)
	}
	return check(sch, KindProfileTerms, profile, terms)
}

// ValidateTerms resolves terms.profile and validates terms.profile_terms
// against it, for a terms object (offer or agreement payload.terms) that
// has already passed ValidateEnvelope. Failure locations are relative to
// profile_terms. If profile or profile_terms is missing or of the wrong
// type, the result is a *ValidationError, because the envelope schema
// should have refused that document first.
func ValidateTerms(terms any) error {
	m, _ := terms.(map[string]any)
	profile, ok := m["profile"].(string)
	if !ok {
		return &ValidationError{Kind: KindProfileTerms, Failures: []Failure{{
			InstanceLocation: "", Keyword: "required",
			Message: "terms carry no profile identifier string",
		}}}
	}
	pt, present := m["profile_terms"]
	if !present {
		if !ProfileKnown(profile) {
			return fmt.Errorf("%w: %q", ErrUnknownProfile, profile)
		}
		return &ValidationError{Kind: KindProfileTerms, Profile: profile, Failures: []Failure{{
			InstanceLocation: "", Keyword: "required",
			Message: "terms carry no profile_terms",
		}}}
	}
	return ValidateProfileTerms(profile, pt)
}

// ProfileKnown reports whether profile is a registered transaction profile
// identifier. Matching is exact: there is no nearest-version fallback
// (CCM §8 rule 5; PEM §8).
func ProfileKnown(profile string) bool {
	return registered()[profile] // profiles.go: without compiling anything
}

// Profiles returns the registered profile identifiers, sorted.
func Profiles() []string {
	s := compiled()
	out := make([]string, 0, len(s.profiles))
	for id := range s.profiles {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// set is the result of compiling every embedded schema.
type set struct {
	envelope, mandate, grade *jsonschema.Schema
	// dispatched holds the envelope with its object_type dispatch
	// decided, per type (dispatch.go).
	dispatched *dispatchSet
	profiles   map[string]*jsonschema.Schema
}

// compiled returns the package's schemas, compiling them on first use.
// Compilation happens once per process: the compiled schemas are immutable
// and safe for concurrent use.
var compiled = sync.OnceValue(func() *set { return mustCompile(schemas.FS) })

// mustCompile compiles fsys or panics. Only party's own embedded files can
// make it panic, and a validator that carried on without its schemas would
// fail open.
func mustCompile(fsys fs.FS) *set {
	s, err := compileSet(fsys)
	if err != nil {
		panic(fmt.Sprintf("internal/schema: embedded schemas are broken: %v", err))
	}
	return s
}

// profileAnnotation is the keyword in which each profile schema states the
// identifier it is registered under.
const profileAnnotation = "x-a202-profile"

// profileIDPattern is the shape of a profile identifier (CCM §8; the same
// pattern as common.schema.json#/$defs/profile_id).
var profileIDPattern = regexp.MustCompile(`^a202-profile/[a-z0-9][a-z0-9-]*/[0-9]+\.[0-9]+$`)

// compileSet loads every *.schema.json of fsys as a resource under
// schemas.BaseURI and compiles the three document roots and every profile.
// It is separate from compiled so tests can feed it a broken file system.
func compileSet(fsys fs.FS) (*set, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Our schemas use format date-time and uri on purpose: patterns fix the
	// lexical shape and the format check catches impossible dates.
	c.AssertFormat()
	// Patterns are matched by internal/pattern: regexp's answers, without
	// its machinery for the identifier, hash and code shapes that need
	// none (most of the schemas' patterns, checked on every object).
	c.UseRegexpEngine(func(expr string) (jsonschema.Regexp, error) { return pattern.Compile(expr) })

	files, err := fs.Glob(fsys, "*.schema.json")
	if err != nil {
		return nil, err
	}
	profileFiles, err := fs.Glob(fsys, "profiles/*.schema.json")
	if err != nil {
		return nil, err
	}
	files = append(files, profileFiles...)
	if len(files) == 0 {
		return nil, errors.New("no *.schema.json files")
	}

	docs := make(map[string]any, len(files))
	for _, name := range files {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		want := schemas.BaseURI + name
		obj, _ := doc.(map[string]any)
		if id, _ := obj["$id"].(string); id != want {
			return nil, fmt.Errorf("%s: $id is %q, want %q", name, id, want)
		}
		if err := c.AddResource(want, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		docs[name] = doc
	}

	env, _ := docs["envelope.schema.json"].(map[string]any)
	if env == nil {
		return nil, errors.New("envelope.schema.json is missing")
	}
	reduced, err := specialise(env)
	if err != nil {
		return nil, err
	}
	for _, doc := range reduced {
		if err := c.AddResource(doc["$id"].(string), doc); err != nil {
			return nil, err
		}
	}

	s := &set{profiles: make(map[string]*jsonschema.Schema), dispatched: newDispatchSet(c, reduced)}
	for _, root := range []struct {
		name string
		dst  **jsonschema.Schema
	}{
		{"envelope.schema.json", &s.envelope},
		{"mandate.schema.json", &s.mandate},
		{"grade.schema.json", &s.grade},
	} {
		sch, err := c.Compile(schemas.BaseURI + root.name)
		if err != nil {
			return nil, err
		}
		*root.dst = sch
	}
	// Compile the remaining files too, so a broken definition nobody
	// references yet is still caught at start-up rather than on first use.
	for _, name := range files {
		if _, err := c.Compile(schemas.BaseURI + name); err != nil {
			return nil, err
		}
	}

	for _, name := range profileFiles {
		obj := docs[name].(map[string]any)
		id, _ := obj[profileAnnotation].(string)
		if !profileIDPattern.MatchString(id) {
			return nil, fmt.Errorf("%s: %s %q is not a profile identifier", name, profileAnnotation, id)
		}
		// The file name repeats the identifier (<name>-<major.minor>), so
		// a copied file that forgot to change either is caught here.
		parts := strings.Split(id, "/")
		if want := parts[1] + "-" + parts[2] + ".schema.json"; path.Base(name) != want {
			return nil, fmt.Errorf("%s: registered as %q, file should be named %s", name, id, want)
		}
		if _, dup := s.profiles[id]; dup {
			return nil, fmt.Errorf("%s: profile %q registered twice", name, id)
		}
		sch, err := c.Compile(schemas.BaseURI + name)
		if err != nil {
			return nil, err
		}
		s.profiles[id] = sch
	}
	return s, nil
}

// check validates doc against sch and converts the library's error tree
// into a *ValidationError.
func check(sch *jsonschema.Schema, k Kind, profile string, doc any) error {
	if accepts(sch, doc) {
		return nil // quick.go: the library would accept it too
	}
	err := sch.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("schema: validating %s: %w", k, err)
	}
	out := &ValidationError{Kind: k, Profile: profile}
	collect(ve, &out.Failures)
	if len(out.Failures) == 0 {
		// Defensive: an error with no leaves still refuses the document.
		out.Failures = []Failure{{Keyword: "", Message: ve.Error()}}
	}
	sort.SliceStable(out.Failures, func(i, j int) bool {
		a, b := out.Failures[i], out.Failures[j]
		if a.InstanceLocation != b.InstanceLocation {
			return a.InstanceLocation < b.InstanceLocation
		}
		if a.Keyword != b.Keyword {
			return a.Keyword < b.Keyword
		}
		return a.SchemaLocation < b.SchemaLocation
	})
	return out
}

// printer renders the library's messages; English is the only language
// party logs in.
var printer = message.NewPrinter(language.English)

// collect appends the leaves of the error tree. Inner nodes ($ref hops,
// allOf, if/then groups) only say "a subschema failed"; the leaves say
// what and where.
func collect(e *jsonschema.ValidationError, out *[]Failure) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	kw := keywordOf(e.ErrorKind)
	loc := e.SchemaURL
	if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
		for _, t := range kp {
			loc += "/" + escapePointerToken(t)
		}
	} else if kw == "not" {
		// The library points a failed "not" at the schema holding it.
		loc += "/not"
	}
	msg := e.ErrorKind.LocalizedString(printer)
	if kw == "false" {
		// Our schemas use false only to forbid a member outright.
		msg = "member not allowed here"
	}
	*out = append(*out, Failure{
		InstanceLocation: pointer(e.InstanceLocation),
		Keyword:          kw,
		SchemaLocation:   loc,
		Message:          msg,
	})
}

// keywordOf names the keyword behind an error kind. A few kinds carry no
// keyword path in the library and are named here.
func keywordOf(k jsonschema.ErrorKind) string {
	if kp := k.KeywordPath(); len(kp) > 0 {
		return kp[0]
	}
	switch k.(type) {
	case *kind.Not:
		return "not"
	case *kind.FalseSchema:
		return "false"
	case *kind.InvalidJsonValue:
		return "type"
	default:
		return ""
	}
}

// pointer turns instance location tokens into an RFC 6901 JSON Pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointerToken(t))
	}
	return b.String()
}

// escapePointerToken applies RFC 6901 escaping to one reference token.
func escapePointerToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return pointerEscaper.Replace(t)
}

// pointerEscaper applies RFC 6901's two escapes (built once: a Replacer
// builds its tables on first use).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
