package api_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/shellwords"
)

// TestRedTeam29_AnswerCommandIsOneWordEach: whatever a run or task id holds (globs, quotes,
// spaces, $(...), backticks, a newline, a leading dash), the answer command pasted into bash
// hands agora exactly orch answer RUN TASK --answer TEXT and runs nothing else.
func TestRedTeam29_AnswerCommandIsOneWordEach(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIP: no bash to paste the command into")
	}
	dir := t.TempDir()
	for _, id := range []string{"plain-1.fix-2", "fan[a]", "it's", "a b", "$(touch pwned)", "`touch pwned`", "x;touch pwned", "-rf", "*", "l\nm", "~root", "{a,b}", "é", ""} {
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "agora() { printf '%s\\0' \"$@\"; }\n"+api.AnswerCommand("r-1", id)+"\n")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: bash: %v", id, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if want := []string{"orch", "answer", "r-1", id, "--answer", "TEXT"}; !slices.Equal(got, want) {
			t.Errorf("task %q: %q pasted runs agora %q, want %q", id, api.AnswerCommand("r-1", id), got, want)
		}
	}
	if out, _ := exec.Command("ls", "-A", dir).Output(); len(out) != 0 {
		t.Errorf("pasting the commands ran something: %s", out)
	}
	if got := api.AnswerCommand("r-1", "build"); got != "agora orch answer r-1 build --answer TEXT" {
		t.Errorf("a plain id is quoted: %q", got)
	}
}

// FuzzAnswerCommand: for any run and task id, the answer command reads back, as a shell reads
// a simple command (shellwords.Split refuses globs, expansions and operators), as exactly
// agora orch answer RUN TASK --answer TEXT.
func FuzzAnswerCommand(f *testing.F) {
	for _, s := range []string{"t", "fan[a]", "it's", "$(x)", "a b", "", "-x", "t.fix-1"} {
		f.Add("r-1", s)
	}
	f.Fuzz(func(t *testing.T, run, task string) {
		if strings.ContainsAny(run+task, "\x00") {
			t.Skip("SKIP: out of the domain: no shell word holds a NUL, and ids never do")
		}
		line := api.AnswerCommand(run, task)
		got, err := shellwords.Split(line)
		if err != nil {
			t.Fatalf("AnswerCommand(%q, %q) = %q, not one simple command: %v", run, task, line, err)
		}
		if want := []string{"agora", "orch", "answer", run, task, "--answer", "TEXT"}; !slices.Equal(got, want) {
			t.Fatalf("AnswerCommand(%q, %q) = %q reads as %q", run, task, line, got)
		}
	})
}
