package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/cli"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// verifyEvents is the size of the record the verify benchmarks check: a
// bilateral record of 5 000 events, every one signed by its appender and
// countersigned (verifytest.Large).
const verifyEvents = 5000

// BinEnv, when set, names the party binary BenchmarkVerifyCommand runs
// instead of building this tree's: another version's, to compare the two
// on one record and one floor.
const BinEnv = "PARTY_BENCH_BIN"

// ReferenceDirEnv names a checkout of the public repository
// a202-protocol/a202, whose Python reference verifier
// BenchmarkVerifyCommand runs beside party verify when it is set.
const ReferenceDirEnv = "A202_REFERENCE_DIR"

// verifyEnv is what the verify benchmarks share within one process: the
// party binary, built once; the record and its bundle directory, made
// once; and the floor of its signatures.
type verifyEnv struct {
	bin   string // the party binary
	dir   string // the bundle directory
	rec   *verifytest.Record
	floor *verifytest.Floor
}

var (
	verifyOnce   sync.Once
	verifyShared *verifyEnv
	verifyErr    error
	verifyRoot   string // removed by TestMain
)

// TestMain removes what the verify benchmarks made. Started with
// launchEnv set, the test binary is instead the launcher of one measured
// process (launch).
func TestMain(m *testing.M) {
	if argv := os.Getenv(launchEnv); argv != "" {
		os.Exit(launch(argv))
	}
	code := m.Run()
	if verifyRoot != "" {
		os.RemoveAll(verifyRoot)
	}
	os.Exit(code)
}

// sharedVerifyEnv builds the binary and the bundle the first time it is
// called, in a temporary directory TestMain removes.
func sharedVerifyEnv(b *testing.B) *verifyEnv {
	b.Helper()
	verifyOnce.Do(func() {
		verifyShared, verifyErr = newVerifyEnv()
	})
	if verifyErr != nil {
		b.Fatal(verifyErr)
	}
	return verifyShared
}

func newVerifyEnv() (*verifyEnv, error) {
	root, err := os.MkdirTemp("", "party-verify-bench-*")
	if err != nil {
		return nil, err
	}
	verifyRoot = root
	e := &verifyEnv{bin: os.Getenv(BinEnv), dir: filepath.Join(root, "bundle")}
	if e.bin == "" {
		e.bin = filepath.Join(root, "party")
		build := exec.Command("go", "build", "-o", e.bin, "github.com/partyd/party/cmd/party")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if e.rec, err = verifytest.Large(verifyEvents); err != nil {
		return nil, err
	}
	if err := bundle.Write(e.dir, e.rec.Contents(), bundle.WriteOptions{}); err != nil {
		return nil, err
	}
	if e.floor, err = verifytest.NewFloor(e.rec); err != nil {
		return nil, err
	}
	return e, nil
}

// procRun is one measured run of a process.
type procRun struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
	stdout    []byte
}

// Measuring a process's peak resident set.
//
// The kernel's rusage of a child (ru_maxrss) counts the memory of the
// process that started it: Go starts a child with vfork, so the child
// runs in its parent's address space until it execs, and the high-water
// mark of that space becomes the child's. This benchmark process holds
// the whole record and its floor, a few hundred megabytes, which a child
// started from it would report as its own peak. So every measured
// process is started by a launcher, this test binary again with
// launchEnv set, which has done nothing but start: the child's ru_maxrss
// is then its own, or the launcher's when larger (a few tens of
// megabytes), and the launcher reports it with the child's wall and CPU
// time on its last line of standard error.

// launchEnv carries the command line (JSON) the launcher runs.
const launchEnv = "PARTY_BENCH_LAUNCH"

const rusageLine = "bench-rusage "

