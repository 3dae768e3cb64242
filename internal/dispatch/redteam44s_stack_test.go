package dispatch_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// rtStackRepo is a repository of one commit holding f.txt, twenty numbered lines.
func rtStackRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	dir := t.TempDir()
	var body strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&body, "%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(body.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "base"}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// stackOn is the stack inputs of a dispatch stacked on the dispatches of tasks, in order.
func stackOn(tasks map[string]string, order ...string) []dispatch.InputSpec {
	var out []dispatch.InputSpec
	for _, task := range order {
		out = append(out, dispatch.InputSpec{Key: "base", Select: "patch", FromDispatch: tasks[task], Dir: task, Stack: true})
	}
	return out
}

// The end to end of a base's merge attribute: a's agent writes .gitattributes with
// `f.txt -merge` and edits line 8; b, beside it, edits line 10; c, stacked on both, needs
// a three-way merge of b onto a. Accept and staging merge the same way (git's text merge),
// so c runs on both edits instead of failing stack-conflict after its stage was made.
func TestRedTeam44S_MergeAttributeEndToEnd(t *testing.T) {
	e := newEnv(t)
	repo := rtStackRepo(t)
	e.subagent("a", `printf 'f.txt -merge\n' > .gitattributes && sed -i 's/^8$/eight/' f.txt`)
	e.subagent("b", `sed -i 's/^10$/ten/' f.txt`)
	e.subagent("c", `grep -qx eight f.txt && grep -qx ten f.txt && echo seen > c.txt`)
	ups := map[string]string{}
	for _, name := range []string{"a", "b"} {
		r := e.run(dispatch.Request{Subagent: name, Repo: repo})
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("%s: %s %s: %s", name, r.State, r.Reason, r.Detail)
		}
		ups[name] = r.ID
	}
	c := e.run(dispatch.Request{Subagent: "c", Repo: repo, Inputs: stackOn(ups, "a", "b")})
	if c.State != lifecycle.DispatchFinished || c.StackBase == "" {
		t.Fatalf("c on a and b: %s %s: %s (stack_base %q)", c.State, c.Reason, c.Detail, c.StackBase)
	}
	if p := e.blob(c.Result.Patch); !strings.Contains(p, "+++ b/c.txt") || strings.Contains(p, "f.txt") {
		t.Errorf("c's patch is not its own work alone:\n%s", p)
	}
}

// Only a finished dispatch's patch is a base: work a verify gate judged red (which a fix
// applies, Apply) is refused as a stack input, as are another product than the patch, a
// stack input the worker would apply, one without its task's directory, and a stack of more
// than 256 patches. Each is refused at accept, nothing recorded.
func TestRedTeam44S_StackInputsOnlyApprovedPatches(t *testing.T) {
	e := newEnv(t)
	repo := rtStackRepo(t)
	e.subagent("a", `sed -i 's/^8$/eight/' f.txt`)
	e.subagent("red", `sed -i 's/^9$/nine/' f.txt`)
	e.subagent("c", `true`)
	a := e.run(dispatch.Request{Subagent: "a", Repo: repo})
	red := e.run(dispatch.Request{Subagent: "red", Repo: repo, Verify: &verdict.Spec{Command: []string{"false"}}})
	if a.State != lifecycle.DispatchFinished || red.State != lifecycle.DispatchFailed || red.Reason != lifecycle.ReasonVerifyFailed || red.Result == nil || red.Result.Patch == nil {
		t.Fatalf("a %s %s; red %s %s: %s", a.State, a.Reason, red.State, red.Reason, red.Detail)
	}
	many := make([]dispatch.InputSpec, 257)
	for i := range many {
		many[i] = dispatch.InputSpec{Key: "base", Select: "patch", FromDispatch: a.ID, Dir: fmt.Sprintf("t%03d", i), Stack: true}
	}
	for name, tt := range map[string]struct {
		inputs []dispatch.InputSpec
		want   string
	}{
		"red work":    {[]dispatch.InputSpec{{Key: "base", Select: "patch", FromDispatch: red.ID, Dir: "red", Stack: true}}, "only a finished dispatch has products"},
		"outputs":     {[]dispatch.InputSpec{{Key: "base", Select: "outputs", FromDispatch: a.ID, Dir: "a", Stack: true}}, "a stack input is a patch under a dir of its own"},
		"applied":     {[]dispatch.InputSpec{{Key: "base", Select: "patch", FromDispatch: red.ID, Apply: true, Stack: true}}, "a stack input is a patch under a dir of its own"},
		"no dir":      {[]dispatch.InputSpec{{Key: "base", Select: "patch", FromDispatch: a.ID, Stack: true}}, "a stack input is a patch under a dir of its own"},
		"257 patches": {many, "at most 256"},
	} {
		t.Run(name, func(t *testing.T) {
			before := e.count()
			r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "c", Repo: repo, Actor: "test", Inputs: tt.inputs})
			var re *dispatch.RequestError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("accept: %v (record %v), want a refusal saying %q", err, r, tt.want)
			}
			if after := e.count(); after != before {
				t.Errorf("%d records after the refusal, %d before", after, before)
			}
		})
	}
	// 256 patches, the cap, of the same work under 256 task directories: the patch changes
	// the tree once, and each copy after it merges to the same tree (no commit).
	r := e.run(dispatch.Request{Subagent: "c", Repo: repo, Inputs: many[:256]})
	if r.State != lifecycle.DispatchFinished || r.StackBase == "" {
		t.Fatalf("256 copies of one patch: %s %s: %s", r.State, r.Reason, r.Detail)
	}
}

// count is how many dispatch records the home holds.
func (e *env) count() int {
	e.t.Helper()
	rs, err := e.d.Records.List(e.t.Context(), dispatch.ListFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(rs)
}

// A stacked dispatch on a repository whose path holds a ':' runs like any other: accept's
// scratch repository reads its objects, staging and the gate fetch from it.
func TestRedTeam44S_StackOnRepositoryPathWithColon(t *testing.T) {
	e := newEnv(t)
	src := rtStackRepo(t)
	repo := filepath.Join(t.TempDir(), "team:app", "repo")
	if err := os.MkdirAll(filepath.Dir(repo), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, repo).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	e.subagent("a", `sed -i 's/^8$/eight/' f.txt`)
	e.subagent("c", `grep -qx eight f.txt && echo seen > c.txt`)
	a := e.run(dispatch.Request{Subagent: "a", Repo: repo})
	if a.State != lifecycle.DispatchFinished {
		t.Fatalf("a: %s %s: %s", a.State, a.Reason, a.Detail)
	}
	c := e.run(dispatch.Request{Subagent: "c", Repo: repo, Inputs: stackOn(map[string]string{"a": a.ID}, "a"),
		Verify: &verdict.Spec{Command: []string{"grep", "-qx", "eight", "f.txt"}}})
	if c.State != lifecycle.DispatchFinished || c.StackBase == "" {
		t.Fatalf("c stacked on a in %s: %s %s: %s", repo, c.State, c.Reason, c.Detail)
	}
}
