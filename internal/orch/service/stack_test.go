package service_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// stackRepo is a repository of one commit (README.md), the base every stack test starts from.
func stackRepo(t *testing.T) (repo, base string) {
	t.Helper()
	repo = t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("app\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "base")
	return repo, gitIn(t, repo, "rev-parse", "HEAD")
}

// stackRecord is what these tests read of a dispatch record (agora dispatch describe).
type stackRecord struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
	Revision  string `json:"revision"`
	StackBase string `json:"stack_base"`
	Subagent  string `json:"subagent"`
	Digest    string `json:"subagent_digest"`
	StartedAt *time.Time
	Inputs    []struct {
		Key, Dir     string
		FromDispatch string `json:"from_dispatch"`
		Stack        bool
		Files        []struct{ Digest string }
	} `json:"inputs"`
	Events []struct{ Kind string } `json:"events"`
}

func (e *env) describe(id string) stackRecord {
	e.t.Helper()
	var r stackRecord
	must(e.t, json.Unmarshal([]byte(e.runOut("dispatch", "describe", id, "-o", "json")), &r))
	return r
}

// The chain: impl writes a file, docs (base: impl) edits it, migrate (base: docs) edits
// both it and README.md and has a verify gate that sees the whole stack. Each task's workspace
// is its bases' work (docs's and migrate's scripts fail without it), each patch holds its own
// changes only and applies on top of its bases', and `orch patches --branch` gives three
// commits whose tip holds all three changes. On agora without base, docs starts from the run's
// commit, does not find lib.go, and the run fails.
func TestStack_ThreeTasks(t *testing.T) {
	e := servedEnv(t)
	repo, base := stackRepo(t)
	e.editors(map[string]string{
		"impl": "printf 'func Retry() {}\\n' > lib.go; echo impl > impl.txt",
		// Fails unless impl's work is in its workspace.
		"docs": "grep -q 'func Retry' lib.go && printf '// Retry retries.\\nfunc Retry() {}\\n' > lib.go",
		// Fails unless docs's (and so impl's) work is in its workspace.
		"migrate": "grep -q '// Retry retries.' lib.go && sed -i 's/Retry()/Retry(n int)/' lib.go && echo 'call Retry(3)' >> README.md",
		// A parallel task on the run's commit: it does not see the chain's work.
		"side": "test ! -e lib.go && echo side > side.txt",
	})
	plan := filepath.Join(t.TempDir(), "chain.yaml")
	// migrate's gate runs on its stacked base plus its patch: it sees docs's comment and its own
	// edit; impl.txt, which only impl touched, is protected, so a gate that counted the bases'
	// paths as migrate's would be red.
	must(t, os.WriteFile(plan, []byte(`version: 1
name: chain
tasks:
  - {id: impl, subagent: impl}
  - {id: side, subagent: side}
  - {id: docs, subagent: docs, base: [impl]}
  - id: migrate
    subagent: migrate
    base: [docs]
    verify: {command: [sh, -c, "grep -q '// Retry retries.' lib.go && grep -q 'Retry(n int)' lib.go && test -f impl.txt && echo stacked"], protect: [impl.txt]}
`), 0o644))
	out := e.run("orch", "submit", plan, "--repo", repo, "--wait")
	run, byID := e.statusOf("chain")
	if run.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s:\n%s\n%+v", run.State, out, run.Tasks)
	}
	if m := byID["migrate"]; m.Verdict == nil || !m.Verdict.Passed || m.Verdict.OutputTail != "stacked\n" || !slices.Equal(m.Base, []string{"docs"}) {
		t.Errorf("migrate: verdict %+v, base %q", m.Verdict, m.Base)
	}

	// Each dispatch: its revision is the run's commit; a stacked one names its stack (each
	// base's product, in order) and the commit it started from.
	impl, docs, migrate := e.describe(byID["impl"].DispatchID), e.describe(byID["docs"].DispatchID), e.describe(byID["migrate"].DispatchID)
	if impl.StackBase != "" || impl.Revision != base {
		t.Errorf("impl: stack_base %q revision %q", impl.StackBase, impl.Revision)
	}
	var stack []string
	for _, in := range migrate.Inputs {
		if in.Stack {
			stack = append(stack, in.Key+"/"+in.Dir+"="+in.FromDispatch)
		}
	}
	if want := []string{"base/impl=" + impl.ID, "base/docs=" + docs.ID}; !slices.Equal(stack, want) {
		t.Errorf("migrate's stack inputs %q, want %q", stack, want)
	}
	if migrate.Revision != base || len(migrate.StackBase) != 40 || migrate.StackBase == docs.StackBase || docs.StackBase == "" {
		t.Errorf("migrate: revision %s stack_base %q; docs stack_base %q", migrate.Revision, migrate.StackBase, docs.StackBase)
	}

	// The patches: each its own work, applied in the BASE column's order on the run's commit.
	dir := filepath.Join(t.TempDir(), "review")
	table := e.run("orch", "patches", "chain", "--to", dir)
	if !strings.Contains(table, "BASE") || !regexpLine(table, "migrate", "impl, docs") || !regexpLine(table, "side", "-") {
		t.Errorf("patches --to:\n%s", table)
	}
	for task, want := range map[string][]string{"impl": {"+++ b/lib.go", "+++ b/impl.txt"}, "docs": {"+++ b/lib.go"}, "migrate": {"+++ b/lib.go", "+++ b/README.md"}} {
		b, err := os.ReadFile(filepath.Join(dir, task+".patch"))
		must(t, err)
		if got := strings.Count(string(b), "+++ b/"); got != len(want) {
			t.Errorf("%s.patch touches %d files, want %q:\n%s", task, got, want, b)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s.patch lacks %s:\n%s", task, w, b)
			}
		}
	}
	clone := t.TempDir()
	gitIn(t, clone, "clone", "-q", repo, ".")
	if err := exec.Command("git", "-C", clone, "apply", "--check", filepath.Join(dir, "migrate.patch")).Run(); err == nil {
		t.Error("migrate.patch applies on the run's commit alone: it was not made on its bases")
	}
	for _, task := range []string{"impl", "docs", "migrate", "side"} {
		gitIn(t, clone, "apply", filepath.Join(dir, task+".patch"))
	}

	// The branch: one commit per task in dependency order (the chain's three, each after its
	// base, and the parallel one), its tip the chain's result with the parallel work.
	e.run("orch", "patches", "chain", "--branch", "agora/chain")
	if log := gitIn(t, repo, "log", "--reverse", "--format=%(trailers:key=Agora-Task,valueonly,separator=)", "main..agora/chain"); log != "impl\ndocs\nmigrate\nside" {
		t.Errorf("branch commits: %q, want impl, docs, migrate, side", log)
	}
	for name, want := range map[string]string{"lib.go": "// Retry retries.\nfunc Retry(n int) {}", "README.md": "app\ncall Retry(3)", "impl.txt": "impl", "side.txt": "side"} {
		if got := gitIn(t, repo, "show", "agora/chain:"+name); got != want {
			t.Errorf("%s at the branch's tip = %q, want %q", name, got, want)
		}
		b, err := os.ReadFile(filepath.Join(clone, name))
		must(t, err)
		if strings.TrimSpace(string(b)) != want {
			t.Errorf("%s after applying the patches in order = %q, want %q", name, b, want)
		}
	}
	if msg := e.runFail("orch", "patches", "chain", "--branch", "agora/nodocs", "--skip", "docs"); !strings.Contains(msg, "task migrate is stacked on its work") {
		t.Errorf("--skip of a base: %s", msg)
	}

	// The audit: every stack input's provenance verifies (agora verify), and the accepted
	// entry of migrate's dispatch names its stack and its base commit.
	e.auditRun("chain")
	accepted := dispatchEntries(t, e, "chain", migrate.ID, "dispatch.accepted")
	if len(accepted) != 1 || accepted[0].Details["stack_base"] != migrate.StackBase {
		t.Fatalf("migrate's accepted entry: %+v", accepted)
	}
	ins, _ := accepted[0].Details["inputs"].([]any)
	n := 0
	for _, x := range ins {
		if m, _ := x.(map[string]any); m["stack"] == true {
			n++
		}
	}
	if n != 2 {
		t.Errorf("migrate's accepted entry lists %d stack inputs, want 2: %v", n, ins)
	}
}

