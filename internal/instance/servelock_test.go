//go:build unix

package instance

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A second holder of the serve lock is refused, named by the first's pid;
// once released, the lock is taken again.
func TestLockServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unlock, err := LockServe(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockServe(dir)
	if err == nil {
		t.Fatal("a second serve of one directory took the lock")
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "one party serve per state directory") {
		t.Errorf("the refusal does not name the holder: %v", err)
	}
	unlock()
	again, err := LockServe(dir)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	again()
}

// The helper process of TestLockServeAfterKill: it takes the lock of the
// directory it is given, says so, and waits to be killed.
func TestHelperHoldServeLock(t *testing.T) {
	dir := os.Getenv("PARTY_TEST_SERVE_LOCK_DIR")
	if dir == "" {
		t.Skip("the helper of TestLockServeAfterKill")
	}
	if _, err := LockServe(dir); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	select {}
}

// A serve killed with SIGKILL leaves no lock behind: the kernel releases a
// flock with its holder, so the next serve starts without a hand to clear
// it.
func TestLockServeAfterKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldServeLock$")
	cmd.Env = append(os.Environ(), "PARTY_TEST_SERVE_LOCK_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the helper did not take the lock: %q %v", line, err)
	}
	if _, err := LockServe(dir); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("while the helper lives: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	unlock, err := LockServe(dir)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	unlock()
}
