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

// TestCodexPatch_RealCLI is the end-to-end test of codex's file changes with the real Codex
// CLI (scripts/agent-clis.sh, or AGORA_TEST_CODEX) through `agora dispatch run` in
// bubblewrap, against the Responses fake: an apply_patch call (the custom tool the real API
// streams) inside the workspace lands in the patch and is audited allowed, the binary is not
// in the patch; a patch of a file outside the workspace is cut by the relay's gate before
// codex applies it (codex's own sandbox is off, so it would), audited denied, fails the
// dispatch saying so, and never reaches the host; the key is in no request body and no
// stored output.
func TestCodexPatch_RealCLI(t *testing.T) {
	codex := os.Getenv("AGORA_TEST_CODEX")
	if codex == "" {
		codex = filepath.Join("..", "..", ".cache", "npm", "node_modules", ".bin", "codex")
	}
	if _, err := os.Stat(codex); err != nil {
		t.Skip("SKIP: the real Codex CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CODEX)")
	}
	codex, _ = filepath.Abs(codex)
	bin, err := runtimebin.Resolve(t.Context(), "codex", codex)
	if err != nil {
		t.Fatalf("resolve the real codex: %v", err)
	}
	const key = "sk-proj-e2e-codex-patch-0123456789abcdef"
	escape := fmt.Sprintf("/tmp/agora-codex-escape-%d-%s.txt", os.Getpid(), filepath.Base(t.TempDir()))
	t.Cleanup(func() { os.Remove(escape) })
	good, err := responsestest.Start(key, responsestest.Turns(
		responsestest.Patch("*** Begin Patch\n*** Add File: notes/hello.md\n+hello from a codex patch\n*** End Patch\n"),
		responsestest.Say("Patched."),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bad, err := responsestest.Start(key, responsestest.Turns(
		responsestest.Patch("*** Begin Patch\n*** Add File: "+escape+"\n+escaped\n*** End Patch\n"),
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
	if err := os.MkdirAll(capDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("tools: [write_file]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.agora("capability", "register", "patcher", "--from", capDir)
	// gpt-5.5 is in codex's model catalogue: an unknown model gets no apply_patch tool.
	h.agora("subagent", "register", "editor", "--runtime", "codex", "--model", "gpt-5.5",
		"--system-prompt", "You edit files.", "--capability", "patcher")
	h.agora("env", "register", "openai-good", "--value", "OPENAI_BASE_URL="+good.URL, "--secret", "OPENAI_API_KEY=env:OPENAI_API_KEY")
	h.agora("env", "register", "openai-bad", "--value", "OPENAI_BASE_URL="+bad.URL, "--secret", "OPENAI_API_KEY=env:OPENAI_API_KEY")

	type describe struct {
		State, Reason, Detail string
		Sandbox               string `json:"sandbox"`
		Isolation             string `json:"isolation"`
	}
	run := func(env string) (string, describe) {
		c := exec.Command(agoraBin, "dispatch", "run", "--subagent", "editor", "--env", env, "--input", `{"prompt":"write notes"}`)
		c.Env = append(append(os.Environ(), h.env...), "AGORA_HOME="+h.dir)
		o, _ := c.Output() // a failed dispatch exits non-zero; its id is still the first line
		id, _, _ := strings.Cut(strings.TrimSpace(string(o)), "\n")
		var rec describe
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
	if rec.Sandbox != "bwrap" || rec.Isolation == "" {
		t.Errorf("ran with sandbox %q isolation %q, want bubblewrap", rec.Sandbox, rec.Isolation)
	}
	patch := h.agora("dispatch", "patch", id)
	if !strings.Contains(patch, "b/notes/hello.md") || !strings.Contains(patch, "+hello from a codex patch") {
		t.Errorf("the granted patch is not in the dispatch's patch:\n%s", patch)
	}
	if strings.Contains(patch, "codex b/") || strings.Contains(patch, "Binary files") || strings.Contains(patch, "GIT binary patch") || strings.Contains(patch, "config.toml") {
		t.Errorf("the patch holds the binary or codex's home:\n%s", patch)
	}

	id2, rec2 := run("openai-bad")
	if rec2.State != "failed" || !strings.Contains(rec2.Detail, escape) {
		t.Errorf("dispatch %s patching %s: %s %s %q, want failed naming the file", id2, escape, rec2.State, rec2.Reason, rec2.Detail)
	}
	if _, err := os.Lstat(escape); err == nil {
		t.Errorf("the patch outside the workspace reached the host's %s", escape)
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
	// The relay's gate reads the patch's paths and cuts one outside the workspace before
	// codex applies it: denied, since it never ran (before that, codex
	// applied it and the record said ran-outside-grant).
	for _, want := range []string{"apply_patch allowed " + id, "apply_patch denied " + id2} {
		if !strings.Contains(got, want) {
			t.Errorf("tool.call entries %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "apply_patch allowed "+id2) || strings.Contains(got, "apply_patch ran-outside-grant "+id2) {
		t.Errorf("the patch refused before it ran is on record as allowed or as having run: %q", got)
	}
	if !strings.Contains(rec2.Detail, "refused before it ran") {
		t.Errorf("dispatch %s: %q, want the patch refused before it ran", id2, rec2.Detail)
	}

	for _, srv := range []*responsestest.Server{good, bad} {
		if strings.Contains(srv.Bodies(), key) {
			t.Error("the key reached the model in a request body")
		}
		for _, r := range srv.Requests() {
			if r.Header.Get("Authorization") != "Bearer "+key {
				t.Errorf("a model request reached the API without the key the gateway adds (rejected: %q)", r.Rejected)
			}
		}
	}
	for _, d := range []string{id, id2} {
		for _, flags := range [][]string{nil, {"--stderr"}, {"--transcript"}} {
			if s := h.agora(append([]string{"dispatch", "logs", d}, flags...)...); strings.Contains(s, key) {
				t.Errorf("the stored log %v of %s holds the key", flags, d)
			}
		}
	}
}
