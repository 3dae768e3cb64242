package dispatchcmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
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
	stale, err := standbyStale(opts.f)
	if err != nil {
		fmt.Fprintf(conn, "failed %v\n", err)
		return err
	}
	d, err := opts.f.Dispatcher(ctx)
	if err != nil {
		fmt.Fprintf(conn, "failed %v\n", err)
		return err
	}
	final, err := d.Standby(ctx, opts.standby, conn, stale)
	if err != nil || final == nil {
		return err
	}
	deliverCallbacks(ctx, opts.f, final)
	return nil
}

// standbyStale notes agora.yaml and the running binary as this standby found them, before
// it loads anything, and returns the check its claim makes: a standby that would run a
// dispatch under a configuration or a binary no cold supervisor started now would use
// refuses it (a standby outliving an edit of the target's limits).
func standbyStale(f *cmdutil.Factory) (func() error, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, config.FileName)
	sum := fileSum(cfg)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	running, err := os.Stat("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	return func() error {
		if fileSum(cfg) != sum {
			return errors.New("agora.yaml changed since this standby started")
		}
		if !isRunning(exe, running) {
			return errors.New("the agora binary was replaced since this standby started")
		}
		return nil
	}, nil
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
