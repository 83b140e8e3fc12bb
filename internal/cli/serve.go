package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/instance"
)

func init() {
	register("serve", "run the instance: MCP, peer and admin listeners, until interrupted", runServe)
}

// serveMounts are the parts `party serve` adds to the daemon beyond the
// agent's surface and the status endpoints: the record engine, the
// carriers and their tools. Other files of this package register theirs
// from an init function with addServeMount, so that a new carrier needs no
// edit here. (`party mcp` mounts nothing: it is a bridge to serve's MCP
// endpoint, so one engine runs per database.)
var serveMounts []daemon.Mounter

// addServeMount registers m for every serve process. Call it from an init
// function only: the list is read without a lock.
func addServeMount(m daemon.Mounter) { serveMounts = append(serveMounts, m) }

const serveUsage = `Usage: party serve --dir DIR [--log-level LEVEL]

Runs the instance in DIR until SIGINT or SIGTERM:

  - the MCP listener (config mcp_addr): the agent's tools at /mcp, Streamable
    HTTP, behind the agent token (tokens/agent);
  - the peer listener (config peer_addr, HTTPS): what counterparties reach,
    including the mandate status endpoints;
  - the admin listener (config admin_addr): the approvals page and the
    principal's JSON API, behind the admin token (tokens/admin), and the
    Prometheus metrics at /metrics, behind the metrics token
    (tokens/metrics, made on the first start without one).

The MCP and admin listeners answer /healthz and /readyz without a token,
for a container's or a supervisor's probe.

Socket activation: started by a supervisor that passes listening sockets
(sd_listen_fds(3): LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES naming them mcp,
peer and admin, as systemd's FileDescriptorName= does), it serves those
instead of binding the config addresses; a listener not passed is bound as
usual. The peer socket is a plain TCP socket: the instance adds its TLS.

Logs are JSON lines on standard error; tokens and keys are never logged.
On a signal the listeners stop accepting, requests in flight finish, and
the record is closed. The principal's commands ('party mandate',
'party approvals', 'party approve') work while it runs.

Exit status: 0 after a clean stop, 1 when the instance cannot start or
fails, 2 on a usage error.
`

// parseLevel reads a log level name.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("log level %q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// jsonLogger is the logger of the long-running commands: JSON lines on w.
// The level is --log-level when given, else config.json's log_level.
func jsonLogger(w io.Writer, dir, flagLevel string) (*slog.Logger, error) {
	name := flagLevel
	if name == "" {
		if cfg, err := instance.LoadConfig(dir); err == nil && cfg.LogLevel != "" {
			name = cfg.LogLevel
		} else {
			name = "info"
		}
	}
	level, err := parseLevel(name)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
}

func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party serve", serveUsage)
	dir, log, code, ok := c.longRunning(args, stdout, stderr)
	if !ok {
		return code
	}
	lns, err := daemon.Activated()
	if err != nil {
		log.Error("party serve failed", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer ServeRuntime()()
	if err := daemon.Run(ctx, dir, daemon.Options{Logger: log, Mount: serveMounts, Listeners: lns}); err != nil {
		log.Error("party serve failed", "error", err)
		return 1
	}
	log.Info("party stopped")
	return 0
}

// longRunning parses the flags serve and mcp share (--dir, --log-level)
// and builds their JSON logger. ok false means the command ends now with
// code (help, a usage error, or a logger that cannot be built).
func (c *cmdFlags) longRunning(args []string, stdout, stderr io.Writer) (dir string, log *slog.Logger, code int, ok bool) {
	d := c.dirFlag()
	level := c.String("log-level", "", "debug, info, warn or error (default config.json's log_level)")
	pos, code, done := c.parse(args, stdout, stderr)
	if done {
		return "", nil, code, false
	}
	switch {
	case len(pos) > 0:
		return "", nil, c.usageError(stderr, "unexpected argument %q", pos[0]), false
	case *d == "":
		return "", nil, c.usageError(stderr, "--dir is required"), false
	}
	if *level != "" {
		if _, err := parseLevel(*level); err != nil {
			return "", nil, c.usageError(stderr, "%v", err), false
		}
	}
	log, err := jsonLogger(stderr, *d, *level)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name(), err)
		return "", nil, 1, false
	}
	return *d, log, 0, true
}

// ServeRuntime sets the Go runtime as party serve runs it: the collector
// (serveGC) and the processors (serveProcs). It returns the function that
// restores both: for a process that serves instances of its own, as the
// benchmarks do.
func ServeRuntime() (restore func()) {
	restoreGC, restoreProcs := serveGC(), serveProcs()
	return func() {
		restoreProcs()
		restoreGC()
	}
}

// serveProcs gives party serve one processor (GOMAXPROCS) more than the
// runtime chose, and returns the function that sets the number back.
//
// SQLite, as this build links it (modernc.org/sqlite, no cgo), makes its
// file system calls as ordinary blocking system calls: above all the
// WAL's fsync at every commit (synchronous=FULL; on the machine the
// targets are measured on, 0.13-0.19 ms alone and 0.6 ms at the median
// when both cores are busy) and the writes before it. A goroutine in a
// blocking system call keeps its processor until the runtime's monitor
// hands the processor on, 20 µs at the least, and all that while a
// goroutine that could run waits though its core is idle. The store
// commits from one goroutine at a time (group commit), so one processor
// more covers the one blocked writer: the operating system still shares
// out the same cores. Measured with eight agents on two cores
// (docs/performance.md, "Design facts behind the numbers"): 4-10 % more formations a
// second for about the same CPU each; two processors more gave no more
// formations for 4-5 % more CPU each. GOMAXPROCS in the
// environment is the operator's choice, and then nothing is changed.
// Setting the number stops the runtime following a change of the CPU
// quota while serve runs (Go 1.25's automatic GOMAXPROCS); a restart
// follows it.
func serveProcs() (restore func()) {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev + 1)
	return func() { runtime.GOMAXPROCS(prev) }
}

// ServeGCPercent is GOGC for party serve. A serving instance keeps little
// (some tens of megabytes: its caches of parsed objects and key records)
// and allocates much per act (decoded messages, schema validation, the
// working sets, the MCP SDK's 32 KiB decoder buffers), so the collector
// ran often for little: about a tenth of a formation's CPU at the default
// GOGC of 100. At 400 the heap may grow to five times what is live, for
// 5-15 % less CPU a formation than at 200 with eight agents
// (docs/performance.md, "Design facts behind the numbers"); serveMemoryLimit keeps a growing
// heap from following. GOGC or GOMEMLIMIT in the environment is the
// operator's choice, and then nothing is changed.
const ServeGCPercent = 400

// serveMemoryLimit is the soft memory limit party serve sets beside
// ServeGCPercent: past it the collector runs as often as it must, so a
// large working set costs CPU, not unbounded memory. A lower limit
// already set stays.
const serveMemoryLimit = 256 << 20
