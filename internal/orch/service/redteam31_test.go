package service_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// probeScript is what a sandboxed agent can learn of its own sandbox: its ids, capabilities,
// no_new_privs and seccomp, limits, environment, the descriptors of the sandbox's first
// process, its parent and itself, every mount with its options, and every Unix socket it can
// find in its file tree (the host's orch.sock and a standby's holder socket must not be
// among them).
const probeScript = `echo "ids $(id -u) $(id -g) $(id -G)"
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status
echo "host $(hostname)"
ulimit -a
env | sort | grep -v '^AGORA_DISPATCH_ID='
for p in 1 $PPID self; do
  ls /proc/$p/fd >/dev/null 2>&1 || { echo "fds $p unreadable"; continue; }
  for f in /proc/$p/fd/*; do echo "fd $p ${f##*/} $(readlink $f | sed 's/[0-9][0-9]*/N/g')"; done
done
awk '{for(i=7;i<=NF;i++) if($i=="-"){print "mount", $5, $6, $(i+1); break}}' /proc/self/mountinfo | sort
find / \( -path /proc -o -path /sys -o -path /usr \) -prune -o -type s -print 2>/dev/null | sed 's/^/socket /'
ls -d /tmp/* 2>/dev/null | sed 's/^/tmp /'
if unshare -Urm true 2>/dev/null; then echo "userns yes"; unshare -Urm sh -c 'umount -l /agora/workspace; umount -l /agora; ls -A /agora | head -3; touch /agora/x && echo wrote-agora' 2>&1 | sed 's/^/under /'; else echo "userns no"; fi
touch /agora/x 2>/dev/null && echo "wrote /agora"
echo probe-end
`

