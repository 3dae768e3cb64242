package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// asJSON is b (one JSON document) as plain values, for comparing shapes and contents.
func asJSON(t *testing.T, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: not one JSON document: %v\n%s", what, err, b)
	}
	return v
}

// structured is a tool answer's structured content as plain values.
func structured(t *testing.T, res *mcp.CallToolResult) any {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return asJSON(t, "structured content", b)
}

// field is v's member name (v an object).
func field(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}

// lastLine is the last non-empty line of out.
func lastLine(out string) []byte {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return []byte(lines[len(lines)-1])
}

// TestSameObject_CLIJSONEqualsMCP reads the same objects through `agora ... -o json` and
// through the MCP tools of the real binary, and requires the same JSON: a
// submit's answer whole; a run (waiting on a question, its options filled in) as status
// shows it and as watch ends; the schedules and one schedule. Failed before: submit came
// back as {"run":{"run":...}} over MCP, and status and watch on the CLI had no options.
func TestSameObject_CLIJSONEqualsMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	serveOrch(t, home)
	cs := stdioSession(t, home)
	dir := t.TempDir()
	planJSON := `{"version":1,"name":"same-shape","tasks":[{"id":"ask","subagent":"asker"}]}`
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	var sub api.SubmitResponse
	decode(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": json.RawMessage(planJSON)}), &sub)
	id := sub.Run.ID
	for range 30 {
		var st RunAnswerOut
		decode(t, call(t, cs, "agora_orchestrator_watch", map[string]any{"run_id": id, "timeout_seconds": 2}), &st)
		if st.Run.State == lifecycle.RunNeedsInput {
			break
		}
	}

	t.Run("submit", func(t *testing.T) {
		// The same plan again: both answer the existing run, not created.
		mcpAns := structured(t, call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": json.RawMessage(planJSON)}))
		out, stderr, _ := agoraExit(t, home, "orch", "submit", planFile, "-o", "json")
		cli := asJSON(t, "orch submit -o json: "+stderr, []byte(out))
		if field(cli, "created") != false {
			t.Fatalf("the CLI's resubmit created a run: %s", out)
		}
		if diff := cmp.Diff(cli, mcpAns); diff != "" {
			t.Errorf("orch submit -o json vs agora_orchestrator_submit (-cli +mcp):\n%s", diff)
		}
	})
	t.Run("status", func(t *testing.T) {
		mcpAns := structured(t, call(t, cs, "agora_orchestrator_status", map[string]any{"run_id": id}))
		cli := asJSON(t, "orch status -o json", agora(t, home, nil, "orch", "status", id, "-o", "json"))
		if diff := cmp.Diff(cli, field(mcpAns, "run")); diff != "" {
			t.Errorf("orch status -o json vs agora_orchestrator_status's run (-cli +mcp):\n%s", diff)
		}
		if !strings.Contains(string(must(json.Marshal(cli))), `"options":["red","blue"]`) {
			t.Errorf("the run waiting on a question shows no options: %v", cli)
		}
	})
	t.Run("watch", func(t *testing.T) {
		mcpAns := structured(t, call(t, cs, "agora_orchestrator_watch", map[string]any{"run_id": id, "timeout_seconds": 1}))
		out, stderr, code := agoraExit(t, home, "orch", "watch", id, "-o", "json")
		if code != 4 {
			t.Fatalf("orch watch on a run waiting on a question: exit %d, want 4\n%s", code, stderr)
		}
		if diff := cmp.Diff(asJSON(t, "orch watch -o json's last line", lastLine(out)), mcpAns); diff != "" {
			t.Errorf("orch watch -o json's last line vs agora_orchestrator_watch (-cli +mcp):\n%s", diff)
		}
	})
	t.Run("schedules", func(t *testing.T) {
		agora(t, home, nil, "orch", "schedule", "add", "nightly", "--cron", "0 2 * * *", planFile)
		mcpList := structured(t, call(t, cs, "agora_orchestrator_schedules_list", nil))
		cliList := asJSON(t, "orch schedule list -o json", agora(t, home, nil, "orch", "schedule", "list", "-o", "json"))
		if diff := cmp.Diff(cliList, mcpList); diff != "" {
			t.Errorf("orch schedule list -o json vs agora_orchestrator_schedules_list (-cli +mcp):\n%s", diff)
		}
		mcpOne := structured(t, call(t, cs, "agora_orchestrator_schedule_show", map[string]any{"name": "nightly"}))
		cliOne := asJSON(t, "orch schedule show -o json", agora(t, home, nil, "orch", "schedule", "show", "nightly", "-o", "json"))
		if diff := cmp.Diff(cliOne, field(mcpOne, "schedule")); diff != "" {
			t.Errorf("orch schedule show -o json vs agora_orchestrator_schedule_show's schedule (-cli +mcp):\n%s", diff)
		}
	})
}

// sameWhereShown reports where mcp differs from cli, cli restricted to what mcp shows: every
// member of an MCP object must be in the CLI's with the same value (the CLI shows the host
// more: repository path, grants, binaries, event data).
func sameWhereShown(path string, cli, mcp any) []string {
	switch m := mcp.(type) {
	case map[string]any:
		c, ok := cli.(map[string]any)
		if !ok {
			return []string{path + ": an object over MCP, not on the CLI"}
		}
		var out []string
		for k, v := range m {
			cv, ok := c[k]
			if !ok {
				out = append(out, path+"."+k+": over MCP, not on the CLI")
				continue
			}
			out = append(out, sameWhereShown(path+"."+k, cv, v)...)
		}
		return out
	case []any:
		c, ok := cli.([]any)
		if !ok || len(c) != len(m) {
			return []string{path + ": lists differ: " + string(must(json.Marshal(cli))) + " vs " + string(must(json.Marshal(mcp)))}
		}
		var out []string
		for i := range m {
			out = append(out, sameWhereShown(path+"["+strconv.Itoa(i)+"]", c[i], m[i])...)
		}
		return out
	}
	if !cmp.Equal(cli, mcp) {
		return []string{path + ": " + string(must(json.Marshal(cli))) + " on the CLI, " + string(must(json.Marshal(mcp))) + " over MCP"}
	}
	return nil
}

// TestSameObject_DispatchCLIAndMCP describes the same dispatches (one that finished with a
// patch and an output, one that asks a question) through `agora dispatch describe -o json` and
// agora_dispatch_describe: every field MCP shows has the CLI's name and value (it catches
// subagent NAME@sha256 vs subagent + subagent_digest, envs strings vs objects,
// timeout_seconds vs timeout "30m0s", patch and needs_input vs result.*, done missing).
func TestSameObject_DispatchCLIAndMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	cs := stdioSession(t, home)
	for _, args := range []map[string]any{
		{"subagent": "writer", "envs": []string{"demo"}, "timeout_seconds": 600, "wait_seconds": 120},
		{"subagent": "asker", "wait_seconds": 120},
	} {
		var d dispatchOut
		decode(t, call(t, cs, "agora_dispatch", args), &d)
		mcpAns := structured(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": d.Dispatch.ID}))
		cli := asJSON(t, "dispatch describe -o json", agora(t, home, nil, "dispatch", "describe", d.Dispatch.ID, "-o", "json"))
		for _, diff := range sameWhereShown("dispatch", cli, field(mcpAns, "dispatch")) {
			t.Errorf("%s: %s", args["subagent"], diff)
		}
		for _, k := range []string{"timeout_seconds", "subagent_digest", "done", "outputs"} {
			if _, ok := cli.(map[string]any)[k]; !ok {
				t.Errorf("%s: the CLI's record has no %s", args["subagent"], k)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
