package service_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/store"
)

var agoraBin string

// TestMain builds the binary, runs the tests, stops the shared kwok control plane, and fails
// the package when a goroutine a test started outlives the tests (k8stest's spawner excepted,
// in NoLeaks).
func TestMain(m *testing.M) {
	rt48ListenChild()
	os.Exit(agoratest.NoLeaks(agoratest.RunWithBinary(k8stest.Runner(m), &agoraBin)))
}

// env is one AGORA_HOME with a registered catalog.
type env struct {
	t    *testing.T
	home string
	vars []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvConfig(t, "")
}

// newEnvConfig is newEnv with yaml appended to the home's agora.yaml before the catalog is
// applied (so, e.g., blobs.s3 holds the catalog's blobs).
func newEnvConfig(t *testing.T, yaml string) *env {
	t.Helper()
	return newEnvShell(t, yaml, "description: a shell\ncommands: [\"sh -c *\"]\n")
}

// newEnvShell is newEnvConfig with shell, the capability.yaml every subagent of the catalog
// has (an egress grant there gives them all the egress proxy).
func newEnvShell(t *testing.T, yaml, shell string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, home: filepath.Join(dir, "home"), vars: append(os.Environ(), "AGORA_HOME="+filepath.Join(dir, "home"))}
	// Registered after TempDir, so it runs after the test's own cleanups (its serve stopped
	// or killed) and before the directory's removal.
	t.Cleanup(e.settle)
	cat := filepath.Join(dir, "catalog")
	must(t, os.MkdirAll(filepath.Join(cat, "caps", "shell"), 0o755))
	must(t, os.WriteFile(filepath.Join(cat, "caps", "shell", "capability.yaml"), []byte(shell), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "worker.yaml"), []byte(`description: writes its input into the workspace
runtime: exec
command: [sh, -c, 'printf "%s\n" "$AGORA_INPUT_JSON" > task.json; sleep 0.05']
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "sleeper.yaml"), []byte(`description: takes its time
runtime: exec
command: [sh, -c, 'sleep 1.5; echo done > done.txt']
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte(`version: 1
capabilities:
  - {name: shell, from: caps/shell}
subagents:
  - {name: worker, from: worker.yaml}
  - {name: sleeper, from: sleeper.yaml}
`), 0o644))
	e.run("init")
	if yaml != "" {
		f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		must(t, err)
		_, err = f.WriteString("\n" + yaml)
		must(t, err)
		must(t, f.Close())
	}
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	return e
}

// settle releases what the home's dispatches still hold on the host when the test ends. A
// dispatch's end is recorded before its stage is released, so a test that ends with its run
// may stop (or kill -9) the process releasing it, or find a detached supervisor still
// unmounting: the home's own recovery, the reap every reading command runs first, finishes
// the release once no live supervisor is left. A stage still mounted after it is a leak
// the test reports, and it is unmounted so that the directory's removal does not fail
// with "device or resource busy" instead.
func (e *env) settle() {
	if len(agoratest.MountsUnder(e.t, e.home)) == 0 {
		return
	}
	agoratest.Poll(30*time.Second, func() bool {
		cmd := exec.Command(agoraBin, "dispatch", "list")
		cmd.Env = e.vars
		cmd.Run()
		return len(agoratest.MountsUnder(e.t, e.home)) == 0
	})
	if m := agoratest.MountsUnder(e.t, e.home); len(m) != 0 {
		e.t.Errorf("still mounted 30s after the test ended, reaped all along: %v", m)
		for _, p := range slices.Backward(m) {
			syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
}

// requireBwrap skips a test that runs real sandboxed workers where bubblewrap is missing.
func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIP: bubblewrap (bwrap) is not installed; the test runs real sandboxed workers (apt-get install bubblewrap)")
	}
}

