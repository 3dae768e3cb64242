package dispatch_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRedTeam42_SupervisorKilledAtEveryPoint kills `agora dispatch supervise` with -9 at
// several moments from its bwrap's start on (held on --block-fd, just released, the worker
// starting, the agent running), the agent meanwhile trying to outlive it (a double fork,
// setsid, a pid namespace of its own). After Reap, which gives the dispatch's uid lease
// back, no process may run as that uid: the next dispatch could lease it.
func TestRedTeam42_SupervisorKilledAtEveryPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the sandbox runs as a leased uid only for a root supervisor")
	}
	e := newEnv(t)
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%100000)
	e.subagent("clingy", `
( setsid sh -c 'sleep `+marker+`1' & ) 
( sh -c 'sleep `+marker+`2 & exit 0' )
unshare -Ufp --mount-proc sleep `+marker+`3 2>/dev/null &
sleep `+marker+`0
`)
	for _, delay := range []time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond, 5 * time.Millisecond,
		10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "clingy", Actor: "test", Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
			sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
			if err := sup.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); childNamed(sup.Process.Pid, "bwrap") == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(deadline) {
					sup.Process.Kill()
					sup.Wait()
					t.Fatal("the supervisor started no bwrap")
				}
			}
			time.Sleep(delay)
			uid := leasedUID(t, e.d.StateDir, r.ID)
			before := procsOfUID(uid)
			sup.Process.Kill()
			sup.Wait()
			if _, err := e.d.Reap(t.Context()); err != nil {
				t.Fatal(err)
			}
			cur, _ := e.d.Records.Get(t.Context(), r.ID)
			held := true
			if _, err := os.Lstat(filepath.Join(e.d.StateDir, ".held", r.ID)); os.IsNotExist(err) {
				held = false
			}
			live := procsOfUID(uid)
			t.Logf("killed %s after bwrap (%d processes of the uid): record %s %s; held %v; live after reap %v", delay, len(before), cur.State, cur.Reason, held, live)
			if !held && len(live) > 0 {
				t.Errorf("the uid %d lease was given back with sandbox processes %v still running as it", uid, live)
			}
			for deadline := time.Now().Add(10 * time.Second); len(procsOfUID(uid)) > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("sandbox processes %v outlived their killed supervisor", procsOfUID(uid))
				}
			}
			if processWithArg(marker) {
				t.Fatalf("an agent process (%s) outlived its killed supervisor", marker)
			}
		})
	}
}

// childNamed returns a child of pid whose command is comm, 0 when none.
func childNamed(pid int, comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := agoratest.ReadProcStat(n); err == nil && st.Comm == comm && st.PPID == pid {
			return n
		}
	}
	return 0
}

// leasedUID is the uid dispatch id leased (its file in the lease directory names it).
func leasedUID(t *testing.T, stateDir, id string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		ents, _ := os.ReadDir(filepath.Join(stateDir, ".uids"))
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(stateDir, ".uids", e.Name()))
			if string(b) == id {
				n, _ := strconv.Atoi(e.Name())
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatch %s leased no uid", id)
		}
	}
}

// procsOfUID lists the processes whose real uid is uid (zombies excluded: they run nothing).
func procsOfUID(uid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var state, uidLine string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				state = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				uidLine = v
			}
		}
		f := strings.Fields(uidLine)
		if len(f) > 0 && f[0] == strconv.Itoa(uid) && !strings.HasPrefix(state, "Z") {
			out = append(out, e.Name())
		}
	}
	return out
}
