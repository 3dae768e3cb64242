package dispatch_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
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
	// This dispatcher keeps no execute-only copies (RuntimeCopies is unset): the host's file
	// itself is bound, which the sandbox can read, so the CLI is dumpable and its answer is
	// not vouched for. (Through agora, which keeps them, it is: TestRedTeam44_ClaudeReviewerForgedResult.)
	if r.Result.Final != nil {
		t.Errorf("the record's final %+v, want none from a readable CLI", r.Result.Final)
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
	if r.State != lifecycle.DispatchFailed || !strings.Contains(r.Detail, "npm install -g @anthropic-ai/claude-code") || !strings.Contains(r.Detail, missing) {
		t.Errorf("dispatch = %s %s %q, want failed naming %s and the install command", r.State, r.Reason, r.Detail, missing)
	}
	if r.RuntimeBinary != nil || r.StartedAt != nil {
		t.Errorf("a sandbox started (%v) or a binary was recorded (%+v)", r.StartedAt, r.RuntimeBinary)
	}
}

// TestModel_ClaudeHostBinarySandboxNone: on a `sandbox: none` target there is no mount
// namespace to bind into, so the worker runs the host's file at its own path, and the record
// says so.
func TestModel_ClaudeHostBinarySandboxNone(t *testing.T) {
	e := newModelEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	host := hostClaude(e)
	m := newClaudeModel(t)
	e.capability("notes", "tools: [read_file]\n", map[string]string{"a.txt": "a"})
	e.modelSubagent("critic", "claude-code", "notes")
	e.envBundle("anthropic", map[string]string{
		"ANTHROPIC_BASE_URL": m.srv.URL, "PATH": "/usr/bin:/bin", "FAKECLAUDE_MODE": "api",
	}, map[string]string{"ANTHROPIC_API_KEY": testAnthropicKey})
	r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Target: "nobox", Input: []byte(`{"prompt":"x"}`)})
	wantFinished(t, r)
	if rb := r.RuntimeBinary; rb == nil || rb.Path != host || rb.HostPath != host {
		t.Errorf("runtime binary = %+v, want the host path %s run as is", rb, host)
	}
}

// TestModel_ClaudeHostBinaryNotShadowed is the attack of a capability (or an env bundle's
// PATH) that ships its own claude: with the host's configured, the worker runs the bound file
// by its path, so the shipped one never runs.
func TestModel_ClaudeHostBinaryNotShadowed(t *testing.T) {
	e := newModelEnv(t)
	hostClaude(e)
	m := newClaudeModel(t)
	e.capability("shadow", "tools: [read_file]\n", map[string]string{
		"bin/claude": "#!/bin/sh\necho shadow > /agora/workspace/shadow-ran\nexit 1\n",
	}, "bin/claude")
	e.modelSubagent("critic", "claude-code", "shadow")
	e.envBundle("anthropic", map[string]string{
		"ANTHROPIC_BASE_URL": m.srv.URL, "PATH": "/agora/capabilities/shadow/bin:/usr/bin:/bin", "FAKECLAUDE_MODE": "api",
	}, map[string]string{"ANTHROPIC_API_KEY": testAnthropicKey})
	r := e.run(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Input: []byte(`{"prompt":"x"}`)})
	wantFinished(t, r)
	if r.Result.Patch != nil && strings.Contains(e.blob(r.Result.Patch), "shadow-ran") {
		t.Error("the capability's claude ran instead of the host's")
	}
	if r.RuntimeBinary == nil || r.RuntimeBinary.Version != "2.1.0 (Claude Code)" {
		t.Errorf("runtime binary = %+v, want the host's fake claude", r.RuntimeBinary)
	}
}

// TestProvenance_RuntimeBinaryOnlyWhenRan: a statement names a runtime binary only for a
// dispatch that ran one, so the statements (and audited digests) of every other dispatch keep
// the bytes they had before the field existed.
func TestProvenance_RuntimeBinaryOnlyWhenRan(t *testing.T) {
	r := &dispatch.Record{ID: "d1", Subagent: "s", SubagentDigest: digest.Digest("sha256:" + strings.Repeat("a", 64)), State: lifecycle.DispatchFinished}
	without, err := dispatch.Provenance(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(without), "runtime_binary") {
		t.Errorf("a dispatch without a host CLI names one: %s", without)
	}
	r.RuntimeBinary = &wire.RuntimeBinary{Path: "/agora/runtime/bin/claude", HostPath: "/opt/claude", Version: "1 (Claude Code)", SHA256: strings.Repeat("d", 64)}
	with, err := dispatch.Provenance(r)
	if err != nil {
		t.Fatal(err)
	}
	if dispatch.ProvenanceDigest(with) == dispatch.ProvenanceDigest(without) || !strings.Contains(string(with), `"sha256":"`+strings.Repeat("d", 64)) {
		t.Errorf("the runtime binary does not change the statement: %s", with)
	}
}
