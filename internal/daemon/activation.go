package daemon

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listeners are listeners bound before Run, which Run serves instead of
// binding config's addresses: a supervisor's sockets (socket activation,
// see Activated) or a test's port-0 listeners, so that no address is ever
// probed and released before use. A nil field is bound from config.
// Run closes every listener it is given.
type Listeners struct {
	// MCP and Admin are plain TCP listeners.
	MCP, Admin net.Listener
	// Peer is a plain TCP listener; Run adds the instance's TLS.
	Peer net.Listener
}

func (l Listeners) closeAll() {
	for _, x := range []net.Listener{l.MCP, l.Peer, l.Admin} {
		if x != nil {
			x.Close()
		}
	}
}

// The names of activated sockets (LISTEN_FDNAMES; systemd.socket
// FileDescriptorName=).
const (
	SocketMCP   = "mcp"
	SocketPeer  = "peer"
	SocketAdmin = "admin"
)

// listenFDsStart is the first passed descriptor (sd_listen_fds(3)).
const listenFDsStart = 3

// Activated returns the listeners a supervisor passed under the socket
// activation protocol of sd_listen_fds(3): LISTEN_PID names this process,
// LISTEN_FDS counts the descriptors from 3, and LISTEN_FDNAMES names them
// (colon-separated) mcp, peer or admin. Without LISTEN_PID for this
// process it returns no listeners and no error, so a plain start binds
// config's addresses. It unsets the variables, so that no child inherits
// them. A descriptor with another name, or one that is not a listening
// stream socket, is an error: serving the wrong socket is worse than not
// starting.
func Activated() (Listeners, error) {
	pid, fds, names := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	if pid == "" || pid != strconv.Itoa(os.Getpid()) {
		return Listeners{}, nil
	}
	n, err := strconv.Atoi(fds)
	if err != nil || n < 1 || n > 3 {
		return Listeners{}, fmt.Errorf("daemon: LISTEN_FDS=%q: want 1 to 3 sockets", fds)
	}
	named := strings.Split(names, ":")
	if len(named) != n {
		return Listeners{}, fmt.Errorf("daemon: LISTEN_FDNAMES=%q names %d sockets, LISTEN_FDS passes %d", names, len(named), n)
	}
	var l Listeners
	for i, name := range named {
		f := os.NewFile(uintptr(listenFDsStart+i), name)
		ln, err := net.FileListener(f)
		f.Close() // FileListener holds its own duplicate
		if err != nil {
			l.closeAll()
			return Listeners{}, fmt.Errorf("daemon: socket %d (%s) is not a listening socket: %w", listenFDsStart+i, name, err)
		}
		var slot *net.Listener
		switch name {
		case SocketMCP:
			slot = &l.MCP
		case SocketPeer:
			slot = &l.Peer
		case SocketAdmin:
			slot = &l.Admin
		default:
			ln.Close()
			l.closeAll()
			return Listeners{}, fmt.Errorf("daemon: socket %d is named %q, not mcp, peer or admin", listenFDsStart+i, name)
		}
		if *slot != nil {
			ln.Close()
			l.closeAll()
			return Listeners{}, fmt.Errorf("daemon: two sockets are named %q", name)
		}
		*slot = ln
	}
	return l, nil
}
