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
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

const testAnthropicKey = "sk-ant-agora-test-0c1d2e3f4a5b6c7d8e9f"

// fakeClaude is claudert's fake claude (static, so it runs in any sandbox) as bytes: the one
// build fakeClaudeBytes shares with the package's tests, not a go build and link per test.
func fakeClaude(t *testing.T) []byte {
	t.Helper()
	return fakeClaudeBytes(t)
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
		"PATH":               "/agora/capabilities/claude-bin/bin:/usr/bin:/bin",
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
	// A claude the capability ships is a file the sandbox can read, so the CLI is dumpable:
	// its answer is an output, never a vouched final (a review is read from nowhere else).
	if final := e.output(r, "final.md"); !strings.Contains(final, "hello from the fake model") || r.Result.Final != nil {
		t.Errorf("final.md %q, the record's final %+v; want the answer as an output only", final, r.Result.Final)
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
	e.capability("notes", "tools: [list_files]\noverlay: [a.txt]\n", map[string]string{"a.txt": "a"})
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
	// No stop step ran (no PID namespace): the answer is not vouched for.
	if r.Result.Final != nil {
		t.Errorf("the record's final %+v, want none without a sandbox", r.Result.Final)
	}
	if n := len(srv.Accepted()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}

// claudeModel is a scripted Anthropic Messages API: the nth request is answered with the
// nth reply's content blocks (JSON), and requests past the script with a final text. A
// reply may be "block", which holds the request until the test ends: claude is then still
// running, waiting on its model.
type claudeModel struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []string      // guarded by mu
	arrived chan int      // each request's number, as it arrives
	release chan struct{} // closed at cleanup: blocked requests return
}

func newClaudeModel(t *testing.T, replies ...string) *claudeModel {
	m := &claudeModel{t: t, arrived: make(chan int, 64), release: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.bodies = append(m.bodies, string(b))
		n := len(m.bodies)
		m.mu.Unlock()
		m.arrived <- n
		if r.Header.Get("X-Api-Key") != testAnthropicKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		content := `[{"type":"text","text":"done"}]`
		if n <= len(replies) {
			content = replies[n-1]
		}
		if content == "block" {
			select {
			case <-m.release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_%02d","type":"message","role":"assistant","model":"test-model","content":%s,`+
			`"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":6}}`, n, content)
	}))
	t.Cleanup(func() {
		close(m.release)
		m.srv.Close()
	})
	return m
}

// body returns the nth request's body (1-based).
func (m *claudeModel) body(n int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > len(m.bodies) {
		m.t.Fatalf("the model got %d requests, want at least %d", len(m.bodies), n)
	}
	return m.bodies[n-1]
}

