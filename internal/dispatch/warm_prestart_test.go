package dispatch_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestWarm_WorkerStartedAhead: a ready slot's worker is already running
// before any dispatch claims it, holding nothing of a dispatch (no dispatch id, no secrets,
// only its claim pipe named), and the claimed dispatch ends as a cold one does. A slot whose
// worker is killed before its claim is counted failed and the dispatch runs cold, finished.
func TestWarm_WorkerStartedAhead(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.subagent("hello", `echo made > hello.txt`)
	cold := e.run(dispatch.Request{Subagent: "hello"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 1)
	pid := slotWorker(t, e.d.StateDir)
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	for _, kv := range vars {
		if strings.HasPrefix(kv, "AGORA_DISPATCH_ID=") || strings.HasPrefix(kv, wire.ProxyTokenEnv+"=") {
			t.Errorf("the waiting worker holds %q before any claim", kv)
		}
	}
	if !strings.Contains(string(env), wire.ClaimFDEnv+"=") {
		t.Errorf("the waiting worker has no %s: %q", wire.ClaimFDEnv, vars)
	}
	hot := e.run(dispatch.Request{Subagent: "hello"})
	if hot.State != lifecycle.DispatchFinished || hot.Isolation != cold.Isolation || !strings.Contains(e.patch(hot), "+made") {
		t.Fatalf("warm: %s %s %s, isolation %q (cold %q), patch %q", hot.State, hot.Reason, hot.Detail, hot.Isolation, cold.Isolation, e.patch(hot))
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("after the warm dispatch: %+v, want claimed 1", c)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("the claimed slot's worker %d outlived its dispatch", pid)
	}

	// The next slot's worker dies before its claim: the dispatch must not get its exit.
	waitWarmReady(t, w, 1)
	victim, bwrap := slotWorker(t, e.d.StateDir), 0
	for _, f := range slotTasks(e.d.StateDir) {
		if b := taskPID(f); b > 0 && descendantNamed(b, "agora-worker") == victim {
			bwrap = b
		}
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Its bwrap (the slot's process) ends with it: from then on the pool sees the slot dead.
	for _, p := range []int{victim, bwrap} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if !agoratest.Running(p) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d is still running after the slot's worker was killed", p)
			}
		}
	}
	after := e.run(dispatch.Request{Subagent: "hello"})
	if after.State != lifecycle.DispatchFinished || !strings.Contains(e.patch(after), "+made") {
		t.Fatalf("after the slot's worker died: %s %s %s", after.State, after.Reason, after.Detail)
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 1 || c.Failed != 1 {
		t.Fatalf("after a dispatch whose slot died: %+v, want claimed 1, cold 1, failed 1", c)
	}
}

// slotWorker returns the pid of the worker running in the (one) ready slot under stateDir:
// the process named agora-worker below the slot's bwrap.
func slotWorker(t *testing.T, stateDir string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, f := range slotTasks(stateDir) {
			if b := taskPID(f); b > 0 {
				if pid := descendantNamed(b, "agora-worker"); pid > 0 {
					return pid
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker running in the slots %v", slotTasks(stateDir))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slotTasks lists the task files of the default target's slots.
func slotTasks(stateDir string) []string {
	tasks, _ := filepath.Glob(filepath.Join(stateDir, ".warm", config.DefaultTarget, "slot-*", "task"))
	return tasks
}

// taskPID is the bwrap pid a slot's task file names, 0 when unreadable.
func taskPID(f string) int {
	b, err := os.ReadFile(f)
	if err != nil {
		return 0
	}
	s, _ := strings.CutPrefix(string(b), "local:")
	p, _, _ := strings.Cut(s, ":")
	n, _ := strconv.Atoi(p)
	return n
}

// descendantNamed returns a process named comm below pid, 0 when none.
func descendantNamed(pid int, comm string) int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	var named []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := agoratest.ReadProcStat(n)
		if err != nil {
			continue
		}
		parent[n] = st.PPID
		if strings.TrimSpace(st.Comm) == comm {
			named = append(named, n)
		}
	}
	for _, n := range named {
		for q, hops := n, 0; q > 1 && hops < 64; q, hops = parent[q], hops+1 {
			if q == pid {
				return n
			}
		}
	}
	return 0
}
