package dispatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// realCodexCLI is the real Codex CLI: AGORA_TEST_CODEX, else the one scripts/agent-clis.sh
// installs in .cache/npm; "" if neither.
func realCodexCLI() string {
	p := os.Getenv("AGORA_TEST_CODEX")
	if p == "" {
		p = filepath.Join("..", "..", ".cache", "npm", "node_modules", ".bin", "codex")
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	abs, _ := filepath.Abs(p)
	return abs
}

// codexDescribe is what the codex end-to-end test reads of `dispatch describe -o json`.
type codexDescribe struct {
	State, Reason, Detail string
	Learn                 bool
	RuntimeBinary         struct {
		Path     string `json:"path"`
		HostPath string `json:"host_path"`
		Version  string `json:"version"`
		SHA256   string `json:"sha256"`
	} `json:"runtime_binary"`
}

// TestCodex_RealCLI is the end-to-end test of the codex runtime with the real Codex CLI
// (scripts/agent-clis.sh, or AGORA_TEST_CODEX) through `agora dispatch run` in the sandbox,
// against the Responses fake: codex is the host's, bound read-only, its version and digest on
// the record; a granted command's file lands in the patch; the environment codex's commands
// see holds neither the relay token (codex has it in its config only) nor the key, and the
// key is in no stored output; a command outside the grant is cut out of the model's answer
// before codex sees it (it never runs), audited denied, codex is stopped and the dispatch
// fails saying so.
func TestCodex_RealCLI(t *testing.T) {
	codex := realCodexCLI()
	if codex == "" {
		t.Skip("SKIP: the real Codex CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CODEX)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "codex", codex)
	if err != nil {
		t.Fatalf("resolve the real codex: %v", err)
	}
	const key = "sk-proj-e2e-codex-0123456789abcdefghij"
	good, err := responsestest.Start(key, responsestest.Turns(
		responsestest.Exec(`sh -c 'echo from the real codex > notes.md'`),
		responsestest.Exec("env"),
		responsestest.Say("Notes written."),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bad, err := responsestest.Start(key, responsestest.Turns(
		responsestest.Exec("touch pwned"),
		responsestest.Say("done"),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()

	dir := t.TempDir()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"OPENAI_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  codex: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", bin.Path)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	capDir := filepath.Join(dir, "cap")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("tools: [run_command, write_file]\ncommands: [\"sh -c *\", env]\n"), 0o644)
	h.agora("capability", "register", "notes", "--from", capDir)
	h.agora("subagent", "register", "scribe", "--runtime", "codex", "--model", "gpt-5.5",
		"--system-prompt", "You take notes.", "--capability", "notes")
	h.agora("env", "register", "openai-good", "--value", "OPENAI_BASE_URL="+good.URL, "--secret", "OPENAI_API_KEY=env:OPENAI_API_KEY")
	h.agora("env", "register", "openai-bad", "--value", "OPENAI_BASE_URL="+bad.URL, "--secret", "OPENAI_API_KEY=env:OPENAI_API_KEY")

	run := func(env string) (string, codexDescribe) {
		// A failed dispatch exits non-zero; its id is still the first line.
		c := exec.Command(agoraBin, "dispatch", "run", "--subagent", "scribe", "--env", env, "--input", `{"prompt":"take notes"}`)
		c.Env = append(append(os.Environ(), h.env...), "AGORA_HOME="+h.dir)
		o, _ := c.Output()
		out := string(o)
		id, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		var rec codexDescribe
		desc := h.agora("dispatch", "describe", id, "-o", "json")
		if err := json.Unmarshal([]byte(desc), &rec); err != nil {
			t.Fatalf("describe: %v\n%s", err, desc)
		}
		return id, rec
	}

	id, rec := run("openai-good")
	if rec.State != "finished" {
		t.Fatalf("dispatch %s: %s %s %s\nstderr:\n%s", id, rec.State, rec.Reason, rec.Detail, h.agora("dispatch", "logs", id, "--stderr"))
	}
	rb := rec.RuntimeBinary
	if rb.Path != "/agora/runtime/bin/codex" || rb.HostPath != bin.Path || rb.Version != bin.Version || rb.SHA256 != bin.SHA256 {
		t.Errorf("runtime binary on the record = %+v, want %s %s %s", rb, bin.Path, bin.Version, bin.SHA256)
	}
	patch := h.agora("dispatch", "patch", id)
	if !strings.Contains(patch, "+from the real codex") {
		t.Errorf("the granted command's file is not in the patch:\n%s", patch)
	}
	// The env dump reached the model as the second command's output, without the relay
	// token: codex has it in its config only.
	bodies := good.Bodies()
	if !strings.Contains(bodies, "CODEX_HOME=") {
		t.Errorf("the environment dump never reached the model; request bodies:\n%.3000s", bodies)
	}
	if strings.Contains(bodies, "agora-relay-") {
		t.Error("the relay token is in the environment codex's commands see")
	}
	if strings.Contains(bodies, key) || strings.Contains(bodies, "OPENAI_API_KEY") {
		t.Error("the key (or its name) was in codex's environment or reached the model")
	}
	for _, r := range good.Requests() {
		if r.Header.Get("Authorization") != "Bearer "+key {
			t.Errorf("a model request reached the API without the key the gateway adds (rejected: %q)", r.Rejected)
		}
	}
	for _, flags := range [][]string{nil, {"--stderr"}, {"--transcript"}} {
		if s := h.agora(append([]string{"dispatch", "logs", id}, flags...)...); strings.Contains(s, key) {
			t.Errorf("the stored log %v holds the key", flags)
		}
	}

	id2, rec2 := run("openai-bad")
	if rec2.State != "failed" || !strings.Contains(rec2.Detail, "outside the grant") || !strings.Contains(rec2.Detail, "refused before it ran") {
		t.Errorf("dispatch %s with a command outside the grant: %s %s %q, want failed saying the command is outside the grant and was refused before it ran", id2, rec2.State, rec2.Reason, rec2.Detail)
	}
	// The relay cut the call out of the stream: codex never ran it.
	if p := h.agora("dispatch", "patch", id2); strings.Contains(p, "pwned") {
		t.Errorf("the refused command ran:\n%s", p)
	}
	var entries []struct {
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
		calls = append(calls, fmt.Sprint(e.Details["tool"], " ", e.Details["decision"], " ", e.Details["dispatch"]))
	}
	got := strings.Join(calls, ", ")
	for _, want := range []string{"exec_command allowed " + id, "exec_command denied " + id2} {
		if !strings.Contains(got, want) {
			t.Errorf("tool.call entries %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "exec_command allowed "+id2) {
		t.Errorf("the refused command is on record as allowed: %q", got)
	}
}
