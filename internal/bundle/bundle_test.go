package bundle_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/verify/verifytest"
)

func TestReadReferenceVectors(t *testing.T) {
	dir := spectest.ReferenceVectors(t)
	b, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 18 objects of the record and the 4 key_records kept beside them.
	if len(b.Objects) != 22 || len(b.Mandates) != 2 || b.Keys == nil || b.Keys.Len() != 4 {
		t.Fatalf("%d objects, %d mandates, keys %v", len(b.Objects), len(b.Mandates), b.Keys)
	}
	if !b.HasManifest || b.Manifest.RulesVersion != "1.3" || b.Manifest.TransactionID != "txn_calibration_demo_01" {
		t.Errorf("manifest %+v", b.Manifest)
	}
	for _, d := range b.Objects {
		onDisk, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(d.Path)))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := canonical.DecodeObject(onDisk)
		if !reflect.DeepEqual(v, d.Value) {
			t.Errorf("%s: the value is not the bytes decoded", d.Path)
		}
	}
	if b.Objects[0].Path[:len("objects/")] != "objects/" || !strings.HasPrefix(b.Objects[len(b.Objects)-1].Path, "key_records/") {
		t.Errorf("objects/ then key_records/, in name order: %s … %s", b.Objects[0].Path, b.Objects[len(b.Objects)-1].Path)
	}
}

// A minimal readable bundle, to break one file at a time.
func minimal() fstest.MapFS {
	return fstest.MapFS{
		"bundle.json":          {Data: []byte(`{"rules_version":"1.3","transaction_id":"txn_test_0001"}`)},
		"objects/a.json":       {Data: []byte(`{"id":"off_test_0001"}`)},
		"objects/notes.txt":    {Data: []byte("not JSON, and not read")},
		"mandates/m.json":      {Data: []byte(`{"id":"mnd_test_0001"}`)},
		"README.md":            {Data: []byte("# beside the bundle")},
		"objects/sub/x.json":   {Data: []byte("{")}, // in a subdirectory: not read
		"key_records/k.json":   {Data: []byte(`{"id":"key_test_0001"}`)},
		"keys.json":            {Data: []byte(`{}`)},
		"mandates/README.json": {Data: []byte(`{"note":"an object is an object"}`)},
	}
}

func TestReadFS(t *testing.T) {
	b, err := bundle.ReadFS(minimal())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Objects) != 2 || len(b.Mandates) != 2 || b.Keys == nil || b.Keys.Len() != 0 {
		t.Errorf("%d objects, %d mandates, keys %v", len(b.Objects), len(b.Mandates), b.Keys)
	}

	fsys := minimal()
	delete(fsys, "bundle.json")
	delete(fsys, "keys.json")
	b, err = bundle.ReadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if b.HasManifest || b.Manifest.RulesVersion != "" || b.Keys != nil {
		t.Errorf("without bundle.json and keys.json: %+v, keys %v", b.Manifest, b.Keys)
	}
}

func TestReadRefusals(t *testing.T) {
	for name, c := range map[string]struct {
		file, data string
	}{
		"duplicate member":         {"objects/a.json", `{"id":"off_a","id":"off_b"}`},
		"float":                    {"objects/a.json", `{"version":1.0}`},
		"trailing data":            {"objects/a.json", `{} {}`},
		"not an object":            {"objects/a.json", `["off_a"]`},
		"invalid UTF-8":            {"mandates/m.json", "{\"id\":\"\xff\"}"},
		"bundle.json member":       {"bundle.json", `{"rules_version":"1.3","rules":"latest"}`},
		"bundle.json version type": {"bundle.json", `{"rules_version":13}`},
		"bundle.json transaction":  {"bundle.json", `{"transaction_id":"off_x"}`},
		"stated_gaps not an array": {"bundle.json", `{"stated_gaps":"evd_test_0001"}`},
		"stated_gaps null":         {"bundle.json", `{"stated_gaps":null}`},
		"stated_gaps number":       {"bundle.json", `{"stated_gaps":[1]}`},
		"stated_gaps empty string": {"bundle.json", `{"stated_gaps":[""]}`},
		"stated_gaps path":         {"bundle.json", `{"stated_gaps":["../objects/evd_test_0001"]}`},
		"stated_gaps twice":        {"bundle.json", `{"stated_gaps":["evd_test_0001","evd_test_0001"]}`},
		"stated_gaps upper hash":   {"bundle.json", `{"stated_gaps":["` + strings.Repeat("A", 64) + `"]}`},
		"resolvable_hashes id":     {"bundle.json", `{"resolvable_hashes":["evd_test_0001"]}`},
		"resolvable_hashes short":  {"bundle.json", `{"resolvable_hashes":["` + strings.Repeat("a", 63) + `"]}`},
		"resolvable_hashes null":   {"bundle.json", `{"resolvable_hashes":null}`},
		"resolvable_hashes twice":  {"bundle.json", `{"resolvable_hashes":["` + strings.Repeat("b", 64) + `","` + strings.Repeat("b", 64) + `"]}`},
		"keys.json private member": {"keys.json", `{"key_test_0001":{"kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}}`},
		"key_records":              {"key_records/k.json", `{`},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := minimal()
			fsys[c.file] = &fstest.MapFile{Data: []byte(c.data)}
			if _, err := bundle.ReadFS(fsys); err == nil {
				t.Fatalf("%s accepted", c.file)
			}
		})
	}
	fsys := minimal()
	for p := range fsys {
		if strings.HasPrefix(p, "objects/") {
			delete(fsys, p)
		}
	}
	if _, err := bundle.ReadFS(fsys); !errors.Is(err, bundle.ErrNotBundle) {
		t.Errorf("no objects/: %v", err)
	}
	if _, err := bundle.Read(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("a missing directory read")
	}
}

