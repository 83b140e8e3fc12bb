package bundle

import (
	"path"
	"syscall"
)

// hostFiles reads the files of one directory of a hostDir by open
// (relative to the directory, so the kernel resolves the path's
// directories once, not for every file), read and close alone. Any
// failure is left to the portable reader, which fails the same way and
// says so in the words of package os.
type hostFiles struct {
	h   hostDir
	dir string
	fd  int // the directory's descriptor, or -1 when it could not be opened
}

func (h hostDir) files(dir string) hostFiles {
	fd, err := open(h.root+"/"+dir, syscall.O_DIRECTORY)
	if err != nil {
		fd = -1
	}
	return hostFiles{h: h, dir: dir, fd: fd}
}

func (f hostFiles) close() {
	if f.fd >= 0 {
		syscall.Close(f.fd)
	}
}

// readInto appends the file name of the directory to buf.
func (f hostFiles) readInto(name string, buf []byte) ([]byte, error) {
	portable := func() ([]byte, error) { return readInto(f.h.FS, path.Join(f.dir, name), buf) }
	if f.fd < 0 {
		return portable()
	}
	fd, err := openat(f.fd, name)
	if err != nil {
		return portable()
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
			buf = buf[:start]
			return portable()
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	syscall.Close(fd)
	return buf, nil
}

func open(path string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func openat(dir int, name string) (int, error) {
	for {
		fd, err := syscall.Openat(dir, name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
