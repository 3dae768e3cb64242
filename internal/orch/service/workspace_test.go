package service_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plan names its workspace; every task works on the commit pinned at submit. The run's
// identity covers the workspace and commit: the same submission returns the run, another
// revision starts a new one under the same name.
func TestOrchSubmit_PlanWorkspace(t *testing.T) {
	e := servedEnv(t)
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "VERSION"), []byte("one\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "one")
	gitIn(t, repo, "branch", "release/1")
	must(t, os.WriteFile(filepath.Join(repo, "VERSION"), []byte("two\n"), 0o644))
	gitIn(t, repo, "commit", "-qam", "two")
	e.run("workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*")
	e.editors(map[string]string{"stamp": `cp VERSION seen.txt`})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte("version: 1\nname: stamped\nworkspace: app\ntasks:\n  - {id: a, subagent: stamp}\n"), 0o644))

	first := strings.TrimSpace(e.runOut("orch", "submit", plan, "--wait"))
	status := e.run("orch", "status", first, "-o", "json")
	if !strings.Contains(status, `"workspace": "app@sha256:`) || strings.Contains(status, repo) {
		t.Errorf("status of a workspace run: want the workspace and no path:\n%s", status)
	}
	// The task's dispatch inherits the run's workspace and its pinned commit.
	var st struct {
		Revision string `json:"revision"`
		Tasks    []struct {
			DispatchID string `json:"dispatch_id"`
		} `json:"tasks"`
	}
	must(t, json.Unmarshal([]byte(e.runOut("orch", "status", first, "-o", "json")), &st))
	var rec struct {
		Workspace, Revision string
	}
	must(t, json.Unmarshal([]byte(e.runOut("dispatch", "describe", st.Tasks[0].DispatchID, "-o", "json")), &rec))
	if !strings.HasPrefix(rec.Workspace, "app@sha256:") || rec.Revision != st.Revision || len(rec.Revision) != 40 {
		t.Errorf("the task's dispatch: workspace %q revision %q; the run's revision %q", rec.Workspace, rec.Revision, st.Revision)
	}
	out := e.run("orch", "patches", first, "--combined")
	if strings.Count(out, "+two") != 1 || strings.Contains(out, "+one") {
		t.Errorf("the task did not see main's tree:\n%s", out)
	}

	again := e.run("orch", "submit", plan)
	if !strings.HasPrefix(again, first) || !strings.Contains(again, "the same plan, subagents, workspace and commit as run "+first) {
		t.Errorf("identical resubmission: %s", again)
	}
	other := strings.TrimSpace(e.runOut("orch", "submit", plan, "--workspace", "app@release/1", "--wait"))
	if other == first {
		t.Fatalf("another revision returned the first run %s", first)
	}
	if out := e.run("orch", "patches", "stamped", "--combined"); !strings.Contains(out, "+one") {
		t.Errorf("the name means the newest run (release/1):\n%s", out)
	}
	// The name stands for the newest run, and every command that takes it says so; an id
	// names its own run without a word.
	for _, args := range [][]string{{"orch", "status", "stamped"}, {"orch", "watch", "stamped"}, {"orch", "status", "stamped", "-o", "json"}} {
		out := e.run(args...)
		if !strings.Contains(out, "agora: 2 runs are named stamped; this is the newest, "+other) {
			t.Errorf("agora %s does not say which run the shared name means:\n%s", strings.Join(args, " "), out)
		}
	}
	if out := e.run("orch", "status", first); strings.Contains(out, "runs are named") || !strings.Contains(out, "run "+first) {
		t.Errorf("status by id:\n%s", out)
	}
	if out := e.run("orch", "status", "stamped", "-o", "json"); !strings.Contains(out, `"name_runs": 2`) {
		t.Errorf("status -o json of a shared name lacks name_runs:\n%s", out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--workspace", "docs"}, `the plan names workspace "app" and the submission "docs"`},
		{[]string{"--repo", repo}, `the plan works on workspace "app"; a repository cannot replace it`},
		{[]string{"--workspace", "app@feature"}, `revision "feature" is not allowed`},
	} {
		if msg := e.runFailCode(exitInvalid, append([]string{"orch", "submit", plan}, tt.args...)...); !strings.Contains(msg, tt.want) {
			t.Errorf("submit %v: %s, want %q", tt.args, msg, tt.want)
		}
	}
	must(t, os.WriteFile(plan, []byte("version: 1\nname: lost\nworkspace: nope\ntasks:\n  - {id: a, subagent: stamp}\n"), 0o644))
	if msg := e.runFailCode(exitInvalid, "orch", "submit", plan); !strings.Contains(msg, `workspace "nope" not found; known: app`) {
		t.Errorf("unknown workspace: %s", msg)
	}
}

// A plan with a cycle, an unknown subagent, a bad timeout, a bad lock and an unknown
// workspace gets all five back in one answer, each with its path, from agora orch validate
// and from agora orch submit (which the service answers), and no run is created.
func TestOrchSubmit_EveryProblemAtOnce(t *testing.T) {
	e := servedEnv(t)
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "empty")
	e.run("workspace", "register", "app", "--repo", repo, "--revision", "main")
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: five-wrong
workspace: nowhere
tasks:
  - {id: a, subagent: worker, depends_on: [b]}
  - {id: b, subagent: nobody, depends_on: [a]}
  - {id: c, subagent: worker, timeout: soon}
  - {id: d, subagent: worker, locks: [{name: x, mode: sometimes}]}
`), 0o644))
	for _, cmd := range [][]string{{"orch", "validate", plan}, {"orch", "submit", plan}} {
		msg := e.runFailCode(exitInvalid, cmd...)
		for _, want := range []string{
			"cycle",
			`tasks[1].subagent: subagent "nobody" not found; known: `,
			"tasks[2].timeout: ",
			"tasks[3].locks[0].mode: ",
			`workspace: workspace "nowhere" not found; known: app`,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("agora %s lacks %q:\n%s", strings.Join(cmd, " "), want, msg)
			}
		}
		if strings.Contains(msg, repo) {
			t.Errorf("agora %s names the repository's path:\n%s", strings.Join(cmd, " "), msg)
		}
	}
	if out := e.run("orch", "runs"); strings.Contains(out, "five-wrong") {
		t.Errorf("a refused plan left a run:\n%s", out)
	}
	// A revision the workspace does not allow is reported beside the plan's other problems.
	must(t, os.WriteFile(plan, []byte("version: 1\nname: two-wrong\nworkspace: app\nrevision: feature\ntasks:\n  - {id: a, subagent: nobody}\n"), 0o644))
	msg := e.runFailCode(exitInvalid, "orch", "submit", plan)
	for _, want := range []string{`revision "feature" is not allowed; allowed revisions: main`, `tasks[0].subagent: subagent "nobody" not found`} {
		if !strings.Contains(msg, want) {
			t.Errorf("agora orch submit lacks %q:\n%s", want, msg)
		}
	}
}