// regexpLine reports whether a line of out starts with first and ends with last.
func regexpLine(out, first, last string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first && strings.HasSuffix(strings.TrimSpace(l), last) {
			return true
		}
	}
	return false
}

// dispatchEntries exports the run's bundle and returns dispatch id's entries of kind.
func dispatchEntries(t *testing.T, e *env, run, id, kind string) []verify.EntryFields {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", run, "--out", out)
	raw, err := os.ReadFile(out)
	must(t, err)
	b, err := verify.ParseRunBundle(strings.NewReader(string(raw)))
	must(t, err)
	var got []verify.EntryFields
	for _, x := range b.Dispatches.Entries {
		f, err := verify.DecodeEntry(x.Entry)
		must(t, err)
		if f.Kind == kind && f.Subject == "dispatch/"+id {
			got = append(got, f)
		}
	}
	return got
}

// Two bases that write one file differently do not stack: the task on both fails
// stack-conflict, naming the task that does not apply and git's words, its dispatch never
// started (no sandbox, no agent), the conflict recorded in the dispatch's log before the
// task's failure; its dependent is skipped, and nothing is retried.
func TestStack_Conflict(t *testing.T) {
	e := servedEnv(t)
	repo, _ := stackRepo(t)
	e.editors(map[string]string{
		"left":  "echo left > shared.txt",
		"right": "echo right > shared.txt",
		"join":  "echo joined > joined.txt",
	})
	plan := filepath.Join(t.TempDir(), "clash.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: clash
defaults: {retry: {max_attempts: 3, initial_backoff: 10ms}}
tasks:
  - {id: left, subagent: left}
  - {id: right, subagent: right}
  - {id: join, subagent: join, base: [left, right]}
  - {id: after, subagent: join, depends_on: [join]}
`), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", plan, "--repo", repo, "--wait")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a run with a conflicting stack succeeded:\n%s", out)
	}
	run, byID := e.statusOf("clash")
	join := byID["join"]
	if run.State != lifecycle.RunFailed || join.State != lifecycle.TaskFailed || join.Reason != "stack-conflict" || join.Attempts != 1 {
		t.Fatalf("run %s; join %s %s after %d attempts: %s", run.State, join.State, join.Reason, join.Attempts, join.Detail)
	}
	for _, want := range []string{"task right's work (dispatch " + byID["right"].DispatchID + ")", "with the work of left", "shared.txt", "the agent did not run"} {
		if !strings.Contains(join.Detail, want) {
			t.Errorf("join's detail lacks %q: %s", want, join.Detail)
		}
	}
	if after := byID["after"]; after.State != lifecycle.TaskSkipped {
		t.Errorf("join's dependent is %s", after.State)
	}
	rec := e.describe(join.DispatchID)
	var events []string
	for _, ev := range rec.Events {
		events = append(events, ev.Kind)
	}
	if rec.State != "failed" || rec.Reason != "stack-conflict" || rec.StartedAt != nil || !slices.Equal(events, []string{"accepted", "failed"}) || rec.StackBase != "" {
		t.Errorf("join's dispatch: %s/%s, started %v, events %q, stack_base %q", rec.State, rec.Reason, rec.StartedAt, events, rec.StackBase)
	}
	failed := dispatchEntries(t, e, "clash", join.DispatchID, "dispatch.failed")
	var taskFailed []verify.EntryFields
	for _, f := range kinds(e.auditRun("clash"), "orch.task.failed") {
		if strings.HasSuffix(f.Subject, "/task/join") {
			taskFailed = append(taskFailed, f)
		}
	}
	if len(failed) != 1 || failed[0].Details["reason"] != "stack-conflict" || len(taskFailed) != 1 || taskFailed[0].Details["reason"] != "stack-conflict" {
		t.Fatalf("audit: dispatch.failed %+v, orch.task.failed %+v", failed, taskFailed)
	}
	if failed[0].Time.After(taskFailed[0].Time) {
		t.Errorf("the task's failure (%s) is recorded before its dispatch's (%s)", taskFailed[0].Time, failed[0].Time)
	}
}

// A resubmission is the same run only while its subagents are: after a subagent the plan
// names by bare name gets a new version, the same plan is a new run that says why and runs the
// new version; the same plan again then returns that run; --new-run starts another all the
// same. On agora without pins, the resubmission after the fix returned the old run.
func TestStack_ResubmitAfterSubagentFix(t *testing.T) {
	e := servedEnv(t)
	repo, _ := stackRepo(t)
	e.editors(map[string]string{"stamp": "echo v1 > stamp.txt"})
	plan := filepath.Join(t.TempDir(), "stamp.yaml")
	must(t, os.WriteFile(plan, []byte("version: 1\nname: stamp\ntasks:\n  - {id: s, subagent: stamp}\n"), 0o644))
	submit := func(args ...string) (id, stderr string) {
		t.Helper()
		cmd := exec.Command(agoraBin, append([]string{"orch", "submit", plan, "--repo", repo}, args...)...)
		cmd.Env = e.vars
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("submit: %v\n%s", err, errb.String())
		}
		id = strings.TrimSpace(string(out))
		waitRun(t, e.client(), id, 2*time.Minute)
		return id, errb.String()
	}
	first, msg := submit()
	if !strings.Contains(msg, "run "+first+" (stamp) (new) submitted with 1 task\n") {
		t.Errorf("first submit said:\n%s", msg)
	}
	v1 := e.describe(statusTask(e, first, "s").DispatchID)
	if same, msg := submit(); same != first || !strings.Contains(msg, "the same plan, subagents, repository and commit as run "+first+" (stamp, succeeded): returning it; --new-run starts another") {
		t.Errorf("identical resubmit: run %s (first %s):\n%s", same, first, msg)
	}

	e.editors(map[string]string{"stamp": "echo v2 > stamp.txt"}) // the subagent fixed
	second, msg := submit()
	if second == first {
		t.Fatalf("the resubmission after the subagent changed returned run %s, made by the old version", first)
	}
	v2 := e.describe(statusTask(e, second, "s").DispatchID)
	if v2.Digest == v1.Digest {
		t.Fatalf("the new run ran the old version %s", v1.Digest)
	}
	for _, want := range []string{"run " + second + " (stamp) (new) submitted with 1 task: subagent versions changed since run " + first,
		"stamp was stamp@" + v1.Digest + ", is stamp@" + v2.Digest} {
		if !strings.Contains(msg, want) {
			t.Errorf("resubmit after the fix lacks %q:\n%s", want, msg)
		}
	}
	if out := e.run("orch", "patches", second, "--combined"); !strings.Contains(out, "+v2") {
		t.Errorf("the new run's work:\n%s", out)
	}
	submitted := kinds(e.auditRun(second), "orch.run.submitted")
	if len(submitted) != 1 || !strings.Contains(submitted[0].Details["new_run"].(string), "subagent versions changed since run "+first) {
		t.Errorf("the new run's submission entry: %+v", submitted)
	}
	if pins, _ := submitted[0].Details["subagents"].(map[string]any); pins["stamp"] != "stamp@"+v2.Digest {
		t.Errorf("the submission entry's pins: %v", submitted[0].Details["subagents"])
	}
	if again, msg := submit(); again != second || !strings.Contains(msg, "returning it") {
		t.Errorf("resubmit with the fixed subagent: run %s, want %s:\n%s", again, second, msg)
	}

	third, msg := submit("--new-run")
	if third == second || third == first || !strings.Contains(msg, "(new) submitted with 1 task: a new run was asked for; run "+second+" has the same plan, subagents and commit") {
		t.Errorf("--new-run: run %s:\n%s", third, msg)
	}
	if e := kinds(e.auditRun(third), "orch.run.submitted"); len(e) != 1 || !strings.HasPrefix(e[0].Details["new_run"].(string), "a new run was asked for") {
		t.Errorf("--new-run's submission entry: %+v", e)
	}
}

func statusTask(e *env, run, task string) api.Task {
	e.t.Helper()
	_, byID := e.statusOf(run)
	return byID[task]
}

// A base's approved work is the product its dependents receive: after a fix loop, the fix's.
// impl's first work is red and its fix makes it green; docs (base: impl) starts from the fix's
// work, is red itself, and its fix starts from the same stack plus docs's rejected work. The
// branch is the two approved patches, one commit each.
func TestStack_FixLoops(t *testing.T) {
	e := servedEnv(t)
	repo, _ := stackRepo(t)
	e.editors(map[string]string{
		"impl":     "echo broken > lib.txt",
		"implfix":  "sed -i s/broken/fixed/ lib.txt",
		"docs":     "grep -qx fixed lib.txt && echo documented >> lib.txt",
		"docsfix":  "grep -qx fixed lib.txt && sed -i 's/^documented$/documented well/' lib.txt",
		"touching": "echo rewritten > lib.txt; echo mine > mine.txt",
	})
	plan := filepath.Join(t.TempDir(), "fixes.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: fixes
tasks:
  - {id: impl, subagent: impl, verify: {command: [grep, -qx, fixed, lib.txt]}, on_fail: {fix: {subagent: implfix}}}
  - {id: docs, subagent: docs, base: [impl], verify: {command: [grep, -q, documented well, lib.txt]}, on_fail: {fix: {subagent: docsfix}}}
  - {id: touch, subagent: touching, base: [impl], verify: {command: [true], protect: [lib.txt]}}
`), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", plan, "--repo", repo, "--wait")
	cmd.Env = e.vars
	out, _ := cmd.CombinedOutput()
	run, byID := e.statusOf("fixes")
	impl, docs, touch := byID["impl"], byID["docs"], byID["touch"]
	if impl.State != lifecycle.TaskSucceeded || impl.Product != byID["impl.fix-1"].DispatchID || docs.State != lifecycle.TaskSucceeded || docs.Product != byID["docs.fix-1"].DispatchID {
		t.Fatalf("run %s:\n%s\n%+v", run.State, out, run.Tasks)
	}
	// docs's stack is impl's approved product, its fix's too.
	for _, id := range []string{docs.DispatchID, byID["docs.fix-1"].DispatchID} {
		var from []string
		for _, in := range e.describe(id).Inputs {
			if in.Stack {
				from = append(from, in.Dir+"="+in.FromDispatch)
			}
		}
		if want := []string{"impl=" + impl.Product}; !slices.Equal(from, want) {
			t.Errorf("dispatch %s's stack %q, want %q", id, from, want)
		}
	}
	// A stacked task's patch that edits a base's file touches it itself: its gate's protect
	// sees the edit (its own patch's paths), and it fails.
	if touch.State != lifecycle.TaskFailed || touch.Reason != "verify-failed" || touch.Verdict == nil || !slices.Equal(touch.Verdict.ProtectedPaths, []string{"lib.txt"}) {
		t.Errorf("touch: %s %s, verdict %+v", touch.State, touch.Reason, touch.Verdict)
	}
	e.run("orch", "patches", "fixes", "--branch", "agora/fixes") // touch failed: no commit
	if got := gitIn(t, repo, "show", "agora/fixes:lib.txt"); got != "fixed\ndocumented well" {
		t.Errorf("lib.txt at the branch's tip = %q", got)
	}
	if n := gitIn(t, repo, "rev-list", "--count", "main..agora/fixes"); n != "2" {
		t.Errorf("the branch has %s commits, want 2 (impl's and docs's approved work)", n)
	}
}

