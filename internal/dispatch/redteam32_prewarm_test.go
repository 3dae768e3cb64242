package dispatch_test

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// probeScript prints what an agent can learn about its sandbox, one fact a line, with the
// values that differ between any two dispatches (ids, uid numbers) left out.
const probeScript = `
ls -l /proc/self/fd >/tmp/fds 2>&1
for p in /proc/[0-9]*; do echo "proc:$(cat $p/comm 2>/dev/null)"; done >/tmp/procs
u=$(id -u); g=$(id -g)
echo "uid-is-gid:$([ "$u" = "$g" ] && echo y || echo n) root:$([ "$u" = 0 ] && echo y || echo n) groups:$(id -G | wc -w)"
echo "umask:$(umask)"
echo "pwd:$(pwd)"
ulimit -a | sed 's/^/ulimit:/'
grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status | sed 's/^/self:/'
grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/1/status | sed 's/^/worker:/'
sed 's/^/worker-limits:/' /proc/1/limits
cat /proc/1/environ >/dev/null 2>&1 && echo "worker-environ:readable" || echo "worker-environ:denied"
ls /proc/1/fd >/dev/null 2>&1 && echo "worker-fds:readable" || echo "worker-fds:denied"
tr '\0' ' ' </proc/1/cmdline | sed 's/^/worker-cmdline:/'; echo
awk 'NR>1 {print "fd:" $9 "->" $11}' /tmp/fds | sed 's/pipe:\[[0-9]*\]/pipe/; s;/proc/[0-9]*/;/proc/N/;; s/socket:\[[0-9]*\]/socket/; s/[0-9]*$//'
grep -v -E 'proc:(ls|sh|cat)$' /tmp/procs | sort; rm -f /tmp/fds /tmp/procs
env | sort | grep -v -E '^(AGORA_DISPATCH_ID|_|SHLVL|OLDPWD)=' | sed 's/^/env:/'
cat /proc/self/cgroup | sed 's/^/cgroup:/'
awk '{o=""; for(i=7;i<=NF;i++) if($i=="-") {o=$(i+1)" "$(i+3)}; print "mount:" $5 " " $6 " " o}' /proc/self/mountinfo | sed -E 's/(size|nr_inodes|uid|gid)=[0-9a-z]+//g'
ls -la /agora | awk 'NR>1 {print "agora:" $1 " " $9}'
ls -la /agora/bin | awk 'NR>1 {print "agora-bin:" $1 " " $9}'
hostname | sed 's/^/hostname:/'
ls -la /tmp | awk 'NR>1 {print "tmp:" $1 " " $9}'
ls -la /dev/shm 2>&1 | awk 'NR>1 {print "shm:" $1 " " $9}'
`

// TestRedTeam32_WarmProbeSameAsCold: an agent in a claimed prestarted
// slot, run by the real worker as the slot's leased uid, learns about its sandbox exactly
// what the same agent learns in a cold one.
func TestRedTeam32_WarmProbeSameAsCold(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.subagent("probe", probeScript)
	cold := e.run(dispatch.Request{Subagent: "probe"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "probe"})
	if hot.State != lifecycle.DispatchFinished {
		t.Fatalf("warm: %s %s %s", hot.State, hot.Reason, hot.Detail)
	}
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	a, b := normalizeProbe(e.stdout(cold)), normalizeProbe(e.stdout(hot))
	if len(a) < 40 || !slices.Contains(a, "worker-environ:denied") || !slices.Contains(a, "env:HOME=/tmp") {
		t.Fatalf("the probe did not run through: %q", a)
	}
	diff(t, a, b)
}

// normalizeProbe drops the differences a warm slot is known to have (stated in
// docs/providers.md "Warm slots"): its /agora is the host's read-only
// claim tmpfs (mode 0755, stacked on the one the worker was started from, whose only file is
// the same worker binary, so each mount under /agora shows twice) where a cold sandbox's is
// a directory bwrap made (0700), and its bundle and capability files are on the slot's
// stage directory's filesystem where a cold root sandbox's are on a tmpfs of their own:
// their mount lines keep the place and its options, not the filesystem.
func normalizeProbe(out string) []string {
	var lines []string
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		for _, place := range []string{"mount:/agora/bundle ", "mount:/agora/capabilities "} {
			if strings.HasPrefix(l, place) {
				f := strings.Fields(l)
				l = f[0] + " " + f[1]
			}
		}
		switch {
		case strings.HasPrefix(l, "mount:/agora "):
			continue
		case strings.HasPrefix(l, "mount:/agora/"):
			if seen[l] {
				continue
			}
			seen[l] = true
		case (strings.HasPrefix(l, "agora:d") || strings.HasPrefix(l, "agora-bin:d")) &&
			(strings.HasSuffix(l, " .") || strings.HasSuffix(l, " ..") || strings.HasSuffix(l, " bin")):
			k, _, _ := strings.Cut(l, ":")
			_, name, _ := strings.Cut(l, " ")
			l = k + ":dir " + name
		}
		lines = append(lines, l)
	}
	return lines
}

