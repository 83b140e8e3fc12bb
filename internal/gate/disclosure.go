package gate

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/partyd/party/internal/reason"
)

// Event data is references only (kernel transactionEventData,
// sessionEventData, sessionCloseData; A202-0013): each permitted member and
// the identifier prefix its value must carry, "#" for a content hash. An
// identifier cannot carry a rival's price, count or timing; free members
// could.
var (
	transactionData = map[string]string{
		"request_id": "req", "session_id": "ses", "invitation_id": "inv",
		"invitation_acceptance_id": "ina", "offer_id": "off", "acceptance_id": "acc",
		"agreement_id": "agr", "commitment_id": "cmt", "obligation_id": "obl",
		"performance_event_id": "prf", "obligation_response_id": "obr",
		"exception_id": "exc", "dispute_id": "dsp", "determination_id": "det",
		"approval_id": "apr", "settlement_instruction_id": "stl",
		"adapter_receipt_id": "adp", "termination_record_hash": "#",
		"remediation_hash": "#", "audit_bundle_hash": "#",
	}
	sessionData = map[string]string{
		"offer_id": "off", "supersedes_offer_id": "off", "acceptance_id": "acc",
		"clarification_id": "clr", "approval_id": "apr",
	}
	sessionCloseStates  = setOf("rejected", "withdrawn", "expired", "closed")
	sessionCloseReasons = setOf("not_selected", "withdrawn_by_offeror",
		"declined_by_offeree", "session_expired", "transaction_cancelled",
		"transaction_expired", "mandate_inactive", "qualification_failed")
)

// rivalWords are fragments of member names, and of free text, that speak
// about other participants or the aggregate state of a contest. The
// allowlist is the real protection; this second layer fails closed on its
// own if an allowlist is ever widened carelessly (canonical model §12).
var rivalWords = []string{"competing", "competitor", "rival", "other_bid",
	"bid_count", "bidder_count", "session_count", "participant_count",
	"winning", "best_price", "best_bid", "lowest_bid", "rank", "standing_bid"}

func checkEventData(ps *problems, kind string, p map[string]any) {
	data, ok := objAt(p, "data")
	if !ok {
		ps.add("", "/payload/data", "an event carries a data object")
		return
	}
	var allowed map[string]string
	to, _ := strAt(p, "to_state")
	switch {
	case kind == "transaction":
		allowed = transactionData
	case kind == "session" && sessionCloseStates[to]:
		for _, k := range sortedKeys(data) {
			if k != "close_reason" {
				ps.add(reason.DisclosurePolicyViolation, pointer("/payload/data", k), "a session-close event carries its close reason and nothing else")
			}
		}
		if r, _ := strAt(data, "close_reason"); !sessionCloseReasons[r] {
			ps.add(reason.DisclosurePolicyViolation, "/payload/data/close_reason", "close reason %q is not registered", r)
		}
	case kind == "session":
		allowed = sessionData
	}
	for _, k := range sortedKeys(data) {
		if allowed == nil {
			break
		}
		prefix, ok := allowed[k]
		path := pointer("/payload/data", k)
		if !ok {
			ps.add(reason.DisclosurePolicyViolation, path, "event data carries references only; %q is not one", k)
			continue
		}
		v := data[k]
		if prefix == "#" || (v == nil && k == "supersedes_offer_id") {
			continue // hash form is checked with every other hash
		}
		if s, _ := v.(string); !hasPrefixID(s, prefix) {
			ps.add(reason.DisclosurePolicyViolation, path, "%s is a %s_ identifier; any other value is content, not a reference", k, prefix)
		}
	}
	// Second layer: no member name anywhere in data speaks about rivals.
	for _, name := range memberNames(data) {
		if w := rivalWord(name); w != "" {
			ps.add(reason.DisclosurePolicyViolation, "/payload/data", "event data member %q speaks about other participants (%q)", name, w)
			break
		}
	}
}

