package service_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
)

// fanOutItems is how many items the kill test's producer lists.
const fanOutItems = 1000

// fanOutCatalog registers the fan-out's agents: a producer that lists n items (slowly, so
// serve can be stopped while it runs), an item task that leaves its input as its part, and
// a reduce that counts the parts it was given.
func (e *env) fanOutCatalog(n int) {
	e.editors(map[string]string{
		"splitter": fmt.Sprintf(`sleep 2; mkdir -p "$AGORA_OUT/outputs"; { printf '['; i=0; while [ $i -lt %d ]; do `+
			`[ $i -gt 0 ] && printf ','; printf '{"id":"i%%d"}' $i; i=$((i+1)); done; printf ']'; } > "$AGORA_OUT/outputs/items.json"`, n),
		"part": `mkdir -p "$AGORA_OUT/outputs"; printf '%s' "$AGORA_INPUT_JSON" > "$AGORA_OUT/outputs/part.json"`,
		"reducer": `mkdir -p "$AGORA_OUT/outputs"; n=$(ls "$AGORA_INPUTS/parts" | wc -l); m=$(cat "$AGORA_INPUTS"/parts/*/part.json | grep -o '"item":{"id":"i[0-9]*"}' | sort -u | wc -l); ` +
			`printf '%s %s\n' $n $m > "$AGORA_OUT/outputs/count.txt"`,
	})
}

const fanOutPlanYAML = `version: 1
name: fan
concurrency: 24
defaults:
  retry: {max_attempts: 5, initial_backoff: 50ms, max_backoff: 200ms}
tasks:
  - {id: split, subagent: splitter}
  - id: each
    fan_out:
      from: split
      select: "output:items.json"
      template: {subagent: part, input: {run: fan}}
  - id: reduce
    subagent: reducer
    needs: {parts: {from: each, select: outputs}}
`

// orchCounts reads, from orch.db without serve, how many tasks the run has and how many
// extensions and orch.run.extended entries it recorded.
func (e *env) orchCounts(runID string) (tasks, exts, entries int) {
	e.t.Helper()
	db, err := store.OpenReadOnly(context.Background(), filepath.Join(e.home, "orch", "orch.db"))
	must(e.t, err)
	defer db.Close()
	q := func(query string, args ...any) int {
		var n int
		if err := db.SQL().QueryRow(query, args...).Scan(&n); err != nil && err != sql.ErrNoRows {
			e.t.Fatal(err)
		}
		return n
	}
	return q(`SELECT COUNT(*) FROM tasks WHERE run_id = ?`, runID), q(`SELECT COUNT(*) FROM run_extensions WHERE run_id = ?`, runID),
		q(`SELECT COUNT(*) FROM audit_entries WHERE kind = 'orch.run.extended' AND subject LIKE ?`, "run/"+runID+"/%")
}

// dispatchState reads a dispatch's state from agora.db without serve.
func (e *env) dispatchState(id string) string {
	e.t.Helper()
	db, err := store.OpenReadOnly(context.Background(), filepath.Join(e.home, "agora.db"))
	must(e.t, err)
	defer db.Close()
	var state string
	if err := db.SQL().QueryRow(`SELECT state FROM dispatches WHERE id = ?`, id).Scan(&state); err != nil && err != sql.ErrNoRows {
		e.t.Fatal(err)
	}
	return state // "" while it is not accepted yet
}

