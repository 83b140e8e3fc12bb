package history_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/history"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

// TestWriteHistory writes a history to keep, when PARTY_HISTORY_OUT names
// a directory that does not exist yet: the buyer's and the supplier's
// state directories (OUT/org_northstar, OUT/org_delta), holding the
// templates and PARTY_HISTORY_N (default 1000) generated transactions in
// the default mix. The copies are taken once every write is committed
// (the database with its write-ahead log); each is then opened anew and
// the first 20 generated transactions verified from it.
//
//	PARTY_HISTORY_OUT=/dev/shm/h100k PARTY_HISTORY_N=100000 go test -run TestWriteHistory -timeout 0 ./internal/history
func TestWriteHistory(t *testing.T) {
	out := os.Getenv("PARTY_HISTORY_OUT")
	if out == "" {
		t.Skip("PARTY_HISTORY_OUT names no directory to write a history to")
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s exists", out)
	}
	n := 1000
	if v := os.Getenv("PARTY_HISTORY_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			t.Fatalf("PARTY_HISTORY_N=%s", v)
		}
	}
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	src := history.Trade(t, b, s, c)
	w0 := time.Now()
	txns, err := src.Generate(ctx, n, history.DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated %d transactions in %v", n, time.Since(w0))
	for _, sd := range []*recordtest.Side{b, s} {
		dst := filepath.Join(out, sd.Node.Org.Config().OrganizationID)
		if err := copyDir(sd.Node.Dir, dst); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(filepath.Join(dst, instance.DatabaseFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range txns[:min(20, len(txns))] {
			r, err := export.VerifyTransaction(ctx, st, x.ID)
			if err != nil || r.Results.Failed != 0 {
				t.Fatalf("%s in %s: %v %+v", x.ID, dst, err, r.Raised)
			}
		}
		st.Close()
		t.Logf("wrote %s", dst)
	}
}

// copyDir copies the regular files under src to dst, but SQLite's shared
// memory index, which a reader rebuilds.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() || filepath.Ext(path) == ".db-shm" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		o, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			o.Close()
			return err
		}
		return o.Close()
	})
}