// probeEnv is an env whose catalog has the probe subagent (exec runtime, the shell capability).
func probeEnv(t *testing.T) *env {
	t.Helper()
	requireBwrap(t)
	e := newEnv(t)
	cat := filepath.Join(t.TempDir(), "probe-catalog")
	must(t, os.MkdirAll(cat, 0o755))
	var b strings.Builder
	b.WriteString("description: reports what it sees of its sandbox\nruntime: exec\ncapabilities: [shell]\ncommand:\n  - sh\n  - -c\n  - |\n")
	for _, l := range strings.Split(strings.TrimSuffix(probeScript, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	must(t, os.WriteFile(filepath.Join(cat, "probe.yaml"), []byte(b.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "slow.yaml"), []byte("description: slow\nruntime: exec\ncommand: [sh, -c, 'echo working on it; sleep 60']\ncapabilities: [shell]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte("version: 1\nsubagents:\n  - {name: probe, from: probe.yaml}\n  - {name: slow, from: slow.yaml}\n"), 0o644))
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	return e
}

// probeOut is dispatch id's stdout, its per-dispatch parts (ids, pids, times) made uniform.
func (e *env) probeOut(id string) string {
	e.t.Helper()
	out := e.run("dispatch", "logs", id)
	if !strings.Contains(out, "probe-end") {
		e.t.Fatalf("dispatch %s: the probe did not finish:\n%s", id, out)
	}
	return varying.ReplaceAllString(out, "X")
}

var dispatchIDLine = regexp.MustCompile(`(?m)^[0-9A-HJKMNP-TV-Z]{26}$`)

// oneShotID runs `agora dispatch run --subagent probe` (extra env) and returns its id.
func (e *env) oneShotID(extraEnv []string, args ...string) string {
	e.t.Helper()
	code, out, errOut := e.oneShot(extraEnv, append([]string{"--subagent", "probe"}, args...)...)
	id := dispatchIDLine.FindString(out)
	if code != 0 || id == "" {
		e.t.Fatalf("dispatch run: exit %d\n%s\n%s", code, out, errOut)
	}
	return id
}

// diffLines lists the lines of got missing from want (-) and extra in got (+).
func diffLines(want, got string) []string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var out []string
	for l, n := range w {
		if g[l] < n {
			out = append(out, "- "+l)
		}
	}
	for l, n := range g {
		if w[l] < n {
			out = append(out, "+ "+l)
		}
	}
	return out
}

// TestRedTeam31_SandboxOfEveryPathIsTheColdOne: the same probe runs as a cold plan task
// (a detached supervisor), in a standby supervisor's claimed slot (warm: 1), handed off to
// serve (`agora dispatch run` with serve running: serve's supervisors, a standby's slot when
// one is ready) and in the one-shot CLI (AGORA_NO_HANDOFF=1). A sandbox whose supervisor is serve or a standby
// (processes holding agora.db, the audit key, orch.sock's listener, the standbys' holder
// sockets) must see exactly what a cold one sees: the same ids, capabilities, seccomp,
// limits, environment, descriptors and mounts, and no Unix socket of the host.
func TestRedTeam31_SandboxOfEveryPathIsTheColdOne(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	e := probeEnv(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("targets:\n  local:\n    warm: 1\n")
	must(t, err)
	must(t, f.Close())
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })

	cold := e.runPlan("cold", "probe")[0]
	waitStandbys(t, e, 1)
	ready, tasks := standbys(t, e), slotTasks(t, e)
	warmID := e.runPlan("warm", "probe")[0]
	db := openAgoraDB(t, e)
	var task string
	must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, warmID).Scan(&task))
	if pid := supervisorPID(t, db, warmID); !contains(ready, pid) || !tasks[task] {
		t.Fatalf("the warm probe ran as %s under %d, not in a ready standby %v / slot %v", task, pid, ready, tasks)
	}
	// A handed-off dispatch of a warm target goes where serve's plan dispatches go: a
	// standby's slot when one is ready (its task is then one of the ready slots').
	waitStandbys(t, e, 1)
	tasks = slotTasks(t, e)
	before := e.handoffs()
	handedID := e.oneShotID(nil)
	if e.handoffs() != before+1 {
		t.Fatalf("the probe was not handed off to serve")
	}
	must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, handedID).Scan(&task))
	inSlot := map[string]bool{warmID: true, handedID: tasks[task]}
	inProcID := e.oneShotID([]string{"AGORA_NO_HANDOFF=1"})

	base := e.probeOut(cold)
	for _, s := range strings.Split(base, "\n") {
		if strings.HasPrefix(s, "socket ") {
			t.Errorf("a cold sandbox sees a Unix socket: %s", s)
		}
	}
	for name, id := range map[string]string{"standby slot": warmID, "handed off to serve": handedID, "one-shot CLI": inProcID} {
		got := e.probeOut(id)
		if inSlot[id] {
			// By design (docs/providers.md, "Warm slots"): a slot's /agora is the bind of its
			// host claim directory, with the dispatch's read-only tree attached over it at
			// claim. The lower mount is covered before any process of the dispatch runs, and
			// the sandbox can make no user namespace to unmount what covers it ("userns no").
			// The lower one is not always listed: the host may have let go of its side of the
			// claim mount by the time the probe reads mountinfo (it propagates).
			// A cold run-as sandbox's /agora is a read-only tmpfs mount too: the tree of its
			// binds (compute/local's bindSources), where the slot's is its claim root.
			top := "mount /agora ro,nosuid,nodev,relatime tmpfs\n"
			if !strings.Contains(got, top) {
				t.Errorf("%s: no %q", name, top)
			}
			got = strings.Replace(got, "mount /agora rw,nosuid,nodev,relatime ext4\n", "", 1)
			// A prestarted slot: the worker started from a read-only tmpfs /agora holding
			// only its own binary, which the claim's tree covers (docs/providers.md, what an
			// agent can tell apart in a claimed prestarted slot).
			if extra := strings.Count(got, top) - strings.Count(base, top); extra > 0 {
				for range extra {
					got = strings.Replace(got, top, "", 1)
				}
				got = strings.Replace(got, "mount /agora/bin/agora-worker ro,nosuid,nodev,relatime ext4\n", "", 1)
			}
			if !strings.Contains(got, "userns no\n") {
				t.Errorf("%s: the sandbox can make a user namespace (and unmount what covers its claim root)", name)
			}
			// A slot's bundle and capability files are on its stage directory, a cold root
			// sandbox's on the pinned content's tmpfs (ADR 0034, docs/providers.md).
			for _, place := range []string{"/agora/bundle", "/agora/capabilities"} {
				slot, cold := "mount "+place+" ro,nosuid,nodev,relatime ext4\n", "mount "+place+" ro,nosuid,nodev,relatime tmpfs\n"
				if strings.Contains(base, cold) {
					got = strings.Replace(got, slot, cold, 1)
				}
			}
		}
		if d := diffLines(base, got); len(d) > 0 {
			t.Errorf("%s: the sandbox differs from a cold one:\n%s\n--- cold:\n%s\n--- %s:\n%s", name, strings.Join(d, "\n"), base, name, got)
		}
	}
}