// servedEnv is a new env with serve running until the test ends.
func servedEnv(t *testing.T) *env {
	t.Helper()
	requireBwrap(t)
	e := newEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) run(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// serve starts `agora orch serve` and waits until it answers.
func (e *env) serve() *exec.Cmd {
	e.t.Helper()
	return e.serveArgs()
}

// serveArgs starts `agora orch serve ARGS...` and waits until it answers.
func (e *env) serveArgs(args ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(agoraBin, append([]string{"orch", "serve"}, args...)...)
	cmd.Env = e.vars
	log, err := os.OpenFile(filepath.Join(e.home, "..", "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	must(e.t, err)
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	must(e.t, cmd.Start())
	c := e.client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if h, err := c.Health(context.Background()); err == nil && h.PID == cmd.Process.Pid {
			return cmd
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
			e.t.Fatalf("serve did not answer within 30s:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) client() *client.Client {
	return client.New(filepath.Join(e.home, "orch", "orch.sock"))
}

// crashPlan is a 200-task layered DAG with shared and exclusive locks.
func crashPlan(name string) (string, map[string][]string, map[string]map[string]bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nname: %s\nconcurrency: 12\ndefaults:\n  retry: {max_attempts: 5, initial_backoff: 50ms, max_backoff: 200ms}\ntasks:\n", name)
	deps := map[string][]string{}
	locks := map[string]map[string]bool{}
	for l := range 20 {
		for w := range 10 {
			id := fmt.Sprintf("t%02d-%d", l, w)
			fmt.Fprintf(&b, "  - id: %s\n    subagent: worker\n    input: {n: %d}\n", id, l*10+w)
			locks[id] = map[string]bool{}
			if l > 0 {
				ds := []string{fmt.Sprintf("t%02d-%d", l-1, w), fmt.Sprintf("t%02d-%d", l-1, (w+3)%10)}
				deps[id] = ds
				fmt.Fprintf(&b, "    depends_on: [%s]\n", strings.Join(ds, ", "))
			}
			lock := fmt.Sprintf("pool-%d", (l+w)%4)
			if w%3 == 0 {
				fmt.Fprintf(&b, "    locks: [{name: %s, mode: shared}]\n", lock)
				locks[id][lock] = true
			} else {
				fmt.Fprintf(&b, "    locks: [%s]\n", lock)
				locks[id][lock] = false
			}
		}
	}
	return b.String(), deps, locks
}

// TestServe_Kill9 submits a 200-task plan and kills serve with SIGKILL at random moments 20
// times, restarting it each time. The run must still succeed, with no task ever having two
// live attempts, no dependency or lock violated, and the audit log telling the same story.
func TestServe_Kill9(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })

	// A second serve refuses and names the holder.
	second := exec.Command(agoraBin, "orch", "serve")
	second.Env = e.vars
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("pid %d", serve.Process.Pid)) {
		t.Fatalf("second serve: err %v, output %q; want a refusal naming pid %d", err, out, serve.Process.Pid)
	}

	src, deps, locks := crashPlan("crash")
	planPath := filepath.Join(t.TempDir(), "crash.yaml")
	must(t, os.WriteFile(planPath, []byte(src), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	c := e.client()
	for i := range 20 {
		time.Sleep(time.Duration(30+rng.IntN(400)) * time.Millisecond)
		must(t, serve.Process.Signal(syscall.SIGKILL))
		serve.Wait()
		serve = e.serve()
		if i == 9 {
			// Submitting the same plan again, mid-crash-loop, returns the same run.
			again := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
			if again != runID {
				t.Errorf("resubmit gave run %s, want %s", again, runID)
			}
		}
	}
	run := waitRun(t, c, runID, 4*time.Minute)
	if run.State != lifecycle.RunSucceeded || !run.Sealed {
		t.Fatalf("run ended %s (sealed %v): %v", run.State, run.Sealed, run.Counts)
	}
	h, err := c.Health(context.Background())
	must(t, err)
	if h.LocksHeld != 0 || h.LiveAttempts != 0 || h.LockWaiters != 0 || h.OpenRuns != 0 {
		t.Errorf("engine not idle after the run: %+v", h)
	}
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()

	checkDispatches(t, e, run, deps, locks)
	checkOrchAudit(t, e, run)
}

// waitRun polls the service until the run ends, failing the test after limit.
func waitRun(t *testing.T, c *client.Client, runID string, limit time.Duration) api.Run {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		run, err := c.Status(context.Background(), runID)
		must(t, err)
		if lifecycle.RunEnded(run.State) {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s after %s: %v", run.State, limit, run.Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type interval struct {
	task, id, state string
	from, to        time.Time
}

// checkDispatches reads every dispatch of the run from agora.db and checks the invariants on
// their recorded times: the engine holds a task's locks and its dependents back from before
// a dispatch is recorded until after it ended.
func checkDispatches(t *testing.T, e *env, run api.Run, deps map[string][]string, locks map[string]map[string]bool) {
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	defer db.Close()
	rows, err := db.SQL().Query(`SELECT id, state, actor, created_at, ended_at FROM dispatches WHERE actor LIKE ?`, "% via orch/"+run.ID+"/%")
	must(t, err)
	defer rows.Close()
	byTask := map[string][]interval{}
	n := 0
	for rows.Next() {
		var id, state, actor, created, ended string
		must(t, rows.Scan(&id, &state, &actor, &created, &ended))
		task := actor[strings.LastIndex(actor, "/")+1:]
		from, _ := time.Parse(time.RFC3339Nano, created)
		to, err := time.Parse(time.RFC3339Nano, ended)
		if err != nil {
			t.Errorf("dispatch %s of task %s is still %s", id, task, state)
			continue
		}
		byTask[task] = append(byTask[task], interval{task: task, id: id, state: state, from: from, to: to})
		n++
	}
	must(t, rows.Err())
	recorded := 0
	for _, task := range run.Tasks {
		recorded += len(task.Dispatches)
	}
	if n != recorded {
		t.Errorf("agora.db holds %d dispatches of the run, orch.db %d attempts", n, recorded)
	}
	final := map[string]interval{}
	for task, ivs := range byTask {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].from.Before(ivs[j].from) })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].from.Before(ivs[i-1].to) {
				t.Errorf("task %s had two live attempts: %s and %s overlap", task, ivs[i-1].id, ivs[i].id)
			}
		}
		last := ivs[len(ivs)-1]
		if last.state != "finished" {
			t.Errorf("task %s's last dispatch %s is %s", task, last.id, last.state)
		}
		final[task] = last
	}
	if len(final) != 200 {
		t.Errorf("%d tasks have dispatches, want 200", len(final))
	}
	for task, ds := range deps {
		for _, d := range ds {
			if final[task].from.Before(final[d].to) {
				t.Errorf("task %s started (%s) before its dependency %s ended (%s)", task, final[task].from, d, final[d].to)
			}
		}
	}
	var all []interval
	for _, ivs := range byTask {
		all = append(all, ivs...)
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			a, b := all[i], all[j]
			if a.task == b.task || !a.from.Before(b.to) || !b.from.Before(a.to) {
				continue
			}
			for l, shared := range locks[a.task] {
				if other, ok := locks[b.task][l]; ok && !(shared && other) {
					t.Errorf("tasks %s and %s held lock %s together (%s, %s)", a.task, b.task, l, a.id, b.id)
				}
			}
		}
	}
	t.Logf("%d dispatches for 200 tasks (%d retried after a crash)", n, n-200)
}

// checkOrchAudit checks orch.db's log against the run: one succeeded entry per task, one
// fired entry per attempt, every attempt recorded.
func checkOrchAudit(t *testing.T, e *env, run api.Run) {
	db, err := store.Open(context.Background(), filepath.Join(e.home, "orch", "orch.db"), orch.Migrations())
	must(t, err)
	defer db.Close()
	count := func(kind string) int {
		var n int
		err := db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject LIKE ?`, kind, "run/"+run.ID+"%").Scan(&n)
		if err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return n
	}
	attempts := 0
	for _, task := range run.Tasks {
		attempts += len(task.Dispatches)
	}
	if n := count("orch.task.succeeded"); n != 200 {
		t.Errorf("%d orch.task.succeeded entries, want 200", n)
	}
	if n := count("orch.task.fired"); n != attempts {
		t.Errorf("%d orch.task.fired entries, want one per attempt (%d)", n, attempts)
	}
	if n := count("orch.run.sealed"); n != 1 {
		t.Errorf("%d orch.run.sealed entries, want 1", n)
	}
}
