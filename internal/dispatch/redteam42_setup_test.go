package dispatch_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRedTeam42_LeaseHeldWhileSetupOrphanLives: a supervisor killed with -9 while its bwrap
// sets the sandbox up, before Start returns and so before any task id is recorded, can take
// bwrap's launcher with it while bwrap's sandbox process waits on the launcher's eventfd for
// its uid map: that process is never released, never runs the worker (no lifeline reaches
// it) and never ends, running as the dispatch's leased uid. With no task cgroup (a host
// without cgroup v2 delegation, as here by unmounting it) nothing of Reap named it: Reap gave
// the uid back at once, and left the process for good. Reap must end it (it is a sandbox's
// first process still in bwrap's code, its bwrap gone), and it must not give the uid back
// while any process runs as it.
func TestRedTeam42_LeaseHeldWhileSetupOrphanLives(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the sandbox runs as a leased uid only for a root supervisor")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("SKIP: unshare(1) not installed")
	}
	e := newEnv(t)
	p, err := local.New(local.Options{NoCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	e.d.LocalProvider = p
	e.subagent("agent", fmt.Sprintf("sleep 1000.%d", time.Now().UnixNano()%100000))
	for i := range 40 {
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "agent", Actor: "test", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// The supervisor in a mount namespace without the cgroup file systems: it makes no
		// task cgroup, so only the task id or the lease can tell Reap of its sandbox.
		sup := exec.Command("unshare", "-m", "sh", "-c",
			`umount -l /sys/fs/cgroup/unified 2>/dev/null; umount -l /sys/fs/cgroup 2>/dev/null; exec "$@"`,
			"sh", agoraBin, "dispatch", "supervise", r.ID)
		sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
		if err := sup.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); childNamed(sup.Process.Pid, "bwrap") == 0; time.Sleep(50 * time.Microsecond) {
			if time.Now().After(deadline) {
				sup.Process.Kill()
				sup.Wait()
				t.Fatal("the supervisor started no bwrap")
			}
		}
		time.Sleep(time.Duration(i%10) * 100 * time.Microsecond)
		uid := leasedUID(t, e.d.StateDir, r.ID)
		sup.Process.Kill()
		sup.Wait()
		// What got past bwrap's setup ends by itself (the lifeline, --die-with-parent).
		var stuck []string
		for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
			if stuck = procsOfUID(uid); len(stuck) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if _, err := e.d.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		live := procsOfUID(uid)
		_, err = os.Lstat(filepath.Join(e.d.StateDir, ".held", r.ID))
		held := err == nil
		if len(stuck) > 0 {
			t.Logf("trial %d: %v still ran as uid %d a second after the kill; after Reap: %v, stage held %v", i, stuck, uid, live, held)
		}
		for _, pid := range live {
			n, _ := strconv.Atoi(pid)
			syscall.Kill(n, syscall.SIGKILL)
		}
		if len(live) > 0 && !held {
			t.Fatalf("Reap gave uid %d back while %v still run as it", uid, live)
		}
		if len(live) > 0 {
			t.Fatalf("%v, the sandbox of a dispatch whose supervisor died, outlived Reap", live)
		}
		if len(stuck) > 0 {
			// Once they are gone, Reap gives the uid back.
			if _, err := e.d.Reap(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(e.d.StateDir, ".held", r.ID)); err == nil {
				t.Fatalf("the stage of %s stays held after its uid's last process ended", r.ID)
			}
			return
		}
	}
	t.Skip("SKIP: no kill landed in bwrap's setup in 40 trials")
}
