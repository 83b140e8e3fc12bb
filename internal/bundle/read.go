package bundle

import (
	"fmt"
	"io"
	"io/fs"
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

// readFiles reads and decodes the named files of dir.
func readFiles(fsys fs.FS, dir string, names []string) ([]Document, error) {
	docs := make([]Document, len(names))
	errs := make([]error, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names))
	var host *hostFiles
	if h, ok := fsys.(hostDir); ok {
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
			var buf []byte // reused from file to file: only the values are kept
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				p := path.Join(dir, names[i])
				var data []byte
				var err error
				if host != nil {
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
				v, err := canonical.DecodeObjectWith(data, canonical.Options{Shared: true})
				if err != nil {
					errs[i] = fmt.Errorf("bundle: %s: %w", p, err)
					continue
				}
				docs[i] = Document{Path: p, Value: v}
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

// hostDir is os.DirFS(root) for Read, which knows the directory is
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
