package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
)

// Contents is what Write lays out.
type Contents struct {
	Manifest Manifest
	// Objects are envelope objects, key_records included; each is written
	// to objects/<id>.json.
	Objects []map[string]any
	// Mandates are standalone mandates, each written to mandates/<id>.json.
	Mandates []map[string]any
	// Keys, when not nil, are written to keys.json.
	Keys *keys.KeySet
	// Stored are the exact bytes an object or mandate was stored as, by
	// id, when the caller holds them (an export): those bytes are written,
	// not the value encoded again, so a bundle carries what was signed
	// and kept byte for byte. They must decode to the value beside them.
	Stored map[string][]byte
}

// WriteOptions choose what to leave out of a bundle (selective disclosure,
// evidence verification §6).
type WriteOptions struct {
	// OmitStreams are streams, as "kind:id" (for example
	// "transaction:txn_…"), whose transaction events are left out.
	OmitStreams []string
	// OmitObjects are ids of objects or mandates left out.
	OmitObjects []string
}

// fileID is what an id must look like to name a file: the kernel's
// identifier pattern, which admits no path separator and no dot.
var fileID = regexp.MustCompile(`^[a-z]{3}_[A-Za-z0-9][A-Za-z0-9_-]{2,127}$`)

// Write lays c out as a bundle in dir, which must not exist or be empty.
// Every file holds RFC 8785 canonical bytes, so two exports of one record
// are byte-identical. The bundle is assembled in a temporary directory
// beside dir and renamed into place, so a failed write leaves no partial
// bundle behind.
func Write(dir string, c Contents, opt WriteOptions) error {
	files, err := layout(c, opt)
	if err != nil {
		return err
	}
	if err := ensureAbsentOrEmpty(dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), ".bundle-*")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	for _, d := range []string{ObjectsDir, MandatesDir} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(tmp, filepath.FromSlash(f.Path)), f.Bytes, 0o644); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

func ensureAbsentOrEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != io.EOF {
		if err == nil {
			return fmt.Errorf("bundle: %s is not empty", dir)
		}
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// file is one file Write lays out: its path in the bundle and its bytes.
type file struct {
	Path  string
	Bytes []byte
}

// layout computes the files of a bundle, without touching the disk.
func layout(c Contents, opt WriteOptions) ([]file, error) {
	omitObj := map[string]bool{}
	for _, id := range opt.OmitObjects {
		omitObj[id] = true
	}
	omitStream := map[string]bool{}
	for _, s := range opt.OmitStreams {
		omitStream[s] = true
	}
	var files []file
	written := map[string][]byte{}
	put := func(dir string, v map[string]any) error {
		id, _ := v["id"].(string)
		if !fileID.MatchString(id) {
			return fmt.Errorf("bundle: an object's id %q cannot name a file", id)
		}
		if omitObj[id] {
			return nil
		}
		data, stored := c.Stored[id]
		if !stored {
			var err error
			if data, err = canonical.Marshal(v); err != nil {
				return fmt.Errorf("bundle: %s: %w", id, err)
			}
		}
		// What Read would refuse (a fraction, an integer beyond I-JSON) is
		// not written: the bundle would be unreadable by its own reader.
		back, err := canonical.DecodeObject(data)
		if err != nil {
			return fmt.Errorf("bundle: %s: %w", id, err)
		}
		if stored && !reflect.DeepEqual(back, v) {
			return fmt.Errorf("bundle: the stored bytes of %s are not its value", id)
		}
		p := dir + "/" + id + ".json"
		if prev, dup := written[p]; dup {
			if bytes.Equal(prev, data) {
				return nil
			}
			return fmt.Errorf("bundle: two different objects have id %s", id)
		}
		written[p] = data
		files = append(files, file{Path: p, Bytes: data})
		return nil
	}
	for _, o := range c.Objects {
		if o == nil {
			continue
		}
		if o["object_type"] == "transaction_event" && omitStream[streamKey(o)] {
			continue
		}
		if err := put(ObjectsDir, o); err != nil {
			return nil, err
		}
	}
	for _, m := range c.Mandates {
		if m == nil {
			continue
		}
		if err := put(MandatesDir, m); err != nil {
			return nil, err
		}
	}
	manifest := map[string]any{"transaction_id": nil}
	if c.Manifest.TransactionID != "" {
		manifest["transaction_id"] = c.Manifest.TransactionID
	}
	if c.Manifest.RulesVersion != "" {
		manifest["rules_version"] = c.Manifest.RulesVersion
	}
	// A disclosure statement is written only when made: nil leaves the
	// member out, so a bundle.json without one reads as before.
	for member, list := range map[string][]string{"stated_gaps": c.Manifest.StatedGaps, "resolvable_hashes": c.Manifest.ResolvableHashes} {
		if list != nil {
			arr := make([]any, len(list))
			for i, s := range list {
				arr[i] = s
			}
			manifest[member] = arr
		}
	}
	data, err := canonical.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("bundle: %s: %w", ManifestFile, err)
	}
	if _, err := ParseManifest(data); err != nil {
		return nil, err // refuse to write what Read would refuse
	}
	files = append(files, file{Path: ManifestFile, Bytes: data})
	if c.Keys != nil {
		data, err := c.Keys.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("bundle: %s: %w", KeysFile, err)
		}
		files = append(files, file{Path: KeysFile, Bytes: data})
	}
	return files, nil
}

// streamKey is an event's stream as "kind:id".
func streamKey(o map[string]any) string {
	p, _ := o["payload"].(map[string]any)
	s, _ := p["stream"].(map[string]any)
	kind, _ := s["kind"].(string)
	id, _ := s["id"].(string)
	return kind + ":" + id
}
