package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam30_LearnProductsFeedNothing: a learn dispatch's products do not
// feed other work without a person's --include-learn. Besides needs (the hand-off
// TestLearn_NoHandOffNoBranchWithoutIncludeLearn covers), a plan's engine reads two products
// itself: a fan-out's list (its items become tasks whose input each item is) and a reviewer's
// verdict. A fan-out from a learn producer must not add its items (nor may a learn reviewer's
// verdict count: dispatchexec refuses both the same way). Failed before: the fan-out added
// each[i1] and each[i2], which ran with inputs the learn dispatch wrote, and succeeded.
func TestRedTeam30_LearnProductsFeedNothing(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	e.writeConfig("targets:\n  learning:\n    mode: learn\n")
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	e.editors(map[string]string{
		"splitter": `mkdir -p "$AGORA_OUT/outputs"; printf '[{"id":"i1"},{"id":"i2"}]' > "$AGORA_OUT/outputs/items.json"`,
		"part":     `mkdir -p "$AGORA_OUT/outputs"; printf '%s' "$AGORA_INPUT_JSON" > "$AGORA_OUT/outputs/part.json"`,
	})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: learnfan
tasks:
  - {id: split, subagent: splitter, target: learning}
  - id: each
    fan_out:
      from: split
      select: "output:items.json"
      template: {subagent: part}
`), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", plan, "--wait")
	cmd.Env = e.vars
	out, _ := cmd.CombinedOutput()
	run, byID := e.statusOf("learnfan")
	var added []string
	for _, task := range run.Tasks {
		if task.Added != nil && task.Added.Cause == "fan_out" {
			added = append(added, task.ID+"="+task.State)
		}
	}
	if len(added) > 0 {
		t.Errorf("a learn producer's list fed a fan-out: items %v (run %s)\n%s", added, run.State, out)
	}
	if each := byID["each"]; each.State == lifecycle.TaskSucceeded || !strings.Contains(each.Detail, "learn") {
		t.Errorf("the fan-out from a learn producer: %s %q, want it refused saying learn", each.State, each.Detail)
	}
}
