package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAttack_PinsCornersOverMCP: over the official SDK client against the real binary, an MCP
// client hides a superseded or retired version where a first reading of the rule might not
// look (a plan's defaults, a fan-out template's reviewer and fixer), or spells a superseded
// version as a parser might read apart from the resolver (upper-case hex, another prefix, a
// second pin, white space). Each plan is refused naming the version and audited as denied;
// each odd spelling is refused as an argument, audited as invalid: no call is ever on the
// audit log as allowed, and nothing starts. A person's `agora orch submit` of the same plan
// from a file reaches the same check through serve's HTTP API, and is refused too.
func TestAttack_PinsCornersOverMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "env", "register", "extra", "--value", "A=1")
	oldWriter, oldDemo := current(t, home, "subagent", "writer"), current(t, home, "env", "demo")
	rogue := current(t, home, "subagent", "rogue")

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
	curWriter := current(t, home, "subagent", "writer")

	serveOrch(t, home)
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "orchestrate")
	cmd.Env = baseEnv(home)
	cs, err := newClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	fanOut := func(template map[string]any) []any {
		return []any{
			map[string]any{"id": "split", "subagent": "writer"},
			map[string]any{"id": "port", "fan_out": map[string]any{"from": "split", "select": "output:x.json", "template": template}},
		}
	}
	plans := []struct {
		name string
		plan map[string]any
		want string
	}{
		{"a superseded env bundle in the defaults", map[string]any{"defaults": map[string]any{"env": []string{oldDemo}},
			"tasks": []any{map[string]any{"id": "a", "subagent": "writer"}}}, `env bundle "demo": version`},
		{"a superseded reviewer of a fan-out template", map[string]any{"tasks": fanOut(map[string]any{"subagent": "writer",
			"review": map[string]any{"subagents": []string{oldWriter}, "approve": 1}})}, `subagent "writer": version`},
		{"a retired fixer of a fan-out template", map[string]any{"tasks": fanOut(map[string]any{"subagent": "writer",
			"review": map[string]any{"subagents": []string{"writer"}, "approve": 1}, "on_fail": map[string]any{"fix": map[string]any{"subagent": rogue}}})},
			`subagent "rogue" not found`},
		{"a name current in one task and superseded in the next", map[string]any{"tasks": []any{
			map[string]any{"id": "a", "subagent": curWriter}, map[string]any{"id": "b", "subagent": oldWriter}}}, `subagent "writer": version`},
	}
	for _, tt := range plans {
		tt.plan["version"], tt.plan["name"] = 1, "corner"
		res := call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": tt.plan})
		if got := text(res); !res.IsError || !strings.Contains(got, tt.want) || !strings.Contains(got, "refused") {
			t.Errorf("%s: got %.400s, want it refused with %q", tt.name, got, tt.want)
		}
		src, _ := json.Marshal(tt.plan)
		file := filepath.Join(t.TempDir(), "plan.json")
		os.WriteFile(file, src, 0o600)
		if _, stderr, code := agoraExit(t, home, "orch", "submit", file); code == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s from a file: exit %d, %.400s; want it refused with %q", tt.name, code, stderr, tt.want)
		}
	}

	name, d, _ := strings.Cut(oldWriter, "@")
	hexPart := strings.TrimPrefix(d, "sha256:")
	for _, ref := range []string{
		name + "@sha256:" + strings.ToUpper(hexPart),
		name + "@SHA256:" + hexPart,
		name + "@" + hexPart,
		name + "@sha256:" + hexPart[:12],
		name + "@sha256:" + hexPart + " ",
		" " + oldWriter,
		oldWriter + "@" + strings.TrimPrefix(curWriter, name+"@"),
		curWriter + "@" + d,
		"\u0445" + oldWriter[1:], // a look-alike first letter
		name + "@latest",
	} {
		res := call(t, cs, "agora_dispatch", map[string]any{"subagent": ref})
		if got := text(res); !res.IsError || !strings.Contains(got, "not NAME or NAME@sha256:HEX") {
			t.Errorf("agora_dispatch with subagent %q: got %.300s, want it refused as not a reference", ref, got)
		}
		res = call(t, cs, "agora_dispatch", map[string]any{"subagent": curWriter, "envs": []string{strings.Replace(ref, name, "demo", 1)}})
		if !res.IsError {
			t.Errorf("agora_dispatch with env bundle %q: got %.300s, want it refused", ref, text(res))
		}
	}

	for _, tool := range []string{"agora_dispatch", "agora_orchestrator_submit"} {
		got := mcpDecisions(t, home, tool)
		if len(got) == 0 || strings.Contains(strings.Join(got, " "), "allowed") {
			t.Errorf("%s's refusals are on the audit log as %v, want none allowed", tool, got)
		}
	}
	var records, runs []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &records)
	json.Unmarshal(agora(t, home, nil, "orch", "runs", "-o", "json"), &runs)
	if len(records) != 0 || len(runs) != 0 {
		t.Errorf("refused calls left %d dispatches and %d runs", len(records), len(runs))
	}
}
