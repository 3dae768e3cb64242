package dispatch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSupervise_KilledBetweenEndAndCleanup: a supervisor records the
// dispatch's end before it unmounts the disk quota and removes the stage's work. Attack: it
// is killed with -9 in that window (held there by strace, which delays its unmounts by 3 s).
// The record must stay as the supervisor ended it (not relabelled lost, one end entry in
// the audit), and the next Reap must release everything the stage held: the quota's mount,
// the work directories, the held index entry, the task cgroup.
func TestSupervise_KilledBetweenEndAndCleanup(t *testing.T) {
	requireRootLimits(t)
	strace := requireTool(t, "strace")
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.home.Dir, config.FileName), []byte("targets:\n  local:\n    disk: 64MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Long enough for strace to attach before the sandbox ends.
	e.subagent("short", "echo hi > f; sleep 1")
	r, sup := startDetachedSupervisor(t, e, dispatch.Request{Subagent: "short", Timeout: time.Minute})
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	t.Cleanup(func() {
		syscall.Unmount(filepath.Join(stage, "disk"), syscall.MNT_DETACH)
		if cgs, _ := filepath.Glob(filepath.Join(cgroupParentOfSelf(t), "agora-"+r.ID+"-*")); len(cgs) > 0 {
			os.Remove(cgs[0])
		}
	})
	agoratest.WaitFor(t, 30*time.Second, "the dispatch to start", func() bool {
		cur, err := e.d.Records.Get(t.Context(), r.ID)
		return err == nil && cur.State == lifecycle.DispatchStarted
	})
	pid := strconv.Itoa(sup.Process.Pid)
	tr := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=umount2", "-e", "inject=umount2:delay_enter=3000000", "-p", pid)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	agoratest.WaitFor(t, 10*time.Second, "strace to attach to every thread of the supervisor", func() bool {
		return agoratest.AllThreadsTraced(sup.Process.Pid)
	})
	var final *dispatch.Record
	agoratest.WaitFor(t, 30*time.Second, "the dispatch to end", func() bool {
		cur, err := e.d.Records.Get(t.Context(), r.ID)
		final = cur
		return err == nil && lifecycle.DispatchEnded(cur.State)
	})
	if final.StartedAt == nil {
		t.Fatalf("the dispatch ended %s/%s before strace attached: %s", final.State, final.Reason, final.Detail)
	}
	// In the window: the end is recorded, the supervisor lives and its stage is still held.
	if _, alive, err := e.d.Records.Supervisor(t.Context(), r.ID); err != nil || !alive {
		t.Fatalf("the supervisor is gone when the end is recorded (alive %v, %v): not the window under test", alive, err)
	}
	if _, err := os.Stat(filepath.Join(e.home.Dir, home.DispatchDir, ".held", r.ID)); err != nil {
		t.Fatalf("the stage is released before the window (%v): not the window under test", err)
	}
	if m := agoratest.MountsUnder(t, stage); len(m) == 0 {
		t.Fatal("the disk quota is unmounted before the window: not the window under test")
	}
	sup.Process.Kill()
	sup.Wait()
	if _, err := e.d.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != final.State || after.Reason != final.Reason || after.State != lifecycle.DispatchFinished {
		t.Errorf("the record ended %s/%s and reads %s/%s after the kill and Reap; want it unchanged, finished",
			final.State, final.Reason, after.State, after.Reason)
	}
	recs, err := audit.List(t.Context(), e.home.DB.SQL(), audit.ListOptions{Kind: "dispatch.*"})
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, a := range recs {
		if a.Subject == entry.Dispatch(r.ID) && dispatch.DispatchEnd(a.Kind) {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("%d end entries of dispatch %s in the audit, want 1", ends, r.ID)
	}
	if m := agoratest.MountsUnder(t, stage); len(m) > 0 {
		t.Errorf("after the kill and Reap the disk quota is still mounted: %v", m)
	}
	for _, work := range []string{"bundle", "disk", "workspace", "out"} {
		if _, err := os.Lstat(filepath.Join(stage, work)); err == nil {
			t.Errorf("after the kill and Reap the stage still holds %s", work)
		}
	}
	if held, _ := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".held")); len(held) > 0 {
		t.Errorf("after the kill and Reap the held index still lists %v", held)
	}
	if cgs, _ := filepath.Glob(filepath.Join(cgroupParentOfSelf(t), "agora-"+r.ID+"-*")); len(cgs) > 0 {
		t.Errorf("after the kill and Reap the task cgroup %v is left behind", cgs)
	}
}
