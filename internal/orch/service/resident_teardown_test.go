package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// The resident releases a handed dispatch's stage after its CLI exits
// (Dispatcher.BackgroundTeardowns). These attack that window with real processes.

// slowUnmounts attaches strace to process pid so that each of its umount2 calls (the disk
// quota's unmount, the first step of a release) waits d first, and returns once every thread
// is traced. The tracer is killed when the test ends. With -f it traces the sandboxes' bwrap
// too, whose own unmounts (pivot_root's old root) are delayed as well: a CLI then takes twice
// d more to have its answer, not a finding.
func slowUnmounts(t *testing.T, pid int, d time.Duration) *exec.Cmd {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("SKIP: strace is not installed; it holds the resident's release")
	}
	tr := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=umount2",
		"-e", "inject=umount2:delay_enter="+strconv.FormatInt(d.Microseconds(), 10), "-p", strconv.Itoa(pid))
	must(t, tr.Start())
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	agoratest.WaitFor(t, 10*time.Second, "strace to trace every thread of the resident", func() bool {
		return agoratest.AllThreadsTraced(pid)
	})
	return tr
}

// requireReleased fails t unless nothing of the home's dispatches is held or mounted any
// more, when (a moment of the test) has passed.
func (e *env) requireReleased(when string) {
	e.t.Helper()
	if held := e.heldStages(); len(held) != 0 {
		e.t.Errorf("held %s: %v", when, held)
	}
	if m := agoratest.MountsUnder(e.t, e.home); len(m) != 0 {
		e.t.Errorf("mounted %s: %v", when, m)
	}
}

// heldStages lists the home's held index.
func (e *env) heldStages() []string {
	ents, _ := os.ReadDir(filepath.Join(e.home, "dispatches", ".held"))
	var out []string
	for _, ent := range ents {
		out = append(out, ent.Name())
	}
	return out
}

// dispatchID is the id the accepted line of a CLI's stderr names.
func dispatchID(t *testing.T, stderr string) string {
	t.Helper()
	for l := range strings.Lines(stderr) {
		if rest, ok := strings.CutPrefix(l, "agora: "); ok {
			if id, _, ok := strings.Cut(rest, " accepted: "); ok {
				return id
			}
		}
	}
	t.Fatalf("no accepted line:\n%s", stderr)
	return ""
}

// leasedUID is the sandbox uid whose lease file names dispatch id, "" for none.
func (e *env) leasedUID(id string) string {
	dir := filepath.Join(e.home, "dispatches", ".uids")
	ents, _ := os.ReadDir(dir)
	for _, ent := range ents {
		if b, _ := os.ReadFile(filepath.Join(dir, ent.Name())); string(b) == id {
			return ent.Name()
		}
	}
	return ""
}

// taskCgroups lists the cgroup v2 directories named for dispatch id (agora-ID-*).
func taskCgroups(id string) []string {
	var out []string
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.HasPrefix(d.Name(), "agora-"+id+"-") {
				out = append(out, p)
				return filepath.SkipDir
			}
			if strings.Count(p, "/") > 7 {
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out
}

// TestResident_HostileLeftoversGone: a handed dispatch whose command leaves processes
// behind every way a shell can (a background job, setsid, nohup, a double fork) and fills
// its workspace. After its CLI has its answer, and again after the resident left, nothing
// of it runs as its uid, no task cgroup of it is left, and once the resident left its stage
// is neither held nor mounted.
func TestResident_HostileLeftoversGone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: the sandbox uid and the disk quota")
	}
	e := residentEnv(t, "targets:\n  local:\n    disk: 64MiB\n")
	e.applySubagents(map[string]string{
		"ok": "runtime: exec\ncommand: [sh, -c, 'echo fine']\ncapabilities: [shell]\n",
		"leaver": "runtime: exec\ncommand: [sh, -c, 'sleep 100 & setsid sleep 101 & nohup sleep 102 >/dev/null 2>&1 & " +
			"(sh -c \"sleep 103 &\" &); for i in 1 2 3 4 5 6 7 8; do mkdir d$i; for j in 1 2 3 4 5 6 7 8; do echo $i$j > d$i/f$j; done; done; echo left']\ncapabilities: [shell]\n",
	})
	e.firstResident()
	var ids []string
	for range 3 {
		code, _, stderr := e.oneShot(nil, "--subagent", "leaver")
		if code != 0 || !strings.Contains(stderr, "finished") {
			t.Fatalf("leaver: exit %d\n%s", code, stderr)
		}
		id := dispatchID(t, stderr)
		ids = append(ids, id)
		uid := e.leasedUID(id)
		if uid == "" {
			t.Fatalf("no uid lease names %s", id)
		}
		// The CLI has its answer: the sandbox's processes are gone already (its tree is
		// killed before the end is recorded), whatever the release has yet to do.
		if pids := agoratest.ProcsOfUID(uid); len(pids) != 0 {
			t.Errorf("%s: processes still run as its uid %s after its CLI exited: %v", id, uid, pids)
		}
	}
	if n := e.stopResident(); n != 3 {
		t.Errorf("the resident took %d dispatches, want 3", n)
	}
	e.requireReleased("after the resident left")
	for _, id := range ids {
		if cgs := taskCgroups(id); len(cgs) != 0 {
			t.Errorf("%s: task cgroups left after the resident left: %v", id, cgs)
		}
		for _, dir := range []string{"bundle", "workspace", "out", "disk"} {
			if _, err := os.Lstat(filepath.Join(e.home, "dispatches", id, dir)); !os.IsNotExist(err) {
				t.Errorf("%s: %s left after the resident left (%v)", id, dir, err)
			}
		}
	}
}

