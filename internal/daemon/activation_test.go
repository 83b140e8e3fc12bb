package daemon

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestActivatedChild is the child process of TestActivated: it reports
// what Activated made of the environment it was started with.
func TestActivatedChild(t *testing.T) {
	if os.Getenv("PARTY_ACTIVATION_CHILD") == "" {
		t.Skip("run by TestActivated")
	}
	if os.Getenv("PARTY_ACTIVATION_SETPID") != "" {
		os.Setenv("LISTEN_PID", fmt.Sprint(os.Getpid()))
	}
	l, err := Activated()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, x := range []struct {
		name string
		l    net.Listener
	}{{"mcp", l.MCP}, {"peer", l.Peer}, {"admin", l.Admin}} {
		if x.l != nil {
			fmt.Printf("%s=%s\n", x.name, x.l.Addr())
		}
	}
	if os.Getenv("LISTEN_FDS") != "" {
		fmt.Println("LISTEN_FDS left set")
	}
}

func TestActivated(t *testing.T) {
	t.Parallel()
	sock := func() (*os.File, string) {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		f, err := l.File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, l.Addr().String()
	}
	plain, err := os.Create(filepath.Join(t.TempDir(), "plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	a, aAddr := sock()
	b, bAddr := sock()
	c, cAddr := sock()

	for _, tc := range []struct {
		name   string
		files  []*os.File
		env    []string
		setPID bool
		want   []string // lines the child prints, in any order
	}{
		{"all three", []*os.File{a, b, c}, []string{"LISTEN_FDS=3", "LISTEN_FDNAMES=mcp:peer:admin"}, true,
			[]string{"mcp=" + aAddr, "peer=" + bAddr, "admin=" + cAddr}},
		{"names in any order, some missing", []*os.File{a, b}, []string{"LISTEN_FDS=2", "LISTEN_FDNAMES=admin:mcp"}, true,
			[]string{"admin=" + aAddr, "mcp=" + bAddr}},
		{"another process's sockets", []*os.File{a}, []string{"LISTEN_PID=1", "LISTEN_FDS=1", "LISTEN_FDNAMES=mcp"}, false, nil},
		{"no activation", nil, nil, false, nil},
		{"unknown name", []*os.File{a}, []string{"LISTEN_FDS=1", "LISTEN_FDNAMES=metrics"}, true,
			[]string{`error: daemon: socket 3 is named "metrics", not mcp, peer or admin`}},
		{"names and count differ", []*os.File{a, b}, []string{"LISTEN_FDS=2", "LISTEN_FDNAMES=mcp"}, true,
			[]string{`error: daemon: LISTEN_FDNAMES="mcp" names 1 sockets, LISTEN_FDS passes 2`}},
		{"a name twice", []*os.File{a, b}, []string{"LISTEN_FDS=2", "LISTEN_FDNAMES=peer:peer"}, true,
			[]string{`error: daemon: two sockets are named "peer"`}},
		{"not a socket", []*os.File{plain}, []string{"LISTEN_FDS=1", "LISTEN_FDNAMES=peer"}, true,
			[]string{"error: daemon: socket 3 (peer) is not a listening socket"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestActivatedChild$")
			cmd.Env = append(os.Environ(), "PARTY_ACTIVATION_CHILD=1")
			cmd.Env = append(cmd.Env, tc.env...)
			if tc.setPID {
				cmd.Env = append(cmd.Env, "PARTY_ACTIVATION_SETPID=1")
			}
			cmd.ExtraFiles = tc.files
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var got []string
			for _, line := range strings.Split(string(out), "\n") {
				if line == "" || line == "PASS" || strings.HasPrefix(line, "ok ") {
					continue
				}
				got = append(got, line)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("child printed %q, want %q", got, tc.want)
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("child printed %q, want a line %q", got, w)
				}
			}
		})
	}
}