// warmProbeEnv is a probe env whose local target keeps n warm slots, serve running, the
// probe's shape learnt from one cold plan task and n standbys ready.
func warmProbeEnv(t *testing.T, n int) (*env, *exec.Cmd) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	e := probeEnv(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("targets:\n  local:\n    warm: " + strconv.Itoa(n) + "\n")
	must(t, err)
	must(t, f.Close())
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	e.runPlan("cold", "probe")
	waitStandbys(t, e, n)
	return e, serve
}

// TestRedTeam31_HandoffServeStopped: serve is stopped (SIGTERM, as a restart does) while it
// supervises a handed-off dispatch. The docs (operations.md) say the CLI then says serve
// stopped, reaps the dispatch as any whose supervisor died (failed/lost), prints its end and
// exits 1. It must not tell the user their dispatch was interrupted as by their own Ctrl-C.
func TestRedTeam31_HandoffServeStopped(t *testing.T) {
	e := probeEnv(t)
	serve := e.serve()
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	cmd, out, lines := e.startOneShot("--subagent", "slow", "--progress", "-o", "json")
	seen := waitLine(t, lines, "| working on it")
	if e.handoffs() != 1 {
		t.Fatalf("the dispatch was not handed off")
	}
	must(t, serve.Process.Signal(syscall.SIGTERM))
	seen += drain(lines)
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	var rec struct{ ID, State, Reason string }
	_ = json.Unmarshal(out.Bytes(), &rec)
	t.Logf("exit %d, record %s/%s\n%s", code, rec.State, rec.Reason, seen)
	if code == 130 || strings.Contains(seen, "interrupted") {
		t.Errorf("serve's stop was reported as the user's interrupt: exit %d\n%s", code, seen)
	}
	if code != 1 || rec.State != "failed" || rec.Reason != "lost" {
		t.Errorf("exit %d, dispatch %s/%s; operations.md says exit 1, failed/lost", code, rec.State, rec.Reason)
	}
}

// TestRedTeam31_SlotsDieAtOnce: the sandboxes of every ready standby are killed at once (the
// OOM killer, an operator). Each standby notices within a second and exits; serve must
// neither spin starting standbys nor sit with none ready: it refills to warm: 2 without
// waiting for a dispatch to find the dead ones (which would then start cold).
func TestRedTeam31_SlotsDieAtOnce(t *testing.T) {
	e, _ := warmProbeEnv(t, 2)
	old := standbys(t, e)
	for _, pid := range old {
		for _, k := range children(pid) {
			syscall.Kill(k, syscall.SIGKILL)
		}
	}
	agoratest.WaitFor(t, 30*time.Second, "the standbys whose slot died to exit", func() bool {
		for _, pid := range old {
			if contains(standbys(t, e), pid) {
				return false
			}
		}
		return true
	})
	// Every look notes the standbys it sees: a refill that spins shows as many of them.
	seen := map[int]bool{}
	ready := agoratest.Poll(20*time.Second, func() bool {
		now := standbys(t, e)
		for _, pid := range now {
			seen[pid] = true
		}
		return len(now) >= 2 && len(readySlots(t, e)) >= 2
	})
	if len(seen) > 6 {
		t.Errorf("serve started %d standbys to refill 2: it spins", len(seen))
	}
	if !ready {
		cmd := exec.Command(agoraBin, "doctor")
		cmd.Env = e.vars
		out, _ := cmd.CombinedOutput()
		t.Errorf("20 s after their slots died, serve holds %d standbys (%d slots ready); doctor:\n%s", len(standbys(t, e)), len(readySlots(t, e)), out)
	}
}

