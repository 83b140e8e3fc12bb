package decimal

import (
	"errors"
	"testing"
)

func TestGrammar(t *testing.T) {
	for _, s := range []string{"0", "0.5", "20", "20.00", "3200.00", "4000", "1.000000000000000001"} {
		if _, err := Parse(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range []string{"", "4e3", "+4000", "-1", "1_000", "1,000", " 1", "1 ", "01", "00", "1.", ".5",
		"NaN", "Infinity", "inf", "0x10", "1.0000000000000000001", "١٢", "1e", "4E3", "1.5e2"} {
		if _, err := Parse(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q accepted (err %v)", s, err)
		}
	}
	if _, err := ParseQuantity("1.0000000001"); err == nil {
		t.Error("quantity with 10 fraction digits accepted")
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"20", "20.00", 0}, {"3200.00", "4000.00", -1}, {"4800.00", "4000.00", 1},
		{"4000.00", "4000", 0}, {"0.1", "0.10000000000000001", -1},
		{"99999999999999999999999.5", "99999999999999999999999.4", 1},
	} {
		got, err := Compare(tc.a, tc.b)
		if err != nil || got != tc.want {
			t.Errorf("Compare(%s, %s) = %d, %v; want %d", tc.a, tc.b, got, err, tc.want)
		}
	}
	if _, err := Compare("4e3", "4000"); err == nil {
		t.Error("Compare accepted an exponent")
	}
	a, _ := Parse("20")
	b, _ := Parse("12.5")
	if d := a.Sub(b); d.String() != "7.5" || d.Sign() != 1 {
		t.Errorf("20-12.5 = %s", d)
	}
	if d := b.Sub(a); d.Sign() != -1 {
		t.Errorf("12.5-20 sign %d", d.Sign())
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "3200.00", "4e3", "+1", "1_0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if !Valid(s) || d.Sign() < 0 {
			t.Fatalf("accepted %q", s)
		}
		e, _ := Parse(s)
		if d.Cmp(e) != 0 {
			t.Fatal("not reflexive")
		}
	})
}

func TestShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		total, part, whole string
		places             int
		want               string
	}{
		{"3200.00", "6", "8", 2, "2400.00"},
		{"3200.00", "8", "8", 2, "3200.00"},
		{"100.00", "1", "3", 2, "33.33"},
		{"100.00", "2", "3", 2, "66.67"},  // 66.666… rounds up
		{"0.05", "1", "2", 2, "0.03"},     // 0.025: a half goes up
		{"1000", "1", "3", 0, "333"},      // JPY-like, no minor unit
		{"10.000", "1", "8", 3, "1.250"},  // three minor digits
		{"1", "1", "3", 9, "0.333333333"}, // a long scale
	} {
		total, _ := Parse(c.total)
		part, _ := ParseQuantity(c.part)
		whole, _ := ParseQuantity(c.whole)
		got, err := Share(total, part, whole, c.places)
		if err != nil || got.String() != c.want {
			t.Errorf("Share(%s, %s, %s, %d) = %s %v, want %s", c.total, c.part, c.whole, c.places, got, err, c.want)
		}
		// The share and the rest always sum to the total exactly.
		if rest := total.Sub(got); rest.Add(got).Cmp(total) != 0 || rest.Sign() < 0 {
			t.Errorf("%s − %s = %s does not restore the total", c.total, got, rest)
		}
	}
	if _, err := Share(Zero(), Zero(), Zero(), 2); err == nil {
		t.Error("a share of a zero whole was computed")
	}
	if d, _ := Parse("3200"); d.Fixed(2) != "3200.00" || d.Places() != 0 {
		t.Errorf("Fixed: %s, Places %d", d.Fixed(2), d.Places())
	}
	if d, _ := Parse("0.10"); d.Places() != 2 {
		t.Errorf("Places(0.10) = %d", d.Places())
	}
}