func TestWriteRead(t *testing.T) {
	rec, err := verifytest.New(7)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := bundle.Write(dir, rec.Contents(), bundle.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Objects) != len(rec.Objects) || len(b.Mandates) != 2 || b.Keys.Len() != 4 {
		t.Fatalf("%d objects, %d mandates, %d keys", len(b.Objects), len(b.Mandates), b.Keys.Len())
	}
	if !reflect.DeepEqual(b.Manifest, bundle.Manifest{RulesVersion: verifytest.RulesVersion, TransactionID: rec.TransactionID}) || b.Manifest.StatesDisclosure() {
		t.Errorf("manifest %+v", b.Manifest)
	}
	byID := map[string]map[string]any{}
	for _, o := range rec.Objects {
		byID[o["id"].(string)] = o
	}
	for _, d := range b.Objects {
		id := d.Value["id"].(string)
		if d.Path != "objects/"+id+".json" {
			t.Errorf("%s holds %s", d.Path, id)
		}
		want, err := canonical.Marshal(byID[id])
		if err != nil {
			t.Fatal(err)
		}
		if onDisk, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(d.Path))); !bytes.Equal(onDisk, want) {
			t.Errorf("%s is not the object's canonical bytes", d.Path)
		}
		if !reflect.DeepEqual(d.Value, byID[id]) {
			t.Errorf("%s does not read back as written", d.Path)
		}
	}
	// Two writes of one record are byte-identical.
	again := filepath.Join(t.TempDir(), "again")
	if err := bundle.Write(again, rec.Contents(), bundle.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bundle.json", "keys.json", "objects/" + rec.EventIDs[0] + ".json"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(again, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two writes", f)
		}
	}
}

func TestWriteOmits(t *testing.T) {
	rec, err := verifytest.New(5)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	opt := bundle.WriteOptions{OmitStreams: []string{"transaction:" + rec.TransactionID}, OmitObjects: []string{"evd_synthetic_0001", rec.Buyer.MandateID}}
	if err := bundle.Write(dir, rec.Contents(), opt); err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append(b.Objects, b.Mandates...) {
		id := d.Value["id"]
		if d.Value["object_type"] == "transaction_event" || id == "evd_synthetic_0001" || id == rec.Buyer.MandateID {
			t.Errorf("%v was to be left out", id)
		}
	}
	if len(b.Objects) != len(rec.Objects)-5-1 || len(b.Mandates) != 1 {
		t.Errorf("%d objects and %d mandates written", len(b.Objects), len(b.Mandates))
	}
}

