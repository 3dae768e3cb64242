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
// without cgroup v2 delegation, as here by unmounting it) nothing of Reap can name it, and
// Reap gave the uid back at once: the next dispatch could lease a uid a process still runs
// as. While a process of the host runs as the leased uid, the stage (and so the lease) must
// stay held.
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
	for i := range 30 {
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
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		uid := leasedUID(t, e.d.StateDir, r.ID)
		sup.Process.Kill()
		sup.Wait()
		if _, err := e.d.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The lifeline and --die-with-parent end whatever got past bwrap's setup.
		var live []string
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if live = procsOfUID(uid); len(live) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(live) == 0 {
			continue
		}
		_, err = os.Lstat(filepath.Join(e.d.StateDir, ".held", r.ID))
		held := err == nil
		t.Logf("trial %d: processes %v still run as uid %d after Reap; stage held: %v", i, live, uid, held)
		for _, pid := range live {
			n, _ := strconv.Atoi(pid)
			syscall.Kill(n, syscall.SIGKILL)
		}
		if !held {
			t.Fatalf("Reap gave uid %d back while %v still run as it", uid, live)
		}
		// Once they are gone, the next Reap gives the uid back.
		for deadline := time.Now().Add(10 * time.Second); len(procsOfUID(uid)) > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v outlived SIGKILL", procsOfUID(uid))
			}
		}
		if _, err := e.d.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(e.d.StateDir, ".held", r.ID)); err == nil {
			t.Fatalf("the stage of %s stays held after its uid's last process ended", r.ID)
		}
		return
	}
	t.Skip("SKIP: no kill landed in bwrap's setup in 30 trials")
}
