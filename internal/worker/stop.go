package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// stopTimeout bounds how long the worker waits for the agent's processes to die.
const stopTimeout = 10 * time.Second

// stop ends every process in the sandbox but the worker, and checks that none is left,
// before anything is captured. The agent may have left daemons behind (setsid, double fork,
// a reparented orphan): one of them could swap a directory for a symlink while outputs are
// hashed, or move a forged file over patch.diff after capture. With none alive, what the
// worker hashes is what the host reads.
//
// It runs only when the host says the sandbox has a PID namespace of its own
// (Manifest.PIDNamespace): kill(-1) there reaches exactly the sandbox's processes (the
// caller and the namespace's init are spared by the kernel); on the host it would reach
// everything the user may signal. The worker is that init (bwrap --as-pid-1) and is not
// dumpable (Main), so no process of the agent is spared or can act for the worker. The agent
// runs as the worker's user, so it cannot refuse the signal, and it cannot leave the
// namespace (no user namespaces, no capabilities).
func (r *runner) stop(ctx context.Context) *failure {
	if !r.man.PIDNamespace || !r.opts.stopOthers {
		return nil
	}
	deadline := time.Now().Add(stopTimeout)
	for {
		if err := unix.Kill(-1, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fail(lifecycle.ReasonWorkerFailed, "stop the agent's processes: %v", err)
		}
		reapOrphans()
		left, err := othersAlive()
		if err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "stop the agent's processes: %v", err)
		}
		if left == 0 {
			r.stopped = true
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fail(lifecycle.ReasonWorkerFailed, "stop the agent's processes: %d survived SIGKILL for %s", left, stopTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reapOrphans collects the exit status of every child that has one waiting. The worker is
// the namespace's init (bwrap --as-pid-1), so the agent's orphans are its children: left
// unreaped they would hold pids (RLIMIT_NPROC counts zombies). It runs only in stop, when no
// exec.Cmd of the worker's is waiting on its own child.
func reapOrphans() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// othersAlive counts the processes in /proc other than the worker and pid 1 that are not
// zombies (a zombie runs nothing; its parent or init reaps it).
func othersAlive() (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		state, err := procState(pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // gone between the listing and the read
		}
		if err != nil {
			return 0, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
		}
		if state != 'Z' && state != 'X' {
			n++
		}
	}
	return n, nil
}

// procState is the state letter of /proc/PID/stat (the field after the command name, which
// is in parentheses and may itself hold ")").
func procState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, fmt.Errorf("malformed")
	}
	return s[i+2], nil
}
