package bundle

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/partyd/party/internal/canonical"
)

// Reading a directory's files.
//
// A large bundle is thousands of small files, and reading one is a few
// system calls and a strict decode that depends on no other file. The
// files of a directory are therefore read and decoded by GOMAXPROCS
// workers, each taking the next file in name order, and the documents are
// put back in that order; when files are malformed, the error returned is
// the one about the first of them in name order, as if they had been
// read one by one. What a bundle reads to is the same however the work
// was scheduled.

// ReadValues is Read for a caller that only reads the decoded values, as
// a verifier does (party verify): every file is decoded just as strictly,
// but no Document keeps the bytes it was read from (Bytes is nil), so a
// large bundle is not held in memory twice, and the values share their
// identical leaves (canonical.Options.Shared: the created_by, stream and
// such objects every document repeats are held once). The values are
// therefore for reading only: a change to one could be a change to many.
func ReadValues(dir string) (*Bundle, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotBundle, dir)
	}
	b, err := readFS(hostDir{FS: os.DirFS(dir), root: dir}, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return b, nil
}

// readFiles reads and decodes the named files of dir, keeping each file's
// bytes when keep is set.
func readFiles(fsys fs.FS, dir string, names []string, keep bool) ([]Document, error) {
	docs := make([]Document, len(names))
	errs := make([]error, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names))
	var host *hostFiles
	if h, ok := fsys.(hostDir); ok && !keep {
		f := h.files(dir)
		defer f.close()
		host = &f
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte // reused from file to file when the bytes are not kept
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				p := path.Join(dir, names[i])
				var data []byte
				var err error
				if keep {
					data, err = fs.ReadFile(fsys, p)
				} else if host != nil {
					buf, err = host.readInto(names[i], buf[:0])
					data = buf
				} else {
					buf, err = readInto(fsys, p, buf[:0])
					data = buf
				}
				if err != nil {
					errs[i] = fmt.Errorf("bundle: %s: %w", p, err)
					continue
				}
				v, err := canonical.DecodeObjectWith(data, canonical.Options{Shared: !keep})
				if err != nil {
					errs[i] = fmt.Errorf("bundle: %s: %w", p, err)
					continue
				}
				docs[i] = Document{Path: p, Value: v}
				if keep {
					docs[i].Bytes = data
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// readInto appends the whole file to buf, as fs.ReadFile reads it.
func readInto(fsys fs.FS, name string, buf []byte) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// hostDir is os.DirFS(root) for ReadValues, which knows the directory is
// on this machine and can read its files with system calls of its own
// (read_linux.go): a file opened through package os is a *os.File, with a
// finalizer and an attempt to register it with the poller, which for
// thousands of small files cost more than reading them.
type hostDir struct {
	fs.FS
	root string
}

func (h hostDir) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(h.FS, name) }
func (h hostDir) ReadFile(name string) ([]byte, error)       { return fs.ReadFile(h.FS, name) }
func (h hostDir) Stat(name string) (fs.FileInfo, error)      { return fs.Stat(h.FS, name) }