// diff reports every line one probe has and the other has not.
func diff(t *testing.T, cold, warm []string) {
	t.Helper()
	count := func(l []string) map[string]int {
		m := map[string]int{}
		for _, s := range l {
			m[s]++
		}
		return m
	}
	c, w := count(cold), count(warm)
	for s, n := range c {
		if w[s] != n {
			t.Errorf("cold has %q %d times, warm %d", s, n, w[s])
		}
	}
	for s, n := range w {
		if c[s] != n {
			t.Errorf("warm has %q %d times, cold %d", s, n, c[s])
		}
	}
}

// attackScript is an agent that first says what an earlier dispatch left for it, then
// attacks what else may run on the machine: it leaves files in every place a sandbox can
// write outside its workspace, signals every process it may, and looks for any worker but
// its own.
const attackScript = `
for f in /tmp/rt32 /dev/shm/rt32 /agora/out/rt32; do [ -e $f ] && echo "SEEN:$f"; done
echo planted >/tmp/rt32; echo planted >/dev/shm/rt32; echo planted >/agora/out/rt32
for p in /proc/[0-9]*; do
  [ "$(cat $p/comm 2>/dev/null)" = agora-worker ] && [ "$p" != /proc/1 ] && echo "OTHER-WORKER:$p"
done
kill -9 -1 2>/dev/null
for fd in /proc/1/fd/*; do echo x 2>/dev/null >"$fd" && echo "WROTE:$fd"; done
echo done
`

