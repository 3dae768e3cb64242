package branch

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitbranch"
)

// TestRedTeam29_SkipAdviceSurvivesAShell: a conflict's advice names
// the exact command that makes the branch without the task (agora orch patches RUN --branch
// BRANCH --skip TASK). A fan-out item's task id holds a glob (fan[a]) and a branch name git
// takes may hold ';', '$', '(' or a quote: pasted into bash as printed, the advice must hand
// agora exactly those words, run nothing else, and skip no other task (a file "fana" in the
// directory would turn --skip fan[a] into --skip fana).
func TestRedTeam29_SkipAdviceSurvivesAShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIP: no bash to paste the advice into")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fana"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ task, branch string }{
		{"fan[a]", "agora/r-1"},
		{"build", "x;touch${IFS}pwned;true"},
		{"build", "it's(1)&$HOME|`id`"},
	} {
		if err := gitbranch.CheckBranchName(tc.branch); err != nil {
			t.Fatalf("the attack's branch is one the command refuses, so it proves nothing: %v", err)
		}
		w := Work{run: "r-1", changes: []gitbranch.Change{{Label: "task " + tc.task}}, tasks: []string{tc.task}}
		advice := without(w, "task "+tc.task, tc.branch)
		m := regexp.MustCompile(`\((agora orch patches .*)\)$`).FindStringSubmatch(advice)
		if m == nil {
			t.Fatalf("the advice %q names no command", advice)
		}
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "agora() { printf '%s\\0' \"$@\"; }\n"+m[1]+"\n")
		cmd.Dir = dir
		out, _ := cmd.Output()
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if want := []string{"orch", "patches", "r-1", "--branch", tc.branch, "--skip", tc.task}; !slices.Equal(got, want) {
			t.Errorf("the advice %q pasted into bash runs agora %q, want agora %q", m[1], got, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("pasting the advice %q ran a command", m[1])
		}
	}
}
