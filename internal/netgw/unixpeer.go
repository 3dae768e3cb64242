package netgw

import (
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// PeerListener wraps a Unix socket listener so that each accepted connection's RemoteAddr
// names its peer's uid ("uid-N", from SO_PEERCRED; no colon, or sourceOf would take "uid" for
// a host). Every peer of a Unix socket has the same empty address, so without it the
// per-source caps (MaxPendingPerSource) would count all of a socket's peers as one source: one
// docker warm slot's agent could then crowd out every other slot's worker. Docker slots run as
// a uid each, so the caps apply per slot. A connection whose credentials cannot be read is
// closed.
func PeerListener(ln net.Listener) net.Listener { return peerListener{ln} }

type peerListener struct{ net.Listener }

func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err != nil {
			c.Close()
			continue
		}
		return peerConn{Conn: c, addr: peerAddr("uid-" + strconv.FormatUint(uint64(uid), 10))}, nil
	}
}

// peerUID reads a Unix connection's peer uid.
func peerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a Unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

type peerConn struct {
	net.Conn
	addr peerAddr
}

func (c peerConn) RemoteAddr() net.Addr { return c.addr }

// peerAddr is a Unix peer named by its uid.
type peerAddr string

func (a peerAddr) Network() string { return "unix" }
func (a peerAddr) String() string  { return string(a) }
