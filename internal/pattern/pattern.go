// Package pattern matches the regular expressions A202's identifiers,
// hashes and codes are written in, as package regexp does, without its
// machinery for the shapes that need none.
//
// The schemas (common.schema.json's id and hash definitions) and the gate
// check every identifier, hash, currency and unit code of every object
// against a pattern, several times an act. Nearly all of them are a
// sequence of literal text and ASCII character classes, each class
// repeated a fixed or bounded number of times, anchored at both ends:
//
//	^off_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$
//	^[0-9a-f]{64}$
//	^[A-Z]{3}$
//
// Such a pattern needs no backtracking when no class that repeats a
// variable number of times can also begin what follows it: the longest
// run of the class is then the only one that can match. Compile
// recognises that shape from the parsed expression and matches it with
// one pass over the bytes; every other pattern is matched by regexp
// itself. Both answer alike for every input (FuzzSame holds this against
// regexp for every pattern of the schemas and of the code); the fast form
// is about ten times cheaper than regexp's one-pass matcher on an
// identifier.
package pattern

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// Pattern is a compiled regular expression (RE2 syntax, as regexp.Compile
// accepts).
type Pattern struct {
	re    *regexp.Regexp
	items []item // the fast form; nil when re matches
}

// item is one step of the fast form: a literal (lit non-empty), or a byte
// class repeated min to max times (max -1: without bound).
type item struct {
	lit      string
	class    [2]uint64 // bit b set: ASCII byte b is in the class
	min, max int
}

func (it *item) has(b byte) bool {
	return b < 128 && it.class[b>>6]&(1<<(b&63)) != 0
}

// Compile parses expr as regexp.Compile does.
func Compile(expr string) (*Pattern, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &Pattern{re: re, items: fastForm(expr)}, nil
}

// MustCompile is Compile for expressions known to be valid; it panics
// otherwise.
func MustCompile(expr string) *Pattern {
	p, err := Compile(expr)
	if err != nil {
		panic("pattern: " + err.Error())
	}
	return p
}

// String returns the expression p was compiled from.
func (p *Pattern) String() string { return p.re.String() }

// Fast reports whether p is matched without regexp.
func (p *Pattern) Fast() bool { return p.items != nil }

// MatchString reports whether s contains a match of p (anchored patterns:
// whether s matches), as regexp's MatchString does.
func (p *Pattern) MatchString(s string) bool {
	if p.items == nil {
		return p.re.MatchString(s)
	}
	pos := 0
	for i := range p.items {
		it := &p.items[i]
		if it.lit != "" {
			if !strings.HasPrefix(s[pos:], it.lit) {
				return false
			}
			pos += len(it.lit)
			continue
		}
		n := 0
		for pos < len(s) && (it.max < 0 || n < it.max) && it.has(s[pos]) {
			pos++
			n++
		}
		if n < it.min {
			return false
		}
	}
	return pos == len(s)
}

// fastForm returns the fast form of expr, or nil when it has another
// shape.
func fastForm(expr string) []item {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) < 3 {
		return nil
	}
	subs := re.Sub
	if subs[0].Op != syntax.OpBeginText || subs[len(subs)-1].Op != syntax.OpEndText {
		return nil
	}
	var items []item
	for _, sub := range subs[1 : len(subs)-1] {
		it, ok := itemOf(sub)
		if !ok {
			return nil
		}
		items = append(items, it)
	}
	// No variable repeat may be able to give up a byte to what follows.
	for i, it := range items {
		if it.lit != "" || it.min == it.max {
			continue
		}
		if i+1 == len(items) {
			break
		}
		next := items[i+1]
		switch {
		case next.lit != "":
			if it.has(next.lit[0]) {
				return nil
			}
		case next.min == 0:
			return nil
		case next.class[0]&it.class[0] != 0 || next.class[1]&it.class[1] != 0:
			return nil
		}
	}
	return items
}

// itemOf turns one element of the top-level concatenation into an item.
func itemOf(re *syntax.Regexp) (item, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return item{}, false
		}
		var b strings.Builder
		for _, r := range re.Rune {
			if r >= 128 {
				return item{}, false
			}
			b.WriteByte(byte(r))
		}
		return item{lit: b.String()}, b.Len() > 0
	case syntax.OpCharClass:
		return classItem(re, 1, 1)
	case syntax.OpRepeat:
		return classItem(re.Sub[0], re.Min, re.Max)
	case syntax.OpStar:
		return classItem(re.Sub[0], 0, -1)
	case syntax.OpPlus:
		return classItem(re.Sub[0], 1, -1)
	case syntax.OpQuest:
		return classItem(re.Sub[0], 0, 1)
	}
	return item{}, false
}

// classItem is an item for an ASCII character class (or a single ASCII
// byte, which the parser writes as a literal) repeated min to max times.
func classItem(re *syntax.Regexp, min, max int) (item, bool) {
	if re.Flags&syntax.FoldCase != 0 {
		return item{}, false
	}
	it := item{min: min, max: max}
	switch re.Op {
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= 128 {
				return item{}, false
			}
			for r := lo; r <= hi; r++ {
				it.class[r>>6] |= 1 << (r & 63)
			}
		}
	case syntax.OpLiteral:
		if len(re.Rune) != 1 || re.Rune[0] >= 128 {
			return item{}, false
		}
		r := re.Rune[0]
		it.class[r>>6] |= 1 << (r & 63)
	default:
		return item{}, false
	}
	return it, true
}
