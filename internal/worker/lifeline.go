package worker

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// watchLifeline ends the worker when its supervisor dies (wire.LifelineFDEnv): the worker is
// its sandbox's first process, so the kernel then kills every process of the sandbox. It
// drops the variable and marks the descriptor close-on-exec, so nothing the worker starts
// holds the pipe. A worker without the variable (a warm slot's, whose claim pipe does the
// same, or one run by hand) returns at once.
func watchLifeline(stderr io.Writer, exit func(code int)) error {
	v, ok := os.LookupEnv(wire.LifelineFDEnv)
	if !ok {
		return nil
	}
	if err := os.Unsetenv(wire.LifelineFDEnv); err != nil {
		return err
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 || fd > 64 {
		return fmt.Errorf("%s=%q: want a descriptor from 3 to 64", wire.LifelineFDEnv, v)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return fmt.Errorf("%s=%q: not a descriptor: %w", wire.LifelineFDEnv, v, err)
	}
	unix.CloseOnExec(fd)
	// A supervisor already dead (killed while bwrap set the sandbox up) ends the worker here,
	// before the agent can start, not only once the goroutine below is scheduled.
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 0); err == nil && n > 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
		fmt.Fprintln(stderr, "agora worker: the supervisor is gone (its lifeline closed); ending the sandbox")
		exit(1)
		return nil
	}
	f := os.NewFile(uintptr(fd), "lifeline")
	go func() {
		// The supervisor never writes: any read's end is the pipe's.
		var b [64]byte
		for {
			if _, err := f.Read(b[:]); err != nil {
				break
			}
		}
		fmt.Fprintln(stderr, "agora worker: the supervisor is gone (its lifeline closed); ending the sandbox")
		exit(1)
	}()
	return nil
}