// memberNames lists every member name under v, at any depth.
func memberNames(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				out = append(out, k)
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func rivalWord(s string) string {
	l := strings.ToLower(s)
	for i, w := range rivalWords {
		if strings.Contains(l, w) || strings.Contains(l, rivalPhrases[i]) {
			return w
		}
	}
	return ""
}

// rivalPhrases are rivalWords as free text writes them, with spaces for
// underscores, built once (every string of every event is searched).
var rivalPhrases = func() []string {
	out := make([]string, len(rivalWords))
	for i, w := range rivalWords {
		out[i] = strings.ReplaceAll(w, "_", " ")
	}
	return out
}()

var (
	// partyIDInText finds identifiers of parties and of their acts.
	partyIDInText = regexp.MustCompile(`\b(?:org|agt|prn|off|acc|agr)_[A-Za-z0-9][A-Za-z0-9_-]{2,127}`)
	// amountNearCode finds a number next to a three-letter code, on either
	// side; the code is then checked against currencyCodes, so that
	// "ISO/IEC 17025" is not read as a price.
	amountNearCode = regexp.MustCompile(`\b([A-Z]{3})\s?([0-9][0-9.,]*)|([0-9][0-9.,]*)\s?([A-Z]{3})\b`)
	// amountWithSign finds a number next to a currency sign, or any number
	// written with two decimals next to a three-letter code.
	amountWithSign = regexp.MustCompile(`[€$£¥]\s?[0-9]|[0-9]\s?[€$£¥]|\b[A-Z]{3}\s?[0-9]+[.,][0-9]{2}\b|\b[0-9]+[.,][0-9]{2}\s?[A-Z]{3}\b`)
)

// currencyCodes are the ISO 4217 codes most trade is written in. A price
// in a rarer currency is still caught when it is written with decimals.
var currencyCodes = setOf("EUR", "USD", "GBP", "JPY", "CHF", "CNY", "CAD",
	"AUD", "NZD", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "RON", "BGN",
	"TRY", "INR", "SGD", "HKD", "KRW", "BRL", "MXN", "ZAR", "AED", "SAR",
	"ILS", "TWD", "THB")

// moneyInText returns the first price-shaped token in text, or "".
func moneyInText(text string) string {
	for _, m := range amountNearCode.FindAllStringSubmatch(text, -1) {
		if currencyCodes[m[1]] || currencyCodes[m[4]] {
			return m[0]
		}
	}
	return amountWithSign.FindString(text)
}

// freeTextLeak reports why a free-text field would disclose data its
// reader may not hold: an identifier of someone other than the named
// parties, a price, or words about rivals. "" means nothing was found.
func freeTextLeak(text string, parties map[string]bool) string {
	for _, id := range partyIDInText.FindAllString(text, -1) {
		if !parties[id] {
			return "names " + id + ", who is not a party to it"
		}
	}
	if m := moneyInText(text); m != "" {
		return "states an amount (" + strings.TrimSpace(m) + ")"
	}
	if w := rivalWord(text); w != "" {
		return "speaks about other participants (" + w + ")"
	}
	return ""
}

// credentialParams are query parameter names that carry a credential.
var credentialParams = setOf("access_token", "token", "id_token", "refresh_token",
	"api_key", "apikey", "key", "secret", "client_secret", "password", "passwd",
	"pwd", "auth", "authorization", "bearer", "sig", "signature", "session",
	"sessionid", "credential", "x-amz-signature", "x-amz-credential",
	"x-amz-security-token", "code")

var (
	secretWords = regexp.MustCompile(`(?i)\b(bearer|authorization|api[_-]?key|access[_-]?token|secret|password)\b`)
	emailLike   = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
)

// locatorSecret reports why a locator hint carries a secret, credential or
// personal data (evidence verification §3.2), or "" if it does not. A hint
// is never load-bearing, so nothing legitimate needs any of these.
func locatorSecret(hint string) string {
	if u, err := url.Parse(hint); err == nil {
		if u.User != nil {
			return "carries user information in the URL"
		}
		for name := range u.Query() {
			if credentialParams[strings.ToLower(name)] {
				return "carries the credential parameter " + name
			}
		}
	}
	if secretWords.MatchString(hint) {
		return "names a credential"
	}
	if emailLike.MatchString(hint) {
		return "carries an e-mail address"
	}
	return ""
}
