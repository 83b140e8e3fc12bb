package signature

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"filippo.io/nistec"
)

// The Wycheproof vectors for ECDSA P-256 with SHA-256 (github.com/google/
// wycheproof), fetched as a Go module the way the standard library's
// crypto tests fetched them: `go mod download` of one pinned version, run
// outside this module so that go.mod never names it. The vectors are
// test data of this file only.
const (
	wycheproofModule  = "github.com/google/wycheproof"
	wycheproofVersion = "v0.0.0-20191219022705-2196000605e4"
)

// wycheproofDir returns the directory of the downloaded module. When the
// download fails the test is skipped, unless A202_REQUIRE_VECTORS=1 (as
// .ci/run sets it): then it fails, so that CI cannot pass without them.
func wycheproofDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", wycheproofModule+"@"+wycheproofVersion)
	cmd.Dir = t.TempDir() // outside any module: go.mod and go.sum stay as they are
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); err == nil {
		err = jerr
	}
	if err == nil && mod.Dir == "" {
		err = &os.PathError{Op: "go mod download", Path: wycheproofModule, Err: os.ErrNotExist}
	}
	if err != nil {
		msg := "fetching the Wycheproof vectors (" + wycheproofModule + "@" + wycheproofVersion + "): " + err.Error()
		if mod.Error != "" {
			msg += ": " + mod.Error
		}
		if os.Getenv("A202_REQUIRE_VECTORS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; set A202_REQUIRE_VECTORS=1 to make this a failure")
	}
	return mod.Dir
}

type wycheproofFile struct {
	Algorithm     string `json:"algorithm"`
	NumberOfTests int    `json:"numberOfTests"`
	TestGroups    []struct {
		Key struct {
			Curve        string `json:"curve"`
			Uncompressed string `json:"uncompressed"`
		} `json:"key"`
		SHA   string `json:"sha"`
		Tests []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Msg     string   `json:"msg"`
			Sig     string   `json:"sig"`
			Result  string   `json:"result"` // valid, invalid, acceptable
			Flags   []string `json:"flags"`
		} `json:"tests"`
	} `json:"testGroups"`
}

func readWycheproof(t *testing.T, dir, name string) *wycheproofFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "testvectors", name))
	if err != nil {
		t.Fatal(err)
	}
	var f wycheproofFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if f.Algorithm != "ECDSA" || len(f.TestGroups) == 0 {
		t.Fatalf("%s: not the ECDSA vectors (%q, %d groups)", name, f.Algorithm, len(f.TestGroups))
	}
	return &f
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withForcedTable makes pub's table tab for verifyES256, as if the key
// had been used keyTableAfter times (and whatever the number of tables
// held), for the rest of the test.
func withForcedTable(t *testing.T, point []byte, tab *p256Table) {
	t.Helper()
	u := new(keyUse)
	u.uses.Store(keyTableAfter)
	u.once.Do(func() { u.table = tab })
	keyUses.Store(string(point), u)
	t.Cleanup(func() { keyUses.Delete(string(point)) })
	if tableForPoint(point) != tab {
		t.Fatal("the forced table is not the one verifyES256 uses")
	}
}

// wycheproofKey parses a group's key and builds its table.
func wycheproofKey(t *testing.T, curve, uncompressed string) (*ecdsa.PublicKey, []byte, *p256Table) {
	t.Helper()
	if curve != "secp256r1" {
		t.Fatalf("curve %q", curve)
	}
	point := mustHex(t, uncompressed)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		t.Fatalf("key %x: %v", point, err)
	}
	q, err := nistec.NewP256Point().SetBytes(point)
	if err != nil {
		t.Fatal(err)
	}
	return pub, point, newP256Table(q)
}

// esCheck runs r‖s over digest through every ES256 path of this package
// with pub's table forced: the table alone, verifyES256 (table and memo,
// the quick path's), verifyES256With(nil) (DER for crypto/ecdsa), and
// verifyRaw (the full check, from the signing input's bytes). It returns
// crypto/ecdsa's answer after checking that each path gives it.
func esCheck(t *testing.T, what string, pub *ecdsa.PublicKey, tab *p256Table, memo *Memo, msg []byte, raw *[64]byte) bool {
	t.Helper()
	digest := sha256.Sum256(msg)
	want := ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:]))
	if got := tab.verify(&digest, raw); got != want {
		t.Errorf("%s: the table says %v, crypto/ecdsa %v", what, got, want)
	}
	for range 2 { // the second time, an accepted signature is in the memo
		if got := verifyES256(pub, &digest, raw, memo); got != want {
			t.Errorf("%s: verifyES256 says %v, crypto/ecdsa %v", what, got, want)
		}
	}
	if got := verifyES256With(nil, pub, &digest, raw); got != want {
		t.Errorf("%s: the DER fallback says %v, crypto/ecdsa %v", what, got, want)
	}
	full := verifyRaw(msg, ES256, base64.RawURLEncoding.EncodeToString(raw[:]), pub, what)
	if (full == nil) != want {
		t.Errorf("%s: the full check says %v, crypto/ecdsa %v", what, full, want)
	}
	return want
}

