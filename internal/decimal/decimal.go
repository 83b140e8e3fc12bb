// Package decimal parses and compares A202 decimal strings exactly.
//
// A202 carries every amount, quantity and percentage as a string in plain
// base-10 notation (canonical model §7): an optional integer part without
// leading zeros, an optional fraction, and nothing else. No sign, no
// exponent, no separators, no NaN or Infinity, no white space. Parse refuses
// anything else rather than reading it loosely, so that "4e3", "+4000" and
// "1_000" can never satisfy a spending limit written as "4000.00".
//
// Values compare numerically ("20" equals "20.00"), while the strings
// themselves are kept verbatim wherever they are hashed.
package decimal

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// MaxFractionDigits is the most fraction digits an amount may have
// (the kernel's money grammar allows 18).
const MaxFractionDigits = 18

// ErrSyntax is matched by every parse failure.
var ErrSyntax = errors.New("not an A202 decimal")

// Decimal is an exact non-negative decimal value.
type Decimal struct{ d apd.Decimal }

// Parse reads s under the A202 grammar ^(0|[1-9][0-9]*)(\.[0-9]{1,18})?$.
func Parse(s string) (Decimal, error) { return parse(s, MaxFractionDigits) }

// ParseQuantity reads a quantity: the same grammar with at most 9 fraction
// digits (canonical model §7).
func ParseQuantity(s string) (Decimal, error) { return parse(s, 9) }

func parse(s string, maxFrac int) (Decimal, error) {
	if !valid(s, maxFrac) {
		return Decimal{}, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	var d Decimal
	if _, _, err := d.d.SetString(s); err != nil {
		return Decimal{}, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return d, nil
}

func valid(s string, maxFrac int) bool {
	if s == "" {
		return false
	}
	i := 0
	if s[0] == '0' {
		i = 1
	} else {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return false
		}
	}
	if i == len(s) {
		return true
	}
	if s[i] != '.' {
		return false
	}
	frac := s[i+1:]
	if len(frac) == 0 || len(frac) > maxFrac {
		return false
	}
	for j := 0; j < len(frac); j++ {
		if frac[j] < '0' || frac[j] > '9' {
			return false
		}
	}
	return true
}

// Valid reports whether s is an A202 decimal string.
func Valid(s string) bool { return valid(s, MaxFractionDigits) }

// Cmp compares a and b numerically: -1, 0 or +1.
func (a Decimal) Cmp(b Decimal) int { return a.d.Cmp(&b.d) }

// IsZero reports whether the value is zero.
func (a Decimal) IsZero() bool { return a.d.IsZero() }

// Sub returns a−b exactly; the result may be negative, which Valid strings
// never are, so callers compare it rather than print it as an amount.
func (a Decimal) Sub(b Decimal) Decimal {
	var r Decimal
	ctx := apd.BaseContext.WithPrecision(60)
	_, _ = ctx.Sub(&r.d, &a.d, &b.d)
	return r
}

// Add returns a+b exactly.
func (a Decimal) Add(b Decimal) Decimal {
	var r Decimal
	ctx := apd.BaseContext.WithPrecision(60)
	_, _ = ctx.Add(&r.d, &a.d, &b.d)
	return r
}

// Sign returns -1, 0 or +1.
func (a Decimal) Sign() int { return a.d.Sign() }

// String returns the value in plain notation without trailing zeros beyond
// what the value needs ("3200.00" stays "3200.00"; a computed value keeps
// the scale of its inputs).
func (a Decimal) String() string { return a.d.Text('f') }

// Compare parses both strings and compares them; an unparseable side is an
// error, which callers treat as unevaluable (and so as a deny).
func Compare(a, b string) (int, error) {
	x, err := Parse(a)
	if err != nil {
		return 0, err
	}
	y, err := Parse(b)
	if err != nil {
		return 0, err
	}
	return x.Cmp(y), nil
}

// Zero is 0.
func Zero() Decimal { return Decimal{} }

// Share returns total × part ÷ whole, rounded half up (a half goes away
// from zero) to places fraction digits: the money an accepted quantity of
// a whole is worth. whole must be positive.
func Share(total, part, whole Decimal, places int) (Decimal, error) {
	if whole.Sign() <= 0 {
		return Decimal{}, errors.New("decimal: a share of a non-positive whole")
	}
	ctx := apd.BaseContext.WithPrecision(80)
	ctx.Rounding = apd.RoundHalfUp
	var prod, quo Decimal
	if _, err := ctx.Mul(&prod.d, &total.d, &part.d); err != nil {
		return Decimal{}, err
	}
	if _, err := ctx.Quo(&quo.d, &prod.d, &whole.d); err != nil {
		return Decimal{}, err
	}
	return quo.Round(places), nil
}

// Round returns a rounded half up to places fraction digits (places ≥ 0).
func (a Decimal) Round(places int) Decimal {
	ctx := apd.BaseContext.WithPrecision(80)
	ctx.Rounding = apd.RoundHalfUp
	var r Decimal
	_, _ = ctx.Quantize(&r.d, &a.d, int32(-places))
	return r
}

// Places returns how many fraction digits a value carries as written
// ("3200.00" two, "5" none).
func (a Decimal) Places() int {
	if a.d.Exponent >= 0 {
		return 0
	}
	return int(-a.d.Exponent)
}

// Fixed returns the value in plain notation with exactly places fraction
// digits, rounded half up when it carries more ("2400" at 2 is "2400.00").
func (a Decimal) Fixed(places int) string { return a.Round(places).String() }

// Max returns the greater of a and b.
func Max(a, b Decimal) Decimal {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}
