//go:build !linux

package bundle

import "path"

// hostFiles reads the files of one directory of a hostDir through its
// fs.FS.
type hostFiles struct {
	h   hostDir
	dir string
}

func (h hostDir) files(dir string) hostFiles { return hostFiles{h: h, dir: dir} }

func (hostFiles) close() {}

// readInto appends the file name of the directory to buf.
func (f hostFiles) readInto(name string, buf []byte) ([]byte, error) {
	return readInto(f.h.FS, path.Join(f.dir, name), buf)
}
