package mcpserver_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// serveOrch starts agora orch serve on home until the test ends.
func serveOrch(t *testing.T, home string) {
	t.Helper()
	serve := exec.Command(agoraBin, "orch", "serve")
	serve.Env = baseEnv(home)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	c := client.New(home + "/orch/orch.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Health(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer")
		}
	}
}

// TestPlan_FromTheSchemaOverMCP: the submit tool's published schema is the plan format; a
// plan written from it alone (a workspace, a dependency, a lock, a hand-off) runs to the end,
// watched with progress notifications, and its patches read back as one resource. A plan with
// five problems (its workspace among them) gets all five in one answer.
func TestPlan_FromTheSchemaOverMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, commits := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*")
	serveOrch(t, home)
	var prog progressLog
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "orchestrate")
	cmd.Env = baseEnv(home)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler}).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	var schema map[string]any
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name == "agora_orchestrator_submit" {
			b, _ := json.Marshal(tl.InputSchema)
			json.Unmarshal(b, &schema)
		}
	}
	planSchema := schema["properties"].(map[string]any)["plan"].(map[string]any)
	props := planSchema["properties"].(map[string]any)
	for _, f := range []string{"workspace", "revision", "tasks", "concurrency", "defaults"} {
		if d, _ := props[f].(map[string]any)["description"].(string); d == "" {
			t.Errorf("the plan schema does not describe %q", f)
		}
	}
	task := props["tasks"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	for _, f := range []string{"depends_on", "needs", "locks", "retry", "timeout", "grants", "input"} {
		if _, ok := task[f]; !ok {
			t.Errorf("the plan schema has no task field %q", f)
		}
	}

	// Written from the schema: what a model would send.
	plan := map[string]any{"version": 1, "name": "schema-plan", "workspace": "app", "revision": "release/1",
		"tasks": []any{
			map[string]any{"id": "write", "subagent": "writer", "env": []string{"demo"}, "locks": []any{"tree"}, "timeout": "2m"},
			map[string]any{"id": "again", "subagent": "writer", "env": []string{"demo"}, "depends_on": []string{"write"},
				"needs": map[string]any{"prev": map[string]any{"from": "write", "select": "patch"}}, "locks": []any{map[string]any{"name": "tree", "mode": "shared"}}},
		}}
	var sub api.SubmitResponse // = agora orch submit -o json
	decode(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan}), &sub)
	run := sub.Run
	if !sub.Created || !strings.HasPrefix(run.Workspace, "app@sha256:") || run.Revision != commits["release/1"] || run.Repo != "" {
		t.Fatalf("submit = %+v", sub)
	}
	if ended := watchToEnd(t, cs, run.ID); ended.State != lifecycle.RunSucceeded {
		t.Fatalf("run ended %s: %+v", ended.State, ended)
	}
	if msgs := prog.all(); len(msgs) == 0 || !strings.Contains(strings.Join(msgs, "\n"), "run "+run.ID) {
		t.Errorf("watch progress: %q", msgs)
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "agora://runs/" + run.ID + "/patches"})
	if err != nil || strings.Count(rr.Contents[0].Text, "# task ") != 2 || !strings.Contains(rr.Contents[0].Text, "+hello") {
		t.Errorf("run patches resource: %v\n%+v", err, rr)
	}
	decode(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan}), &sub)
	if sub.Created || sub.Run.ID != run.ID || !strings.Contains(sub.Message, "as run "+run.ID+" (schema-plan, succeeded): returning it; a new run (new_run: true") {
		t.Errorf("identical resubmit = %+v", sub)
	}
	// new_run starts another run of the same plan all the same, and says why.
	decode(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan, "new_run": true}), &sub)
	if !sub.Created || sub.Run.ID == run.ID || !strings.Contains(sub.Why, "a new run was asked for; run "+run.ID+" has the same plan") ||
		!strings.Contains(sub.Message, "is new") {
		t.Errorf("resubmit with new_run = %+v", sub)
	}
	// The new run's workers write into home: it ends before the test removes home.
	if ended := watchToEnd(t, cs, sub.Run.ID); ended.State != lifecycle.RunSucceeded {
		t.Errorf("the new_run run ended %s: %+v", ended.State, ended)
	}

	bad := map[string]any{"version": 1, "name": "five-wrong", "workspace": "nowhere", "tasks": []any{
		map[string]any{"id": "a", "subagent": "writer", "depends_on": []string{"b"}},
		map[string]any{"id": "b", "subagent": "nobody", "depends_on": []string{"a"}},
		map[string]any{"id": "c", "subagent": "writer", "timeout": "soon"},
		map[string]any{"id": "d", "subagent": "writer", "locks": []any{map[string]any{"name": "x", "mode": "sometimes"}}},
	}}
	got := text(call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": bad}))
	for _, want := range []string{"cycle", `tasks[1].subagent: subagent "nobody" not found`, "tasks[2].timeout", "tasks[3].locks[0].mode", `workspace: workspace "nowhere" not found; known: app`} {
		if !strings.Contains(got, want) {
			t.Errorf("a bad plan's answer lacks %q:\n%s", want, got)
		}
	}
	// A plan sent as JSON over MCP has no file and no lines of its own: no made-up
	// "plan.json:1:" position, each problem is placed by its path only.
	if strings.Contains(got, "plan.json") || regexp.MustCompile(`:[0-9]+:`).MatchString(got) || !strings.Contains(got, "plan: tasks[2].timeout: ") {
		t.Errorf("a bad plan's answer has a made-up position, want each problem as %q:\n%s", "plan: tasks[2].timeout: ...", got)
	}
}

// watchToEnd watches run id over MCP, with progress, until it is terminal, and returns it.
func watchToEnd(t *testing.T, cs *mcp.ClientSession, id string) api.Run {
	t.Helper()
	var st struct {
		Run api.Run `json:"run"`
	}
	for range 30 {
		p := &mcp.CallToolParams{Name: "agora_orchestrator_watch", Arguments: map[string]any{"run_id": id, "timeout_seconds": 10}}
		p.SetProgressToken("watch")
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		decode(t, res, &st)
		if lifecycle.RunEnded(st.Run.State) {
			return st.Run
		}
	}
	t.Fatalf("run %s did not end in 30 watches: %+v", id, st.Run)
	return st.Run
}
