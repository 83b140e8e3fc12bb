package ledger

import (
	"github.com/partyd/party/internal/decimal"
)

// Money is an amount in a currency, as the ledger reports it: the
// currency's ISO 4217 code and a base-10 amount string with the currency's
// minor unit of fraction digits (canonical model §7: a string, never a
// number).
type Money struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

// amount is an exact amount of one obligation's currency.
type amount = decimal.Decimal

// minorUnits are the ISO 4217 currencies whose minor unit is not two
// digits (ISO 4217, list one: the "minor unit" column). A currency not
// listed here and not in noMinorUnit has two.
var minorUnits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// noMinorUnit are the ISO 4217 codes whose minor unit is "N.A." (precious
// metals, units of account, the testing and no-currency codes).
var noMinorUnit = map[string]bool{
	"XAG": true, "XAU": true, "XBA": true, "XBB": true, "XBC": true, "XBD": true, "XDR": true,
	"XPD": true, "XPT": true, "XSU": true, "XTS": true, "XUA": true, "XXX": true,
}

// MinorUnit returns the number of fraction digits of a currency's minor
// unit (ISO 4217), and false for a code ISO 4217 gives none ("N.A.").
// An unlisted three-letter code is read as a currency with two, the
// common case.
func MinorUnit(currency string) (int, bool) {
	if noMinorUnit[currency] {
		return 0, false
	}
	if n, ok := minorUnits[currency]; ok {
		return n, true
	}
	return 2, true
}

// places is how many fraction digits amounts of a consideration are kept
// to: the currency's minor unit, or, for a code without one, as many as
// the consideration is written with (so that a share and the rest still
// add up to it exactly). Never fewer than the consideration carries: an
// amount written more finely than the minor unit is kept as written.
func places(currency string, written amount) int {
	n, ok := MinorUnit(currency)
	if !ok || written.Places() > n {
		return written.Places()
	}
	return n
}

// money formats an amount of a currency to p fraction digits.
func money(currency string, a amount, p int) Money {
	return Money{Currency: currency, Amount: a.Fixed(p)}
}
