package local

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestRedTeam42_CancelSparesAProcessThatIsNoSandbox: a task id is trusted for no more than
// it can prove. A start time is counted from boot, so an id recorded before a reboot (a
// dispatch whose host went down with it, reaped by the first agora command after) can name,
// pid and start time alike, a process of the new boot; and an id can be edited where it is
// stored. Its sandbox part must then kill nothing that is not a sandbox's first process (the
// first process of a pid namespace below this one, which every sandbox's is from its clone
// on), whatever its bwrap part says: gone (a) or not a session leader (b).
func TestRedTeam42_CancelSparesAProcessThatIsNoSandbox(t *testing.T) {
	self, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		leader func(victim int, start uint64) (int, uint64)
	}{
		{"bwrap gone", func(int, uint64) (int, uint64) { return os.Getpid(), self.start + 1 }},
		{"bwrap is the victim too", func(v int, s uint64) (int, uint64) { return v, s }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim := exec.Command("sleep", "60")
			if err := victim.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
			st, err := readProcStat(victim.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			pid, start := tc.leader(victim.Process.Pid, st.start)
			id := taskID{pid: pid, start: start, init: victim.Process.Pid, initStart: st.start}.String()
			_ = newProvider(t, Options{}).Cancel(t.Context(), id)
			time.Sleep(50 * time.Millisecond)
			if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
				t.Fatalf("Cancel(%s) killed pid %d, which is no sandbox: %v", id, victim.Process.Pid, err)
			}
			var ws syscall.WaitStatus
			if n, _ := syscall.Wait4(victim.Process.Pid, &ws, syscall.WNOHANG, nil); n != 0 {
				t.Fatalf("Cancel(%s) killed pid %d, which is no sandbox (%v)", id, victim.Process.Pid, ws)
			}
		})
	}
}

// TestRedTeam42_CancelOfAnInitThatCannotDieReturns: an id whose sandbox part names this pid
// namespace's init (pid 1, which no signal from inside its namespace ends) or a kernel thread
// (start time 0) made Cancel signal it and then wait on it for as long as its context allowed:
// Reap's, with none, for ever, and every agora command reaps first. Neither is a sandbox:
// Cancel returns at once and signals nothing.
func TestRedTeam42_CancelOfAnInitThatCannotDieReturns(t *testing.T) {
	self, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{1, 2} {
		st, err := readProcStat(pid)
		if err != nil {
			t.Skipf("SKIP: pid %d is not visible here: %v", pid, err)
		}
		id := taskID{pid: os.Getpid(), start: self.start + 1, init: pid, initStart: st.start}.String()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		began := time.Now()
		err = newProvider(t, Options{}).Cancel(ctx, id)
		cancel()
		if err != nil || time.Since(began) > 2*time.Second {
			t.Errorf("Cancel(%s) took %s: %v", id, time.Since(began).Round(time.Millisecond), err)
		}
	}
}