// TestServe_FanOutKill9: a fan-out of 1,000 items with a reduce. serve is stopped while the
// producer runs, the producer's dispatch ends (its supervisor outlives serve) with orch.db
// not yet extended, and serve is killed with SIGKILL right there, between the producer's end
// and the extension. The restarted serve adds the 1,000 items once; killed again at random
// moments while they run, it never adds them twice. After the run: exactly 1,003 tasks, one
// extension, the reduce saw 1,000 parts, and the run's bundle passes agora verify.
func TestServe_FanOutKill9(t *testing.T) {
	requireBwrap(t)
	if testing.Short() {
		t.Skip("SKIP: -short: 1,000 sandboxed dispatches")
	}
	e := newEnv(t)
	e.fanOutCatalog(fanOutItems)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	planPath := filepath.Join(t.TempDir(), "fan.yaml")
	must(t, os.WriteFile(planPath, []byte(fanOutPlanYAML), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	c := e.client()

	// The producer runs: stop serve, so nothing of the engine moves.
	var split api.Task
	deadline := time.Now().Add(time.Minute)
	for {
		run, err := c.Status(context.Background(), runID)
		must(t, err)
		split = run.Tasks[0]
		if split.State == lifecycle.TaskRunning && split.DispatchID != "" && e.dispatchState(split.DispatchID) == "started" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("split never started: %+v", split)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, serve.Process.Signal(syscall.SIGSTOP))
	for deadline := time.Now().Add(time.Minute); e.dispatchState(split.DispatchID) != "finished"; {
		if time.Now().After(deadline) {
			t.Fatalf("split's dispatch is %s a minute after serve stopped", e.dispatchState(split.DispatchID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tasks, exts, entries := e.orchCounts(runID); tasks != 3 || exts != 0 || entries != 0 {
		t.Fatalf("before the kill: %d tasks, %d extensions, %d entries; want the plan's 3 and none (the window was missed)", tasks, exts, entries)
	}
	must(t, serve.Process.Signal(syscall.SIGKILL))
	serve.Wait()
	serve = e.serve()

	// Kill it again at random moments while the items run.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for range 4 {
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		must(t, serve.Process.Signal(syscall.SIGKILL))
		serve.Wait()
		if tasks, exts, entries := e.orchCounts(runID); tasks != 3 && tasks != 3+fanOutItems || exts > 1 || entries > 1 || (exts == 1) != (tasks != 3) {
			t.Fatalf("after a kill: %d tasks, %d extensions, %d entries", tasks, exts, entries)
		}
		serve = e.serve()
	}
	run := waitRun(t, c, runID, 10*time.Minute)
	if run.State != lifecycle.RunSucceeded || run.Total != 3+fanOutItems {
		t.Fatalf("run %s with %d tasks: %v", run.State, run.Total, run.Counts)
	}
	if tasks, exts, entries := e.orchCounts(runID); tasks != 3+fanOutItems || exts != 1 || entries != 1 {
		t.Errorf("%d tasks, %d extensions, %d orch.run.extended entries; want %d, 1, 1", tasks, exts, entries, 3+fanOutItems)
	}
	items := 0
	for _, task := range run.Tasks {
		if task.Added != nil && task.Added.Cause == "fan_out" && task.Added.Task == "each" && task.State == lifecycle.TaskSucceeded {
			items++
		}
	}
	if items != fanOutItems {
		t.Errorf("%d items succeeded, want %d", items, fanOutItems)
	}
	reduce := run.Tasks[2]
	dir := filepath.Join(t.TempDir(), "reduce")
	e.run("dispatch", "outputs", reduce.DispatchID, "--to", dir)
	got, err := os.ReadFile(filepath.Join(dir, "count.txt"))
	must(t, err)
	if want := fmt.Sprintf("%d %d\n", fanOutItems, fanOutItems); string(got) != want {
		t.Errorf("the reduce counted %q, want %q", got, want)
	}
	must(t, serve.Process.Signal(syscall.SIGTERM))
	serve.Wait()
	serve = e.serve()
	e.auditRun(runID)
}

// TestServe_FanOutRefused: lists a producer may write to break a fan-out (10,001 items, an
// object, a file over the size limit, ids forging a task's id) each fail their fan-out with
// the reason, add nothing, and leave the rest of the run alone.
func TestServe_FanOutRefused(t *testing.T) {
	e := servedEnv(t)
	e.editors(map[string]string{
		"toomany": `mkdir -p "$AGORA_OUT/outputs"; { printf '['; seq -s, 0 10000; printf ']'; } > "$AGORA_OUT/outputs/items.json"`,
		"object":  `mkdir -p "$AGORA_OUT/outputs"; printf '{"items": [1, 2]}' > "$AGORA_OUT/outputs/items.json"`,
		"huge":    `mkdir -p "$AGORA_OUT/outputs"; { printf '["'; head -c 9000000 /dev/zero | tr '\0' x; printf '"]'; } > "$AGORA_OUT/outputs/items.json"`,
		"forger":  `mkdir -p "$AGORA_OUT/outputs"; printf '[{"id": "a].fix-1"}]' > "$AGORA_OUT/outputs/items.json"`,
		"dup":     `mkdir -p "$AGORA_OUT/outputs"; printf '[{"id": "a"}, {"id": "a"}]' > "$AGORA_OUT/outputs/items.json"`,
		"part":    `true`,
	})
	var b strings.Builder
	b.WriteString("version: 1\nname: refused\ntasks:\n  - {id: ok, subagent: worker}\n")
	for _, p := range []string{"toomany", "object", "huge", "forger", "dup"} {
		fmt.Fprintf(&b, "  - {id: p-%s, subagent: %s}\n  - {id: f-%s, fan_out: {from: p-%s, select: 'output:items.json', template: {subagent: part}}}\n", p, p, p, p)
	}
	planPath := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(planPath, []byte(b.String()), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", planPath, "--wait")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a run of refused fan-outs succeeded:\n%s", out)
	}
	run, byID := e.statusOf("refused")
	if run.Total != 11 || byID["ok"].State != lifecycle.TaskSucceeded {
		t.Fatalf("%d tasks (%v), ok %s", run.Total, taskIDs(run), byID["ok"].State)
	}
	for p, want := range map[string]string{
		"toomany": "task p-toomany's output items.json: 10001 items; at most 10000",
		"object":  "want a JSON list of items, got an object",
		"huge":    "bytes; at most 8388608",
		"forger":  `id "a].fix-1" cannot name a task`,
		"dup":     `items 0 and 1 have the same key "a"`,
	} {
		f := byID["f-"+p]
		if byID["p-"+p].State != lifecycle.TaskSucceeded || f.State != lifecycle.TaskFailed || f.Reason != "fan-out-refused" || !strings.Contains(f.Detail, want) {
			t.Errorf("f-%s: %s %s %q; want failed fan-out-refused with %q (producer %s)", p, f.State, f.Reason, f.Detail, want, byID["p-"+p].State)
		}
	}
}