// waitFor waits for the nth request, at most a minute.
func (m *claudeModel) waitFor(n int) bool {
	timeout := time.After(time.Minute)
	for {
		select {
		case got := <-m.arrived:
			if got >= n {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// toolUse is a tool_use content block.
func toolUse(id, name, input string) string {
	return `{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}`
}

// claudeEnv registers the capability "claude-bin" (the fake claude, with extra capability.yaml
// grant lines and files), the subagent "critic" holding it, and the env bundle "anthropic"
// pointing at m with extra plain values.
func claudeEnv(e *env, m *claudeModel, grants string, files map[string]string, values map[string]string) {
	all := map[string]string{"bin/claude": string(fakeClaudeBytes(e.t))}
	for k, v := range files {
		all[k] = v
	}
	e.capability("claude-bin", grants, all, "bin/claude")
	e.modelSubagent("critic", "claude-code", "claude-bin")
	vals := map[string]string{
		"ANTHROPIC_BASE_URL": m.srv.URL,
		"PATH":               "/agora/capabilities/claude-bin/bin:/usr/bin:/bin",
		"FAKECLAUDE_MODE":    "api",
	}
	for k, v := range values {
		vals[k] = v
	}
	e.envBundle("anthropic", vals, map[string]string{"ANTHROPIC_API_KEY": testAnthropicKey})
}

var fakeClaudeOnce struct {
	sync.Once
	b   []byte
	err error
}

// fakeClaudeBytes is fakeClaude, built once for the package's tests.
func fakeClaudeBytes(t testing.TB) []byte {
	fakeClaudeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakeclaude-")
		if err != nil {
			fakeClaudeOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "claude")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/agora-dev/agora/internal/runtime/claudert/internal/fakeclaude")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fakeClaudeOnce.err = fmt.Errorf("build the fake claude: %v\n%s", err, out)
			return
		}
		fakeClaudeOnce.b, fakeClaudeOnce.err = os.ReadFile(bin)
	})
	if fakeClaudeOnce.err != nil {
		t.Fatal(fakeClaudeOnce.err)
	}
	return fakeClaudeOnce.b
}

// TestModel_ClaudeRefusedWrite: a subagent whose grant has no
// write tool is asked by its model to Write. claude never loaded Write and refuses the call
// ("No such tool available"); the audit must say denied, with that reason, and never allowed.
func TestModel_ClaudeRefusedWrite(t *testing.T) {
	e := newModelEnv(t)
	m := newClaudeModel(t, "["+toolUse("toolu_01W", "Write", `{"file_path":"/agora/workspace/pwned.txt","content":"x"}`)+"]")
	claudeEnv(e, m, "tools: [read_file]\n", nil, nil)

	r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"write a file"}`)})
	wantFinished(t, r)
	calls := e.toolCalls(r)
	want := []string{"Write denied claude-code: not loaded: the grant does not cover this tool"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("tool.call entries (-want +got):\n%s", diff)
	}
	if !strings.Contains(m.body(2), "No such tool available: Write") {
		t.Errorf("the model was not told the tool is not loaded: %s", m.body(2))
	}
	if r.Result.Patch != nil && strings.Contains(e.blob(r.Result.Patch), "pwned.txt") {
		t.Error("the refused Write wrote its file")
	}
}

// TestModel_ClaudeToolCallsAuditedInOrder: every call claude makes is on record as it
// happens, its entries in order: a call that runs is "requested" before it runs and
// "allowed" with its outcome; a call claude's permission rules refuse is "requested" then
// "denied"; a Bash line the grant does not cover is "denied" by agora's pre-tool hook only;
// a call to a tool that is not loaded is "denied" only. Each entry carries claude's call id.
func TestModel_ClaudeToolCallsAuditedInOrder(t *testing.T) {
	e := newModelEnv(t)
	m := newClaudeModel(t,
		"["+toolUse("toolu_01A", "Bash", `{"command":"git status"}`)+"]",
		"["+toolUse("toolu_01B", "Bash", `{"command":"touch x"}`)+"]",
		"["+toolUse("toolu_01E", "Bash", `{"command":"rm -rf .git"}`)+"]",
		"["+toolUse("toolu_01C", "Edit", `{"file_path":"README.md","old_string":"a","new_string":"b"}`)+"]",
		"["+toolUse("toolu_01D", "Read", `{"file_path":"/agora/workspace/README.md"}`)+"]",
	)
	// "touch *" is granted, but has no exact Claude Code rule (its * is one argument): the
	// hook lets touch x go on, and claude's own rules refuse it.
	claudeEnv(e, m, "tools: [read_file, run_command]\ncommands: [\"git status\", \"touch *\"]\n", nil, nil)
	repo := gitRepo(t, map[string]string{"README.md": "# demo\n"})

	r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Repo: repo, Input: []byte(`{"prompt":"look around"}`)})
	wantFinished(t, r)
	requested := " requested claude-code: about to run; claude's permission rules derived from the grant decide"
	allowed := " allowed claude-code: ran, allowed by the permission rules derived from the grant"
	want := map[any][]string{
		"toolu_01A": {"Bash" + requested, "Bash" + allowed},
		"toolu_01B": {"Bash" + requested, "Bash denied claude-code: denied by the permission rules derived from the grant"},
		"toolu_01E": {"Bash denied claude-code: command not covered by the grant; refused by agora's pre-tool hook"},
		"toolu_01C": {"Edit denied claude-code: not loaded: the grant does not cover this tool"},
		"toolu_01D": {"Read" + requested, "Read" + allowed},
	}
	// Each call's entries in order. Two calls' entries may interleave: a hook process
	// reports a call as claude runs it, and the worker records what it reads from claude's
	// output (a refusal by claude's rules, a tool not loaded), which a loaded machine can
	// read after the next call's hook has reported.
	calls := e.toolCalls(r) // checks each entry's dispatch, role and args hash
	got := map[any][]string{}
	for i, a := range e.audited(r, "tool.call") {
		got[a.Details["call_id"]] = append(got[a.Details["call_id"]], calls[i])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool.call entries by call id (-want +got):\n%s", diff)
	}
}

// TestModel_ClaudeCancelAfterToolUse: a granted tool runs, then
// the dispatch is cancelled while claude still runs (first waiting on its model, then inside
// a second tool). Every call that ran, or had started, is on record: a cancel cannot erase it.
func TestModel_ClaudeCancelAfterToolUse(t *testing.T) {
	e := newModelEnv(t)
	m := newClaudeModel(t,
		"["+toolUse("toolu_01T", "Bash", `{"command":"touch /agora/out/ran"}`)+"]",
		"["+toolUse("toolu_01S", "Bash", `{"command":"sleep 30"}`)+"]",
		"block",
	)
	claudeEnv(e, m, "tools: [run_command]\ncommands: [\"touch **\", \"sleep **\"]\n", nil, nil)
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Actor: "test",
		Timeout: 2 * time.Minute, Input: []byte(`{"prompt":"work, slowly"}`)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *dispatch.Record, 1)
	go func() {
		rec, err := e.d.Supervise(ctx, r.ID, nil)
		if err != nil {
			t.Error(err)
		}
		done <- rec
	}()
	// The second request carries the first call's result: that call ran.
	if !m.waitFor(2) {
		t.Fatal("the first tool call never finished")
	}
	// Then the second call is under way; wait (bounded) until it is on record, or give up
	// and cancel anyway, so a worker that records nothing live fails below, not here.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if len(e.audited(r, "tool.call")) >= 3 {
			break
		}
	}
	if _, err := e.d.Cancel(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	final := <-done
	if final.State != lifecycle.DispatchCancelled {
		t.Errorf("dispatch %s %s: %s, want cancelled", final.State, final.Reason, final.Detail)
	}
	want := []string{
		"Bash requested claude-code: about to run; claude's permission rules derived from the grant decide",
		"Bash allowed claude-code: ran, allowed by the permission rules derived from the grant",
		"Bash requested claude-code: about to run; claude's permission rules derived from the grant decide",
	}
	if diff := cmp.Diff(want, e.toolCalls(final)); diff != "" {
		t.Errorf("tool.call entries after the cancel (-want +got):\n%s", diff)
	}
}

// TestModel_ClaudeLoadedUngrantedTool: a claude that loads a tool the grant does not cover
// (its init event lists Write for a grant without write_file) is stopped: the dispatch fails
// before the model is asked anything. MCP tools of the capability's servers are covered.
func TestModel_ClaudeLoadedUngrantedTool(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		wantFailed  bool
	}{
		{"Write", "Write", true},
		{"MCPToolOfAnotherServer", "mcp__other__search", true},
		{"MCPToolOfTheCapabilitysServer", "mcp__docs__search", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newModelEnv(t)
			m := newClaudeModel(t)
			claudeEnv(e, m, "tools: [read_file]\n",
				map[string]string{"mcp.json": `{"mcpServers":{"docs":{"command":"/bin/true","args":[]}}}`},
				map[string]string{"FAKECLAUDE_EXTRA_TOOLS": tc.extra})
			r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"hi"}`)})
			if !tc.wantFailed {
				wantFinished(t, r)
				return
			}
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonWorkerFailed ||
				!strings.Contains(r.Detail, `claude loaded tool "`+tc.extra+`", which the grant does not cover`) {
				t.Errorf("dispatch %s %s: %q, want failed worker-failed naming %s", r.State, r.Reason, r.Detail, tc.extra)
			}
			m.mu.Lock()
			n := len(m.bodies)
			m.mu.Unlock()
			if n != 0 {
				t.Errorf("the model got %d requests, want none", n)
			}
		})
	}
}
