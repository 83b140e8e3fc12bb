package schema

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/partyd/party/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Documents of our own, written for these tests (not fixture copies). Each
// helper decodes afresh so tests can mutate freely.

const offerJSON = `{
  "spec_version": "a202-commercial/0.1",
  "id": "off_test_0001",
  "object_type": "offer",
  "version": 1,
  "created_at": "2026-08-20T09:00:00Z",
  "created_by": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales", "mandate_id": "mnd_alpha_root"},
  "transaction_id": "txn_test_0001",
  "previous_version_id": null,
  "content_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
  "signatures": [{
    "key_id": "key_alpha_sales_1",
    "algorithm": "EdDSA",
    "signature": "c2lnbmF0dXJlLWJ5dGVzLWhlcmU",
    "signed_at": "2026-08-20T09:00:01Z",
    "purpose": "offer_submission"
  }],
  "payload": {
    "offeror": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales"},
    "offeree": {"organization_id": "org_beta", "agent_id": "agt_beta_buyer"},
    "session_id": "ses_test_0001",
    "supersedes_offer_id": null,
    "valid_until": "2026-08-27T09:00:00Z",
    "terms": {
      "profile": "a202-profile/calibration-service/0.1",
      "core": {
        "description": "Calibration of 4 flow meters",
        "quantity": "4",
        "unit_code": "H87",
        "unit_name": "piece",
        "total": {"currency": "EUR", "amount": "3200.00"}
      },
      "profile_terms": {
        "completion": {"business_days_after_collection": 10, "business_calendar": "DE"},
        "payment": {"prepayment_percent": "30", "balance_trigger": "buyer_acceptance"},
        "acceptance": {"certificate_required": true, "machine_readable_result_required": false, "qualification_standard": "ISO/IEC 17025:2017"},
        "rework": {"included_attempts": 1}
      }
    },
    "evidence_refs": [
      "evd_alpha_accreditation",
      {
        "evidence_id": "evd_alpha_insurance",
        "content_hash": "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
        "evidence_type": "signed_document",
        "locator_hint": null,
        "signed_by": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales"}
      }
    ]
  }
}`

const mandateJSON = `{
  "spec_version": "a202-mandate/0.1",
  "id": "mnd_alpha_root",
  "issuer": {"organization_id": "org_alpha", "principal_id": "prn_alpha_cfo", "key_id": "key_alpha_cfo_1"},
  "subject": {"agent_id": "agt_alpha_sales", "key_id": "key_alpha_sales_1"},
  "represented_organization_id": "org_alpha",
  "parent_mandate_id": null,
  "valid_from": "2026-08-01T00:00:00Z",
  "valid_until": "2026-09-01T00:00:00Z",
  "status_endpoint": "https://status.alpha.invalid/mandates/mnd_alpha_root",
  "actions": ["offer.submit", "agreement.sign"],
  "scope": {"categories": ["services.calibration"], "geographies": ["DE"]},
  "constraints": [{
    "id": "max_total",
    "type": "commercial.decimal",
    "path": "$.proposed_terms.core.total.amount",
    "operator": "maximum",
    "value": "5000.00",
    "on_failure": "deny"
  }],
  "approval_rules": [],
  "delegation": {"allowed": false, "maximum_depth": 0},
  "evidence_refs": [],
  "proof": {"key_id": "key_alpha_cfo_1", "algorithm": "ES256", "created_at": "2026-08-01T00:00:00Z", "purpose": "mandate_issuance", "signature": "c2lnbmF0dXJlLWJ5dGVzLWhlcmU"}
}`

const gradeJSON = `{
  "spec_version": "a202-commercial/0.1",
  "subject": {"organization_id": "org_alpha", "implementation": "party 0.1"},
  "level": "peer_assessed",
  "dimensions": {
    "A": {"band": 1, "established_from": ["mandate", "delegation-chain"]},
    "B": null, "C": null, "D": null, "E": null
  },
  "scope": {"role_scopes": ["a202-scope/bilateral/0.1"], "profiles": ["a202-profile/calibration-service/0.1"], "transports": ["https://a2a.invalid/ext"]},
  "held_out_coverage": null,
  "issued_at": "2026-08-20T00:00:00Z",
  "expires_at": "2027-08-20T00:00:00Z",
  "status": "active",
  "determination_ref": {"determination_id": "det_grade_0001", "determination_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
  "signature": {"key_id": "key_beta_assessor", "algorithm": "ES256", "signature": "c2lnbmF0dXJlLWJ5dGVzLWhlcmU", "signed_at": "2026-08-20T00:00:00Z", "purpose": "grade_issuance"}
}`

func decode(t testing.TB, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatalf("test document does not parse: %v", err)
	}
	return v
}

