package cli

import (
	"context"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/peercred"
)

// standbyFD is the descriptor a standby supervisor's holder passes it: one end of a
// socketpair the holder made (detach.Standbys).
const standbyFD = 3

// dispatchStandbyRun is `agora dispatch supervise --standby TARGET` (dispatch.Standby).
func dispatchStandbyRun(ctx context.Context, opts *dispatchSuperviseOptions) error {
	conn, err := holderConn()
	if err != nil {
		return err
	}
	defer conn.Close()
	d, err := opts.f.Dispatcher(ctx)
	if err != nil {
		fmt.Fprintf(conn, "failed %v\n", err)
		return err
	}
	final, err := d.Standby(ctx, opts.standby, conn)
	if err != nil || final == nil {
		return err
	}
	deliverCallbacks(ctx, opts.f, final)
	return nil
}

// holderConn takes fd 3 as the connection to the holder. It must be a Unix socket whose
// peer runs as this process's user (the serve that started it); the descriptor is made
// close-on-exec first, so no sandbox this process starts inherits it.
func holderConn() (*net.UnixConn, error) {
	if _, err := unix.FcntlInt(standbyFD, unix.F_GETFD, 0); err != nil {
		return nil, fmt.Errorf("standby: no holder on fd %d: %w", standbyFD, err)
	}
	unix.CloseOnExec(standbyFD)
	f := os.NewFile(standbyFD, "holder")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("standby: fd %d is not the holder's socket: %w", standbyFD, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("standby: fd %d is not a Unix socket", standbyFD)
	}
	cred, err := peercred.Of(uc)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("standby: the holder's credentials: %w", err)
	}
	if int(cred.Uid) != os.Getuid() {
		uc.Close()
		return nil, fmt.Errorf("standby: the holder runs as uid %d, not this process's %d", cred.Uid, os.Getuid())
	}
	return uc, nil
}