// launch runs the command argv (a JSON array) with this process's
// standard streams and environment, and reports its rusage.
func launch(argv string) int {
	var args []string
	if err := json.Unmarshal([]byte(argv), &args); err != nil || len(args) == 0 {
		fmt.Fprintf(os.Stderr, "%s is not a JSON command line: %q\n", launchEnv, argv)
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, launchEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	fmt.Fprintf(os.Stderr, "\n%s%d %d %d\n", rusageLine, wall.Nanoseconds(), ru.Utime.Nano()+ru.Stime.Nano(), ru.Maxrss)
	return cmd.ProcessState.ExitCode()
}

// runProc runs cmd to completion through the launcher and reads its wall
// time, its CPU time (user + system) and its peak resident set.
func runProc(cmd *exec.Cmd) (procRun, error) {
	argv, err := json.Marshal(cmd.Args)
	if err != nil {
		return procRun{}, err
	}
	l := exec.Command(os.Args[0])
	l.Env = append(cmd.Environ(), launchEnv+"="+string(argv))
	var out, errOut bytes.Buffer
	l.Stdout, l.Stderr = &out, &errOut
	if err := l.Run(); err != nil {
		return procRun{}, fmt.Errorf("%s: %v\n%s%s", cmd.Path, err, out.Bytes(), errOut.Bytes())
	}
	i := bytes.LastIndex(errOut.Bytes(), []byte(rusageLine))
	var wall, cpu, kb int64
	if i < 0 {
		return procRun{}, fmt.Errorf("%s: the launcher reported no rusage:\n%s", cmd.Path, errOut.Bytes())
	}
	if _, err := fmt.Sscanf(string(errOut.Bytes()[i+len(rusageLine):]), "%d %d %d", &wall, &cpu, &kb); err != nil {
		return procRun{}, fmt.Errorf("%s: %v", cmd.Path, err)
	}
	return procRun{
		wall:   time.Duration(wall),
		cpu:    time.Duration(cpu),
		maxRSS: kb * 1024, // kilobytes on Linux
		stdout: out.Bytes(),
	}, nil
}

// verifyCommand is `party verify DIR` with default options, on cores
// cores (GOMAXPROCS).
func (e *verifyEnv) verifyCommand(cores int) *exec.Cmd {
	cmd := exec.Command(e.bin, "verify", e.dir)
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", cores))
	return cmd
}

// coreCounts are the core counts the verify benchmarks compare on: one,
// and every core of the machine.
func coreCounts() []int {
	if n := runtime.NumCPU(); n > 1 {
		return []int{1, n}
	}
	return []int{1}
}

// onCores runs f as a sub-benchmark cores=N with GOMAXPROCS set to N for
// this process (the floor, the in-process verifier) and for the command,
// then restored. The benchmark sets it itself rather than through -cpu,
// which the first run of a b.Loop benchmark does not honour.
func onCores(b *testing.B, f func(b *testing.B, cores int)) {
	for _, n := range coreCounts() {
		b.Run(fmt.Sprintf("cores=%d", n), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
			f(b, n)
		})
	}
}

// quiesce collects this process's garbage before a timed run, so that
// the collector of the benchmark process, which holds the whole record
// and its floor, does not run beside what is timed: beside the command,
// on the cores it was given, or in the floor's own time.
func quiesce() { runtime.GC() }

// wantClean fails b unless a party verify summary reports no failed and
// no unchecked check.
func wantClean(b *testing.B, summary []byte) {
	b.Helper()
	if !bytes.Contains(summary, []byte(", 0 failed, 0 not checkable")) {
		b.Fatalf("the record does not verify cleanly:\n%s", summary)
	}
}

// BenchmarkVerifyCommand runs `party verify DIR` end to end as a process
// (start, read and strictly decode the bundle directory, the seven steps,
// the summary on stdout) over a 5 000-event record, alternating each run
// with the floor: one bare ES256 verification per signature of the record
// (mandate proofs included) over precomputed digests, spread over as many
// goroutines of this process as the command has cores. Both run on one
// core (cores=1) and on all of them (cores=2 on a 2-core machine),
// GOMAXPROCS set for the command and for this process alike:
//
//	go test -run '^$' -bench VerifyCommand -benchtime 5x -count 3 ./internal/bench
//
// ns/op is the mean wall time of one party verify. floor/verify is the
// floor's time over the command's (1.0 would be a verifier costing nothing
// but its signatures); MB-peak-rss the largest resident set any run
// reached (ru_maxrss); cpu-ms/op the command's user plus system time.
//
// With A202_REFERENCE_DIR naming a checkout of a202-protocol/a202, each
// iteration also runs the published Python reference verifier over the
// same bundle (testdata/reference_verify.py, which imports it from there)
// and reports reference/verify, its wall time over the command's. Without
// it that part is skipped, and the log says so.
func BenchmarkVerifyCommand(b *testing.B) {
	onCores(b, benchVerifyCommand)
}