// TestRedTeam31_StandbyMisfitIsCountedCold: a dispatch whose sandbox does not have the
// template's shape (here a task timeout of its own) is handed to a standby, spends its slot
// and runs cold in the standby's process. doctor (and metrics, the web view: one Counts) must
// count it a cold fallback, as the in-process pools count a dispatch that spent a slot it did
// not fit (docs/providers.md, "Shape"): the slot is spent (claimed), the dispatch cold.
func TestRedTeam31_StandbyMisfitIsCountedCold(t *testing.T) {
	e, serve := warmProbeEnv(t, 1)
	tasks := slotTasks(t, e)
	held := regexp.MustCompile(`local: warm \d+/1 ready \(claimed (\d+), cold (\d+), failed \d+\) held by pid ` + strconv.Itoa(serve.Process.Pid))
	counts := func() (int, int) {
		t.Helper()
		var m []string
		agoratest.WaitFor(t, 30*time.Second, "doctor to report serve's warm slots", func() bool {
			cmd := exec.Command(agoraBin, "doctor")
			cmd.Env = e.vars
			out, _ := cmd.CombinedOutput()
			m = held.FindStringSubmatch(string(out))
			return m != nil
		})
		c, _ := strconv.Atoi(m[1])
		k, _ := strconv.Atoi(m[2])
		return c, k
	}
	// The first (cold) dispatch taught the target its shape: counted cold once serve's status
	// file (rewritten every second) has it.
	var claimed, cold int
	agoratest.WaitFor(t, 30*time.Second, "doctor to count the first cold dispatch", func() bool {
		claimed, cold = counts()
		return cold >= 1
	})
	p := filepath.Join(t.TempDir(), "misfit.yaml")
	must(t, os.WriteFile(p, []byte("version: 1\nname: misfit\ntasks:\n  - id: t0\n    subagent: probe\n    timeout: 7m\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
	if run := waitRun(t, e.client(), runID, 2*time.Minute); run.State != lifecycle.RunSucceeded {
		t.Fatalf("run: %s", run.State)
	}
	_, byID := e.statusOf(runID)
	id := byID["t0"].DispatchID
	db := openAgoraDB(t, e)
	var task string
	must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, id).Scan(&task))
	if tasks[task] {
		t.Skipf("SKIP: the 7m task fit the slot (ran as %s): this attack needs two shapes", task)
	}
	var c, k int
	agoratest.WaitFor(t, 30*time.Second, "doctor to count the dispatch", func() bool {
		c, k = counts()
		return k > cold
	})
	if c != claimed+1 || k != cold+1 {
		t.Errorf("dispatch %s ran cold (task %s, not the slot's %v); doctor went from claimed %d, cold %d to claimed %d, cold %d; want claimed %d (the spent slot), cold %d",
			id, task, tasks, claimed, cold, c, k, claimed+1, cold+1)
	}
}

// TestRedTeam31_WarmHandoffStandbyKilled: the standby supervisor running a handed-off
// dispatch is killed with -9 (the OOM killer, an operator). Its sandbox dies with it; the
// dispatch is lost. The CLI must end as it does when a plan's standby or serve itself dies
// (failed/lost, exit 1), not wait forever on a record nobody will finish.
func TestRedTeam31_WarmHandoffStandbyKilled(t *testing.T) {
	e, _ := warmProbeEnv(t, 1)
	db := openAgoraDB(t, e)
	cmd, out, lines := e.startOneShot("--subagent", "slow", "-o", "json")
	seen := waitLine(t, lines, " started (")
	if e.handoffs() != 1 {
		t.Fatalf("not handed off:\n%s", seen)
	}
	var id string
	must(t, db.SQL().QueryRow(`SELECT id FROM dispatches WHERE state = 'started' AND subagent LIKE 'slow%'`).Scan(&id))
	pid := supervisorPID(t, db, id)
	var task string
	must(t, db.SQL().QueryRow(`SELECT provider_task_id FROM dispatches WHERE id = ?`, id).Scan(&task))
	var slot string
	for _, d := range readySlots(t, e) {
		if b, _ := os.ReadFile(filepath.Join(d, "task")); string(b) == task {
			slot = d
		}
	}
	if slot == "" {
		t.Fatalf("dispatch %s (task %s) runs in no slot", id, task)
	}
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		var state string
		db.SQL().QueryRow(`SELECT state FROM dispatches WHERE id = ?`, id).Scan(&state)
		t.Fatalf("60 s after its standby (%d) was killed, the CLI still waits; the dispatch is %s\n%s", pid, state, seen+drain(lines))
	}
	seen += drain(lines)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	var rec struct{ State, Reason string }
	_ = json.Unmarshal(out.Bytes(), &rec)
	if code != 1 || rec.State != "failed" || rec.Reason != "lost" {
		t.Errorf("exit %d, dispatch %s/%s; want exit 1, failed/lost\n%s", code, rec.State, rec.Reason, seen)
	}
	// The killed standby's slot kept the dispatch's tree mounted on the host: serve sweeps it
	// as the standby exits (4155aa6), without waiting for another dispatch; a slot being made
	// meanwhile is left alone (its hold appears locked; a young directory without one is its
	// maker's), so the refill still gives a ready standby that runs the next dispatch.
	agoratest.WaitFor(t, 30*time.Second, "the killed standby's slot directory to be swept", func() bool {
		_, err := os.Stat(slot)
		return errors.Is(err, os.ErrNotExist)
	})
	waitStandbys(t, e, 1)
	e.runPlan("next", "probe")
}

