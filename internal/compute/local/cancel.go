package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/host"
)

// cancelPoll is how often Cancel checks its context while waiting for a task to die.
const cancelPoll = 50 * time.Millisecond

// Cancel kills the process tree named by taskID and returns once its leader has exited
// (or ctx is done). It works from any process on this host: a task started by this
// provider is killed through its monitor (and its Exit says Cancelled); any other is
// found through /proc. Cancelling a task that has ended, whose pid now names another
// process, or whose id was made in another boot, returns nil and signals nothing.
func (p *Provider) Cancel(ctx context.Context, taskID string) error {
	tid, err := parseTaskID(taskID)
	if err != nil {
		return fmt.Errorf("cancel: %w", err)
	}
	p.mu.Lock()
	h := p.live[taskID]
	p.mu.Unlock()
	if h != nil {
		h.requestCancel()
		select {
		case <-h.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("cancel %s: %w", taskID, ctx.Err())
		}
	}
	return cancelForeign(ctx, tid)
}

// cancelForeign kills a task this process did not start: its bwrap (the session it leads),
// then the sandbox's first process, which bwrap's death takes with it only once bwrap has
// released it (taskID): a supervisor killed before then leaves it running, unsupervised.
// An id of another boot names nothing that still runs: its task died with that boot, and its
// pids and start times may name this boot's processes, so nothing is signalled.
func cancelForeign(ctx context.Context, tid taskID) error {
	if !ofThisBoot(tid.boot) {
		return nil
	}
	err := cancelLeader(ctx, tid)
	if tid.init != 0 {
		err = errors.Join(err, killSandboxInit(ctx, tid))
	}
	return err
}

// killSandboxInit kills the sandbox's first process, and so its pid namespace, by pidfd
// after checking its start time, and waits for it to exit.
func killSandboxInit(ctx context.Context, tid taskID) error {
	fd, _, err := pinProcess(tid.init, tid.initStart)
	if err != nil || fd < 0 {
		return wrapCancel(tid, "the sandbox", err)
	}
	defer unix.Close(fd)
	// A start time counts from boot: an id recorded before a reboot without a boot id (or
	// one edited where it is stored) can name a process of this boot, pid and start time
	// alike. A sandbox's first process is the first of a pid namespace below this one from
	// its clone on (--as-pid-1 keeps it so); any other process the id names is not the
	// sandbox.
	st, err := host.ReadProcStatus(strconv.Itoa(tid.init))
	if errors.Is(err, os.ErrNotExist) || (err == nil && !st.NestedInit()) {
		return nil // gone, or no sandbox's: the sandbox is gone
	}
	if err != nil {
		return fmt.Errorf("cancel %s: inspect the sandbox process: %w", tid, err)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("cancel %s: signal the sandbox: %w", tid, err)
	}
	return waitPidfd(ctx, fd, tid)
}

// cancelLeader kills the task's bwrap and its process group. A pidfd pins the process: the
// start time read after opening it proves the pidfd names the task, and signals through
// the pidfd cannot reach a later process with the same pid.
func cancelLeader(ctx context.Context, tid taskID) error {
	fd, st, err := pinProcess(tid.pid, tid.start)
	if err != nil || fd < 0 {
		return wrapCancel(tid, "bwrap", err)
	}
	defer unix.Close(fd)
	if st.session != tid.pid || st.pgrp != tid.pid {
		return fmt.Errorf("cancel %s: pid %d does not lead its own session, so it is no sandbox of ours", tid, tid.pid)
	}
	killCgroupOf(tid.pid)
	// The leader is alive (or a zombie) and verified, so its pid cannot have been reused
	// as another group's id yet. The window between the check and this kill is the only
	// residual race, and the pidfd signal below does not depend on it.
	_ = unix.Kill(-tid.pid, unix.SIGKILL)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("cancel %s: signal: %w", tid, err)
	}
	return waitPidfd(ctx, fd, tid)
}

// pinProcess opens a pidfd on pid and checks, after opening it, that pid is still the process
// that started at start: signals through the pidfd then cannot reach a later process with the
// same pid. It returns fd -1 and no error when the process has ended or the pid names another
// process now (nothing to signal); the caller closes a returned fd.
func pinProcess(pid int, start uint64) (int, procStat, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, procStat{}, nil
	}
	if err != nil {
		return -1, procStat{}, fmt.Errorf("open pidfd: %w", err)
	}
	st, err := readProcStat(pid)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.start != start) {
		unix.Close(fd)
		return -1, procStat{}, nil // ended, and the pid may name another process now
	}
	if err != nil {
		unix.Close(fd)
		return -1, procStat{}, err
	}
	return fd, st, nil
}

// wrapCancel states err, from pinning what of tid, for Cancel's caller; nil stays nil.
func wrapCancel(tid taskID, what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cancel %s: %s: %w", tid, what, err)
}

// waitPidfd waits until the process behind fd has exited.
func waitPidfd(ctx context.Context, fd int, tid taskID) error {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(cancelPoll/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("cancel %s: wait: %w", tid, err)
		}
		if n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cancel %s: %w", tid, err)
		}
	}
}

// Release removes what the tasks of dispatch id left on this host when the process that
// started them died before it could: their cgroups, each killed (cgroup.kill) and removed.
// The caller MUST know that no process supervises id any more (its supervisor is gone, by
// pid and start time): a cgroup still in use is killed too. A task this provider started
// and still monitors is left to its monitor. Release is idempotent.
//
// It looks only under the provider's cgroup parent, where Start makes task cgroups, so a
// process whose own cgroup differs from the dead supervisor's (with no CgroupParent set)
// finds nothing to release. It refuses an id from which cgroupName drops or cuts
// characters, since the cgroups of another id could share its name.
func (p *Provider) Release(ctx context.Context, id string) error {
	if p.cgroupParent == "" {
		return nil
	}
	base, exact := cgroupBase(id)
	if !exact {
		return fmt.Errorf("release %q: its task cgroups cannot be told from another id's", id)
	}
	ents, err := os.ReadDir(p.cgroupParent)
	if err != nil {
		return fmt.Errorf("release %q: %w", id, err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !isCgroupOf(e.Name(), base) {
			continue
		}
		dir := filepath.Join(p.cgroupParent, e.Name())
		if p.monitors(dir) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("release %q: %w", id, err)
		}
		if err := (&cgroup{dir: dir}).remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release %q: %w", id, err)
	}
	return nil
}

// monitors reports whether a task this provider started and still runs has cgroup dir.
func (p *Provider) monitors(dir string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.live {
		if h.cg != nil && h.cg.dir == dir {
			return true
		}
	}
	return false
}
