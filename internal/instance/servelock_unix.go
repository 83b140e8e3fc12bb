//go:build unix

package instance

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// LockServe takes the state directory's serve lock, which the one process
// that serves it holds: at most one `party serve` runs over a record, so
// one record engine does. The engine's per-transaction locks, its outbox
// leases and its group commit are in-process; a second serve on the same
// directory would deliver the same messages twice and race the first on
// every transaction, safe only because the store's updates are
// compare-and-swap (issue 13: one engine per database).
//
// The lock is an advisory flock on DIR/serve.lock, so the kernel releases
// it when the process ends, however it ends: a kill -9 leaves no stale
// lock to clear by hand. The file holds the holder's pid, for the message
// a second serve gives. unlock releases it; call it once, when serving
// ends.
func LockServe(dir string) (unlock func(), err error) {
	path := Paths{dir}.Join(ServeLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("instance: serve lock: %w", err)
	}
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		held, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("instance: %s is already served by another process (pid %s): one party serve per state directory", dir, holder(held))
		}
		return nil, fmt.Errorf("instance: serve lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}

// holder is the pid a lock file names, or "unknown".
func holder(b []byte) string {
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		return strconv.Itoa(pid)
	}
	return "unknown"
}