// auditTrail is dispatch id's audit entries as "kind actor" lines, in order.
func auditTrail(t *testing.T, db *store.DB, id string) []string {
	t.Helper()
	rows, err := db.SQL().Query(`SELECT kind, actor FROM audit_entries WHERE subject LIKE '%' || ? ORDER BY seq`, id)
	must(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, a string
		must(t, rows.Scan(&k, &a))
		out = append(out, k+" "+a)
	}
	must(t, rows.Err())
	return out
}

// TestRedTeam31_WarmHandoffCtrlCAudit: Ctrl-C of a dispatch handed to serve and run in a
// standby is a cancel serve asks of the standby's supervisor; the audit must tell the same
// story with the same actors as a Ctrl-C of the one-shot CLI's own dispatch: who cancelled is
// the person, never a system actor or nobody.
func TestRedTeam31_WarmHandoffCtrlCAudit(t *testing.T) {
	e, _ := warmProbeEnv(t, 1)
	db := openAgoraDB(t, e)
	interrupt := func(extra ...string) string {
		cmd, out, lines := e.startOneShotEnv(extra, "--subagent", "slow")
		seen := waitLine(t, lines, " started (")
		cmd.Process.Signal(syscall.SIGINT)
		seen += drain(lines)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("exit 0 after Ctrl-C\n%s", seen)
		}
		id := dispatchIDLine.FindString(out.String())
		if id == "" {
			t.Fatalf("no dispatch id:\n%s", out)
		}
		return id
	}
	before := e.handoffs()
	warmID := interrupt()
	if e.handoffs() != before+1 {
		t.Fatal("not handed off")
	}
	coldID := interrupt("AGORA_NO_HANDOFF=1")
	w, c := auditTrail(t, db, warmID), auditTrail(t, db, coldID)
	if len(w) == 0 || !strings.HasPrefix(w[len(w)-1], "dispatch.cancelled ") || strings.HasSuffix(w[len(w)-1], " ") {
		t.Errorf("the warm hand-off's audit does not end with its cancel by a person: %v", w)
	}
	if strings.Join(w, "\n") != strings.Join(c, "\n") {
		t.Errorf("audit of a Ctrl-C'd warm hand-off:\n%s\nof the one-shot CLI's:\n%s", strings.Join(w, "\n"), strings.Join(c, "\n"))
	}
}

