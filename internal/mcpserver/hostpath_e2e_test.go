package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// TestOrchestratorStatusHidesHostPathsInFreeText: a workspace run whose tasks fail because
// the workspace's repository moved away has failure details naming that host path;
// agora_orchestrator_status and _watch over MCP show the failure without the path, in any
// field. Finding 8 of #26 (the detail "repository /tmp/.../private-repo is not a
// directory" reached MCP clients, although the run's repo field was cleared).
func TestOrchestratorStatusHidesHostPathsInFreeText(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo := filepath.Join(t.TempDir(), "private-repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	serve := exec.Command(agoraBin, "orch", "serve")
	serve.Env = baseEnv(home)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	c := client.New(home + "/orch/orch.sock")
	waitFor(t, 20*time.Second, "serve answers", func() bool { _, err := c.Health(context.Background()); return err == nil })

	// The repository moves once a has started: the tasks fail to check it out and say
	// where they looked.
	planPath := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(planPath, []byte("version: 1\nname: moved\nconcurrency: 1\ntasks:\n  - {id: a, subagent: sleeper}\n  - {id: b, subagent: writer}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main")
	id := strings.TrimSpace(string(agora(t, home, nil, "orch", "submit", planPath, "--workspace", "app")))
	status := func() api.Run {
		r, err := c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waitFor(t, 60*time.Second, "task a running", func() bool { return status().Tasks[0].State == api.TaskRunning })
	if err := os.Rename(repo, repo+"-moved"); err != nil {
		t.Fatal(err)
	}
	agoraMay(home, "orch", "cancel", id, "--task", "a") // a may have failed already
	waitFor(t, 150*time.Second, "a failure detail naming the repository", func() bool {
		for _, task := range status().Tasks {
			if strings.Contains(task.Detail, "private-repo") {
				return true
			}
		}
		return false
	})

	cs := stdioSession(t, home)
	for _, tool := range []string{"agora_orchestrator_status", "agora_orchestrator_watch"} {
		args := map[string]any{"run_id": id}
		if tool == "agora_orchestrator_watch" {
			args["timeout_seconds"] = 1
		}
		res := call(t, cs, tool, args)
		got := text(res)
		if res.IsError {
			t.Fatalf("%s: %s", tool, got)
		}
		if strings.Contains(got, "private-repo") || strings.Contains(got, filepath.Dir(repo)) {
			t.Errorf("%s shows the host path: %s", tool, got)
		}
		if !strings.Contains(got, "(host path hidden)") {
			t.Errorf("%s does not show the failure without its path: %s", tool, got)
		}
	}
}

// agoraMay runs the binary and ignores how it ends.
func agoraMay(home string, args ...string) {
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = baseEnv(home)
	cmd.Run()
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
