//go:build !linux

package bundle

// readInto appends the file name of the directory to buf.
func (h hostDir) readInto(name string, buf []byte) ([]byte, error) {
	return readInto(h.FS, name, buf)
}
