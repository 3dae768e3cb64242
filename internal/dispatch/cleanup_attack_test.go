package dispatch_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// These attacks leave a dispatch's supervisor dead or stuck and check that nothing the
// dispatch held on the host (task cgroup, gateway directory, disk quota, stage work) outlives
// the next Reap.

// cgroupParentOfSelf is the cgroup v2 directory this process is in (where the provider makes
// task cgroups), or "" when there is none.
func cgroupParentOfSelf(t *testing.T) string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mount, root := "", ""
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) > 4 {
			mount, root = f[4], f[3]
			break
		}
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil || mount == "" {
		return ""
	}
	for line := range strings.Lines(string(cg)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			rel := strings.TrimPrefix(p, strings.TrimSuffix(root, "/"))
			return filepath.Join(mount, rel)
		}
	}
	return ""
}

// startDetachedSupervisor accepts a dispatch of subagent and supervises it in another
// process (`agora dispatch supervise`), as --detach and the MCP server do.
func startDetachedSupervisor(t *testing.T, e *env, req dispatch.Request) (*dispatch.Record, *exec.Cmd) {
	t.Helper()
	req.Actor = "test"
	r, err := e.d.Accept(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
	sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Process.Kill(); sup.Wait() })
	return r, sup
}

// TestRedTeam3_SupervisorKilledLeaksCgroup
//
// Attack: none is needed beyond what the host does: the supervisor of a dispatch is killed
// with -9 (OOM killer, a crash, a reboot of the service), which TestDispatch_SupervisorKilled
// treats as supported. The provider made the task's cgroup (agora-<id>-<rand>) under
// agora's own cgroup; only the dead supervisor's monitor would remove it. Reap cancels the
// task and unmounts the quota, but no one removes the cgroup (cancelForeign finds the pid
// gone and returns).
//
// Impact: every dispatch whose supervisor dies leaves an empty cgroup directory forever (13
// were already left on this host by the test suite); they count against
// cgroup.max.descendants, and with memory.max/pids.max delegated each holds its limits'
// state. A hostile agent that can get its supervisor OOM-killed (the tmpfs attack above)
// leaks one per dispatch.
//
// Fix: name the cgroup in the record (or make it deterministic: agora-<dispatch id>), and
// have Reap (and Cancel for a dead supervisor) kill and rmdir it; sweep empty agora-* cgroups
// whose dispatch is terminal at start.
func TestRedTeam3_SupervisorKilledLeaksCgroup(t *testing.T) {
	requireRootLimits(t)
	parent := cgroupParentOfSelf(t)
	if parent == "" {
		t.Skip("SKIP: no cgroup v2 here")
	}
	e := newEnv(t)
	marker := "sleep 1000." + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	e.subagent("long", marker)
	r, sup := startDetachedSupervisor(t, e, dispatch.Request{Subagent: "long", Timeout: time.Minute})
	deadline := time.Now().Add(30 * time.Second)
	for !processWithArg(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cgs, _ := filepath.Glob(filepath.Join(parent, "agora-"+r.ID+"-*"))
	if len(cgs) != 1 {
		t.Skipf("SKIP: the provider made no task cgroup here (%v)", cgs)
	}
	t.Cleanup(func() { os.Remove(cgs[0]) })
	sup.Process.Kill()
	sup.Wait()
	for deadline := time.Now().Add(10 * time.Second); processWithArg(marker); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent outlived its supervisor")
		}
	}
	if n, err := e.d.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	// Reap has released the dispatch (its cgroup killed and removed) by the time it returns.
	if _, err := os.Stat(cgs[0]); err == nil {
		procs, _ := os.ReadFile(filepath.Join(cgs[0], "cgroup.procs"))
		t.Errorf("after kill -9 of the supervisor and Reap, the task cgroup %s is left behind (%d processes in it)",
			cgs[0], len(strings.Fields(string(procs))))
	}
}

