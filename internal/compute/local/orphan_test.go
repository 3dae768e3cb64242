package local

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
)

// TestCancel_SandboxOrphanedBeforeRelease: bwrap sets its sandbox process's parent-death
// signal only after --block-fd releases it, so a provider killed with -9 between the start
// and that moment leaves bwrap dead and the sandbox running its command with no parent to
// die with (CI saw a dispatch's agent outlive its killed supervisor this way). Cancel from
// another process, which is what the dispatcher's Reap does, must still kill it: the task id
// names the sandbox process too.
func TestCancel_SandboxOrphanedBeforeRelease(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	// Last: the task cgroup outlives the supervisor killed here, as it would a real one's,
	// until Reap releases the dispatch; left, every run would leak one.
	t.Cleanup(func() {
		if err := newProvider(t, Options{}).Release(context.Background(), "orphan"); err != nil {
			t.Errorf("release the orphan's cgroup: %v", err)
		}
	})
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	var out, errOut syncBuffer
	s := compute.Spec{ID: "orphan", Argv: []string{"sleep", marker}, Env: []string{"PATH=/usr/bin:/bin"},
		Stdout: &out, Stderr: &errOut}
	h, blockW, err := p.startHeld(t.Context(), s, resolveLimits(s.Limits), nil, stagedSystem{})
	if err != nil {
		t.Fatal(err)
	}
	taskID := h.TaskID()
	tid, err := parseTaskID(taskID)
	if err != nil || tid.init == 0 || tid.init != h.sandboxPID {
		t.Fatalf("task id %q (%+v, %v) does not name the sandbox process %d", taskID, tid, err, h.sandboxPID)
	}
	// The supervisor dies before the release: its bwrap goes with it (Pdeathsig), the write
	// end of the block pipe closes, and the sandbox reads EOF and runs its command.
	if err := syscall.Kill(h.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Reap it as the dead supervisor's reaper would: the pid no longer names it, so nothing
	// can reach the sandbox through bwrap's pid or process group.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(h.pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	// exec.Cmd's copies of the output end with the sandbox.
	t.Cleanup(func() { _ = h.cmd.Wait() })
	blockW.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(procsWith(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Skipf("SKIP: this bubblewrap ended the sandbox whose bwrap died before its release (stderr %q): nothing is left for Cancel to kill", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(tid.init, syscall.SIGKILL) })
	// A provider that did not start it, as Reap's is.
	if err := newProvider(t, Options{}).Cancel(t.Context(), taskID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(procsWith(marker)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned sandbox (sleep %s, pids %s) outlived Cancel of %s", marker, strings.Join(procsWith(marker), " "), taskID)
		}
	}
	// Cancel of a task whose sandbox is gone, or whose pid is another process now, is a no-op.
	if err := newProvider(t, Options{}).Cancel(t.Context(), taskID); err != nil {
		t.Fatalf("second Cancel: %v", err)
	}
}
