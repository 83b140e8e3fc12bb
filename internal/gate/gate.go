package gate

import (
	"fmt"
	"strings"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
)

// Outcome is the gate's verdict on one document or set.
type Outcome string

// The two outcomes. There is no third: a document the gate cannot read is
// refused.
const (
	Accepted Outcome = "accepted"
	Refused  Outcome = "refused"
)

// The kinds of input the gate judges, as reported in Judgment.Kind.
const (
	KindEnvelope     = "envelope"      // one envelope object (canonical model §3)
	KindMandate      = "mandate"       // one a202-mandate/0.1 document
	KindMandateChain = "mandate_chain" // a parent and a child mandate
	KindDeclaration  = "declaration"   // carrier capability declarations
	KindGrade        = "grade"         // one conformance grade
	KindBundle       = "bundle"        // a set of objects with a context
	KindDocument     = "document"      // input not recognised as any of these
)

// Problem is one reason a document is refused.
type Problem struct {
	// Code is the registered reason code, or "" for a refusal the
	// specification defines no code for (a schema-layer refusal such as
	// carrier metadata inside signed bytes, binding §5.4).
	Code reason.Code
	// Object is the id of the object concerned when a set is judged.
	Object string
	// Path is the JSON Pointer (RFC 6901) of the offending value inside
	// the object or document; "" is the whole of it.
	Path string
	// Detail says what is wrong, for the operator. It never carries more
	// of the document than the path already names.
	Detail string
}

// String renders the problem on one line: the code (or "(no code)"),
// where it is, and the detail.
func (p Problem) String() string {
	var b strings.Builder
	if p.Code != "" {
		b.WriteString(string(p.Code))
	} else {
		b.WriteString("(no code)")
	}
	if p.Object != "" || p.Path != "" {
		b.WriteString(" at ")
		b.WriteString(p.Object)
		if p.Path != "" {
			b.WriteString(p.Path)
		}
	}
	b.WriteString(": ")
	b.WriteString(p.Detail)
	return b.String()
}

// Judgment is the gate's answer: accepted, or refused with every
// registered code that applies (sorted, without duplicates) and every
// problem found.
type Judgment struct {
	Kind     string
	Outcome  Outcome
	Codes    []reason.Code
	Problems []Problem
}

// Accepted reports whether the judgment accepts.
func (j Judgment) Accepted() bool { return j.Outcome == Accepted }

// Has reports whether the judgment carries code c.
func (j Judgment) Has(c reason.Code) bool {
	for _, x := range j.Codes {
		if x == c {
			return true
		}
	}
	return false
}

// Err returns nil for an accepted judgment and a *reason.Refusal carrying
// its codes otherwise; the refusal's detail is the first problem.
func (j Judgment) Err() error {
	if j.Outcome == Accepted {
		return nil
	}
	detail := "refused"
	if len(j.Problems) > 0 {
		detail = j.Problems[0].String()
	}
	return reason.Refuse(detail, j.Codes...)
}

// judge builds a judgment from problems: refused if there is any.
func judge(kind string, problems []Problem) Judgment {
	j := Judgment{Kind: kind, Outcome: Accepted, Problems: problems}
	if len(problems) == 0 {
		return j
	}
	j.Outcome = Refused
	var codes []reason.Code
	for _, p := range problems {
		if p.Code != "" {
			codes = append(codes, p.Code)
		}
	}
	j.Codes = reason.Normalize(codes)
	return j
}

// Codes returns the normalized registered codes of problems.
func Codes(problems []Problem) []reason.Code {
	var codes []reason.Code
	for _, p := range problems {
		if p.Code != "" {
			codes = append(codes, p.Code)
		}
	}
	return reason.Normalize(codes)
}

// Options adjust the gate.
type Options struct {
	// RulesVersion is the rules version replayed against when a set does
	// not state its own; "" means the newest registered (1.3).
	RulesVersion string
	// Now, when set, is the instant a grade's expiry is read against
	// (conformance grades §4.2 item 3). The zero value leaves the gate
	// clock-free: only static rules are judged.
	Now time.Time
	// AwaitingSignatures judges an object that travels to be signed by
	// the other party before it counts, as an agreement does once, with its
	// first party's signature only (canonical model §10 step 7): everything
	// is judged except the minimum number of signatures. The caller must
	// never record such an object until it is complete.
	AwaitingSignatures bool
	// JudgeSet judges a bundle fixture's objects as one record under its
	// context (File, Document). The set-level rules are the verifier's, so
	// package gate has no judge of its own: a caller that judges bundles
	// passes verify.JudgeSet. Nil refuses a bundle, saying so.
	JudgeSet SetJudge
	// OwnObject judges an object this instance built from parts it had
	// already judged (the agent's validated inputs, objects it holds): the
	// normative checks run, the JSON Schema layer does not, because every
	// object leaves the instance for a counterparty whose gate runs both on
	// the bytes it receives. Never set it for received bytes.
	OwnObject bool
	// GradeKeys, when set, resolves the key a grade's signature names, and
	// Grade verifies the signature under it (see Grade). Nil leaves the
	// signature unread.
	GradeKeys GradeKeyResolver
}

