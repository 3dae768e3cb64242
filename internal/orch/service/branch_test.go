package service_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// editors registers exec subagents that each make one edit, as agents on a run would.
func (e *env) editors(edits map[string]string) {
	e.t.Helper()
	dir := e.t.TempDir()
	var m strings.Builder
	m.WriteString("version: 1\nsubagents:\n")
	for name, script := range edits {
		doc := fmt.Sprintf("description: edits the repository\nruntime: exec\ncommand: [sh, -c, %q]\ncapabilities: [shell]\n", script)
		must(e.t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644))
		fmt.Fprintf(&m, "  - {name: %s, from: %s.yaml}\n", name, name)
	}
	must(e.t, os.WriteFile(filepath.Join(dir, "agora-manifest.yaml"), []byte(m.String()), 0o644))
	e.run("apply", "-f", filepath.Join(dir, "agora-manifest.yaml"))
}

// checkoutState is what a branch must never change in the person's clone.
func checkoutState(t *testing.T, dir string) string {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	must(t, err)
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	must(t, err)
	return fmt.Sprintf("head=%s ref=%s status=%q index=%x readme=%q", gitIn(t, dir, "rev-parse", "HEAD"),
		gitIn(t, dir, "symbolic-ref", "HEAD"), gitIn(t, dir, "status", "--porcelain"), sha256.Sum256(idx), readme)
}

// The CLI test: a 4-task run, two of whose tasks edit one file in sequence under a
// lock, becomes a branch git log shows with four commits in dependency order; a conflicting
// pair stops with the report and creates nothing.
func TestOrchPatches_Branch(t *testing.T) {
	e := servedEnv(t)
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "shared.txt"), []byte("one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("app\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "base")
	base := gitIn(t, repo, "rev-parse", "HEAD")
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("app, with a local edit\n"), 0o644))
	e.editors(map[string]string{
		"add-a":      "echo a > a.txt",
		"add-d":      "echo d > d.txt",
		"edit-two":   "sed -i s/^two$/TWO/ shared.txt",
		"edit-seven": "sed -i s/^seven$/SEVEN/ shared.txt",
		"edit-deux":  "sed -i s/^two$/deux/ shared.txt",
	})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: four
tasks:
  - {id: a, subagent: edit-seven, depends_on: [d], locks: [shared.txt]}
  - {id: b, subagent: add-a}
  - {id: c, subagent: add-d, depends_on: [b]}
  - {id: d, subagent: edit-two, locks: [shared.txt]}
`), 0o644))
	out := e.run("orch", "submit", plan, "--repo", repo, "--wait")
	if !strings.Contains(out, "succeeded") {
		t.Fatalf("run did not succeed:\n%s", out)
	}
	before := checkoutState(t, repo)
	out = e.run("orch", "patches", "four", "--branch", "agora/four")
	if !strings.Contains(out, "branch agora/four") || !strings.Contains(out, "4 commits") {
		t.Errorf("patches --branch said:\n%s", out)
	}
	log := gitIn(t, repo, "log", "--reverse", "--format=%an|%ae|%cn <%ce>|%s|%(trailers:key=Agora-Task,valueonly,separator=)", "main..agora/four")
	lines := strings.Split(log, "\n")
	if len(lines) != 4 {
		t.Fatalf("git log shows %d commits, want 4:\n%s", len(lines), log)
	}
	// Dependency order, ties by task id: b and d are ready first (b), then c and d (c), then d,
	// then a, which depends on d. Id order (a, b, c, d) would put a's edit before d's.
	for i, want := range [][2]string{{"b", "add-a"}, {"c", "add-d"}, {"d", "edit-two"}, {"a", "edit-seven"}} {
		task, author := want[0], want[1]
		if !strings.HasPrefix(lines[i], author+"@sha256:") || !strings.Contains(lines[i], "|"+author+"@subagent.agora.invalid|agora <agora@agora.invalid>|agora: task "+task+" of run ") || !strings.HasSuffix(lines[i], "|"+task) {
			t.Errorf("commit %d = %q, want task %s by %s@sha256:... with its Agora-Task trailer", i, lines[i], task, author)
		}
	}
	// Each message's trailers name its dispatch and the run.
	trailers := gitIn(t, repo, "log", "--reverse", "--format=%(trailers:key=Agora-Dispatch,key=Agora-Run,valueonly,separator=%x2C)", "main..agora/four")
	runs := map[string]bool{}
	for i, l := range strings.Split(trailers, "\n") {
		r, d, ok := strings.Cut(l, ",") // in the message's order: Agora-Run, then Agora-Dispatch
		if !ok || len(d) < 20 || r == "" {
			t.Errorf("commit %d trailers = %q, want Agora-Dispatch and Agora-Run", i, l)
		}
		runs[r] = true
	}
	if len(runs) != 1 {
		t.Errorf("the commits name %d runs, want one: %s", len(runs), trailers)
	}
	if got := gitIn(t, repo, "show", "agora/four:shared.txt"); got != "one\nTWO\nthree\nfour\nfive\nsix\nSEVEN\neight" {
		t.Errorf("shared.txt on the branch = %q, want both edits", got)
	}
	if after := checkoutState(t, repo); after != before {
		t.Errorf("the checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	combined := e.run("orch", "patches", "four", "--combined")
	if want := gitIn(t, repo, "diff", "--binary", "--full-index", base, "agora/four"); strings.TrimSpace(combined) != want {
		t.Errorf("--combined:\n%s\nwant the branch's diff:\n%s", combined, want)
	}
	if msg := e.runFail("orch", "patches", "four", "--branch", "agora/four"); !strings.Contains(msg, "already in the repository") {
		t.Errorf("an existing branch: %s", msg)
	}

	must(t, os.WriteFile(plan, []byte(`version: 1
name: clash
tasks:
  - {id: b, subagent: edit-two, locks: [shared.txt]}
  - {id: c, subagent: edit-deux, depends_on: [b], locks: [shared.txt]}
`), 0o644))
	e.run("orch", "submit", plan, "--repo", repo, "--wait")
	msg := e.runFail("orch", "patches", "clash", "--branch", "agora/clash")
	for _, want := range []string{"task c (dispatch ", "conflict in shared.txt", "Nothing was created", "To go on"} {
		if !strings.Contains(msg, want) {
			t.Errorf("conflict report lacks %q:\n%s", want, msg)
		}
	}
	if refs := gitIn(t, repo, "for-each-ref", "--format=%(refname)", "refs/heads/agora/clash"); refs != "" {
		t.Errorf("a conflict created %s", refs)
	}
	if after := checkoutState(t, repo); after != before {
		t.Errorf("the checkout changed:\nbefore %s\nafter  %s", before, after)
	}

	// One dispatch becomes a branch of one commit.
	id := strings.TrimSpace(e.runOut("dispatch", "run", "--subagent", "add-a", "--repo", repo))
	out = e.run("dispatch", "patch", id, "--branch", "agora/one")
	if n := gitIn(t, repo, "rev-list", "--count", "main..agora/one"); n != "1" || !strings.Contains(out, "1 commit") {
		t.Errorf("dispatch patch --branch: %s commits; said %s", n, out)
	}
	if got := gitIn(t, repo, "log", "-1", "--format=%(trailers:key=Agora-Dispatch,valueonly)", "agora/one"); got != id {
		t.Errorf("Agora-Dispatch trailer = %q, want %s", got, id)
	}
}

// runOut is run's stdout alone.
func (e *env) runOut(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = e.vars
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
