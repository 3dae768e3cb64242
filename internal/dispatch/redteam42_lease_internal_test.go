package dispatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/host"
	"github.com/agora-dev/agora/internal/config"
)

// TestRedTeam42_SlotLeaseNotReusedWhileItsUIDRuns: a warm slot leases its uid under a name of
// its own ("warm-..."), which no held stage keeps: a holder killed with -9 while the slot's
// bwrap set it up (before the slot's task file names it for ReapSlots) can leave bwrap's
// sandbox process waiting for ever, as that uid, on the dead launcher's eventfd. Its lock gone,
// the uid looked free, and the next dispatch leased a uid a process still ran as. A lease a
// slot left is free only once no process runs as its uid.
func TestRedTeam42_SlotLeaseNotReusedWhileItsUIDRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: running a process as the sandbox uid needs root")
	}
	dir := t.TempDir()
	first := config.UID(config.DefaultSandboxUID)
	id := "01JRT42SLOTLEASE"
	own := first.For(id)
	if err := os.MkdirAll(filepath.Join(dir, uidLeaseDir), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, uidLeaseDir, strconv.FormatUint(uint64(own), 10))
	if err := os.WriteFile(file, []byte("warm-0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	stuck := exec.Command("sleep", "60")
	stuck.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: own, Gid: own}}
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stuck.Process.Kill(); stuck.Wait() }()
	l, err := leaseUID(dir, first, id)
	if err != nil {
		t.Fatal(err)
	}
	l.release()
	if l.uid == own {
		t.Fatalf("leased uid %d while pid %d runs as it", own, stuck.Process.Pid)
	}
	stuck.Process.Kill()
	stuck.Wait()
	if l, err = leaseUID(dir, first, id); err != nil {
		t.Fatal(err)
	}
	l.release()
	if l.uid != own {
		t.Errorf("after its last process ended, leased %d, want %d", l.uid, own)
	}
}

// TestRedTeam42_ReleaseEndsAnOrphanedSandbox: a sandbox whose bwrap died before its command
// bound itself to it (--die-with-parent takes effect only after the release) runs on
// unsupervised as the leased uid; a verify gate's command has no worker, and so no lifeline,
// and one whose supervisor died before recording the gate's task leaves Reap nothing to cancel.
// Releasing the dispatch must end it: the first process of a pid namespace, running as the
// uid, whose parent is neither a bwrap nor a process of the uid (its own sandbox's), is an
// orphaned sandbox. Here: `unshare --pid --fork sleep` as the uid, its unshare killed.
func TestRedTeam42_ReleaseEndsAnOrphanedSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: running a process as the sandbox uid needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("SKIP: unshare(1) not installed")
	}
	dir := t.TempDir()
	first := config.UID(config.DefaultSandboxUID)
	id := "01JRT42ORPHANGATE"
	l, err := leaseUID(dir, first, id)
	if err != nil {
		t.Fatal(err)
	}
	l.release() // its supervisor died: the lock is gone, the file still names the dispatch
	uid := strconv.FormatUint(uint64(l.uid), 10)
	launcher := exec.Command("unshare", "--user", "--pid", "--fork", "sleep", "61.42")
	launcher.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: l.uid, Gid: l.uid}}
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	var orphan int
	for deadline := time.Now().Add(10 * time.Second); orphan == 0; time.Sleep(10 * time.Millisecond) {
		pids, _ := host.UIDProcesses(uid)
		for _, p := range pids {
			if b, _ := os.ReadFile("/proc/" + p + "/cmdline"); strings.Contains(string(b), "61.42") && !strings.Contains(string(b), "unshare") {
				orphan, _ = strconv.Atoi(p)
			}
		}
		if time.Now().After(deadline) {
			launcher.Process.Kill()
			launcher.Wait()
			t.Skip("SKIP: unshare --user --pid started no sandbox here")
		}
	}
	launcher.Process.Kill()
	launcher.Wait()
	t.Cleanup(func() { syscall.Kill(orphan, syscall.SIGKILL) })
	if err := leasedUIDIdle(dir, id); err != nil {
		t.Fatalf("release of %s: %v", id, err)
	}
	if pids, _ := host.UIDProcesses(uid); len(pids) > 0 {
		t.Fatalf("the orphaned sandbox %d outlived its dispatch's release: %v", orphan, pids)
	}
}
