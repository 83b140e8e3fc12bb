package verify_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"testing"
	"testing/fstest"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// FuzzVerifyMutations mutates the files of a valid, signed bundle (flipped
// bytes, truncated, dropped, duplicated and reordered files, swapped keys)
// and checks that the verifier never panics and never reports a check over
// mutated signed bytes as verified: a verified signature is always one the
// original record made, over the same bytes, under the same key; a
// verified content hash is always the hash of the bytes held.
//
// The input is a list of 4-byte operations {op, a, b, c}.
func FuzzVerifyMutations(f *testing.F) {
	// A record whose acts rebuild, with an approval rule and the approval
	// it calls for, so that mutations reach the act and approval checks.
	rec, err := verifytest.NewWith(verifytest.Config{Events: 5, Acts: true, BuyerRules: acceptanceRule("org_buyer")})
	if err != nil {
		f.Fatal(err)
	}
	direct := rec.Object(rec.EventIDs[0])
	at, err := time.Parse(time.RFC3339, payload(direct)["occurred_at"].(string))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := rec.Approve(rec.Buyer, payload(direct)["action_hash"].(string), role, at.Add(-time.Second), time.Hour); err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir() + "/b"
	if err := bundle.Write(dir, rec.Contents(), bundle.WriteOptions{}); err != nil {
		f.Fatal(err)
	}
	orig, err := bundle.Read(dir)
	if err != nil {
		f.Fatal(err)
	}
	base := map[string][]byte{}
	for _, d := range append(orig.Objects, orig.Mandates...) {
		if base[d.Path], err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(d.Path))); err != nil {
			f.Fatal(err)
		}
	}
	keysJSON, _ := rec.Keys.MarshalJSON()
	base[bundle.KeysFile] = keysJSON
	manifest, _ := canonical.Marshal(map[string]any{"rules_version": "1.3", "transaction_id": rec.TransactionID})
	base[bundle.ManifestFile] = manifest
	names := make([]string, 0, len(base))
	for p := range base {
		names = append(names, p)
	}
	sort.Strings(names)

	// What the original record signed: signing input, value, key.
	signed := map[string]bool{}
	for _, o := range rec.Objects {
		list, _ := signature.Entries(o)
		for _, e := range list {
			if k := signedKey(o, e, rec.Keys, false); k != "" {
				signed[k] = true
			}
		}
	}
	for _, m := range rec.Mandates {
		if k := signedKey(m, nil, rec.Keys, true); k != "" {
			signed[k] = true
		}
	}
	if len(signed) != rec.Signatures() {
		f.Fatalf("%d signatures recorded, the record has %d", len(signed), rec.Signatures())
	}

	f.Fuzz(func(t *testing.T, ops []byte) {
		files := map[string][]byte{}
		for p, d := range base {
			files[p] = d
		}
		order := append([]string(nil), names...)
		for i := 0; i+3 < len(ops) && i < 64; i += 4 {
			mutate(files, &order, ops[i], ops[i+1], ops[i+2], ops[i+3])
		}
		fsys := fstest.MapFS{}
		for p, d := range files {
			fsys[p] = &fstest.MapFile{Data: d}
		}
		b, err := bundle.ReadFS(fsys)
		if err != nil {
			return // refused as a whole: nothing was verified
		}
		opt := opts()
		opt.RulesVersion = b.Manifest.RulesVersion
		rep := verify.Verify(verify.Input{Objects: b.ObjectValues(), Mandates: b.MandateValues(), Keys: b.Keys}, opt)
		checkReport(t, rep, b, signed)
	})
}

