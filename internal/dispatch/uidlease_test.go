package dispatch

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
)

// collidingIDs finds two dispatch ids whose hashes pick the same uid of the range at first:
// what two concurrent dispatches met by chance before the lease.
func collidingIDs(t *testing.T, first config.UID) (string, string) {
	t.Helper()
	seen := map[uint32]string{}
	for i := 0; i < 1<<20; i++ {
		id := fmt.Sprintf("01JLEASE%08d", i)
		uid := first.For(id)
		if other, ok := seen[uid]; ok {
			return other, id
		}
		seen[uid] = id
	}
	t.Fatal("no colliding ids in 2^20")
	return "", ""
}

// The attack: two concurrent dispatches whose ids hash to the same uid would share
// RLIMIT_NPROC, so one could keep the other from forking. The second gets another uid while
// the first runs, and the uid is free again once the first has ended.
func TestLeaseUID_ConcurrentDispatchesNeverShare(t *testing.T) {
	dir := t.TempDir()
	first := config.UID(config.DefaultSandboxUID)
	a, b := collidingIDs(t, first)
	la, err := leaseUID(dir, first, a)
	if err != nil {
		t.Fatal(err)
	}
	if la.uid != first.For(a) {
		t.Errorf("A leased %d, want its own %d", la.uid, first.For(a))
	}
	lb, err := leaseUID(dir, first, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ids %s and %s both hash to uid %d; leased %d and %d", a, b, first.For(a), la.uid, lb.uid)
	if lb.uid == la.uid {
		t.Fatalf("B leased A's uid %d while A runs", la.uid)
	}
	if lo, hi := first.Range(); lb.uid < lo || lb.uid > hi {
		t.Errorf("B leased %d, outside the range [%d, %d]", lb.uid, lo, hi)
	}
	la.release()
	lb.release()
	again, err := leaseUID(dir, first, b)
	if err != nil {
		t.Fatal(err)
	}
	defer again.release()
	if again.uid != first.For(b) {
		t.Errorf("after A ended, B leased %d, want its own %d", again.uid, first.For(b))
	}
}

// A supervisor killed with -9 gives its uid back: the kernel drops its lock. The holder here
// is a real process, flock(1), on the lease file of the id's uid.
func TestLeaseUID_DeadHolderReleases(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("SKIP: flock(1) is not installed (util-linux)")
	}
	dir := t.TempDir()
	first := config.UID(config.DefaultSandboxUID)
	id := "01JLEASEDEAD"
	own := first.For(id)
	if _, err := leaseUID(dir, first, "01JMKDIR"); err != nil { // creates the lease directory
		t.Fatal(err)
	}
	file := filepath.Join(dir, uidLeaseDir, strconv.FormatUint(uint64(own), 10))
	// -o: the lock is flock(1)'s alone, not also its child's.
	holder := exec.Command("flock", "-o", file, "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	var l *uidLease
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if l, err = leaseUID(dir, first, id); err != nil {
			t.Fatal(err)
		}
		if l.uid != own || time.Now().After(deadline) {
			break
		}
		l.release() // flock(1) has not taken it yet
	}
	l.release()
	if l.uid == own {
		t.Fatalf("leased uid %d while another process held it", own)
	}
	holder.Process.Kill()
	holder.Wait()
	// flock(1)'s child holds a copy of the locked descriptor from its fork until it closes it
	// before its exec: under load that can outlive flock(1) itself for a moment, so the uid is
	// asked for again until that copy is gone too.
	agoratest.WaitFor(t, 10*time.Second, "the dead holder's uid to be leasable", func() bool {
		l, err := leaseUID(dir, first, id)
		if err != nil {
			t.Fatal(err)
		}
		defer l.release()
		return l.uid == own
	})
}

// A range whose every uid is held fails closed, naming why, rather than sharing one.
func TestLeaseUID_ExhaustedRangeFails(t *testing.T) {
	dir := t.TempDir()
	first := config.UID(1<<31 - 3) // capped below 2^31: three uids
	var held []*uidLease
	defer func() {
		for _, l := range held {
			l.release()
		}
	}()
	for i := 0; i < 3; i++ {
		l, err := leaseUID(dir, first, fmt.Sprintf("01JFULL%d", i))
		if err != nil {
			t.Fatalf("lease %d of 3: %v", i, err)
		}
		held = append(held, l)
	}
	if l, err := leaseUID(dir, first, "01JFULL3"); err == nil || !strings.Contains(err.Error(), "no free sandbox uid") {
		t.Errorf("a fourth lease of three uids: %+v, %v; want refused", l, err)
	}
}

// BenchmarkLeaseUID is the lease's cost per dispatch with 100 other dispatches running, the
// baseline being no lease at all (the hash alone, BenchmarkLeaseUID_HashOnly).
func BenchmarkLeaseUID(b *testing.B) {
	dir := b.TempDir()
	first := config.UID(config.DefaultSandboxUID)
	for i := 0; i < 100; i++ {
		l, err := leaseUID(dir, first, fmt.Sprintf("01JRUNNING%d", i))
		if err != nil {
			b.Fatal(err)
		}
		defer l.release()
	}
	i := 0
	for b.Loop() {
		l, err := leaseUID(dir, first, fmt.Sprintf("01JBENCH%d", i))
		if err != nil {
			b.Fatal(err)
		}
		l.release()
		i++
	}
}

func BenchmarkLeaseUID_HashOnly(b *testing.B) {
	first := config.UID(config.DefaultSandboxUID)
	i := 0
	for b.Loop() {
		_ = first.For(fmt.Sprintf("01JBENCH%d", i))
		i++
	}
}

// A container outlives its supervisor killed with -9, whose lock the
// kernel drops at once. While the dead dispatch's stage is held (Reap has not had the
// provider remove the container), its uid stays taken; once released, it is free again.
func TestLeaseUID_OrphanedSandboxKeepsUID(t *testing.T) {
	dir := t.TempDir()
	first := config.UID(config.DefaultSandboxUID)
	a, b := collidingIDs(t, first)
	la, err := leaseUID(dir, first, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := stageAt(dir, a).hold(); err != nil {
		t.Fatal(err)
	}
	la.release() // the supervisor dies: the kernel drops its lock
	lb, err := leaseUID(dir, first, b)
	if err != nil {
		t.Fatal(err)
	}
	if lb.uid == la.uid {
		t.Fatalf("B leased uid %d while A's orphaned sandbox may still run as it", la.uid)
	}
	lb.release()
	stageAt(dir, a).removeWork() // Reap: the provider removed A's sandbox, the stage is released
	again, err := leaseUID(dir, first, b)
	if err != nil {
		t.Fatal(err)
	}
	defer again.release()
	if again.uid != la.uid {
		t.Errorf("after A was reaped B leased %d, want the shared uid %d", again.uid, la.uid)
	}
}
