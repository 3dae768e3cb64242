package dispatch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// cliHome is an AGORA_HOME driven through the real agora binary. Its first command is
// 'agora init', as a person's is: no other command creates a home.
type cliHome struct {
	t      *testing.T
	dir    string
	env    []string
	inited bool
}

func (h *cliHome) agora(args ...string) string {
	h.t.Helper()
	if !h.inited {
		h.inited = true
		h.agora("init")
	}
	c := exec.Command(agoraBin, args...)
	c.Env = append(os.Environ(), h.env...)
	c.Env = append(c.Env, "AGORA_HOME="+h.dir)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		h.t.Fatalf("agora %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// TestClaudeCode_RealCLI is the end-to-end test of the claude-code runtime with the real Claude Code CLI
// (installed by scripts/agent-clis.sh, or AGORA_TEST_CLAUDE), through `agora dispatch run`,
// against the streaming fake Messages API: claude is the host's, bound read-only; a granted
// Write lands in the patch; WebFetch, outside the grant, is refused and audited denied; the
// key is in no environment claude's tools see, no stored output and no request body; the
// binary is not in the patch; its version and digest are on the record.
func TestClaudeCode_RealCLI(t *testing.T) {
	claude := anthropictest.RealClaude(filepath.Join("..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "claude-code", claude)
	if err != nil {
		t.Fatalf("resolve the real claude: %v", err)
	}
	const key = "sk-ant-api03-e2e-0123456789abcdefghij"
	api, err := anthropictest.Start(key, anthropictest.Turns(
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.Text("Writing notes."),
			anthropictest.ToolUse("toolu_01W", "Write", `{"file_path":"/agora/workspace/notes.md","content":"from the real claude\n"}`)}},
		// A relative path: claude gives its hook the path made absolute, while its output
		// prints it as given; the two views must pair up (the run stopped here before).
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_01R", "Write", `{"file_path":"relative.md","content":"by a relative path\n"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_02F", "WebFetch", `{"url":"https://example.com/","prompt":"summarise"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_03E", "Bash", `{"command":"env","description":"show the environment"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.Text("Notes written.")}},
	))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	dir := t.TempDir()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"ANTHROPIC_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  claude-code: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", bin.Path)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	capDir := filepath.Join(dir, "cap")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("tools: [write_file, run_command]\ncommands: [env]\n"), 0o644)
	h.agora("capability", "register", "notes", "--from", capDir)
	h.agora("subagent", "register", "scribe", "--runtime", "claude-code", "--model", "claude-sonnet-4-5",
		"--system-prompt", "You take notes.", "--capability", "notes")
	h.agora("env", "register", "anthropic", "--value", "ANTHROPIC_BASE_URL="+api.URL, "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY")

	out := h.agora("dispatch", "run", "--subagent", "scribe", "--env", "anthropic", "--input", `{"prompt":"take notes"}`)
	id, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	var rec struct {
		State, Reason, Detail string
		RuntimeBinary         struct {
			Path     string `json:"path"`
			HostPath string `json:"host_path"`
			Version  string `json:"version"`
			SHA256   string `json:"sha256"`
		} `json:"runtime_binary"`
	}
	desc := h.agora("dispatch", "describe", id, "-o", "json")
	if err := json.Unmarshal([]byte(desc), &rec); err != nil {
		t.Fatalf("describe: %v\n%s", err, desc)
	}
	if rec.State != "finished" {
		t.Fatalf("dispatch %s: %s %s %s\n%s", id, rec.State, rec.Reason, rec.Detail, desc)
	}
	rb := rec.RuntimeBinary
	if rb.Path != "/agora/runtime/bin/claude" || rb.HostPath != bin.Path || rb.Version != bin.Version || rb.SHA256 != bin.SHA256 {
		t.Errorf("runtime binary on the record = %+v, want %s %s %s", rb, bin.Path, bin.Version, bin.SHA256)
	}

	patch := h.agora("dispatch", "patch", id)
	if !strings.Contains(patch, "+by a relative path") || !strings.Contains(patch, "b/relative.md") {
		t.Errorf("the Write by a relative path is not in the patch:\n%s", patch)
	}
	if !strings.Contains(patch, "+from the real claude") {
		t.Errorf("the granted Write is not in the patch:\n%s", patch)
	}
	if strings.Contains(patch, "claude b/") || strings.Contains(patch, "Binary files") || strings.Contains(patch, "GIT binary patch") {
		t.Errorf("the patch holds the binary:\n%s", patch)
	}

	// The audit: Write allowed, WebFetch (no http_fetch granted) denied, never allowed.
	var entries []struct {
		Kind    string         `json:"kind"`
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	logOut := h.agora("audit", "log", "--kind", "tool.call", "-o", "json")
	if err := json.Unmarshal([]byte(logOut), &entries); err != nil {
		var wrapped struct {
			Entries json.RawMessage `json:"entries"`
		}
		if json.Unmarshal([]byte(logOut), &wrapped) != nil || json.Unmarshal(wrapped.Entries, &entries) != nil {
			t.Fatalf("audit log: %v\n%s", err, logOut)
		}
	}
	var calls []string
	for _, e := range entries {
		calls = append(calls, fmt.Sprint(e.Details["tool"], " ", e.Details["decision"]))
	}
	got := strings.Join(calls, ", ")
	for _, want := range []string{"Write requested", "Write allowed", "WebFetch denied", "Bash allowed"} {
		if !strings.Contains(got, want) {
			t.Errorf("tool.call entries %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "WebFetch allowed") || strings.Contains(got, "WebFetch requested") {
		t.Errorf("the refused WebFetch is on record as requested or allowed: %q", got)
	}

	// The environment claude's tools run with reached the model as the Bash result: it must
	// be claude's (the relay, not the key), and nothing the model saw holds the key.
	bodies := api.Bodies()
	if !strings.Contains(bodies, "ANTHROPIC_BASE_URL=http://127.0.0.1") {
		t.Errorf("the environment dump never reached the model; request bodies:\n%.3000s", bodies)
	}
	if strings.Contains(bodies, key) || strings.Contains(bodies, "ANTHROPIC_API_KEY") {
		t.Error("the key (or its name) was in claude's environment or reached the model")
	}
	for _, flags := range [][]string{nil, {"--stderr"}, {"--transcript"}} {
		if s := h.agora(append([]string{"dispatch", "logs", id}, flags...)...); strings.Contains(s, key) {
			t.Errorf("the stored log %v holds the key", flags)
		}
	}
	for _, r := range api.Requests() {
		if r.Path == "/v1/messages" && r.Header.Get("X-Api-Key") != key {
			t.Errorf("a model request reached the API without the key the gateway adds")
		}
	}
}
