package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/orch/api"
)

// current is kind NAME's current version as NAME@sha256:HEX, from the real CLI.
func current(t *testing.T, home, kind, name string) string {
	t.Helper()
	var v struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(agora(t, home, nil, kind, "show", name, "-o", "json"), &v); err != nil || v.Digest == "" {
		t.Fatalf("%s show %s: %v (digest %q)", kind, name, err, v.Digest)
	}
	return name + "@" + v.Digest
}

// mcpDecisions lists the decision of every audited call of tool.
func mcpDecisions(t *testing.T, home, tool string) []string {
	t.Helper()
	var log []struct {
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(agora(t, home, nil, "audit", "log", "-o", "json"), &log); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range log {
		if e.Details["tool"] == tool {
			d, _ := e.Details["decision"].(string)
			out = append(out, d)
		}
	}
	return out
}

// TestAttack_PinnedCatalogOverMCP: over the official SDK client against the real binary, an
// MCP client that remembers a subagent's or an env bundle's digest starts nothing from it
// once people registered a new version, nor from any version of a subagent or env bundle
// people retired: neither through agora_dispatch nor through a plan it submits. Each is
// refused with an error that names the entry and says to name it without a version, is on
// the audit log as denied (never allowed), and leaves no dispatch and no run. The current
// versions' pins still work. A caller never names a capability (agora_dispatch has no
// argument for one): a subagent's version pins them, so narrowing a subagent's capabilities
// is a new subagent version, refused as any.
func TestAttack_PinnedCatalogOverMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "env", "register", "extra", "--value", "A=1")
	oldWriter, oldDemo := current(t, home, "subagent", "writer"), current(t, home, "env", "demo")
	rogue, extra := current(t, home, "subagent", "rogue"), current(t, home, "env", "extra")

	// People change writer and demo, and retire rogue and extra (a prune of a manifest
	// without them).
	caps, _ := filepath.Abs("testdata/catalog/caps/shell")
	manifest := filepath.Join(t.TempDir(), "agora-manifest.yaml")
	os.WriteFile(manifest, []byte(`version: 1
capabilities:
  - {name: shell, from: `+caps+`}
subagents:
  - name: writer
    description: writes hello.txt, as people registered it now
    capabilities: [shell]
    command: [sh, -c, 'echo hello > hello.txt']
envs:
  - name: demo
    values: {GREETING: changed}
`), 0o600)
	agora(t, home, nil, "apply", "-f", manifest, "--prune")
	curWriter, curDemo := current(t, home, "subagent", "writer"), current(t, home, "env", "demo")
	if curWriter == oldWriter || curDemo == oldDemo {
		t.Fatalf("the new versions: %s %s", curWriter, curDemo)
	}

	serveOrch(t, home)
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "orchestrate")
	cmd.Env = baseEnv(home)
	cs, err := newClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	superseded := func(ref string) string {
		name, v, _ := strings.Cut(ref, "@")
		return `"` + name + `": version ` + v + " is not its current one"
	}
	cases := []struct {
		name, subagent, env, want string
	}{
		{"a superseded subagent", oldWriter, curDemo, `subagent ` + superseded(oldWriter)},
		{"a retired subagent", rogue, curDemo, `subagent "rogue" not found; known: writer`},
		{"a superseded env bundle", curWriter, oldDemo, `env bundle ` + superseded(oldDemo)},
		{"a retired env bundle", curWriter, extra, `env bundle "extra" not found; known: demo`},
	}
	for _, tt := range cases {
		res := call(t, cs, "agora_dispatch", map[string]any{"subagent": tt.subagent, "envs": []string{tt.env}})
		if got := text(res); !res.IsError || !strings.Contains(got, tt.want) || !strings.Contains(got, "without a version") {
			t.Errorf("agora_dispatch with %s: got %.400s, want it refused with %q, saying to name it without a version", tt.name, got, tt.want)
		}
		plan := map[string]any{"version": 1, "name": "old-pins",
			"tasks": []any{map[string]any{"id": "a", "subagent": tt.subagent, "env": []string{tt.env}}}}
		res = call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan})
		if got := text(res); !res.IsError || !strings.Contains(got, tt.want) {
			t.Errorf("a plan with %s: got %.400s, want it refused with %q", tt.name, got, tt.want)
		}
	}
	// A capability is named only by a subagent's version: agora_dispatch has no argument for one.
	if res := call(t, cs, "agora_dispatch", map[string]any{"subagent": curWriter, "capabilities": []string{"shell"}}); !res.IsError || !strings.Contains(text(res), `unknown argument "capabilities"`) {
		t.Errorf("agora_dispatch naming a capability: got %.400s, want the argument refused", text(res))
	}
	plan := map[string]any{"version": 1, "name": "old-reviewer", "tasks": []any{map[string]any{"id": "a", "subagent": curWriter,
		"review": map[string]any{"subagents": []string{oldWriter}, "approve": 1}}}}
	if res := call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan}); !res.IsError || !strings.Contains(text(res), superseded(oldWriter)) {
		t.Errorf("a plan with a superseded reviewer: got %.400s, want it refused", text(res))
	}

	for _, tool := range []string{"agora_dispatch", "agora_orchestrator_submit"} {
		got := mcpDecisions(t, home, tool)
		if len(got) < len(cases) || strings.Contains(strings.Join(got, " "), "allowed") {
			t.Errorf("%s's refusals are on the audit log as %v, want each denied and none allowed", tool, got)
		}
	}
	var records, runs []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &records)
	json.Unmarshal(agora(t, home, nil, "orch", "runs", "-o", "json"), &runs)
	if len(records) != 0 || len(runs) != 0 {
		t.Errorf("refused calls left %d dispatches and %d runs", len(records), len(runs))
	}

	var out dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": curWriter, "envs": []string{curDemo}, "wait_seconds": 120}), &out)
	if out.Dispatch.Subagent+"@"+out.Dispatch.SubagentDigest != curWriter {
		t.Errorf("the current versions pinned: %+v", out.Dispatch)
	}
	plan = map[string]any{"version": 1, "name": "current-pins",
		"tasks": []any{map[string]any{"id": "a", "subagent": curWriter, "env": []string{curDemo}}}}
	res := call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan})
	if res.IsError {
		t.Fatalf("a plan pinning the current versions: %.400s", text(res))
	}
	// The run is awaited to its end: its dispatch writes into the home, which the test's
	// clean-up removes once serve has stopped.
	var sub api.SubmitResponse
	decode(t, res, &sub)
	if out, stderr, code := agoraExit(t, home, "orch", "watch", sub.Run.ID, "-o", "json"); code != 0 {
		t.Errorf("the run of current pins: orch watch exit %d\n%s\n%s", code, lastLine(out), stderr)
	}
}
