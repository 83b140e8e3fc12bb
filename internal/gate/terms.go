package gate

import (
	"errors"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/decimal"
	"github.com/partyd/party/internal/pattern"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/schema"
)

// The members an offer may disclose (canonical model §9): everything else,
// such as a budget ceiling, a weight or a reservation value, is private
// strategy that a closed shape keeps out (§13, A202-DISCLOSURE-DENIED).
var (
	offerMembers = setOf("offeror", "offeree", "session_id", "supersedes_offer_id",
		"valid_until", "terms", "evidence_refs")
	termsMembers = setOf("profile", "core", "profile_terms")
	coreMembers  = setOf("description", "quantity", "unit_code", "unit_name", "total")

	currencyPattern = pattern.MustCompile(`^[A-Z]{3}$`)
	unitCodePattern = pattern.MustCompile(`^[A-Z0-9]{2,3}$`)
)

func checkOffer(ps *problems, o, p map[string]any) {
	// canonical model §12: valid_until strictly after created_at. A value
	// that does not parse cannot be shown to follow creation.
	created, okc := timeAt(o, "created_at")
	until, oku := timeAt(p, "valid_until")
	if !okc || !oku || !until.After(created) {
		ps.add(reason.OfferExpired, "/payload/valid_until", "an offer's valid_until must be later than its created_at")
	}
	undisclosable(ps, "/payload", p, offerMembers, "an offer")
	if t, ok := member(p, "terms"); ok {
		checkTerms(ps, "/payload/terms", t)
	} else {
		ps.add("", "/payload/terms", "an offer carries complete terms")
	}
	if refs, ok := member(p, "evidence_refs"); ok {
		checkEvidenceRefs(ps, "/payload/evidence_refs", refs, false)
	}
}

func checkAgreement(ps *problems, p map[string]any) {
	t, ok := member(p, "terms")
	if !ok {
		ps.add("", "/payload/terms", "an agreement carries its terms")
		return
	}
	checkTerms(ps, "/payload/terms", t)
	// terms_hash is recomputed, never trusted (canonical model §10, §12).
	if declared, ok := strAt(p, "terms_hash"); ok {
		if h, err := canonical.Hash(t); err != nil || h != declared {
			ps.add(reason.AgreementHashMismatch, "/payload/terms_hash", "terms_hash is not the SHA-256 of the canonical terms")
		}
	}
}

// undisclosable refuses members outside allowed with A202-DISCLOSURE-DENIED.
func undisclosable(ps *problems, path string, m map[string]any, allowed map[string]bool, what string) {
	for _, k := range membersOutside(m, allowed) {
		ps.add(reason.DisclosureDenied, pointer(path, k), "%s carries no member %q: a closed shape keeps private data out of shared objects (canonical model §13)", what, k)
	}
}

// checkTerms checks a terms object: closed shape, money and quantity
// representation, and profile resolution (canonical model §7, §8).
func checkTerms(ps *problems, path string, v any) {
	t, ok := obj(v)
	if !ok {
		ps.add("", path, "terms is not an object")
		return
	}
	undisclosable(ps, path, t, termsMembers, "terms")
	core, ok := objAt(t, "core")
	if !ok {
		ps.add("", pointer(path, "core"), "terms carry a core object")
	} else {
		cp := pointer(path, "core")
		undisclosable(ps, cp, core, coreMembers, "core terms")
		checkQuantity(ps, pointer(cp, "quantity"), core["quantity"])
		if u, ok := strAt(core, "unit_code"); !ok || !unitCodePattern.MatchString(u) {
			ps.add(reason.TermsInvalid, pointer(cp, "unit_code"), "unit_code is not a UN/ECE Recommendation 20 code")
		}
		checkMoney(ps, pointer(cp, "total"), core["total"])
	}
	checkProfile(ps, path, t)
}

// checkProfile resolves terms.profile in the registered profile set and
// validates profile_terms against it. Nothing else in the kernel reads a
// profile's meaning (canonical model §8).
func checkProfile(ps *problems, path string, t map[string]any) {
	profile, ok := strAt(t, "profile")
	if !ok || !schema.ProfileKnown(profile) {
		ps.add(reason.ProfileUnknown, pointer(path, "profile"), "transaction profile %q does not resolve", profile)
		return
	}
	pt, ok := member(t, "profile_terms")
	if !ok {
		ps.add(reason.ProfileTermsInvalid, pointer(path, "profile_terms"), "terms carry no profile_terms")
		return
	}
	err := schema.ValidateProfileTerms(profile, pt)
	if err == nil {
		return
	}
	var ve *schema.ValidationError
	if !errors.As(err, &ve) {
		ps.add(reason.ProfileTermsInvalid, pointer(path, "profile_terms"), "profile terms do not validate: %v", err)
		return
	}
	for _, f := range ve.Failures {
		ps.add(reason.ProfileTermsInvalid, pointer(path, "profile_terms")+f.InstanceLocation,
			"profile %s: %s: %s", profile, f.Keyword, f.Message)
	}
}

// checkMoney enforces the money shape: a currency code and a base-10
// amount string, never a number, a sign or an exponent (canonical model §7).
func checkMoney(ps *problems, path string, v any) {
	m, ok := obj(v)
	if !ok {
		ps.add(reason.TermsInvalid, path, "money is an object {currency, amount}")
		return
	}
	if c, ok := strAt(m, "currency"); !ok || !currencyPattern.MatchString(c) {
		ps.add(reason.TermsInvalid, pointer(path, "currency"), "currency is not an ISO 4217 code")
	}
	switch a := m["amount"].(type) {
	case string:
		if !decimal.Valid(a) {
			ps.add(reason.TermsInvalid, pointer(path, "amount"), "amount %q is not a non-negative base-10 decimal string", a)
		}
	case nil:
		ps.add(reason.TermsInvalid, pointer(path, "amount"), "money carries an amount string")
	default:
		ps.add(reason.TermsInvalid, pointer(path, "amount"), "amount is a JSON number; A202 money is a decimal string")
	}
	for _, k := range sortedKeys(m) {
		if k != "currency" && k != "amount" {
			ps.add(reason.TermsInvalid, pointer(path, k), "money carries only currency and amount")
		}
	}
}

// checkQuantity enforces the quantity string: base-10, at most nine
// fraction digits (canonical model §7).
func checkQuantity(ps *problems, path string, v any) {
	s, ok := v.(string)
	if !ok {
		ps.add(reason.TermsInvalid, path, "a quantity is a decimal string")
		return
	}
	if _, err := decimal.ParseQuantity(s); err != nil {
		ps.add(reason.TermsInvalid, path, "quantity %q is not a base-10 decimal string with at most nine fraction digits", s)
	}
}
