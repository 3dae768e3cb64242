package dispatch_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

const testAnthropicKey = "sk-ant-agora-test-0c1d2e3f4a5b6c7d8e9f"

// fakeClaude builds claudert's fake claude (static, so it runs in any sandbox) and returns
// its bytes.
func fakeClaude(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "claude")
	build := exec.Command("go", "build", "-o", bin, "github.com/agora-dev/agora/internal/runtime/claudert/internal/fakeclaude")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the fake claude: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// anthropicRequest is what the fake Messages API saw.
type anthropicRequest struct {
	path   string
	header http.Header
	body   string
}

// TestModel_ClaudeCode runs the claude-code runtime end to end in a real sandbox: the fake
// claude (shipped in a capability, as a team would ship a pinned claude) calls the Messages
// API through the worker's loopback relay and the gateway, which adds the key as x-api-key.
// claude gets the permission flags derived from the grant and the capability's MCP config,
// never the key.
func TestModel_ClaudeCode(t *testing.T) {
	e := newModelEnv(t)
	var mu sync.Mutex
	var seen []anthropicRequest
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, anthropicRequest{r.URL.Path, r.Header.Clone(), string(b)})
		mu.Unlock()
		if r.Header.Get("X-Api-Key") != testAnthropicKey {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"test-model",`+
			`"content":[{"type":"text","text":"hello from the fake model"}],"stop_reason":"end_turn",`+
			`"usage":{"input_tokens":12,"output_tokens":6}}`)
	}))
	t.Cleanup(api.Close)

	e.capability("claude-bin", "tools: [read_file, run_command]\ncommands: [\"git diff *\"]\n", map[string]string{
		"bin/claude": string(fakeClaude(t)),
		"mcp.json":   `{"mcpServers":{"docs":{"command":"/bin/true","args":[]}}}`,
	}, "bin/claude")
	e.modelSubagent("reviewer", "claude-code", "claude-bin")
	e.envBundle("anthropic", map[string]string{
		"ANTHROPIC_BASE_URL": api.URL,
		"PATH":               "/agora/workspace/bin:/usr/bin:/bin",
		"FAKECLAUDE_MODE":    "api",
		// The fake writes what it was given into the workspace: it comes back in the patch.
		"FAKECLAUDE_RECORD": "/agora/workspace/claude-record.json",
	}, map[string]string{"ANTHROPIC_API_KEY": testAnthropicKey})

	r := e.run(dispatch.Request{Subagent: "reviewer", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"review the change"}`)})
	wantFinished(t, r)
	if got := e.output(r, "final.md"); got != "hello from the fake model" {
		t.Errorf("final.md = %q, want the model's answer", got)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the Messages API got %d requests, want 1", len(seen))
	}
	req := seen[0]
	if req.path != "/v1/messages" || req.header.Get("Anthropic-Version") != "2023-06-01" || req.header.Get("Authorization") != "" {
		t.Errorf("upstream got %s, anthropic-version %q, Authorization %q; want /v1/messages, the client's version, no relay token",
			req.path, req.header.Get("Anthropic-Version"), req.header.Get("Authorization"))
	}
	if !strings.Contains(req.body, "review the change") {
		t.Errorf("upstream body %q lacks the prompt", req.body)
	}

	// What claude was given, from the record it left in the workspace.
	patch := e.blob(r.Result.Patch)
	var rec struct {
		Argv      []string `json:"argv"`
		Stdin     string   `json:"stdin"`
		MCPConfig string   `json:"mcp_config"`
		Env       []string `json:"env"`
	}
	for _, line := range strings.Split(patch, "\n") {
		if s, ok := strings.CutPrefix(line, "+{"); ok {
			if err := json.Unmarshal([]byte("{"+s), &rec); err != nil {
				t.Fatalf("decode the fake's record: %v", err)
			}
		}
	}
	if rec.Stdin != "review the change" {
		t.Fatalf("claude's stdin %q, want the prompt (record from the patch:\n%s)", rec.Stdin, patch)
	}
	for _, want := range []string{"--print", "--permission-mode=dontAsk", "--setting-sources=", "--strict-mcp-config", "--model=test-model"} {
		if !slices.Contains(rec.Argv, want) {
			t.Errorf("claude's argv %q lacks %s", rec.Argv, want)
		}
	}
	if !strings.Contains(rec.MCPConfig, `"docs"`) {
		t.Errorf("claude's MCP config %q, want the capability's", rec.MCPConfig)
	}
	env := strings.Join(rec.Env, "\n")
	for _, want := range []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:", "ANTHROPIC_AUTH_TOKEN=agora-relay-"} {
		if !strings.Contains(env, want) {
			t.Errorf("claude's environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "ANTHROPIC_API_KEY") || strings.Contains(patch, testAnthropicKey) {
		t.Error("the key or its name reached claude's environment")
	}

	gw := e.audited(r, "tool.gateway")
	if len(gw) != 1 || gw[0].Details["route"] != "anthropic.messages" || gw[0].Details["decision"] != "allowed" {
		t.Errorf("tool.gateway entries %+v, want one allowed anthropic.messages", gw)
	}
	tr := e.blob(r.Result.Transcript)
	if !strings.Contains(tr, `"type":"result"`) || !strings.Contains(tr, "hello from the fake model") {
		t.Errorf("transcript lacks the result event:\n%s", tr)
	}
	for name, s := range map[string]string{"stdout": e.blob(r.Result.Stdout), "stderr": e.blob(r.Result.Stderr), "transcript": tr} {
		if strings.Contains(s, testAnthropicKey) {
			t.Errorf("stored %s holds the key", name)
		}
	}
}

// TestModel_SandboxNone: on a `sandbox: none` target the worker finds the gateway under
// AGORA_WORKER_ROOT (through the stage's link when the stage path is too long for a socket)
// and the loop works the same.
func TestModel_SandboxNone(t *testing.T) {
	e := newModelEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	e.capability("notes", "tools: [list_files]\n", map[string]string{"a.txt": "a"})
	e.modelSubagent("lister", "openai", "notes")
	srv := e.model(testAPIKey,
		openaitest.CallTool("list_files", `{}`),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			return openaitest.Reply{Content: fmt.Sprintf("listed: %s", lastToolResult(t, req))}
		}),
	)
	r := e.run(dispatch.Request{Subagent: "lister", Envs: []string{"model"}, Target: "nobox"})
	wantFinished(t, r)
	if r.Isolation != "none" {
		t.Errorf("isolation %q, want none", r.Isolation)
	}
	if final := e.output(r, "final.md"); !strings.Contains(final, "a.txt") {
		t.Errorf("final.md = %q, want the listing", final)
	}
	if n := len(srv.Accepted()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}