// setAt replaces the value at an RFC 6901 pointer whose parent exists;
// a nil-able "delete" is expressed with del.
func setAt(t testing.TB, doc any, ptr string, val any) {
	t.Helper()
	parent, last := walk(t, doc, ptr)
	switch p := parent.(type) {
	case map[string]any:
		p[last] = val
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i >= len(p) {
			t.Fatalf("bad index %q in %s", last, ptr)
		}
		p[i] = val
	default:
		t.Fatalf("cannot set %s", ptr)
	}
}

func del(t testing.TB, doc any, ptr string) {
	t.Helper()
	parent, last := walk(t, doc, ptr)
	m, ok := parent.(map[string]any)
	if !ok {
		t.Fatalf("cannot delete %s", ptr)
	}
	delete(m, last)
}

func walk(t testing.TB, doc any, ptr string) (any, string) {
	t.Helper()
	toks := strings.Split(ptr, "/")[1:]
	cur := doc
	for _, tok := range toks[:len(toks)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, _ := strconv.Atoi(tok)
			cur = c[i]
		default:
			t.Fatalf("pointer %s runs through a scalar", ptr)
		}
	}
	return cur, toks[len(toks)-1]
}

// mustRefuse asserts err is a *ValidationError with a failure at loc (and,
// when keyword is non-empty, with that keyword) and returns it.
func mustRefuse(t testing.TB, err error, loc, keyword string) *ValidationError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError at %s, got %v", loc, err)
	}
	for _, f := range ve.Failures {
		if f.InstanceLocation == loc && (keyword == "" || f.Keyword == keyword) {
			return ve
		}
	}
	t.Fatalf("want a %q failure at %q, got %v", keyword, loc, ve.Failures)
	return nil
}

func mustAccept(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("want valid, got %v", err)
	}
}

func TestEmbeddedSchemasCompile(t *testing.T) {
	s, err := compileSet(schemas.FS)
	if err != nil {
		t.Fatalf("embedded schemas: %v", err)
	}
	if s.envelope == nil || s.mandate == nil || s.grade == nil {
		t.Fatal("a document root was not compiled")
	}
	want := []string{"a202-profile/calibration-service/0.1", "a202-profile/freight-spot/0.1"}
	if got := Profiles(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Profiles() = %v, want %v", got, want)
	}
}

func TestCompiledOnce(t *testing.T) {
	first := compiled()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if compiled() != first {
				t.Error("schemas compiled more than once")
			}
			_ = ValidateEnvelope(decode(t, offerJSON))
		}()
	}
	wg.Wait()
}