// TestRedTeam31_RestartRacesRefill: serve is stopped (SIGTERM) while it refills after a
// claim, and a new serve starts at once. No standby of the old serve lives on or is claimed,
// no slot directory is left behind, and the new serve holds its own two, whose first claim
// runs. Failed before (1-5 runs in 20): the new serve's standbys start as it listens, and
// Listen narrowed the process's umask to 0177 for a moment: a standby forked then made its
// claim's tree 0600 ('bwrap: Can't chdir to /agora/workspace: Permission denied').
func TestRedTeam31_RestartRacesRefill(t *testing.T) {
	e, serve := warmProbeEnv(t, 2)
	old := standbys(t, e)
	p := filepath.Join(t.TempDir(), "one.yaml")
	must(t, os.WriteFile(p, []byte("version: 1\nname: one\ntasks:\n  - id: t0\n    subagent: probe\n"), 0o644))
	firstID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0]) // its claim kicks a refill
	must(t, serve.Process.Signal(syscall.SIGTERM))
	serve.Wait()
	next := e.serve()
	t.Cleanup(func() { next.Process.Signal(syscall.SIGTERM); next.Wait() })
	agoratest.WaitFor(t, 30*time.Second, "the old serve's standbys to be gone", func() bool {
		for _, pid := range standbys(t, e) {
			if contains(old, pid) {
				return false
			}
		}
		return true
	})
	waitStandbys(t, e, 2)
	agoratest.WaitFor(t, 30*time.Second, "only the new serve's two slot directories", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(e.home, "dispatches", ".warm", "local", "slot-*"))
		return len(dirs) == 2 && len(standbys(t, e)) == 2
	})
	db := openAgoraDB(t, e)
	tasks := slotTasks(t, e)
	after := filepath.Join(t.TempDir(), "after.yaml")
	must(t, os.WriteFile(after, []byte("version: 1\nname: after\ntasks:\n  - id: t0\n    subagent: probe\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", after), "\n")[0])
	run := waitRun(t, e.client(), runID, 2*time.Minute)
	if run.State != lifecycle.RunSucceeded {
		id := run.Tasks[0].DispatchID
		var task, sup string
		db.SQL().QueryRow(`SELECT provider_task_id, supervisor FROM dispatches WHERE id = ?`, id).Scan(&task, &sup)
		cmd := exec.Command(agoraBin, "dispatch", "logs", id, "--stderr")
		cmd.Env = e.vars
		logs, _ := cmd.CombinedOutput()
		var diag strings.Builder
		dirs, _ := filepath.Glob(filepath.Join(e.home, "dispatches", ".warm", "local", "slot-*"))
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "task"))
			ents, _ := os.ReadDir(d)
			var names []string
			for _, x := range ents {
				names = append(names, x.Name())
			}
			fmt.Fprintf(&diag, "%s task=%s entries=%v\n", filepath.Base(d), b, names)
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, e.home) {
				diag.WriteString(l + "\n")
			}
		}
		t.Fatalf("after the restart: run %s, %s: task %s (ready slots %v, old standbys %v), supervisor %s\n%s\n%s", run.State, run.Tasks[0].Detail, task, tasks, old, sup, logs, diag.String())
	}
	ids := []string{run.Tasks[0].DispatchID}
	if pid := supervisorPID(t, db, ids[0]); contains(old, pid) {
		t.Fatalf("a standby of the stopped serve (%d) supervised %s", pid, ids[0])
	}
	// The claim's refill done before serve stops: a standby killed while it starts leaves its
	// slot mounted until the next serve sweeps it, which this test's cleanup would trip on.
	waitStandbys(t, e, 2)
	// The same for both runs' dispatches: a supervisor releases the stage's mounts (the disk
	// quota, the pinned content) after the run's state is written, and a serve stopped before
	// that leaves them mounted. The first run's dispatch, supervised across the restart, ends
	// on its own time: the test's cleanup waits for it too.
	waitRun(t, e.client(), firstID, 2*time.Minute)
	stages := filepath.Join(e.home, "dispatches") + "/"
	agoratest.WaitFor(t, 30*time.Second, "the dispatches' stages to be unmounted", func() bool {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], stages) && !strings.HasPrefix(f[4], stages+".warm/") {
				return false
			}
		}
		return true
	})
}
