package dispatch_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
)

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hostClaude installs the fake claude as the host's claude-code binary (agora.yaml
// runtimes.claude-code.binary) and returns its path.
func hostClaude(e *env) string {
	e.t.Helper()
	host := filepath.Join(e.t.TempDir(), "claude")
	if err := os.WriteFile(host, fakeClaudeBytes(e.t), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.home.Config.Runtimes = map[string]config.Runtime{"claude-code": {Binary: host}}
	return host
}

// TestModel_ClaudeHostBinary runs claude-code with the host's claude, bound read-only at
// /agora/runtime/bin/claude rather than shipped in a capability: the agent's granted write
// lands in the patch; its attempt to overwrite the binary it runs fails and the host's file
// is unchanged; the binary is in no patch; path, version and sha256 are on the record and
// in the provenance statement.
func TestModel_ClaudeHostBinary(t *testing.T) {
	e := newModelEnv(t)
	host := hostClaude(e)
	before := fileSHA(t, host)
	m := newClaudeModel(t,
		"["+toolUse("toolu_01", "Bash", `{"command":"cp /etc/passwd /agora/runtime/bin/claude"}`)+"]",
		"["+toolUse("toolu_03", "Write", `{"file_path":"/agora/workspace/notes.md","content":"hello from claude"}`)+"]",
	)
	e.capability("notes", "tools: [write_file, run_command]\ncommands: [\"cp **\"]\n", map[string]string{"a.txt": "a"})
	e.modelSubagent("critic", "claude-code", "notes")
	e.envBundle("anthropic", map[string]string{
		"ANTHROPIC_BASE_URL": m.srv.URL,
		"PATH":               "/usr/bin:/bin", // no claude here: only the bound one can run
		"FAKECLAUDE_MODE":    "api",
	}, map[string]string{"ANTHROPIC_API_KEY": testAnthropicKey})

	r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"take notes"}`)})
	wantFinished(t, r)

	rb := r.RuntimeBinary
	if rb == nil {
		t.Fatal("no runtime binary on the record")
	}
	if rb.Path != "/agora/runtime/bin/claude" || rb.HostPath != host || rb.Version != "2.1.0 (Claude Code)" || rb.SHA256 != before {
		t.Errorf("runtime binary = %+v, want /agora/runtime/bin/claude from %s, 2.1.0 (Claude Code), sha256 %s", rb, host, before)
	}
	if after := fileSHA(t, host); after != before {
		t.Fatalf("the host's claude changed: sha256 %s, was %s", after, before)
	}
	// The overwrite failed inside the sandbox, and claude told the model so.
	if b := m.body(2); !strings.Contains(b, "Read-only file system") {
		t.Errorf("the model was not told the overwrite failed; its second request:\n%s", b)
	}
	patch := e.blob(r.Result.Patch)
	if !strings.Contains(patch, "+hello from claude") {
		t.Errorf("the granted Write is not in the patch:\n%s", patch)
	}
	if strings.Contains(patch, "claude b/") || strings.Contains(patch, "GIT binary patch") || strings.Contains(patch, "Binary files") {
		t.Errorf("the patch holds a binary file:\n%s", patch)
	}
	prov, err := dispatch.Provenance(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prov), `"runtime_binary":{"host_path":"`+host+`","path":"/agora/runtime/bin/claude","sha256":"`+before+`","version":"2.1.0 (Claude Code)"}`) {
		t.Errorf("provenance lacks the runtime binary:\n%s", prov)
	}
	// The stored record says the same after a fresh read.
	got, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil || got.RuntimeBinary == nil || *got.RuntimeBinary != *rb {
		t.Errorf("stored runtime binary = %+v, %v; want %+v", got.RuntimeBinary, err, rb)
	}
}

// TestModel_ClaudeHostBinaryMissing: a configured binary that is not there fails the
// dispatch before any sandbox starts, naming the install command; agora never falls back to
// whatever else is on a PATH.
func TestModel_ClaudeHostBinaryMissing(t *testing.T) {
	e := newModelEnv(t)
	m := newClaudeModel(t)
	claudeEnv(e, m, "tools: [read_file]\n", nil, nil) // ships a claude in the capability too
	missing := filepath.Join(t.TempDir(), "claude")
	e.home.Config.Runtimes = map[string]config.Runtime{"claude-code": {Binary: missing}}
	r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"x"}`)})
	if r.State != dispatch.StateFailed || !strings.Contains(r.Detail, "npm install -g @anthropic-ai/claude-code") || !strings.Contains(r.Detail, missing) {
		t.Errorf("dispatch = %s %s %q, want failed naming %s and the install command", r.State, r.Reason, r.Detail, missing)
	}
	if r.RuntimeBinary != nil || r.StartedAt != nil {
		t.Errorf("a sandbox started (%v) or a binary was recorded (%+v)", r.StartedAt, r.RuntimeBinary)
	}
}
