package bundle

import "syscall"

// readInto appends the file name of the directory to buf by open, read
// and close alone. Any failure is left to the portable reader, which
// fails the same way and says so in the words of package os.
func (h hostDir) readInto(name string, buf []byte) ([]byte, error) {
	fd, err := open(h.root + "/" + name)
	if err != nil {
		return readInto(h.FS, name, buf)
	}
	start := len(buf)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n < 0 {
			syscall.Close(fd)
			return readInto(h.FS, name, buf[:start])
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	syscall.Close(fd)
	return buf, nil
}

func open(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