// brokenFS copies the embedded schemas and overwrites one file.
func brokenFS(t *testing.T, name, content string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(schemas.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schemas.FS, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	m[name] = &fstest.MapFile{Data: []byte(content)}
	return m
}

func TestBrokenEmbeddedSchemasPanic(t *testing.T) {
	cases := map[string]struct{ name, content string }{
		"not json":     {"common.schema.json", `{`},
		"wrong $id":    {"revocation.schema.json", `{"$id": "https://party.invalid/schemas/other.schema.json"}`},
		"dangling ref": {"revocation.schema.json", `{"$id": "https://party.invalid/schemas/revocation.schema.json", "$ref": "common.schema.json#/$defs/nope"}`},
		"bad keyword":  {"revocation.schema.json", `{"$id": "https://party.invalid/schemas/revocation.schema.json", "minLength": "three"}`},
		"profile id mismatch": {"profiles/freight-spot-0.1.schema.json",
			`{"$id": "https://party.invalid/schemas/profiles/freight-spot-0.1.schema.json", "x-a202-profile": "a202-profile/freight-spot/0.2"}`},
		"profile without id": {"profiles/freight-spot-0.1.schema.json",
			`{"$id": "https://party.invalid/schemas/profiles/freight-spot-0.1.schema.json"}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := brokenFS(t, c.name, c.content)
			if _, err := compileSet(fsys); err == nil {
				t.Fatal("compileSet accepted a broken schema set")
			}
			defer func() {
				if recover() == nil {
					t.Fatal("mustCompile did not panic on a broken schema set")
				}
			}()
			mustCompile(fsys)
		})
	}
}

func TestOfferAccepted(t *testing.T) {
	mustAccept(t, ValidateEnvelope(decode(t, offerJSON)))
}

func TestMoneyAmount(t *testing.T) {
	const loc = "/payload/terms/core/total/amount"
	for _, ok := range []string{"3200.00", "0", "0.5", "1", "12345678901234567890.123456789012345678"} {
		doc := decode(t, offerJSON)
		setAt(t, doc, loc, ok)
		if err := ValidateEnvelope(doc); err != nil {
			t.Errorf("amount %q refused: %v", ok, err)
		}
	}
	for _, bad := range []any{"-1", "1e3", "+5", "03200.00", "3200.", ".5", "3,200.00", "", "1.1234567890123456789", json.Number("3200.0"), json.Number("3200"), nil} {
		doc := decode(t, offerJSON)
		setAt(t, doc, loc, bad)
		mustRefuse(t, ValidateEnvelope(doc), loc, "")
	}
	doc := decode(t, offerJSON)
	setAt(t, doc, "/payload/terms/core/total/currency", "eur")
	mustRefuse(t, ValidateEnvelope(doc), "/payload/terms/core/total/currency", "pattern")
}

func TestQuantity(t *testing.T) {
	const loc = "/payload/terms/core/quantity"
	doc := decode(t, offerJSON)
	setAt(t, doc, loc, "2.123456789")
	mustAccept(t, ValidateEnvelope(doc))
	for _, bad := range []any{"2.1234567890", "-2", json.Number("4")} {
		doc := decode(t, offerJSON)
		setAt(t, doc, loc, bad)
		mustRefuse(t, ValidateEnvelope(doc), loc, "")
	}
}

func TestIdentifierPrefixMustMatchType(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/id", "acc_test_0001")
	ve := mustRefuse(t, ValidateEnvelope(doc), "/id", "pattern")
	if !strings.HasSuffix(ve.Failures[0].SchemaLocation, "common.schema.json#/$defs/off_id/pattern") {
		t.Errorf("prefix failure should name the offer identifier definition, got %s", ve.Failures[0].SchemaLocation)
	}
	for _, bad := range []string{"off_x", "OFF_test_0001", "off-test_0001", "off__abc"} {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/id", bad)
		mustRefuse(t, ValidateEnvelope(doc), "/id", "pattern")
	}
}

func TestUnknownPayloadMemberRefused(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/payload/reservation_price", map[string]any{"currency": "EUR", "amount": "2500.00"})
	ve := mustRefuse(t, ValidateEnvelope(doc), "/payload", "additionalProperties")
	if len(ve.Under("/payload")) != len(ve.Failures) {
		t.Errorf("Under(/payload) lost failures: %v", ve.Failures)
	}
	// Unknown top-level members are refused too (CCM §14), e.g. carrier ids.
	doc = decode(t, offerJSON)
	setAt(t, doc, "/a2a_task_id", "task-1")
	mustRefuse(t, ValidateEnvelope(doc), "", "additionalProperties")
}

func TestContentHashFormat(t *testing.T) {
	for _, bad := range []string{
		strings.ToUpper("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
		"uEiB0123456789abcdef0123456789abcdef0123456789ab",
		"0123456789abcdef",
	} {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/content_hash", bad)
		ve := mustRefuse(t, ValidateEnvelope(doc), "/content_hash", "pattern")
		if !strings.HasSuffix(ve.Failures[0].SchemaLocation, "common.schema.json#/$defs/sha256_hex/pattern") {
			t.Errorf("hash failure location %s does not name sha256_hex", ve.Failures[0].SchemaLocation)
		}
	}
}

func TestTimestamps(t *testing.T) {
	// created_at must be UTC with Z (CCM §3 table).
	for _, bad := range []string{"2026-08-20T11:00:00+02:00", "2026-08-20 09:00:00Z", "2026-02-30T09:00:00Z", "2026-08-20T25:00:00Z", "2026-08-20"} {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/created_at", bad)
		mustRefuse(t, ValidateEnvelope(doc), "/created_at", "")
	}
	doc := decode(t, offerJSON)
	setAt(t, doc, "/created_at", "2026-08-20T09:00:00.123Z")
	mustAccept(t, ValidateEnvelope(doc))
	// Other instants carry any explicit zone, as the published kernel allows.
	doc = decode(t, offerJSON)
	setAt(t, doc, "/payload/valid_until", "2026-08-27T11:00:00+02:00")
	mustAccept(t, ValidateEnvelope(doc))
	doc = decode(t, offerJSON)
	setAt(t, doc, "/payload/valid_until", "2026-08-27T11:00:00")
	mustRefuse(t, ValidateEnvelope(doc), "/payload/valid_until", "")
}

func TestVersionChain(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/previous_version_id", "off_test_0000")
	mustRefuse(t, ValidateEnvelope(doc), "/previous_version_id", "type")

	doc = decode(t, offerJSON)
	setAt(t, doc, "/version", json.Number("2"))
	mustRefuse(t, ValidateEnvelope(doc), "/previous_version_id", "type")

	doc = decode(t, offerJSON)
	setAt(t, doc, "/version", json.Number("2"))
	setAt(t, doc, "/previous_version_id", "off_test_0000")
	mustAccept(t, ValidateEnvelope(doc))

	// A later version of an offer is an offer.
	setAt(t, doc, "/previous_version_id", "acc_test_0000")
	mustRefuse(t, ValidateEnvelope(doc), "/previous_version_id", "pattern")

	doc = decode(t, offerJSON)
	setAt(t, doc, "/version", json.Number("0"))
	mustRefuse(t, ValidateEnvelope(doc), "/version", "minimum")
}

func TestTransactionBinding(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/transaction_id", nil)
	mustRefuse(t, ValidateEnvelope(doc), "/transaction_id", "type")

	// An organization is not transaction-bound.
	org := decode(t, `{
	  "spec_version": "a202-commercial/0.1", "id": "org_alpha", "object_type": "organization", "version": 1,
	  "created_at": "2026-08-01T00:00:00Z",
	  "created_by": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales", "mandate_id": "mnd_alpha_root"},
	  "transaction_id": null, "previous_version_id": null,
	  "content_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	  "signatures": [{"key_id": "key_alpha_cfo_1", "algorithm": "ES256", "signature": "c2lnbmF0dXJlLWJ5dGVzLWhlcmU", "signed_at": "2026-08-01T00:00:00Z", "purpose": "object_issuance"}],
	  "payload": {"legal_name": "Alpha Instruments GmbH", "jurisdiction": "DE", "registry_identifiers": [{"scheme": "lei", "value": "5299000ALPHA000000001"}], "status": "active", "identity_evidence_refs": []}
	}`)
	mustAccept(t, ValidateEnvelope(org))
	setAt(t, org, "/payload/assurance", "entity_bound")
	mustRefuse(t, ValidateEnvelope(org), "/payload", "additionalProperties")
}

func TestSignatures(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/signatures", []any{})
	mustRefuse(t, ValidateEnvelope(doc), "/signatures", "minItems")

	doc = decode(t, offerJSON)
	setAt(t, doc, "/signatures/0/algorithm", "RS256")
	mustRefuse(t, ValidateEnvelope(doc), "/signatures/0/algorithm", "enum")

	// An agreement needs both parties' signatures (CCM §10 step 7).
	doc = decode(t, offerJSON)
	setAt(t, doc, "/object_type", "agreement")
	setAt(t, doc, "/id", "agr_test_0001")
	setAt(t, doc, "/payload", map[string]any{})
	mustRefuse(t, ValidateEnvelope(doc), "/signatures", "minItems")
}

func TestActionEnvelopeAnnotationsForbidden(t *testing.T) {
	doc := decode(t, `{
	  "spec_version": "a202-commercial/0.1", "id": "act_test_0001", "object_type": "action_envelope", "version": 1,
	  "created_at": "2026-08-20T08:59:00Z",
	  "created_by": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales", "mandate_id": "mnd_alpha_root"},
	  "transaction_id": "txn_test_0001", "previous_version_id": null,
	  "content_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	  "signatures": [{"key_id": "key_alpha_sales_1", "algorithm": "EdDSA", "signature": "c2lnbmF0dXJlLWJ5dGVzLWhlcmU", "signed_at": "2026-08-20T08:59:00Z", "purpose": "action_submission"}],
	  "payload": {"action_type": "offer.submit", "expected_sequence": 0, "session_id": "ses_test_0001", "idempotency_key": "idem-0001-offer", "proposed_object": {}}
	}`)
	mustAccept(t, ValidateEnvelope(doc))
	setAt(t, doc, "/kernel_annotations", map[string]any{
		"policy_decision_id": "pol_test_0001", "session_id": nil,
		"session_sequence": json.Number("1"), "received_at": "2026-08-20T08:59:01Z",
	})
	ve := mustRefuse(t, ValidateEnvelope(doc), "/kernel_annotations", "false")
	if len(ve.Failures) != 1 {
		t.Errorf("want exactly the annotation failure, got %v", ve.Failures)
	}
}

func TestMandateInEnvelopeFormRefused(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/object_type", "commercial_mandate")
	setAt(t, doc, "/id", "mnd_alpha_root")
	mustRefuse(t, ValidateEnvelope(doc), "/object_type", "enum")
	// And an envelope is not a mandate.
	mustRefuse(t, ValidateMandate(decode(t, offerJSON)), "", "additionalProperties")
}

func TestDeferredTypesAreEnvelopeOnly(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/object_type", "exception")
	setAt(t, doc, "/id", "exc_test_0001")
	setAt(t, doc, "/payload", map[string]any{"anything": "goes until a proposal defines it"})
	mustAccept(t, ValidateEnvelope(doc))
	setAt(t, doc, "/id", "xyz_test_0001")
	mustRefuse(t, ValidateEnvelope(doc), "/id", "pattern")
}

func TestProfileTerms(t *testing.T) {
	terms := func() map[string]any {
		return decode(t, offerJSON).(map[string]any)["payload"].(map[string]any)["terms"].(map[string]any)
	}
	mustAccept(t, ValidateTerms(terms()))
	for _, ok := range []string{"0", "100", "100.0", "99.99", "7.5"} {
		tm := terms()
		setAt(t, tm, "/profile_terms/payment/prepayment_percent", ok)
		if err := ValidateTerms(tm); err != nil {
			t.Errorf("percent %q refused: %v", ok, err)
		}
	}
	for _, bad := range []any{"100.5", "101", "-1", "1e2", json.Number("30")} {
		tm := terms()
		setAt(t, tm, "/profile_terms/payment/prepayment_percent", bad)
		ve := mustRefuse(t, ValidateTerms(tm), "/payment/prepayment_percent", "")
		if ve.Kind != KindProfileTerms || ve.Profile != "a202-profile/calibration-service/0.1" {
			t.Errorf("error names %s %q", ve.Kind, ve.Profile)
		}
		if errors.Is(ve, ErrUnknownProfile) {
			t.Error("invalid terms reported as an unknown profile")
		}
	}
	tm := terms()
	del(t, tm, "/profile_terms/completion/business_calendar")
	mustRefuse(t, ValidateTerms(tm), "/completion", "required")

	// The kernel keeps profile_terms opaque: an envelope with bad profile
	// terms is still a valid envelope (CCM §8 rule 3).
	doc := decode(t, offerJSON)
	setAt(t, doc, "/payload/terms/profile_terms/payment/prepayment_percent", "150")
	mustAccept(t, ValidateEnvelope(doc))

	// Unknown profile: distinguishable from invalid terms.
	tm = terms()
	tm["profile"] = "a202-profile/calibration-service/0.2"
	err := ValidateTerms(tm)
	if !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("want ErrUnknownProfile, got %v", err)
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		t.Fatal("an unknown profile must not be a *ValidationError")
	}
	if ProfileKnown("a202-profile/calibration-service/0.2") || !ProfileKnown("a202-profile/freight-spot/0.1") {
		t.Fatal("ProfileKnown disagrees with the registry")
	}
	if !errors.Is(ValidateProfileTerms("a202-profile/nope/0.1", map[string]any{}), ErrUnknownProfile) {
		t.Fatal("ValidateProfileTerms did not report an unknown profile")
	}

	// The freight profile, with a zoned collection window.
	freight := decode(t, `{
	  "lane": {"origin_country": "DE", "destination_country": "PL"},
	  "collection_window": {"earliest": "2026-09-01T08:00:00+02:00", "latest": "2026-09-01T16:00:00+02:00", "time_zone": "Europe/Berlin"},
	  "equipment": "curtainsider",
	  "liability": {"regime": "CMR", "cap": {"currency": "EUR", "amount": "25000.00"}}
	}`)
	mustAccept(t, ValidateProfileTerms("a202-profile/freight-spot/0.1", freight))
	setAt(t, freight, "/liability/cap/amount", json.Number("25000"))
	mustRefuse(t, ValidateProfileTerms("a202-profile/freight-spot/0.1", freight), "/liability/cap/amount", "type")

	// Malformed terms objects are shape errors, not profile errors.
	if err := ValidateTerms(map[string]any{}); !errors.As(err, &ve) {
		t.Fatalf("terms without profile: want *ValidationError, got %v", err)
	}
}

func TestMandate(t *testing.T) {
	mustAccept(t, ValidateMandate(decode(t, mandateJSON)))

	doc := decode(t, mandateJSON)
	setAt(t, doc, "/subject/principal_id", "prn_alpha_buyer")
	mustRefuse(t, ValidateMandate(doc), "/subject", "oneOf")

	doc = decode(t, mandateJSON)
	del(t, doc, "/subject/agent_id")
	mustRefuse(t, ValidateMandate(doc), "/subject", "required")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/status_endpoint", "http://status.alpha.invalid/m")
	mustRefuse(t, ValidateMandate(doc), "/status_endpoint", "pattern")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/constraints", []any{})
	mustRefuse(t, ValidateMandate(doc), "/constraints", "minItems")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/scope", map[string]any{"geographies": []any{"DE"}})
	mustRefuse(t, ValidateMandate(doc), "/scope", "required")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/delegation/maximum_depth", json.Number("2"))
	mustRefuse(t, ValidateMandate(doc), "/delegation/maximum_depth", "const")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/delegation", map[string]any{"allowed": true, "maximum_depth": json.Number("0")})
	mustRefuse(t, ValidateMandate(doc), "/delegation/maximum_depth", "minimum")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/constraints/0/operator", "roughly")
	mustRefuse(t, ValidateMandate(doc), "/constraints/0/operator", "enum")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/constraints/0/type", "commercial.vibes")
	mustRefuse(t, ValidateMandate(doc), "/constraints/0/type", "enum")

	doc = decode(t, mandateJSON)
	setAt(t, doc, "/proof/purpose", "object_issuance")
	mustRefuse(t, ValidateMandate(doc), "/proof/purpose", "const")
}

func TestGrade(t *testing.T) {
	mustAccept(t, ValidateGrade(decode(t, gradeJSON)))

	// Zero or two role scopes are the gate's refusals (RSC §3.2), so the
	// shape lets them through.
	doc := decode(t, gradeJSON)
	setAt(t, doc, "/scope/role_scopes", []any{"a202-scope/bilateral/0.1", "a202-scope/operated/0.1"})
	mustAccept(t, ValidateGrade(doc))
	doc = decode(t, gradeJSON)
	del(t, doc, "/scope/role_scopes")
	mustAccept(t, ValidateGrade(doc))

	doc = decode(t, gradeJSON)
	del(t, doc, "/dimensions/E")
	mustRefuse(t, ValidateGrade(doc), "/dimensions", "required")

	doc = decode(t, gradeJSON)
	setAt(t, doc, "/dimensions/A/band", json.Number("4"))
	mustRefuse(t, ValidateGrade(doc), "/dimensions/A/band", "maximum")

	doc = decode(t, gradeJSON)
	setAt(t, doc, "/composite_score", json.Number("87"))
	mustRefuse(t, ValidateGrade(doc), "", "additionalProperties")
}

// obligation returns an offer document turned into a minimal obligation.
func obligation(t *testing.T, dueCondition string) any {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/object_type", "obligation")
	setAt(t, doc, "/id", "obl_test_0001")
	setAt(t, doc, "/payload", decode(t, `{
	  "agreement_id": "agr_test_0001", "commitment_id": "cmt_test_0001",
	  "obligor": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales"},
	  "obligee": {"organization_id": "org_beta", "agent_id": "agt_beta_buyer"},
	  "subject": {"agreement_id": "agr_test_0001", "terms_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "profile": "a202-profile/calibration-service/0.1", "term_path": "$.terms.core.quantity"},
	  "due_condition": `+dueCondition+`,
	  "quantity": "4", "unit_code": "H87", "consideration": null, "state": "pending"
	}`))
	return doc
}

func TestDueConditions(t *testing.T) {
	for _, ok := range []string{
		`{"type": "due_at_time", "at": "2026-09-01T00:00:00Z"}`,
		`{"type": "due_at_time", "business_days": {"days": 10, "calendar": "DE"}}`,
		`{"type": "due_on_event", "evidence_type": "delivery_confirmation"}`,
		`{"type": "due_on_discharge", "obligation_id": "obl_test_0000"}`,
		`{"type": "all_of", "conditions": [{"type": "due_on_discharge", "obligation_id": "obl_test_0000"}, {"type": "due_at_time", "at": "2026-09-01T00:00:00Z"}]}`,
	} {
		if err := ValidateEnvelope(obligation(t, ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, c := range []struct{ cond, loc string }{
		{`{"type": "due_at_time", "business_days": {"days": 10}}`, "/payload/due_condition/business_days"},
		{`{"type": "due_at_time", "at": "2026-09-01T00:00:00Z", "business_days": {"days": 1, "calendar": "DE"}}`, "/payload/due_condition"},
		{`{"type": "due_on_event", "evidence_type": "gut_feeling"}`, "/payload/due_condition/evidence_type"},
		{`{"type": "due_at_time", "obligation_id": "obl_test_0000", "at": "2026-09-01T00:00:00Z"}`, "/payload/due_condition"},
		{`{"type": "any_of", "conditions": []}`, "/payload/due_condition/type"},
		{`{"type": "all_of", "conditions": [{"type": "all_of", "conditions": []}, {"type": "due_at_time", "at": "2026-09-01T00:00:00Z"}]}`, "/payload/due_condition/conditions/0/type"},
		{`{"type": "all_of", "conditions": [{"type": "due_at_time", "at": "2026-09-01T00:00:00Z"}]}`, "/payload/due_condition/conditions"},
	} {
		mustRefuse(t, ValidateEnvelope(obligation(t, c.cond)), c.loc, "")
	}
	doc := obligation(t, `{"type": "due_at_time", "at": "2026-09-01T00:00:00Z"}`)
	setAt(t, doc, "/payload/consideration", map[string]any{"currency": "EUR", "amount": "-10.00"})
	mustRefuse(t, ValidateEnvelope(doc), "/payload/consideration/amount", "pattern")
}

func TestObligationResponseShapes(t *testing.T) {
	resp := func(payload string) any {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/object_type", "obligation_response")
		setAt(t, doc, "/id", "obr_test_0001")
		setAt(t, doc, "/payload", decode(t, payload))
		return doc
	}
	const h = `"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`
	mustAccept(t, ValidateEnvelope(resp(`{"obligation_id": "obl_test_0001", "response_type": "waive"}`)))
	mustAccept(t, ValidateEnvelope(resp(`{"obligation_id": "obl_test_0001", "response_type": "accept", "assertion_id": "prf_test_0001", "assertion_hash": `+h+`, "accepted_quantity": "3", "remainder_obligation_id": "obl_test_0002"}`)))
	mustRefuse(t, ValidateEnvelope(resp(`{"obligation_id": "obl_test_0001", "response_type": "waive", "assertion_id": "prf_test_0001"}`)), "/payload/assertion_id", "false")
	mustRefuse(t, ValidateEnvelope(resp(`{"obligation_id": "obl_test_0001", "response_type": "reject", "assertion_id": "prf_test_0001", "assertion_hash": `+h+`}`)), "/payload", "required")
	mustRefuse(t, ValidateEnvelope(resp(`{"obligation_id": "obl_test_0001", "response_type": "reject", "assertion_id": "prf_test_0001", "assertion_hash": `+h+`, "reason_code": "quantity_short", "remainder_obligation_id": "obl_test_0002"}`)), "/payload/remainder_obligation_id", "false")
	mustRefuse(t, ValidateEnvelope(resp(`{"obligation_id": "obl_test_0001", "response_type": "accept", "assertion_id": "prf_test_0001", "assertion_hash": `+h+`, "accepted_quantity": "3", "quantity": "3"}`)), "/payload", "additionalProperties")
}

func TestDisputeGrounds(t *testing.T) {
	dispute := func(subjectType, ground string) any {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/object_type", "dispute")
		setAt(t, doc, "/id", "dsp_test_0001")
		setAt(t, doc, "/payload", decode(t, `{
		  "raising_party": {"organization_id": "org_beta", "agent_id": "agt_beta_buyer"},
		  "respondent_party": {"organization_id": "org_alpha", "agent_id": "agt_alpha_sales"},
		  "subject_type": "`+subjectType+`",
		  "subject_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		  "subject_id": "off_test_0001",
		  "grounds": ["`+ground+`"],
		  "evidence_refs": [{"evidence_id": "evd_beta_inspection", "content_hash": "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", "evidence_type": "inspection_result", "signed_by": {"organization_id": "org_beta", "agent_id": "agt_beta_buyer"}}],
		  "rules_ref": {"rule_set_id": "a202-rules/pilot", "version": "1.3", "rules_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
		}`))
		return doc
	}
	mustAccept(t, ValidateEnvelope(dispute("act", "authority_exceeded")))
	mustAccept(t, ValidateEnvelope(dispute("determination", "wrong_scope")))
	// DET §3.5: appeal-only grounds are not grounds of an ordinary dispute.
	mustRefuse(t, ValidateEnvelope(dispute("act", "wrong_scope")), "/payload/grounds/0", "enum")
	mustRefuse(t, ValidateEnvelope(dispute("determination", "authority_exceeded")), "/payload/grounds/0", "enum")
	mustRefuse(t, ValidateEnvelope(dispute("act", "vibes")), "/payload/grounds/0", "enum")
	// Evidence on a dispute is full form only (EVV §3.3 rule 1).
	doc := dispute("act", "authority_exceeded")
	setAt(t, doc, "/payload/evidence_refs/0", "evd_beta_inspection")
	mustRefuse(t, ValidateEnvelope(doc), "/payload/evidence_refs/0", "type")
}

func TestTransactionEventData(t *testing.T) {
	event := func(kind, streamID, toState string, data string) any {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/object_type", "transaction_event")
		setAt(t, doc, "/id", "evt_test_0001")
		setAt(t, doc, "/payload", decode(t, `{
		  "stream": {"kind": "`+kind+`", "id": "`+streamID+`"},
		  "sequence": 1, "event_type": "agreement.direct", "occurred_at": "2026-08-20T10:00:00Z",
		  "previous_event_hash": null,
		  "action_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		  "policy_decision_id": "pol_test_0001", "from_state": "draft", "to_state": "`+toState+`",
		  "data": `+data+`
		}`))
		return doc
	}
	mustAccept(t, ValidateEnvelope(event("transaction", "txn_test_0001", "agreement_pending", `{"offer_id": "off_test_0001", "acceptance_id": "acc_test_0001"}`)))
	mustRefuse(t, ValidateEnvelope(event("transaction", "txn_test_0001", "agreement_pending", `{"note": "three others bid"}`)), "/payload/data", "additionalProperties")
	mustRefuse(t, ValidateEnvelope(event("transaction", "txn_test_0001", "agreement_pending", `{"offer_id": "zzz_rival_price_2999"}`)), "/payload/data/offer_id", "pattern")
	mustRefuse(t, ValidateEnvelope(event("transaction", "ses_test_0001", "agreement_pending", `{}`)), "/payload/stream/id", "pattern")
	mustRefuse(t, ValidateEnvelope(event("auction", "txn_test_0001", "agreement_pending", `{}`)), "/payload/stream/kind", "enum")
	mustAccept(t, ValidateEnvelope(event("session", "ses_test_0001", "closed", `{"close_reason": "declined_by_offeree"}`)))
	mustRefuse(t, ValidateEnvelope(event("session", "ses_test_0001", "closed", `{}`)), "/payload/data", "required")
}

func TestPolicyDenyStaysPrivate(t *testing.T) {
	decision := func(decision, visibility, kind string) any {
		doc := decode(t, offerJSON)
		setAt(t, doc, "/object_type", "policy_decision")
		setAt(t, doc, "/id", "pol_test_0001")
		setAt(t, doc, "/payload", decode(t, `{
		  "action_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		  "decision": "`+decision+`", "reason_codes": [], "evaluated_at": "2026-08-20T09:00:00Z",
		  "mandate_ids": ["mnd_alpha_root"], "stream": {"kind": "`+kind+`", "id": "prv_alpha"},
		  "stream_sequence": 0, "visibility": "`+visibility+`"
		}`))
		return doc
	}
	mustAccept(t, ValidateEnvelope(decision("deny", "private_to_actor", "private")))
	mustAccept(t, ValidateEnvelope(decision("allow", "transaction_parties", "transaction")))
	mustRefuse(t, ValidateEnvelope(decision("deny", "transaction_parties", "private")), "/payload/visibility", "enum")
	mustRefuse(t, ValidateEnvelope(decision("deny", "private_to_actor", "transaction")), "/payload/stream/kind", "const")
}

func TestKeyRecordPublicOnly(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/object_type", "key_record")
	setAt(t, doc, "/id", "key_alpha_sales_1")
	setAt(t, doc, "/transaction_id", nil)
	x := strings.Repeat("A", 43)
	setAt(t, doc, "/payload", map[string]any{
		"controller_organization_id": "org_alpha", "algorithm": "EdDSA",
		"public_key_jwk": map[string]any{"kty": "OKP", "crv": "Ed25519", "x": x},
		"status":         "active", "valid_from": "2026-08-01T00:00:00Z", "valid_until": nil,
	})
	mustAccept(t, ValidateEnvelope(doc))
	setAt(t, doc, "/payload/public_key_jwk/d", x)
	mustRefuse(t, ValidateEnvelope(doc), "/payload/public_key_jwk", "additionalProperties")
	setAt(t, doc, "/payload/public_key_jwk", map[string]any{"kty": "EC", "crv": "P-256", "x": x, "y": x})
	mustAccept(t, ValidateEnvelope(doc))
	setAt(t, doc, "/payload/public_key_jwk", map[string]any{"kty": "RSA", "n": x, "e": "AQAB"})
	mustRefuse(t, ValidateEnvelope(doc), "/payload/public_key_jwk/kty", "enum")
}

func TestValidationErrorShape(t *testing.T) {
	doc := decode(t, offerJSON)
	setAt(t, doc, "/payload/terms/core/total/amount", json.Number("3200.0"))
	setAt(t, doc, "/content_hash", "ABC")
	err := ValidateEnvelope(doc)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %T", err)
	}
	if ve.Kind != KindEnvelope {
		t.Errorf("Kind = %q", ve.Kind)
	}
	locs := ve.InstanceLocations()
	if strings.Join(locs, ",") != "/content_hash,/payload/terms/core/total/amount" {
		t.Errorf("InstanceLocations() = %v", locs)
	}
	if got := ve.Under("/payload/terms"); len(got) != 1 || got[0].Keyword != "type" {
		t.Errorf("Under(/payload/terms) = %v", got)
	}
	if got := ve.Under("/payload/term"); len(got) != 0 {
		t.Errorf("Under must match whole tokens, got %v", got)
	}
	msg := ve.Error()
	for _, want := range []string{"invalid envelope", "/content_hash: pattern", "/payload/terms/core/total/amount: type"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Error() = %q, missing %q", msg, want)
		}
	}
	// Pointer tokens are escaped per RFC 6901.
	if got := pointer([]string{"a/b", "c~d"}); got != "/a~1b/c~0d" {
		t.Errorf("pointer escaping: %s", got)
	}
}

func TestValidateRejectsUnknownKind(t *testing.T) {
	for _, k := range []Kind{"", "bogus", KindProfileTerms} {
		if err := Validate(k, map[string]any{}); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("Validate(%q) = %v, want ErrUnknownKind", k, err)
		}
	}
	if err := ValidateEnvelope("not an object"); err == nil {
		t.Error("a string validated as an envelope")
	}
}

func BenchmarkValidateEnvelopeOffer(b *testing.B) {
	doc := decode(b, offerJSON)
	if err := ValidateEnvelope(doc); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateEnvelope(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// ProfileKnown answers from the profile files' annotations without
// compiling them (profiles.go); the compiled set registers the same
// identifiers.
func TestRegisteredProfilesAreCompiled(t *testing.T) {
	ids, err := profileIDs(schemas.FS)
	if err != nil {
		t.Fatal(err)
	}
	compiledIDs := compiled().profiles
	if len(ids) != len(compiledIDs) {
		t.Fatalf("%d profiles registered, %d compiled", len(ids), len(compiledIDs))
	}
	for id := range compiledIDs {
		if !ids[id] || !ProfileKnown(id) {
			t.Errorf("compiled profile %s is not registered", id)
		}
	}
	if ProfileKnown("a202-profile/calibration-service/9.9") {
		t.Error("an unregistered version is known")
	}
}