// TestRedTeam3_SupervisorKilledLeaksSandboxOwnedGatewayDir
//
// Attack: as above, a model runtime's supervisor is killed with -9. When the stage path is
// too long for a Unix socket (AGORA_HOME deeper than ~30 characters, as in every test here),
// the gateway lives in /tmp/agora-gw-*, handed to the sandbox uid, and the stage holds a
// symlink to it. Reap's removeWork removes the stage's gateway entry with RemoveAll, which
// removes the symlink, not its target.
//
// Impact: a directory owned by the sandbox uid (1879048192), with a dead socket, stays in
// the host's /tmp for every such dispatch: exactly the "files owned by the sandbox uid
// elsewhere on the host" the design promises do not exist; /tmp fills with them.
//
// Fix: in removeWork, resolve the stage's gateway link (Readlink, checked to be
// /tmp/agora-gw-* owned by root before the hand-over or by the sandbox uid) and remove its
// target; or keep the socket directory under a root-owned short path such as
// /run/agora/<id> that Reap can name from the dispatch id.
func TestRedTeam3_SupervisorKilledLeaksSandboxOwnedGatewayDir(t *testing.T) {
	requireRootLimits(t)
	e := newModelEnv(t)
	m := newClaudeModel(t)
	claudeEnv(e, m, "tools: [read_file]\n", nil, map[string]string{"FAKECLAUDE_MODE": "hang", "FAKECLAUDE_PIDFILE": "/tmp/pids"})
	// The supervisor is another process: it reads the egress policy from agora.yaml.
	if err := os.WriteFile(filepath.Join(e.home.Dir, config.FileName), []byte("egress:\n  allow_private: [127.0.0.1/32]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, sup := startDetachedSupervisor(t, e, dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Timeout: time.Minute,
		Input: []byte(`{"prompt":"wait"}`)})
	link := filepath.Join(e.home.Dir, home.DispatchDir, r.ID, "gateway")
	var gwDir string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cur, _ := e.d.Records.Get(t.Context(), r.ID)
		if target, err := os.Readlink(link); err == nil && cur != nil && cur.State == lifecycle.DispatchStarted {
			gwDir = target
			break
		}
		if time.Now().After(deadline) || cur != nil && lifecycle.DispatchEnded(cur.State) {
			t.Logf("dispatch %s %s: %s", cur.State, cur.Reason, cur.Detail)
			t.Skipf("SKIP: no /tmp gateway directory (the stage path fits a socket) or the dispatch never started")
		}
	}
	t.Cleanup(func() {
		os.RemoveAll(gwDir)
		if cgs, _ := filepath.Glob(filepath.Join(cgroupParentOfSelf(t), "agora-"+r.ID+"-*")); len(cgs) > 0 {
			os.Remove(cgs[0]) // the cgroup leak of TestRedTeam3_SupervisorKilledLeaksCgroup
		}
	})
	// Started: the gateway's directory was handed to the sandbox uid before the sandbox
	// ran (stage.handOver). Once Wait returns, the supervisor is gone, as Reap asks.
	sup.Process.Kill()
	sup.Wait()
	if n, err := e.d.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	if _, err := os.Lstat(link); err == nil {
		t.Fatalf("the stage's gateway link is still there")
	}
	fi, err := os.Lstat(gwDir)
	if err != nil {
		return // removed: not vulnerable
	}
	st := fi.Sys().(*syscall.Stat_t)
	t.Errorf("after kill -9 of the supervisor and Reap, %s (uid %d, mode %v) is left in the host's /tmp", gwDir, st.Uid, fi.Mode())
}

// TestRedTeam3_CancelledRecordLeaksQuotaMount
//
// Attack: the supervisor of a dispatch is slow when `agora dispatch cancel` runs (here
// stopped with SIGSTOP; in life a host under memory pressure, which the tmpfs attack above
// produces at will), so Cancel, after its 15 s wait, records `cancelled` itself; it releases
// the stage only when the supervisor is dead, and this one is alive. The supervisor then
// dies with -9 (the OOM killer) before its deferred removeWork. Reap only looks at live
// records (accepted, started); this one is terminal, so nothing ever unmounts its disk
// quota or removes its stage's work.
//
// Impact: the dispatch's tmpfs stays mounted on the host for good, with everything the agent
// wrote there (up to disk:, 2 GiB by default, of RAM that is never freed), and the stage's
// bundle and workspace stay on disk; the cgroup leaks too.
//
// Fix: make the cleanup independent of the record's state: Reap (or a sweep at start) must
// also release the stage of every terminal dispatch whose stage still has a disk/ mount or
// work directories and whose supervisor is gone; and Cancel should record the end only after
// it has released (or handed the release to a later Reap via a "needs release" flag).
func TestRedTeam3_CancelledRecordLeaksQuotaMount(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.home.Dir, config.FileName), []byte("targets:\n  local:\n    disk: 64MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := "sleep 1001." + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	e.subagent("long", "head -c 30000000 /dev/zero > f; "+marker)
	r, sup := startDetachedSupervisor(t, e, dispatch.Request{Subagent: "long", Timeout: time.Minute})
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	t.Cleanup(func() {
		syscall.Unmount(filepath.Join(stage, "disk"), syscall.MNT_DETACH)
		if cgs, _ := filepath.Glob(filepath.Join(cgroupParentOfSelf(t), "agora-"+r.ID+"-*")); len(cgs) > 0 {
			os.Remove(cgs[0])
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !processWithArg(marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never started")
		}
	}
	// The supervisor is stuck; cancel from another process (here: this one), which waits
	// for it a second (its cancelWait, 15 s, shortened: the wait's length is not the attack).
	sup.Process.Signal(syscall.SIGSTOP)
	dispatch.SetCancelWait(e.d, time.Second)
	final, err := e.d.Cancel(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cancel recorded %s: %s", final.State, final.Detail)
	sup.Process.Kill()
	sup.Wait()
	if _, err := e.d.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m := agoratest.MountsUnder(t, stage); len(m) > 0 {
		ents, _ := os.ReadDir(stage)
		t.Errorf("dispatch %s is %s and its supervisor is dead, yet after Reap its disk quota is still mounted on the host: %v (stage holds %v)",
			r.ID, final.State, m, ents)
	}
	for _, work := range []string{"bundle", "disk", "workspace", "out"} {
		if _, err := os.Lstat(filepath.Join(stage, work)); err == nil {
			t.Errorf("after Reap the stage of dispatch %s still holds %s", r.ID, work)
		}
	}
	if cgs, _ := filepath.Glob(filepath.Join(cgroupParentOfSelf(t), "agora-"+r.ID+"-*")); len(cgs) > 0 {
		t.Errorf("after Reap the task cgroup %v of dispatch %s is left behind", cgs, r.ID)
	}
	// Released once: the next Reap finds nothing left to do for it.
	if held, _ := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".held")); len(held) > 0 {
		t.Errorf("after Reap the held index still lists %v", held)
	}
}
