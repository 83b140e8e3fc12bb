package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/store"
)

func init() {
	register("backup", "copy a state directory, database and keys, while serve runs", runBackup)
}

const backupUsage = `Usage: party backup --dir DIR [--json] OUTDIR

Writes a new state directory at OUTDIR (which must not exist) that is a
complete copy of the instance in DIR: party.db, as one consistent
snapshot of the database written by SQLite's VACUUM INTO, and every other
file of DIR with its mode (config.json, keys/, tls/, tokens/, peer.json,
peers/ and whatever else is there). serve.lock, party.db's -wal and -shm
files and leftover party.db.new-* files are not copied. It works while
'party serve' runs on DIR: it neither takes the serve lock nor stops
serve's writes. The copy is built beside OUTDIR and renamed into place
when it is whole.

The backup holds the organisation's private keys (the principal's, the
agents', the TLS key) and its tokens: keep it as securely as the state
directory itself.

To restore: stop 'party serve', move the backup into the state
directory's place (or point --dir at it), start 'party serve'.

Exit status: 0 when the backup is written, 1 on failure, 2 on a usage error.
`

// backupSummary is what `party backup` prints.
type backupSummary struct {
	Dir           string `json:"dir"`
	Out           string `json:"out"`
	DatabaseBytes int64  `json:"database_bytes"`
	Transactions  int    `json:"transactions"`
	Files         int    `json:"files"` // besides party.db
}

func runBackup(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party backup", backupUsage)
	dir := c.dirFlag()
	asJSON := c.Bool("json", false, "print a JSON summary")
	pos, code, done := c.parseDir(args, dir, stdout, stderr)
	switch {
	case done:
		return code
	case len(pos) != 1:
		return c.usageError(stderr, "give exactly one OUTDIR")
	}
	out := filepath.Clean(pos[0]) // "b/" names b, not a place inside it
	if _, err := os.Lstat(out); err == nil {
		fmt.Fprintf(stderr, "party backup: %s already exists; a backup is written to a new directory\n", out)
		return 1
	}
	if inside(*dir, out) {
		fmt.Fprintf(stderr, "party backup: %s is inside the state directory %s\n", out, *dir)
		return 1
	}
	st := openRecord("party backup", *dir, stderr)
	if st == nil {
		return 1
	}
	defer st.Close()
	sum, err := backupInstance(context.Background(), st, *dir, out)
	if err != nil {
		fmt.Fprintf(stderr, "party backup: %v\n", err)
		return 1
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(sum)
		return 0
	}
	fmt.Fprintf(stdout, "backed up %s to %s: %s %d bytes, %d transactions, %d other files\n",
		sum.Dir, sum.Out, instance.DatabaseFile, sum.DatabaseBytes, sum.Transactions, sum.Files)
	return 0
}

// inside reports whether path is dir or below it.
func inside(dir, path string) bool {
	d, err1 := filepath.Abs(dir)
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && (rel == "." || !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != "..")
}

// notCopied reports whether the state directory's top-level file name is
// left out of a backup: the serve lock, which belongs to a running
// process, and the database's own files, of which the backup holds the
// snapshot (party.db) instead.
func notCopied(name string) bool {
	switch name {
	case instance.ServeLockFile, instance.DatabaseFile,
		instance.DatabaseFile + "-wal", instance.DatabaseFile + "-shm", instance.DatabaseFile + "-journal":
		return true
	}
	return strings.HasPrefix(name, instance.DatabaseFile+".new-")
}

// backupInstance writes the backup of dir, whose database st is, to out:
// built in a directory beside out, every file and directory synced, then
// renamed to out, so out names a whole backup or nothing.
func backupInstance(ctx context.Context, st *store.Store, dir, out string) (backupSummary, error) {
	sum := backupSummary{Dir: dir, Out: out}
	info, err := os.Stat(dir)
	if err != nil {
		return sum, err
	}
	parent := filepath.Dir(out)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".partial-")
	if err != nil {
		return sum, err
	}
	defer os.RemoveAll(tmp) // nothing is there once renamed
	// The database first: the snapshot is taken now, and the files copied
	// after it.
	db, err := st.Backup(ctx, filepath.Join(tmp, instance.DatabaseFile))
	if err != nil {
		return sum, err
	}
	sum.DatabaseBytes, sum.Transactions = db.Bytes, db.Transactions
	if dbInfo, err := os.Stat(filepath.Join(dir, instance.DatabaseFile)); err == nil {
		if err := os.Chmod(db.Path, dbInfo.Mode().Perm()); err != nil {
			return sum, err
		}
	}
	// Directories get their modes once their contents are written (a
	// read-only one could not be written into), deepest first.
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	dirs := []dirMode{{tmp, info.Mode().Perm()}}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed since its directory was read
			}
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if !strings.ContainsRune(rel, filepath.Separator) && notCopied(rel) {
			return nil
		}
		target := filepath.Join(tmp, rel)
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{target, fi.Mode().Perm()})
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			sum.Files++
		case d.Type().IsRegular():
			switch err := copyFile(path, target, fi.Mode().Perm()); {
			case errors.Is(err, fs.ErrNotExist):
				// Replaced or removed while the walk ran: a file written
				// atomically (config.json) is a temporary name first.
			case err != nil:
				return err
			default:
				sum.Files++
			}
		default:
			return fmt.Errorf("%s is not a regular file, directory or symbolic link", path)
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i].path); err != nil {
			return sum, err
		}
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return sum, err
		}
	}
	if _, err := os.Lstat(out); err == nil {
		return sum, fmt.Errorf("%s was created meanwhile", out)
	}
	if err := os.Rename(tmp, out); err != nil {
		return sum, err
	}
	return sum, syncDir(parent)
}

// copyFile copies the regular file src to dst, a new file of mode perm,
// and waits for the disk to hold it.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(o, in)
	if err == nil {
		err = o.Chmod(perm)
	}
	if err == nil {
		err = o.Sync()
	}
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir waits for the disk to hold the directory's entries.
func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