// DefaultRulesVersion is the rules version the gate assumes when neither
// the input nor Options states one (decisions.md item 11).
const DefaultRulesVersion = "1.3"

func (o Options) rulesVersion() string {
	if o.RulesVersion != "" {
		return o.RulesVersion
	}
	return DefaultRulesVersion
}

// problems is a small accumulator the checks append to.
type problems []Problem

func (ps *problems) add(code reason.Code, path, format string, args ...any) {
	*ps = append(*ps, Problem{Code: code, Path: path, Detail: fmt.Sprintf(format, args...)})
}

// File judges the bytes of one file: a bare document (envelope object,
// mandate, grade) or a published fixture recognised by its fixture_kind
// member (bundle, mandate_chain, declaration).
//
// The bytes are decoded strictly (package canonical). A document that
// fails only because it carries a number with a fraction or exponent is
// refused for that, and then judged as read leniently, so that the refusal
// still names what the number broke (a binary float amount is
// A202-TERMS-INVALID, canonical model §7).
func File(data []byte, opt Options) Judgment {
	v, err := canonical.Decode(data)
	var decodeProblem *Problem
	if err != nil {
		lenient, lerr := canonical.DecodeWith(data, canonical.Options{AllowFloats: true})
		if lerr != nil {
			return judge(KindDocument, []Problem{{Detail: err.Error()}})
		}
		v = lenient
		decodeProblem = &Problem{Detail: err.Error()}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return judge(KindDocument, []Problem{{Detail: "the document is not a JSON object"}})
	}
	j := Document(m, opt)
	if decodeProblem != nil {
		j = judge(j.Kind, append([]Problem{*decodeProblem}, j.Problems...))
	}
	return j
}

// Document judges one decoded JSON object, recognising what it is the way
// File does.
func Document(doc map[string]any, opt Options) Judgment {
	if fk, present := doc["fixture_kind"]; present {
		kind, _ := fk.(string)
		switch kind {
		case "bundle":
			return bundle(doc, opt)
		case "mandate_chain":
			parent, _ := objAt(doc, "parent")
			child, _ := objAt(doc, "child")
			return MandateChain(parent, child)
		case "declaration":
			return Declaration(doc["local_party"], doc["counterparty_declaration"])
		}
		return judge(KindDocument, []Problem{{Path: "/fixture_kind", Detail: fmt.Sprintf("unknown fixture kind %q", kind)}})
	}
	sv, _ := strAt(doc, "spec_version")
	_, hasType := doc["object_type"]
	_, hasDims := doc["dimensions"]
	switch {
	case sv == mandateSpecVersion && !hasType:
		return Mandate(doc)
	case !hasType && hasDims:
		return Grade(doc, opt)
	}
	return Envelope(doc, opt)
}

// bundle judges a published bundle fixture: {fixture_kind, note, context,
// objects}. The gate reads the fixture's shape and its context; the set
// is judged by opt.JudgeSet.
func bundle(doc map[string]any, opt Options) Judgment {
	if opt.JudgeSet == nil {
		return judge(KindBundle, []Problem{{Path: "/fixture_kind",
			Detail: "a bundle is a set of objects judged as one record by the verifier (verify.JudgeSet); package gate judges no set itself, and none was given (Options.JudgeSet)"}})
	}
	var ps problems
	raw, ok := arrAt(doc, "objects")
	if !ok {
		ps.add("", "/objects", "a bundle carries an objects array")
	}
	var objects []map[string]any
	for i, o := range raw {
		m, ok := obj(o)
		if !ok {
			ps.add("", pointer("/objects", i), "a bundle member is not an object")
			continue
		}
		objects = append(objects, m)
	}
	ctx := ContextFromFixture(doc["context"], opt)
	j := opt.JudgeSet(objects, ctx)
	return judge(KindBundle, append(ps, j.Problems...))
}

// ContextFromFixture reads the context member of a bundle fixture (or a
// bundle directory's bundle.json) into a SetContext. rules_version_in_force
// states both the replay version and the version a determination must
// cite; when it is absent, opt's rules version governs replay and the
// determination check has nothing stated to compare with.
func ContextFromFixture(context any, opt Options) SetContext {
	c, _ := obj(context)
	ctx := SetContext{RulesVersion: opt.rulesVersion()}
	if v, ok := strAt(c, "rules_version_in_force"); ok {
		ctx.RulesVersion = v
		ctx.SubjectRulesVersion = v
	} else if v, ok := strAt(c, "rules_version"); ok {
		ctx.RulesVersion = v
		ctx.SubjectRulesVersion = v
	}
	if m, ok := objAt(c, "event_rules_in_force"); ok {
		ctx.EventRules = map[string]string{}
		for id, v := range m {
			if s, ok := v.(string); ok {
				ctx.EventRules[id] = s
			}
		}
	}
	if t, ok := timeAt(c, "subject_act_at"); ok {
		ctx.SubjectActAt = t
	}
	ctx.StatedGaps, _ = stringsAt(c, "stated_gaps")
	ctx.ResolvableHashes, _ = stringsAt(c, "resolvable_hashes")
	if r, ok := member(c, "verification_report"); ok {
		ctx.Report = r
	}
	return ctx
}