// mutate applies one operation to the bundle's files.
func mutate(files map[string][]byte, order *[]string, op, a, b, c byte) {
	names := *order
	if len(names) == 0 {
		return
	}
	name := names[int(a)%len(names)]
	data := files[name]
	switch op % 6 {
	case 0: // flip bits of one byte
		if len(data) > 0 {
			d := append([]byte(nil), data...)
			d[(int(b)<<8|int(c))%len(d)] ^= c | 1
			files[name] = d
		}
	case 1: // drop a file
		delete(files, name)
		*order = remove1(names, name)
	case 2: // duplicate an object or mandate under another name
		if dir := path.Dir(name); dir == bundle.ObjectsDir || dir == bundle.MandatesDir {
			dup := fmt.Sprintf("%s/zz_copy_%d_%d.json", dir, a, b)
			files[dup] = data
			*order = append(names, dup)
		}
	case 3: // swap two files' contents: reorders the objects
		other := names[int(b)%len(names)]
		files[name], files[other] = files[other], data
	case 4: // swap two declared keys
		m, err := canonical.DecodeObject(files[bundle.KeysFile])
		if err != nil || len(m) == 0 {
			return
		}
		ids := make([]string, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		x, y := ids[int(b)%len(ids)], ids[int(c)%len(ids)]
		m[x], m[y] = m[y], m[x]
		if out, err := canonical.Marshal(m); err == nil {
			files[bundle.KeysFile] = out
		}
	case 5: // truncate a file
		if len(data) > 0 {
			files[name] = data[:(int(b)<<8|int(c))%len(data)]
		}
	}
}

func remove1(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// signedKey identifies a signature by what it covers: the SHA-256 of its
// signing input, its value, and the thumbprint of the key the set names
// for its key_id ("" if any of these cannot be had).
func signedKey(doc, entry map[string]any, set *keys.KeySet, mandate bool) string {
	var in []byte
	var err error
	if mandate {
		entry, _ = doc["proof"].(map[string]any)
		in, err = signature.MandateSigningInput(doc)
	} else {
		in, err = signature.SigningInput(doc, entry)
	}
	if err != nil || entry == nil || set == nil {
		return ""
	}
	keyID, _ := entry["key_id"].(string)
	value, _ := entry["signature"].(string)
	pub, err := set.Lookup(keyID)
	if err != nil {
		return ""
	}
	tp, err := keys.Thumbprint(pub)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x %s %s", sha256.Sum256(in), value, tp)
}

func checkReport(t *testing.T, rep *verify.Report, b *bundle.Bundle, signed map[string]bool) {
	var counts verify.Counts
	for _, c := range rep.Checks {
		switch c.Result {
		case verify.Verified:
			counts.Verified++
		case verify.Failed:
			counts.Failed++
			if !reason.Registered(c.Code) {
				t.Fatalf("failed check %s with unregistered code %q", c.Name, c.Code)
			}
		case verify.NotCheckable:
			counts.NotCheckable++
		default:
			t.Fatalf("check %s has result %q", c.Name, c.Result)
		}
		if (c.Result == verify.Failed) != (c.Code != "") {
			t.Fatalf("check %s %s carries code %q", c.Name, c.Result, c.Code)
		}
		if c.Result != verify.Verified {
			continue
		}
		switch {
		case c.Name == "content_hash":
			if !someObject(b.ObjectValues(), c.Subject, func(o map[string]any) bool {
				h, err := canonical.ContentHash(o)
				return err == nil && h == o["content_hash"]
			}) {
				t.Fatalf("content_hash of %s verified over bytes that do not hash to it", c.Subject)
			}
		case len(c.Name) > 10 && c.Name[:10] == "signature[":
			var i int
			if _, err := fmt.Sscanf(c.Name, "signature[%d]", &i); err != nil {
				t.Fatal(err)
			}
			if !someObject(b.ObjectValues(), c.Subject, func(o map[string]any) bool {
				list, err := signature.Entries(o)
				return err == nil && i < len(list) && signed[signedKey(o, list[i], b.Keys, false)]
			}) {
				t.Fatalf("%s of %s verified, but it is not a signature the record made over these bytes with this key", c.Name, c.Subject)
			}
		case c.Name == "mandate_proof":
			if !someObject(b.MandateValues(), c.Subject, func(m map[string]any) bool {
				return signed[signedKey(m, nil, b.Keys, true)]
			}) {
				t.Fatalf("the proof of %s verified, but the record made no such proof", c.Subject)
			}
		}
	}
	if counts != rep.Results {
		t.Fatalf("results %+v, counted %+v", rep.Results, counts)
	}
}

// someObject reports whether any document the subject names satisfies
// ok: those with that id, or for a document without one ("objects[3]",
// "mandates[0]") the one at that position.
func someObject(docs []map[string]any, subject string, ok func(map[string]any) bool) bool {
	var i int
	if _, err := fmt.Sscanf(subject, "objects[%d]", &i); err == nil && i >= 0 && i < len(docs) {
		return ok(docs[i])
	}
	if _, err := fmt.Sscanf(subject, "mandates[%d]", &i); err == nil && i >= 0 && i < len(docs) {
		return ok(docs[i])
	}
	for _, d := range docs {
		if d["id"] == subject && ok(d) {
			return true
		}
	}
	return false
}
