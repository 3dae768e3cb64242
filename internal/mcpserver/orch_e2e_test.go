package mcpserver_test

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// TestOrchestratorOverStdio drives the real orchestrator service through the real MCP server
// over stdio: without serve the tools say so; with it, a plan submitted over MCP runs to the
// end in sandboxed workers, and a resubmit returns the same run.
func TestOrchestratorOverStdio(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	cs := stdioSession(t, home)
	plan := map[string]any{"version": 1, "name": "mcp-plan", "tasks": []any{
		map[string]any{"id": "a", "subagent": "writer", "env": []string{"demo"}},
		map[string]any{"id": "b", "subagent": "writer", "env": []string{"demo"}, "depends_on": []string{"a"}},
	}}
	if got := text(call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan})); !strings.Contains(got, "orchestrator not running") {
		t.Fatalf("submit without serve: %q", got)
	}

	serve := exec.Command(agoraBin, "orch", "serve")
	serve.Env = baseEnv(home)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	c := client.New(home + "/orch/orch.sock")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Health(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The answer is `agora orch submit -o json`'s: {run, created, message} (it
	// was nested one level deeper, {"run":{"run":...}}).
	var sub api.SubmitResponse
	decode(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan}), &sub)
	id := sub.Run.ID
	if !sub.Created || id == "" || sub.Run.Actor != "mcp:"+actorOf(t) || sub.Message == "" {
		t.Fatalf("submit = %+v", sub)
	}
	var st struct {
		Run api.Run `json:"run"`
	}
	for range 20 {
		decode(t, call(t, cs, "agora_orchestrator_watch", map[string]any{"run_id": id, "timeout_seconds": 10}), &st)
		if lifecycle.RunEnded(st.Run.State) {
			break
		}
	}
	if st.Run.State != lifecycle.RunSucceeded {
		t.Fatalf("run ended %s: %+v", st.Run.State, st.Run)
	}
	decode(t, call(t, cs, "agora_orchestrator_status", map[string]any{"run_id": id}), &st)
	if len(st.Run.Tasks) != 2 || st.Run.Tasks[1].State != lifecycle.TaskSucceeded || st.Run.Repo != "" {
		t.Errorf("status = %+v", st.Run)
	}
	decode(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan}), &sub)
	if sub.Created || sub.Run.ID != id {
		t.Errorf("resubmit = %+v, want the existing run %s", sub, id)
	}
	plan["tasks"] = []any{map[string]any{"id": "a", "subagent": "nobody"}}
	plan["name"] = "bad"
	if got := text(call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan})); !strings.Contains(got, `subagent "nobody" not found`) {
		t.Errorf("bad plan: %q", got)
	}
}
