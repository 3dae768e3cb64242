package local

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// handle is one started process tree. The monitor goroutine owns cmd and cg; the other
// fields are set before the handle is shared.
type handle struct {
	id  string
	cmd *exec.Cmd
	pid int
	// start is pid's start time (taskID).
	start uint64
	// sandboxPID is bwrap's sandbox process (the command, with --as-pid-1), 0 when unknown.
	sandboxPID int
	cg         *cgroup
	isolation  string
	started    time.Time
	// drain, when set, waits for the copies of a warm slot's output pipes to the claim's
	// sinks (a cold sandbox's are exec.Cmd's own).
	drain func()

	cancelOnce sync.Once
	cancelReq  chan struct{} // closed by requestCancel

	done chan struct{} // closed by monitor once exit and err are final
	// gone, when set (a warm slot's claim), is closed by monitor once the process tree is
	// gone and exit and err are final, before the slot's host side is taken down; done follows
	// that teardown.
	gone chan struct{}
	exit compute.Exit
	err  error
}

var _ compute.Handle = (*handle)(nil)

// TaskID implements [compute.Handle].
func (h *handle) TaskID() string { return h.id }

// Wait implements [compute.Handle]. The error is non-nil only when the process could not
// be waited for or its output could not be copied in full; Exit is filled in regardless.
func (h *handle) Wait() (compute.Exit, error) {
	<-h.done
	return h.exit, h.err
}

// Exited returns how the task ended once its process tree is gone, like [handle.Wait], but
// without waiting for what the provider then takes down on the host for it (a warm slot's
// claim mounts and directory, which nothing of the task's result is read from): a
// supervisor records the end first, without waiting for that teardown, and calls Wait
// before it removes the stage.
func (h *handle) Exited() (compute.Exit, error) {
	if h.gone == nil {
		return h.Wait()
	}
	select {
	case <-h.gone:
	case <-h.done:
	}
	return h.exit, h.err
}

func (h *handle) requestCancel() {
	h.cancelOnce.Do(func() { close(h.cancelReq) })
}

// killTree sends SIGKILL to the task's cgroup and process group. It MUST only run while
// the leader is not yet reaped: until then its pid, and so its process group id, cannot
// be reused.
func (h *handle) killTree() {
	if h.cg != nil {
		h.cg.kill()
	}
	_ = unix.Kill(-h.pid, unix.SIGKILL)
}

// monitor waits for the leader to exit, killing the tree on timeout or cancellation, then
// sweeps whatever the tree left running, reaps the leader and releases the cgroup.
func (h *handle) monitor(ctx context.Context, timeout time.Duration, onDone func()) {
	defer close(h.done)
	defer onDone()

	exited := make(chan error, 1)
	go func() { exited <- waitExited(h.pid) }()

	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout - time.Since(h.started))
		defer t.Stop()
		deadline = t.C
	}
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-deadline:
		h.exit.TimedOut = true
		h.killTree()
		waitErr = <-exited
	case <-ctx.Done():
		h.exit.Cancelled = true
		h.killTree()
		waitErr = <-exited
	case <-h.cancelReq:
		h.exit.Cancelled = true
		h.killTree()
		waitErr = <-exited
	}
	h.exit.Duration = time.Since(h.started)
	h.killTree()
	h.finish(waitErr)
	if h.gone != nil {
		close(h.gone)
	}
}

// finish reaps the leader and fills in the exit.
func (h *handle) finish(waitErr error) {
	err := h.cmd.Wait()
	if h.drain != nil {
		h.drain()
	}
	if h.cg != nil {
		h.cg.remove()
	}
	h.exit.Isolation = h.isolation
	h.exit.Code = -1
	if ps := h.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			h.exit.Signal = ws.Signal().String()
		} else {
			h.exit.Code = ps.ExitCode()
		}
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr != nil:
		h.err = fmt.Errorf("wait for pid %d: %w", h.pid, waitErr)
	case err == nil || errors.As(err, &exitErr):
	default:
		h.err = fmt.Errorf("wait for pid %d: %w", h.pid, err)
	}
}

// abort kills and reaps a task whose start failed.
func (h *handle) abort() {
	h.killTree()
	_ = h.cmd.Wait()
	if h.cg != nil {
		h.cg.remove()
	}
}

// abortHeld kills a held sandbox (a warm slot) that no monitor owns and marks it done, so
// the run-as thread holding its mount namespace ends.
func (h *handle) abortHeld() {
	h.abort()
	close(h.done)
}

// waitExited blocks until process pid has exited without reaping it (WNOWAIT), so its
// pid and process group stay reserved until cmd.Wait.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}
