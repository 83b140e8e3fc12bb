package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"
)

// ioCounts are the process's I/O counters from /proc/self/io (Linux):
// system calls that read or write (syscr, syscw) and the bytes they
// moved (rchar, wchar), page cache or not. SQLite's page reads and WAL
// writes are pread and pwrite calls, so their number per act is a
// deterministic measure of the database's work where wall time on a
// shared host is not. disk is the bytes that had to come from the disk
// itself (read_bytes): a page the kernel no longer held, which a database
// larger than memory meets and one of 10 transactions never does.
type ioCounts struct {
	reads, writes, rbytes, wbytes, disk int64
}

func readIOCounts() (ioCounts, bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ioCounts{}, false
	}
	var c ioCounts
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, val, ok := bytes.Cut(sc.Bytes(), []byte(": "))
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			return ioCounts{}, false
		}
		switch string(name) {
		case "syscr":
			c.reads = n
		case "syscw":
			c.writes = n
		case "rchar":
			c.rbytes = n
		case "wchar":
			c.wbytes = n
		case "read_bytes":
			c.disk = n
		}
	}
	return c, true
}

// ioMeter sums the I/O counters over the timed parts of a benchmark: its
// start and stop also start and stop the benchmark's timer. The counters
// are the whole process's, so what other goroutines do meanwhile (the
// peer instance's handling, in an in-process pair) counts too; SQLite's
// WAL checkpoints, one every thousand or so pages written, land in some
// operations and not others, so read them over many operations.
type ioMeter struct {
	b        *testing.B
	sum      ioCounts
	at       ioCounts
	overhead ioCounts // what reading the counters itself counts
	working  bool
}

func newIOMeter(b *testing.B) *ioMeter {
	c0, ok := readIOCounts()
	c1, _ := readIOCounts()
	return &ioMeter{b: b, working: ok, overhead: c1.minus(c0)}
}

func (c ioCounts) minus(d ioCounts) ioCounts {
	return ioCounts{c.reads - d.reads, c.writes - d.writes, c.rbytes - d.rbytes, c.wbytes - d.wbytes, c.disk - d.disk}
}

func (c ioCounts) plus(d ioCounts) ioCounts {
	return ioCounts{c.reads + d.reads, c.writes + d.writes, c.rbytes + d.rbytes, c.wbytes + d.wbytes, c.disk + d.disk}
}

func (m *ioMeter) start() {
	m.at, _ = readIOCounts()
	m.b.StartTimer()
}

func (m *ioMeter) stop() {
	m.b.StopTimer()
	now, _ := readIOCounts()
	m.sum = m.sum.plus(now.minus(m.at).minus(m.overhead))
}

// report adds the counters per operation to the benchmark's metrics.
func (m *ioMeter) report() {
	if !m.working || m.b.N == 0 {
		return
	}
	n := float64(m.b.N)
	m.b.ReportMetric(float64(m.sum.reads)/n, "reads/op")
	m.b.ReportMetric(float64(m.sum.writes)/n, "writes/op")
	m.b.ReportMetric(float64(m.sum.wbytes)/n/1024, "wKB/op")
}
