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

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// TestOrchestratorStatusHidesHostPathsInFreeText: a workspace run whose task fails to fetch
// its commit from the workspace's repository has a failure detail naming that host path;
// agora_orchestrator_status and _watch over MCP show the failure without the path, in any
// field (the detail "repository /tmp/.../private-repo is not a directory" must not reach
// MCP clients when the run's repo field is cleared).
//
// The repository is broken so that accept, which names no path, passes and the fetch at
// staging fails: a blob of the commit is gone. (Moving the repository away while a task
// ran was a race: accept's check fails first, without the path, when the move is early.)
func TestOrchestratorStatusHidesHostPathsInFreeText(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo := filepath.Join(t.TempDir(), "private-repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "data.txt"), []byte("a blob the fetch will miss\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	gitIn("add", "data.txt")
	gitIn("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
	blob := gitIn("rev-parse", "HEAD:data.txt")
	if err := os.Remove(filepath.Join(repo, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(agoraBin, "orch", "serve")
	serve.Env = baseEnv(home)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	c := client.New(home + "/orch/orch.sock")
	agoratest.WaitFor(t, 20*time.Second, "serve answers", func() bool { _, err := c.Health(context.Background()); return err == nil })

	planPath := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(planPath, []byte("version: 1\nname: broken\ntasks:\n  - {id: b, subagent: writer, retry: {max_attempts: 1}}\n"), 0o644); err != nil {
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
	named := func() bool {
		for _, task := range status().Tasks {
			if strings.Contains(task.Detail, "private-repo") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(150 * time.Second); !named(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			// Say what the run looked like, so a failure can be read.
			for _, task := range status().Tasks {
				t.Logf("task %s: %s %s: %s (dispatch %s)", task.ID, task.State, task.Reason, task.Detail, task.DispatchID)
			}
			t.Fatal("no failure detail naming the repository within 150s")
		}
	}

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