// judge checks crypto/ecdsa's answer against the vector's result:
// "valid" accepted, "invalid" refused, "acceptable" either.
func judge(t *testing.T, what, result string, flags []string, got bool) {
	t.Helper()
	switch {
	case result == "valid" && !got:
		t.Errorf("%s: valid vector refused", what)
	case result == "invalid" && got:
		t.Errorf("%s: invalid vector accepted (flags %v)", what, flags)
	case result != "valid" && result != "invalid" && result != "acceptable":
		t.Errorf("%s: unknown result %q", what, result)
	}
}

// TestWycheproofES256 runs every P-256/SHA-256 vector in the JOSE form
// party uses (IEEE P1363, r‖s) through the table, the quick path with the
// table forced for the vector's key, the DER fallback and the full check;
// and every DER vector whose integers fit r‖s through the same paths,
// with crypto/ecdsa's VerifyASN1 of the DER as the library's answer.
func TestWycheproofES256(t *testing.T) {
	dir := wycheproofDir(t)
	var valid, invalid, acceptable, wrongLength int

	p1363 := readWycheproof(t, dir, "ecdsa_secp256r1_sha256_p1363_test.json")
	for _, g := range p1363.TestGroups {
		if g.SHA != "SHA-256" {
			t.Fatalf("p1363: hash %q", g.SHA)
		}
		pub, point, tab := wycheproofKey(t, g.Key.Curve, g.Key.Uncompressed)
		withForcedTable(t, point, tab)
		memo := new(Memo)
		for _, tc := range g.Tests {
			what := "p1363 tcId " + strconv.Itoa(tc.TcID) + " (" + tc.Comment + ")"
			msg, sig := mustHex(t, tc.Msg), mustHex(t, tc.Sig)
			if len(sig) != 64 {
				// Not r‖s of P-256: quickEntry declines any value but 86
				// base64url characters, and the full check refuses it.
				wrongLength++
				full := verifyRaw(msg, ES256, base64.RawURLEncoding.EncodeToString(sig), pub, what)
				if full == nil {
					t.Errorf("%s: a %d-byte value verifies", what, len(sig))
				}
				judge(t, what, tc.Result, tc.Flags, full == nil)
				continue
			}
			got := esCheck(t, what, pub, tab, memo, msg, (*[64]byte)(sig))
			judge(t, what, tc.Result, tc.Flags, got)
			switch tc.Result {
			case "valid":
				valid++
			case "invalid":
				invalid++
			default:
				acceptable++
			}
		}
	}

	der := readWycheproof(t, dir, "ecdsa_secp256r1_sha256_test.json")
	derRaw := 0
	for _, g := range der.TestGroups {
		pub, point, tab := wycheproofKey(t, g.Key.Curve, g.Key.Uncompressed)
		withForcedTable(t, point, tab)
		memo := new(Memo)
		for _, tc := range g.Tests {
			what := "der tcId " + strconv.Itoa(tc.TcID) + " (" + tc.Comment + ")"
			msg, sig := mustHex(t, tc.Msg), mustHex(t, tc.Sig)
			digest := sha256.Sum256(msg)
			lib := ecdsa.VerifyASN1(pub, digest[:], sig)
			judge(t, what, tc.Result, tc.Flags, lib)
			var rs struct{ R, S *big.Int }
			if rest, err := asn1.Unmarshal(sig, &rs); err != nil || len(rest) != 0 ||
				rs.R.Sign() < 0 || rs.S.Sign() < 0 || rs.R.BitLen() > 256 || rs.S.BitLen() > 256 {
				continue // no r‖s to speak of
			}
			var raw [64]byte
			rs.R.FillBytes(raw[:32])
			rs.S.FillBytes(raw[32:])
			derRaw++
			got := esCheck(t, what, pub, tab, memo, msg, &raw)
			// A DER encoding that is the one derSignature writes is the
			// same question as r‖s: the library's answer to it is ours.
			if enc, ok := derSignature(nil, &raw); ok && bytes.Equal(enc, sig) && got != lib {
				t.Errorf("%s: r‖s says %v, crypto/ecdsa on the DER %v", what, got, lib)
			}
		}
	}
	t.Logf("p1363: %d valid, %d invalid, %d acceptable through every path, %d of another length; der: %d of %d with r‖s",
		valid, invalid, acceptable, wrongLength, derRaw, der.NumberOfTests)
	if valid < 100 || invalid < 20 || derRaw < 200 {
		t.Fatalf("too few vectors run (%d valid, %d invalid, %d from DER): the files were not read", valid, invalid, derRaw)
	}
}
