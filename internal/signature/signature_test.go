package signature

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/spectest"
)

func load(t testing.TB, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := canonical.DecodeObject(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// clone deep-copies a decoded value through its canonical bytes.
func clone(t testing.TB, m map[string]any) map[string]any {
	t.Helper()
	b, err := canonical.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canonical.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func entry(obj map[string]any, i int) map[string]any {
	return obj["signatures"].([]any)[i].(map[string]any)
}

func refKeys(t testing.TB) *keys.KeySet {
	t.Helper()
	set, err := keys.LoadKeySet(filepath.Join(spectest.ReferenceVectors(t), "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func lookup(t testing.TB, set *keys.KeySet, id string) crypto.PublicKey {
	t.Helper()
	pub, err := set.Lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// wantRefused fails unless err is a *reason.Refusal carrying
// A202-EVIDENCE-SIGNATURE-INVALID.
func wantRefused(t *testing.T, err error, what string) {
	t.Helper()
	var r *reason.Refusal
	if err == nil {
		t.Errorf("%s: verified", what)
		return
	}
	if !errors.As(err, &r) || !r.Has(reason.EvidenceSignatureInvalid) {
		t.Errorf("%s: %v, want A202-EVIDENCE-SIGNATURE-INVALID", what, err)
	}
}

var sigFile = regexp.MustCompile(`^([a-z]{3}_[0-9a-f]{24})\.(sig(\d+)|proof)\.signing-input\.bin$`)

// TestReferenceSigningInputs: our signing inputs are the reference's bytes,
// for every object signature and both mandate proofs.
func TestReferenceSigningInputs(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	files, err := filepath.Glob(filepath.Join(dir, "vectors", "*.signing-input.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var sigs, proofs int
	for _, f := range files {
		m := sigFile.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			t.Fatalf("unexpected vector %s", f)
		}
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		if m[2] == "proof" {
			proofs++
			got, err = MandateSigningInput(load(t, filepath.Join(dir, "mandates", m[1]+".json")))
		} else {
			sigs++
			obj := load(t, filepath.Join(dir, "objects", m[1]+".json"))
			i, _ := strconv.Atoi(m[3])
			got, err = SigningInput(obj, entry(obj, i))
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: signing input differs\n got %q\nwant %q", filepath.Base(f), got, want)
		}
	}
	if sigs != 24 || proofs != 2 {
		t.Fatalf("%d object vectors and %d proof vectors, want 24 and 2", sigs, proofs)
	}
}

func referenceObjects(t testing.TB) map[string]map[string]any {
	t.Helper()
	dir := spectest.ReferenceVectors(t)
	out := map[string]map[string]any{}
	for _, sub := range []string{"objects", "key_records"} {
		files, _ := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		for _, f := range files {
			out[sub+"/"+filepath.Base(f)] = load(t, f)
		}
	}
	return out
}

// TestReferenceSignaturesVerify: every signature in the record verifies,
// and every single relabelling or content change makes it fail.
func TestReferenceSignaturesVerify(t *testing.T) {
	set := refKeys(t)
	objs := referenceObjects(t)
	names := make([]string, 0, len(objs))
	for n := range objs {
		names = append(names, n)
	}
	sort.Strings(names)
	count := 0
	for _, name := range names {
		obj := objs[name]
		if err := VerifySignatures(obj, set); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for i := range obj["signatures"].([]any) {
			count++
			e := entry(obj, i)
			pub := lookup(t, set, e["key_id"].(string))
			if err := VerifyEntry(obj, i, pub); err != nil {
				t.Errorf("%s sig %d: %v", name, i, err)
			}
			tamperEntry(t, name, obj, i, set)
		}
		// One byte of the payload: every signature fails.
		bad := clone(t, obj)
		flipPayloadByte(t, bad)
		for i := range bad["signatures"].([]any) {
			wantRefused(t, VerifyEntry(bad, i, lookup(t, set, entry(bad, i)["key_id"].(string))), name+" payload flipped")
		}
		wantRefused(t, VerifySignatures(bad, set), name+" payload flipped, all")
	}
	if count != 28 {
		t.Fatalf("%d signatures verified, want 24 in objects and 4 in key_records", count)
	}
}

// tamperEntry relabels each protected member of signature i in turn.
func tamperEntry(t *testing.T, name string, obj map[string]any, i int, set *keys.KeySet) {
	t.Helper()
	e := entry(obj, i)
	keyID := e["key_id"].(string)
	pub := lookup(t, set, keyID)
	otherID := "key_delta_principal_01"
	if keyID == otherID {
		otherID = "key_northstar_agent_01"
	}
	typ := obj["object_type"].(string)
	purpose := e["purpose"].(string)
	// Relabel the purpose to another the table allows where one exists,
	// so the failure is the signature's, not the table's.
	// Where the table allows only one, the relabel is to a registered
	// purpose outside it, refused by the table.
	newPurpose := "audit_seal"
	for _, p := range AllowedPurposes(typ) {
		if p != purpose {
			newPurpose = p
		}
	}
	signedAt, _ := envelope.ParseTimestamp(e["signed_at"].(string))
	cases := []struct {
		what   string
		member string
		value  string
		pub    crypto.PublicKey
	}{
		{"purpose", "purpose", newPurpose, pub},
		{"key_id (original key)", "key_id", otherID, pub},
		{"key_id (its key)", "key_id", otherID, lookup(t, set, otherID)},
		{"algorithm", "algorithm", EdDSA, pub},
		{"signed_at", "signed_at", envelope.Timestamp(signedAt.Add(time.Second)), pub},
		{"signed_at earlier", "signed_at", envelope.Timestamp(signedAt.Add(-time.Hour)), pub},
		{"wrong key", "", "", lookup(t, set, otherID)},
	}
	for _, c := range cases {
		bad := clone(t, obj)
		if c.member != "" {
			entry(bad, i)[c.member] = c.value
		}
		wantRefused(t, VerifyEntry(bad, i, c.pub), name+" sig "+strconv.Itoa(i)+" "+c.what)
	}
	// Relabelling changes the signed bytes themselves, not only a check
	// around them.
	e2 := clone(t, map[string]any{"e": e})["e"].(map[string]any)
	e2["signed_at"] = "2000-01-01T00:00:00Z"
	a, _ := SigningInput(obj, e)
	b, _ := SigningInput(obj, e2)
	if bytes.Equal(a, b) {
		t.Errorf("%s: signed_at is not in the signing input", name)
	}
}

func flipPayloadByte(t *testing.T, obj map[string]any) {
	t.Helper()
	p := obj["payload"].(map[string]any)
	ks := make([]string, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		if s, ok := p[k].(string); ok && s != "" {
			b := []byte(s)
			b[len(b)-1] ^= 1
			p[k] = string(b)
			return
		}
	}
	t.Fatalf("%v: no string member in payload to flip", obj["id"])
}

func TestReferenceMandateProofs(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	set := refKeys(t)
	files, _ := filepath.Glob(filepath.Join(dir, "mandates", "*.json"))
	if len(files) != 2 {
		t.Fatalf("%d mandates, want 2", len(files))
	}
	for _, f := range files {
		m := load(t, f)
		keyID := m["proof"].(map[string]any)["key_id"].(string)
		pub := lookup(t, set, keyID)
		if err := VerifyMandateProof(m, pub); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		other := lookup(t, set, "key_northstar_agent_01")
		wantRefused(t, VerifyMandateProof(m, other), "mandate wrong key")

		bad := clone(t, m)
		bad["proof"].(map[string]any)["created_at"] = "2026-12-02T13:23:40Z"
		wantRefused(t, VerifyMandateProof(bad, pub), "mandate created_at relabelled")

		bad = clone(t, m)
		bad["valid_until"] = "2099-01-01T00:00:00Z"
		wantRefused(t, VerifyMandateProof(bad, pub), "mandate widened")

		bad = clone(t, m)
		bad["proof"].(map[string]any)["purpose"] = "object_issuance"
		wantRefused(t, VerifyMandateProof(bad, pub), "mandate purpose relabelled")

		bad = clone(t, m)
		bad["proof"].(map[string]any)["algorithm"] = EdDSA
		wantRefused(t, VerifyMandateProof(bad, pub), "mandate algorithm relabelled")

		// key_id relabelled on both proof and issuer, so only the
		// signature can notice.
		bad = clone(t, m)
		bad["proof"].(map[string]any)["key_id"] = "key_other_01"
		bad["issuer"].(map[string]any)["key_id"] = "key_other_01"
		wantRefused(t, VerifyMandateProof(bad, pub), "mandate key_id relabelled")

		bad = clone(t, m)
		bad["proof"].(map[string]any)["key_id"] = "key_other_01"
		wantRefused(t, VerifyMandateProof(bad, pub), "proof key is not the issuer's")

		bad = clone(t, m)
		delete(bad, "proof")
		wantRefused(t, VerifyMandateProof(bad, pub), "mandate without proof")
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSigner(t testing.TB, id string, k crypto.Signer) Signer {
	t.Helper()
	s, err := NewSigner(id, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newObject(t testing.TB, typ string) map[string]any {
	t.Helper()
	obj, err := envelope.New(envelope.Spec{
		ObjectType:    typ,
		CreatedBy:     envelope.Actor{OrganizationID: "org_a", AgentID: "agt_a", MandateID: "mnd_a"},
		TransactionID: "txn_demo",
		CreatedAt:     time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC),
		Payload:       map[string]any{"note": "hello", "n": "1.00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Seal(obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestES256RoundTrip(t *testing.T) {
	ka, kb := newKey(t), newKey(t)
	set := keys.NewKeySet()
	_ = set.Add("key_alpha", &ka.PublicKey)
	_ = set.Add("key_beta", &kb.PublicKey)
	obj := newObject(t, "agreement")
	at := time.Date(2026, 12, 2, 13, 0, 1, 500, time.UTC)
	if err := Sign(obj, newSigner(t, "key_alpha", ka), "agreement_commitment", at); err != nil {
		t.Fatal(err)
	}
	// One signature is not enough for an agreement.
	wantRefused(t, VerifySignatures(obj, set), "agreement with one signature")
	if err := VerifyEntry(obj, 0, &ka.PublicKey); err != nil {
		t.Fatal(err)
	}
	first := clone(t, obj)
	if err := Sign(obj, newSigner(t, "key_beta", kb), "agreement_commitment", at); err != nil {
		t.Fatal(err)
	}
	if err := VerifySignatures(obj, set); err != nil {
		t.Fatalf("two signatures: %v", err)
	}
	// Appending left the first entry as it was and valid.
	if a, _ := canonical.Marshal(entry(first, 0)); !bytes.Equal(a, must(canonical.Marshal(entry(obj, 0)))) {
		t.Fatal("appending changed the first entry")
	}
	if err := VerifyEntry(obj, 0, &ka.PublicKey); err != nil {
		t.Fatalf("first signature after append: %v", err)
	}
	e := entry(obj, 0)
	if e["signed_at"] != "2026-12-02T13:00:01Z" || e["algorithm"] != ES256 || len(e) != 5 {
		t.Fatalf("entry %v", e)
	}
	raw, err := keys.DecodeBase64URL(e["signature"].(string))
	if err != nil || len(raw) != 64 {
		t.Fatalf("value %q: %v", e["signature"], err)
	}
	// Signing the same bytes again gives a different, equally valid value.
	again := clone(t, first)
	again["signatures"] = []any{}
	_ = Sign(again, newSigner(t, "key_alpha", ka), "agreement_commitment", at)
	if entry(again, 0)["signature"] == e["signature"] {
		t.Fatal("two ES256 signatures are identical: nonce not random")
	}
	if err := VerifyEntry(again, 0, &ka.PublicKey); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, VerifyEntry(obj, 1, &ka.PublicKey), "second signature under the first key")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestES256LeadingZeros signs until r or s has a leading zero byte, which
// the raw form must keep (left padding), and checks it verifies.
func TestES256LeadingZeros(t *testing.T) {
	k := newKey(t)
	s := newSigner(t, "key_alpha", k)
	obj := newObject(t, "offer")
	for n := 0; n < 2000; n++ {
		obj["signatures"] = []any{}
		if err := Sign(obj, s, "offer_submission", time.Now()); err != nil {
			t.Fatal(err)
		}
		raw, _ := keys.DecodeBase64URL(entry(obj, 0)["signature"].(string))
		if raw[0] == 0 || raw[32] == 0 {
			if err := VerifyEntry(obj, 0, &k.PublicKey); err != nil {
				t.Fatalf("padded value refused: %v", err)
			}
			return
		}
	}
	t.Fatal("no value with a leading zero byte in 2000 signatures")
}

func TestSignRefusals(t *testing.T) {
	k := newKey(t)
	s := newSigner(t, "key_alpha", k)
	obj := newObject(t, "offer")
	for _, p := range []string{"offer_submission", "object_issuance"} {
		if err := Sign(clone(t, obj), s, p, time.Now()); err != nil {
			t.Errorf("offer with %s refused: %v", p, err)
		}
	}
	for _, p := range []string{"event_append", "agreement_commitment", "grade_issuance", ""} {
		wantRefused(t, Sign(clone(t, obj), s, p, time.Now()), "offer signed with "+p)
	}
	org := clone(t, obj)
	org["object_type"] = "organization"
	wantRefused(t, Sign(org, s, "object_issuance", time.Now()), "a type with no purpose row")

	stale := clone(t, obj)
	stale["payload"].(map[string]any)["note"] = "changed after sealing"
	if err := Sign(stale, s, "offer_submission", time.Now()); err == nil {
		t.Error("signed an object whose content_hash is stale")
	}
	// SignOver, given the hash input, signs what Sign signs, and still
	// refuses bytes that are not what content_hash hashes.
	over := clone(t, obj)
	in, err := canonical.HashInput(over)
	if err != nil {
		t.Fatal(err)
	}
	if err := SignOver(over, in, s, "offer_submission", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := VerifyEntry(over, len(over["signatures"].([]any))-1, &k.PublicKey); err != nil {
		t.Errorf("signed over the hash input, does not verify: %v", err)
	}
	if err := SignOver(clone(t, obj), []byte(`{"other":"bytes"}`), s, "offer_submission", time.Now()); err == nil {
		t.Error("signed over bytes that are not the sealed content")
	}
	unsealed := clone(t, obj)
	delete(unsealed, "content_hash")
	if err := Sign(unsealed, s, "offer_submission", time.Now()); err != nil {
		t.Errorf("unsealed object refused: %v", err)
	}
	notArray := clone(t, obj)
	notArray["signatures"] = map[string]any{}
	if err := Sign(notArray, s, "offer_submission", time.Now()); err == nil {
		t.Error("signed into a signatures member that is not an array")
	}
	if err := Sign(clone(t, obj), s, "offer_submission", time.Time{}); err == nil {
		t.Error("signed with no signing time")
	}
	if _, err := NewES256("alpha", k); err == nil {
		t.Error("signer with a malformed key_id")
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := NewES256("key_alpha", p384); err == nil {
		t.Error("ES256 signer over a P-384 key")
	}
	if _, err := NewSigner("key_alpha", p384); err == nil {
		t.Error("signer over a P-384 key")
	}
}

func TestEdDSA(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := newSigner(t, "key_edwards", priv)
	if s.Algorithm() != EdDSA {
		t.Fatalf("algorithm %s", s.Algorithm())
	}
	obj := newObject(t, "offer")
	if err := Sign(obj, s, "offer_submission", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := VerifyEntry(obj, 0, pub); err != nil {
		t.Fatalf("EdDSA: %v", err)
	}
	// Independent check: the value is Ed25519 over exactly SigningInput.
	in, _ := SigningInput(obj, entry(obj, 0))
	raw, _ := keys.DecodeBase64URL(entry(obj, 0)["signature"].(string))
	if !ed25519.Verify(pub, in, raw) {
		t.Fatal("value is not an Ed25519 signature of the signing input")
	}
	wantRefused(t, VerifyEntry(obj, 0, &newKey(t).PublicKey), "EdDSA entry with a P-256 key")
	bad := clone(t, obj)
	entry(bad, 0)["algorithm"] = ES256
	wantRefused(t, VerifyEntry(bad, 0, pub), "EdDSA value labelled ES256")
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	wantRefused(t, VerifyEntry(obj, 0, other), "EdDSA wrong key")
	bad = clone(t, obj)
	flipPayloadByte(t, bad)
	wantRefused(t, VerifyEntry(bad, 0, pub), "EdDSA payload flipped")
}

// TestValueEncoding: the value must be unpadded base64url of the raw form.
func TestValueEncoding(t *testing.T) {
	k := newKey(t)
	obj := newObject(t, "offer")
	if err := Sign(obj, newSigner(t, "key_alpha", k), "offer_submission", time.Now()); err != nil {
		t.Fatal(err)
	}
	value := entry(obj, 0)["signature"].(string)
	raw, _ := keys.DecodeBase64URL(value)
	der, err := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])})
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.VerifyASN1(&k.PublicKey, sha256Of(t, obj), der) {
		t.Fatal("test's DER conversion is wrong")
	}
	swapped := strings.NewReplacer("-", "+", "_", "/").Replace(value)
	cases := map[string]string{
		"DER":            keys.EncodeBase64URL(der),
		"padded":         value + "==",
		"std base64 DER": strings.NewReplacer("-", "+", "_", "/").Replace(keys.EncodeBase64URL(der)),
		"line break":     value[:40] + "\n" + value[40:],
		"truncated":      value[:85],
		"63 bytes":       keys.EncodeBase64URL(raw[:63]),
		"65 bytes":       keys.EncodeBase64URL(append(append([]byte(nil), raw...), 0)),
		"empty":          "",
	}
	if swapped != value {
		cases["std alphabet"] = swapped
	}
	for name, v := range cases {
		bad := clone(t, obj)
		entry(bad, 0)["signature"] = v
		wantRefused(t, VerifyEntry(bad, 0, &k.PublicKey), name)
	}
	// High S: (r, n-s) is the other valid ECDSA signature of the same
	// digest. JOSE does not forbid it and the reference may emit it, so it
	// verifies.
	n := elliptic.P256().Params().N
	hs := new(big.Int).Sub(n, new(big.Int).SetBytes(raw[32:]))
	high := append([]byte(nil), raw[:32]...)
	high = append(high, hs.FillBytes(make([]byte, 32))...)
	alt := clone(t, obj)
	entry(alt, 0)["signature"] = keys.EncodeBase64URL(high)
	if err := VerifyEntry(alt, 0, &k.PublicKey); err != nil {
		t.Fatalf("(r, n-s) refused: %v", err)
	}
	// r or s zero, or not below n, never verifies.
	for name, v := range map[string][]byte{
		"zero":  make([]byte, 64),
		"r = n": append(n.FillBytes(make([]byte, 32)), raw[32:]...),
	} {
		bad := clone(t, obj)
		entry(bad, 0)["signature"] = keys.EncodeBase64URL(v)
		wantRefused(t, VerifyEntry(bad, 0, &k.PublicKey), name)
	}
}

func sha256Of(t *testing.T, obj map[string]any) []byte {
	in, err := SigningInput(obj, entry(obj, 0))
	if err != nil {
		t.Fatal(err)
	}
	d := sha256Sum(in)
	return d[:]
}

func TestEntryShape(t *testing.T) {
	k := newKey(t)
	obj := newObject(t, "offer")
	_ = Sign(obj, newSigner(t, "key_alpha", k), "offer_submission", time.Now())
	for name, mutate := range map[string]func(map[string]any){
		"extra member":       func(e map[string]any) { e["kid"] = "x" },
		"no signed_at":       func(e map[string]any) { delete(e, "signed_at") },
		"no purpose":         func(e map[string]any) { delete(e, "purpose") },
		"signed_at a number": func(e map[string]any) { e["signed_at"] = 7 },
		"algorithm RS256":    func(e map[string]any) { e["algorithm"] = "RS256" },
		"purpose off-table":  func(e map[string]any) { e["purpose"] = "event_append" },
	} {
		bad := clone(t, obj)
		mutate(entry(bad, 0))
		wantRefused(t, VerifyEntry(bad, 0, &k.PublicKey), name)
	}
	wantRefused(t, VerifyEntry(obj, 1, &k.PublicKey), "index out of range")
	wantRefused(t, VerifyEntry(obj, -1, &k.PublicKey), "negative index")
	bad := clone(t, obj)
	bad["signatures"] = []any{"x"}
	wantRefused(t, VerifyEntry(bad, 0, &k.PublicKey), "entry not an object")
	bad["signatures"] = "x"
	wantRefused(t, VerifySignatures(bad, keys.NewKeySet()), "signatures not an array")
	if _, err := SigningInput(obj, map[string]any{"key_id": "key_a"}); err == nil {
		t.Error("signing input of an incomplete entry")
	}
}

func TestNotCheckable(t *testing.T) {
	k := newKey(t)
	set := keys.NewKeySet()
	_ = set.Add("key_alpha", &k.PublicKey)
	obj := newObject(t, "offer")
	_ = Sign(obj, newSigner(t, "key_alpha", k), "offer_submission", time.Now())

	ph := clone(t, obj)
	entry(ph, 0)["signature"] = Placeholder
	err := VerifyEntry(ph, 0, &k.PublicKey)
	var r *reason.Refusal
	if !errors.Is(err, ErrNotCheckable) || errors.As(err, &r) {
		t.Fatalf("placeholder: %v, want ErrNotCheckable and no refusal", err)
	}
	if err := VerifySignatures(ph, set); !errors.Is(err, ErrNotCheckable) {
		t.Fatalf("placeholder in object: %v", err)
	}
	// A placeholder under a forbidden purpose is still a failure: the
	// purpose is wrong whatever the value.
	entry(ph, 0)["purpose"] = "event_append"
	wantRefused(t, VerifySignatures(ph, set), "placeholder with off-table purpose")

	if err := VerifySignatures(obj, keys.NewKeySet()); !errors.Is(err, ErrNotCheckable) || errors.As(err, &r) {
		t.Fatalf("unknown key: %v, want ErrNotCheckable", err)
	}
	// One failing and one unknown: the failure wins.
	two := clone(t, obj)
	_ = Sign(two, newSigner(t, "key_stranger", newKey(t)), "object_issuance", time.Now())
	entry(two, 0)["signed_at"] = "2001-01-01T00:00:00Z"
	wantRefused(t, VerifySignatures(two, set), "failed plus unknown")
	if err := VerifySignatures(obj, set); err != nil {
		t.Fatal(err)
	}
}

func TestPurposeTable(t *testing.T) {
	allow := map[string][]string{
		"offer":             {"offer_submission", "object_issuance"},
		"acceptance":        {"offer_acceptance", "object_issuance"},
		"agreement":         {"agreement_commitment", "object_issuance"},
		"transaction_event": {"event_append"},
		"policy_decision":   {"policy_decision"},
		"action_envelope":   {"action_submission"},
		"adapter_receipt":   {"adapter_receipt", "object_issuance"},
		"key_record":        {"object_issuance"},
		"obligation":        {"object_issuance"},
	}
	for typ, ps := range allow {
		for _, p := range ps {
			if !PurposeAllowed(typ, p) {
				t.Errorf("%s/%s refused", typ, p)
			}
		}
	}
	for _, c := range [][2]string{
		{"offer", "event_append"}, {"offer", "offer_acceptance"}, {"acceptance", "offer_submission"},
		{"transaction_event", "object_issuance"}, {"policy_decision", "object_issuance"},
		{"agreement", "policy_decision"}, {"organization", "object_issuance"}, {"", ""},
		{"offer", "Offer_submission"}, {"key_record", "mandate_issuance"},
	} {
		if PurposeAllowed(c[0], c[1]) {
			t.Errorf("%s/%s allowed", c[0], c[1])
		}
	}
	if AllowedPurposes("organization") != nil || AllowedPurposes("nonsense") != nil {
		t.Error("a type without a row has purposes")
	}
	got := AllowedPurposes("offer")
	got[0] = "mutated"
	if !PurposeAllowed("offer", "offer_submission") {
		t.Error("AllowedPurposes returned the table itself")
	}
	for typ, n := range map[string]int{
		"agreement": 2, "invitation_acceptance": 2, "offer": 1, "acceptance": 1,
		"transaction_event": 1, "policy_decision": 1, "action_envelope": 1,
		"obligation": 1, "settlement_instruction": 1, "key_record": 0,
		"evidence": 0, "commitment": 0, "organization": 0, "nonsense": 0,
	} {
		if got := MinSignatures(typ); got != n {
			t.Errorf("MinSignatures(%s) = %d, want %d", typ, got, n)
		}
	}
}

// TestMinSignaturesMatchesSchema reads minItems of signatures from the
// kernel schema's allOf branches.
func TestMinSignaturesMatchesSchema(t *testing.T) {
	s := load(t, filepath.Join(spectest.SpecDir(t), "schemas", "v0.1", "commercial-kernel.schema.json"))
	found := 0
	for _, b := range s["allOf"].([]any) {
		branch := b.(map[string]any)
		ifp, _ := branch["if"].(map[string]any)
		then, _ := branch["then"].(map[string]any)
		if ifp == nil || then == nil {
			continue
		}
		ifProps, _ := ifp["properties"].(map[string]any)
		ot, _ := ifProps["object_type"].(map[string]any)
		typ, _ := ot["const"].(string)
		props, _ := then["properties"].(map[string]any)
		sig, _ := props["signatures"].(map[string]any)
		if typ == "" || sig == nil {
			continue
		}
		found++
		n64, err := sig["minItems"].(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		n := int(n64)
		if MinSignatures(typ) != n {
			t.Errorf("%s: MinSignatures %d, schema minItems %d", typ, MinSignatures(typ), n)
		}
	}
	if found != len(minimums) {
		t.Errorf("schema sets minItems for %d types, we list %d", found, len(minimums))
	}
}

func TestMandateSignRoundTrip(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	files, _ := filepath.Glob(filepath.Join(dir, "mandates", "*.json"))
	if len(files) == 0 {
		t.Fatal("no mandates")
	}
	m := load(t, files[0])
	delete(m, "proof")
	k := newKey(t)
	s := newSigner(t, "key_issuer_01", k)
	if err := SignMandate(m, s, time.Now()); err == nil {
		t.Fatal("signed with a key the issuer does not name")
	}
	m["issuer"].(map[string]any)["key_id"] = "key_issuer_01"
	at := time.Date(2026, 12, 2, 13, 23, 39, 0, time.UTC)
	if err := SignMandate(m, s, at); err != nil {
		t.Fatal(err)
	}
	proof := m["proof"].(map[string]any)
	if len(proof) != 5 || proof["created_at"] != "2026-12-02T13:23:39Z" || proof["purpose"] != PurposeMandateIssuance || proof["key_id"] != "key_issuer_01" {
		t.Fatalf("proof %v", proof)
	}
	if err := VerifyMandateProof(m, &k.PublicKey); err != nil {
		t.Fatal(err)
	}
	if err := SignMandate(m, s, at); err == nil {
		t.Fatal("replaced an existing proof")
	}
	// The signing input is the mandate without proof, ".", the header.
	in, err := MandateSigningInput(m)
	if err != nil {
		t.Fatal(err)
	}
	view := clone(t, m)
	delete(view, "proof")
	want := append(must(canonical.Marshal(view)), '.')
	want = append(want, `{"algorithm":"ES256","key_id":"key_issuer_01","purpose":"mandate_issuance","signed_at":"2026-12-02T13:23:39Z"}`...)
	if !bytes.Equal(in, want) {
		t.Fatalf("mandate signing input\n%s\nwant\n%s", in, want)
	}
	bad := clone(t, m)
	bad["actions"] = append(bad["actions"].([]any), "offer.accept")
	wantRefused(t, VerifyMandateProof(bad, &k.PublicKey), "mandate with an added action")
	bad = clone(t, m)
	bad["proof"].(map[string]any)["extra"] = "x"
	wantRefused(t, VerifyMandateProof(bad, &k.PublicKey), "proof with an extra member")
}

func TestGradeSignature(t *testing.T) {
	grade := load(t, filepath.Join(spectest.FixturesDir(t), "valid-conformance-grade-bilateral-scope.json"))
	// The fixture carries a placeholder: not checkable, never verified.
	fixed := grade["signature"].(map[string]any)
	if err := VerifyGradeSignature(grade, &newKey(t).PublicKey); !errors.Is(err, ErrNotCheckable) {
		t.Fatalf("fixture placeholder: %v", err)
	}
	if _, err := GradeSigningInput(grade); err != nil {
		t.Fatalf("fixture grade signing input: %v", err)
	}
	if fixed["purpose"] != PurposeGradeIssuance {
		t.Fatalf("fixture purpose %v", fixed["purpose"])
	}
	delete(grade, "signature")
	k := newKey(t)
	at := time.Date(2026, 7, 30, 9, 0, 0, 0, time.UTC)
	if err := SignGrade(grade, newSigner(t, "key_grader_01", k), at); err != nil {
		t.Fatal(err)
	}
	sig := grade["signature"].(map[string]any)
	if len(sig) != 5 || sig["signed_at"] != "2026-07-30T09:00:00Z" || sig["purpose"] != PurposeGradeIssuance {
		t.Fatalf("signature %v", sig)
	}
	if err := VerifyGradeSignature(grade, &k.PublicKey); err != nil {
		t.Fatal(err)
	}
	if err := SignGrade(grade, newSigner(t, "key_grader_01", k), at); err == nil {
		t.Fatal("replaced an existing grade signature")
	}
	for name, mutate := range map[string]func(map[string]any){
		"level raised":      func(g map[string]any) { g["level"] = "self_assessed_x" },
		"signed_at moved":   func(g map[string]any) { g["signature"].(map[string]any)["signed_at"] = "2026-07-30T09:00:01Z" },
		"purpose relabeled": func(g map[string]any) { g["signature"].(map[string]any)["purpose"] = "object_issuance" },
		"key_id relabeled":  func(g map[string]any) { g["signature"].(map[string]any)["key_id"] = "key_grader_02" },
		"created_at member": func(g map[string]any) { g["signature"].(map[string]any)["created_at"] = "2026-07-30T09:00:00Z" },
	} {
		bad := clone(t, grade)
		mutate(bad)
		wantRefused(t, VerifyGradeSignature(bad, &k.PublicKey), name)
	}
	wantRefused(t, VerifyGradeSignature(grade, &newKey(t).PublicKey), "grade wrong key")
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

// TestExceptionNeedsItsOpenersSignature: the exception, whose payload
// party defines (C17), takes the issuance purpose and one signature at
// least, beside the schema's minimums.
func TestExceptionNeedsItsOpenersSignature(t *testing.T) {
	if MinSignatures("exception") != 1 || !PurposeAllowed("exception", "object_issuance") || PurposeAllowed("exception", "event_append") {
		t.Fatalf("exception: minimum %d, purposes %v", MinSignatures("exception"), AllowedPurposes("exception"))
	}
}
