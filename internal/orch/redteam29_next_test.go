package orch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestRedTeam29_NextHintSurvivesAShell: the `next` hint quotes
// `agora orch answer RUN TASK` for a person to paste into a shell. Declared task ids are
// [a-z0-9_-], but the engine adds tasks whose ids hold '[', ']' and '.' (a fan-out item
// fan[KEY], a fix t.fix-N, a review t.review-NAME), and any of them can ask a question. Pasted
// as written, `fan[a]` is a shell glob: in a directory holding a file "fana" bash runs
// `agora orch answer RUN fana`, which answers another task of the same run (a plan may declare
// task fana), and zsh refuses the line ("no matches found"). Each quoted command, pasted into
// bash in such a directory, must reach agora as exactly orch answer RUN TASK --answer TEXT.
func TestRedTeam29_NextHintSurvivesAShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIP: no bash to paste the hint into")
	}
	dir := t.TempDir()
	// The files a glob in the hint would match: each names another task of the run.
	for _, f := range []string{"fana", "fan.a", "fan]"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"fana", plan.ItemID("fan", "a"), plan.ItemID("fan", "b-1"), plan.FixID("t", 2), plan.ReviewID("t", "rev.x@sha256:00")}
	run := api.Run{ID: "r-0123abcd", State: lifecycle.RunNeedsInput}
	for _, id := range ids {
		run.Tasks = append(run.Tasks, api.Task{ID: id, State: lifecycle.TaskNeedsInput})
	}
	next := nextStep(run)
	cmds := regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(next, -1)
	if len(cmds) != len(ids) {
		t.Fatalf("next = %q: %d quoted commands, want %d", next, len(cmds), len(ids))
	}
	for i, m := range cmds {
		// A function named agora prints the words the shell hands it, one per NUL.
		script := "agora() { printf '%s\\0' \"$@\"; }\n" + m[1] + "\n"
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pasting %q into bash: %v", m[1], err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		want := []string{"orch", "answer", run.ID, ids[i], "--answer", "TEXT"}
		if !slices.Equal(got, want) {
			t.Errorf("the hint %q pasted into bash runs agora %q, want agora %q", m[1], got, want)
		}
		if bytes.ContainsAny([]byte(m[1]), "\n\r\x1b") {
			t.Errorf("the hint %q holds a control byte", m[1])
		}
	}
}
