package dispatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

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
