package envelope

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/spectest"
)

var actor = Actor{OrganizationID: "org_delta", AgentID: "agt_delta_01", MandateID: "mnd_0123456789abcdef01234567"}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^off_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		for _, p := range []string{"off", "off_"} {
			id, err := NewID(p)
			if err != nil {
				t.Fatal(err)
			}
			if !re.MatchString(id) {
				t.Fatalf("id %q", id)
			}
			if seen[id] {
				t.Fatalf("id %q drawn twice", id)
			}
			seen[id] = true
		}
	}
	for _, p := range []string{"org", "txn", "ses", "key", "req", "chn", "rev_"} {
		if _, err := NewID(p); err != nil {
			t.Errorf("prefix %q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", "of", "OFF", "foo", "off__", "offer", "_off", "xyz_", "zzz"} {
		if _, err := NewID(p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}

func TestTimestamp(t *testing.T) {
	zone := time.FixedZone("x", 5*3600+30*60)
	in := time.Date(2026, 12, 2, 18, 53, 39, 999_999_999, zone)
	if got, want := Timestamp(in), "2026-12-02T13:23:39Z"; got != want {
		t.Fatalf("Timestamp %s, want %s", got, want)
	}
	back, err := ParseTimestamp("2026-12-02T13:23:39Z")
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(in.Truncate(time.Second)) || back.Location() != time.UTC {
		t.Fatalf("parsed %v", back)
	}
	for _, s := range []string{"2024-02-29T00:00:00Z", "1999-12-31T23:59:59Z"} {
		if _, err := ParseTimestamp(s); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	for _, s := range []string{
		"2026-12-02T13:23:39.5Z", "2026-12-02T13:23:39.000Z",
		"2026-12-02T13:23:39+00:00", "2026-12-02T13:23:39-00:00", "2026-12-02T14:23:39+01:00",
		"2026-12-02T13:23:39z", "2026-12-02t13:23:39Z", "2026-12-02 13:23:39Z",
		"2026-12-02T13:23:39", "2026-12-02", " 2026-12-02T13:23:39Z", "2026-12-02T13:23:39Z ",
		"2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-02T24:00:00Z",
		"2026-12-02T23:59:60Z", "2026-12-02T13:23:3aZ", "+026-12-02T13:23:39Z",
		"2026-12-02T13:23:39ZZ", "",
	} {
		if _, err := ParseTimestamp(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestNew(t *testing.T) {
	at := time.Date(2026, 12, 2, 13, 23, 39, 0, time.UTC)
	payload := map[string]any{"x": "y"}
	obj, err := New(Spec{ObjectType: "offer", CreatedBy: actor, TransactionID: "txn_demo_01", CreatedAt: at, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	got, err := canonical.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	id := obj["id"].(string)
	if !regexp.MustCompile(`^off_[0-9a-f]{24}$`).MatchString(id) {
		t.Fatalf("id %q", id)
	}
	want := `{"created_at":"2026-12-02T13:23:39Z","created_by":{"agent_id":"agt_delta_01","mandate_id":"mnd_0123456789abcdef01234567","organization_id":"org_delta"},"id":"` + id +
		`","object_type":"offer","payload":{"x":"y"},"previous_version_id":null,"signatures":[],"spec_version":"a202-commercial/0.1","transaction_id":"txn_demo_01","version":1}`
	if string(got) != want {
		t.Fatalf("object\n%s\nwant\n%s", got, want)
	}
	// A built object and its canonical bytes decoded again are the same
	// value, so consumers see one form whichever they were handed.
	dec, err := canonical.DecodeObject(got)
	if err != nil {
		t.Fatal(err)
	}
	if h1, _ := canonical.ContentHash(dec); h1 != mustHash(t, obj) {
		t.Fatal("decoded copy hashes differently")
	}
	if dec["version"] != obj["version"] {
		t.Fatalf("version %T vs %T", obj["version"], dec["version"])
	}
}

func mustHash(t *testing.T, obj map[string]any) string {
	t.Helper()
	h, err := canonical.ContentHash(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNewRefusals(t *testing.T) {
	at := time.Now()
	p := map[string]any{}
	cases := map[string]Spec{
		"unknown type":        {ObjectType: "commercial_mandate", CreatedBy: actor, TransactionID: "txn_a", CreatedAt: at, Payload: p},
		"no-prefix type":      {ObjectType: "audit_bundle", CreatedBy: actor, TransactionID: "txn_a", CreatedAt: at, Payload: p},
		"id of another type":  {ObjectType: "offer", ID: "acc_0123456789abcdef01234567", CreatedBy: actor, TransactionID: "txn_a", CreatedAt: at, Payload: p},
		"bound without txn":   {ObjectType: "offer", CreatedBy: actor, CreatedAt: at, Payload: p},
		"event without txn":   {ObjectType: "transaction_event", CreatedBy: actor, CreatedAt: at, Payload: p},
		"txn without prefix":  {ObjectType: "offer", CreatedBy: actor, TransactionID: "demo", CreatedAt: at, Payload: p},
		"agent not agt_":      {ObjectType: "offer", CreatedBy: Actor{"org_a", "prn_a", "mnd_a"}, TransactionID: "txn_a", CreatedAt: at, Payload: p},
		"empty actor":         {ObjectType: "offer", TransactionID: "txn_a", CreatedAt: at, Payload: p},
		"no created_at":       {ObjectType: "offer", CreatedBy: actor, TransactionID: "txn_a", Payload: p},
		"no payload":          {ObjectType: "offer", CreatedBy: actor, TransactionID: "txn_a", CreatedAt: at},
		"mandate not mnd_":    {ObjectType: "offer", CreatedBy: Actor{"org_a", "agt_a", "m_a"}, TransactionID: "txn_a", CreatedAt: at, Payload: p},
		"organization prefix": {ObjectType: "offer", CreatedBy: Actor{"delta", "agt_a", "mnd_a"}, TransactionID: "txn_a", CreatedAt: at, Payload: p},
	}
	for name, s := range cases {
		if _, err := New(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, typ := range []string{"key_record", "organization", "revocation_record", "intent"} {
		obj, err := New(Spec{ObjectType: typ, CreatedBy: actor, CreatedAt: at, Payload: p})
		if err != nil {
			t.Errorf("%s without txn refused: %v", typ, err)
			continue
		}
		if v, ok := obj["transaction_id"]; !ok || v != nil {
			t.Errorf("%s transaction_id %v, want null", typ, v)
		}
	}
}

func TestSeal(t *testing.T) {
	obj, err := New(Spec{ObjectType: "evidence", CreatedBy: actor, TransactionID: "txn_a", CreatedAt: time.Now(), Payload: map[string]any{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Seal(obj); err != nil {
		t.Fatal(err)
	}
	h := obj["content_hash"].(string)
	if h != mustHash(t, obj) || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h) {
		t.Fatalf("content_hash %q", h)
	}
	obj["signatures"] = []any{map[string]any{"key_id": "key_x"}}
	if err := Seal(obj); err != nil || obj["content_hash"] != h {
		t.Fatal("adding a signature changed the content hash")
	}
	obj["payload"].(map[string]any)["a"] = "c"
	if err := Seal(obj); err != nil || obj["content_hash"] == h {
		t.Fatal("changing the payload kept the content hash")
	}
	obj["payload"].(map[string]any)["a"] = make(chan int) // not a JSON value
	if err := Seal(obj); err == nil {
		t.Fatal("sealed an object holding a non-JSON value")
	}
	// SealInput hands back the bytes it hashed: the object's hash input.
	obj["payload"].(map[string]any)["a"] = "d"
	in, err := SealInput(obj)
	if err != nil {
		t.Fatal(err)
	}
	want, err := canonical.HashInput(obj)
	if err != nil || string(in) != string(want) || obj["content_hash"] != canonical.SHA256Hex(in) {
		t.Fatalf("SealInput gave %q, hash %v; want %q", in, obj["content_hash"], want)
	}
}

// TestKeyRecordMatchesReference rebuilds each reference key_record from its
// facts and requires the same content hash: the payload shape, the
// created_by and the null transaction_id all match byte for byte.
func TestKeyRecordMatchesReference(t *testing.T) {
	dir := filepath.Join(spectest.ReferenceVectors(t), "key_records")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 4 {
		t.Fatalf("%d key_records, err %v", len(files), err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := canonical.DecodeObject(data)
		if err != nil {
			t.Fatal(err)
		}
		p := ref["payload"].(map[string]any)
		by := ref["created_by"].(map[string]any)
		pub, err := keys.ParseJWK(p["public_key_jwk"])
		if err != nil {
			t.Fatal(err)
		}
		from, err := ParseTimestamp(p["valid_from"].(string))
		if err != nil {
			t.Fatal(err)
		}
		at, err := ParseTimestamp(ref["created_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := NewKeyRecord(KeyRecordSpec{
			KeyID:      ref["id"].(string),
			Controller: p["controller_organization_id"].(string),
			PublicKey:  pub,
			ValidFrom:  from,
			CreatedBy:  Actor{by["organization_id"].(string), by["agent_id"].(string), by["mandate_id"].(string)},
			CreatedAt:  at,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := Seal(obj); err != nil {
			t.Fatal(err)
		}
		if obj["content_hash"] != ref["content_hash"] {
			a, _ := canonical.HashInput(obj)
			b, _ := canonical.HashInput(ref)
			t.Fatalf("%s: content_hash %v, reference %v\nours %s\nref  %s", filepath.Base(f), obj["content_hash"], ref["content_hash"], a, b)
		}
		ours, _ := canonical.HashInput(obj)
		theirs, _ := canonical.HashInput(ref)
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("%s: hash inputs differ", f)
		}
	}
}

func TestKeyRecordRefusals(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	now := time.Now()
	good := KeyRecordSpec{KeyID: "key_delta_agent_02", Controller: "org_delta", PublicKey: &k.PublicKey, ValidFrom: now, CreatedBy: actor, CreatedAt: now}
	if obj, err := NewKeyRecord(good); err != nil {
		t.Fatal(err)
	} else if obj["id"] != "key_delta_agent_02" || obj["payload"].(map[string]any)["status"] != "active" {
		t.Fatalf("key_record %v", obj)
	}
	bad := func(f func(*KeyRecordSpec)) KeyRecordSpec { s := good; f(&s); return s }
	cases := map[string]KeyRecordSpec{
		"bad key_id":         bad(func(s *KeyRecordSpec) { s.KeyID = "delta_agent" }),
		"bad controller":     bad(func(s *KeyRecordSpec) { s.Controller = "delta" }),
		"other org's agent":  bad(func(s *KeyRecordSpec) { s.Controller = "org_north" }),
		"P-384 key":          bad(func(s *KeyRecordSpec) { s.PublicKey = &p384.PublicKey }),
		"private key":        bad(func(s *KeyRecordSpec) { s.PublicKey = k }),
		"bad status":         bad(func(s *KeyRecordSpec) { s.Status = "expired" }),
		"no valid_from":      bad(func(s *KeyRecordSpec) { s.ValidFrom = time.Time{} }),
		"until before from":  bad(func(s *KeyRecordSpec) { s.ValidUntil = now.Add(-time.Hour) }),
		"until equals from":  bad(func(s *KeyRecordSpec) { s.ValidUntil = now }),
		"no created_at":      bad(func(s *KeyRecordSpec) { s.CreatedAt = time.Time{} }),
		"agent without mnd_": bad(func(s *KeyRecordSpec) { s.CreatedBy.MandateID = "" }),
	}
	for name, s := range cases {
		if _, err := NewKeyRecord(s); err == nil {
			t.Errorf("%s: accepted", name)
		} else if leaksScalar(err.Error(), k) {
			t.Errorf("%s: error carries the private scalar", name)
		}
	}
	obj, err := NewKeyRecord(bad(func(s *KeyRecordSpec) { s.ValidUntil = now.Add(time.Hour); s.Status = KeyRevoked }))
	if err != nil {
		t.Fatal(err)
	}
	if obj["payload"].(map[string]any)["valid_until"] != Timestamp(now.Add(time.Hour)) {
		t.Fatal("valid_until not written")
	}
}

// leaksScalar reports whether s shows k's private scalar in decimal or hex.
func leaksScalar(s string, k *ecdsa.PrivateKey) bool {
	b, err := k.Bytes()
	if err != nil {
		return true
	}
	return strings.Contains(s, new(big.Int).SetBytes(b).String()) || strings.Contains(s, hex.EncodeToString(b))
}