// TestResident_StopWaitsForPendingReleases: releases held back (strace delays the resident's
// unmounts) when `agora dispatch resident --stop` runs: --stop returns only once the resident
// is gone, and by then every stage is released.
func TestResident_StopWaitsForPendingReleases(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: the disk quota's unmount is what is held")
	}
	e := residentEnv(t, "targets:\n  local:\n    disk: 64MiB\n")
	pid := e.firstResident()
	slowUnmounts(t, pid, 2*time.Second)
	for range 2 {
		if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
	}
	if len(e.heldStages()) == 0 {
		t.Fatal("nothing is held after the CLIs exited: the releases were not pending, not the window under test")
	}
	e.stopResident()
	if syscall.Kill(pid, 0) == nil && agoratest.Running(pid) {
		t.Errorf("--stop returned while the resident (pid %d) runs", pid)
	}
	e.requireReleased("after --stop returned")
}

// TestResident_KilledWithPendingRelease: the resident is killed with -9 while a handed
// dispatch's release is pending (its stage held and mounted, its CLI gone). The next
// `agora dispatch run` (it finds the socket dead, runs its dispatch itself and reaps first)
// releases it: the record stays finished, nothing is held or mounted once it and the
// resident it started are gone.
func TestResident_KilledWithPendingRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: the disk quota's unmount is what is held")
	}
	e := residentEnv(t, "targets:\n  local:\n    disk: 64MiB\n")
	pid := e.firstResident()
	tr := slowUnmounts(t, pid, 5*time.Second)
	code, _, stderr := e.oneShot(nil, "--subagent", "ok")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	id := dispatchID(t, stderr)
	agoratest.WaitFor(t, 10*time.Second, "the release to reach its unmount", func() bool {
		return len(agoratest.MountsUnder(t, filepath.Join(e.home, "dispatches", id))) != 0
	})
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	tr.Process.Kill()
	tr.Wait()
	agoratest.WaitFor(t, 10*time.Second, "the killed resident to be gone", func() bool { return !agoratest.Running(pid) })
	if held := e.heldStages(); len(held) != 1 || held[0] != id {
		t.Fatalf("held after the kill: %v, want [%s]", held, id)
	}
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Fatalf("the next dispatch: exit %d\n%s", code, stderr)
	}
	// It ran its dispatch itself and starts a new resident after it: stopped only once it
	// listens (a --stop before then finds none, and the resident starts after it).
	e.waitNewResident(pid)
	if out := e.runAllowFail("dispatch", "describe", id); !strings.Contains(out, "finished") {
		t.Errorf("the killed resident's dispatch reads:\n%s", out)
	}
	e.stopResident()
	e.requireReleased("after the next dispatch and its resident")
}

// TestResident_BackToBackOneUID: a target whose sandbox_uid range is one uid wide
// (sandbox_uid 2147483647, which agora.yaml accepts) and dispatches handed one after the
// other, each once the previous CLI exited, as a script runs them. The CLI exits before its
// dispatch's uid lease is released (strace holds the release here); the next dispatch, refused
// the uid, waits for the release running in the resident and runs.
func TestResident_BackToBackOneUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: sandbox uids are leased only by a root agora")
	}
	e := residentEnv(t, "targets:\n  local:\n    disk: 64MiB\n    sandbox_uid: 2147483647\n")
	pid := e.firstResident()
	slowUnmounts(t, pid, 2*time.Second)
	for i := range 2 {
		code, _, stderr := e.oneShot(nil, "--subagent", "ok")
		if code != 0 {
			t.Errorf("hand-off %d, run after the previous CLI exited: exit %d\n%s", i, code, stderr)
		}
	}
}