// TestRedTeam32_ClaimedAgentCannotReachWaitingWorker: while a dispatch
// runs in one slot, the next slot's worker is already running, waiting for its claim. The
// agent of the first can neither see nor signal it, nor leave anything the second
// dispatch finds: the waiting worker is the same process after the attack, still blocked,
// and the dispatch that claims a slot next finds none of the planted files.
func TestRedTeam32_ClaimedAgentCannotReachWaitingWorker(t *testing.T) {
	e, w := warmEnv(t, 2)
	e.subagent("attack", attackScript)
	cold := e.run(dispatch.Request{Subagent: "attack"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	waitWarmReady(t, w, 2)
	waiting := slotWorkers(t, e.d.StateDir, 2)
	started := make([]string, len(waiting))
	for i, pid := range waiting {
		st, _ := agoratest.ReadProcStat(pid)
		started[i] = st.Start
	}
	a := e.run(dispatch.Request{Subagent: "attack"})
	if a.State != lifecycle.DispatchFinished || !strings.Contains(e.stdout(a), "done") {
		t.Fatalf("first warm dispatch: %s %s %s", a.State, a.Reason, a.Detail)
	}
	if out := e.stdout(a); strings.Contains(out, "OTHER-WORKER") || strings.Contains(out, "WROTE") || strings.Contains(out, "SEEN") {
		t.Fatalf("the first warm dispatch's agent reached beyond its sandbox:\n%s", out)
	}
	// One of the two waiting workers ran that dispatch; the other must still be the very
	// process it was (the same start time: not a pid reused), alive, neither killed nor
	// stopped. Its state letter may be S, or R or D for a moment on a loaded machine (a
	// runtime thread woken, a page faulted in); that it still waits on its claim pipe, the
	// next dispatch shows by running in its slot (the counts below).
	survivors := 0
	var seen []string
	for i, pid := range waiting {
		st, _ := agoratest.ReadProcStat(pid) // gone: the zero ProcStat
		seen = append(seen, fmt.Sprintf("%d:%s", pid, cmp.Or(st.State, "gone")))
		if st.Start != "" && st.Start == started[i] && strings.ContainsAny(st.State, "SRD") {
			survivors++
		}
	}
	if survivors != 1 {
		t.Fatalf("of the workers waiting before the attack, %d still live; want 1 (pid:state %v)", survivors, seen)
	}
	b := e.run(dispatch.Request{Subagent: "attack"})
	if b.State != lifecycle.DispatchFinished || !strings.Contains(e.stdout(b), "done") {
		t.Fatalf("second warm dispatch: %s %s %s", b.State, b.Reason, b.Detail)
	}
	if out := e.stdout(b); strings.Contains(out, "SEEN") || strings.Contains(out, "OTHER-WORKER") || strings.Contains(out, "WROTE") {
		t.Fatalf("the second warm dispatch found what the first left, or reached out:\n%s", out)
	}
	if c := warmCounts(w); c.Claimed != 2 || c.Cold != 0 || c.Failed != 0 {
		t.Fatalf("counts %+v: want both attacks run warm", c)
	}
}

// settledFDs reads a waiting worker's descriptors once its warm-up is over: the warm-up's
// pidfd probe (os.FindProcess of itself, and os/exec's first check) holds a pidfd or two for
// a moment before it closes them (a flake under -race at load). A descriptor that
// stays is still reported: the read is retried for at most 10 s, then the last list is judged.
func settledFDs(t *testing.T, proc string) []os.DirEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fds, err := os.ReadDir(proc + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		transient := false
		for _, fd := range fds {
			if target, _ := os.Readlink(proc + "/fd/" + fd.Name()); target == "anon_inode:[pidfd]" {
				transient = true
			}
		}
		if !transient || time.Now().After(deadline) {
			return fds
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slotWorkers waits for n workers running in the default target's slots and returns them.
func slotWorkers(t *testing.T, stateDir string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pids []int
		for _, f := range slotTasks(stateDir) {
			if b := taskPID(f); b > 0 {
				if pid := descendantNamed(b, "agora-worker"); pid > 0 {
					pids = append(pids, pid)
				}
			}
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers running in the slots, want %d", len(pids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRedTeam32_WaitingWorkerHoldsNothing: what a worker started ahead holds
// before any dispatch exists, read from the host: an environment of the shape's names only
// (no dispatch id, no token, nothing of the host's), descriptors that are its own output and
// claim pipes and /dev/null only, none shared with another slot's worker (a pipe two slots
// shared would be a channel between two dispatches), each slot a uid of its own that is not
// root, and already the limits and hardening a cold dispatch's worker runs with.
func TestRedTeam32_WaitingWorkerHoldsNothing(t *testing.T) {
	t.Setenv("AGORA_RT32_HOST_CANARY", "host-canary")
	e, w := warmEnv(t, 2)
	e.subagent("probe", probeScript)
	cold := e.run(dispatch.Request{Subagent: "probe"})
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", cold.State, cold.Reason, cold.Detail)
	}
	var coldLimits, coldStatus []string
	for _, l := range strings.Split(e.stdout(cold), "\n") {
		if v, ok := strings.CutPrefix(l, "worker-limits:"); ok {
			coldLimits = append(coldLimits, v)
		}
		if v, ok := strings.CutPrefix(l, "worker:"); ok {
			coldStatus = append(coldStatus, v)
		}
	}
	if len(coldLimits) < 10 || len(coldStatus) < 5 {
		t.Fatalf("the cold probe read no worker limits or status: %q", e.stdout(cold))
	}
	waitWarmReady(t, w, 2)
	pids := slotWorkers(t, e.d.StateDir, 2)
	pipes := map[string]int{}
	uids := map[string]int{}
	for _, pid := range pids {
		proc := "/proc/" + strconv.Itoa(pid)
		env, err := os.ReadFile(proc + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range strings.Split(strings.TrimRight(string(env), "\x00"), "\x00") {
			k, _, _ := strings.Cut(kv, "=")
			if !slices.Contains([]string{"PATH", "HOME", "LANG", "PWD", "AGORA_WORKER_CLAIM_FD"}, k) {
				t.Errorf("worker %d holds %q before any claim", pid, kv)
			}
		}
		fds := settledFDs(t, proc)
		for _, fd := range fds {
			target, _ := os.Readlink(proc + "/fd/" + fd.Name())
			switch {
			case target == "/dev/null":
			case strings.HasPrefix(target, "pipe:["):
				if other, ok := pipes[target]; ok && other != pid {
					t.Errorf("workers %d and %d share %s", other, pid, target)
				}
				pipes[target] = pid
			default:
				t.Errorf("worker %d holds fd %s -> %q before any claim", pid, fd.Name(), target)
			}
		}
		if len(fds) > 4 {
			t.Errorf("worker %d holds %d descriptors before any claim; want stdin, stdout, stderr and its claim pipe", pid, len(fds))
		}
		status, err := os.ReadFile(proc + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				f := strings.Fields(v)
				if len(f) != 4 || f[0] == "0" || f[0] != f[1] || f[0] != f[2] || f[0] != f[3] {
					t.Errorf("worker %d runs as uids %q", pid, v)
				}
				if other, ok := uids[f[0]]; ok {
					t.Errorf("workers %d and %d share uid %s", other, pid, f[0])
				}
				uids[f[0]] = pid
			}
		}
		for _, want := range coldStatus {
			if !strings.Contains(string(status), want+"\n") {
				t.Errorf("worker %d before its claim lacks the cold worker's %q", pid, want)
			}
		}
		limits, err := os.ReadFile(proc + "/limits")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range coldLimits {
			if !strings.Contains(string(limits), strings.TrimRight(want, " ")) {
				t.Errorf("worker %d before its claim lacks the cold worker's limit %q", pid, want)
			}
		}
	}
	if len(uids) != 2 {
		t.Fatalf("uids of the waiting workers: %v", uids)
	}
}

// TestRedTeam32_WarmSecretsReachOnlyTheirDispatch: with a secret, the slot's
// claim pipe is fd 4 beside the secrets' fd 3. Two warm dispatches of one shape with two env
// bundles holding different values of one secret: each agent gets its own value and nothing
// else (its descriptors are a cold agent's), and no waiting worker ever holds either value.
func TestRedTeam32_WarmSecretsReachOnlyTheirDispatch(t *testing.T) {
	e, w := warmEnv(t, 2)
	alpha, beta := "rt32-alpha-"+strconv.Itoa(os.Getpid()), "rt32-beta-"+strconv.Itoa(os.Getpid())
	e.envBundle("a", nil, map[string]string{"RT32_SECRET": alpha})
	e.envBundle("b", nil, map[string]string{"RT32_SECRET": beta})
	e.subagent("sec", `ls -l /proc/self/fd >/tmp/fds 2>&1
echo "secret:$RT32_SECRET" | tr 'a-z' 'n-za-m'
awk 'NR>1 {print "fd:" $9 "->" $11}' /tmp/fds | sed 's/pipe:\[[0-9]*\]/pipe/; s;/proc/[0-9]*/;/proc/N/;; s/[0-9]*$//'`)
	rot13 := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if c >= 'a' && c <= 'z' {
				b[i] = 'a' + (c-'a'+13)%26
			}
		}
		return string(b)
	}
	cold := e.run(dispatch.Request{Subagent: "sec", Envs: []string{"a"}})
	if cold.State != lifecycle.DispatchFinished || !strings.Contains(e.stdout(cold), rot13("secret:"+alpha)) {
		t.Fatalf("cold: %s %s %s, output %q", cold.State, cold.Reason, cold.Detail, e.stdout(cold))
	}
	coldFDs := fdLines(e.stdout(cold))
	waitWarmReady(t, w, 2)
	for _, pid := range slotWorkers(t, e.d.StateDir, 2) {
		env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if strings.Contains(string(env), alpha) || strings.Contains(string(env), beta) {
			t.Fatalf("a waiting worker holds a dispatch's secret: %q", env)
		}
	}
	for _, c := range []struct{ env, want, not string }{{"b", beta, alpha}, {"a", alpha, beta}} {
		r := e.run(dispatch.Request{Subagent: "sec", Envs: []string{c.env}})
		out := e.stdout(r)
		if r.State != lifecycle.DispatchFinished || !strings.Contains(out, rot13("secret:"+c.want)+"\n") || strings.Contains(out, rot13(c.not)) {
			t.Fatalf("warm dispatch with env %s: %s %s %s, output %q", c.env, r.State, r.Reason, r.Detail, out)
		}
		if got := fdLines(out); !slices.Equal(got, coldFDs) {
			t.Errorf("warm agent's descriptors %q, cold %q", got, coldFDs)
		}
	}
	if c := warmCounts(w); c.Claimed != 2 || c.Cold != 0 {
		t.Fatalf("counts %+v: want both dispatches run warm", c)
	}
}

func fdLines(out string) []string {
	var fds []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "fd:") {
			fds = append(fds, l)
		}
	}
	return fds
}