func benchVerifyCommand(b *testing.B, cores int) {
	e := sharedVerifyEnv(b)
	ref := os.Getenv(ReferenceDirEnv)
	var refScript string
	if ref == "" {
		b.Logf("%s is not set: the Python reference verifier is not run (set it to a checkout of a202-protocol/a202)", ReferenceDirEnv)
	} else {
		var err error
		if refScript, err = filepath.Abs(filepath.Join("testdata", "reference_verify.py")); err != nil {
			b.Fatal(err)
		}
	}
	// One untimed run warms the page cache and the binary.
	first, err := runProc(e.verifyCommand(cores))
	if err != nil {
		b.Fatal(err)
	}
	wantClean(b, first.stdout)
	var tv, tf, tr, cpu time.Duration
	var peak int64
	for b.Loop() {
		quiesce()
		v, err := runProc(e.verifyCommand(cores))
		if err != nil {
			b.Fatal(err)
		}
		wantClean(b, v.stdout)
		quiesce()
		t0 := time.Now()
		if err := e.floor.Run(cores); err != nil {
			b.Fatal(err)
		}
		tf += time.Since(t0)
		tv, cpu, peak = tv+v.wall, cpu+v.cpu, max(peak, v.maxRSS)
		if refScript != "" {
			cmd := exec.Command("python3", refScript, e.dir)
			cmd.Env = append(os.Environ(), ReferenceDirEnv+"="+ref)
			quiesce()
			p, err := runProc(cmd)
			if err != nil {
				b.Fatal(err)
			}
			tr += p.wall
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tv.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(cpu.Milliseconds())/n, "cpu-ms/op")
	b.ReportMetric(float64(tf.Nanoseconds())/float64(tv.Nanoseconds()), "floor/verify")
	b.ReportMetric(float64(tf.Milliseconds())/n, "floor-ms/op")
	b.ReportMetric(float64(peak)/(1<<20), "MB-peak-rss")
	b.ReportMetric(float64(e.floor.Len()), "sigs")
	if refScript != "" {
		b.ReportMetric(float64(tr.Nanoseconds())/float64(tv.Nanoseconds()), "reference/verify")
		b.ReportMetric(float64(tr.Milliseconds())/n, "reference-ms/op")
	}
}

// BenchmarkVerifyInProcess times the same record without a process
// around it, each run alternated with the floor like the command, on one
// core and on all (cores=N):
//
//   - verify: verify.Verify over the bundle as read (no disk, no
//     decoding), with the command's options;
//   - command: cli.Main("verify", DIR) in this process, reading and
//     decoding the directory and writing the summary to io.Discard.
//
// Run it as:
//
//	go test -run '^$' -bench VerifyInProcess -benchtime 5x -count 3 ./internal/bench
func BenchmarkVerifyInProcess(b *testing.B) {
	e := sharedVerifyEnv(b)
	bd, err := bundle.Read(e.dir)
	if err != nil {
		b.Fatal(err)
	}
	in := verify.BundleInput(bd)
	opt := verify.Options{RulesVersion: bd.Manifest.RulesVersion}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"verify", func() error {
			rep := verify.Verify(in, opt)
			if rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
				return fmt.Errorf("%d failed, %d not checkable", rep.Results.Failed, rep.Results.NotCheckable)
			}
			return nil
		}},
		{"command", func() error {
			var out strings.Builder
			if code := cli.Main([]string{"verify", e.dir}, nil, &out, io.Discard); code != 0 {
				return fmt.Errorf("party verify exited %d:\n%s", code, out.String())
			}
			if !strings.Contains(out.String(), ", 0 failed, 0 not checkable") {
				return fmt.Errorf("the record does not verify cleanly:\n%s", out.String())
			}
			return nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			onCores(b, func(b *testing.B, cores int) {
				if err := c.run(); err != nil { // untimed: warms caches and compiles the profile schemas
					b.Fatal(err)
				}
				var tv, tf time.Duration
				for b.Loop() {
					quiesce()
					t0 := time.Now()
					if err := c.run(); err != nil {
						b.Fatal(err)
					}
					quiesce()
					t1 := time.Now()
					if err := e.floor.Run(cores); err != nil {
						b.Fatal(err)
					}
					tv, tf = tv+t1.Sub(t0), tf+time.Since(t1)
				}
				n := float64(b.N)
				b.ReportMetric(float64(tv.Nanoseconds())/n, "ns/op")
				b.ReportMetric(float64(tf.Nanoseconds())/float64(tv.Nanoseconds()), "floor/verify")
				b.ReportMetric(float64(e.floor.Len())*n/tv.Seconds(), "sigs/s")
			})
		})
	}
}
