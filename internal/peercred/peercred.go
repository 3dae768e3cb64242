// Package peercred reads the credentials of the process at the other end of a Unix socket
// (SO_PEERCRED): the uid, gid and pid the kernel recorded when it connected. Both sides of
// the sandbox use it to admit only their own peers, so it imports only the standard library
// and x/sys.
package peercred

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// Of returns the credentials of c's peer. c must be a Unix socket connection. A peer in a
// PID namespace the caller cannot see has Pid 0.
func Of(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}