// serve killed with SIGKILL as each task of a chain of stacked tasks starts (its stack built
// at accept, its dispatch's supervisor staging it): each restart re-attaches, and the run
// still succeeds with every task on its bases' work, in order, once.
func TestStack_Kill9(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	repo, _ := stackRepo(t)
	e.editors(map[string]string{"step": `n=$(printf '%s' "$AGORA_INPUT_JSON" | tr -dc 0-9); test "$(wc -l < chain.txt 2>/dev/null || echo 0)" -eq "$n" && echo "step $n" >> chain.txt`})
	var b strings.Builder
	b.WriteString("version: 1\nname: kill\ndefaults: {retry: {max_attempts: 3, initial_backoff: 10ms}}\ntasks:\n  - {id: s0, subagent: step, input: {n: 0}}\n")
	const n = 6
	for i := 1; i < n; i++ {
		b.WriteString("  - {id: s" + strconv.Itoa(i) + ", subagent: step, input: {n: " + strconv.Itoa(i) + "}, base: [s" + strconv.Itoa(i-1) + "]}\n")
	}
	plan := filepath.Join(t.TempDir(), "kill.yaml")
	must(t, os.WriteFile(plan, []byte(b.String()), 0o644))
	runID := strings.TrimSpace(e.runOut("orch", "submit", plan, "--repo", repo))
	c := e.client()
	for i := 1; i < n; i++ {
		// Kill when task i has fired (its dispatch accepted or being accepted), or the run ended.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			run, err := c.Status(t.Context(), runID)
			if err == nil && (lifecycle.RunEnded(run.State) || taskFired(run, "s"+strconv.Itoa(i))) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task s%d did not fire: %v", i, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		must(t, serve.Process.Signal(syscall.SIGKILL))
		serve.Wait()
		serve = e.serve()
	}
	run := waitRun(t, c, runID, 3*time.Minute)
	if run.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %+v", run.State, run.Tasks)
	}
	e.run("orch", "patches", runID, "--branch", "agora/kill")
	want := ""
	for i := range n {
		want += "step " + strconv.Itoa(i) + "\n"
	}
	if got := gitIn(t, repo, "show", "agora/kill:chain.txt"); got+"\n" != want {
		t.Errorf("chain.txt at the branch's tip = %q, want %q", got, want)
	}
	if got := gitIn(t, repo, "rev-list", "--count", "main..agora/kill"); got != strconv.Itoa(n) {
		t.Errorf("%s commits, want %d", got, n)
	}
	e.auditRun(runID)
	// An accept killed while it built a stack leaves its scratch repository until the same
	// dispatch is accepted again, which every restart does: none is left.
	if ents, err := os.ReadDir(filepath.Join(e.home, "dispatches", ".stack")); err == nil && len(ents) > 0 {
		t.Errorf("scratch repositories left: %d", len(ents))
	}
}

func taskFired(run api.Run, id string) bool {
	for _, t := range run.Tasks {
		if t.ID == id {
			return t.Attempts > 0
		}
	}
	return false
}
