package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
// Cancel returns at once (refusing the id of pid 1) and signals nothing.
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
		// pid 1 is refused as no task's; either way nothing is signalled or waited for.
		if (err != nil && !errors.Is(err, ErrBadTaskID)) || time.Since(began) > 2*time.Second {
			t.Errorf("Cancel(%s) took %s: %v", id, time.Since(began).Round(time.Millisecond), err)
		}
	}
}

// rt42InnerEnv runs TestRedTeam42_CancelNeverSignalsEveryProcess's inner half: the test
// binary as pid 1 of a user and pid namespace of its own, where kill(-1) reaches no process
// of the host.
const rt42InnerEnv = "AGORA_TEST_RT42_INNER"

// TestRedTeam42_CancelNeverSignalsEveryProcess: an id whose bwrap part names pid 1 with its
// start time passed cancelLeader's checks (pid 1 leads its session and group), and its
// process-group kill was kill(-1, SIGKILL): every process the caller may signal, which for a
// root Reap is every process of the host. No bwrap is ever pid 1 of the namespace its
// supervisor sees, so such an id is forged or broken: Cancel must signal no one for it. Run
// where kill(-1) is harmless: in a namespace of the test's own, with one bystander process.
func TestRedTeam42_CancelNeverSignalsEveryProcess(t *testing.T) {
	if os.Getenv(rt42InnerEnv) != "" {
		rt42Inner(t)
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("SKIP: unshare(1) not installed")
	}
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
		os.Args[0], "-test.run=^TestRedTeam42_CancelNeverSignalsEveryProcess$", "-test.v")
	cmd.Env = append(os.Environ(), rt42InnerEnv+"=1")
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "SKIP:"):
		t.Skipf("SKIP: the inner half: %s", out)
	case strings.Contains(string(out), "bystander killed"):
		t.Fatalf("Cancel of a task id naming pid 1 killed every process it could:\n%s", out)
	case err != nil || !strings.Contains(string(out), "bystander alive"):
		t.Fatalf("inner half: %v\n%s", err, out)
	}
}

func rt42Inner(t *testing.T) {
	if os.Getpid() != 1 {
		t.Skip("SKIP: the inner half is not its namespace's pid 1")
	}
	if _, err := syscall.Setsid(); err != nil {
		t.Skipf("SKIP: setsid: %v", err)
	}
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { bystander.Process.Kill(); bystander.Wait() }()
	self, err := readProcStat(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	id := taskID{pid: 1, start: self.start}.String()
	err = newProvider(t, Options{NoCgroup: true}).Cancel(ctx, id)
	time.Sleep(50 * time.Millisecond)
	var ws syscall.WaitStatus
	if n, _ := syscall.Wait4(bystander.Process.Pid, &ws, syscall.WNOHANG, nil); n != 0 {
		fmt.Printf("bystander killed (%v) by Cancel(%s): %v\n", ws, id, err)
		return
	}
	fmt.Printf("bystander alive after Cancel(%s): %v\n", id, err)
}