func TestWriteRefusals(t *testing.T) {
	rec, err := verifytest.New(1)
	if err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.Write(full, rec.Contents(), bundle.WriteOptions{}); err == nil {
		t.Error("wrote into a non-empty directory")
	}
	empty := t.TempDir()
	if err := bundle.Write(empty, rec.Contents(), bundle.WriteOptions{}); err != nil {
		t.Errorf("an empty directory: %v", err)
	}
	for name, objs := range map[string][]map[string]any{
		"path in id":   {{"id": "../../etc/passwd"}},
		"dot in id":    {{"id": "off_a.b.c"}},
		"no id":        {{"object_type": "offer"}},
		"id twice":     {{"id": "off_same_0001", "n": "1"}, {"id": "off_same_0001", "n": "2"}},
		"not a number": {{"id": "off_float_0001", "x": 1.5}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			if err := bundle.Write(dir, bundle.Contents{Objects: objs}, bundle.WriteOptions{}); err == nil {
				t.Fatal("written")
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused write left %s behind", dir)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "b")
	if err := bundle.Write(dir, bundle.Contents{Objects: []map[string]any{{"id": "off_same_0001"}, {"id": "off_same_0001"}}}, bundle.WriteOptions{}); err != nil {
		t.Errorf("one object twice: %v", err)
	}
	if err := bundle.Write(filepath.Join(t.TempDir(), "c"), bundle.Contents{Manifest: bundle.Manifest{TransactionID: "nope"}}, bundle.WriteOptions{}); err == nil {
		t.Error("wrote a bundle.json Read refuses")
	}
	// Stored bytes are written as they are, and only when they are the
	// value beside them.
	obj := map[string]any{"id": "off_stored_0001", "n": "1"}
	kept := []byte(`{"id":"off_stored_0001","n":"1"}`)
	dir = filepath.Join(t.TempDir(), "d")
	if err := bundle.Write(dir, bundle.Contents{Objects: []map[string]any{obj}, Stored: map[string][]byte{"off_stored_0001": kept}}, bundle.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "objects", "off_stored_0001.json")); !bytes.Equal(got, kept) {
		t.Errorf("wrote %s, not the stored bytes", got)
	}
	other := []byte(`{"id":"off_stored_0001","n":"2"}`)
	if err := bundle.Write(filepath.Join(t.TempDir(), "e"), bundle.Contents{Objects: []map[string]any{obj}, Stored: map[string][]byte{"off_stored_0001": other}}, bundle.WriteOptions{}); err == nil {
		t.Error("wrote stored bytes that are not the object's value")
	}
}

// bundle.json's disclosure statement: absent in a manifest of the older
// form (which stays valid), present when either member is, with an empty
// stated_gaps a statement that nothing was withheld.
func TestManifestDisclosure(t *testing.T) {
	hash := strings.Repeat("0123456789abcdef", 4)
	for name, c := range map[string]struct {
		data           string
		stated         bool
		gaps, resolved []string
	}{
		"older form":        {`{"rules_version":"1.3","transaction_id":"txn_test_0001"}`, false, nil, nil},
		"nothing at all":    {`{}`, false, nil, nil},
		"nothing withheld":  {`{"rules_version":"1.3","stated_gaps":[]}`, true, []string{}, nil},
		"ids and hashes":    {`{"stated_gaps":["evd_test_0001","dsp_test_0002","` + hash + `"]}`, true, []string{"evd_test_0001", "dsp_test_0002", hash}, nil},
		"resolvable only":   {`{"resolvable_hashes":["` + hash + `"]}`, true, nil, []string{hash}},
		"both, empty lists": {`{"resolvable_hashes":[],"stated_gaps":[]}`, true, []string{}, []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := bundle.ParseManifest([]byte(c.data))
			if err != nil {
				t.Fatal(err)
			}
			if m.StatesDisclosure() != c.stated || !reflect.DeepEqual(m.StatedGaps, c.gaps) || !reflect.DeepEqual(m.ResolvableHashes, c.resolved) {
				t.Errorf("%+v (states disclosure %v)", m, m.StatesDisclosure())
			}
		})
	}
}

// Write puts the disclosure statement in bundle.json only when the
// manifest makes one, and Read gives it back as written.
func TestWriteDisclosure(t *testing.T) {
	rec, err := verifytest.New(3)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("f", 64)
	for name, c := range map[string]struct {
		gaps, resolved []string
		file           string
	}{
		"unstated":         {nil, nil, `{"rules_version":"1.3","transaction_id":"txn_synthetic_0001"}`},
		"nothing withheld": {[]string{}, nil, `{"rules_version":"1.3","stated_gaps":[],"transaction_id":"txn_synthetic_0001"}`},
		"withheld": {[]string{"evd_synthetic_0001"}, []string{hash},
			`{"resolvable_hashes":["` + hash + `"],"rules_version":"1.3","stated_gaps":["evd_synthetic_0001"],"transaction_id":"txn_synthetic_0001"}`},
	} {
		t.Run(name, func(t *testing.T) {
			contents := rec.Contents()
			contents.Manifest.StatedGaps, contents.Manifest.ResolvableHashes = c.gaps, c.resolved
			dir := filepath.Join(t.TempDir(), "b")
			if err := bundle.Write(dir, contents, bundle.WriteOptions{OmitObjects: c.gaps}); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, bundle.ManifestFile))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != c.file {
				t.Errorf("bundle.json is %s, want %s", data, c.file)
			}
			b, err := bundle.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(b.Manifest, contents.Manifest) {
				t.Errorf("read back %+v, wrote %+v", b.Manifest, contents.Manifest)
			}
		})
	}
	bad := rec.Contents()
	bad.Manifest.StatedGaps = []string{"not an id"}
	if err := bundle.Write(filepath.Join(t.TempDir(), "b"), bad, bundle.WriteOptions{}); err == nil {
		t.Error("wrote stated_gaps Read refuses")
	}
}
