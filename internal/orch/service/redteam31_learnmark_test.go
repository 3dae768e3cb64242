package service_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRedTeam31_TargetLearnTaskMarkedByTheService (learn): a plain task on a
// target a person put in mode: learn runs as a learn dispatch. `agora orch status` marked it
// (the CLI reads agora.db itself), but the orchestrator service's own run document, which
// `agora orch watch`, the MCP run tools (agora_orchestrator_status and _watch) and every
// other client of the service read, did not: api.Task.learn came only from the plan's
// learn: true. Failed before: watch's run document had no learn on the task.
func TestRedTeam31_TargetLearnTaskMarkedByTheService(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	e.writeConfig("targets:\n  learning:\n    mode: learn\n")
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("app\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
	e.editors(map[string]string{"add-b": "echo b > b.txt"})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte("version: 1\nname: bytarget\ntasks:\n  - {id: bytarget, subagent: add-b, target: learning}\n  - {id: plain, subagent: add-b}\n"), 0o644))
	if out := e.run("orch", "submit", plan, "--repo", repo, "--wait"); !strings.Contains(out, "succeeded") {
		t.Fatalf("run:\n%s", out)
	}
	_, cli := e.statusOf("bytarget")
	if !cli["bytarget"].Learn || cli["plain"].Learn {
		t.Fatalf("orch status marks bytarget %v plain %v, want true false", cli["bytarget"].Learn, cli["plain"].Learn)
	}
	// orch watch prints the service's own run document first.
	first, _, _ := strings.Cut(e.run("orch", "watch", "bytarget", "-o", "json"), "\n")
	var doc struct {
		Run api.Run `json:"run"`
	}
	if err := json.Unmarshal([]byte(first), &doc); err != nil || len(doc.Run.Tasks) != 2 {
		t.Fatalf("watch's first line %q: %v", first, err)
	}
	for _, task := range doc.Run.Tasks {
		if task.Learn != (task.ID == "bytarget") {
			t.Errorf("the service's run document marks task %s learn=%v: %s", task.ID, task.Learn, first)
		}
	}
}
