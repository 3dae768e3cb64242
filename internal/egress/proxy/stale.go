package proxy

import (
	"net"
	"syscall"
)

// peerClosedOrSent reports whether an idle connection's socket has reached its end or holds
// bytes: a kept-alive upstream connection in either state must not carry a request. It
// peeks without blocking and consumes nothing.
func peerClosedOrSent(c net.Conn) bool {
	if t, ok := c.(*trackedConn); ok {
		c = t.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var buf [1]byte
	stale := false
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		stale = n > 0 || (n == 0 && rerr == nil) || (rerr != nil && rerr != syscall.EAGAIN && rerr != syscall.EINTR)
		return true // done: never wait for readiness
	})
	return stale || err != nil
}
